package server

import (
	"context"
	"errors"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/store"
	"github.com/zidane-server/zidane/server/workspace/sandbox"
)

type hostHandler struct{ s *Server }

// Host returns the host group's handler (seed "host").
func (h *handlers) Host() protocol.HostHandler { return hostHandler{h.s} }

// hostTools are the programs host.info looks for on the server's PATH.
var hostTools = []string{"bash", "sh", "git", "go", "node", "npm", "npx", "pnpm", "yarn", "bun", "deno", "python3",
	"pip3", "uv", "make", "cc", "gcc", "clang", "cargo", "rustc", "java", "curl", "rg", "docker", "psql"}

// hostCache holds host.info's answer for a minute (seed "host": "cached for a minute").
type hostCache struct {
	mu   sync.Mutex
	at   time.Time
	info *protocol.HostInfo
}

// Info implements host.info.
func (h hostHandler) Info(_ context.Context, p *protocol.HostInfoParams) (*protocol.HostInfo, error) {
	s := h.s
	refresh := p.Refresh != nil && *p.Refresh
	s.host.mu.Lock()
	defer s.host.mu.Unlock()
	if s.host.info != nil && !refresh && time.Since(s.host.at) < time.Minute {
		return s.host.info, nil
	}
	sup := s.sandbox.Support(refresh)
	info := &protocol.HostInfo{OS: runtime.GOOS, Arch: runtime.GOARCH, Tools: []protocol.HostTool{},
		ProbedAt: sup.ProbedAt.UnixMilli(), Sandbox: sandboxInfo(sup, s.cfg.Sandbox),
		Environments: environments(sup, s.cfg.Sandbox, s.cfg.ProjectTerminals)}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		info.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	for _, t := range hostTools {
		if path, err := exec.LookPath(t); err == nil {
			info.Tools = append(info.Tools, protocol.HostTool{Name: t, Path: path})
		}
	}
	s.host.info, s.host.at = info, time.Now()
	return info, nil
}

// sandboxInfo is the sandbox part of host.info.
func sandboxInfo(sup sandbox.Support, c SandboxConfig) protocol.SandboxInfo {
	l := c.Limits
	if l == (sandbox.Limits{}) {
		l = sandbox.DefaultLimits
	}
	out := protocol.SandboxInfo{Kind: sup.Kind, LandlockAbi: sup.LandlockABI, Features: []protocol.SandboxFeature{},
		Policies: []protocol.SandboxPolicy{}, DefaultPolicy: protocol.SandboxPolicy(c.Default), AllowOff: c.AllowOff,
		Notes: append([]string{}, sup.Notes...),
		Limits: protocol.SandboxLimits{CPUSeconds: int64(orDefault(l.CPUSeconds, sandbox.DefaultLimits.CPUSeconds)),
			MemoryBytes: int64(orDefault(l.MemoryBytes, sandbox.DefaultLimits.MemoryBytes)),
			Processes:   int64(orDefault(l.Processes, sandbox.DefaultLimits.Processes)),
			FileBytes:   int64(orDefault(l.FileBytes, sandbox.DefaultLimits.FileBytes))}}
	for _, f := range sandbox.Features {
		out.Features = append(out.Features, protocol.SandboxFeature{Name: string(f), Available: sup.Available[f]})
	}
	for _, p := range sup.Policies {
		out.Policies = append(out.Policies, protocol.SandboxPolicy(p))
	}
	return out
}

// environments is host.info's environments: the kinds work runs in on this server (seed "host":
// "the environment kinds and what it allows") and what runs in each under this configuration.
func environments(sup sandbox.Support, c SandboxConfig, terminals bool) []protocol.HostEnvironment {
	sb := protocol.HostEnvironment{Kind: protocol.EnvironmentKindSandboxed, Runs: []string{"exec"},
		Allows: []string{
			"reads the roots and the system folders of its view; the server's own files and the hidden paths are not in it",
			"writes only what the session's policy allows (the roots, its scratch); .git stays read-only",
			"reaches the network only under workspace-write+network",
		}, Policies: []protocol.SandboxPolicy{}}
	for _, p := range sup.Policies {
		sb.Policies = append(sb.Policies, protocol.SandboxPolicy(p))
		if p == c.Default {
			sb.Available = true
		}
	}
	local := protocol.HostEnvironment{Kind: protocol.EnvironmentKindLocal, Runs: []string{},
		Allows: []string{"reads and writes what the server's user can", "reaches the network the server reaches"}}
	if terminals {
		if c.TerminalPolicy != "" {
			sb.Runs = append(sb.Runs, "terminals")
		} else {
			local.Runs = append(local.Runs, "terminals")
		}
	}
	if c.AllowOff {
		local.Runs = append(local.Runs, "exec") // of a session an admin set to the off policy
	}
	local.Available = len(local.Runs) > 0
	return []protocol.HostEnvironment{local, sb}
}

func orDefault(v, d uint64) uint64 {
	if v == 0 {
		return d
	}
	return v
}

// GetSandbox implements sessions.getSandbox.
func (h sessionsHandler) GetSandbox(ctx context.Context, p *protocol.SessionsGetSandboxParams) (*protocol.SessionSandbox, error) {
	return h.s.sessionSandboxOut(ctx, p.SessionID)
}

// SetSandbox implements sessions.setSandbox (admin): the policy must be one this server can
// enforce (or off with the operator's flag).
func (h sessionsHandler) SetSandbox(ctx context.Context, p *protocol.SessionsSetSandboxParams) (*protocol.SessionSandbox, error) {
	s := h.s
	policy := ""
	if p.Policy != nil {
		pol, err := sandbox.ParsePolicy(string(*p.Policy))
		if err != nil {
			return nil, protocol.NewInvalidParamsError(err.Error()+".", &protocol.InvalidParamsErrorData{Pointer: "/policy"})
		}
		if err := s.sandbox.Check(pol); err != nil {
			return nil, protocol.NewHandlerFailedError(sentence(err.Error()) + " Nothing changed; host.info lists the policies this server can run.")
		}
		policy = string(pol)
	}
	if err := s.store.SetSessionSandbox(ctx, p.SessionID, policy); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, sessionNotFound(p.SessionID, "List the sessions with sessions.list.")
		}
		return nil, storeErr(err, "")
	}
	s.log.Info("sandbox: session policy set", "session", p.SessionID, "policy", policy)
	return s.sessionSandboxOut(ctx, p.SessionID)
}

func (s *Server) sessionSandboxOut(ctx context.Context, id string) (*protocol.SessionSandbox, error) {
	pol, set, err := s.sessionPolicy(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, sessionNotFound(id, "List the sessions with sessions.list.")
	}
	if err != nil {
		return nil, storeErr(err, "")
	}
	return &protocol.SessionSandbox{SessionID: id, Policy: protocol.SandboxPolicy(pol), Set: set}, nil
}

// sentence capitalizes msg and ends it with a period.
func sentence(msg string) string {
	if msg == "" {
		return msg
	}
	msg = strings.ToUpper(msg[:1]) + msg[1:]
	if !strings.HasSuffix(msg, ".") {
		msg += "."
	}
	return msg
}
