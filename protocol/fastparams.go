package protocol

import (
	"unicode/utf16"
	"unicode/utf8"
)

// fastParams is implemented by the generated params types the schema lets be read in one pass
// (protocol/params_gen.go, emitted by gen/gogen_fast.go): DecodeParams tries decodeFast first.
type fastParams interface {
	decodeFast(s *pscan) bool
}

// pscan reads params in one pass, straight into the generated types, checking the schema's
// bounds on the way (issue 10: "requests decoded once into their generated types"). It reads a
// subset of JSON with certainty and answers false on anything else: a member name with an
// escape, an unknown or repeated member, null, a number with a fraction or an exponent, a lone
// surrogate, a value out of its bounds. DecodeParams then runs the full check (duplicate scan,
// the schema validator, encoding/json), which gives the precise error or, for valid input
// outside the subset, the value. So the fast path never accepts what the full check refuses and
// never decodes a value differently; TestFastParamsAgree and FuzzFastParamsAgree hold it to that.
//
// The figure it buys: DecodeParams of a chat.send went from 11 µs and 79 allocations to the
// numbers BenchmarkDecodeParams prints (docs/benchmarks.md).
type pscan struct {
	b []byte
	i int
}

func (s *pscan) ws() { s.i = skipWS(s.b, s.i) }

// open consumes c ('{' or '[') after whitespace.
func (s *pscan) open(c byte) bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// atEnd reports whether only whitespace is left.
func (s *pscan) atEnd() bool {
	s.ws()
	return s.i == len(s.b)
}

// member reads the next member name of the object open reads, up to its colon; done at the
// object's end. first says no member was read yet.
func (s *pscan) member(first bool) (name []byte, done, ok bool) {
	s.ws()
	if s.i >= len(s.b) {
		return nil, false, false
	}
	if s.b[s.i] == '}' {
		s.i++
		return nil, true, true
	}
	if !first {
		if s.b[s.i] != ',' {
			return nil, false, false
		}
		s.i++
		s.ws()
	}
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false, false
	}
	s.i++
	start := s.i
	for s.i < len(s.b) && s.b[s.i] != '"' {
		if c := s.b[s.i]; c == '\\' || c < 0x20 {
			return nil, false, false
		}
		s.i++
	}
	if s.i >= len(s.b) {
		return nil, false, false
	}
	name = s.b[start:s.i]
	s.i++
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != ':' {
		return nil, false, false
	}
	s.i++
	return name, false, true
}

// emptyObject reads {}.
func (s *pscan) emptyObject() bool {
	if !s.open('{') {
		return false
	}
	_, done, ok := s.member(true)
	return ok && done
}

// item reports whether the array open reads has another item (consuming the comma before it);
// done at the array's end.
func (s *pscan) item(first bool) (done, ok bool) {
	s.ws()
	if s.i >= len(s.b) {
		return false, false
	}
	if s.b[s.i] == ']' {
		s.i++
		return true, true
	}
	if !first {
		if s.b[s.i] != ',' {
			return false, false
		}
		s.i++
	}
	return false, true
}

// once marks member bit as seen; false when it was already (a repeated member).
func once(seen *uint64, bit uint64) bool {
	if *seen&bit != 0 {
		return false
	}
	*seen |= bit
	return true
}

// str reads a string.
func (s *pscan) str() (string, bool) {
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return "", false
	}
	s.i++
	start := s.i
	for s.i < len(s.b) {
		switch c := s.b[s.i]; {
		case c == '"':
			if !utf8.Valid(s.b[start:s.i]) { // encoding/json would write U+FFFD
				return "", false
			}
			v := string(s.b[start:s.i])
			s.i++
			return v, true
		case c == '\\':
			return s.strEscaped(start)
		case c < 0x20:
			return "", false
		}
		s.i++
	}
	return "", false
}

// strEscaped finishes a string that has an escape at s.i, its text starting at start.
func (s *pscan) strEscaped(start int) (string, bool) {
	buf := make([]byte, s.i-start, s.i-start+64)
	copy(buf, s.b[start:s.i])
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return string(buf), utf8.Valid(buf)
		case c < 0x20:
			return "", false
		case c != '\\':
			buf = append(buf, c)
			s.i++
			continue
		}
		if s.i+1 >= len(s.b) {
			return "", false
		}
		e := s.b[s.i+1]
		s.i += 2
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := s.hex4()
			if !ok {
				return "", false
			}
			if utf16.IsSurrogate(r) {
				// Only a high surrogate followed by a low one makes a character; anything else
				// is left to encoding/json, which writes U+FFFD.
				if r >= 0xDC00 || s.i+1 >= len(s.b) || s.b[s.i] != '\\' || s.b[s.i+1] != 'u' {
					return "", false
				}
				s.i += 2
				lo, ok := s.hex4()
				if !ok || lo < 0xDC00 || lo > 0xDFFF {
					return "", false
				}
				r = utf16.DecodeRune(r, lo)
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return "", false
		}
	}
	return "", false
}

func (s *pscan) hex4() (rune, bool) {
	if s.i+4 > len(s.b) {
		return 0, false
	}
	var r rune
	for _, c := range s.b[s.i : s.i+4] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	s.i += 4
	return r, true
}

// int reads an integer written without a fraction or an exponent, of at most 16 digits (int53's
// range), within lo and hi.
func (s *pscan) int(lo, hi int64) (int64, bool) {
	s.ws()
	neg := s.i < len(s.b) && s.b[s.i] == '-'
	if neg {
		s.i++
	}
	start := s.i
	var v int64
	for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
		v = v*10 + int64(s.b[s.i]-'0')
		s.i++
	}
	n := s.i - start
	if n == 0 || n > 16 || (n > 1 && s.b[start] == '0') {
		return 0, false
	}
	if s.i < len(s.b) {
		if c := s.b[s.i]; c == '.' || c == 'e' || c == 'E' {
			return 0, false
		}
	}
	if neg {
		v = -v
	}
	return v, lo <= v && v <= hi
}

// bool reads true or false.
func (s *pscan) bool() (bool, bool) {
	s.ws()
	rest := s.b[s.i:]
	switch {
	case len(rest) >= 4 && string(rest[:4]) == "true":
		s.i += 4
		return true, true
	case len(rest) >= 5 && string(rest[:5]) == "false":
		s.i += 5
		return false, true
	}
	return false, false
}

// lenIn reports whether v has between min and max characters (code points, as JSON Schema counts
// them); max < 0: no upper bound. Bytes bound characters (1 to 4 bytes each), so most strings
// are not counted.
func lenIn(v string, min, max int) bool {
	if max >= 0 && len(v) > max && utf8.RuneCountInString(v) > max {
		return false
	}
	if min > 0 && len(v) < 4*min && utf8.RuneCountInString(v) < min {
		return false
	}
	return true
}
