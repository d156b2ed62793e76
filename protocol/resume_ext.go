package protocol

// Hand-written methods on this schema's generated types live in *_ext.go files: the generator's
// golden test (gen/gen_test.go) builds the hand-written protocol files against another schema's
// types and leaves these out.

import (
	"slices"
	"strconv"
)

// AppendJSON appends the answer as Marshal writes it, splicing each replayed signal's stored
// encoding (UnknownSignal.Raw, which the server's replay log holds as protocol.Marshal wrote it)
// without a second pass over it. Encoding a 2000-signal answer through encoding/json spent about
// three quarters of the server's CPU of a resume re-validating those bytes (the resume figure of
// docs/benchmarks.md). TestResumeAppendJSON keeps it equal to Marshal's output and fails when the
// generated types gain a field.
func (r *SessionsResumeResult) AppendJSON(dst []byte) ([]byte, error) {
	size := 32
	for _, s := range r.Signals {
		size += 32
		if u := rawSignal(s.Signal); u != nil {
			size += len(u)
		}
	}
	dst = slices.Grow(dst, size)
	dst = append(dst, `{"ok":`...)
	dst = strconv.AppendBool(dst, r.OK)
	if r.Signals != nil { // omitzero: a nil slice is left out, an empty one is []
		dst = append(dst, `,"signals":[`...)
		for i, s := range r.Signals {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"seq":`...)
			dst = strconv.AppendInt(dst, s.Seq, 10)
			dst = append(dst, `,"signal":`...)
			if raw := rawSignal(s.Signal); raw != nil {
				dst = append(dst, raw...)
			} else {
				b, err := Marshal(s.Signal)
				if err != nil {
					return nil, err
				}
				dst = append(dst, b...)
			}
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	if r.Reason != nil {
		b, err := Marshal(r.Reason)
		if err != nil {
			return nil, err
		}
		dst = append(dst, `,"reason":`...)
		dst = append(dst, b...)
	}
	return append(dst, '}'), nil
}

// rawSignal returns the stored encoding of an UnknownSignal, or nil.
func rawSignal(s Signal) []byte {
	if u, ok := s.(*UnknownSignal); ok && u != nil {
		return u.Raw
	}
	return nil
}
