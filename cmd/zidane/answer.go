package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zidane-server/zidane/client"
	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/oneline"
)

// The --approve values.
const (
	approveAsk   = "ask"   // ask at the terminal, or wait for JSON lines on stdin
	approveAllow = "allow" // allow each approval once; dismiss each question
	approveNever = "never" // deny each approval; dismiss each question
)

// answerHelp is the --help text on how the CLI answers the run's approvals and questions.
const answerHelp = `Approvals and questions: a tool call that needs approval (exec, write_file, edit_file) or
a question of the agent (ask_user) makes the run wait. The CLI says so on stderr once, and:
  on a terminal (stdin is a tty, without --json) it prints what is asked, the command exactly
  (control characters escaped), and reads a line: a (allow once), w (always: runs it and stores
  the safelist entry it names), d (deny); for a question the number of an option (several,
  separated by spaces or commas, when it allows several), or text when it allows text; an empty
  line dismisses the question;
  with --json or without a terminal it reads answers from stdin, one JSON object per line:
    {"requestId":"<approval:request's request.requestId>","decision":"allow"|"always"|"deny"}
    {"requestId":"<interaction:request's request.requestId>","answer":{"choices":["…"],"text":"…"}}
    {"requestId":"…","answer":null}   dismisses a question
  (requestId may be left out while only one request waits). A line it cannot use (not JSON, an
  unknown requestId, a bad decision, an answer the server refuses) is reported on stderr and
  the request goes on waiting;
  --approve allow allows each approval once (never always) and dismisses each question;
  --approve never denies each approval and dismisses each question; neither reads stdin.
An unanswered approval expires as a denial (the server's --approval-timeout).`

// answerer answers the approvals and questions of the CLI's run (approval:request,
// interaction:request), from the terminal, from JSON lines on stdin, or as --approve says.
type answerer struct {
	c      *client.Client
	sid    string
	mode   string // approveAsk, approveAllow or approveNever
	tty    bool   // ask at the terminal: prompts on stderr, plain lines on stdin
	stdin  io.Reader
	stderr io.Writer
	// beforePrompt is called before a prompt is printed (the printer ends its line of text).
	beforePrompt func()

	lines   chan string // stdin's lines; nil until the first request, or once stdin ended
	reading bool
	ended   bool           // stdin ended
	pending []*pendingItem // waiting requests, oldest first
	asked   string         // the requestId whose prompt the terminal shows
}

// pendingItem is one waiting request: an approval or a question.
type pendingItem struct {
	approval *protocol.ApprovalRequest
	question *protocol.InteractionRequest
}

func (it *pendingItem) id() string {
	if it.approval != nil {
		return it.approval.RequestID
	}
	return it.question.RequestID
}

// summary is the request in a few words, one escaped line.
func (it *pendingItem) summary() string {
	if it.approval != nil {
		return oneline.Line(it.approval.Summary)
	}
	return "the question " + strconv.Quote(oneline.Cut(it.question.Prompt, 80))
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// validApprove checks the --approve value.
func validApprove(v string) bool {
	return v == approveAsk || v == approveAllow || v == approveNever
}

// lineCh is the channel of stdin's lines (nil: none to wait for).
func (a *answerer) lineCh() <-chan string { return a.lines }

// take handles a signal of the CLI's run.
func (a *answerer) take(sig protocol.Signal) {
	switch s := sig.(type) {
	case *protocol.ApprovalRequestSignal:
		a.add(&pendingItem{approval: &s.Request})
	case *protocol.InteractionRequestSignal:
		a.add(&pendingItem{question: &s.Request})
	case *protocol.ApprovalResolvedSignal:
		a.resolved(s.RequestID, string(s.Resolution), s.By)
	case *protocol.InteractionResolvedSignal:
		a.resolved(s.RequestID, string(s.Resolution), s.By)
	}
}

func (a *answerer) add(it *pendingItem) {
	if a.find(it.id()) != nil {
		return
	}
	switch a.mode {
	case approveAllow, approveNever:
		a.unattended(it)
		return
	}
	a.pending = append(a.pending, it)
	a.startReading()
	if a.tty {
		if a.asked == "" {
			a.prompt(it)
		}
		return
	}
	example := answerExample(it.id(), "allow", nil)
	if q := it.question; q != nil {
		var ways []string
		if len(q.Options) > 0 {
			ways = append(ways, answerExample(q.RequestID, "", map[string]any{"choices": q.Options[:1]}))
		}
		if q.AllowText {
			ways = append(ways, answerExample(q.RequestID, "", map[string]any{"text": "…"}))
		}
		example = strings.Join(ways, " or ")
	}
	fmt.Fprintf(a.stderr, "zidane: the run waits for an answer to %s%s: answer on stdin with a JSON line such as %s, or rerun with --approve allow|never (zidane --help)\n",
		it.summary(), expires(it), example)
	if a.ended {
		fmt.Fprintln(a.stderr, "zidane: stdin has ended, so nothing here can answer it; it waits until it expires, another client answers it, or --timeout")
	}
}

// answerExample is a JSON answer line for request id: its decision, or its answer.
func answerExample(id, decision string, answer map[string]any) string {
	b, _ := protocol.Marshal(struct {
		RequestID string         `json:"requestId"`
		Decision  string         `json:"decision,omitempty"`
		Answer    map[string]any `json:"answer,omitempty"`
	}{id, decision, answer})
	return string(b)
}

// expires says when an approval expires as a denial ("" for a question, which waits for good).
func expires(it *pendingItem) string {
	if it.approval == nil || it.approval.ExpiresAt == 0 {
		return ""
	}
	return " (it expires as a denial at " + time.UnixMilli(it.approval.ExpiresAt).Format("15:04:05") + ")"
}

// unattended answers it as --approve says.
func (a *answerer) unattended(it *pendingItem) {
	if it.approval != nil {
		d := protocol.ApprovalDecisionDeny
		if a.mode == approveAllow {
			d = protocol.ApprovalDecisionAllow
		}
		a.answerApproval(it, d)
		return
	}
	a.answerQuestion(it, nil)
}

func (a *answerer) find(id string) *pendingItem {
	for _, it := range a.pending {
		if it.id() == id {
			return it
		}
	}
	return nil
}

func (a *answerer) remove(id string) {
	for i, it := range a.pending {
		if it.id() == id {
			a.pending = append(a.pending[:i], a.pending[i+1:]...)
			break
		}
	}
	if a.asked == id {
		a.asked = ""
		if a.tty && len(a.pending) > 0 {
			a.prompt(a.pending[0])
		}
	}
}

// resolved handles a request resolved on the server: by another client, by its expiry or by the
// run's end (withdrawn). One the CLI answered itself is no longer pending.
func (a *answerer) resolved(id, resolution string, by *string) {
	it := a.find(id)
	if it == nil {
		return
	}
	who := ""
	if by != nil {
		who = " by " + strconv.Quote(oneline.Cut(*by, 80))
	}
	switch resolution {
	case string(protocol.ApprovalResolutionExpired):
		fmt.Fprintf(a.stderr, "\nzidane: %s expired unanswered: it counts as a denial\n", it.summary())
	case string(protocol.ApprovalResolutionWithdrawn):
		fmt.Fprintf(a.stderr, "\nzidane: %s was withdrawn (the run was cancelled or ended)\n", it.summary())
	default:
		fmt.Fprintf(a.stderr, "\nzidane: %s was answered elsewhere%s (%s)\n", it.summary(), who, oneline.Cut(resolution, 40))
	}
	a.remove(id)
}

// startReading starts reading stdin's lines, once.
func (a *answerer) startReading() {
	if a.reading {
		return
	}
	a.reading = true
	a.lines = make(chan string, 16)
	go func(r io.Reader, out chan<- string) {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 0, 64<<10), maxAnswerLine)
		for sc.Scan() {
			out <- sc.Text()
		}
		if err := sc.Err(); err != nil {
			out <- "\x00" + err.Error()
		}
		close(out)
	}(a.stdin, a.lines)
}

// maxAnswerLine bounds one line of stdin (a text answer holds at most 100,000 characters).
const maxAnswerLine = 1 << 20

// line handles one line of stdin; ok false: stdin ended.
func (a *answerer) line(l string, ok bool) {
	if !ok {
		a.lines, a.ended = nil, true
		if len(a.pending) > 0 {
			fmt.Fprintf(a.stderr, "zidane: stdin has ended with %d request(s) unanswered: they wait until they expire, another client answers them, or --timeout\n", len(a.pending))
		}
		return
	}
	if strings.HasPrefix(l, "\x00") {
		fmt.Fprintf(a.stderr, "zidane: stdin: %s (a line holds at most %d bytes); no more answers are read\n", l[1:], maxAnswerLine)
		return
	}
	l = strings.TrimSuffix(l, "\r")
	if a.tty {
		a.terminalLine(l)
		return
	}
	a.jsonLine(l)
}

// ---------------------------------------------------------------------------------------------
// The terminal

// prompt prints the request and what to type.
func (a *answerer) prompt(it *pendingItem) {
	a.asked = it.id()
	if a.beforePrompt != nil {
		a.beforePrompt()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "zidane: the run waits for your answer%s:\n", expires(it))
	if r := it.approval; r != nil {
		var in struct {
			Command *string `json:"command"`
		}
		_ = json.Unmarshal(r.Input, &in)
		if r.Tool == "exec" && in.Command != nil {
			fmt.Fprintf(&b, "The agent asks to run: %s\n", exact(*in.Command))
			if exact(*in.Command) != *in.Command {
				b.WriteString("  (the command holds line breaks or control characters, shown escaped as \\n, \\x1b, …)\n")
			}
		} else {
			fmt.Fprintf(&b, "The agent asks to %s\n", oneline.Line(r.Summary))
		}
		fmt.Fprintf(&b, "  in %s\n", exact(r.Cwd))
		if r.Diff != nil {
			writeDiff(&b, *r.Diff)
		}
		b.WriteString(approvalChoices(r))
	} else {
		q := it.question
		fmt.Fprintf(&b, "The agent asks: %s\n", exact(q.Prompt))
		for i, o := range q.Options {
			fmt.Fprintf(&b, "  %d) %s\n", i+1, exact(o))
		}
		b.WriteString(questionChoices(q))
	}
	io.WriteString(a.stderr, b.String())
}

// exact is s on one line with control characters escaped and nothing cut.
func exact(s string) string { return oneline.Cut(s, math.MaxInt32) }

// maxDiffLines bounds the diff the terminal shows.
const maxDiffLines = 60

func writeDiff(b *strings.Builder, diff string) {
	lines := strings.Split(strings.TrimSuffix(diff, "\n"), "\n")
	for i, l := range lines {
		if i == maxDiffLines {
			fmt.Fprintf(b, "    … %d more diff lines\n", len(lines)-i)
			break
		}
		fmt.Fprintf(b, "    %s\n", oneline.Line(l))
	}
}

func approvalChoices(r *protocol.ApprovalRequest) string {
	stores := "stores nothing for this call: acts as allow"
	if r.AlwaysStores != nil {
		stores = "stores: " + exact(*r.AlwaysStores)
	}
	return fmt.Sprintf("  [a]llow once, al[w]ays (%s), [d]eny? ", stores)
}

func questionChoices(q *protocol.InteractionRequest) string {
	var ways []string
	switch n := len(q.Options); {
	case n > 0 && q.Multiple:
		ways = append(ways, fmt.Sprintf("numbers from 1 to %d (spaces or commas between)", n))
	case n > 0:
		ways = append(ways, fmt.Sprintf("a number from 1 to %d", n))
	}
	if q.AllowText {
		ways = append(ways, "your answer as text")
	}
	return "  Type " + strings.Join(ways, ", or ") + "; an empty line dismisses it: "
}

// terminalLine takes a line typed at the terminal as the answer to the request it shows.
func (a *answerer) terminalLine(l string) {
	it := a.find(a.asked)
	if it == nil {
		if strings.TrimSpace(l) != "" {
			fmt.Fprintln(a.stderr, "zidane: nothing is waiting for an answer; the line is ignored")
		}
		return
	}
	if it.approval != nil {
		var d protocol.ApprovalDecision
		switch strings.ToLower(strings.TrimSpace(l)) {
		case "a", "allow", "y", "yes":
			d = protocol.ApprovalDecisionAllow
		case "w", "always":
			d = protocol.ApprovalDecisionAlways
		case "d", "deny", "n", "no":
			d = protocol.ApprovalDecisionDeny
		default:
			fmt.Fprintf(a.stderr, "zidane: type a (allow once), w (always) or d (deny)\n%s", approvalChoices(it.approval))
			return
		}
		if !a.answerApproval(it, d) {
			io.WriteString(a.stderr, approvalChoices(it.approval))
		}
		return
	}
	ans, problem := parseTyped(it.question, l)
	if problem != "" {
		fmt.Fprintf(a.stderr, "zidane: %s\n%s", problem, questionChoices(it.question))
		return
	}
	if !a.answerQuestion(it, ans) {
		io.WriteString(a.stderr, questionChoices(it.question))
	}
}

// parseTyped turns a typed line into a question's answer (nil: dismiss), or says what is wrong.
func parseTyped(q *protocol.InteractionRequest, l string) (*protocol.InteractionsAnswerParamsAnswer, string) {
	if strings.TrimSpace(l) == "" {
		return nil, ""
	}
	fields := strings.FieldsFunc(l, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' })
	var choices []string
	numbers := len(q.Options) > 0
	for _, f := range fields {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > len(q.Options) {
			numbers = false
			break
		}
		choices = append(choices, q.Options[n-1])
	}
	switch {
	case numbers && len(choices) > 1 && !q.Multiple:
		return nil, "choose one option: this question takes one"
	case numbers:
		return &protocol.InteractionsAnswerParamsAnswer{Choices: choices}, ""
	case q.AllowText:
		return &protocol.InteractionsAnswerParamsAnswer{Text: &l}, ""
	}
	return nil, fmt.Sprintf("this question takes the number of an option, from 1 to %d", len(q.Options))
}

// ---------------------------------------------------------------------------------------------
// JSON lines

// answerLine is the documented shape of one JSON answer line (answerHelp).
type answerLine struct {
	RequestID string          `json:"requestId"`
	Decision  *string         `json:"decision"`
	Answer    json.RawMessage `json:"answer"`
}

const answerShapes = `{"requestId":"…","decision":"allow|always|deny"} or {"requestId":"…","answer":{"choices":[…],"text":"…"}|null}`

// jsonLine takes one JSON answer line.
func (a *answerer) jsonLine(l string) {
	if strings.TrimSpace(l) == "" {
		return
	}
	bad := func(format string, args ...any) {
		fmt.Fprintf(a.stderr, "zidane: stdin: %s; the line is ignored\n", fmt.Sprintf(format, args...))
	}
	var in answerLine
	dec := json.NewDecoder(strings.NewReader(l))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		bad("not an answer line (%s): send one JSON object per line, %s", protocol.DecodeErrorText("the line", err), answerShapes)
		return
	}
	if dec.More() {
		bad("more than one JSON value on the line: send one object per line")
		return
	}
	if in.RequestID == "" {
		switch len(a.pending) {
		case 0:
			bad("nothing is waiting for an answer")
			return
		case 1:
			in.RequestID = a.pending[0].id()
		default:
			bad("requestId is missing and %d requests wait (%s): name one", len(a.pending), a.pendingIDs())
			return
		}
	}
	it := a.find(in.RequestID)
	if it == nil {
		waiting := "nothing waits"
		if len(a.pending) > 0 {
			waiting = "waiting: " + a.pendingIDs()
		}
		bad("no request %q waits for an answer here (%s)", oneline.Cut(in.RequestID, 100), waiting)
		return
	}
	if it.approval != nil {
		if in.Answer != nil {
			bad("%s is an approval: answer it with {\"requestId\":%q,\"decision\":\"allow|always|deny\"}", it.id(), it.id())
			return
		}
		if in.Decision == nil {
			bad("decision is missing: allow, always or deny")
			return
		}
		d := protocol.ApprovalDecision(*in.Decision)
		if !d.IsKnown() {
			bad("decision %q is not allow, always or deny", oneline.Cut(*in.Decision, 40))
			return
		}
		a.answerApproval(it, d)
		return
	}
	if in.Decision != nil || in.Answer == nil {
		bad("%s is a question: answer it with {\"requestId\":%q,\"answer\":{\"choices\":[…]}} (or \"text\"; null dismisses it)", it.id(), it.id())
		return
	}
	var ans *protocol.InteractionsAnswerParamsAnswer
	if !bytes.Equal(bytes.TrimSpace(in.Answer), []byte("null")) {
		ad := json.NewDecoder(bytes.NewReader(in.Answer))
		ad.DisallowUnknownFields()
		if err := ad.Decode(&ans); err != nil {
			bad("answer is not {\"choices\":[…],\"text\":\"…\"} or null: %s", protocol.DecodeErrorText("answer", err))
			return
		}
	}
	a.answerQuestion(it, ans)
}

func (a *answerer) pendingIDs() string {
	var ids []string
	for _, it := range a.pending {
		ids = append(ids, it.id())
	}
	return strings.Join(ids, ", ")
}

// ---------------------------------------------------------------------------------------------
// Answering

// answerTimeout bounds one answer call.
const answerTimeout = 15 * time.Second

// answerApproval sends approvals.answer; false when it was not taken (the request goes on
// waiting, and the reason is on stderr).
func (a *answerer) answerApproval(it *pendingItem, d protocol.ApprovalDecision) bool {
	var res *protocol.ApprovalsAnswerResult
	err := a.send(func(ctx context.Context) (err error) {
		res, err = a.c.ApprovalsAnswer(ctx, &protocol.ApprovalsAnswerParams{SessionID: a.sid, RequestID: it.id(), Decision: d})
		return err
	})
	if err != nil {
		return a.refused(it, "approvals.answer", err)
	}
	how := map[protocol.ApprovalDecision]string{protocol.ApprovalDecisionAllow: "allowed once", protocol.ApprovalDecisionAlways: "allowed always",
		protocol.ApprovalDecisionDeny: "denied"}[d]
	if a.mode != approveAsk {
		how += " (--approve " + a.mode + ")"
	}
	extra := ""
	switch {
	case res.Stored != nil:
		extra = "; stored the safelist entry " + exact(res.Stored.Tool+entryPrefix(res.Stored))
	case res.Note != nil:
		extra = "; stored nothing: " + oneline.Line(*res.Note)
	}
	fmt.Fprintf(a.stderr, "zidane: %s: %s%s\n", how, it.summary(), extra)
	a.remove(it.id())
	return true
}

// entryPrefix is ":<prefix>" of a safelist entry that has one.
func entryPrefix(e *protocol.SafelistEntry) string {
	if e.Prefix != nil && *e.Prefix != "" {
		return ":" + *e.Prefix
	}
	return ""
}

// answerQuestion sends interactions.answer (nil dismisses); false when it was not taken.
func (a *answerer) answerQuestion(it *pendingItem, ans *protocol.InteractionsAnswerParamsAnswer) bool {
	err := a.send(func(ctx context.Context) error {
		_, err := a.c.InteractionsAnswer(ctx, &protocol.InteractionsAnswerParams{SessionID: a.sid, RequestID: it.id(), Answer: ans})
		return err
	})
	if err != nil {
		return a.refused(it, "interactions.answer", err)
	}
	how := "answered"
	if ans == nil {
		how = "dismissed"
	}
	if a.mode != approveAsk {
		how += " (--approve " + a.mode + ")"
	}
	fmt.Fprintf(a.stderr, "zidane: %s %s\n", how, it.summary())
	a.remove(it.id())
	return true
}

// refused reports an answer that was not taken; the request goes on waiting (a request the
// server no longer has ends with its resolved signal).
func (a *answerer) refused(it *pendingItem, method string, err error) bool {
	msg := err.Error()
	var rpcErr *protocol.Error
	if errors.As(err, &rpcErr) {
		msg = oneline.Line(rpcErr.Message)
	}
	fmt.Fprintf(a.stderr, "zidane: %s for %s: %s\n", method, it.summary(), msg)
	return false
}

// send makes one answer call, again once connected when the connection was down or dropped
// during it (a second answer to a request already answered is refused and changes nothing).
func (a *answerer) send(call func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), answerTimeout)
	defer cancel()
	for {
		err := call(ctx)
		var lost *client.ConnectionLostError
		if err == nil || !(errors.Is(err, client.ErrNotConnected) || errors.As(err, &lost)) || a.c.WaitConnected(ctx) != nil {
			return err
		}
	}
}
