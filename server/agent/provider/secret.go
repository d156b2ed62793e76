package provider

import (
	"fmt"
	"log/slog"

	"github.com/zidane-server/zidane/protocol"
)

// Secret holds an API key so that printing, logging or marshalling whatever holds it shows
// "[redacted]": the key sits behind a pointer, which fmt never follows inside a struct, and every
// formatting method hides it. Reveal is the one way to read it.
type Secret struct{ v *string }

// NewSecret wraps a key ("" makes an empty Secret).
func NewSecret(s string) Secret {
	if s == "" {
		return Secret{}
	}
	return Secret{v: &s}
}

// Reveal returns the key, for the request header only.
func (s Secret) Reveal() string {
	if s.v == nil {
		return ""
	}
	return *s.v
}

// IsSet reports whether there is a key.
func (s Secret) IsSet() bool { return s.v != nil && *s.v != "" }

// String hides the key.
func (s Secret) String() string {
	if !s.IsSet() {
		return ""
	}
	return "[redacted]"
}

// GoString hides the key.
func (s Secret) GoString() string { return s.String() }

// Format hides the key for every verb.
func (s Secret) Format(f fmt.State, _ rune) { fmt.Fprint(f, s.String()) }

// MarshalJSON hides the key.
func (s Secret) MarshalJSON() ([]byte, error) { return protocol.Marshal(s.String()) }

// LogValue hides the key.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }
