package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/store/storetest"
)

// scrape reads one metric (the sum over its label sets) from GET /metrics.
func scrape(t *testing.T, s *serverProc, name string) float64 {
	t.Helper()
	if s.adminTok == "" {
		s.adminTok = s.mintToken("metrics-scraper", "admin")
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+s.addr+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+s.adminTok)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, name+" ") || strings.HasPrefix(line, name+"{") {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			sum += v
		}
	}
	return sum
}

// soakCase is one kind of frame a soak client sends, with the answer it must get.
type soakCase struct {
	name  string
	bad   bool
	frame func(id int) string
	want  func(f frame) error // nil want: a notification, no answer expected
}

func wantResult(f frame) error {
	if f.Error != nil || len(f.Result) == 0 {
		return fmt.Errorf("want a result, got %s", f.Raw)
	}
	return nil
}

func wantCode(code int) func(frame) error {
	return func(f frame) error {
		if f.Error == nil || f.Error.Code != code {
			return fmt.Errorf("want error %d, got %s", code, f.Raw)
		}
		return nil
	}
}

var soakCases = []soakCase{
	{"ping", false, func(id int) string { return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"$/ping","params":{}}`, id) }, wantResult},
	{"info", false, func(id int) string { return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"daemon.info"}`, id) }, wantResult},
	{"list", false, func(id int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"sessions.list","params":{}}`, id)
	}, wantResult},
	{"notification", false, func(int) string { return `{"jsonrpc":"2.0","method":"$/ping","params":{}}` }, nil},
	{"parse error", true, func(id int) string { return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":`, id) }, wantCode(-32700)},
	{"trailing data", true, func(id int) string { return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"$/ping"} x`, id) }, wantCode(-32700)},
	{"wrong version", true, func(id int) string { return fmt.Sprintf(`{"jsonrpc":"1.0","id":%d,"method":"$/ping"}`, id) }, wantCode(-32600)},
	{"unknown method", true, func(id int) string { return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"no.such"}`, id) }, wantCode(-32601)},
	{"bad params", true, func(id int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"sessions.get","params":{"sessionId":7}}`, id)
	}, wantCode(-32602)},
	{"params array", true, func(id int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"sessions.list","params":[1]}`, id)
	}, wantCode(-32602)},
	{"forbidden", true, func(id int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tokens.list","params":{}}`, id)
	}, wantCode(-32013)},
	{"unknown session", true, func(id int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"sessions.get","params":{"sessionId":"nope"}}`, id)
	}, wantCode(-32014)},
	{"deep nesting", true, func(id int) string {
		return `{"jsonrpc":"2.0","id":1,"method":"$/ping","params":{"a":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}}`
	}, wantCode(-32600)},
	{"bad notification", true, func(int) string { return `{"jsonrpc":"2.0","method":"no.such","params":"x"}` }, nil},
}

// TestSoak: many connections send a mix of valid and invalid frames for a while (loopback only,
// bounded). Every request gets exactly its own answer, nobody is disturbed by another client, and
// afterwards the server's goroutines and heap return near their start. Off by default: run it
// with `make soak` (ZIDANE_SOAK=1; ZIDANE_SOAK_CONNS, ZIDANE_SOAK_DURATION override 500 and 60s).
func TestSoak(t *testing.T) {
	if os.Getenv("ZIDANE_SOAK") == "" {
		t.Skip("set ZIDANE_SOAK=1 (make soak) to run the soak test")
	}
	conns, _ := strconv.Atoi(os.Getenv("ZIDANE_SOAK_CONNS"))
	if conns <= 0 {
		conns = 500
	}
	dur, _ := time.ParseDuration(os.Getenv("ZIDANE_SOAK_DURATION"))
	if dur <= 0 {
		dur = 60 * time.Second
	}
	s := startServer(t, serverOpts{dbURL: storetest.URL(t)})
	tok := s.mintToken("soak", "chat")
	baseG := scrape(t, s, "go_goroutines")
	baseHeap := scrape(t, s, "go_memstats_heap_inuse_bytes")

	var sent, bad, answeredErr, closedBinary, runs, failures atomic.Int64
	var failMu sync.Mutex
	var failMsgs []string
	fail := func(format string, args ...any) {
		failures.Add(1)
		failMu.Lock()
		if len(failMsgs) < 10 {
			failMsgs = append(failMsgs, fmt.Sprintf(format, args...))
		}
		failMu.Unlock()
	}
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	var wg sync.WaitGroup
	for i := 0; i < conns; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 42))
			for ctx.Err() == nil {
				soakClient(ctx, s, tok, i, rng, &sent, &bad, &answeredErr, &closedBinary, &runs, fail)
			}
		}(i)
		if i%50 == 49 {
			time.Sleep(50 * time.Millisecond) // ramp up
		}
	}
	wg.Wait()
	code, body := health(t, s)
	require.Equal(t, 200, code, body)

	// Let the server finish closing, then compare with the start.
	var g, heap float64
	deadline := time.Now().Add(20 * time.Second)
	for {
		g = scrape(t, s, "go_goroutines")
		heap = scrape(t, s, "go_memstats_heap_inuse_bytes")
		if g <= baseG+10 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("soak: %d connections for %s: %d frames sent, %d bad inputs, %d error answers, %d binary-frame closes (1003), %d chat runs, %d failures",
		conns, dur, sent.Load(), bad.Load(), answeredErr.Load(), closedBinary.Load(), runs.Load(), failures.Load())
	t.Logf("soak: server goroutines %.0f → %.0f; heap in use %.1f MiB → %.1f MiB; requests counted %.0f; server still healthy",
		baseG, g, baseHeap/(1<<20), heap/(1<<20), scrape(t, s, "zidane_requests_total"))
	assert.Zero(t, failures.Load(), "failures: %v", failMsgs)
	assert.LessOrEqual(t, g, baseG+10, "goroutines return near their start")
	assert.Less(t, heap, baseHeap*2+32<<20, "heap returns near its start")
}

// soakClient runs one connection until ctx ends or the connection is closed on purpose.
func soakClient(ctx context.Context, s *serverProc, tok string, i int, rng *rand.Rand,
	sent, bad, answeredErr, closedBinary, runs *atomic.Int64, fail func(string, ...any)) {
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	ws, _, err := websocket.Dial(dctx, s.url(), dialOpts(tok))
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			fail("conn %d: dial: %v", i, err)
		}
		return
	}
	defer ws.CloseNow()
	ws.SetReadLimit(32 << 20)
	read := func() (frame, error) {
		for {
			rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_, b, err := ws.Read(rctx)
			cancel()
			if err != nil {
				return frame{}, err
			}
			var f frame
			if err := json.Unmarshal(b, &f); err != nil {
				return frame{}, fmt.Errorf("undecodable frame %q", b)
			}
			f.Raw = b
			if f.Method == "ipc.signal" {
				continue // other clients' runs reach everyone
			}
			return f, nil
		}
	}
	write := func(s string) error {
		wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		sent.Add(1)
		return ws.Write(wctx, websocket.MessageText, []byte(s))
	}
	if err := write(`{"jsonrpc":"2.0","id":0,"method":"ipc.hello","params":{"protocolVersion":16}}`); err != nil {
		fail("conn %d: hello: %v", i, err)
		return
	}
	if f, err := read(); err != nil || wantResult(f) != nil {
		fail("conn %d: hello answer: %v %s", i, err, f.Raw)
		return
	}
	id := 1
	var session string
	for ctx.Err() == nil {
		id++
		switch r := rng.IntN(1000); {
		case r < 2: // now and then a binary frame: the server closes this connection with 1003
			bad.Add(1)
			sent.Add(1)
			wctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			ws.Write(wctx, websocket.MessageBinary, []byte(`{}`))
			cancel()
			_, err := read()
			if websocket.CloseStatus(err) != websocket.StatusUnsupportedData {
				fail("conn %d: binary frame: want close 1003, got %v", i, err)
			}
			closedBinary.Add(1)
			return
		case r < 20 && i%50 == 0: // a few clients run chats (their signals reach every client)
			if session == "" {
				if err := write(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"sessions.create","params":{}}`, id)); err != nil {
					return
				}
				f, err := read()
				if err != nil || wantResult(f) != nil {
					fail("conn %d: sessions.create: %v %s", i, err, f.Raw)
					return
				}
				var x struct{ ID string }
				json.Unmarshal(f.Result, &x)
				session = x.ID
				continue
			}
			if err := write(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"chat.send","params":{"sessionId":%q,"prompt":"soak"}}`, id, session)); err != nil {
				return
			}
			f, err := read()
			if err != nil || wantResult(f) != nil {
				fail("conn %d: chat.send: %v %s", i, err, f.Raw)
				return
			}
			runs.Add(1)
		default:
			c := soakCases[rng.IntN(len(soakCases))]
			if c.bad {
				bad.Add(1)
			}
			if err := write(c.frame(id)); err != nil {
				if ctx.Err() == nil {
					fail("conn %d: write: %v", i, err)
				}
				return
			}
			if c.want == nil {
				continue
			}
			f, err := read()
			if err != nil {
				if ctx.Err() == nil {
					fail("conn %d: %s: %v", i, c.name, err)
				}
				return
			}
			if err := c.want(f); err != nil {
				fail("conn %d: %s: %v", i, c.name, err)
				return
			}
			if f.Error != nil {
				answeredErr.Add(1)
				// Errors with a readable id must echo it (the deep-nesting case answers id null).
				if c.name != "deep nesting" && c.name != "parse error" && c.name != "trailing data" && string(f.ID) != strconv.Itoa(id) {
					fail("conn %d: %s: answer for id %s, want %d", i, c.name, f.ID, id)
				}
			} else if string(f.ID) != strconv.Itoa(id) {
				fail("conn %d: %s: answer for id %s, want %d", i, c.name, f.ID, id)
			}
		}
		time.Sleep(time.Duration(100+rng.IntN(200)) * time.Millisecond)
	}
	ws.Close(websocket.StatusNormalClosure, "")
}
