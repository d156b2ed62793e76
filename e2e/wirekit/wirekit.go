// Package wirekit is the protocol conformance kit (issue 29 item 3): scenarios written as wire
// transcripts, one JSON Lines file per scenario, and the runner that plays them against any
// server speaking the protocol of shared/seeds/000_… (JSON-RPC 2.0 over one WebSocket). The
// scenarios under scenarios/ are embedded (Scenarios); cmd/zidane-conformance runs them, and
// client mode (client.go) plays the server side for a client under test.
//
// A scenario file's first line is its header {"scenario": name, "doc": …, "requires": [methods]};
// each further line is one step (Step). Expected frames are patterns (match.go): objects match
// when they hold at least the expected keys, placeholders such as "<uuid>" stand for values that
// vary, and "${name}" stands for a value captured from an earlier frame.
package wirekit

import (
	"bufio"
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/zidane-server/zidane/protocol"
)

// Scenarios holds the kit's scenario files: scenarios/server/*.jsonl (hand-written, the seed's
// rules), scenarios/examples/*.jsonl (generated from schema/examples) and scenarios/client/*.jsonl
// (client mode).
//
//go:embed scenarios
var Scenarios embed.FS

// Header is a scenario file's first line.
type Header struct {
	// Scenario is the scenario's name, as the runner prints it.
	Scenario string `json:"scenario"`
	// Doc says what the scenario checks and which seed rule it implements.
	Doc string `json:"doc,omitempty"`
	// Requires lists methods the server must offer (ipc.hello's methods); without one of them
	// the scenario is skipped.
	Requires []string `json:"requires,omitempty"`
}

// Step is one line of a scenario after the header. Op is one of:
//
//   - "hello": send ipc.hello (protocolVersion 16) and expect its result; Capture applies to it.
//   - "send": send Frame (after ${…} substitution) as one text frame.
//   - "sendRaw": send Text verbatim (for parse errors and batches).
//   - "expect": the next response frame (anything but a server notification) on Conn must
//     match Frame; Capture takes values from it.
//   - "signals": read ipc.signal notifications of Session until one of kind Until (or Count of
//     them); their $seq must start at FirstSeq (when given) and rise by exactly 1. Capture names
//     "first" or "last" (their $seq) or "kinds".
//   - "expectReplay": the next response must be {ok: true, signals} whose seq run from From
//     without a gap through at least Through, each signal without $seq and with kind first.
//   - "close": close Conn; its next step dials a fresh connection.
//
// Conn names the connection (default "a"); a connection is dialled on its first step.
type Step struct {
	Op       string            `json:"op"`
	Conn     string            `json:"conn,omitempty"`
	Frame    json.RawMessage   `json:"frame,omitempty"`
	Text     string            `json:"text,omitempty"`
	Capture  map[string]string `json:"capture,omitempty"`
	Session  string            `json:"session,omitempty"`
	Until    string            `json:"until,omitempty"`
	Count    int               `json:"count,omitempty"`
	FirstSeq json.RawMessage   `json:"firstSeq,omitempty"`
	From     json.RawMessage   `json:"from,omitempty"`
	Through  json.RawMessage   `json:"through,omitempty"`

	line int
}

// Scenario is one parsed scenario file.
type Scenario struct {
	Header
	// File is the file's path within its file system.
	File  string
	Steps []Step
}

// Parse reads a scenario file (JSON Lines; blank lines and lines starting with // are skipped).
func Parse(file string, data []byte) (*Scenario, error) {
	sc := &Scenario{File: file}
	s := bufio.NewScanner(bytes.NewReader(data))
	s.Buffer(make([]byte, 1<<20), 1<<20)
	n, header := 0, false
	for s.Scan() {
		n++
		line := bytes.TrimSpace(s.Bytes())
		if len(line) == 0 || bytes.HasPrefix(line, []byte("//")) {
			continue
		}
		if !header {
			dec := json.NewDecoder(bytes.NewReader(line))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&sc.Header); err != nil || sc.Scenario == "" {
				return nil, fmt.Errorf("%s:%d: the first line must be a header {\"scenario\": name, …}: %v", file, n, err)
			}
			header = true
			continue
		}
		var st Step
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&st); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", file, n, err)
		}
		switch st.Op {
		case "hello", "send", "sendRaw", "expect", "signals", "expectReplay", "close":
		default:
			return nil, fmt.Errorf("%s:%d: unknown op %q", file, n, st.Op)
		}
		st.line = n
		if st.Conn == "" {
			st.Conn = "a"
		}
		sc.Steps = append(sc.Steps, st)
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", file, err)
	}
	if !header {
		return nil, fmt.Errorf("%s: empty scenario", file)
	}
	return sc, nil
}

// Load parses every *.jsonl file under dir of fsys, sorted by path.
func Load(fsys fs.FS, dir string) ([]*Scenario, error) {
	var out []*Scenario
	err := fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || path.Ext(p) != ".jsonl" {
			return nil
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		sc, err := Parse(p, b)
		if err != nil {
			return err
		}
		out = append(out, sc)
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].File < out[j].File })
	return out, err
}

// ServerScenarios returns the embedded scenarios for server mode (scenarios/server and
// scenarios/examples).
func ServerScenarios() ([]*Scenario, error) {
	a, err := Load(Scenarios, "scenarios/server")
	if err != nil {
		return nil, err
	}
	b, err := Load(Scenarios, "scenarios/examples")
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return append(a, b...), nil
}

// Status is a scenario's outcome.
type Status string

// The outcomes a Result carries.
const (
	Pass Status = "PASS"
	Fail Status = "FAIL"
	Skip Status = "SKIP"
)

// Result is one scenario's outcome; Reason names the step (file line) and the frame that
// differed for a FAIL, the missing method for a SKIP.
type Result struct {
	Name     string        `json:"name"`
	Status   Status        `json:"status"`
	Reason   string        `json:"reason,omitempty"`
	Duration time.Duration `json:"durationNs"`
}

// String is the runner's line: "PASS name", "FAIL name: reason".
func (r Result) String() string {
	if r.Reason == "" {
		return fmt.Sprintf("%s %s", r.Status, r.Name)
	}
	return fmt.Sprintf("%s %s: %s", r.Status, r.Name, r.Reason)
}

// Runner plays scenarios against a server.
type Runner struct {
	// URL is the server's WebSocket address (ws://host:port/).
	URL string
	// Token is the bearer token, sent as the subprotocol zidane.bearer.<token>.
	Token string
	// Timeout bounds each wait for a frame; default 10 s.
	Timeout time.Duration
	// ProtocolVersion is the version the hello step asks for; default 16.
	ProtocolVersion int
}

// Run plays every scenario whose name matches filter (nil: all) and returns their results in
// order.
func (r *Runner) Run(ctx context.Context, scs []*Scenario, filter *regexp.Regexp) []Result {
	var out []Result
	for _, sc := range scs {
		if filter != nil && !filter.MatchString(sc.Scenario) {
			continue
		}
		out = append(out, r.RunOne(ctx, sc))
	}
	return out
}

// errSkip marks a scenario the server cannot run (a required method it does not offer).
type errSkip struct{ reason string }

func (e errSkip) Error() string { return e.reason }

// RunOne plays one scenario on fresh connections.
func (r *Runner) RunOne(ctx context.Context, sc *Scenario) Result {
	start := time.Now()
	p := &play{r: r, sc: sc, vars: map[string]any{}, conns: map[string]*wconn{}}
	defer p.closeAll()
	err := p.run(ctx)
	res := Result{Name: sc.Scenario, Status: Pass, Duration: time.Since(start)}
	var sk errSkip
	switch {
	case errors.As(err, &sk):
		res.Status, res.Reason = Skip, sk.reason
	case err != nil:
		res.Status, res.Reason = Fail, err.Error()
	}
	return res
}

// frame is one received message: its text and its decoded value.
type frame struct {
	raw []byte
	v   any
}

type wconn struct {
	ws        *websocket.Conn
	in        chan frame
	readErr   error
	responses []frame // answers read while waiting for signals
	signals   []frame // notifications read while waiting for answers
	nframes   int
}

type play struct {
	r     *Runner
	sc    *Scenario
	vars  map[string]any
	conns map[string]*wconn
}

func (p *play) timeout() time.Duration {
	if p.r.Timeout > 0 {
		return p.r.Timeout
	}
	return 10 * time.Second
}

func (p *play) closeAll() {
	for _, c := range p.conns {
		c.ws.CloseNow()
	}
}

// Dial opens a WebSocket to url with token as the seed's subprotocol pair.
func Dial(ctx context.Context, url, token string) (*websocket.Conn, error) {
	ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{
		Subprotocols: []string{"zidane", "zidane.bearer." + token},
		HTTPHeader:   http.Header{},
	})
	if err != nil {
		return nil, err
	}
	ws.SetReadLimit(64 << 20)
	return ws, nil
}

func (p *play) conn(ctx context.Context, name string) (*wconn, error) {
	if c, ok := p.conns[name]; ok {
		return c, nil
	}
	dctx, cancel := context.WithTimeout(ctx, p.timeout())
	defer cancel()
	ws, err := Dial(dctx, p.r.URL, p.r.Token)
	if err != nil {
		return nil, fmt.Errorf("dial %s (conn %s): %v", p.r.URL, name, err)
	}
	c := &wconn{ws: ws, in: make(chan frame, 4096)}
	go func() {
		defer close(c.in)
		for {
			_, b, err := ws.Read(context.Background())
			if err != nil {
				c.readErr = err
				return
			}
			var v any
			if err := json.Unmarshal(b, &v); err != nil {
				v = nil
			}
			c.in <- frame{raw: b, v: v}
		}
	}()
	p.conns[name] = c
	return c, nil
}

// isNotification reports whether f is a server-to-client notification (has a method).
func isNotification(f frame) bool {
	m, ok := f.v.(map[string]any)
	if !ok {
		return false
	}
	_, has := m["method"]
	return has
}

// nextFrame reads the next frame of c, or fails after the timeout.
func (p *play) nextFrame(ctx context.Context, c *wconn, waiting string) (frame, error) {
	t := time.NewTimer(p.timeout())
	defer t.Stop()
	select {
	case f, ok := <-c.in:
		if !ok {
			return frame{}, fmt.Errorf("connection closed while waiting for %s: %v", waiting, c.readErr)
		}
		c.nframes++
		return f, nil
	case <-t.C:
		return frame{}, fmt.Errorf("no frame within %s while waiting for %s", p.timeout(), waiting)
	case <-ctx.Done():
		return frame{}, ctx.Err()
	}
}

func (p *play) nextResponse(ctx context.Context, c *wconn, waiting string) (frame, error) {
	if len(c.responses) > 0 {
		f := c.responses[0]
		c.responses = c.responses[1:]
		return f, nil
	}
	for {
		f, err := p.nextFrame(ctx, c, waiting)
		if err != nil {
			return f, err
		}
		if isNotification(f) {
			c.signals = append(c.signals, f)
			continue
		}
		return f, nil
	}
}

func (p *play) nextSignal(ctx context.Context, c *wconn, waiting string) (frame, error) {
	if len(c.signals) > 0 {
		f := c.signals[0]
		c.signals = c.signals[1:]
		return f, nil
	}
	for {
		f, err := p.nextFrame(ctx, c, waiting)
		if err != nil {
			return f, err
		}
		if !isNotification(f) {
			c.responses = append(c.responses, f)
			continue
		}
		return f, nil
	}
}

func (p *play) value(raw json.RawMessage) (any, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return substitute(v, p.vars)
}

func (p *play) intValue(raw json.RawMessage, what string) (int64, bool, error) {
	if len(raw) == 0 {
		return 0, false, nil
	}
	v, err := p.value(raw)
	if err != nil {
		return 0, false, err
	}
	if s, ok := v.(string); ok { // "${x}+1" inside a string is already resolved to a number
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("%s: %q is not an integer", what, s)
		}
		return n, true, nil
	}
	n, ok := v.(float64)
	if !ok {
		return 0, false, fmt.Errorf("%s: %v is not an integer", what, v)
	}
	return int64(n), true, nil
}

func (p *play) run(ctx context.Context) error {
	for i, st := range p.sc.Steps {
		if err := p.step(ctx, st); err != nil {
			var sk errSkip
			if errors.As(err, &sk) {
				return err
			}
			return fmt.Errorf("step %d (%s, %s:%d, conn %s): %w", i+1, st.Op, path.Base(p.sc.File), st.line, st.Conn, err)
		}
	}
	// Every answer must have been expected: one more is an answer to nothing the scenario
	// asked, such as an answered notification.
	names := make([]string, 0, len(p.conns))
	for n := range p.conns {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		c := p.conns[n]
		if len(c.responses) > 0 {
			return fmt.Errorf("end of scenario (conn %s): unexpected response frame %s (an answer to no request the scenario sent)", n, cut(c.responses[0].raw))
		}
	drain:
		for {
			select {
			case f, ok := <-c.in:
				if !ok {
					break drain
				}
				if !isNotification(f) {
					return fmt.Errorf("end of scenario (conn %s): unexpected response frame %s (an answer to no request the scenario sent)", n, cut(f.raw))
				}
			default:
				break drain
			}
		}
	}
	return nil
}

func cut(b []byte) string {
	if len(b) > 400 {
		return string(b[:400]) + "…"
	}
	return string(b)
}

func (p *play) send(ctx context.Context, c *wconn, text []byte) error {
	wctx, cancel := context.WithTimeout(ctx, p.timeout())
	defer cancel()
	return c.ws.Write(wctx, websocket.MessageText, text)
}

func (p *play) capture(f frame, caps map[string]string) error {
	for name, ptr := range caps {
		v, ok := pointer(f.v, ptr)
		if !ok {
			return fmt.Errorf("capture %s: %s is not in frame %s", name, ptr, cut(f.raw))
		}
		p.vars[name] = v
	}
	return nil
}

func (p *play) step(ctx context.Context, st Step) error {
	if st.Op == "close" {
		if c, ok := p.conns[st.Conn]; ok {
			c.ws.Close(websocket.StatusNormalClosure, "conformance: cut")
			delete(p.conns, st.Conn)
		}
		return nil
	}
	c, err := p.conn(ctx, st.Conn)
	if err != nil {
		return err
	}
	switch st.Op {
	case "hello":
		ver := p.r.ProtocolVersion
		if ver == 0 {
			ver = 16
		}
		id := "hello-" + st.Conn
		msg := fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"ipc.hello","params":{"protocolVersion":%d,"minProtocolVersion":%d,"appVersion":"zidane-conformance","pid":1}}`, id, ver, ver)
		if err := p.send(ctx, c, []byte(msg)); err != nil {
			return err
		}
		f, err := p.nextResponse(ctx, c, "the ipc.hello answer")
		if err != nil {
			return err
		}
		want := map[string]any{"jsonrpc": "2.0", "id": id, "result": map[string]any{"signalEpoch": PString, "protocolVersion": PInt}}
		if d := match(want, f.v, ""); d != "" {
			return fmt.Errorf("frame %s: %s", cut(f.raw), d)
		}
		if len(p.sc.Requires) > 0 {
			offered := map[string]bool{}
			if ms, ok := pointer(f.v, "/result/methods"); ok {
				if list, ok := ms.([]any); ok {
					for _, m := range list {
						if s, ok := m.(string); ok {
							offered[s] = true
						}
					}
					for _, r := range p.sc.Requires {
						if !offered[r] {
							return errSkip{fmt.Sprintf("the server does not offer %s", r)}
						}
					}
				}
			}
		}
		return p.capture(f, st.Capture)
	case "send":
		v, err := p.value(st.Frame)
		if err != nil {
			return err
		}
		b, err := protocol.Marshal(v)
		if err != nil {
			return err
		}
		return p.send(ctx, c, b)
	case "sendRaw":
		return p.send(ctx, c, []byte(st.Text))
	case "expect":
		want, err := p.value(st.Frame)
		if err != nil {
			return err
		}
		f, err := p.nextResponse(ctx, c, "a frame matching "+show(want))
		if err != nil {
			return err
		}
		if d := match(want, f.v, ""); d != "" {
			return fmt.Errorf("frame %s: %s", cut(f.raw), d)
		}
		return p.capture(f, st.Capture)
	case "signals":
		return p.signals(ctx, c, st)
	case "expectReplay":
		return p.replay(ctx, c, st)
	}
	return fmt.Errorf("unknown op %q", st.Op)
}

// sequenced holds the signal kinds the schema marks as carrying $seq (session signals that
// enter the replay log); a signal of another kind, or an unknown one, may come without it.
var sequenced = func() map[string]bool {
	m := map[string]bool{}
	for _, s := range protocol.Signals() {
		if s.Sequenced {
			m[s.Kind] = true
		}
	}
	return m
}()

func (p *play) signals(ctx context.Context, c *wconn, st Step) error {
	sid, err := p.value(json.RawMessage(strconv.Quote(st.Session)))
	if err != nil {
		return err
	}
	first, hasFirst, err := p.intValue(st.FirstSeq, "firstSeq")
	if err != nil {
		return err
	}
	if st.Until == "" && st.Count == 0 {
		return errors.New("signals needs until or count")
	}
	var seqs []int64
	var kinds []any
	for {
		f, err := p.nextSignal(ctx, c, fmt.Sprintf("signals of session %v (got %d so far)", sid, len(seqs)))
		if err != nil {
			return err
		}
		params, _ := pointer(f.v, "/params")
		pm, _ := params.(map[string]any)
		if m, _ := pointer(f.v, "/method"); m != "ipc.signal" || pm == nil || pm["sessionId"] != sid {
			continue // another session's signal, or a signal without a session
		}
		sq, ok := pm["$seq"].(float64)
		if !ok {
			if k, _ := pm["kind"].(string); sequenced[k] {
				return fmt.Errorf("signal %s of session %v has no integer $seq", cut(f.raw), sid)
			}
			continue // a signal about the session that is not in its log (session:updated)
		}
		seq := int64(sq)
		switch {
		case len(seqs) == 0 && hasFirst && seq != first:
			return fmt.Errorf("signal %s: first $seq is %d, want %d", cut(f.raw), seq, first)
		case len(seqs) > 0 && seq != seqs[len(seqs)-1]+1:
			return fmt.Errorf("signal %s: $seq %d follows %d (want %d: strictly increasing without gaps)", cut(f.raw), seq, seqs[len(seqs)-1], seqs[len(seqs)-1]+1)
		}
		seqs = append(seqs, seq)
		kinds = append(kinds, pm["kind"])
		if (st.Until != "" && pm["kind"] == st.Until) || (st.Count > 0 && len(seqs) == st.Count) {
			break
		}
	}
	for name, what := range st.Capture {
		switch what {
		case "first":
			p.vars[name] = float64(seqs[0])
		case "last":
			p.vars[name] = float64(seqs[len(seqs)-1])
		case "kinds":
			p.vars[name] = kinds
		default:
			return fmt.Errorf("signals capture %s: %q is not first, last or kinds", name, what)
		}
	}
	return nil
}

func (p *play) replay(ctx context.Context, c *wconn, st Step) error {
	from, ok1, err := p.intValue(st.From, "from")
	if err != nil {
		return err
	}
	through, ok2, err := p.intValue(st.Through, "through")
	if err != nil {
		return err
	}
	if !ok1 || !ok2 {
		return errors.New("expectReplay needs from and through")
	}
	f, err := p.nextResponse(ctx, c, "the sessions.resume answer")
	if err != nil {
		return err
	}
	var res struct {
		Result *struct {
			OK      bool `json:"ok"`
			Reason  string
			Signals []struct {
				Seq    int64           `json:"seq"`
				Signal json.RawMessage `json:"signal"`
			} `json:"signals"`
		} `json:"result"`
	}
	if err := json.Unmarshal(f.raw, &res); err != nil || res.Result == nil {
		return fmt.Errorf("frame %s: want a result {ok, signals}", cut(f.raw))
	}
	if !res.Result.OK {
		return fmt.Errorf("frame %s: want ok:true (the log holds seq %d..%d)", cut(f.raw), from, through)
	}
	n := through - from + 1
	if int64(len(res.Result.Signals)) < n {
		return fmt.Errorf("frame %s: %d signals replayed, want at least %d (seq %d..%d)", cut(f.raw), len(res.Result.Signals), n, from, through)
	}
	for i, s := range res.Result.Signals {
		if s.Seq != from+int64(i) {
			return fmt.Errorf("frame %s: replayed signal %d has seq %d, want %d (exactly what was missed, in order)", cut(f.raw), i, s.Seq, from+int64(i))
		}
		if !bytes.HasPrefix(bytes.TrimSpace(s.Signal), []byte(`{"kind"`)) {
			return fmt.Errorf("frame %s: replayed signal seq %d does not start with kind", cut(f.raw), s.Seq)
		}
		if bytes.Contains(s.Signal, []byte(`"$seq"`)) {
			return fmt.Errorf("frame %s: replayed signal seq %d carries $seq (the seq is beside it)", cut(f.raw), s.Seq)
		}
	}
	return p.capture(frame{raw: f.raw, v: mustDecode(f.raw)}, st.Capture)
}

func mustDecode(b []byte) any {
	var v any
	_ = json.Unmarshal(b, &v)
	return v
}

// Summary counts results by status.
func Summary(rs []Result) (pass, fail, skip int) {
	for _, r := range rs {
		switch r.Status {
		case Pass:
			pass++
		case Fail:
			fail++
		case Skip:
			skip++
		}
	}
	return
}

// Names lists the results' names with their status, for messages.
func Names(rs []Result) string {
	var b strings.Builder
	for _, r := range rs {
		b.WriteString(r.String())
		b.WriteByte('\n')
	}
	return b.String()
}
