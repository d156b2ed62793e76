package server

import (
	"context"
	"fmt"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/agent/mcp"
)

// mcpPromptTimeout bounds starting a server and listing or getting its prompts for commands.
const mcpPromptTimeout = 10 * time.Second

// mcpPromptServers are the servers whose prompts a project's commands offer: the user file's,
// and the project file's that an approval allows (an unapproved one is not started for a list).
func (s *Server) mcpPromptServers(ctx context.Context, root string) []mcp.Server {
	servers, _ := s.mcp.Servers(root)
	out := servers[:0:0]
	for _, srv := range servers {
		if srv.Origin == mcp.OriginProject {
			if ok, err := s.mcpApproved(ctx, root, srv); err != nil || !ok {
				continue
			}
		}
		out = append(out, srv)
	}
	return out
}

// mcpCommands lists the MCP servers' prompts as commands mcp__<server>__<prompt> (kind mcp;
// issue 23 item 2). A server that does not start within mcpPromptTimeout contributes none.
func (s *Server) mcpCommands(ctx context.Context, root string) []protocol.CommandInfo {
	var out []protocol.CommandInfo
	for _, srv := range s.mcpPromptServers(ctx, root) {
		pctx, cancel := context.WithTimeout(ctx, mcpPromptTimeout)
		prs, err := s.mcpProc(srv, root).Prompts(pctx)
		cancel()
		if err != nil {
			s.log.Debug("mcp: prompts not listed", "server", srv.Name, "err", err)
			continue
		}
		for _, pr := range prs {
			ci := protocol.CommandInfo{Name: mcp.ToolName(srv.Name, pr.Name), Description: pr.Description, Kind: protocol.CommandInfoKind("mcp"),
				Origin: protocol.DefinitionOrigin(srv.Origin), Path: optStr(srv.File)}
			var hint []string
			for _, a := range pr.Arguments {
				if a.Required {
					hint = append(hint, "<"+a.Name+">")
				} else {
					hint = append(hint, "["+a.Name+"]")
				}
			}
			ci.ArgumentHint = optStr(strings.Join(hint, " "))
			out = append(out, ci)
		}
	}
	return out
}

// mcpPromptText gets the prompt a command mcp__<server>__<prompt> names, its arguments filled
// in order from the whitespace-separated arguments (the last takes the rest), and renders its
// messages as the run's prompt. ok false: no server offers a prompt by that name.
func (s *Server) mcpPromptText(ctx context.Context, root, name, args string) (text string, ok bool, err error) {
	for _, srv := range s.mcpPromptServers(ctx, root) {
		if !strings.HasPrefix(name, mcp.ToolName(srv.Name, "")) && len(name) <= 64 {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, mcpPromptTimeout)
		proc := s.mcpProc(srv, root)
		prs, lerr := proc.Prompts(pctx)
		if lerr != nil {
			cancel()
			continue
		}
		for _, pr := range prs {
			if mcp.ToolName(srv.Name, pr.Name) != name {
				continue
			}
			vals := map[string]string{}
			rest := strings.TrimSpace(args)
			for i, a := range pr.Arguments {
				if rest == "" {
					break
				}
				if i == len(pr.Arguments)-1 {
					vals[a.Name], rest = rest, ""
					break
				}
				f := strings.Fields(rest)
				vals[a.Name] = f[0]
				rest = strings.TrimSpace(strings.TrimPrefix(rest, f[0]))
			}
			for _, a := range pr.Arguments {
				if _, set := vals[a.Name]; a.Required && !set {
					cancel()
					return "", true, protocol.NewInvalidParamsError(fmt.Sprintf("params/arguments: %s needs the argument %q (in order: %s).", name, a.Name, argNames(pr)), &protocol.InvalidParamsErrorData{Pointer: "/arguments"})
				}
			}
			res, gerr := proc.GetPrompt(pctx, pr.Name, vals)
			cancel()
			if gerr != nil {
				return "", true, protocol.NewHandlerFailedError(fmt.Sprintf("MCP server %q: prompts/get %s failed: %v", srv.Name, pr.Name, gerr))
			}
			var b strings.Builder
			for _, m := range res.Messages {
				if b.Len() > 0 {
					b.WriteString("\n\n")
				}
				switch c := m.Content.(type) {
				case *sdk.TextContent:
					b.WriteString(c.Text)
				case *sdk.EmbeddedResource:
					if c.Resource != nil {
						writeResource(&b, c.Resource)
					}
				case *sdk.ResourceLink:
					// A prompt may attach a resource by link: read now, its contents become the
					// prompt's context like an embedded one.
					rctx, rcancel := context.WithTimeout(ctx, mcpPromptTimeout)
					rr, rerr := proc.ReadResource(rctx, c.URI)
					rcancel()
					if rerr != nil {
						return "", true, protocol.NewHandlerFailedError(fmt.Sprintf("MCP server %q: the prompt %s attaches the resource %s, which could not be read: %v", srv.Name, pr.Name, c.URI, rerr))
					}
					for i, rc := range rr.Contents {
						if i > 0 {
							b.WriteString("\n\n")
						}
						writeResource(&b, rc)
					}
				default:
					fmt.Fprintf(&b, "[%T content of the prompt not shown]", c)
				}
			}
			if b.Len() > maxPromptBytes {
				return "", true, protocol.NewInvalidParamsError(fmt.Sprintf("params/command: %q makes a prompt of %d bytes (with its resources), over the 1 MiB a prompt may have.", name, b.Len()), &protocol.InvalidParamsErrorData{Pointer: "/command"})
			}
			return b.String(), true, nil
		}
		cancel()
	}
	return "", false, nil
}

// maxPromptBytes bounds a prompt a command makes (1 MiB, as chat.send's).
const maxPromptBytes = 1 << 20

// writeResource renders a resource a prompt attaches: a header naming it, then its text; a
// binary one is named with its type and size, its bytes not shown.
func writeResource(b *strings.Builder, r *sdk.ResourceContents) {
	fmt.Fprintf(b, "[resource %s", r.URI)
	if r.MIMEType != "" {
		fmt.Fprintf(b, " (%s)", r.MIMEType)
	}
	if r.Text == "" && len(r.Blob) > 0 {
		fmt.Fprintf(b, ": %d bytes of binary content, not shown]", len(r.Blob))
		return
	}
	b.WriteString("]\n")
	b.WriteString(r.Text)
}

func argNames(pr *sdk.Prompt) string {
	var n []string
	for _, a := range pr.Arguments {
		n = append(n, a.Name)
	}
	return strings.Join(n, ", ")
}
