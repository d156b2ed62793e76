// Package tools holds the agent's tools (issue 9): read_file, list_dir, glob, grep, write_file,
// edit_file, exec, ask_user and update_plan. Each tool has a JSON Schema for its input, which the
// provider receives, and runs in two steps: Check validates the input and describes the call (the
// summary an approval shows, the paths it writes, the parsed command) without changing anything;
// Run performs it, resolving every path again at use through server/workspace, the one
// confinement point. Approvals, modes and the safelist are the runtime's: this package says what a
// call is (Kind, Check) and how an exec command matches a safelist entry (command.go).
//
// The package imports nothing of the transport.
package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/workspace"
)

// Kind classifies a tool for approvals.
type Kind string

const (
	// KindRead tools only read inside the workspace; they never ask.
	KindRead Kind = "read"
	// KindEdit tools change files (write_file, edit_file): they ask in mode "ask", pass in
	// "auto-edit" (except writes under .git/), are refused in "locked".
	KindEdit Kind = "edit"
	// KindExec runs a command (exec): asks unless a safelist entry matches; refused in "locked".
	KindExec Kind = "exec"
	// KindInteract tools talk to the person or the session (ask_user, update_plan); never ask.
	KindInteract Kind = "interact"
	// KindMCP is an MCP server's tool (issue 23 item 2): asks in "ask" and "auto-edit" unless a
	// safelist entry names its server and tool; refused in "locked". A server's readOnlyHint is
	// shown, never trusted to skip the approval.
	KindMCP Kind = "mcp"
)

// Spec is what the provider receives about a tool.
type Spec struct {
	// Name is the tool's name as the model calls it.
	Name string
	// Description tells the model what the tool does and its limits.
	Description string
	// InputSchema is the JSON Schema (draft 2020-12 subset) of the tool's input object.
	InputSchema json.RawMessage
}

// Tool is one agent tool.
type Tool interface {
	// Spec describes the tool to the provider.
	Spec() Spec
	// Kind says how approvals treat the tool.
	Kind() Kind
	// Check validates input and describes the call without changing anything. An error is a
	// *Failure the model can read (e.g. a path outside the workspace): the call is not run and
	// nobody is asked.
	Check(ctx context.Context, env *Env, input json.RawMessage) (*Call, error)
	// Run performs the call. It checks again at use everything Check checked (a path or a cwd
	// may have changed while an approval waited). Tool-level failures are a Result with IsError;
	// an error return is only for a cancelled ctx.
	Run(ctx context.Context, env *Env, input json.RawMessage) (*Result, error)
}

// Call describes one checked call, for approvals and the safelist.
type Call struct {
	// Summary is one line for the approval dialog, e.g. `write_file notes.md (12 lines)`.
	Summary string
	// Paths are the files the call writes, resolved inside the roots (edits only).
	Paths []workspace.Path
	// GitMeta is true when the call writes into a repository's git folder (a .git folder, or a
	// bare repository found by what it holds: workspace.Path.InGitDir): it asks in every mode but
	// locked, because such a write turns safelisted git commands, or git run on that repository,
	// into code execution (runtime case R22, field case T01).
	GitMeta bool
	// Diff is the unified diff the edit would make now (edits only; recomputed at Run).
	Diff string
	// Command is the parsed command (exec only).
	Command *Command
	// Cwd is the folder the call runs in (exec only), resolved inside the roots.
	Cwd string
	// SafelistKey is what a safelist entry's prefix must equal for the call to pass without
	// asking, and what "always" stores (MCP tools: "<server>/<tool>"; "" otherwise).
	SafelistKey string
	// AskAlways makes the call ask in every mode but locked, even auto-edit (a write into the
	// .zidane/ or .claude/ folders, which configure what runs: issue 23 item 3).
	AskAlways bool
	// AskNote says why the call asks every time, for the approval request ("" none).
	AskNote string
}

// Result is a tool's output for the model and the transcript.
type Result struct {
	// Content is the text the model reads (capped; says so when cut).
	Content string
	// IsError marks a tool-level failure the model should react to.
	IsError bool
	// Diff is the unified diff an edit made (write_file, edit_file), for clients' edit views.
	Diff string
	// Truncated is true when Content was cut.
	Truncated bool
	// Sandbox is the sandbox policy exec's command ran under ("" for other tools, or without a
	// sandbox).
	Sandbox string
	// Media are an MCP tool's images and audio (at most MaxMediaBytes in all), for the
	// tool-result event.
	Media []protocol.ToolResultMedia
}

// Failure is a tool error a model can read: what went wrong and what to do.
type Failure struct{ Msg string }

// Error implements error.
func (f *Failure) Error() string { return f.Msg }

// failf builds a *Failure.
func failf(format string, a ...any) error { return &Failure{Msg: fmt.Sprintf(format, a...)} }

// failure turns an error (a *workspace.Error, a *Failure, anything else) into a failed Result.
func failure(err error) *Result { return &Result{Content: err.Error(), IsError: true} }

// Question is what ask_user asks the person (interaction:request).
type Question struct {
	// Prompt is the question.
	Prompt string
	// Options are the choices offered (may be empty: free text only).
	Options []string
	// Multiple allows choosing several options.
	Multiple bool
	// AllowText allows a free-text answer.
	AllowText bool
}

// Answer is the person's answer; a nil *Answer means the question was dismissed.
type Answer struct {
	// Choices are the chosen options.
	Choices []string
	// Text is the free-text answer, if any.
	Text string
}

// PlanStep is one step of the session's plan (update_plan).
type PlanStep struct {
	// Title says what the step does.
	Title string `json:"title"`
	// Status is "pending", "in_progress" or "done".
	Status string `json:"status"`
}

// Env is what a call runs against: the workspace, the session's cwd, and the runtime's hooks.
type Env struct {
	// WS is the confinement point every path goes through.
	WS *workspace.Workspace
	// Cwd is the session's folder (absolute, inside the roots).
	Cwd string
	// SessionID names the session (for the sandbox and logs).
	SessionID string
	// Config holds the limits and the exec launcher.
	Config *Config
	// Ask asks the person a question and waits; a nil Answer means dismissed. Nil: ask_user fails.
	Ask func(ctx context.Context, q Question) (*Answer, error)
	// SetPlan replaces the session's plan. Nil: update_plan fails.
	SetPlan func(ctx context.Context, explanation string, steps []PlanStep) error
	// NarrowSandbox, when set, maps the session's sandbox policy to the run's agent's (exec's
	// LaunchRequest.Narrow).
	NarrowSandbox func(policy string) string
}

// Config holds the tools' limits. Zero fields take the defaults of Defaults.
type Config struct {
	// ReadMaxBytes caps the bytes read_file returns (default 256 KiB); larger files are read in
	// pieces with offset and limit.
	ReadMaxBytes int
	// ReadMaxLines is read_file's default line limit (default 2000).
	ReadMaxLines int
	// OutputMaxBytes caps any tool's content (default 64 KiB); exec keeps the head and the tail.
	OutputMaxBytes int
	// ListMaxEntries caps list_dir and glob (default 1000).
	ListMaxEntries int
	// GrepMaxResults caps grep's matching lines (default 200; the input may ask for fewer).
	GrepMaxResults int
	// GrepTimeout bounds one grep (default 10 s).
	GrepTimeout time.Duration
	// GrepMaxFileBytes skips larger files in grep (default 2 MiB).
	GrepMaxFileBytes int64
	// ExecTimeout is exec's default timeout (default 2 min); ExecMaxTimeout caps what the input
	// may ask (default 10 min).
	ExecTimeout, ExecMaxTimeout time.Duration
	// ExecKillGrace is the wait between SIGTERM and SIGKILL to exec's process group (default 300 ms).
	ExecKillGrace time.Duration
	// ExecPipeDrain bounds the wait for exec's output pipes after the shell exits or is killed
	// (a process that left the group may still hold them; default 500 ms).
	ExecPipeDrain time.Duration
	// ExecEnv is the environment exec's commands get; nil: AllowedEnv of the server's environment.
	ExecEnv []string
	// Launcher prepares exec's command before it starts (the OS sandbox plugs in here); nil runs
	// `bash -c` as is.
	Launcher Launcher
	// Shell is the shell exec runs (default "bash").
	Shell string
}

// Defaults returns c with every zero field set to its default.
func (c Config) Defaults() Config {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defD := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.ReadMaxBytes, 256<<10)
	def(&c.ReadMaxLines, 2000)
	def(&c.OutputMaxBytes, 64<<10)
	def(&c.ListMaxEntries, 1000)
	def(&c.GrepMaxResults, 200)
	defD(&c.GrepTimeout, 10*time.Second)
	if c.GrepMaxFileBytes <= 0 {
		c.GrepMaxFileBytes = 2 << 20
	}
	defD(&c.ExecTimeout, 2*time.Minute)
	defD(&c.ExecMaxTimeout, 10*time.Minute)
	defD(&c.ExecKillGrace, 300*time.Millisecond)
	defD(&c.ExecPipeDrain, 500*time.Millisecond)
	if c.Shell == "" {
		c.Shell = "bash"
	}
	return c
}

func (e *Env) cfg() Config {
	if e.Config == nil {
		return Config{}.Defaults()
	}
	return e.Config.Defaults()
}

// Registry is the set of tools a run offers, by name.
type Registry struct {
	byName map[string]Tool
	order  []string
}

// NewRegistry builds a registry of tools; a later tool with the same name replaces an earlier one.
func NewRegistry(ts ...Tool) *Registry {
	r := &Registry{byName: map[string]Tool{}}
	for _, t := range ts {
		n := t.Spec().Name
		if _, ok := r.byName[n]; !ok {
			r.order = append(r.order, n)
		}
		r.byName[n] = t
	}
	return r
}

// All returns the registry of every tool of this package.
func All() *Registry {
	return NewRegistry(ReadFile{}, ListDir{}, Glob{}, Grep{}, WriteFile{}, EditFile{}, Exec{}, AskUser{}, UpdatePlan{})
}

// Get returns the tool named name.
func (r *Registry) Get(name string) (Tool, bool) {
	t, ok := r.byName[name]
	return t, ok
}

// Names returns the tools' names in registration order.
func (r *Registry) Names() []string { return append([]string(nil), r.order...) }

// Specs returns every tool's Spec, in registration order.
func (r *Registry) Specs() []Spec {
	out := make([]Spec, 0, len(r.order))
	for _, n := range r.order {
		out = append(out, r.byName[n].Spec())
	}
	return out
}

// decode parses a tool's input into v, with an error the model can act on. Unknown fields are
// ignored, like the protocol's params.
func decode(name string, input json.RawMessage, v any) error {
	if len(strings.TrimSpace(string(input))) == 0 {
		input = json.RawMessage("{}")
	}
	if err := json.Unmarshal(input, v); err != nil {
		return failf("%s: the input is not valid for its schema (%s); send a JSON object with the documented fields.", name, protocol.DecodeErrorText("input", err))
	}
	return nil
}

// capText cuts s to at most max bytes (on a rune boundary) and says so.
func capText(s string, max int) (string, bool) {
	if len(s) <= max {
		return s, false
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n[output cut: %d of %d bytes shown]", cut, len(s)), true
}
