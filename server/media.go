package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/webapp"
	"github.com/zidane-server/zidane/server/workspace/gitx"
)

// GET /zidane/media (seed "files"): an <img> or <video> cannot send a token, so a client registers
// a random ticket on its connection (files.mediaTicket) and puts it in the address. The ticket is
// good while that connection is open. Only image, video and audio files are served, typed by
// their name and checked against their content, never sniffed into another type, sandboxed when
// opened as a document, with byte ranges and conditional requests (net/http's ServeContent), at
// most maxMediaBytes per response.

// maxMediaBytes is the most one media response carries: a longer range is cut short, a larger
// whole file is refused with 413.
const maxMediaBytes = 64 << 20

// mediaTickets maps tickets to the connections that registered them.
type mediaTickets struct {
	mu      sync.Mutex
	tickets map[string]*conn
	byConn  map[*conn][]string
}

func newMediaTickets() *mediaTickets {
	return &mediaTickets{tickets: map[string]*conn{}, byConn: map[*conn][]string{}}
}

// Tickets that are evidently not random are refused (files.mediaTicket's schema asks for a random
// ticket; a guessable one lets anyone who can reach the server read the workspace's media while the
// connection is open). weakTicket's checks are cheap and refuse what a person or a test types —
// "aaaa…", "Ab3_-Ab3_-…", "abcdefgh…" — but essentially never a ticket drawn from crypto-random
// bytes. For a random 32-character ticket (the shortest allowed):
//
//   - fewer than minTicketDistinct (8) distinct characters: over the 64 URL-safe symbols
//     (base64url, what the TS SDK sends) P = Σ_{k<8} C(64,k)·S(32,k)·k!/64^32 ≈ 1.0e-22 (S: Stirling
//     numbers of the second kind); over 16 symbols (hex, e.g. a UUID without its dashes)
//     ≈ 3.5e-8. A threshold of 12 would refuse 1.7% of random 32-digit hex tickets, which v16
//     clients may send, so it is 8;
//   - a repetition of a block of at most half its length: P = Σ_{p≤16} m^-(32-p) < 2·m^-16,
//     1.1e-19 for m = 16 symbols, 2.5e-29 for 64;
//   - at least 3/4 of its neighbouring characters one byte value apart (a run such as "abcd" or
//     "9876"): each pair is with probability at most 2/m, so P ≤ C(31,24)·(2/m)^24, below 1e-15
//     for m ≥ 16.
//
// Together a random base64url ticket is refused with probability about 1e-22, a random hex one
// about 3.5e-8; longer tickets less often.
const minTicketDistinct = 8

// weakTicket says why a ticket is evidently not random, or "" when it may be.
func weakTicket(t string) string {
	n := len(t)
	var seen [256]bool
	distinct := 0
	for i := 0; i < n; i++ {
		if !seen[t[i]] {
			seen[t[i]] = true
			distinct++
		}
	}
	if distinct < minTicketDistinct {
		return fmt.Sprintf("it has only %d distinct characters", distinct)
	}
	for p := 1; p <= n/2; p++ {
		if t[p:] == t[:n-p] {
			return fmt.Sprintf("it repeats a block of %d characters", p)
		}
	}
	steps := 0
	for i := 1; i < n; i++ {
		if d := int(t[i]) - int(t[i-1]); d == 1 || d == -1 {
			steps++
		}
	}
	if 4*steps >= 3*(n-1) {
		return "it runs through consecutive characters"
	}
	return ""
}

// register adds a ticket for c; a connection holds at most maxMediaTickets (the oldest goes).
func (m *mediaTickets) register(c *conn, ticket string) error {
	if why := weakTicket(ticket); why != "" {
		return protocol.NewInvalidParamsError("params/ticket: the ticket is not random ("+why+"); make it from crypto-random bytes, e.g. 24 random bytes base64url-encoded (32 characters).",
			&protocol.InvalidParamsErrorData{Pointer: "/ticket"})
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if other, ok := m.tickets[ticket]; ok {
		if other == c {
			return nil
		}
		return protocol.NewHandlerFailedError("That ticket is taken; pick another random one.")
	}
	ts := m.byConn[c]
	if len(ts) >= maxMediaTickets {
		delete(m.tickets, ts[0])
		ts = ts[1:]
	}
	m.tickets[ticket] = c
	m.byConn[c] = append(ts, ticket)
	return nil
}

// drop forgets every ticket of a connection that closed.
func (m *mediaTickets) drop(c *conn) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range m.byConn[c] {
		delete(m.tickets, t)
	}
	delete(m.byConn, c)
}

// valid reports whether ticket belongs to an open connection.
func (m *mediaTickets) valid(ticket string) bool {
	if len(ticket) < 32 {
		return false
	}
	m.mu.Lock()
	c, ok := m.tickets[ticket]
	m.mu.Unlock()
	return ok && !c.isClosing()
}

// mediaType decides the type a media file is served as: the type its name says, when that is an
// image, video or audio type and its first bytes do not say otherwise (an HTML page named x.png is
// refused, never served as a page). It returns "" when the file is not served.
func mediaType(name string, head []byte) string {
	t := mime.TypeByExtension(strings.ToLower(path.Ext(name)))
	if i := strings.IndexByte(t, ';'); i >= 0 {
		t = t[:i]
	}
	if !strings.HasPrefix(t, "image/") && !strings.HasPrefix(t, "video/") && !strings.HasPrefix(t, "audio/") {
		return ""
	}
	sniffed := http.DetectContentType(head)
	if i := strings.IndexByte(sniffed, ';'); i >= 0 {
		sniffed = sniffed[:i]
	}
	switch {
	case t == "image/svg+xml":
		// SVG is XML text: a content sniffer sees text/xml or text/plain. It is served as an image
		// and, opened as a document, runs no script (Content-Security-Policy: sandbox).
		if sniffed == "text/xml" || sniffed == "text/plain" {
			return t
		}
		return ""
	case strings.HasPrefix(sniffed, "image/"), strings.HasPrefix(sniffed, "video/"), strings.HasPrefix(sniffed, "audio/"),
		sniffed == "application/ogg", sniffed == "application/octet-stream":
		// Content that looks like media, or binary a sniffer cannot name (many containers): the
		// name decides the type.
		return t
	}
	return "" // text, HTML, PDF, archives… behind a media name
}

// serveMedia answers GET /zidane/media?ticket=…&cwd=…&path=…[&side=old|new].
func (s *Server) serveMedia(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		plainText(w, http.StatusMethodNotAllowed, "Method Not Allowed")
		return
	}
	q := r.URL.Query()
	if !s.media.valid(q.Get("ticket")) {
		plainText(w, http.StatusUnauthorized, "Unauthorized: register the ticket with files.mediaTicket on an open connection")
		return
	}
	cwd, name, side := q.Get("cwd"), q.Get("path"), q.Get("side")
	notFound := func() { plainText(w, http.StatusNotFound, "Not Found") }
	if name == "" || strings.ContainsRune(cwd+name, 0) || (side != "" && side != "old" && side != "new") {
		notFound()
		return
	}
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "sandbox; default-src 'none'; img-src 'self' data:; media-src 'self'; style-src 'unsafe-inline'")
	h.Set("Cache-Control", "private, no-cache")
	h.Set("Cross-Origin-Resource-Policy", "same-site")
	if side == "old" {
		s.serveMediaSide(w, r, cwd, name, gitx.SideOld)
		return
	}
	if side == "new" {
		// The work tree's side is the file itself, streamed like a plain request; the repository
		// must still lie inside the roots.
		rp, err := s.ws.Resolve(cwd, name)
		if err != nil {
			notFound()
			return
		}
		if _, err := s.gitRepo(r.Context(), filepath.Dir(rp.Abs())); err != nil {
			notFound()
			return
		}
	}
	f, rp, err := s.ws.Open(cwd, name)
	if err != nil {
		notFound()
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		notFound()
		return
	}
	head := make([]byte, 512)
	n, _ := io.ReadFull(f, head)
	typ := mediaType(rp.Rel, head[:n])
	if typ == "" {
		plainText(w, http.StatusUnsupportedMediaType, "Unsupported Media Type: only image, video and audio files are served")
		return
	}
	if !limitRange(w, r, fi.Size()) {
		return
	}
	h.Set("Content-Type", typ)
	h.Set("Content-Disposition", "inline")
	http.ServeContent(w, r, "", fi.ModTime(), f)
}

// maxSideReads bounds the committed-side reads held in memory at once (each at most
// maxMediaBytes); further requests wait for a slot or their client to go away.
const maxSideReads = 4

var sideReads = make(chan struct{}, maxSideReads)

// serveMediaSide serves the committed side of a file's git change (side=old) from memory; the
// repository must lie in the roots.
func (s *Server) serveMediaSide(w http.ResponseWriter, r *http.Request, cwd, name string, side gitx.Side) {
	notFound := func() { plainText(w, http.StatusNotFound, "Not Found") }
	select {
	case sideReads <- struct{}{}:
		defer func() { <-sideReads }()
	case <-r.Context().Done():
		return
	}
	rp, err := s.ws.Resolve(cwd, name)
	if err != nil {
		notFound()
		return
	}
	repo, err := s.gitRepo(r.Context(), filepath.Dir(rp.Abs()))
	if err != nil {
		notFound()
		return
	}
	rel, err := filepath.Rel(repo.Top, rp.Abs())
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		notFound()
		return
	}
	b, err := s.git.ReadSide(r.Context(), repo, filepath.ToSlash(rel), side, maxMediaBytes)
	switch {
	case errors.Is(err, gitx.ErrTooLarge):
		plainText(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("Request Entity Too Large: that side is over %d bytes", maxMediaBytes))
		return
	case err != nil:
		notFound()
		return
	}
	typ := mediaType(rel, b[:min(len(b), 512)])
	if typ == "" {
		plainText(w, http.StatusUnsupportedMediaType, "Unsupported Media Type: only image, video and audio files are served")
		return
	}
	w.Header().Set("Content-Type", typ)
	w.Header().Set("Content-Disposition", "inline")
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
}

// limitRange enforces maxMediaBytes: a whole file over it is refused with 413; a range request
// keeps only its first range, cut to maxMediaBytes. It reports whether to go on serving.
func limitRange(w http.ResponseWriter, r *http.Request, size int64) bool {
	webapp.FirstRangeOnly(r)
	rh := r.Header.Get("Range")
	if size > maxMediaBytes {
		// An If-Range that no longer matches would make ServeContent send the whole file.
		r.Header.Del("If-Range")
	}
	if rh == "" {
		if size > maxMediaBytes {
			plainText(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("Request Entity Too Large: the file is %d bytes; ask for byte ranges of at most %d", size, maxMediaBytes))
			return false
		}
		return true
	}
	spec, ok := strings.CutPrefix(rh, "bytes=")
	if !ok {
		return true // ServeContent answers a malformed header
	}
	startS, endS, ok := strings.Cut(strings.TrimSpace(spec), "-")
	if !ok {
		return true
	}
	startS, endS = strings.TrimSpace(startS), strings.TrimSpace(endS) // as net/http parses it
	var start, end int64
	switch {
	case startS == "": // the last N bytes
		nb, err := strconv.ParseInt(endS, 10, 64)
		if err != nil {
			return true
		}
		if nb > maxMediaBytes {
			nb = maxMediaBytes
		}
		r.Header.Set("Range", "bytes=-"+strconv.FormatInt(nb, 10))
		return true
	default:
		var err error
		if start, err = strconv.ParseInt(startS, 10, 64); err != nil {
			return true
		}
		end = size - 1
		if endS != "" {
			if end, err = strconv.ParseInt(endS, 10, 64); err != nil {
				return true
			}
		}
	}
	if end >= size {
		end = size - 1
	}
	if end-start+1 > maxMediaBytes {
		end = start + maxMediaBytes - 1
	}
	r.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", start, end))
	return true
}
