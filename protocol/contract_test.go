package protocol

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestContractCatchesDrift(t *testing.T) {
	c, err := NewContract()
	require.NoError(t, err)
	good, _ := json.Marshal(ChatSendResult{RunID: "6f577015-ffbf-4204-ba81-320f71e76f46"})
	assert.NoError(t, c.CheckResult(MethodChatSend, good))
	assert.ErrorContains(t, c.CheckResult(MethodChatSend, []byte(`{"runId":"x","extra":1}`)), "extra")
	assert.ErrorContains(t, c.CheckResult(MethodChatSend, []byte(`{}`)), "runId")
	sig, _ := json.Marshal(&RunStartSignal{SessionID: "s", RunID: "r"})
	withSeq := append(sig[:len(sig)-1:len(sig)-1], []byte(`,"$seq":3}`)...)
	assert.NoError(t, c.CheckSignal(withSeq))
	assert.Error(t, c.CheckSignal([]byte(`{"kind":"run:start","sessionId":"s"}`)), "runId missing")
	ev, _ := json.Marshal(&EventSignal{SessionID: "s", Event: &MarkdownEvent{Text: "x", Streaming: true, TurnID: "t"}})
	assert.NoError(t, c.CheckSignal(ev))
	assert.Error(t, c.CheckSignal([]byte(`{"kind":"event","sessionId":"s","event":{"kind":"markdown","text":"x","turnId":"t"}}`)), "streaming missing")
	assert.NoError(t, c.CheckError(NewForbiddenError("", &ForbiddenErrorData{Needed: "admin", Scope: "chat"})))
}

// TestForwardCompatibleDecoding: an unknown field, enum value, union kind and signal kind all
// decode (field cases B24, B25).
func TestForwardCompatibleDecoding(t *testing.T) {
	s, err := DecodeSignal([]byte(`{"kind":"future:snapshot","sessionId":"s","snapshot":{"plans":[],"active":null},"$seq":44}`))
	require.NoError(t, err)
	u, ok := s.(*UnknownSignal)
	require.True(t, ok)
	assert.Equal(t, "future:snapshot", u.SignalKind())

	s, err = DecodeSignal([]byte(`{"kind":"event","sessionId":"s","runId":"r","event":{"kind":"diff","files":3},"newField":true}`))
	require.NoError(t, err)
	ev := s.(*EventSignal)
	assert.Equal(t, "diff", ev.Event.StreamEventKind())
	back, err := json.Marshal(ev)
	require.NoError(t, err)
	assert.JSONEq(t, `{"kind":"event","sessionId":"s","runId":"r","event":{"kind":"diff","files":3}}`, string(back))

	var sess Session
	require.NoError(t, json.Unmarshal([]byte(`{"id":"a","status":"paused","future":{"x":1}}`), &sess))
	assert.Equal(t, SessionStatus("paused"), sess.Status)
	assert.False(t, sess.Status.IsKnown())
	assert.True(t, SessionStatusIdle.IsKnown())

	var e Error
	require.NoError(t, json.Unmarshal([]byte(`{"code":-32099,"message":"new","data":{"x":1}}`), &e))
	assert.Equal(t, -32099, e.Code)

	_, err = DecodeStreamEvent([]byte(`{"kind":"markdown","text":5}`))
	assert.Error(t, err, "a known kind with a bad body is an error")
	_, err = DecodeStreamEvent([]byte(`{"text":"no kind"}`))
	assert.Error(t, err)
}

func TestContractCheckFrame(t *testing.T) {
	c, err := NewContract()
	require.NoError(t, err)
	methods := map[string]string{"7": MethodChatSend}
	lookup := func(id json.RawMessage) string { m := methods[string(id)]; delete(methods, string(id)); return m }
	assert.NoError(t, c.CheckFrame([]byte(`{"jsonrpc":"2.0","id":7,"result":{"runId":"r"}}`), lookup))
	methods["8"] = MethodChatSend
	assert.Error(t, c.CheckFrame([]byte(`{"jsonrpc":"2.0","id":8,"result":{"runId":"r","x":1}}`), lookup))
	assert.NoError(t, c.CheckFrame([]byte(`{"jsonrpc":"2.0","id":9,"result":{"anything":1}}`), lookup), "unknown id: not checked")
	assert.Error(t, c.CheckFrame([]byte(`{"jsonrpc":"2.0","method":"ipc.signal","params":{"kind":"run:end","sessionId":"s"}}`), lookup))
	assert.NoError(t, c.CheckFrame([]byte(`[{"jsonrpc":"2.0","id":1,"result":{}}]`), lookup), "batches are not checked here")
}
