package protocol

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestResumeAppendJSON: SessionsResumeResult.AppendJSON writes what Marshal writes, and the
// answer EncodeResult frames from it is the one it frames from Marshal's bytes.
func TestResumeAppendJSON(t *testing.T) {
	// The hand-written encoder knows these fields; a field added to the schema fails here until
	// AppendJSON writes it too.
	fields := func(v any) []string {
		var out []string
		rt := reflect.TypeOf(v)
		for i := range rt.NumField() {
			out = append(out, rt.Field(i).Name+" "+rt.Field(i).Tag.Get("json"))
		}
		return out
	}
	require.Equal(t, []string{"OK ok", "Signals signals,omitzero", "Reason reason,omitempty"}, fields(SessionsResumeResult{}))
	require.Equal(t, []string{"Seq seq", "Signal signal"}, fields(ReplayedSignal{}))

	stored, err := Marshal(&RunStartSignal{SessionID: "s\u2028<&>", RunID: "r"})
	require.NoError(t, err)
	gap := ResumeFailureGap
	for name, r := range map[string]*SessionsResumeResult{
		"signals": {OK: true, Signals: []ReplayedSignal{
			{Seq: 7, Signal: &UnknownSignal{Kind: "run:start", Raw: stored}},
			{Seq: 8, Signal: &RunStartSignal{SessionID: "typed", RunID: "r2"}},
			{Seq: 9, Signal: &UnknownSignal{Kind: "future:kind"}},
			{Seq: 10},
		}},
		"empty":   {OK: true, Signals: []ReplayedSignal{}},
		"nil":     {OK: true},
		"failure": {OK: false, Reason: &gap},
	} {
		t.Run(name, func(t *testing.T) {
			want, err := Marshal(r)
			require.NoError(t, err)
			got, err := r.AppendJSON([]byte("head:"))
			require.NoError(t, err)
			require.Equal(t, "head:"+string(want), string(got))

			framed, err := EncodeResult(ID("1"), r)
			require.NoError(t, err)
			require.Equal(t, string(appendResult(ID("1"), want)), string(framed))
		})
	}
}
