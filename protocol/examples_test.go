package protocol

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestExamplesRoundTrip: every example message under schema/examples validates against the
// schema, decodes into the generated Go types and re-encodes to the same JSON (the TypeScript side
// checks the same files with satisfies, in sdk-ts).
func compact(t *testing.T, b []byte) string {
	var buf bytes.Buffer
	require.NoError(t, json.Compact(&buf, b))
	return buf.String()
}

func TestExamplesRoundTrip(t *testing.T) {
	files, err := filepath.Glob("../schema/examples/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	contract, err := NewContract()
	require.NoError(t, err)
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			var msg struct {
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
				Result json.RawMessage `json:"result"`
				Error  *Error          `json:"error"`
			}
			require.NoError(t, json.Unmarshal(b, &msg))
			switch {
			case strings.HasPrefix(name, "signal."):
				require.Equal(t, "ipc.signal", msg.Method)
				require.NoError(t, contract.CheckSignal(msg.Params))
				sig, err := DecodeSignal(msg.Params)
				require.NoError(t, err)
				_, unknown := sig.(*UnknownSignal)
				require.False(t, unknown, "example of a signal kind the schema lacks")
				out, err := Marshal(sig)
				require.NoError(t, err)
				want := compact(t, msg.Params)
				if i := strings.LastIndex(want, `,"$seq":`); i > 0 { // the hub adds $seq last
					want = want[:i] + "}"
				}
				assert.Equal(t, want, string(out), "re-encoded byte for byte")
			case strings.HasPrefix(name, "error."):
				require.NotNil(t, msg.Error)
				assert.NoError(t, contract.CheckError(msg.Error))
			case strings.Contains(name, ".request"):
				method := name[:strings.Index(name, ".request")]
				spec := LookupMethod(method)
				require.NotNil(t, spec, method)
				p := spec.NewParams()
				require.NoError(t, DecodeParams(method, msg.Params, p))
				out, err := Marshal(p)
				require.NoError(t, err)
				assert.Equal(t, compact(t, msg.Params), string(out), "re-encoded byte for byte")
			case strings.Contains(name, ".result"):
				method := name[:strings.Index(name, ".result")]
				spec := LookupMethod(method)
				require.NotNil(t, spec, method)
				require.NoError(t, contract.CheckResult(method, msg.Result))
				r := spec.NewResult()
				require.NoError(t, json.Unmarshal(msg.Result, r))
				out, err := Marshal(r)
				require.NoError(t, err)
				assert.Equal(t, compact(t, msg.Result), string(out), "re-encoded byte for byte")
			default:
				t.Fatalf("example %s: name it <method>.request, <method>.result-*, signal.* or error.*", name)
			}
		})
	}
}
