package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"sync"

	"github.com/coder/websocket"
)

// The baseline: a raw coder/websocket server doing the least each figure needs, run as a
// subprocess of this test binary (ZIDANE_BENCH_RAW=1) so that its CPU time and memory are measured
// the way the server's are, in a process of its own.
//
//	/echo        writes every text frame back (round-trip baseline)
//	/bcast       joins the broadcaster: one writer goroutine per connection with a queue, like the
//	             server's; POST /bcast/send {"frames":[...],"reps":n} queues the frames n times on
//	             every joined connection, in order (fan-out baseline)
//	/blob?n=N    writes one text frame of N bytes, then reads until the peer closes (resume baseline)
//	/idle        reads until the peer closes: one goroutine per connection (idle baseline)
//	GET /stats   {"goroutines":n}
type rawServer struct {
	mu    sync.Mutex
	bcast map[*rawPeer]struct{}
}

type rawPeer struct {
	ws *websocket.Conn
	q  chan []byte
}

func rawMain() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr().String())
	rs := &rawServer{bcast: map[*rawPeer]struct{}{}}
	_ = http.Serve(ln, rs)
}

func (rs *rawServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/stats":
		_ = json.NewEncoder(w).Encode(map[string]int{"goroutines": runtime.NumGoroutine()})
		return
	case "/bcast/send":
		var req struct {
			Frames []string `json:"frames"`
			Reps   int      `json:"reps"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		frames := make([][]byte, len(req.Frames))
		for i, f := range req.Frames {
			frames[i] = []byte(f)
		}
		rs.mu.Lock()
		peers := make([]*rawPeer, 0, len(rs.bcast))
		for p := range rs.bcast {
			peers = append(peers, p)
		}
		rs.mu.Unlock()
		for i := 0; i < req.Reps; i++ {
			for _, f := range frames {
				for _, p := range peers {
					p.q <- f
				}
			}
		}
		w.WriteHeader(204)
		return
	}
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"zidane"}})
	if err != nil {
		return
	}
	ws.SetReadLimit(64 << 20)
	ctx := context.Background()
	switch r.URL.Path {
	case "/echo":
		for {
			typ, b, err := ws.Read(ctx)
			if err != nil {
				return
			}
			if err := ws.Write(ctx, typ, b); err != nil {
				return
			}
		}
	case "/bcast":
		p := &rawPeer{ws: ws, q: make(chan []byte, 8192)}
		rs.mu.Lock()
		rs.bcast[p] = struct{}{}
		rs.mu.Unlock()
		go func() {
			for f := range p.q {
				if ws.Write(ctx, websocket.MessageText, f) != nil {
					return
				}
			}
		}()
		for {
			if _, _, err := ws.Read(ctx); err != nil {
				rs.mu.Lock()
				delete(rs.bcast, p)
				rs.mu.Unlock()
				return
			}
		}
	case "/blob":
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		b := make([]byte, n)
		for i := range b {
			b[i] = 'x'
		}
		if ws.Write(ctx, websocket.MessageText, b) != nil {
			return
		}
		for {
			if _, _, err := ws.Read(ctx); err != nil {
				return
			}
		}
	case "/idle":
		for {
			if _, _, err := ws.Read(ctx); err != nil {
				return
			}
		}
	default:
		ws.Close(websocket.StatusPolicyViolation, "unknown path")
	}
}
