package server

// Field cases (shared/cases/field-cases.md) over a real WebSocket to a real server on a real
// Postgres. The cases' test-only methods map to real ones: test.echo → $/ping (or a chat-scoped
// method where the case needs one that the handshake gate refuses), test.burst → chat.send runs
// of the scripted provider.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"
)

const ping = `"method":"$/ping","params":{}`

func TestFieldCase_B01_EmptyBatch(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial()
	c.hello()

	c.send(`[]`)
	requireError(t, decodeObj(t, c.next()), -32600, "null")

	c.send(`[1]`)
	a := decodeArr(t, c.next())
	require.Len(t, a, 1)
	requireError(t, a[0], -32600, "null")

	c.send(`[1,2,3]`)
	a = decodeArr(t, c.next())
	require.Len(t, a, 3)
	for _, m := range a {
		requireError(t, m, -32600, "null")
	}

	c.send(`[{"jsonrpc":"2.0","id":1,` + ping + `}]`)
	a = decodeArr(t, c.next())
	require.Len(t, a, 1, "a one-element batch is still answered with an array")
	requireID(t, a[0], "1")
	require.NotNil(t, a[0]["result"])
}

func TestFieldCase_B02_NotificationBatch(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial()
	c.hello()

	c.send(`[{"jsonrpc":"2.0","method":"$/ping","params":{"a":1}},{"jsonrpc":"2.0","method":"daemon.info","params":{"a":2}}]`)
	c.expectNothing(500 * time.Millisecond)
	c.send(`{"jsonrpc":"2.0","id":9,` + ping + `}`)
	requireID(t, decodeObj(t, c.next()), "9")

	c.send(`[{"jsonrpc":"2.0","id":1,` + ping + `},
		{"jsonrpc":"2.0",` + ping + `},
		{"jsonrpc":"2.0","method":"no.such.method"},
		{"foo":"bar"}]`)
	a := decodeArr(t, c.next())
	require.Len(t, a, 2, "%v", a)
	ids := map[string]map[string]any{}
	for _, m := range a {
		b, _ := json.Marshal(m["id"])
		ids[string(b)] = m
	}
	require.NotNil(t, ids["1"]["result"])
	requireError(t, ids["null"], -32600, "null")
	c.expectNothing(300 * time.Millisecond)

	// Invalid notifications inside a batch are not answered either.
	c.send(`[{"jsonrpc":"2.0","method":"$/ping","params":"x"},{"jsonrpc":"2.0","method":"sessions.get","params":{"sessionId":1}}]`)
	c.expectNothing(400 * time.Millisecond)
}

func TestFieldCase_B03_NullID(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial()
	c.hello()
	for _, tc := range []struct {
		in   string
		code int
		id   string
	}{
		{`{"jsonrpc":"2.0","method":"$/ping","params":`, -32700, "null"},
		{`{"jsonrpc":"2.0","method":1,"params":{},"id":5}`, -32600, "5"},
		{`{"jsonrpc":"2.0","params":[1],"id":6}`, -32600, "6"},
		{`{"jsonrpc":"2.0","method":"$/ping","params":{},"id":"abc"} `, 0, `"abc"`},
	} {
		c.send(tc.in)
		raw := c.next()
		require.Contains(t, string(raw), `"id":`, "the id member is always present")
		m := decodeObj(t, raw)
		if tc.code == 0 {
			requireID(t, m, tc.id)
			continue
		}
		requireError(t, m, tc.code, tc.id)
	}
}

func TestFieldCase_B04_NotificationsNeverAnswered(t *testing.T) {
	e := newEnv(t, nil)

	pre := e.dial() // before hello
	pre.send(`{"jsonrpc":"2.0","method":"sessions.list","params":{}}`)
	pre.send(`{"jsonrpc":"2.0",` + ping + `}`)
	pre.send(`{"jsonrpc":"2.0","method":"no.such.method"}`)
	pre.expectNothing(400 * time.Millisecond)

	c := e.dial()
	c.hello()
	c.send(`{"jsonrpc":"2.0","method":"no.such.method"}`)
	c.send(`{"jsonrpc":"2.0","method":"$/ping","params":"x"}`)
	c.send(`{"jsonrpc":"2.0","method":"$/ping","params":[1]}`)
	c.send(`{"jsonrpc":"2.0","method":"ipc.hello","params":{"protocolVersion":16}}`)
	c.send(`{"jsonrpc":"2.0","method":"sessions.get","params":{"sessionId":"nope"}}`)
	c.send(`{"jsonrpc":"2.0","id":10,` + ping + `}`)
	m := decodeObj(t, c.next())
	requireID(t, m, "10")
	require.NotNil(t, m["result"])

	c.send(`{"jsonrpc":"2.0","id":null,` + ping + `}`)
	m = decodeObj(t, c.next())
	requireID(t, m, "null")
	require.NotNil(t, m["result"], "id null is a request and is answered")
}

func TestFieldCase_B06_JSONRPCVersion(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial()
	c.hello()
	for i, in := range []string{
		`{"id":1,` + ping + `}`,
		`{"jsonrpc":"1.0","id":2,` + ping + `}`,
		`{"jsonrpc":2.0,"id":3,` + ping + `}`,
		`{"jsonrpc":"2.0 ","id":4,` + ping + `}`,
	} {
		c.send(in)
		requireError(t, decodeObj(t, c.next()), -32600, fmt.Sprint(i+1))
	}
}

func TestFieldCase_B08_TrailingData(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial()
	c.hello()
	c.send(`{"jsonrpc":"2.0","id":1,` + ping + `} {"jsonrpc":"2.0","id":2,` + ping + `}`)
	requireError(t, decodeObj(t, c.next()), -32700, "null")
	c.send(`{"jsonrpc":"2.0","id":3,` + ping + `}garbage`)
	requireError(t, decodeObj(t, c.next()), -32700, "null")
	c.send("{\"jsonrpc\":\"2.0\",\"id\":4," + ping + "}\n")
	m := decodeObj(t, c.next())
	requireID(t, m, "4")
	require.NotNil(t, m["result"])
	// Our choice: a leading BOM is refused with -32700 (RFC 8259 §8.1 permits either).
	c.send("\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"id\":5," + ping + "}")
	requireError(t, decodeObj(t, c.next()), -32700, "null")
	c.expectNothing(300 * time.Millisecond) // nothing was executed for ids 1, 2, 3, 5
}

func TestFieldCase_B09_ParamsNotStructured(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial()
	c.hello()
	for _, tc := range []struct {
		in   string
		code int
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"$/ping","params":null}`, -32600},
		{`{"jsonrpc":"2.0","id":2,"method":"$/ping","params":"x"}`, -32600},
		{`{"jsonrpc":"2.0","id":3,"method":"$/ping","params":42}`, -32600},
		{`{"jsonrpc":"2.0","id":4,"method":"$/ping","params":[{"a":1}]}`, -32602},
		{`{"jsonrpc":"2.0","id":5,"method":"$/ping"}`, 0},
		{`{"jsonrpc":"2.0","id":6,"method":"daemon.info"}`, 0},
	} {
		c.send(tc.in)
		m := decodeObj(t, c.next())
		id := tc.in[strings.Index(tc.in, `"id":`)+5 : strings.Index(tc.in, `,"method"`)]
		if tc.code == 0 {
			requireID(t, m, id)
			require.NotNil(t, m["result"], "%s → %v", tc.in, m)
			continue
		}
		requireError(t, m, tc.code, id)
	}
}

func TestFieldCase_B11_Limits(t *testing.T) {
	e := newEnv(t, nil)

	t.Run("17 MiB frame closes 1009", func(t *testing.T) {
		c := e.dial()
		c.hello()
		big := `{"jsonrpc":"2.0","id":1,"method":"$/ping","params":{"s":"` + strings.Repeat("a", 17<<20) + `"}}`
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_ = c.ws.Write(ctx, websocket.MessageText, []byte(big))
		}()
		require.Equal(t, websocket.StatusMessageTooBig, c.closeStatus(20*time.Second))
		other := e.dial()
		other.hello()
		other.result("$/ping", `{}`)
	})

	t.Run("a frame just under the limit is served", func(t *testing.T) {
		c := e.dial()
		c.hello()
		pad := 16<<20 - 200
		c.send(`{"jsonrpc":"2.0","id":2,"method":"$/ping","params":{"s":"` + strings.Repeat("b", pad) + `"}}`)
		m := decodeObj(t, c.next())
		requireID(t, m, "2")
		require.NotNil(t, m["result"])
	})

	t.Run("deep nesting is -32600 id null, no crash", func(t *testing.T) {
		c := e.dial()
		c.hello()
		for _, depth := range []int{65, 20000} {
			deep := strings.Repeat("[", depth) + strings.Repeat("]", depth)
			c.send(`{"jsonrpc":"2.0","id":2,"method":"$/ping","params":{"a":` + deep + `}}`)
			requireError(t, decodeObj(t, c.next()), -32600, "null")
		}
		c.result("$/ping", `{}`)
	})
}

func TestFieldCase_B12_BeforeHello(t *testing.T) {
	// The gate subtest sends its requests and its hello within the timeout: scaled, so a race
	// build on a loaded machine does not run into it.
	helloTimeout := 600 * time.Millisecond * raceSlowdown
	e := newEnv(t, func(c *Config) { c.Limits.HelloTimeout = helloTimeout })

	t.Run("gate", func(t *testing.T) {
		c := e.dial()
		c.send(`{"jsonrpc":"2.0","id":1,"method":"sessions.list","params":{}}`)
		requireError(t, decodeObj(t, c.next()), -32011, "1")
		c.send(`{"jsonrpc":"2.0","method":"sessions.list","params":{}}`)
		c.expectNothing(300 * time.Millisecond)
		// Allowed before the handshake.
		c.send(`{"jsonrpc":"2.0","id":"p",` + ping + `}`)
		require.NotNil(t, decodeObj(t, c.next())["result"])

		c.send(`[{"jsonrpc":"2.0","id":2,"method":"ipc.hello","params":` + helloParams + `},{"jsonrpc":"2.0","id":3,"method":"sessions.list","params":{}}]`)
		a := decodeArr(t, c.next())
		require.Len(t, a, 2)
		got := map[string]int{}
		for _, m := range a {
			b, _ := json.Marshal(m["id"])
			got[string(b)] = errCode(m)
		}
		require.Equal(t, map[string]int{"2": -32600, "3": -32011}, got)

		// Hello and a request back-to-back: handled in arrival order.
		c.send(`{"jsonrpc":"2.0","id":4,"method":"ipc.hello","params":` + helloParams + `}`)
		c.send(`{"jsonrpc":"2.0","id":5,"method":"sessions.list","params":{}}`)
		m := decodeObj(t, c.nextAnswer())
		requireID(t, m, "4")
		require.NotNil(t, m["result"])
		m = decodeObj(t, c.nextAnswer())
		requireID(t, m, "5")
		require.NotNil(t, m["result"], "%v", m)

		c.send(`{"jsonrpc":"2.0","id":6,"method":"ipc.hello","params":` + helloParams + `}`)
		m = decodeObj(t, c.nextAnswer())
		requireID(t, m, "6")
		require.Equal(t, -32014, errCode(m), "a second hello is refused")
		c.result("sessions.list", `{}`) // session unchanged, past the hello timeout too
		time.Sleep(helloTimeout + 100*time.Millisecond)
		c.result("$/ping", `{}`)
	})

	t.Run("a hello notification does not complete the handshake", func(t *testing.T) {
		c := e.dial()
		c.send(`{"jsonrpc":"2.0","method":"ipc.hello","params":` + helloParams + `}`)
		c.expectNothing(200 * time.Millisecond)
		c.send(`{"jsonrpc":"2.0","id":1,"method":"sessions.list","params":{}}`)
		requireError(t, decodeObj(t, c.next()), -32011, "1")
		c.hello()
	})

	t.Run("no hello closes 1008", func(t *testing.T) {
		c := e.dial()
		start := time.Now()
		require.Equal(t, websocket.StatusPolicyViolation, c.closeStatus(10*time.Second))
		require.GreaterOrEqual(t, time.Since(start), helloTimeout-100*time.Millisecond)
	})

	t.Run("pings do not replace hello", func(t *testing.T) {
		c := e.dial()
		c.result("$/ping", `{}`)
		require.Equal(t, websocket.StatusPolicyViolation, c.closeStatus(10*time.Second))
	})
}

func TestFieldCase_B13_VersionRange(t *testing.T) {
	e := newEnv(t, nil)
	for _, tc := range []struct {
		params     string
		code       int
		negotiated int
	}{
		{`{"protocolVersion":16}`, 0, 16},
		{`{"protocolVersion":20,"minProtocolVersion":12}`, 0, 16},
		{`{"protocolVersion":16,"minProtocolVersion":1}`, 0, 16},
		{`{"protocolVersion":12}`, -32010, 0},
		{`{"protocolVersion":30,"minProtocolVersion":20}`, -32010, 0},
		{`{"protocolVersion":16,"minProtocolVersion":20}`, -32602, 0},
		{`{"protocolVersion":"16"}`, -32602, 0},
		{`{}`, -32602, 0},
		{`{"protocolVersion":16.5}`, -32602, 0},
		{`{"protocolVersion":0}`, -32602, 0},
	} {
		t.Run(tc.params, func(t *testing.T) {
			c := e.dial()
			c.send(`{"jsonrpc":"2.0","id":1,"method":"ipc.hello","params":` + tc.params + `}`)
			m := decodeObj(t, c.next())
			requireID(t, m, "1")
			if tc.code == 0 {
				r := m["result"].(map[string]any)
				require.Equal(t, json.Number(fmt.Sprint(tc.negotiated)), r["negotiatedProtocolVersion"])
				require.NotEmpty(t, r["signalEpoch"])
				return
			}
			require.Equal(t, tc.code, errCode(m), "%v", m)
			if tc.code == -32010 {
				data := m["error"].(map[string]any)["data"].(map[string]any)
				d := data["daemon"].(map[string]any)
				require.Equal(t, json.Number("16"), d["protocolVersion"])
			}
			// The connection stays open: the client may retry.
			c.send(`{"jsonrpc":"2.0","id":2,"method":"ipc.hello","params":{"protocolVersion":16}}`)
			require.NotNil(t, decodeObj(t, c.next())["result"])
		})
	}
}

func TestFieldCase_B14_SubprotocolToken(t *testing.T) {
	e := newEnv(t, nil)
	tok := e.token
	require.Regexp(t, `^zds_[A-Za-z0-9_-]{43}$`, tok, "tokens use RFC 7230 token characters only")
	other := e.mint("chat")
	for _, tc := range []struct {
		name    string
		headers []string
		status  int
	}{
		{"a marker and token", []string{"Sec-WebSocket-Protocol: zidane, zidane.bearer." + tok}, 101},
		{"b token without marker", []string{"Sec-WebSocket-Protocol: zidane.bearer." + tok}, 401},
		{"c wrong token", []string{"Sec-WebSocket-Protocol: zidane, zidane.bearer.WRONG"}, 401},
		{"d marker and Authorization", []string{"Sec-WebSocket-Protocol: zidane", "Authorization: Bearer " + tok}, 101},
		{"e conflicting credentials", []string{"Sec-WebSocket-Protocol: zidane, zidane.bearer." + tok, "Authorization: Bearer " + other}, 401},
		{"f non-token characters", []string{"Sec-WebSocket-Protocol: zidane, zidane.bearer.ab/c+d=="}, 401},
		{"g two header lines", []string{"Sec-WebSocket-Protocol: zidane", "Sec-WebSocket-Protocol: zidane.bearer." + tok}, 101},
		{"no credentials", nil, 401},
		{"marker only", []string{"Sec-WebSocket-Protocol: zidane"}, 401},
		{"two different tokens offered", []string{"Sec-WebSocket-Protocol: zidane, zidane.bearer." + tok + ", zidane.bearer." + other}, 401},
		{"Authorization only", []string{"Authorization: Bearer " + tok}, 101},
		{"Authorization wrong scheme", []string{"Authorization: Basic " + tok}, 401},
		{"two Authorization lines", []string{"Authorization: Bearer " + tok, "Authorization: Bearer " + tok}, 401},
		{"oversized token", []string{"Authorization: Bearer " + strings.Repeat("a", 10000)}, 401},
		{"allowlist empty: foreign origin", []string{"Authorization: Bearer " + tok, "Origin: https://evil.example"}, 403},
		{"origin null", []string{"Authorization: Bearer " + tok, "Origin: null"}, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc, resp := rawHandshake(t, e, tc.headers...)
			require.Equal(t, tc.status, resp.StatusCode)
			for name, vs := range resp.Header {
				for _, v := range vs {
					require.NotContains(t, v, tok, "header %s echoes the token", name)
					require.NotContains(t, v, "bearer", "header %s", name)
				}
			}
			if tc.status != 101 {
				return
			}
			if strings.Contains(strings.Join(tc.headers, "\n"), "Sec-WebSocket-Protocol") {
				require.Equal(t, []string{"zidane"}, resp.Header.Values("Sec-WebSocket-Protocol"))
			}
			rc.hello()
		})
	}

	t.Run("browser client with subprotocols", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ws, resp, err := websocket.Dial(ctx, e.wsURL, &websocket.DialOptions{Subprotocols: []string{"zidane", "zidane.bearer." + tok}})
		require.NoError(t, err)
		defer ws.CloseNow()
		require.Equal(t, "zidane", ws.Subprotocol())
		require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	})
}

func TestFieldCase_B16_TextFrames(t *testing.T) {
	e := newEnv(t, nil)
	t.Run("binary closes 1003", func(t *testing.T) {
		r := dialRaw(t, e)
		r.hello()
		r.frame(true, 0, opBinary, []byte(`{"jsonrpc":"2.0","id":1,`+ping+`}`))
		require.Equal(t, 1003, r.expectClose())
	})
	t.Run("invalid UTF-8 closes 1007", func(t *testing.T) {
		r := dialRaw(t, e)
		r.hello()
		r.text("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"$/ping\",\"params\":{\"s\":\"\xff\"}}")
		require.Equal(t, 1007, r.expectClose())
	})
	t.Run("emoji split across three fragments", func(t *testing.T) {
		r := dialRaw(t, e)
		r.hello()
		msg := []byte(`{"jsonrpc":"2.0","id":3,"method":"$/ping","params":{"s":"😀"}}`)
		i := strings.Index(string(msg), "😀") + 2 // inside the 4-byte sequence
		r.frame(false, 0, opText, msg[:i])
		r.frame(false, 0, opCont, msg[i:i+1])
		r.frame(true, 0, opCont, msg[i+1:])
		m := decodeObj(t, []byte(r.readText()))
		requireID(t, m, "3")
		require.NotNil(t, m["result"])
	})
	t.Run("ping interleaved in a fragmented message", func(t *testing.T) {
		r := dialRaw(t, e)
		r.hello()
		msg := []byte(`{"jsonrpc":"2.0","id":4,` + ping + `}`)
		r.frame(false, 0, opText, msg[:10])
		r.frame(true, 0, opPing, []byte("p"))
		r.frame(true, 0, opCont, msg[10:])
		var gotPong, gotAnswer bool
		for !(gotPong && gotAnswer) {
			_, op, p, err := r.readFrame(5 * time.Second)
			require.NoError(t, err)
			switch op {
			case opPong:
				gotPong = true
			case opText:
				requireID(t, decodeObj(t, p), "4")
				gotAnswer = true
			}
		}
	})
	t.Run("escaped lone surrogate", func(t *testing.T) {
		c := e.dial()
		c.hello()
		c.send(`{"jsonrpc":"2.0","id":5,"method":"$/ping","params":{"s":"\ud800"}}`)
		m := decodeObj(t, c.next())
		requireID(t, m, "5")
		require.NotNil(t, m["result"])
		sid := c.newSession()
		m = c.call("sessions.create", `{"title":"a\ud800b"}`)
		require.NotEqual(t, -32603, errCode(m))
		c.result("sessions.get", fmt.Sprintf(`{"sessionId":%q}`, sid))
	})
}

// TestFieldCase_B17_SeqOrder sends chat runs in two sessions and pings back to back on one
// connection: every session's $seq is +1 without gap or duplicate, every request answered once.
func TestFieldCase_B17_SeqOrder(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial()
	c.hello()
	s1, s2 := c.newSession(), c.newSession()
	const runs = 3
	// Send everything back to back, then read.
	ids := map[string]int{}
	n := 0
	req := func(method, params string) {
		n++
		id := fmt.Sprint(n)
		ids[id] = 0
		c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":%q,"params":%s}`, id, method, params))
	}
	for i := 0; i < runs; i++ {
		req("chat.send", fmt.Sprintf(`{"sessionId":%q,"prompt":"burst one %d"}`, s1, i))
		req("chat.send", fmt.Sprintf(`{"sessionId":%q,"prompt":"burst two %d"}`, s2, i))
		for j := 0; j < 5; j++ {
			req("$/ping", `{}`)
		}
	}
	last := map[string]int64{}
	ended := map[string]int{}
	busy := 0
	deadline := time.Now().Add(30 * time.Second)
	answered := 0
	for answered < len(ids) || ended[s1]+ended[s2] < runs*2-busy {
		require.True(t, time.Now().Before(deadline), "timed out: answered %d/%d, ended %v", answered, len(ids), ended)
		f := c.next()
		if isSignalFrame(f) {
			s := parseSignal(t, f)
			if s.session == "" || s.seq == 0 { // no session, or ephemeral (stream:progress)
				continue
			}
			require.Equal(t, last[s.session]+1, s.seq, "session %s: $seq after %d", s.session, last[s.session])
			last[s.session] = s.seq
			if s.kind == "run:end" {
				ended[s.session]++
			}
			continue
		}
		m := decodeObj(t, f)
		b, _ := json.Marshal(m["id"])
		id := strings.Trim(string(b), `"`)
		cnt, ok := ids[id]
		require.True(t, ok, "answer to an unknown id: %s", f)
		require.Zero(t, cnt, "id %s answered twice", id)
		ids[id] = 1
		answered++
		if errCode(m) == -32014 { // "already running": a prompt sent during a run is refused here
			busy++
		} else {
			require.Nil(t, m["error"], "%s", f)
		}
	}
	c.expectNothing(300 * time.Millisecond)
}

func TestFieldCase_B17_ConcurrentConnections(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.StepDelay = time.Millisecond })
	a, b := e.dial(), e.dial()
	a.hello()
	b.hello()
	s1, s2 := a.newSession(), b.newSession()
	var wg sync.WaitGroup
	for _, x := range []struct {
		c *testConn
		s string
	}{{a, s1}, {b, s2}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x.c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"run","method":"chat.send","params":{"sessionId":%q,"prompt":"go"}}`, x.s))
			for i := 0; i < 20; i++ {
				x.c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,`+ping+`}`, i))
			}
		}()
	}
	wg.Wait()
	for _, c := range []*testConn{a, b} {
		last := map[string]int64{}
		ends, answers := 0, 0
		for ends < 2 || answers < 21 {
			f := c.next()
			if isSignalFrame(f) {
				s := parseSignal(t, f)
				if s.session == "" || s.seq == 0 { // no session, or ephemeral (stream:progress)
					continue
				}
				require.Equal(t, last[s.session]+1, s.seq)
				last[s.session] = s.seq
				if s.kind == "run:end" {
					ends++
				}
				continue
			}
			require.Nil(t, decodeObj(t, f)["error"], "%s", f)
			answers++
		}
	}
}

func TestFieldCase_B18_SlowConsumer(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.Limits.SendQueueMessages = 64
		c.Limits.SendQueueBytes = 3 << 20
		c.Limits.WriteTimeout = 30 * time.Second
		// The slow client answers no ping: keepalive (25 s + 20 s) would close it with 1008
		// before its queue fills when the sends are slow (a -race build takes over 45 s here).
		c.Limits.PingInterval = time.Hour
	})
	slow := e.dialSmallBuffer()
	slow.send(`{"jsonrpc":"2.0","id":"hello","method":"ipc.hello","params":` + helloParams + `}`)
	var slowSrv *conn
	require.Eventually(t, func() bool {
		e.srv.connsMu.Lock()
		defer e.srv.connsMu.Unlock()
		for x := range e.srv.conns {
			if x.helloed.Load() {
				slowSrv = x
			}
		}
		return slowSrv != nil
	}, 5*time.Second, 5*time.Millisecond)
	fast := e.dial()
	fast.hello()
	// The slow client starts reading the moment the server gives up on it, so the close frame
	// can still reach it (the server waits at most 5 s to write it). It skips the contract
	// check, which takes seconds per megabyte frame under -race; the fast client checks the
	// same signals.
	slow.noContract = true
	go func() {
		for !slowSrv.isClosing() {
			time.Sleep(5 * time.Millisecond)
		}
		slow.startReader()
	}()
	sid := fast.newSession()
	prompt := strings.Repeat("x", 1<<20-16) // just under the 1 Mi-character prompt limit
	var fastSeqs []int64
	for i := 0; i < 30 && !slowSrv.isClosing(); i++ {
		fast.result("chat.send", fmt.Sprintf(`{"sessionId":%q,"prompt":"%s %d"}`, sid, prompt, i))
		for _, s := range fast.runSignals(sid) {
			fastSeqs = append(fastSeqs, s.seq)
		}
	}
	require.True(t, slowSrv.isClosing(), "the slow connection was never closed")
	require.Equal(t, websocket.StatusTryAgainLater, slow.closeStatus(20*time.Second))
	// The fast client received every signal, in order, and keeps working.
	for i, s := range fastSeqs {
		require.Equal(t, int64(i+1), s)
	}
	fast.result("$/ping", `{}`)
}

func TestFieldCase_B19_Resume(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Limits.Replay.PerSessionSignals = 5 })
	c := e.dial()
	h := c.hello()
	epoch := h["signalEpoch"].(string)
	sid := c.newSession()
	c.result("chat.send", fmt.Sprintf(`{"sessionId":%q,"prompt":"hi"}`, sid))
	sigs0 := c.runSignals(sid)
	last := sigs0[len(sigs0)-1].seq
	for i, s := range sigs0 {
		require.Equal(t, int64(i+1), s.seq)
	}
	require.Greater(t, last, int64(10))

	r := c.result("sessions.resume", fmt.Sprintf(`{"sessionId":%q,"epoch":"other-epoch","afterSeq":3}`, sid))
	require.Equal(t, false, r["ok"])
	require.Equal(t, "epoch", r["reason"])

	m := c.call("sessions.resume", fmt.Sprintf(`{"sessionId":%q,"epoch":%q,"afterSeq":999999}`, sid, epoch))
	require.Equal(t, -32602, errCode(m))

	r = c.result("sessions.resume", fmt.Sprintf(`{"sessionId":%q,"epoch":%q,"afterSeq":1}`, sid, epoch))
	require.Equal(t, false, r["ok"])
	require.Equal(t, "gap", r["reason"])

	r = c.result("sessions.resume", fmt.Sprintf(`{"sessionId":%q,"epoch":%q,"afterSeq":%d}`, sid, epoch, last-3))
	require.Equal(t, true, r["ok"])
	sigs := r["signals"].([]any)
	require.Len(t, sigs, 3)
	for i, x := range sigs {
		n, _ := x.(map[string]any)["seq"].(json.Number).Int64()
		require.Equal(t, last-2+int64(i), n)
	}
	r = c.result("sessions.resume", fmt.Sprintf(`{"sessionId":%q,"epoch":%q,"afterSeq":%d}`, sid, epoch, last))
	require.Equal(t, true, r["ok"])
}

func TestFieldCase_B28_NUL(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial()
	c.hello()

	m := c.call("sessions.create", `{"title":"a\u0000b"}`)
	require.NotEqual(t, -32603, errCode(m), "%v", m)
	if m["error"] != nil {
		require.Equal(t, -32602, errCode(m))
		require.Contains(t, m["error"].(map[string]any)["message"], "title")
	} else {
		require.Equal(t, "a\x00b", m["result"].(map[string]any)["title"])
	}

	sid := c.newSession()
	c.result("chat.send", fmt.Sprintf(`{"sessionId":%q,"prompt":"nul\u0000here"}`, sid))
	for i, s := range c.runSignals(sid) {
		require.Equal(t, int64(i+1), s.seq, "no $seq gap")
	}
	r := c.result("sessions.loadEvents", fmt.Sprintf(`{"sessionId":%q}`, sid))
	evs := r["events"].([]any)
	require.NotEmpty(t, evs)
	first := evs[0].(map[string]any)
	require.Equal(t, "user-prompt", first["kind"])
	require.Equal(t, "nul\x00here", first["text"], "the prompt is stored and returned exactly")
}

func TestFieldCase_B29_CloseCancelsRequests(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial()
	c.hello()
	// A connection's handler contexts derive from the connection context: closing the socket
	// cancels them. Observe it from the server side.
	var srvConn *conn
	require.Eventually(t, func() bool {
		e.srv.connsMu.Lock()
		defer e.srv.connsMu.Unlock()
		for x := range e.srv.conns {
			if x.helloed.Load() {
				srvConn = x
			}
		}
		return srvConn != nil
	}, 5*time.Second, 10*time.Millisecond)
	reqCtx, cancel := context.WithTimeout(srvConn.ctx, time.Minute)
	defer cancel()
	require.NoError(t, c.ws.Close(websocket.StatusNormalClosure, ""))
	select {
	case <-reqCtx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("closing the WebSocket did not cancel the connection's request contexts")
	}
	// The server still serves others.
	d := e.dial()
	d.hello()
	d.result("sessions.list", `{}`)
}

// TestJSONRPCSpecExamples replays the JSON-RPC 2.0 §7 examples with zidane's methods.
func TestJSONRPCSpecExamples(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial()
	c.hello()
	steps := []struct {
		in   string
		want func(t *testing.T, f []byte)
	}{
		{`{"jsonrpc":"2.0","method":"$/ping","params":[42,23],"id":1}`, func(t *testing.T, f []byte) {
			m := decodeObj(t, f)
			requireError(t, m, -32602, "1")
			require.Equal(t, "params must be an object.", m["error"].(map[string]any)["message"])
		}},
		{`{"jsonrpc":"2.0","method":"$/ping","params":{},"id":3}`, func(t *testing.T, f []byte) {
			requireID(t, decodeObj(t, f), "3")
		}},
		{`{"jsonrpc":"2.0","method":"update","params":[1,2,3,4,5]}`, nil},
		{`{"jsonrpc":"2.0","method":"foobar"}`, nil},
		{`{"jsonrpc":"2.0","method":"foobar","id":"1"}`, func(t *testing.T, f []byte) {
			requireError(t, decodeObj(t, f), -32601, `"1"`)
		}},
		{`{"jsonrpc":"2.0","method":"foobar,"params":"bar","baz]`, func(t *testing.T, f []byte) {
			requireError(t, decodeObj(t, f), -32700, "null")
		}},
		{`{"jsonrpc":"2.0","method":1,"params":"bar"}`, func(t *testing.T, f []byte) {
			requireError(t, decodeObj(t, f), -32600, "null")
		}},
		{`[{"jsonrpc":"2.0","method":"sum","params":[1,2,4],"id":"1"},{"jsonrpc":"2.0","method"]`, func(t *testing.T, f []byte) {
			requireError(t, decodeObj(t, f), -32700, "null")
		}},
		{`[]`, func(t *testing.T, f []byte) { requireError(t, decodeObj(t, f), -32600, "null") }},
		{`[1]`, func(t *testing.T, f []byte) { require.Len(t, decodeArr(t, f), 1) }},
		{`[1,2,3]`, func(t *testing.T, f []byte) { require.Len(t, decodeArr(t, f), 3) }},
		{`[
			{"jsonrpc":"2.0","method":"$/ping","params":{},"id":"1"},
			{"jsonrpc":"2.0","method":"notify_hello","params":[7]},
			{"jsonrpc":"2.0","method":"daemon.info","params":{},"id":"2"},
			{"foo":"boo"},
			{"jsonrpc":"2.0","method":"foo.get","params":{"name":"myself"},"id":"5"},
			{"jsonrpc":"2.0","method":"daemon.info","id":"9"}
		]`, func(t *testing.T, f []byte) {
			a := decodeArr(t, f)
			require.Len(t, a, 5)
			codes := map[string]int{}
			for _, m := range a {
				b, _ := json.Marshal(m["id"])
				codes[string(b)] = errCode(m)
			}
			require.Equal(t, map[string]int{`"1"`: 0, `"2"`: 0, "null": -32600, `"5"`: -32601, `"9"`: 0}, codes)
		}},
		{`[{"jsonrpc":"2.0","method":"notify_sum","params":[1,2,4]},{"jsonrpc":"2.0","method":"notify_hello","params":[7]}]`, nil},
	}
	for _, s := range steps {
		c.send(s.in)
		if s.want == nil {
			c.expectNothing(300 * time.Millisecond)
			continue
		}
		s.want(t, c.next())
	}
}
