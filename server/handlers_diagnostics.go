package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/workspace/diag"
	"github.com/zidane-server/zidane/server/workspace/sandbox"
)

// The files group's diagnostics (seed "files": files.diagnostics runs the project's tools, admin;
// cached until the files move; files.diagnosticsInvalidate, files.diagnosticsTools). The runner is
// server/workspace/diag; here the sandbox is wired in and the wire shapes mapped.

// diagnosticsPolicy is the sandbox policy diagnostics tools run under: the roots read-only, no
// network, writes only to the folder's own scratch directory (docs/security.md "Diagnostics").
const diagnosticsPolicy = sandbox.ReadOnly

// newDiagnostics builds the server's diagnostics runner on its sandbox.
func (s *Server) newDiagnostics() error {
	r, err := diag.New(s.ws, diag.Options{
		Prepare: func(cmd *exec.Cmd, dir string) error {
			return s.sandbox.Wrap(cmd, sandbox.Request{Policy: diagnosticsPolicy, Roots: s.ws.Roots(), SessionID: diagnosticsScratch(dir)})
		},
		Ready: func() error { return s.sandbox.Check(diagnosticsPolicy) },
	})
	s.diag = r
	return err
}

// diagnosticsScratch names a folder's scratch directory under the sandbox's scratch base: one per
// folder, so one project's build caches are never read by another's tools.
func diagnosticsScratch(dir string) string {
	sum := sha256.Sum256([]byte(dir))
	return "diagnostics-" + hex.EncodeToString(sum[:8])
}

// toolNames checks a tools filter: every name must be one files.diagnosticsTools lists.
func toolNames(in []protocol.DiagnosticsToolName) ([]string, error) {
	out := make([]string, 0, len(in))
	for i, n := range in {
		if !diag.Known(string(n)) {
			return nil, protocol.NewInvalidParamsError(fmt.Sprintf("params/tools/%d: %q is not a diagnostics tool; use one of %q.", i, n, diag.Names),
				&protocol.InvalidParamsErrorData{Pointer: fmt.Sprintf("/tools/%d", i)})
		}
		out = append(out, string(n))
	}
	return out, nil
}

// Diagnostics implements files.diagnostics: the folder's tools' findings, cached until its files
// move.
func (h filesHandler) Diagnostics(ctx context.Context, p *protocol.FilesDiagnosticsParams) (*protocol.FilesDiagnosticsResult, error) {
	names, err := toolNames(p.Tools)
	if err != nil {
		return nil, err
	}
	_, dir, err := h.s.resolveCwd(p.Cwd)
	if err != nil {
		return nil, err
	}
	rep, err := h.s.diag.Run(ctx, dir, names)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, protocol.NewHandlerFailedError(fmt.Sprintf("The tools of %q are still running past this request's time limit (%s); call files.diagnostics again: it waits for that run and answers it.",
				dir, h.s.cfg.Limits.RequestTimeout))
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, protocol.NewHandlerFailedError(fmt.Sprintf("The folder %q could not be checked: %v", dir, err))
	}
	res := &protocol.FilesDiagnosticsResult{Diagnostics: make([]protocol.Diagnostic, 0, len(rep.Diagnostics)),
		Tools: make([]protocol.DiagnosticsToolRun, 0, len(rep.Tools)), Cached: rep.Cached, CheckedAt: rep.CheckedAt.UnixMilli()}
	for _, d := range rep.Diagnostics {
		res.Diagnostics = append(res.Diagnostics, protocol.Diagnostic{Tool: protocol.DiagnosticsToolName(d.Tool), File: d.File,
			Line: d.Line, Column: d.Column, Severity: protocol.DiagnosticSeverity(d.Severity), Message: d.Message})
	}
	for _, t := range rep.Tools {
		tr := protocol.DiagnosticsToolRun{Name: protocol.DiagnosticsToolName(t.Name), Ran: t.Ran, OK: t.OK, DurationMs: t.Duration.Milliseconds()}
		if t.Note != "" {
			tr.Note = ptr(t.Note)
		}
		res.Tools = append(res.Tools, tr)
	}
	return res, nil
}

// DiagnosticsInvalidate implements files.diagnosticsInvalidate.
func (h filesHandler) DiagnosticsInvalidate(ctx context.Context, p *protocol.FilesDiagnosticsInvalidateParams) (*protocol.FilesDiagnosticsInvalidateResult, error) {
	_, dir, err := h.s.resolveCwd(p.Cwd)
	if err != nil {
		return nil, err
	}
	return &protocol.FilesDiagnosticsInvalidateResult{Dropped: h.s.diag.Invalidate(dir)}, nil
}

// DiagnosticsTools implements files.diagnosticsTools: each tool, whether it applies, is found and
// runs in the folder, and why.
func (h filesHandler) DiagnosticsTools(ctx context.Context, p *protocol.FilesDiagnosticsToolsParams) (*protocol.FilesDiagnosticsToolsResult, error) {
	_, dir, err := h.s.resolveCwd(p.Cwd)
	if err != nil {
		return nil, err
	}
	res := &protocol.FilesDiagnosticsToolsResult{Tools: []protocol.DiagnosticsTool{}}
	for _, t := range h.s.diag.Tools(dir) {
		dt := protocol.DiagnosticsTool{Name: protocol.DiagnosticsToolName(t.Name), Applies: t.Applies, Available: t.Available, Runs: t.Runs, Reason: t.Reason}
		if len(t.Argv) > 0 {
			dt.Command = ptr(strings.Join(t.Argv, " "))
		}
		res.Tools = append(res.Tools, dt)
	}
	return res, nil
}
