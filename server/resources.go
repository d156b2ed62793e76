package server

// connResourceBounds is the per-connection bound of every kind of resource a method takes
// (x-resource in the schema; docs/security.md "Limits"): a call past it is refused with a
// message naming the bound and what to do. TestEveryResourceHasABound checks that every kind the
// schema names has one here.
var connResourceBounds = map[string]int{
	"terminal":     maxTerminalsPerConn,
	"clone":        maxClonesPerConn,
	"media-ticket": maxMediaTickets,
	// watch: repositories git.watch watches; every watch kind also shares the server-wide cap
	// Limits.MaxWatches on kernel watches (field case T10).
	"watch": maxWatchesPerConn,
	// oauth-flow: MCP sign-ins begun and not yet completed or expired (handlers_auth.go).
	"oauth-flow": maxOAuthFlowsPerConn,
}
