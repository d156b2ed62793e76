package agent

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/oneline"
	"github.com/zidane-server/zidane/server/store"
)

// DefaultApprovalTimeout is how long an approval request waits before it expires as a denial
// (issue 9: an operator setting, default 30 minutes).
const DefaultApprovalTimeout = 30 * time.Minute

// Gate holds the approval requests and the questions runs wait on (issue 9; schema approvals.json
// and interactions.json). They live in memory: a request survives a client's disconnect (any
// connection may answer it, approvals.list shows it) but not a server restart, which ends its run
// too. A request is resolved exactly once: by an answer, its expiry (approvals only), or its
// withdrawal when the run's context ends; whatever comes later is refused. Safe for concurrent use.
type Gate struct {
	st      *store.Store
	rep     Reporter
	timeout time.Duration
	now     func() time.Time

	mu        sync.Mutex
	approvals map[string]*pendingApproval // by request id
	questions map[string]*pendingQuestion // by request id
}

// ApprovalOutcome is how an approval request ended.
type ApprovalOutcome struct {
	// Resolution is the answer (allow, always, deny), expired or withdrawn.
	Resolution protocol.ApprovalResolution
	// By is the name of the token that answered ("" for expired and withdrawn).
	By string
}

// Allowed reports whether the call may run.
func (o ApprovalOutcome) Allowed() bool {
	return o.Resolution == protocol.ApprovalResolutionAllow || o.Resolution == protocol.ApprovalResolutionAlways
}

type pendingApproval struct {
	req    protocol.ApprovalRequest
	origin Origin
	// alwaysKey is what "always" stores: the tool, and for exec the command's safelist key
	// ("" when always stores nothing for this call); projectRoot is where.
	alwaysTool, alwaysPrefix, alwaysNote string
	canStore                             bool
	projectRoot                          string
	up                                   lineage
	done                                 chan ApprovalOutcome // buffered 1: written once
}

type pendingQuestion struct {
	req    protocol.InteractionRequest
	origin Origin
	up     lineage
	done   chan questionOutcome
}

// parentRef is one ancestor of a subagent's session: the session and the run that started the
// child below it.
type parentRef struct{ sessionID, runID string }

// lineage names, for a subagent's request, the sessions it is also signalled in and answerable
// through (issue 27 item 4): its parent first, up to the root. Empty for a root session's request.
type lineage []parentRef

type lineageKey struct{}

// withParent marks ctx as a call of x's run, so its requests are also signalled on every ancestor
// of x: the parent, its parent, up to the root (read from the sessions' parent links; a chain that
// cannot be read past some level stops there, so at least the parent is always told).
func (g *Gate) withParent(ctx context.Context, x store.Session) context.Context {
	if x.ParentSessionID == "" {
		return ctx
	}
	var up lineage
	for hop := 0; x.ParentSessionID != "" && hop < maxLineage; hop++ {
		up = append(up, parentRef{sessionID: x.ParentSessionID, runID: x.ParentRunID})
		p, err := g.st.GetSession(ctx, x.ParentSessionID)
		if err != nil {
			break
		}
		x = p
	}
	return context.WithValue(ctx, lineageKey{}, up)
}

// maxLineage bounds the walk up the parent links (the operator's --max-task-depth is far below).
const maxLineage = 32

func lineageOf(ctx context.Context) lineage {
	up, _ := ctx.Value(lineageKey{}).(lineage)
	return up
}

// parent is the immediate parent session ("" for a root session's request).
func (up lineage) parent() string {
	if len(up) == 0 {
		return ""
	}
	return up[0].sessionID
}

// of reports whether a request of session own, with this lineage, belongs to sessionID: its own
// session or one of its ancestors.
func (up lineage) of(own, sessionID string) bool {
	if own == sessionID {
		return true
	}
	for _, a := range up {
		if a.sessionID == sessionID {
			return true
		}
	}
	return false
}

// copies calls f once per ancestor with the session and run of that ancestor's copy of a signal
// of session child, and the child named.
func (up lineage) copies(child string, f func(sessionID, runID string, childID *string)) {
	for _, a := range up {
		c := child
		f(a.sessionID, a.runID, &c)
	}
}

type questionOutcome struct {
	answer *protocol.InteractionAnswer // nil: dismissed or withdrawn
	res    protocol.InteractionResolution
}

// NewGate creates a gate that reports through rep and records decisions in st. timeout <= 0 takes
// DefaultApprovalTimeout.
func NewGate(st *store.Store, rep Reporter, timeout time.Duration) *Gate {
	if timeout <= 0 {
		timeout = DefaultApprovalTimeout
	}
	return &Gate{st: st, rep: rep, timeout: timeout, now: time.Now,
		approvals: map[string]*pendingApproval{}, questions: map[string]*pendingQuestion{}}
}

// Timeout is how long an approval request waits before it expires.
func (g *Gate) Timeout() time.Duration { return g.timeout }

// ApprovalAsk is what a run asks approval for.
type ApprovalAsk struct {
	// Request is the request to show; RequestID, CreatedAt and ExpiresAt are filled in.
	Request protocol.ApprovalRequest
	// ProjectRoot is the session's project root, where "always" stores its entry.
	ProjectRoot string
	// StoreTool and StorePrefix are what "always" stores; CanStore false means it stores nothing
	// and acts as allow, for the reason in Note.
	StoreTool, StorePrefix, Note string
	CanStore                     bool
}

// RequestApproval publishes approval:request and waits until the request is answered, expires
// (as a denial) or ctx ends (withdrawn). approval:resolved is published in every case, before
// RequestApproval returns.
func (g *Gate) RequestApproval(ctx context.Context, a ApprovalAsk, origin Origin) ApprovalOutcome {
	now := g.now()
	req := a.Request
	req.RequestID = uuid.NewString()
	req.CreatedAt = now.UnixMilli()
	req.ExpiresAt = now.Add(g.timeout).UnixMilli()
	if a.CanStore {
		s := a.StoreTool
		if a.StorePrefix != "" {
			s += ":" + a.StorePrefix
		}
		s = oneline.Line(s)
		req.AlwaysStores = &s
	}
	up := lineageOf(ctx)
	if parent := up.parent(); parent != "" {
		req.ParentSessionID = &parent
	}
	p := &pendingApproval{req: req, origin: origin, alwaysTool: a.StoreTool, alwaysPrefix: a.StorePrefix, alwaysNote: a.Note,
		canStore: a.CanStore, projectRoot: a.ProjectRoot, up: up, done: make(chan ApprovalOutcome, 1)}
	g.mu.Lock()
	g.approvals[req.RequestID] = p
	g.mu.Unlock()
	g.publish(&protocol.ApprovalRequestSignal{SessionID: req.SessionID, RunID: req.RunID, Request: req}, origin)
	up.copies(req.SessionID, func(sessionID, runID string, child *string) {
		g.publish(&protocol.ApprovalRequestSignal{SessionID: sessionID, RunID: runID, ChildSessionID: child, Request: req}, origin)
	})
	g.rep.RunningChanged() // attention

	timer := time.NewTimer(g.timeout)
	defer timer.Stop()
	select {
	case o := <-p.done:
		return o
	case <-timer.C:
		if g.take(req.RequestID) != nil {
			detail := fmt.Sprintf("expired %s (no answer in %s)", req.Summary, g.timeout)
			if err := g.st.AppendAudit(context.Background(), "server", store.AuditApproval, req.SessionID, detail); err != nil {
				slog.Error("approval expiry not written to the audit log", "session", req.SessionID, "err", err)
			}
			g.resolved(p, protocol.ApprovalResolutionExpired, "")
			return ApprovalOutcome{Resolution: protocol.ApprovalResolutionExpired}
		}
	case <-ctx.Done():
		if g.take(req.RequestID) != nil {
			g.resolved(p, protocol.ApprovalResolutionWithdrawn, "")
			return ApprovalOutcome{Resolution: protocol.ApprovalResolutionWithdrawn}
		}
	}
	// Someone else resolved it first: their outcome stands.
	return <-p.done
}

// take removes a pending approval; nil when it is no longer pending.
func (g *Gate) take(id string) *pendingApproval {
	g.mu.Lock()
	defer g.mu.Unlock()
	p := g.approvals[id]
	delete(g.approvals, id)
	return p
}

func (g *Gate) resolved(p *pendingApproval, res protocol.ApprovalResolution, by string) {
	sig := &protocol.ApprovalResolvedSignal{SessionID: p.req.SessionID, RunID: p.req.RunID, RequestID: p.req.RequestID, Resolution: res}
	if by != "" {
		sig.By = &by
	}
	g.publish(sig, p.origin)
	p.up.copies(p.req.SessionID, func(sessionID, runID string, child *string) {
		cp := *sig
		cp.SessionID, cp.RunID, cp.ChildSessionID = sessionID, runID, child
		g.publish(&cp, p.origin)
	})
	p.done <- ApprovalOutcome{Resolution: res, By: by}
	g.rep.RunningChanged()
}

func (g *Gate) publish(sig protocol.Signal, origin Origin) {
	_, _ = g.rep.Publish(sig, origin)
}

// AnswerResult is what approvals.answer reports.
type AnswerResult struct {
	// Stored is the safelist entry "always" stored (nil when none).
	Stored *store.SafelistEntry
	// Note says why "always" stored nothing.
	Note string
}

// Answer resolves the pending approval requestID of sessionID with decision, as actor (a token
// name): it records the decision in the audit log (and, for always, the safelist entry), publishes
// approval:resolved and releases the run. A request that is not pending is a *Refusal.
func (g *Gate) Answer(ctx context.Context, sessionID, requestID string, decision protocol.ApprovalDecision, actor string) (AnswerResult, error) {
	var res protocol.ApprovalResolution
	switch decision {
	case protocol.ApprovalDecisionAllow:
		res = protocol.ApprovalResolutionAllow
	case protocol.ApprovalDecisionAlways:
		res = protocol.ApprovalResolutionAlways
	case protocol.ApprovalDecisionDeny:
		res = protocol.ApprovalResolutionDeny
	default:
		return AnswerResult{}, &Refusal{Message: fmt.Sprintf("Unknown decision %q; answer allow, always or deny.", decision)}
	}
	g.mu.Lock()
	p := g.approvals[requestID]
	if p == nil || !p.up.of(p.req.SessionID, sessionID) {
		g.mu.Unlock()
		return AnswerResult{}, &Refusal{Message: fmt.Sprintf("Approval request %q of session %q is not pending (it was answered, expired or withdrawn); list the pending ones with approvals.list.", requestID, sessionID)}
	}
	delete(g.approvals, requestID)
	g.mu.Unlock()

	var out AnswerResult
	detail := fmt.Sprintf("%s %s", decision, p.req.Summary)
	if decision == protocol.ApprovalDecisionAlways {
		if p.canStore {
			e, err := g.st.AddSafelist(ctx, store.SafelistEntry{ProjectRoot: p.projectRoot, Tool: p.alwaysTool, Prefix: p.alwaysPrefix, CreatedBy: actor}, sessionID)
			if err != nil {
				// The answer still counts (as allow): the run must not hang on a store error.
				out.Note = "The safelist entry could not be stored (" + err.Error() + "); the call runs once."
			} else {
				out.Stored = &e
			}
		} else {
			out.Note = "Nothing was stored: " + p.alwaysNote + ". The call runs once; the next one asks again."
		}
		if out.Stored == nil {
			detail += " (stored nothing)"
		}
	}
	if err := g.st.AppendAudit(ctx, actor, store.AuditApproval, sessionID, detail); err != nil {
		// Recorded or not, the person's answer is honoured; the operator learns of the gap.
		slog.Error("approval decision not written to the audit log", "session", sessionID, "detail", detail, "err", err)
	}
	g.resolved(p, res, actor)
	return out, nil
}

// PendingApprovals returns the pending approval requests of sessionID ("" = all), oldest first.
func (g *Gate) PendingApprovals(sessionID string) []protocol.ApprovalRequest {
	g.mu.Lock()
	out := make([]protocol.ApprovalRequest, 0, len(g.approvals))
	for _, p := range g.approvals {
		if sessionID == "" || p.up.of(p.req.SessionID, sessionID) {
			out = append(out, p.req)
		}
	}
	g.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].CreatedAt != out[j].CreatedAt {
			return out[i].CreatedAt < out[j].CreatedAt
		}
		return out[i].RequestID < out[j].RequestID
	})
	return out
}

// Waiting returns the sessions that wait on an approval or a question (presence "attention").
func (g *Gate) Waiting() map[string]bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[string]bool{}
	for _, p := range g.approvals {
		out[p.req.SessionID] = true
		for _, a := range p.up {
			out[a.sessionID] = true
		}
	}
	for _, q := range g.questions {
		out[q.req.SessionID] = true
		for _, a := range q.up {
			out[a.sessionID] = true
		}
	}
	return out
}

// Ask publishes interaction:request and waits for the answer; a nil answer means dismissed, or
// withdrawn when ctx ended (the error is then ctx's). interaction:resolved is published in every
// case.
func (g *Gate) Ask(ctx context.Context, req protocol.InteractionRequest, origin Origin) (*protocol.InteractionAnswer, error) {
	o, err := g.ask(ctx, req, origin, 0)
	return o.answer, err
}

// ask is Ask with an expiry (0: none): past it the request resolves as expired.
func (g *Gate) ask(ctx context.Context, req protocol.InteractionRequest, origin Origin, expire time.Duration) (questionOutcome, error) {
	now := g.now()
	req.RequestID = uuid.NewString()
	req.CreatedAt = now.UnixMilli()
	var expired <-chan time.Time
	if expire > 0 {
		at := now.Add(expire).UnixMilli()
		req.ExpiresAt = &at
		t := time.NewTimer(expire)
		defer t.Stop()
		expired = t.C
	}
	if req.Options == nil {
		req.Options = []string{}
	}
	up := lineageOf(ctx)
	if parent := up.parent(); parent != "" {
		req.ParentSessionID = &parent
	}
	q := &pendingQuestion{req: req, origin: origin, up: up, done: make(chan questionOutcome, 1)}
	g.mu.Lock()
	g.questions[req.RequestID] = q
	g.mu.Unlock()
	g.publish(&protocol.InteractionRequestSignal{SessionID: req.SessionID, RunID: req.RunID, Request: req}, origin)
	up.copies(req.SessionID, func(sessionID, runID string, child *string) {
		g.publish(&protocol.InteractionRequestSignal{SessionID: sessionID, RunID: runID, ChildSessionID: child, Request: req}, origin)
	})
	g.rep.RunningChanged()
	res := protocol.InteractionResolutionWithdrawn
	select {
	case o := <-q.done:
		return o, nil
	case <-expired:
		res = protocol.InteractionResolutionExpired
	case <-ctx.Done():
	}
	g.mu.Lock()
	_, mine := g.questions[req.RequestID]
	delete(g.questions, req.RequestID)
	g.mu.Unlock()
	if mine {
		o := questionOutcome{res: res}
		g.questionResolved(q, o, "")
		return o, ctx.Err()
	}
	return <-q.done, nil // answered first: the answer stands
}

func (g *Gate) questionResolved(q *pendingQuestion, o questionOutcome, by string) {
	sig := &protocol.InteractionResolvedSignal{SessionID: q.req.SessionID, RunID: q.req.RunID, RequestID: q.req.RequestID, Resolution: o.res, Answer: o.answer}
	if by != "" {
		sig.By = &by
	}
	g.publish(sig, q.origin)
	q.up.copies(q.req.SessionID, func(sessionID, runID string, child *string) {
		cp := *sig
		cp.SessionID, cp.RunID, cp.ChildSessionID = sessionID, runID, child
		g.publish(&cp, q.origin)
	})
	q.done <- o
	g.rep.RunningChanged()
}

// AnswerQuestion resolves the pending question requestID of sessionID with answer (nil =
// dismissed), as actor. Choices must be among the options (one unless multiple), text needs
// allowText. A question that is not pending, or an answer that does not fit it, is a *Refusal;
// an elicitation's answer whose action or values do not fit its form is an *InvalidAnswer.
func (g *Gate) AnswerQuestion(sessionID, requestID string, answer *protocol.InteractionAnswer, actor string) error {
	g.mu.Lock()
	q := g.questions[requestID]
	if q == nil || !q.up.of(q.req.SessionID, sessionID) {
		g.mu.Unlock()
		return &Refusal{Message: fmt.Sprintf("Question %q of session %q is not pending (it was answered, dismissed or withdrawn); list the pending ones with interactions.list.", requestID, sessionID)}
	}
	if q.req.Elicitation != nil {
		a, err := fitsElicitation(*q.req.Elicitation, answer)
		if err != nil {
			g.mu.Unlock()
			return err
		}
		answer = a
	} else if answer != nil {
		if answer.Action != nil || len(answer.Values) > 0 {
			g.mu.Unlock()
			return &InvalidAnswer{Pointer: "/answer", Message: "This request is a question, not an elicitation: answer with choices or text, without action or values."}
		}
		if err := fits(q.req, answer); err != nil {
			g.mu.Unlock()
			return err
		}
	}
	delete(g.questions, requestID)
	g.mu.Unlock()
	o := questionOutcome{answer: answer, res: protocol.InteractionResolutionAnswered}
	if answer == nil {
		o.res = protocol.InteractionResolutionDismissed
	}
	g.questionResolved(q, o, actor)
	return nil
}

// fits checks an answer against its question.
func fits(req protocol.InteractionRequest, a *protocol.InteractionAnswer) error {
	offered := map[string]bool{}
	for _, o := range req.Options {
		offered[o] = true
	}
	for _, c := range a.Choices {
		if !offered[c] {
			return &Refusal{Message: fmt.Sprintf("%q is not one of the options offered (%v); answer with one of them.", c, req.Options)}
		}
	}
	if len(a.Choices) > 1 && !req.Multiple {
		return &Refusal{Message: "This question takes one choice; answer with a single option."}
	}
	if a.Text != nil && *a.Text != "" && !req.AllowText {
		return &Refusal{Message: "This question takes no free text; choose among the options."}
	}
	if len(a.Choices) == 0 && (a.Text == nil || *a.Text == "") {
		return &Refusal{Message: "The answer is empty; choose an option or write text, or dismiss the question with a null answer."}
	}
	return nil
}

// PendingQuestions returns the pending questions of sessionID ("" = all), oldest first.
func (g *Gate) PendingQuestions(sessionID string) []protocol.InteractionRequest {
	g.mu.Lock()
	out := make([]protocol.InteractionRequest, 0, len(g.questions))
	for _, q := range g.questions {
		if sessionID == "" || q.up.of(q.req.SessionID, sessionID) {
			out = append(out, q.req)
		}
	}
	g.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].CreatedAt != out[j].CreatedAt {
			return out[i].CreatedAt < out[j].CreatedAt
		}
		return out[i].RequestID < out[j].RequestID
	})
	return out
}
