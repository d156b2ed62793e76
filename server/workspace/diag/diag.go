// Package diag runs a project's own checkers (go vet, tsc, eslint) in a folder of the workspace
// roots and answers their findings as structured diagnostics (the protocol seed's "files" section:
// files.diagnostics, files.diagnosticsInvalidate, files.diagnosticsTools).
//
// Which tools run is decided by what the folder has (go.mod, tsconfig.json, an ESLint config);
// each runs through Options.Prepare, which the server points at the OS sandbox's read-only
// policy, with a timeout and an output cap. Answers are cached per folder until the folder's files
// move (a bounded walk of names, sizes and modification times) or Invalidate drops them. One run
// per folder at a time (a second caller waits and shares it), a few on the server at once.
//
// The package imports nothing of the transport; every path goes through server/workspace.
package diag

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/zidane-server/zidane/server/workspace"
)

// The tool names, as the protocol spells them (DiagnosticsToolName).
const (
	GoVet  = "go vet"
	Tsc    = "tsc"
	ESLint = "eslint"
)

// Names lists every tool, in run order.
var Names = []string{GoVet, Tsc, ESLint}

// Severity is how bad a diagnostic is: Error, Warning or Info.
type Severity string

// The severities.
const (
	Error   Severity = "error"
	Warning Severity = "warning"
	Info    Severity = "info"
)

// Diagnostic is one finding of a tool.
type Diagnostic struct {
	// Tool is the tool's name (GoVet, Tsc, ESLint).
	Tool string
	// File is relative to the folder, slash-separated ("../x.go" outside it); "" when the finding
	// names no file.
	File string
	// Line and Column count from 1; 0 when the tool gave none.
	Line, Column int
	// Severity is Error, Warning or Info.
	Severity Severity
	// Message is the tool's message, at most MaxMessage bytes.
	Message string
}

// ToolRun says how one tool's run went.
type ToolRun struct {
	// Name is the tool's name.
	Name string
	// Ran: the tool was started.
	Ran bool
	// OK: it ran to the end and its output was understood (exit 0, or diagnostics reported).
	OK bool
	// Duration is how long it ran.
	Duration time.Duration
	// Note says why it did not run or was not OK, or how many diagnostics were left out.
	Note string
}

// Report is a files.diagnostics answer.
type Report struct {
	// Diagnostics are by tool (Names order), then in each tool's order.
	Diagnostics []Diagnostic
	// Tools are the tools considered, in Names order.
	Tools []ToolRun
	// Cached: every tool's answer came from the cache.
	Cached bool
	// CheckedAt is when the oldest of the answers' tools ran.
	CheckedAt time.Time
}

// ToolInfo is a tool as it stands in one folder (files.diagnosticsTools).
type ToolInfo struct {
	// Name is the tool's name.
	Name string
	// Applies: the folder has the tool's configuration.
	Applies bool
	// Available: the tool's program is found.
	Available bool
	// Runs: Run would start it (it applies, is available and Options.Ready allows it).
	Runs bool
	// Reason says why it runs or not, one sentence.
	Reason string
	// Argv is the command it runs, when it runs.
	Argv []string
}

// Defaults of Options (docs/security.md "Diagnostics" names them).
const (
	DefaultTimeout        = 2 * time.Minute
	DefaultOutputMax      = 4 << 20
	DefaultMaxDiagnostics = 2000
	DefaultMaxRuns        = 2
	DefaultMaxEntries     = 20000
	DefaultMaxCached      = 64
	// MaxMessage bounds one diagnostic's message, in bytes.
	MaxMessage = 4000
	// noteMax bounds a tool's note, in bytes.
	noteMax = 1000
)

// Options configure a Runner. Zero members take the defaults above.
type Options struct {
	// Prepare rewrites cmd, prepared to run in the folder dir (Path, Args, Dir, Env, Stdio,
	// SysProcAttr.Setpgid), so that it runs sandboxed; an error means cmd must not run (the note
	// says it). Required.
	Prepare func(cmd *exec.Cmd, dir string) error
	// Ready returns why Prepare cannot run commands now (nil: it can); files.diagnosticsTools
	// reports it. Nil means always ready.
	Ready func() error
	// Timeout bounds each tool's run (then its process group is killed).
	Timeout time.Duration
	// OutputMax bounds the bytes of stdout and of stderr kept per tool; past it the output is cut.
	OutputMax int
	// MaxDiagnostics bounds the diagnostics kept per tool.
	MaxDiagnostics int
	// MaxRuns bounds the folders checked at once on the server.
	MaxRuns int
	// MaxEntries bounds the entries a fingerprint walks; files past it are not watched.
	MaxEntries int
	// MaxCached bounds the folders whose answers are cached (the least recently used goes).
	MaxCached int
}

// Runner runs the tools and caches their answers. Safe for concurrent use.
type Runner struct {
	ws  *workspace.Workspace
	o   Options
	sem chan struct{}

	mu      sync.Mutex
	cache   map[string]*entry
	flights map[string]*flight
}

// entry is one folder's cached answers: each tool's, as of the fingerprint fp.
type entry struct {
	fp    string
	tools map[string]toolResult
	used  time.Time
}

type toolResult struct {
	run   ToolRun
	diags []Diagnostic
	at    time.Time
}

// flight is a run in progress for one folder; done closes when it ends.
type flight struct{ done chan struct{} }

// New returns a Runner over the workspace ws.
func New(ws *workspace.Workspace, o Options) (*Runner, error) {
	if o.Prepare == nil {
		return nil, errors.New("diag: Options.Prepare is required")
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	def(&o.OutputMax, DefaultOutputMax)
	def(&o.MaxDiagnostics, DefaultMaxDiagnostics)
	def(&o.MaxRuns, DefaultMaxRuns)
	def(&o.MaxEntries, DefaultMaxEntries)
	def(&o.MaxCached, DefaultMaxCached)
	return &Runner{ws: ws, o: o, sem: make(chan struct{}, o.MaxRuns), cache: map[string]*entry{}, flights: map[string]*flight{}}, nil
}

// Known reports whether name is a tool this package runs.
func Known(name string) bool { return slices.Contains(Names, name) }

// selected returns the tools of names (all when empty), in Names order; unknown names are
// dropped (the caller refuses them first).
func selected(names []string) []string {
	if len(names) == 0 {
		return Names
	}
	var out []string
	for _, n := range Names {
		if slices.Contains(names, n) {
			out = append(out, n)
		}
	}
	return out
}

// Run answers the diagnostics of the folder dir (absolute, inside the roots) for the tools of
// names (all when empty): from the cache when the folder's files have not moved since the tools
// ran, else by running them. A call for a folder being checked waits for that run and then takes
// its answer. ctx bounds only the wait: a run once started ends by itself (at most
// Options.Timeout per tool) and its answer is cached.
func (r *Runner) Run(ctx context.Context, dir string, names []string) (*Report, error) {
	names = selected(names)
	for {
		fp, err := r.fingerprint(dir)
		if err != nil {
			return nil, err
		}
		r.mu.Lock()
		if rep := r.cachedLocked(dir, fp, names); rep != nil {
			r.mu.Unlock()
			return rep, nil
		}
		if f := r.flights[dir]; f != nil {
			r.mu.Unlock()
			select {
			case <-f.done:
				continue // look again: the run may have answered these tools
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		f := &flight{done: make(chan struct{})}
		r.flights[dir] = f
		r.mu.Unlock()
		var rep *Report
		go func() {
			defer close(f.done)
			rep = r.fly(dir, fp, names)
		}()
		select {
		case <-f.done:
			return rep, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// cachedLocked answers from the cache when every tool of names has an answer as of fp.
func (r *Runner) cachedLocked(dir, fp string, names []string) *Report {
	e := r.cache[dir]
	if e == nil || e.fp != fp {
		return nil
	}
	res := make(map[string]toolResult, len(names))
	for _, n := range names {
		tr, ok := e.tools[n]
		if !ok {
			return nil
		}
		res[n] = tr
	}
	e.used = time.Now()
	rep := report(names, res)
	rep.Cached = true
	return rep
}

// fly runs the tools of names that have no answer as of fp, caches what is worth keeping and
// answers every tool of names. It holds a server-wide slot while it runs.
func (r *Runner) fly(dir, fp string, names []string) *Report {
	defer func() {
		r.mu.Lock()
		delete(r.flights, dir)
		r.mu.Unlock()
	}()
	r.sem <- struct{}{}
	defer func() { <-r.sem }()
	r.mu.Lock()
	have := map[string]toolResult{}
	if e := r.cache[dir]; e != nil && e.fp == fp {
		for n, tr := range e.tools {
			have[n] = tr
		}
	}
	r.mu.Unlock()
	res := map[string]toolResult{}
	var fresh []string
	for _, n := range names {
		if tr, ok := have[n]; ok {
			res[n] = tr
			continue
		}
		res[n] = r.runTool(dir, r.plan(dir, n))
		fresh = append(fresh, n)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.cache[dir]
	if e == nil || e.fp != fp {
		e = &entry{fp: fp, tools: map[string]toolResult{}}
	}
	for _, n := range fresh {
		// A tool that could not run or failed is asked again next time; its answer is not kept.
		if cacheable(res[n]) {
			e.tools[n] = res[n]
		}
	}
	e.used = time.Now()
	if len(e.tools) > 0 {
		r.cache[dir] = e
		r.evictLocked()
	}
	return report(names, res)
}

// cacheable reports whether a tool's answer is kept until the files move: it ran to the end and
// was understood, or the folder lacks its configuration. A tool the sandbox refused, whose program
// is missing, that failed or timed out is tried again on the next call.
func cacheable(tr toolResult) bool {
	return tr.run.OK || !tr.run.Ran && strings.HasPrefix(tr.run.Note, notApplies)
}

// evictLocked drops the least recently used folders past MaxCached.
func (r *Runner) evictLocked() {
	for len(r.cache) > r.o.MaxCached {
		var oldest string
		var at time.Time
		for d, e := range r.cache {
			if oldest == "" || e.used.Before(at) {
				oldest, at = d, e.used
			}
		}
		delete(r.cache, oldest)
	}
}

// report assembles a Report from each tool's answer, in names order.
func report(names []string, res map[string]toolResult) *Report {
	rep := &Report{Diagnostics: []Diagnostic{}, Tools: make([]ToolRun, 0, len(names))}
	for _, n := range names {
		tr := res[n]
		rep.Diagnostics = append(rep.Diagnostics, tr.diags...)
		rep.Tools = append(rep.Tools, tr.run)
		if rep.CheckedAt.IsZero() || tr.at.Before(rep.CheckedAt) {
			rep.CheckedAt = tr.at
		}
	}
	return rep
}

// Invalidate drops the folder dir's cached answers and reports whether there were any.
func (r *Runner) Invalidate(dir string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.cache[dir]
	delete(r.cache, dir)
	return ok
}

// Tools answers every tool as it stands in the folder dir; it runs nothing.
func (r *Runner) Tools(dir string) []ToolInfo {
	var ready error
	if r.o.Ready != nil {
		ready = r.o.Ready()
	}
	out := make([]ToolInfo, 0, len(Names))
	for _, n := range Names {
		p := r.plan(dir, n)
		ti := ToolInfo{Name: n, Applies: p.applies, Available: p.argv != nil, Reason: p.why}
		if p.applies && p.argv != nil {
			if ready != nil {
				ti.Reason = "The sandbox cannot run it here: " + ready.Error()
			} else {
				ti.Runs, ti.Argv = true, p.argv
			}
		}
		out = append(out, ti)
	}
	return out
}

// fingerprint sums the names, sizes, modes and modification times of the folder's entries
// (walked through the confinement point: hidden paths and links' targets are not visited),
// skipping .git and node_modules but for the programs the tools run from node_modules/.bin, at
// most MaxEntries entries.
func (r *Runner) fingerprint(dir string) (string, error) {
	h := sha256.New()
	n := 0
	err := r.ws.WalkDir(dir, ".", func(_ workspace.Path, name string, d fs.DirEntry, err error) error {
		if err != nil {
			fmt.Fprintf(h, "%s\x00error\n", name)
			return nil
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") && n > 0 {
			return fs.SkipDir
		}
		n++
		if n > r.o.MaxEntries {
			h.Write([]byte("truncated\n"))
			return fs.SkipAll
		}
		fi, err := d.Info()
		if err != nil {
			fmt.Fprintf(h, "%s\x00gone\n", name)
			return nil
		}
		fmt.Fprintf(h, "%s\x00%d\x00%d\x00%d\n", name, fi.Size(), fi.ModTime().UnixNano(), fi.Mode())
		return nil
	})
	if err != nil {
		return "", err
	}
	for _, bin := range []string{"node_modules/.bin/tsc", "node_modules/.bin/eslint"} {
		if _, fi, err := r.ws.Stat(dir, bin); err == nil {
			fmt.Fprintf(h, "%s\x00%d\x00%d\n", bin, fi.Size(), fi.ModTime().UnixNano())
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// notApplies starts the note of a tool whose configuration the folder lacks.
const notApplies = "Not here: "

// plan is what running one tool in a folder means.
type plan struct {
	name    string
	applies bool
	argv    []string // nil: the program is not found
	why     string   // the reason, one sentence
	parse   func(dir string, stdout, stderr []byte) []Diagnostic
}

// spec is one tool: what makes it apply, the program and its arguments, the parser.
type spec struct {
	name    string
	configs []string // any of them in the folder makes the tool apply, first found named
	lacks   string   // what the folder lacks when none is there
	program string
	local   bool // look in the folder's node_modules/.bin before the server's PATH
	args    []string
	parse   func(dir string, stdout, stderr []byte) []Diagnostic
}

// specs are the tools, in Names order.
var specs = []spec{
	{name: GoVet, configs: []string{"go.mod"}, lacks: "go.mod", program: "go", args: []string{"vet", "./..."}, parse: parseGoVet},
	{name: Tsc, configs: []string{"tsconfig.json"}, lacks: "tsconfig.json", program: "tsc", local: true,
		args: []string{"--noEmit", "--pretty", "false", "-p", "."}, parse: parseTsc},
	{name: ESLint, configs: eslintConfigs, lacks: "ESLint config (eslint.config.js or .eslintrc)", program: "eslint", local: true,
		args: []string{"-f", "json", "."}, parse: parseESLint},
}

// plan decides whether tool name applies to the folder dir and which program it runs.
func (r *Runner) plan(dir, name string) plan {
	p := plan{name: name}
	i := slices.IndexFunc(specs, func(s spec) bool { return s.name == name })
	if i < 0 {
		p.why = notApplies + "no such tool."
		return p
	}
	sp := specs[i]
	p.parse = sp.parse
	cfg := ""
	for _, c := range sp.configs {
		if r.isFile(dir, c) {
			cfg = c
			break
		}
	}
	if p.applies = cfg != ""; !p.applies {
		p.why = notApplies + "the folder has no " + sp.lacks + "."
		return p
	}
	bin, where := "", ""
	if sp.local {
		bin, where = r.program(dir, sp.program)
	} else if b, err := exec.LookPath(sp.program); err == nil {
		bin, where = b, "from the server's PATH"
	}
	if bin == "" {
		looked := "the server's PATH"
		if sp.local {
			looked = "the folder's node_modules/.bin and " + looked
		}
		p.why = fmt.Sprintf("The folder has %s, but %s is not found (looked in %s).", cfg, sp.program, looked)
		return p
	}
	p.argv = append([]string{bin}, sp.args...)
	p.why = fmt.Sprintf("The folder has %s; %s %s runs (%s).", cfg, sp.program, strings.Join(sp.args, " "), where)
	return p
}

// eslintConfigs are the config files that make eslint apply (flat configs first).
var eslintConfigs = []string{"eslint.config.js", "eslint.config.mjs", "eslint.config.cjs", "eslint.config.ts",
	"eslint.config.mts", "eslint.config.cts", ".eslintrc.js", ".eslintrc.cjs", ".eslintrc.json", ".eslintrc.yaml",
	".eslintrc.yml", ".eslintrc"}

// isFile reports whether rel names a regular file of the folder (through the confinement point).
func (r *Runner) isFile(dir, rel string) bool {
	_, fi, err := r.ws.Stat(dir, rel)
	return err == nil && fi.Mode().IsRegular()
}

// program finds name in the folder's node_modules/.bin (an executable file whose links stay in
// the roots), else on the server's PATH, and says where.
func (r *Runner) program(dir, name string) (string, string) {
	rel := "node_modules/.bin/" + name
	if rp, fi, err := r.ws.Stat(dir, rel); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return rp.Abs(), "the folder's " + rel
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, "from the server's PATH"
	}
	return "", ""
}

// passEnv are the server's variables a tool sees (an allowlist); the sandbox adds the scratch
// folder's (HOME, TMPDIR, GOCACHE, …).
var passEnv = []string{"PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ"}

// toolEnv is each tool's environment: passEnv, no module downloads (the sandbox has no network
// anyway), no colours.
func toolEnv() []string {
	var env []string
	for _, k := range passEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return append(env, "GOPROXY=off", "GOFLAGS=-mod=readonly", "NO_COLOR=1", "FORCE_COLOR=0", "CI=1")
}

// runTool runs one tool's plan in dir and parses its output.
func (r *Runner) runTool(dir string, p plan) toolResult {
	tr := toolResult{run: ToolRun{Name: p.name}, at: time.Now()}
	if !p.applies || p.argv == nil {
		tr.run.Note = p.why
		return tr
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.o.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.argv[0], p.argv[1:]...)
	cmd.Dir = dir
	cmd.Env = toolEnv()
	stdout, stderr := &capped{max: r.o.OutputMax}, &capped{max: r.o.OutputMax}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := r.o.Prepare(cmd, dir); err != nil {
		tr.run.Note = "The sandbox refused it: " + err.Error()
		return tr
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err := cmd.Run()
	tr.run.Duration = time.Since(start)
	tr.at = start
	if cmd.Process == nil {
		tr.run.Note = "It could not start: " + err.Error()
		return tr
	}
	tr.run.Ran = true
	if ctx.Err() != nil {
		tr.run.Note = fmt.Sprintf("It ran past %s and was killed.", r.o.Timeout)
		return tr
	}
	diags := p.parse(dir, stdout.b, stderr.b)
	for i := range diags {
		diags[i].Tool = p.name
		diags[i].Message = cut(diags[i].Message, MaxMessage)
	}
	var notes []string
	if len(diags) > r.o.MaxDiagnostics {
		notes = append(notes, fmt.Sprintf("%d diagnostics; the first %d are listed.", len(diags), r.o.MaxDiagnostics))
		diags = diags[:r.o.MaxDiagnostics]
	}
	if stdout.cut || stderr.cut {
		notes = append(notes, fmt.Sprintf("Its output passed %d bytes and was cut.", r.o.OutputMax))
	}
	tr.diags = diags
	tr.run.OK = err == nil || len(diags) > 0
	if !tr.run.OK {
		out := strings.TrimSpace(string(stderr.b))
		if out == "" {
			out = strings.TrimSpace(string(stdout.b))
		}
		notes = append(notes, fmt.Sprintf("It failed (%v) and reported no diagnostics: %s", err, cut(out, noteMax)))
	}
	tr.run.Note = strings.Join(notes, " ")
	return tr
}

// cut returns s cut to at most n bytes on a rune boundary, "…" marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n - len("…")
	for i > 0 && (s[i]&0xC0) == 0x80 {
		i--
	}
	return s[:i] + "…"
}

// capped keeps the first max bytes written to it.
type capped struct {
	mu  sync.Mutex
	max int
	b   []byte
	cut bool
}

// Write implements io.Writer; it never fails, so the tool is never blocked on a full pipe.
func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.max - len(c.b); room < len(p) {
		c.b = append(c.b, p[:max(room, 0)]...)
		c.cut = true
	} else {
		c.b = append(c.b, p...)
	}
	return len(p), nil
}
