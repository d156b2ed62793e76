package protocol

import "sync"

// Delivery says which of the connections a signal's scopes permit receive it (the schema's
// signal "delivery"; docs/schema-guide.md "Signals and their audience").
type Delivery string

const (
	// DeliveryAll: every permitted connection that completed the handshake.
	DeliveryAll Delivery = "all"
	// DeliveryOrigin: only the connection that started the work (the publisher's origin).
	DeliveryOrigin Delivery = "origin"
	// DeliveryOthers: every permitted connection except the one that caused the signal.
	DeliveryOthers Delivery = "others"
	// DeliveryWatchers: only permitted connections that asked to watch the signal's key.
	DeliveryWatchers Delivery = "watchers"
)

// Receives reports whether a connection whose token has scope may receive the signal: the scope
// is, or includes, one of the signal's Scopes (admin includes chat, so an admin connection
// receives chat signals; a machine connection receives none of them, field case B41).
func (s *SignalSpec) Receives(scope Scope) bool {
	for _, want := range s.Scopes {
		if scope.Allows(want) {
			return true
		}
	}
	return false
}

var signalIndex = sync.OnceValue(func() map[string]*SignalSpec {
	m := make(map[string]*SignalSpec, len(signalTable))
	for _, s := range signalTable {
		m[s.Kind] = s
	}
	return m
})
