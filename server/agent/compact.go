package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/agent/provider"
	"github.com/zidane-server/zidane/server/store"
)

// compactSystem is the system prompt of a compaction's model call (issue 28, "History").
const compactSystem = `You compact the conversation between a user and a coding agent so the agent can continue it without the earlier messages. Write a concise summary in plain text: the user's goals and constraints, the decisions taken, what was done (files read or changed, commands run and their outcomes), what is still open, and the next steps. Keep file paths, identifiers, numbers and error messages exactly. Do not address the user.`

// compactAsk is the last message of a compaction's model call.
const compactAsk = "Summarize the conversation above as the instructions say; your summary will replace it."

// compactMaxTokens bounds a summary's tokens.
const compactMaxTokens = 2048

// CompactResult is what a compaction did (history.compact).
type CompactResult struct {
	Exchanges           int    // exchanges the summary stands in for
	TurnID              string // the compaction event's
	TokensBefore, After int64  // the history's estimated tokens before and after
}

// ResetReason says why a transcript changed other than by appending (session:reset).
type ResetReason = protocol.ResetReason

// Reset runs fn, which changes the session's stored transcript other than by appending (a
// rollback, a restore), while no run can start on the session, then drops the conversation the
// runtime holds of it and publishes session:reset with reason when fn reports a change. fn runs
// under the session's content lock (see Consistent), so a sessions.loadEvents answers the
// transcript before the change with a watermark before the signal, or the one after with a
// watermark at or after it. Refused (*Refusal) while the session has a run, queued prompts, or
// another reset or compaction in progress. fn's error is returned as is.
func (r *Runtime) Reset(ctx context.Context, sessionID string, reason ResetReason, fn func(ctx context.Context) (changed bool, err error)) error {
	if err := r.hold(sessionID, string(reason)); err != nil {
		return err
	}
	defer r.release(sessionID)
	l := r.contentLock(sessionID)
	l.Lock()
	defer l.Unlock()
	if err := r.writer.flush(ctx); err != nil {
		return err
	}
	changed, err := fn(ctx)
	r.conv.forget(sessionID) // the store holds the transcript now
	if err == nil && changed {
		r.publishReset(sessionID, reason)
	}
	return err
}

func (r *Runtime) publishReset(sessionID string, reason ResetReason) {
	if _, err := r.rep.Publish(&protocol.SessionResetSignal{SessionID: sessionID, Reason: reason}, nil); err != nil {
		r.log.Error("session:reset not sent", "session", sessionID, "err", err)
	}
}

// hold marks the session as being rewritten (Start refuses it), unless it has a run.
func (r *Runtime) hold(sessionID, what string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return &Refusal{"The server is shutting down; try again once it is back."}
	}
	if r.isRunningLocked(sessionID) {
		return &Refusal{fmt.Sprintf("Session %q has a run or queued prompts; cancel them with chat.cancel and wait for run:end, then ask for the %s again.", sessionID, what)}
	}
	if r.deleting[sessionID] {
		return &Refusal{fmt.Sprintf("Session %q is being deleted.", sessionID)}
	}
	if r.rewriting[sessionID] {
		return &Refusal{fmt.Sprintf("Session %q is being rolled back, restored or compacted; try again once that call answers.", sessionID)}
	}
	if r.rewriting == nil {
		r.rewriting = map[string]bool{}
	}
	r.rewriting[sessionID] = true
	return nil
}

func (r *Runtime) release(sessionID string) {
	r.mu.Lock()
	delete(r.rewriting, sessionID)
	r.mu.Unlock()
}

// Compact has the session's model summarize every exchange but the last one and appends the
// summary as a compaction event, which the model's history holds in their place from then on
// (buildHistory); the transcript keeps every event. Publishes session:reset (compact). Refused
// (*Refusal) while the session has a run, or when there is nothing before the last exchange;
// a model that fails is an error naming it.
func (r *Runtime) Compact(ctx context.Context, x store.Session) (CompactResult, error) {
	if err := r.hold(x.ID, "compaction"); err != nil {
		return CompactResult{}, err
	}
	defer r.release(x.ID)
	if err := r.writer.flush(ctx); err != nil {
		return CompactResult{}, err
	}
	if err := r.loadConversation(ctx, x.ID, nil, nil); err != nil {
		return CompactResult{}, err
	}
	hist := r.conv.history(x.ID)
	last := lastExchange(hist)
	if last <= 0 {
		return CompactResult{}, &Refusal{fmt.Sprintf("Session %q has nothing to compact: it holds at most one exchange (a prompt and its answer).", x.ID)}
	}
	prov, model, err := r.models.Resolve(ctx, x.Model)
	if err != nil {
		return CompactResult{}, &Refusal{err.Error() + "; pick one with sessions.setModel."}
	}
	prov = provider.WithRetry(prov, r.cfg.Retry)
	turnID := uuid.NewString()
	text, n, err := r.summarize(ctx, prov, model, hist.head(last), x.ID, "compact-"+turnID, turnID)
	if err != nil {
		return CompactResult{}, err
	}
	ev := &protocol.CompactionEvent{Text: text, Exchanges: n, ModelID: optString(model.ID), TurnID: turnID}
	res := CompactResult{Exchanges: n, TurnID: turnID, TokensBefore: int64(hist.cum[len(hist.msgs)])}
	res.After = int64(estimateTokens(compactionMessage(ev)) + hist.cum[len(hist.msgs)] - hist.cum[last])
	l := r.contentLock(x.ID)
	l.Lock()
	defer l.Unlock()
	r.writer.add(x.ID, ev, store.SignalMark{}) // no signal carries it: clients reload (session:reset)
	if err := r.writer.flush(ctx); err != nil {
		r.writer.forget(x.ID)
		r.conv.forget(x.ID)
		return CompactResult{}, err
	}
	r.conv.add(x.ID, ev)
	r.publishReset(x.ID, protocol.ResetReasonCompact)
	return res, nil
}

// lastExchange is the index in h of the last exchange's first message (a user message), or -1.
func lastExchange(h countedHistory) int {
	for i := len(h.msgs) - 1; i >= 0; i-- {
		if h.msgs[i].Role == provider.RoleUser {
			return i
		}
	}
	return -1
}

// summarize asks the model for a summary of h's messages (trimmed to its context window) and
// returns it with the number of exchanges it covers; the call's usage is recorded as runID's.
func (r *Runtime) summarize(ctx context.Context, prov provider.Provider, model provider.Model, h countedHistory, sessionID, runID, turnID string) (string, int, error) {
	msgs := h.msgs
	if w := model.ContextWindow; w > 0 {
		kept, _, _, ok := h.trim(w - answerReserve(w, compactMaxTokens) - textTokens(compactSystem) - textTokens(compactAsk) - 6)
		if !ok {
			return "", 0, &Refusal{fmt.Sprintf("The conversation cannot be compacted: its newest exchange alone does not fit %s's context window of %d tokens.", model.ID, w)}
		}
		msgs = kept
	}
	n := 0
	for _, m := range msgs {
		if m.Role == provider.RoleUser {
			n++
		}
	}
	req := &provider.Request{Model: model.Name, System: compactSystem, MaxOutputTokens: compactMaxTokens,
		Messages: append(append(make([]provider.Message, 0, len(msgs)+1), msgs...), provider.Message{Role: provider.RoleUser, Text: compactAsk})}
	var b strings.Builder
	res, err := prov.Stream(ctx, req, func(ev provider.Event) error {
		if e, ok := ev.(*provider.TextDelta); ok {
			if b.Len()+len(e.Text) > 4*compactMaxTokens*outputMargin {
				return errors.New("the summary passed its bound")
			}
			b.WriteString(e.Text)
		}
		return nil
	})
	if err != nil {
		return "", 0, fmt.Errorf("the model %s could not summarize the conversation: %w", model.ID, err)
	}
	r.writer.addUsage(store.TurnUsage{SessionID: sessionID, RunID: runID, TurnID: turnID, ModelID: model.ID,
		Input: res.Usage.InputTokens, Output: res.Usage.OutputTokens, Reported: res.Usage.Reported, At: time.Now()})
	text := strings.TrimSpace(b.String())
	if text == "" {
		return "", 0, &Refusal{fmt.Sprintf("The model %s answered an empty summary; the conversation is left as it was.", model.ID)}
	}
	return text, n, nil
}

// autoCompact compacts, inside run ru, the exchanges before the one it answers when a turn would
// otherwise leave exchanges out (Config.AutoCompact): the compaction event is emitted in the run.
// It returns how many exchanges it compacted (0 when it did not).
func (r *Runtime) autoCompact(ctx context.Context, ru *run, prov provider.Provider, model provider.Model, hist countedHistory) int {
	if r.cfg.AutoCompact == nil || !r.cfg.AutoCompact(ctx) {
		return 0
	}
	last := lastExchange(hist)
	if last <= 0 {
		return 0
	}
	turnID := uuid.NewString()
	text, n, err := r.summarize(ctx, prov, model, hist.head(last), ru.sessionID, ru.id, turnID)
	if err != nil {
		r.log.Warn("automatic compaction failed; the oldest exchanges are left out instead", "session", ru.sessionID, "err", err)
		return 0
	}
	r.closeBlock(ru.sessionID)
	r.emit(ru, &protocol.CompactionEvent{Text: text, Exchanges: n, ModelID: optString(model.ID), TurnID: turnID})
	return n
}

// MaxMentions bounds the files and folders one prompt attaches.
const MaxMentions = 20

// attachMentions reads the run's mentions through the file tools, as calls of read_file (a
// folder: list_dir) and their results in the run's first turn, before the model's: the model gets
// them as it gets its own reads, and the workspace's confinement and hidden paths apply as to
// any call (issue 28, "Completions"). A path the tool refuses is a failed result.
func (r *Runtime) attachMentions(ctx context.Context, ru *run) {
	if len(ru.mentions) == 0 {
		return
	}
	turnID := uuid.NewString()
	cwd := ru.session.Cwd
	for i, m := range ru.mentions {
		if i >= MaxMentions || ctx.Err() != nil {
			break
		}
		tool := "read_file"
		if r.cfg.Workspace != nil {
			if p, err := r.cfg.Workspace.Folder(resolveIn(cwd, m)); err == nil && p.Root != "" {
				tool = "list_dir"
			}
		}
		input, _ := protocol.Marshal(map[string]string{"path": m})
		c := provider.ToolCall{ID: fmt.Sprintf("mention_%d", i+1), Name: tool, Arguments: input}
		r.emit(ru, &protocol.ToolEvent{Tool: tool, CallID: c.ID, Text: callLine(c), Input: input, TurnID: turnID})
		tc := ToolCall{Session: ru.session, RunID: ru.id, TurnID: turnID, Origin: ru.origin, Call: c}
		if ag, err := r.agentOf(ru.session, ru.parent); err == nil {
			tc.Agent = &ag.def
		}
		res := ToolResult{}
		if ok, denied := r.gateCheck(ctx, tc); !ok {
			res, res.IsError = denied, true
		} else {
			res = r.callTool(ctx, r.tools, tc)
		}
		r.emit(ru, &protocol.ToolResultEvent{Tool: tool, CallID: c.ID, Text: res.Text, IsError: optTrue(res.IsError), TurnID: turnID})
	}
}

// resolveIn is p as an absolute path: itself, or joined to cwd.
func resolveIn(cwd, p string) string {
	if strings.HasPrefix(p, "/") || cwd == "" {
		return p
	}
	return strings.TrimRight(cwd, "/") + "/" + p
}

// gateCheck asks the gate, when there is one, whether tc may run.
func (r *Runtime) gateCheck(ctx context.Context, tc ToolCall) (bool, ToolResult) {
	if r.cfg.Gate == nil {
		return true, ToolResult{}
	}
	return r.cfg.Gate.Check(ctx, tc)
}
