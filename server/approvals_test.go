package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/store"
)

// dialAs connects with the token tok (instead of the env's chat token) and says hello.
func (e *testEnv) dialAs(tok string) *testConn {
	saved := e.token
	e.token = tok
	defer func() { e.token = saved }()
	c := e.dial()
	c.hello()
	return c
}

// TestApprovalModeScopes: a chat token may set ask or locked, only an admin token auto-edit; each
// change is announced (approval:mode) and audited with the token's name.
func TestApprovalModeScopes(t *testing.T) {
	e := newEnv(t, nil)
	chat := e.dial()
	chat.hello()
	sid := chat.newSession()
	assert.Equal(t, "ask", chat.result("approvals.getMode", fmt.Sprintf(`{"sessionId":%q}`, sid))["mode"])

	m := chat.call("approvals.setMode", fmt.Sprintf(`{"sessionId":%q,"mode":"auto-edit"}`, sid))
	require.Equal(t, -32013, errCode(m), "%v", m)
	assert.Contains(t, m["error"].(map[string]any)["message"], "Only an admin token")
	assert.Equal(t, "locked", chat.result("approvals.setMode", fmt.Sprintf(`{"sessionId":%q,"mode":"locked"}`, sid))["mode"])
	assert.Equal(t, "ask", chat.result("approvals.setMode", fmt.Sprintf(`{"sessionId":%q,"mode":"ask"}`, sid))["mode"])
	m = chat.call("approvals.setMode", fmt.Sprintf(`{"sessionId":%q,"mode":"yolo"}`, sid))
	assert.Equal(t, -32602, errCode(m))

	adminTok := e.mint("admin")
	admin := e.dialAs(adminTok)
	assert.Equal(t, "auto-edit", admin.result("approvals.setMode", fmt.Sprintf(`{"sessionId":%q,"mode":"auto-edit"}`, sid))["mode"])
	assert.Equal(t, "auto-edit", chat.result("approvals.getMode", fmt.Sprintf(`{"sessionId":%q}`, sid))["mode"])
	entries := admin.result("audit.list", fmt.Sprintf(`{"sessionId":%q}`, sid))["entries"].([]any)
	var got, calls []string
	for _, x := range entries {
		en := x.(map[string]any)
		if en["action"] == "call" { // the dispatcher's entry of each call (x-audit), refused ones too
			calls = append(calls, en["detail"].(string))
			continue
		}
		got = append(got, en["action"].(string)+" "+en["detail"].(string))
	}
	assert.Equal(t, []string{"mode mode auto-edit", "mode mode ask", "mode mode locked"}, got, "one effect entry per change")
	assert.Len(t, calls, 5, "every setMode call, the refused yolo and chat auto-edit included: %v", calls)
	assert.Contains(t, calls[len(calls)-1], `mode="auto-edit" → error -32013`)
	m = chat.call("audit.list", `{}`)
	assert.Equal(t, -32013, errCode(m), "audit.list is admin")
}

// TestSafelistAndAudit: safelist.list and safelist.revoke with a chat token; revocations of entries
// and tokens join the audit log with the name of the token that made them.
func TestSafelistAndAudit(t *testing.T) {
	e := newEnv(t, nil)
	chat := e.dial()
	chat.hello()
	root := e.srv.cfg.WorkspaceRoots[0]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ent, err := e.st.AddSafelist(ctx, store.SafelistEntry{ProjectRoot: root, Tool: "exec", Prefix: "git status", CreatedBy: "someone"}, "")
	require.NoError(t, err)

	es := chat.result("safelist.list", `{}`)["entries"].([]any)
	require.Len(t, es, 1)
	x := es[0].(map[string]any)
	assert.Equal(t, "git status", x["prefix"])
	assert.Equal(t, root, x["projectRoot"])
	assert.Empty(t, chat.result("safelist.list", `{"projectRoot":"/elsewhere"}`)["entries"])
	assert.Equal(t, true, chat.result("safelist.revoke", fmt.Sprintf(`{"id":%q}`, ent.ID))["revoked"])
	assert.Equal(t, false, chat.result("safelist.revoke", fmt.Sprintf(`{"id":%q}`, ent.ID))["revoked"])
	assert.Empty(t, chat.result("safelist.list", `{}`)["entries"])

	adminTok := e.mint("admin")
	admin := e.dialAs(adminTok)
	_, victim, err := e.st.CreateToken(ctx, "victim", "chat")
	require.NoError(t, err)
	adminTk, err := e.st.LookupToken(ctx, adminTok)
	require.NoError(t, err)
	victimName, adminName := victim.Name, adminTk.Name
	admin.result("tokens.revoke", fmt.Sprintf(`{"name":%q}`, victimName))
	entries := admin.result("audit.list", `{"limit":10}`)["entries"].([]any)
	var got []string
	for _, x := range entries {
		en := x.(map[string]any)
		got = append(got, en["action"].(string)+" "+en["actor"].(string))
	}
	assert.Contains(t, got, "token.revoke "+adminName)
	assert.Contains(t, got, "safelist.revoke "+chatName(t, e))
	assert.Contains(t, got, "safelist.add someone")
}

// chatName is the name of the env's chat token.
func chatName(t *testing.T, e *testEnv) string {
	t.Helper()
	tk, err := e.st.LookupToken(context.Background(), e.token)
	require.NoError(t, err)
	return tk.Name
}

// TestApprovalsAndQuestionsRefuseUnknown: answers to requests that are not pending are refused
// with a message that says what to do; empty lists are [].
func TestApprovalsAndQuestionsRefuseUnknown(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial()
	c.hello()
	sid := c.newSession()
	m := c.call("approvals.answer", fmt.Sprintf(`{"sessionId":%q,"requestId":"nope","decision":"allow"}`, sid))
	require.Equal(t, -32014, errCode(m))
	assert.Contains(t, m["error"].(map[string]any)["message"], "approvals.list")
	m = c.call("interactions.answer", fmt.Sprintf(`{"sessionId":%q,"requestId":"nope","answer":null}`, sid))
	require.Equal(t, -32014, errCode(m))
	assert.Empty(t, c.result("approvals.list", `{}`)["requests"])
	assert.Empty(t, c.result("interactions.list", fmt.Sprintf(`{"sessionId":%q}`, sid))["requests"])
	assert.Empty(t, c.result("queue.list", fmt.Sprintf(`{"sessionId":%q}`, sid))["items"])
	assert.Equal(t, false, c.result("queue.remove", fmt.Sprintf(`{"sessionId":%q,"runId":"x"}`, sid))["removed"])
	snap := c.result("plans.get", fmt.Sprintf(`{"sessionId":%q}`, sid))
	assert.Empty(t, snap["plans"])
	assert.Nil(t, snap["active"])
}
