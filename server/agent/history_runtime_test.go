package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/agent/provider"
	"github.com/zidane-server/zidane/server/agent/provider/scripted"
	"github.com/zidane-server/zidane/server/store"
	"github.com/zidane-server/zidane/server/store/storetest"
)

// checkingModel is a model with a small context window that checks every request against one
// pass over the session's whole conversation at that moment (historyFrom of the conversation's
// snapshot, trimByPass): the messages kept, and max_tokens from their tokens. It answers at
// random: text, thinking, parallel lookup calls with arguments of any size, errors, a cut answer,
// pauses a cancel can fall into. Every prompt is "<session>|<n>|...".
type checkingModel struct {
	t              *testing.T
	window, maxOut int
	rt             atomic.Pointer[Runtime]
	mu             sync.Mutex
	rng            *rand.Rand
	dropped        map[string]int // by prompt: the most exchanges a turn of its run dropped
	requests       int
	maxDropped     int
}

func (m *checkingModel) Name() string { return "chk" }

func (m *checkingModel) Models(context.Context) ([]provider.Model, error) {
	return []provider.Model{{ID: "chk/m", Provider: "chk", Name: "m", ContextWindow: m.window}}, nil
}

func (m *checkingModel) intn(n int) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rng.IntN(n)
}

func (m *checkingModel) Stream(ctx context.Context, req *provider.Request, on func(provider.Event) error) (provider.Result, error) {
	t := m.t
	prompt := ""
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == provider.RoleUser {
			prompt = req.Messages[i].Text
			break
		}
	}
	sid, _, _ := strings.Cut(prompt, "|")
	whole := historyFrom(m.rt.Load().conv.snapshot(sid))
	fixed := textTokens(req.System) + toolsTokens(req.Tools)
	reserve := answerReserve(m.window, m.maxOut)
	want, dropped, ok := trimByPass(whole, m.window-reserve-fixed)
	assert.True(t, ok, "a request was sent for a history that does not fit")
	if len(want) == 0 {
		assert.Empty(t, req.Messages)
	} else {
		assert.Equal(t, want, req.Messages, "session %s, prompt %.40q: the messages kept", sid, prompt)
	}
	validHistory(t, req.Messages)
	n := 0
	for _, msg := range want {
		n += estimateTokens(msg)
	}
	assert.Equal(t, answerTokens(m.window, m.maxOut, fixed+n), req.MaxOutputTokens, "session %s: max tokens", sid)
	seen := deepMsgs(req.Messages)
	m.mu.Lock()
	m.requests++
	m.maxDropped = max(m.maxDropped, dropped)
	m.dropped[prompt] = max(m.dropped[prompt], dropped)
	m.mu.Unlock()

	var calls []provider.ToolCall
	stop := provider.StopEndTurn
	for range 1 + m.intn(3) {
		var ev provider.Event
		switch m.intn(9) {
		case 0, 1, 2:
			ev = &provider.TextDelta{Text: strings.Repeat("a", m.intn(300))}
		case 3:
			ev = &provider.ThinkingDelta{Text: strings.Repeat("h", m.intn(100))}
		case 4, 5:
			args, _ := json.Marshal(map[string]string{"query": strings.Repeat("q", m.intn(400))})
			c := provider.ToolCall{ID: fmt.Sprintf("call_%d", m.intn(1<<30)), Name: scripted.LookupTool.Name, Arguments: args}
			calls = append(calls, c)
			ev = &provider.ToolCallDone{Call: c}
		case 6:
			select {
			case <-time.After(time.Duration(m.intn(20)) * time.Millisecond):
			case <-ctx.Done():
				return provider.Result{}, ctx.Err()
			}
			continue
		case 7:
			if m.intn(6) == 0 {
				return provider.Result{}, &provider.Error{Kind: provider.KindBadRequest, Provider: "chk", Message: "refused", Streamed: true}
			}
			continue
		case 8:
			if m.intn(8) == 0 {
				stop = provider.StopMaxTokens
			}
			continue
		}
		if err := on(ev); err != nil {
			return provider.Result{}, err
		}
	}
	if len(calls) > 0 && stop != provider.StopMaxTokens && m.intn(4) != 0 {
		stop = provider.StopToolUse
	}
	// The request is not changed while the turn runs.
	assert.Equal(t, seen, deepMsgs(req.Messages), "session %s: the request changed during its turn", sid)
	return provider.Result{Stop: stop, Usage: provider.Usage{InputTokens: 1, OutputTokens: 1, Reported: true}}, nil
}

func (m *checkingModel) newRuntime(t *testing.T, st *store.Store, rep *recorder) *Runtime {
	models, err := NewRegistry(context.Background(), "", m)
	require.NoError(t, err)
	rt, err := New(Config{Store: st, Reporter: rep, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Models: models, SystemPrompt: "You are a test.", Limits: Limits{MaxOutputTokens: m.maxOut, MaxTurns: 6},
		Retry: provider.RetryPolicy{MaxRetries: -1, BaseDelay: time.Millisecond}})
	require.NoError(t, err)
	m.rt.Store(rt)
	return rt
}

// waitEnds waits for the run:end of each run id.
func waitEnds(t *testing.T, rep *recorder, ids []string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rep.mu.Lock()
		ended := map[string]bool{}
		for _, s := range rep.signals {
			if e, ok := s.(*protocol.RunEndSignal); ok {
				ended[e.RunID] = true
			}
		}
		rep.mu.Unlock()
		all := true
		for _, id := range ids {
			all = all && ended[id]
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("runs %v did not all end", ids)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRuntimeTrimEqualsPass: several sessions run at once on a model with a small window: prompts
// of any size, follow-ups queued behind a run (some cancelled), runs cancelled mid-turn, turns with
// and without tool calls, conversations evicted and read again from the store, and a restart of
// the runtime on the same store. Every request the model gets is what one pass over the session's
// whole conversation keeps, with max_tokens from those tokens; every run summary's
// droppedExchanges is the most a turn of its run dropped.
func TestRuntimeTrimEqualsPass(t *testing.T) {
	st := storetest.New(t)
	rep := newRecorder()
	m := &checkingModel{t: t, window: 1200, maxOut: 200, rng: rand.New(rand.NewPCG(1, 2)), dropped: map[string]int{}}
	rt := m.newRuntime(t, st, rep)
	ctx := context.Background()
	var sessions []store.Session
	for i := range 4 {
		x, err := st.CreateSession(ctx, store.Session{Title: fmt.Sprintf("s%d", i), AgentID: "build", Status: "idle"})
		require.NoError(t, err)
		sessions = append(sessions, x)
	}
	var prompts atomic.Int64
	phase := func(rounds int) {
		var wg sync.WaitGroup
		for si, x := range sessions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(si), uint64(rounds)))
				text := func() string {
					n := prompts.Add(1)
					size := rng.IntN(200)
					if rng.IntN(10) == 0 {
						size = rng.IntN(6000) // sometimes past the window: context too long
					}
					return fmt.Sprintf("%s|%d|%s", x.ID, n, strings.Repeat("p", size))
				}
				for range rounds {
					var ids []string
					start := func() string {
						id, _, err := rt.Start(ctx, x, text(), nil)
						if !assert.NoError(t, err) {
							return ""
						}
						ids = append(ids, id)
						return id
					}
					switch rng.IntN(6) {
					case 0, 1:
						start()
					case 2: // follow-ups queued behind the run, one maybe cancelled
						start()
						q := start()
						start()
						if rng.IntN(2) == 0 {
							rt.Cancel(x.ID, q)
						}
					case 3: // cancelled mid-run
						start()
						time.Sleep(time.Duration(rng.IntN(15)) * time.Millisecond)
						rt.Cancel(x.ID, "")
					case 4: // evicted between runs: read again from the store
						rt.conv.forget(x.ID)
						start()
					case 5:
						start()
						waitEnds(t, rep, ids)
						rt.conv.forget(x.ID)
						start()
					}
					waitEnds(t, rep, ids)
				}
			}()
		}
		wg.Wait()
	}
	phase(25)
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	rt.Shutdown(sctx)
	cancel()
	rt.Close()
	rt = m.newRuntime(t, st, rep)
	t.Cleanup(rt.Close)
	_, err := rt.Recover(ctx)
	require.NoError(t, err)
	phase(25)

	// Each ok run's summary says the most exchanges a turn of it dropped.
	rep.mu.Lock()
	promptOf := map[string]string{}
	summaries := map[string]protocol.RunSummary{}
	for _, s := range rep.signals {
		if e, ok := s.(*protocol.EventSignal); ok {
			switch ev := e.Event.(type) {
			case *protocol.UserPromptEvent:
				promptOf[e.RunID] = ev.Text
			case *protocol.RunSummaryEvent:
				summaries[e.RunID] = ev.RunSummary
			}
		}
	}
	rep.mu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	checked, withDrops := 0, 0
	for run, sum := range summaries {
		want := m.dropped[promptOf[run]]
		got := 0
		if sum.DroppedExchanges != nil {
			got = *sum.DroppedExchanges
			assert.Positive(t, got)
		}
		assert.Equal(t, want, got, "run %s (%.30q): droppedExchanges", run, promptOf[run])
		checked++
		if got > 0 {
			withDrops++
		}
	}
	t.Logf("%d requests checked, %d run summaries (%d with dropped exchanges), at most %d exchanges dropped", m.requests, checked, withDrops, m.maxDropped)
	assert.Greater(t, withDrops, 10, "the window is small enough to drop exchanges")
}

// TestRuntimeWindowSmallerThanSystem: a window smaller than the system prompt (a budget <= 0):
// every run ends "Context too long" without a request, and nothing panics; the conversation
// evicted in between changes nothing.
func TestRuntimeWindowSmallerThanSystem(t *testing.T) {
	st := storetest.New(t)
	for _, window := range []int{1, 20} {
		rep := newRecorder()
		m := &checkingModel{t: t, window: window, maxOut: 200, rng: rand.New(rand.NewPCG(1, 2)), dropped: map[string]int{}}
		rt := m.newRuntime(t, st, rep)
		x, err := st.CreateSession(context.Background(), store.Session{Title: "s", AgentID: "build", Status: "idle"})
		require.NoError(t, err)
		var ids []string
		for i := range 4 {
			if i == 2 {
				rt.conv.forget(x.ID)
			}
			id, _, err := rt.Start(context.Background(), x, fmt.Sprintf("%s|%d|", x.ID, i), nil)
			require.NoError(t, err)
			ids = append(ids, id)
			waitEnds(t, rep, ids)
		}
		rt.Close()
		rep.mu.Lock()
		ends := 0
		for _, s := range rep.signals {
			if e, ok := s.(*protocol.RunEndSignal); ok {
				ends++
				assert.False(t, e.OK)
				require.NotNil(t, e.Error)
				assert.Contains(t, *e.Error, "Context too long", "window %d", window)
			}
		}
		rep.mu.Unlock()
		assert.Equal(t, 4, ends, "window %d", window)
		assert.Zero(t, m.requests, "window %d: no request", window)
	}
}
