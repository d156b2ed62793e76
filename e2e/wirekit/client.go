package wirekit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os/exec"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/zidane-server/zidane/protocol"
)

// Client mode plays the server side for a client under test (README, "Conformance kit"). The
// client is a command started as `<command> --url ws://127.0.0.1:P/ --token T --session S`. It
// must: connect with the token, say ipc.hello, call sessions.get for S once (on MethodNotFound it
// prints {"notOffered":"sessions.get"} and keeps working), follow S's signals, reconnect after a
// cut and resume with sessions.resume (epoch and last applied $seq) so that nothing is lost or
// doubled, ignore signal kinds it does not know and fields it does not know; and print one JSON
// line per session signal it applied, {"seq":N,"kind":"…"}, in the order applied. It runs until
// the runner kills it.
//
// A client scenario file (scenarios/client/*.jsonl) has a header {"scenario", "doc",
// "notOffered": [methods the fake answers MethodNotFound]} and steps (ClientStep).

// ClientHeader is a client scenario's first line.
type ClientHeader struct {
	Scenario   string   `json:"scenario"`
	Doc        string   `json:"doc,omitempty"`
	NotOffered []string `json:"notOffered,omitempty"`
}

// ClientStep is one step of a client scenario. Op is one of:
//
//   - "waitHello": wait until the client has said ipc.hello on N connections in all.
//   - "signals": number Signals with the session's next $seq, keep them in the replay log and send
//     them to the client's current connection (if any).
//   - "log": number and keep Signals, but send nothing: only sessions.resume delivers them.
//   - "cut": drop the client's connection at once (no close frame).
//   - "waitApplied": wait until the client printed the signal with $seq Seq.
//   - "waitNotOffered": wait until the client printed {"notOffered": Method}. A scenario waits for
//     it before a cut: a call the cut drops is never resent (the client seed), so a client cut
//     before its sessions.get was answered would never learn that it is not offered.
//   - "expectApplied": the client's applied lines are exactly the logged signals of known kinds,
//     each once, in $seq order; and it printed {"notOffered": m} for each notOffered method.
//
// A signal without sessionId gets the scenario's session; its kind may be one the protocol does
// not know (the client must skip it) and it may carry unknown fields (the client must ignore them).
type ClientStep struct {
	Op      string            `json:"op"`
	N       int               `json:"n,omitempty"`
	Seq     int64             `json:"seq,omitempty"`
	Method  string            `json:"method,omitempty"`
	Signals []json.RawMessage `json:"signals,omitempty"`

	line int
}

// ClientScenario is one parsed client scenario file.
type ClientScenario struct {
	ClientHeader
	File  string
	Steps []ClientStep
}

// LoadClient parses the client scenarios under dir of fsys (default: the embedded
// scenarios/client).
func LoadClient(fsys fs.FS, dir string) ([]*ClientScenario, error) {
	var out []*ClientScenario
	err := fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path.Ext(p) != ".jsonl" {
			return err
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		sc := &ClientScenario{File: p}
		header := false
		for i, line := range strings.Split(string(b), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "//") {
				continue
			}
			dec := json.NewDecoder(strings.NewReader(line))
			dec.DisallowUnknownFields()
			if !header {
				if err := dec.Decode(&sc.ClientHeader); err != nil || sc.Scenario == "" {
					return fmt.Errorf("%s:%d: the first line must be a header {\"scenario\": name, …}: %v", p, i+1, err)
				}
				header = true
				continue
			}
			var st ClientStep
			if err := dec.Decode(&st); err != nil {
				return fmt.Errorf("%s:%d: %v", p, i+1, err)
			}
			switch st.Op {
			case "waitHello", "signals", "log", "cut", "waitApplied", "waitNotOffered", "expectApplied":
			default:
				return fmt.Errorf("%s:%d: unknown op %q", p, i+1, st.Op)
			}
			if st.Op == "waitNotOffered" && !slices.Contains(sc.NotOffered, st.Method) {
				return fmt.Errorf("%s:%d: waitNotOffered: method %q is not in the header's notOffered", p, i+1, st.Method)
			}
			st.line = i + 1
			sc.Steps = append(sc.Steps, st)
		}
		out = append(out, sc)
		return nil
	})
	return out, err
}

// ClientRunner plays client scenarios against a client command.
type ClientRunner struct {
	// Command is the client under test, run by sh -c with the flags appended.
	Command string
	// Dir is the command's working directory ("" = the runner's).
	Dir string
	// Timeout bounds each wait; default 15 s.
	Timeout time.Duration
}

// applied is one line the client printed.
type applied struct {
	Seq        int64  `json:"seq"`
	Kind       string `json:"kind"`
	NotOffered string `json:"notOffered"`
}

// fake is the fake server of one scenario run.
type fake struct {
	token, session, epoch string
	notOffered            map[string]bool

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every change
	log     []logged
	cur     *websocket.Conn
	hellos  int
	applied []applied
	lines   []string
	exited  error
	done    bool
}

type logged struct {
	seq  int64
	kind string
	sig  map[string]any
}

func (f *fake) notify() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// wait blocks until cond (called under f.mu) holds or the timeout passes.
func (f *fake) wait(ctx context.Context, d time.Duration, what string, cond func() bool) error {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		f.mu.Lock()
		ok, ch, exited := cond(), f.changed, f.exited
		f.mu.Unlock()
		if ok {
			return nil
		}
		if exited != nil {
			return fmt.Errorf("the client exited (%v) while the runner waited for %s", exited, what)
		}
		select {
		case <-ch:
		case <-deadline.C:
			return fmt.Errorf("no %s within %s", what, d)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// RunOne plays one client scenario: it starts the fake server and the client command, plays
// the steps, and kills the client.
func (r *ClientRunner) RunOne(ctx context.Context, sc *ClientScenario) (res Result) {
	start := time.Now()
	res = Result{Name: sc.Scenario, Status: Pass}
	defer func() { res.Duration = time.Since(start) }()
	timeout := r.Timeout
	if timeout == 0 {
		timeout = 15 * time.Second
	}
	f := &fake{token: "zds_conformance", session: "5e55a0e5-0000-4000-8000-00000000c0de", epoch: "e90c0000-0000-4000-8000-000000000001",
		notOffered: map[string]bool{}, changed: make(chan struct{})}
	for _, m := range sc.NotOffered {
		f.notOffered[m] = true
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		res.Status, res.Reason = Fail, err.Error()
		return
	}
	hs := &http.Server{Handler: http.HandlerFunc(f.serve), ReadHeaderTimeout: 5 * time.Second}
	go hs.Serve(ln)
	defer hs.Close()

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmdline := fmt.Sprintf("%s --url ws://%s/ --token %s --session %s", r.Command, ln.Addr(), f.token, f.session)
	cmd := exec.CommandContext(cctx, "sh", "-c", "exec "+cmdline)
	cmd.Dir = r.Dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		res.Status, res.Reason = Fail, fmt.Sprintf("start %q: %v", cmdline, err)
		return
	}
	exited := make(chan struct{})
	go func() {
		s := bufio.NewScanner(out)
		s.Buffer(make([]byte, 1<<20), 1<<20)
		for s.Scan() {
			var a applied
			line := s.Text()
			f.mu.Lock()
			f.lines = append(f.lines, line)
			if json.Unmarshal([]byte(line), &a) == nil && (a.Seq > 0 || a.NotOffered != "") {
				f.applied = append(f.applied, a)
			}
			f.notify()
			f.mu.Unlock()
		}
		werr := cmd.Wait()
		f.mu.Lock()
		if werr == nil {
			werr = errors.New("exit status 0")
		}
		f.exited = werr
		f.notify()
		f.mu.Unlock()
		close(exited)
	}()
	defer func() {
		f.mu.Lock()
		f.done = true
		f.mu.Unlock()
		cancel()
		<-exited
		if res.Status == Fail {
			res.Reason += "; client stderr: " + lastLines(stderr.String(), 5)
		}
	}()

	for i, st := range sc.Steps {
		if err := r.step(ctx, f, st, timeout); err != nil {
			res.Status = Fail
			res.Reason = fmt.Sprintf("step %d (%s, %s:%d): %v", i+1, st.Op, path.Base(sc.File), st.line, err)
			return
		}
	}
	return
}

func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, " | ")
}

func (r *ClientRunner) step(ctx context.Context, f *fake, st ClientStep, timeout time.Duration) error {
	switch st.Op {
	case "waitHello":
		return f.wait(ctx, timeout, fmt.Sprintf("ipc.hello on connection %d", st.N), func() bool { return f.hellos >= st.N })
	case "signals", "log":
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, raw := range st.Signals {
			var sig map[string]any
			if err := json.Unmarshal(raw, &sig); err != nil {
				return fmt.Errorf("signal %s: %v", raw, err)
			}
			if _, ok := sig["sessionId"]; !ok {
				sig["sessionId"] = f.session
			}
			kind, _ := sig["kind"].(string)
			l := logged{kind: kind, sig: sig}
			if sig["sessionId"] == f.session {
				l.seq = int64(len(f.log)) + 1
				f.log = append(f.log, l)
			}
			if st.Op == "signals" && f.cur != nil {
				f.sendSignal(f.cur, l)
			}
		}
		return nil
	case "cut":
		f.mu.Lock()
		c := f.cur
		f.cur = nil
		f.mu.Unlock()
		if c == nil {
			return errors.New("the client is not connected")
		}
		c.CloseNow()
		return nil
	case "waitApplied":
		return f.waitLine(ctx, timeout, fmt.Sprintf("applied line for $seq %d", st.Seq), func(a applied) bool { return a.Seq == st.Seq })
	case "waitNotOffered":
		return f.waitLine(ctx, timeout, fmt.Sprintf("{\"notOffered\":%q} line", st.Method), func(a applied) bool { return a.NotOffered == st.Method })
	case "expectApplied":
		f.mu.Lock()
		defer f.mu.Unlock()
		var want, got []string
		for _, l := range f.log {
			if protocol.LookupSignal(l.kind) != nil {
				want = append(want, fmt.Sprintf("%d:%s", l.seq, l.kind))
			}
		}
		seen := map[string]bool{}
		for _, a := range f.applied {
			if a.NotOffered != "" {
				seen[a.NotOffered] = true
				continue
			}
			got = append(got, fmt.Sprintf("%d:%s", a.Seq, a.Kind))
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			return fmt.Errorf("applied %v, want exactly %v (each known signal once, in $seq order; unknown kinds skipped)", got, want)
		}
		for m := range f.notOffered {
			if !seen[m] {
				return fmt.Errorf("the client did not print {\"notOffered\":%q} after MethodNotFound", m)
			}
		}
		return nil
	}
	return fmt.Errorf("unknown op %q", st.Op)
}

// waitLine waits until the client printed a line that match accepts; the error shows the lines so far.
func (f *fake) waitLine(ctx context.Context, d time.Duration, what string, match func(applied) bool) error {
	return f.wait(ctx, d, fmt.Sprintf("%s (lines so far: %s)", what, f.linesLocked()), func() bool {
		return slices.ContainsFunc(f.applied, match)
	})
}

func (f *fake) linesLocked() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.lines, " ")
}

// sendSignal writes one signal with its $seq (under f.mu; a failed write is a cut).
func (f *fake) sendSignal(c *websocket.Conn, l logged) {
	var seq any
	if l.seq > 0 {
		seq = l.seq
	}
	b := []byte(`{"jsonrpc":"2.0","method":"ipc.signal","params":` + string(encodeSignal(l.sig, seq)) + `}`)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = c.Write(ctx, websocket.MessageText, b)
}

// encodeSignal renders a signal with kind first (the seed's order), then its other members
// sorted, then $seq when seq is not nil.
func encodeSignal(sig map[string]any, seq any) []byte {
	keys := make([]string, 0, len(sig))
	for k := range sig {
		if k != "kind" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b bytes.Buffer
	kb, _ := protocol.Marshal(sig["kind"])
	b.WriteString(`{"kind":`)
	b.Write(kb)
	for _, k := range keys {
		kk, _ := protocol.Marshal(k)
		vv, _ := protocol.Marshal(sig[k])
		b.WriteByte(',')
		b.Write(kk)
		b.WriteByte(':')
		b.Write(vv)
	}
	if seq != nil {
		sb, _ := protocol.Marshal(seq)
		b.WriteString(`,"$seq":`)
		b.Write(sb)
	}
	b.WriteByte('}')
	return b.Bytes()
}

func (f *fake) authorized(r *http.Request) bool {
	if r.Header.Get("Authorization") == "Bearer "+f.token {
		return true
	}
	for _, p := range strings.Split(r.Header.Get("Sec-WebSocket-Protocol"), ",") {
		if strings.TrimSpace(p) == "zidane.bearer."+f.token {
			return true
		}
	}
	return false
}

// serve is the fake server's WebSocket: hello, $/ping, sessions.get, sessions.resume,
// sessions.loadEvents; MethodNotFound for the rest and for notOffered.
func (f *fake) serve(w http.ResponseWriter, r *http.Request) {
	if !f.authorized(r) {
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"zidane"}})
	if err != nil {
		return
	}
	defer c.CloseNow()
	helloed := false
	for {
		_, b, err := c.Read(context.Background())
		if err != nil {
			f.mu.Lock()
			if f.cur == c {
				f.cur = nil
			}
			f.mu.Unlock()
			return
		}
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(b, &req) != nil {
			continue
		}
		var result any
		var rpcErr *protocol.Error
		switch {
		case req.Method == "ipc.hello":
			helloed = true
			result = map[string]any{"protocolVersion": 16, "minProtocolVersion": 16, "negotiatedProtocolVersion": 16, "appVersion": "zidane-conformance",
				"pid": 1, "startedAt": 1791968973803, "buildId": "conformance", "codeVersion": "conformance", "hostId": "c0f0a4e0-0000-4000-8000-000000000000",
				"hostKind": "server", "hostName": "zidane-conformance", "signalEpoch": f.epoch,
				"methods": []string{"ipc.hello", "$/ping", "sessions.get", "sessions.resume", "sessions.loadEvents"}}
		case !helloed:
			rpcErr = &protocol.Error{Code: -32011, Message: "Handshake required: send ipc.hello first."}
		case f.notOffered[req.Method]:
			rpcErr = &protocol.Error{Code: -32601, Message: fmt.Sprintf("Unknown method %q.", req.Method)}
		case req.Method == "$/ping":
			result = map[string]any{}
		case req.Method == "sessions.get":
			result = map[string]any{"id": f.session, "title": "Conformance", "projectRoot": "/", "cwd": "/", "agentId": "build", "status": "running",
				"createdAt": 1791968973862, "updatedAt": 1791968973862, "archived": false, "hostId": "c0f0a4e0-0000-4000-8000-000000000000"}
		case req.Method == "sessions.loadEvents":
			result = map[string]any{"events": []any{}, "start": 0, "exact": true}
		case req.Method == "sessions.resume":
			var p struct {
				SessionID string `json:"sessionId"`
				Epoch     string `json:"epoch"`
				AfterSeq  int64  `json:"afterSeq"`
			}
			_ = json.Unmarshal(req.Params, &p)
			f.mu.Lock()
			switch {
			case p.Epoch != f.epoch:
				result = map[string]any{"ok": false, "reason": "epoch"}
			case p.AfterSeq > int64(len(f.log)) || p.AfterSeq < 0:
				rpcErr = &protocol.Error{Code: -32602, Message: fmt.Sprintf("params/afterSeq: %d is past the session's last $seq %d in this epoch; reload the transcript with sessions.loadEvents.", p.AfterSeq, len(f.log))}
			default:
				sigs := []any{}
				if p.SessionID == f.session {
					for _, l := range f.log[p.AfterSeq:] {
						sigs = append(sigs, map[string]any{"seq": l.seq, "signal": json.RawMessage(encodeSignal(l.sig, nil))})
					}
				}
				result = map[string]any{"ok": true, "signals": sigs}
			}
			f.mu.Unlock()
		default:
			rpcErr = &protocol.Error{Code: -32601, Message: fmt.Sprintf("Unknown method %q.", req.Method)}
		}
		if req.ID == nil {
			continue // a notification: never answered
		}
		msg := map[string]any{"jsonrpc": "2.0", "id": req.ID}
		if rpcErr != nil {
			msg["error"] = rpcErr
		} else {
			msg["result"] = result
		}
		out, _ := protocol.Marshal(msg)
		f.mu.Lock()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		werr := c.Write(ctx, websocket.MessageText, out)
		cancel()
		if req.Method == "ipc.hello" && werr == nil && !f.done {
			f.cur = c
			f.hellos++
			f.notify()
		}
		f.mu.Unlock()
	}
}

// Run plays every client scenario whose name matches filter (nil: all), one client process each.
func (r *ClientRunner) Run(ctx context.Context, scs []*ClientScenario, filter *regexp.Regexp) []Result {
	var out []Result
	for _, sc := range scs {
		if filter != nil && !filter.MatchString(sc.Scenario) {
			continue
		}
		out = append(out, r.RunOne(ctx, sc))
	}
	return out
}

// ClientScenarios returns the embedded client-mode scenarios (scenarios/client).
func ClientScenarios() ([]*ClientScenario, error) { return LoadClient(Scenarios, "scenarios/client") }
