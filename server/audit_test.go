package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/protocol"
)

// auditDetails are the details of the newest audit entries of one action.
func auditDetails(t *testing.T, admin *testConn, action string) []string {
	t.Helper()
	var out []string
	for _, x := range admin.result("audit.list", `{"limit":1000}`)["entries"].([]any) {
		en := x.(map[string]any)
		if en["action"] == action {
			out = append(out, en["detail"].(string))
		}
	}
	return out
}

// TestEveryAuditedMethodLeavesAnEntry (issue 22 item 5): the audit log is complete by
// construction. For every method the schema marks x-audit (the generated method table), a call
// leaves a call entry naming the method and its outcome, whatever the handler does: called here
// by a chat token (Forbidden for admin methods) and by an admin token with empty params
// (InvalidParams or the handler's own refusal). A method added with x-audit is covered without
// touching this test; one that records nothing fails it.
func TestEveryAuditedMethodLeavesAnEntry(t *testing.T) {
	e := newEnv(t, nil)
	chat := e.dial()
	chat.hello()
	admin := e.dialAs(e.mint("admin"))
	var audited []*protocol.MethodSpec
	for _, m := range protocol.Methods() {
		if m.Audited {
			audited = append(audited, m)
		}
	}
	require.GreaterOrEqual(t, len(audited), 8, "the schema marks the security-relevant methods x-audit")
	for _, m := range audited {
		for i, c := range []*testConn{chat, admin} {
			if m.Scope == protocol.ScopeMachine {
				continue // machine connections call nothing else; covered below
			}
			if m.Name == protocol.MethodTokensRevokeSelf { // signs its caller out: a throwaway token
				c = e.dialAs(e.mint([]string{"chat", "admin"}[i]))
			}
			before := len(auditDetails(t, admin, "call"))
			c.call(m.Name, `{}`)
			details := auditDetails(t, admin, "call")
			require.Len(t, details, before+1, "%s left no audit entry", m.Name)
			assert.True(t, strings.HasPrefix(details[0], m.Name+" "), "%q names the method", details[0])
			assert.Contains(t, details[0], " → ", "%q names the outcome", details[0])
		}
	}
	// A machine connection's registration is recorded too.
	machine := e.dialAs(e.mint("machine"))
	machine.result("machine.register", `{"name":"build-1"}`)
	assert.Contains(t, auditDetails(t, admin, "call")[0], `machine.register name="build-1" → ok`)
}

// TestFieldCase_T14_SandboxChangeIsAudited: loosening a session's sandbox, the approval mode,
// the settings and a token revocation each leave an entry saying who, what and the outcome; a
// refused loosening (a chat token) is recorded as refused.
func TestFieldCase_T14_SandboxChangeIsAudited(t *testing.T) {
	e := newEnv(t, nil)
	chat := e.dial()
	chat.hello()
	id := chat.newSession()
	admin := e.dialAs(e.mint("admin"))
	m := chat.call("sessions.setSandbox", fmt.Sprintf(`{"sessionId":%q,"policy":"workspace-write+network"}`, id))
	require.Equal(t, protocol.CodeForbidden, errCode(m))
	admin.call("sessions.setSandbox", fmt.Sprintf(`{"sessionId":%q,"policy":"workspace-write+network"}`, id))
	admin.result("approvals.setMode", fmt.Sprintf(`{"sessionId":%q,"mode":"auto-edit"}`, id))
	admin.result("settings.set", `{"settings":{"theme":"dark"}}`)
	_, victim, err := e.st.CreateToken(t.Context(), "victim-api", "chat")
	require.NoError(t, err)
	admin.result("tokens.revoke", fmt.Sprintf(`{"name":%q}`, victim.Name))

	calls := strings.Join(auditDetails(t, admin, "call"), "\n")
	assert.Contains(t, calls, fmt.Sprintf(`sessions.setSandbox sessionId=%q policy="workspace-write+network" → error %d`, id, protocol.CodeForbidden), "the chat token's refused attempt")
	assert.Regexp(t, fmt.Sprintf(`sessions.setSandbox sessionId=%q policy="workspace-write\+network" → (ok|error -32014)`, id), calls, "the admin's change (refused where the kernel has no network namespace)")
	assert.Contains(t, calls, fmt.Sprintf(`approvals.setMode sessionId=%q mode="auto-edit" → ok`, id))
	assert.Contains(t, calls, `settings.set settings={"theme":"dark"} → ok`)
	assert.Contains(t, calls, fmt.Sprintf(`tokens.revoke name=%q → ok`, victim.Name))
	// The session's entries are found by its id.
	bySession := admin.result("audit.list", fmt.Sprintf(`{"sessionId":%q}`, id))["entries"].([]any)
	assert.GreaterOrEqual(t, len(bySession), 3)
}

// TestEveryResourceHasABound (issue 22 item 2): every method the schema marks x-resource takes a
// per-connection resource, and every such kind has a positive bound in connResourceBounds.
func TestEveryResourceHasABound(t *testing.T) {
	kinds := map[string][]string{}
	for _, m := range protocol.Methods() {
		if m.Resource != "" {
			kinds[m.Resource] = append(kinds[m.Resource], m.Name)
		}
	}
	require.NotEmpty(t, kinds)
	for kind, methods := range kinds {
		assert.Positive(t, connResourceBounds[kind], "%v take a per-connection %s with no bound", methods, kind)
	}
}
