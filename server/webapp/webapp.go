// Package webapp serves the web app (issue 24, "Served by the server"; protocol seed "With the web
// app on, every other plain GET serves the app"): the production build of sdk-ts/app, written by
// `cd sdk-ts && npm run build:app` into dist/ and embedded in the binary. Without a build (a plain
// `go build` on a fresh clone: dist holds only its committed placeholder) it serves a page saying
// how to build the app.
//
// Rules of Handler, for a GET or HEAD that no other route of the server took:
//   - a file of the build is served as it is; hashed assets (/assets/<name>-<hash>.<ext>) with
//     `Cache-Control: public, max-age=31536000, immutable`, every other file (index.html first
//     of all) with `no-cache`, each with a strong ETag; text files gzip-compressed when the client
//     accepts it (compressed once, at the first request);
//   - a client route (a path whose last segment has no dot, e.g. /s/7f6b…) gets index.html;
//   - a reserved path (/zidane/…, the SSE base path, Options.Reserved) or a /….json path that is no
//     file, or a path with a dot segment or a hidden name, answers 404: never the app;
//   - other methods answer 405 (with Allow) on the paths the app serves, 404 on the others;
//   - a request for several byte ranges gets the first one only (no multipart answers).
//
// Every answer carries the strict Content-Security-Policy of CSP, X-Content-Type-Options: nosniff,
// Referrer-Policy: no-referrer and X-Frame-Options: DENY.
package webapp

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/zidane-server/zidane/protocol"
)

//go:embed all:dist
var embedded embed.FS

// CSP is the Content-Security-Policy of every answer: scripts, styles, fonts, frames' sources and
// connections only from the server's own origin (connect-src 'self' covers same-origin ws: and
// wss: in CSP Level 3 browsers, so the app's WebSocket to wss://<host>/ is allowed), no inline
// script, no plugins, no <base> and never inside a frame. Inline styles are allowed because
// xterm.js sets element styles; images may also be data: and blob: URLs (pasted attachments,
// media previews).
const CSP = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
	"img-src 'self' data: blob:; media-src 'self' blob:; font-src 'self' data:; connect-src 'self'; " +
	"worker-src 'self' blob:; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// ImmutableCache is the Cache-Control of hashed assets: their name changes with their content.
const ImmutableCache = "public, max-age=31536000, immutable"

// DefaultSSEBase is the SSE handler's default base path (protocol.SSEDefaultBasePath, the client
// seed's createSseHost example).
const DefaultSSEBase = protocol.SSEDefaultBasePath

// Options configure a Handler.
type Options struct {
	// Reserved are path prefixes that never get the app: a path equal to one or below it (prefix
	// + "/…") answers 404 when no other route took it. /zidane is always reserved; nil adds
	// DefaultSSEBase.
	Reserved []string
	// FS replaces the embedded build (tests): the build's files at its root.
	FS fs.FS
}

// Handler serves the web app. The zero value is not usable; call New.
type Handler struct {
	reserved []string
	fsys     fs.FS
	once     sync.Once
	files    map[string]*file // by path without the leading slash
	index    *file
	built    bool
}

type file struct {
	name     string // base name, for the content type
	body     []byte
	gz       []byte // gzip of body, when smaller; nil otherwise
	etag     string
	cache    string
	hashedAs bool
}

// New returns the handler of the embedded build (or of opts.FS). Files are read at the first
// request, so a server with the app off pays nothing.
func New(opts Options) *Handler {
	res := []string{"/zidane"}
	if opts.Reserved == nil {
		res = append(res, DefaultSSEBase)
	}
	for _, p := range opts.Reserved {
		if p = strings.TrimRight(p, "/"); p != "" {
			res = append(res, p)
		}
	}
	fsys := opts.FS
	if fsys == nil {
		sub, err := fs.Sub(embedded, "dist")
		if err != nil {
			panic(err) // dist is embedded at compile time
		}
		fsys = sub
	}
	return &Handler{reserved: res, fsys: fsys}
}

// Built reports whether the build is present (else the handler serves the "how to build" page).
func (h *Handler) Built() bool {
	h.once.Do(h.load)
	return h.built
}

// hashedAsset matches Vite's hashed asset names: assets/<name>-<hash>.<ext> with a hash of 8 or
// more base64url characters.
var hashedAsset = regexp.MustCompile(`^assets/(?:.*/)?[^/]+-[A-Za-z0-9_-]{8,}\.[A-Za-z0-9]+$`)

func (h *Handler) load() {
	h.files = map[string]*file{}
	_ = fs.WalkDir(h.fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || hidden(p) {
			return nil
		}
		b, err := fs.ReadFile(h.fsys, p)
		if err != nil {
			return nil
		}
		sum := sha256.Sum256(b)
		f := &file{name: path.Base(p), body: b, etag: `"` + base64.RawURLEncoding.EncodeToString(sum[:18]) + `"`, cache: "no-cache"}
		if hashedAsset.MatchString(p) {
			f.cache, f.hashedAs = ImmutableCache, true
		}
		if compressible(f.name) && len(b) > 512 {
			var buf bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
			zw.Write(b)
			zw.Close()
			if buf.Len() < len(b) {
				f.gz = buf.Bytes()
			}
		}
		h.files[p] = f
		return nil
	})
	if f := h.files["index.html"]; f != nil {
		h.index, h.built = f, true
		return
	}
	h.index = &file{name: "index.html", body: []byte(notBuiltPage), etag: `"not-built"`, cache: "no-cache"}
}

// hidden reports whether a path has a segment starting with a dot (the placeholder, or a
// .git-like name): never served.
func hidden(p string) bool {
	for _, seg := range strings.Split(p, "/") {
		if strings.HasPrefix(seg, ".") {
			return true
		}
	}
	return false
}

func compressible(name string) bool {
	switch path.Ext(name) {
	case ".js", ".mjs", ".css", ".html", ".svg", ".json", ".txt", ".map", ".wasm", ".xml", ".webmanifest":
		return true
	}
	return false
}

// SetSecurityHeaders sets the headers every answer of the app carries.
func SetSecurityHeaders(hd http.Header) {
	hd.Set("Content-Security-Policy", CSP)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
}

// ServeHTTP implements the rules of the package comment.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.once.Do(h.load)
	SetSecurityHeaders(w.Header())
	p := r.URL.Path
	if c := path.Clean(p); !strings.HasPrefix(p, "/") || (c != p && c+"/" != p) {
		text(w, http.StatusNotFound, "Not found.")
		return
	}
	rel := strings.TrimPrefix(p, "/")
	if rel == "" || rel == "index.html" {
		h.answer(w, r, h.index)
		return
	}
	if hidden(rel) {
		text(w, http.StatusNotFound, "Not found.")
		return
	}
	if f := h.files[rel]; f != nil {
		h.answer(w, r, f)
		return
	}
	for _, res := range h.reserved {
		if p == res || strings.HasPrefix(p, res+"/") {
			text(w, http.StatusNotFound, "Not found: "+p+" is no route of this server (GET /protocol.json lists the protocol).")
			return
		}
	}
	if strings.Contains(path.Base(rel), ".") {
		// A file that is not there (a stale asset, /x.json): 404, never index.html, whose HTML
		// would be taken for the script or data asked for.
		text(w, http.StatusNotFound, "Not found: "+p)
		return
	}
	h.answer(w, r, h.index) // a client route
}

// answer serves f to a GET or HEAD; another method on a path the app serves is 405 with Allow
// (a path it does not serve stays 404, whatever the method).
func (h *Handler) answer(w http.ResponseWriter, r *http.Request, f *file) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		text(w, http.StatusMethodNotAllowed, "Method Not Allowed: the web app answers GET and HEAD.")
		return
	}
	h.serve(w, r, f)
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request, f *file) {
	hd := w.Header()
	ct := mime.TypeByExtension(path.Ext(f.name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	hd.Set("Content-Type", ct)
	hd.Set("Cache-Control", f.cache)
	body, etag := f.body, f.etag
	if f.gz != nil {
		hd.Add("Vary", "Accept-Encoding")
		if acceptsGzip(r) {
			body, etag = f.gz, strings.TrimSuffix(f.etag, `"`)+`-gz"`
			hd.Set("Content-Encoding", "gzip")
		}
	}
	hd.Set("ETag", etag)
	FirstRangeOnly(r)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
}

// FirstRangeOnly keeps only the first range of a multi-range request (the app's files and
// /zidane/media both serve through it). net/http answers every
// range of one header as a part of a multipart body, each part with its own headers: one request
// of a million one-byte ranges ("bytes=0-0,2-2,…", within the 1 MiB header limit) made the
// server build a 12 MiB answer from a 400 KiB script, at a second of CPU each. Browsers ask for
// one range (media seeking, resumed downloads); a client asking for several gets the first, which
// a 206 answer may do (RFC 9110 §14.2: a server may ignore or coalesce ranges).
func FirstRangeOnly(r *http.Request) {
	rh := r.Header.Get("Range")
	if first, _, multi := strings.Cut(rh, ","); multi {
		r.Header.Set("Range", strings.TrimSpace(first))
	}
}

func acceptsGzip(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept-Encoding") {
		for _, part := range strings.Split(v, ",") {
			enc, q, _ := strings.Cut(strings.TrimSpace(part), ";")
			if strings.EqualFold(strings.TrimSpace(enc), "gzip") && strings.ReplaceAll(strings.TrimSpace(q), " ", "") != "q=0" {
				return true
			}
		}
	}
	return false
}

func text(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write([]byte(msg))
}

// notBuiltPage is served for the app's routes when the binary was built without the app.
const notBuiltPage = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>zidane-server: the web app is not built</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:42rem;margin:3rem auto;padding:0 1rem}code,pre{background:#8881;padding:.1em .3em;border-radius:4px}</style>
</head>
<body>
<main>
<h1>The web app is not built into this server</h1>
<p>This zidane-server binary was compiled without its web app (a plain <code>go build</code>). The server itself runs: clients connect a WebSocket to this address.</p>
<p>To build the app into the binary (needs Node.js 20 and npm), from the repository:</p>
<pre>make build</pre>
<p>or, by hand:</p>
<pre>scripts/bootstrap.sh --ts
(cd sdk-ts &amp;&amp; npm run build:app)
go build -o bin/ ./cmd/zidane-server</pre>
<p>then start the server again and reload this page. Start it with <code>--web-app=false</code> to serve no page at all.</p>
</main>
</body>
</html>
`
