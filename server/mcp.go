package server

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/zidane-server/zidane/server/agent/mcp"
	"github.com/zidane-server/zidane/server/workspace/sandbox"
)

// newMCP starts the MCP manager (issue 23): servers from the server user's ~/.zidane/mcps.json
// (Config.MCPUserFile) and the projects' .zidane/mcps.json, reloaded through the server's one
// watcher; scope-context stdio servers spawned in their session's sandbox like exec's commands.
func (s *Server) newMCP() {
	uf := s.mcpUserFile()
	sub := s.watcher.Subscribe()
	var sample mcp.SampleFunc
	if s.cfg.MCPSampling {
		sample = s.tools.Sample
	}
	m := mcp.NewManager(mcp.Options{
		Sample:   sample,
		UserFile: uf,
		Env:      s.cfg.Tools.ExecEnv,
		Logger:   s.log,
		Sharing: func() *bool {
			st, err := s.loadSettings(s.baseCtx)
			if err != nil {
				s.log.Warn("mcp: the settings could not be read; each server's own shared applies", "err", err)
				return nil
			}
			return st.McpSharing
		},
		Elicit: s.tools.Elicit,
		Caller: s.tools.CallSession,
		OAuth: func(name string) auth.OAuthHandler {
			if s.oauth == nil {
				return nil
			}
			return s.oauth.Handler(name)
		},
		Prepare: func(cmd *exec.Cmd, u mcp.Use) (string, error) {
			if s.sandbox == nil {
				return "", nil // no sandbox configured: like exec, the command runs as is
			}
			if u.SessionID == "" { // mcp.test and the resource methods: the server's default policy
				p := s.cfg.Sandbox.Default
				return string(p), s.sandbox.Wrap(cmd, sandbox.Request{Policy: p, Roots: s.ws.Roots(), SessionID: "mcp"})
			}
			p, err := s.sandboxCommand(s.baseCtx, cmd, u.SessionID, s.ws.Roots(), nil)
			return string(p), err
		},
		Watch: func(dir string) {
			if !sub.Watching(dir) {
				if err := sub.Add(dir); err != nil {
					s.log.Debug("mcp: config folder not watched (changes are read at the next reload)", "dir", dir, "err", err)
				}
			}
		},
	})
	s.mcp = m
	s.tools.MCP = m
	s.tools.MCPPolicy = func(ctx context.Context, sessionID string) string {
		p, _, _ := s.sessionPolicy(ctx, sessionID)
		return string(p)
	}
	go func() {
		defer sub.Close()
		for {
			select {
			case <-s.baseCtx.Done():
				return
			case <-sub.Overflow():
				m.Invalidate("")
			case ev := <-sub.Events():
				switch filepath.Base(ev.Name) {
				case mcp.FileName:
					m.Invalidate(ev.Name)
				case ".zidane":
					m.Invalidate(filepath.Join(ev.Name, mcp.FileName))
				}
			}
		}
	}()
}

// mcpUserFile is the server user's mcps.json (Config.MCPUserFile; "-" and no home: "").
func (s *Server) mcpUserFile() string {
	uf := s.cfg.MCPUserFile
	if uf == "" {
		if home, err := os.UserHomeDir(); err == nil {
			uf = mcp.UserFile(home)
		}
	}
	if uf == "-" {
		uf = ""
	}
	return uf
}
