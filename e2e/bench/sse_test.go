package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// sseWatch opens the SSE stream of a session (issue 26) and counts its records like watch
// counts a WebSocket's frames: one delivery per record, an end per run:end.
func sseWatch(b *testing.B, s *server, sid string) (*watcher, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+s.addr+"/api/chat/sessions/"+sid+"/stream", nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.chat)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("stream: %v %v", err, resp)
	}
	w := &watcher{ends: make(chan struct{}, 1<<16)}
	go func() {
		defer resp.Body.Close()
		br := bufio.NewReaderSize(resp.Body, 1<<16)
		for {
			line, err := br.ReadSlice('\n')
			if err != nil {
				w.err.Store(err)
				close(w.ends)
				return
			}
			if bytes.HasPrefix(line, []byte("event: ")) {
				w.frames.Add(1)
				if bytes.Equal(line, []byte("event: run:end\n")) {
					w.ends <- struct{}{}
				}
			}
		}
	}()
	return w, cancel
}

// BenchmarkFigSSE: the SSE protocol beside the WebSocket on one server: prompt → first streamed
// piece (send POSTed, the piece read off the stream, against chat.send and the piece over one
// WebSocket), and signals delivered per second to 100 SSE watchers of one session against 100
// WebSocket watchers of it.
func BenchmarkFigSSE(b *testing.B) {
	s := startServer(b)
	drv := s.dial(b)
	sid := newSession(b, drv)
	drvW := watch(drv, runEndMarker, false)
	body := []byte(`{"prompt":"Say hello."}`)
	post := func(b *testing.B) {
		req, _ := http.NewRequest("POST", "http://"+s.addr+"/api/chat/sessions/"+sid+"/send", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+s.chat)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("send: %v %v", err, resp)
		}
		io.Copy(io.Discard, resp.Body) // read to the end, so the connection is kept for the next
		resp.Body.Close()
	}
	b.Run("first/sse", func(b *testing.B) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+s.addr+"/api/chat/sessions/"+sid+"/stream", nil)
		req.Header.Set("Authorization", "Bearer "+s.chat)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		// The stream is read as it arrives, beside the POST (whose answer waits for the prompt's
		// commit, as chat.send's does): the time is the first piece's arrival.
		pieces, ends := make(chan time.Time, 1<<10), make(chan struct{}, 1<<10)
		go func() {
			br := bufio.NewReaderSize(resp.Body, 1<<16)
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					close(ends)
					return
				}
				if strings.HasPrefix(line, "data: ") && strings.Contains(line, `"streaming":true`) {
					pieces <- time.Now()
				}
				if line == "event: run:end\n" {
					ends <- struct{}{}
				}
			}
		}()
		var first []time.Duration
		for b.Loop() {
			for len(pieces) > 0 {
				<-pieces
			}
			t0 := time.Now()
			post(b)
			first = append(first, (<-pieces).Sub(t0))
			if _, ok := <-ends; !ok {
				b.Fatal("the stream ended")
			}
			drvW.waitEnd(b)
		}
		reportLatency(b, "first-", first)
	})
	b.Run("first/ws", func(b *testing.B) {
		c := s.dial(b)
		defer c.close()
		req := fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"chat.send","params":{"sessionId":%q,"prompt":"Say hello."}}`, sid)
		var first []time.Duration
		for b.Loop() {
			t0 := time.Now()
			c.write(b, []byte(req))
			got := false
			for {
				f := c.read(b)
				if !got && bytes.Contains(f, []byte(`"streaming":true`)) {
					first = append(first, time.Since(t0))
					got = true
				}
				if bytes.Contains(f, []byte(runEndMarker)) {
					break
				}
			}
			drvW.waitEnd(b)
		}
		reportLatency(b, "first-", first)
	})
	n := 100
	if smoke {
		n = 5
	}
	fanout := func(b *testing.B, ws []*watcher) {
		before := deliveries(ws)
		t0 := time.Now()
		for b.Loop() {
			sendPrompt(b, drv, sid)
			drvW.waitEnd(b)
			for _, w := range ws {
				w.waitEnd(b)
			}
		}
		reportDeliveries(b, deliveries(ws)-before, time.Since(t0), -1)
	}
	b.Run(fmt.Sprintf("%dwatchers/ws", n), func(b *testing.B) {
		ws := make([]*watcher, n)
		for i := range ws {
			ws[i] = watch(s.dial(b), runEndMarker, false)
			defer ws[i].c.close()
		}
		fanout(b, ws)
	})
	b.Run(fmt.Sprintf("%dwatchers/sse", n), func(b *testing.B) {
		ws := make([]*watcher, n)
		for i := range ws {
			w, stop := sseWatch(b, s, sid)
			ws[i] = w
			defer stop()
		}
		fanout(b, ws)
	})
}
