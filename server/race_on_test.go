//go:build race

package server

// raceSlowdown multiplies the tests' time budgets (waits for a frame, handshake timeouts) in a
// binary built with -race: the race detector makes code 2-20x slower and more so on a shared
// 2-core CI machine (https://go.dev/doc/articles/race_detector#Runtime_Overheads). A budget
// scaled by it still fails a test whose answer never comes.
const raceSlowdown = 10
