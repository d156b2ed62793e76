// Command zidane is the headless client: it sends one prompt and prints the answer.
//
//	ZIDANE_URL=ws://127.0.0.1:4380 ZIDANE_TOKEN=zds_… zidane -c "Say hello." [--json] [--session ID]
//	zidane -c "Say hello."    # a local server: URL and token from <data-dir>/daemon.json
//
// Without --json it prints the assistant's text; with --json it prints one JSON object per line
// for each signal of the run. It exits 0 when the run ends ok, 1 otherwise, 2 on bad usage.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/zidane-server/zidane/client"
	"github.com/zidane-server/zidane/protocol"
)

func main() {
	os.Exit(run())
}

func run() int {
	prompt := flag.String("c", "", "the prompt to send")
	asJSON := flag.Bool("json", false, "print every signal of the run as one JSON object per line")
	sessionID := flag.String("session", "", "send to this session instead of creating one")
	timeout := flag.Duration("timeout", 10*time.Minute, "give up after this long")
	dataDir := flag.String("data-dir", client.DefaultDataDir(), "where a local server's daemon.json is, used when ZIDANE_URL is not set")
	flag.Parse()
	if *prompt == "" {
		fmt.Fprintln(os.Stderr, "zidane: -c \"prompt\" is required")
		return 2
	}
	url := os.Getenv("ZIDANE_URL")
	token := os.Getenv("ZIDANE_TOKEN")
	if url == "" {
		// A local server: its daemon.json names the URL and a chat token.
		d, err := client.ReadDaemonFile(*dataDir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "zidane:", err)
			return 2
		}
		url = d.URL
		if token == "" {
			token = d.Token
		}
	}
	if token == "" {
		fmt.Fprintln(os.Stderr, "zidane: set ZIDANE_TOKEN (mint one with: zidane-server token create --name cli --scope chat)")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	c, err := client.Dial(ctx, url, client.Options{Token: token, AppVersion: "zidane-cli"})
	if err != nil {
		fmt.Fprintln(os.Stderr, "zidane:", err)
		return 1
	}
	defer c.Close()
	sid := *sessionID
	if sid == "" {
		s, err := c.SessionsCreate(ctx, &protocol.SessionsCreateParams{})
		if err != nil {
			fmt.Fprintln(os.Stderr, "zidane: create session:", err)
			return 1
		}
		sid = s.ID
		fmt.Fprintf(os.Stderr, "session %s (continue it with --session %s)\n", sid, sid)
	}
	res, err := c.ChatSend(ctx, &protocol.ChatSendParams{SessionID: sid, Prompt: *prompt})
	if err != nil {
		fmt.Fprintln(os.Stderr, "zidane: send:", err)
		return 1
	}
	out := json.NewEncoder(os.Stdout)
	lastWasText := false
	for {
		select {
		case ev, ok := <-c.Signals():
			if !ok {
				fmt.Fprintln(os.Stderr, "zidane: connection lost before the run ended:", c.Err())
				return 1
			}
			if *asJSON {
				out.Encode(ev.Raw)
			}
			switch s := ev.Signal.(type) {
			case *protocol.EventSignal:
				if s.SessionID != sid || *asJSON {
					continue
				}
				if m, ok := s.Event.(*protocol.MarkdownEvent); ok {
					fmt.Print(m.Text)
					lastWasText = true
				}
			case *protocol.TurnEndSignal:
				if s.SessionID == sid && lastWasText && !*asJSON {
					fmt.Println()
					lastWasText = false
				}
			case *protocol.RunEndSignal:
				if s.RunID != res.RunID {
					continue
				}
				if !s.OK {
					msg := "the run failed"
					if s.Error != nil {
						msg = *s.Error
					}
					fmt.Fprintln(os.Stderr, "zidane:", msg)
					return 1
				}
				return 0
			}
		case <-ctx.Done():
			fmt.Fprintln(os.Stderr, "zidane: gave up:", ctx.Err())
			return 1
		}
	}
}
