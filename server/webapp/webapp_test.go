package webapp

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const indexHTML = `<!doctype html><html><head><script type="module" src="/assets/index-AbCd1234.js"></script></head><body><div id="root"></div></body></html>`

var appJS = strings.Repeat("console.log('zidane app');\n", 200)

func built() fstest.MapFS {
	return fstest.MapFS{
		"index.html":                {Data: []byte(indexHTML)},
		"assets/index-AbCd1234.js":  {Data: []byte(appJS)},
		"assets/index-Zz9_-xY0.css": {Data: []byte("body{color:red}")},
		"favicon.svg":               {Data: []byte("<svg xmlns='http://www.w3.org/2000/svg'/>")},
		"manifest.json":             {Data: []byte(`{"name":"zidane"}`)},
		".placeholder":              {Data: []byte("placeholder")},
	}
}

func get(t *testing.T, h http.Handler, method, path string, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestServingRules (issue 24 item 3): index.html for / and client routes, the build's files as
// they are, 404 (never the app) for reserved paths, unknown .json and missing assets, and the
// cache and security headers on every answer.
func TestServingRules(t *testing.T) {
	h := New(Options{FS: built(), Reserved: []string{"/api/chat", "/custom/sse/"}})
	require.True(t, h.Built())
	for _, p := range []string{"/", "/index.html", "/s/7f6b2bc1-27b2-4052-a2b7-de05d2538178", "/usage", "/settings/"} {
		w := get(t, h, http.MethodGet, p)
		assert.Equal(t, http.StatusOK, w.Code, p)
		assert.Equal(t, indexHTML, w.Body.String(), "%s gets index.html", p)
		assert.Equal(t, "no-cache", w.Header().Get("Cache-Control"), p)
		assert.Equal(t, "text/html; charset=utf-8", w.Header().Get("Content-Type"), p)
	}
	w := get(t, h, http.MethodGet, "/assets/index-AbCd1234.js")
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, appJS, w.Body.String())
	assert.Equal(t, ImmutableCache, w.Header().Get("Cache-Control"), "a hashed asset is cached for good")
	assert.Contains(t, w.Header().Get("Content-Type"), "javascript")
	assert.Equal(t, ImmutableCache, get(t, h, http.MethodGet, "/assets/index-Zz9_-xY0.css").Header().Get("Cache-Control"))
	assert.Equal(t, "no-cache", get(t, h, http.MethodGet, "/favicon.svg").Header().Get("Cache-Control"), "an unhashed file is revalidated")
	assert.Equal(t, `{"name":"zidane"}`, get(t, h, http.MethodGet, "/manifest.json").Body.String(), "a .json file of the build is served")

	for _, p := range []string{"/zidane/x", "/zidane", "/zidane/media/", "/x.json", "/api/chat", "/api/chat/s/1/stream",
		"/custom/sse", "/custom/sse/x", "/assets/index-gone1234.js", "/missing.png", "/.placeholder", "/assets/../index.html", "//index.html"} {
		w := get(t, h, http.MethodGet, p)
		assert.Equal(t, http.StatusNotFound, w.Code, p)
		assert.NotContains(t, w.Body.String(), "<html", "%s never gets the app", p)
		assert.Equal(t, "nosniff", w.Header().Get("X-Content-Type-Options"), p)
	}
	assert.Equal(t, http.StatusOK, get(t, h, http.MethodGet, "/api/chatter").Code, "only the base path and below it are reserved")

	for _, p := range []string{"/", "/s/1", "/usage"} {
		for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodOptions} {
			w = get(t, h, m, p)
			assert.Equal(t, http.StatusMethodNotAllowed, w.Code, "%s %s", m, p)
			assert.Equal(t, "GET, HEAD", w.Header().Get("Allow"), "%s %s", m, p)
			assert.Equal(t, CSP, w.Header().Get("Content-Security-Policy"), "%s %s", m, p)
		}
	}
	for _, p := range []string{"/zidane/x", "/x.json", "/api/chat"} {
		assert.Equal(t, http.StatusNotFound, get(t, h, http.MethodPost, p).Code, "POST %s: no route of the app, 404", p)
	}
	w = get(t, h, http.MethodHead, "/s/1")
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Empty(t, w.Body.String())
}

// TestSecurityHeaders: the strict CSP and its companions on the app, its assets and its 404s.
func TestSecurityHeaders(t *testing.T) {
	h := New(Options{FS: built()})
	for _, p := range []string{"/", "/assets/index-AbCd1234.js", "/zidane/x"} {
		hd := get(t, h, http.MethodGet, p).Header()
		csp := hd.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'self'", "script-src 'self';", "connect-src 'self'", "frame-ancestors 'none'",
			"style-src 'self' 'unsafe-inline'", "img-src 'self' data: blob:", "object-src 'none'", "base-uri 'none'"} {
			assert.Contains(t, csp, want, p)
		}
		assert.NotContains(t, strings.SplitN(strings.SplitN(csp, "script-src", 2)[1], ";", 2)[0], "unsafe", "no inline or eval script")
		// Images only from the page's origin and inline data (tool results' media, attachments):
		// nothing remote, so an image in model output loads nothing.
		assert.Equal(t, " 'self' data: blob:", strings.SplitN(strings.SplitN(csp, "img-src", 2)[1], ";", 2)[0], p)
		assert.Equal(t, "nosniff", hd.Get("X-Content-Type-Options"), p)
		assert.Equal(t, "no-referrer", hd.Get("Referrer-Policy"), p)
		assert.Equal(t, "DENY", hd.Get("X-Frame-Options"), p)
	}
}

// TestGzipAndETag: text assets go gzip-compressed to a client that accepts it (and whole to one
// that does not), with a strong ETag that answers 304.
func TestGzipAndETag(t *testing.T) {
	h := New(Options{FS: built()})
	w := get(t, h, http.MethodGet, "/assets/index-AbCd1234.js", "Accept-Encoding", "gzip, br")
	require.Equal(t, "gzip", w.Header().Get("Content-Encoding"))
	assert.Contains(t, w.Header().Get("Vary"), "Accept-Encoding")
	assert.Less(t, w.Body.Len(), len(appJS)/4)
	zr, err := gzip.NewReader(bytes.NewReader(w.Body.Bytes()))
	require.NoError(t, err)
	b, err := io.ReadAll(zr)
	require.NoError(t, err)
	assert.Equal(t, appJS, string(b))
	etag := w.Header().Get("ETag")
	require.NotEmpty(t, etag)
	assert.Equal(t, http.StatusNotModified, get(t, h, http.MethodGet, "/assets/index-AbCd1234.js", "Accept-Encoding", "gzip", "If-None-Match", etag).Code)
	plain := get(t, h, http.MethodGet, "/assets/index-AbCd1234.js", "Accept-Encoding", "gzip;q=0")
	assert.Empty(t, plain.Header().Get("Content-Encoding"))
	assert.Equal(t, appJS, plain.Body.String())
	assert.NotEqual(t, etag, plain.Header().Get("ETag"), "the two encodings have their own tags")
}

// TestNotBuiltPage: without a build (only the committed placeholder, as after a plain go build)
// the app's routes get a page that says how to build it, and assets are still 404.
func TestNotBuiltPage(t *testing.T) {
	h := New(Options{FS: fstest.MapFS{".placeholder": {Data: []byte("x")}}})
	assert.False(t, h.Built())
	for _, p := range []string{"/", "/s/1"} {
		w := get(t, h, http.MethodGet, p)
		assert.Equal(t, http.StatusOK, w.Code)
		assert.Contains(t, w.Body.String(), "make build", p)
		assert.Contains(t, w.Body.String(), "npm run build:app", p)
		assert.NotContains(t, w.Body.String(), "<script", "the page needs no script (the CSP allows none inline)")
		assert.NotEmpty(t, w.Header().Get("Content-Security-Policy"))
	}
	assert.Equal(t, http.StatusNotFound, get(t, h, http.MethodGet, "/assets/index-AbCd1234.js").Code)
}

// TestEmbeddedBuildCompiles: the embedded dist (the placeholder at least) loads; the placeholder
// itself is never served.
func TestEmbeddedBuildCompiles(t *testing.T) {
	h := New(Options{})
	w := get(t, h, http.MethodGet, "/")
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, http.StatusNotFound, get(t, h, http.MethodGet, "/.placeholder").Code)
}

// TestRangesAreBounded (break-it): a Range header listing many ranges gets the first range only,
// never a multipart answer that multiplies a small request into megabytes of parts; one range is
// served as asked.
func TestRangesAreBounded(t *testing.T) {
	h := New(Options{FS: built()})
	var ranges []string
	for i := 0; i < 2000; i += 2 {
		ranges = append(ranges, fmt.Sprintf("%d-%d", i, i))
	}
	w := get(t, h, http.MethodGet, "/assets/index-AbCd1234.js", "Range", "bytes="+strings.Join(ranges, ","))
	assert.Equal(t, http.StatusPartialContent, w.Code)
	assert.NotContains(t, w.Header().Get("Content-Type"), "multipart", "no multipart answer")
	assert.Equal(t, "bytes 0-0/"+fmt.Sprint(len(appJS)), w.Header().Get("Content-Range"))
	assert.Equal(t, appJS[:1], w.Body.String())
	assert.Equal(t, "DENY", w.Header().Get("X-Frame-Options"))

	w = get(t, h, http.MethodGet, "/assets/index-AbCd1234.js", "Range", "bytes=10-19")
	assert.Equal(t, http.StatusPartialContent, w.Code)
	assert.Equal(t, appJS[10:20], w.Body.String())
	w = get(t, h, http.MethodGet, "/assets/index-AbCd1234.js", "Range", "bytes=5-1, 0-3")
	assert.Equal(t, http.StatusRequestedRangeNotSatisfiable, w.Code, "an unsatisfiable first range is still refused")
}
