package server

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/protocol"
)

// dialScoped mints a token of scope, connects with it, shakes hands and returns the test
// connection and the server's side of it.
func (e *testEnv) dialScoped(scope string) (*testConn, *conn) {
	e.t.Helper()
	saved := e.token
	e.token = e.mint(scope)
	tok := e.token
	defer func() { e.token = saved }()
	c := e.dial()
	c.hello()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := e.st.LookupToken(ctx, tok)
	require.NoError(e.t, err)
	e.srv.connsMu.Lock()
	defer e.srv.connsMu.Unlock()
	for sc := range e.srv.conns {
		if sc.token.ID == st.ID {
			return c, sc
		}
	}
	e.t.Fatalf("no server connection for the %s token", scope)
	return nil, nil
}

// barrier returns the signals c received before the answer to a $/ping sent now: the server
// queues a connection's frames in order, so every signal published before the call is among them.
func (c *testConn) barrier() []signal {
	c.t.Helper()
	c.result("$/ping", `{}`)
	var out []signal
	for _, f := range c.skipped {
		out = append(out, parseSignal(c.t, f))
	}
	c.skipped = nil
	return out
}

// TestFieldCase_B41_MachineGetsNoChatContent: a machine connection registered beside a chat
// connection that runs a prompt receives nothing of it (no run signals, no prompt text, no
// presence), while an admin connection receives the run like the chat connection does.
func TestFieldCase_B41_MachineGetsNoChatContent(t *testing.T) {
	e := newEnv(t, nil)
	machine, _ := e.dialScoped("machine")
	machine.result("machine.register", `{"name":"build-box"}`)
	admin, _ := e.dialScoped("admin")
	chat, _ := e.dialScoped("chat")
	sid := chat.newSession()
	chat.result("chat.send", fmt.Sprintf(`{"sessionId":%q,"prompt":"my secret prompt"}`, sid))
	got := chat.runSignals(sid)
	require.Equal(t, "run:end", got[len(got)-1].kind)
	adminGot := admin.runSignals(sid)
	require.Len(t, adminGot, len(got), "an admin connection receives the run's signals")
	time.Sleep(3 * presenceDelay) // presence:changed is coalesced; let it go out
	sigs := machine.barrier()
	var kinds []string
	for _, s := range sigs {
		kinds = append(kinds, s.kind)
		assert.NotContains(t, string(s.raw), "my secret prompt")
	}
	assert.Empty(t, kinds, "a machine connection receives no chat signal")
	m := machine.call("sessions.resume", fmt.Sprintf(`{"sessionId":%q,"epoch":%q,"afterSeq":0}`, sid, e.srv.epoch))
	assert.Equal(t, -32040, errCode(m), "and cannot ask for them either: %v", m)
}

// audience is what TestPushScopeMatrix pins for one signal kind: the token scopes that receive
// it, its delivery, and whether it carries $seq. A new signal kind needs a row here (and an
// example under schema/examples) before the test passes: its audience is then a reviewed choice.
type audience struct {
	scopes    []protocol.Scope
	delivery  protocol.Delivery
	sequenced bool
}

var chatAndAdmin = []protocol.Scope{protocol.ScopeChat, protocol.ScopeAdmin}

var pinnedAudiences = map[string]audience{
	"run:start":            {chatAndAdmin, protocol.DeliveryAll, true},
	"event":                {chatAndAdmin, protocol.DeliveryAll, true},
	"turn:end":             {chatAndAdmin, protocol.DeliveryAll, true},
	"run:end":              {chatAndAdmin, protocol.DeliveryAll, true},
	"presence:changed":     {chatAndAdmin, protocol.DeliveryAll, false},
	"session:updated":      {chatAndAdmin, protocol.DeliveryAll, false},
	"stream:progress":      {chatAndAdmin, protocol.DeliveryAll, false},
	"draft:changed":        {chatAndAdmin, protocol.DeliveryOthers, false},
	"settings:changed":     {chatAndAdmin, protocol.DeliveryAll, false},
	"agents:changed":       {chatAndAdmin, protocol.DeliveryAll, false},
	"skills:changed":       {chatAndAdmin, protocol.DeliveryAll, false},
	"commands:changed":     {chatAndAdmin, protocol.DeliveryAll, false},
	"prefs:changed":        {chatAndAdmin, protocol.DeliveryAll, false},
	"sidebar:changed":      {chatAndAdmin, protocol.DeliveryAll, false},
	"approval:request":     {chatAndAdmin, protocol.DeliveryAll, true},
	"approval:resolved":    {chatAndAdmin, protocol.DeliveryAll, true},
	"approval:mode":        {chatAndAdmin, protocol.DeliveryAll, true},
	"interaction:request":  {chatAndAdmin, protocol.DeliveryAll, true},
	"interaction:resolved": {chatAndAdmin, protocol.DeliveryAll, true},
	"plans:snapshot":       {chatAndAdmin, protocol.DeliveryAll, true},
	"queue:changed":        {chatAndAdmin, protocol.DeliveryAll, true},
	"session:reset":        {chatAndAdmin, protocol.DeliveryAll, true},
	"git:refs":             {chatAndAdmin, protocol.DeliveryWatchers, false},
	"git:clone:progress":   {chatAndAdmin, protocol.DeliveryOrigin, false},
	"workspace:exec:data":  {[]protocol.Scope{protocol.ScopeAdmin}, protocol.DeliveryOrigin, false},
	"workspace:exec:exit":  {[]protocol.Scope{protocol.ScopeAdmin}, protocol.DeliveryOrigin, false},
}

// exampleSignals reads schema/examples/signal.*.json, by kind.
func exampleSignals(t *testing.T) map[string]json.RawMessage {
	files, err := filepath.Glob("../schema/examples/signal.*.json")
	require.NoError(t, err)
	out := map[string]json.RawMessage{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		var msg struct {
			Params json.RawMessage `json:"params"`
		}
		require.NoError(t, json.Unmarshal(b, &msg))
		var k struct {
			Kind string `json:"kind"`
		}
		require.NoError(t, json.Unmarshal(msg.Params, &k))
		if _, dup := out[k.Kind]; !dup {
			out[k.Kind] = msg.Params
		}
	}
	return out
}

// TestPushScopeMatrix publishes every signal kind of the schema, from a connection of every
// scope, to connections of every scope in every role (the origin, another connection, a watcher
// of the signal's key) over real WebSockets, and checks who received it against the pinned
// audience (field case B41: push follows the same authorization as requests).
func TestPushScopeMatrix(t *testing.T) {
	e := newEnv(t, nil)
	examples := exampleSignals(t)
	scopes := []protocol.Scope{protocol.ScopeChat, protocol.ScopeAdmin, protocol.ScopeMachine}
	type peer struct {
		name  string
		scope protocol.Scope
		tc    *testConn
		sc    *conn
		watch bool
	}
	var peers []*peer
	const key = "matrix-key"
	for _, s := range scopes {
		for _, role := range []string{"a", "b", "watcher"} {
			tc, sc := e.dialScoped(string(s))
			p := &peer{name: string(s) + "/" + role, scope: s, tc: tc, sc: sc, watch: role == "watcher"}
			if p.watch {
				e.srv.hub.watch(sc, key)
			}
			peers = append(peers, p)
		}
	}
	var missing []string
	for _, spec := range protocol.Signals() {
		want, ok := pinnedAudiences[spec.Kind]
		if !ok {
			missing = append(missing, fmt.Sprintf("%s (scopes %v, delivery %s, sequenced %v)", spec.Kind, spec.Scopes, spec.Delivery, spec.Sequenced))
			continue
		}
		assert.Equal(t, want.sequenced, spec.Sequenced, "%s: sequenced", spec.Kind)
		raw, ok := examples[spec.Kind]
		if !assert.True(t, ok, "signal %s has no example: add schema/examples/signal.<name>.json", spec.Kind) {
			continue
		}
		sig, err := protocol.DecodeSignal(raw)
		require.NoError(t, err)
		for _, from := range peers {
			if from.watch {
				continue // origins are the a connections
			}
			if strings.HasSuffix(from.name, "/b") {
				continue
			}
			seqBefore := e.srv.hub.lastSeq(sig)
			_, err := e.srv.hub.publish(sig, from.sc, key)
			require.NoError(t, err, spec.Kind)
			for _, p := range peers {
				got := p.tc.barrier()
				permitted := false
				for _, s := range want.scopes {
					permitted = permitted || s == p.scope
				}
				expect := permitted
				switch want.delivery {
				case protocol.DeliveryOrigin:
					expect = permitted && p == from
				case protocol.DeliveryOthers:
					expect = permitted && p != from
				case protocol.DeliveryWatchers:
					expect = permitted && p.watch
				}
				what := fmt.Sprintf("%s published by %s, seen by %s", spec.Kind, from.name, p.name)
				if !expect {
					var kinds []string
					for _, g := range got {
						kinds = append(kinds, g.kind)
					}
					assert.Empty(t, kinds, what)
					continue
				}
				if assert.Len(t, got, 1, what) {
					assert.Equal(t, spec.Kind, got[0].kind, what)
					assert.Equal(t, want.sequenced, got[0].seq > 0, "%s: carries $seq", what)
				}
			}
			if want.sequenced {
				assert.Equal(t, seqBefore+1, e.srv.hub.lastSeq(sig), "%s enters the replay log", spec.Kind)
			} else {
				assert.Equal(t, seqBefore, e.srv.hub.lastSeq(sig), "%s takes no $seq", spec.Kind)
			}
		}
	}
	sort.Strings(missing)
	assert.Empty(t, missing, "signal kinds without a pinned audience: add them to pinnedAudiences after choosing who may receive them")
}

// TestHubRefusesUndeclaredSignals: the hub sends only what the schema declares, and a watchers
// signal needs its key.
func TestHubRefusesUndeclaredSignals(t *testing.T) {
	h := newHub("epoch", ReplayLimits{}, 1<<20)
	_, err := h.publish(&protocol.UnknownSignal{Kind: "nope:never", Raw: json.RawMessage(`{"kind":"nope:never"}`)}, nil, "")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"nope:never" is not in the schema`)
}

// lastSeq is the last $seq of sig's session in the hub (0 without a session).
func (h *hub) lastSeq(sig protocol.Signal) int64 {
	ss, ok := sig.(interface{ SessionKey() string })
	if !ok {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if lg := h.logs[ss.SessionKey()]; lg != nil {
		return lg.lastSeq
	}
	return 0
}

// TestHubDeliveryModes drives every delivery mode, including the ones no signal kind uses yet
// (others, watchers), with specs made here, to connections of every scope over real WebSockets;
// watches end with unwatch and with the connection.
func TestHubDeliveryModes(t *testing.T) {
	e := newEnv(t, nil)
	chatA, scA := e.dialScoped("chat")
	chatB, scB := e.dialScoped("chat")
	admin, scAdmin := e.dialScoped("admin")
	machine, scMachine := e.dialScoped("machine")
	all := []*testConn{chatA, chatB, admin, machine}
	names := map[*testConn]string{chatA: "chatA", chatB: "chatB", admin: "admin", machine: "machine"}
	h := e.srv.hub
	h.watch(scB, "repo:1")
	h.watch(scMachine, "repo:1")
	h.watch(scAdmin, "repo:2")
	// Any valid signal's frame will do: deliver looks only at the spec it is given.
	frame := signalFrame([]byte(`{"kind":"presence:changed","sessions":[]}`), 0)
	check := func(spec *protocol.SignalSpec, from *conn, key string, want ...*testConn) {
		t.Helper()
		h.deliver(spec, from, key, frame)
		var got []string
		for _, c := range all {
			if n := len(c.barrier()); n > 0 {
				require.Equal(t, 1, n)
				got = append(got, names[c])
			}
		}
		var exp []string
		for _, c := range want {
			exp = append(exp, names[c])
		}
		assert.Equal(t, exp, got, "delivery %s scopes %v key %q", spec.Delivery, spec.Scopes, key)
	}
	chatSpec := func(d protocol.Delivery) *protocol.SignalSpec {
		return &protocol.SignalSpec{Kind: "x:y", Scopes: []protocol.Scope{protocol.ScopeChat}, Delivery: d}
	}
	check(chatSpec(protocol.DeliveryAll), scA, "", chatA, chatB, admin)
	check(chatSpec(protocol.DeliveryOthers), scA, "", chatB, admin)
	check(chatSpec(protocol.DeliveryOthers), nil, "", chatA, chatB, admin)
	check(chatSpec(protocol.DeliveryOrigin), scA, "", chatA)
	check(chatSpec(protocol.DeliveryOrigin), scMachine, "") // an origin its scope does not permit
	check(chatSpec(protocol.DeliveryOrigin), nil, "")
	check(chatSpec(protocol.DeliveryWatchers), nil, "repo:1", chatB) // the machine watcher is not permitted
	check(chatSpec(protocol.DeliveryWatchers), nil, "repo:2", admin)
	check(chatSpec(protocol.DeliveryWatchers), nil, "repo:3")
	anyone := &protocol.SignalSpec{Kind: "x:y", Scopes: []protocol.Scope{protocol.ScopeNone}, Delivery: protocol.DeliveryWatchers}
	check(anyone, nil, "repo:1", chatB, machine)
	machineOnly := &protocol.SignalSpec{Kind: "x:y", Scopes: []protocol.Scope{protocol.ScopeMachine}, Delivery: protocol.DeliveryAll}
	check(machineOnly, nil, "", machine)
	adminOnly := &protocol.SignalSpec{Kind: "x:y", Scopes: []protocol.Scope{protocol.ScopeAdmin}, Delivery: protocol.DeliveryAll}
	check(adminOnly, nil, "", admin)

	h.unwatch(scB, "repo:1")
	check(anyone, nil, "repo:1", machine)
	assert.Equal(t, 1, h.watchCount("repo:1"))
	machine.ws.CloseNow()
	require.Eventually(t, func() bool { return h.watchCount("repo:1") == 0 }, 5*time.Second, 10*time.Millisecond, "a closed connection's watches end")
	all = all[:3]
	check(anyone, nil, "repo:1")
	h.watch(scMachine, "repo:1") // a connection that left cannot watch again
	assert.Equal(t, 0, h.watchCount("repo:1"))
}
