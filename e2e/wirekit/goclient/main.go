// Command goclient is the Go client (client/) as a client under test of the conformance kit's
// client mode (e2e/wirekit, README "Conformance kit"): `goclient --url ws://… --token T
// --session S` follows session S with client.Client's resume, asks sessions.get once (printing
// {"notOffered":"sessions.get"} on MethodNotFound) and prints {"seq":N,"kind":"…"} for each
// signal of S it applies, skipping kinds this build does not know. It runs until killed.
// --no-resume makes it a broken client (no Follow, so nothing is resumed after a cut).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/zidane-server/zidane/client"
	"github.com/zidane-server/zidane/protocol"
)

func main() {
	url := flag.String("url", "", "server WebSocket address")
	token := flag.String("token", "", "bearer token")
	session := flag.String("session", "", "the session to follow")
	noResume := flag.Bool("no-resume", false, "do not follow the session (no sessions.resume after a reconnect): a broken client, for the kit's own test that client mode fails it")
	flag.Parse()
	if *url == "" || *token == "" || *session == "" {
		fmt.Fprintln(os.Stderr, "goclient: --url, --token and --session are required")
		os.Exit(2)
	}
	opts := client.Options{Token: *token, AppVersion: "zidane-conformance-goclient",
		Backoff: client.Backoff{Min: 50 * time.Millisecond, Max: 500 * time.Millisecond}}
	if !*noResume {
		// Followed before the first connection: Follow after Open could read the first
		// signals unfollowed and then replay them again from $seq 0.
		opts.Follow = map[string]int64{*session: 0}
	}
	c := client.Open(*url, opts)
	var mu sync.Mutex
	print := func(v any) {
		b, _ := protocol.Marshal(v)
		mu.Lock()
		defer mu.Unlock()
		os.Stdout.Write(append(b, '\n'))
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.WaitConnected(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "goclient:", err)
			return
		}
		err := c.Call(ctx, protocol.MethodSessionsGet, map[string]any{"sessionId": *session}, nil)
		var rpcErr *protocol.Error
		if errors.As(err, &rpcErr) && rpcErr.Code == -32601 {
			print(map[string]any{"notOffered": protocol.MethodSessionsGet}) // not offered: carry on without it
		} else if err != nil {
			fmt.Fprintln(os.Stderr, "goclient: sessions.get:", err)
		}
	}()
	for ev := range c.Signals() {
		if ev.SessionID != *session || ev.Seq == 0 || ev.Signal == nil {
			continue
		}
		if _, unknown := ev.Signal.(*protocol.UnknownSignal); unknown {
			continue // a kind this build does not know: ignored
		}
		print(map[string]any{"seq": ev.Seq, "kind": ev.Signal.SignalKind()})
	}
	fmt.Fprintln(os.Stderr, "goclient: stopped:", c.Err())
	os.Exit(1)
}
