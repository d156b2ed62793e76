package e2e

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/store/storetest"
)

// TestScopeMatrix calls every method of the schema with a token of every scope and checks that
// the scope rules of schema/protocol.json decide: allowed calls never answer Forbidden (-32013) or
// WrongConnectionKind (-32040); refused ones answer exactly that, naming the scope needed.
func TestScopeMatrix(t *testing.T) {
	s := startServer(t, serverOpts{dbURL: storetest.URL(t)})
	for _, scope := range []protocol.Scope{protocol.ScopeChat, protocol.ScopeAdmin, protocol.ScopeMachine} {
		t.Run(string(scope), func(t *testing.T) {
			c := dial(t, s, s.mintToken("matrix-"+string(scope), string(scope)))
			h := c.hello()
			assert.Equal(t, protocol.MethodsFor(scope), h.Methods, "hello lists what the scope may call")
			methods := protocol.Methods()
			for i, m := range methods { // tokens.revokeSelf signs the caller out: it goes last
				if m.Name == protocol.MethodTokensRevokeSelf {
					methods = append(append(methods[:i:i], methods[i+1:]...), m)
					break
				}
			}
			for _, m := range methods {
				if m.Name == protocol.MethodIPCHello {
					continue // a second hello is refused for another reason
				}
				f := c.call(m.Name, map[string]any{})
				wrongKind := m.Scope != protocol.ScopeNone && (m.Scope == protocol.ScopeMachine) != (scope == protocol.ScopeMachine)
				switch {
				case wrongKind:
					require.NotNil(t, f.Error, "%s with %s: %s", m.Name, scope, f.Raw)
					assert.Equal(t, protocol.CodeWrongConnectionKind, f.Error.Code, "%s with %s", m.Name, scope)
				case !scope.Allows(m.Scope):
					require.NotNil(t, f.Error, "%s with %s: %s", m.Name, scope, f.Raw)
					assert.Equal(t, protocol.CodeForbidden, f.Error.Code, "%s with %s", m.Name, scope)
					assert.Regexp(t, fmt.Sprintf("needs an? %s token", m.Scope), f.Error.Message)
				default:
					if f.Error != nil {
						assert.NotContains(t, []int{protocol.CodeForbidden, protocol.CodeWrongConnectionKind, protocol.CodeMethodNotFound, protocol.CodeHandshakeRequired}, f.Error.Code, "%s with %s: %s", m.Name, scope, f.Raw)
					}
				}
			}
		})
	}
}
