package mcp

import (
	"context"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/zidane-server/zidane/protocol"
)

// Media is an image or audio block of a tool result.
type Media struct {
	// MIMEType is the block's type, e.g. "image/png".
	MIMEType string
	// Data is the decoded bytes.
	Data []byte
}

// Rendered is a tool result as the agent keeps it: the text the model reads (text blocks,
// embedded resources' text, resource links and structured content as JSON, and a line per media
// block), the media blocks (image and audio blocks, and embedded binary resources of an image or
// audio type), and whether the tool failed.
type Rendered struct {
	Text    string
	Media   []Media
	IsError bool
}

// Render turns a tools/call result into text and media. Nothing is cut here: the caller caps
// the text like exec's output.
func Render(res *sdk.CallToolResult) Rendered {
	var out Rendered
	if res == nil {
		return Rendered{Text: "(the MCP server returned no result)", IsError: true}
	}
	out.IsError = res.IsError
	var b strings.Builder
	line := func(s string) {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(s)
	}
	hasText := false
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			line(c.Text)
			hasText = true
		case *sdk.ImageContent:
			out.Media = append(out.Media, Media{MIMEType: c.MIMEType, Data: c.Data})
			line(fmt.Sprintf("[image %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *sdk.AudioContent:
			out.Media = append(out.Media, Media{MIMEType: c.MIMEType, Data: c.Data})
			line(fmt.Sprintf("[audio %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *sdk.EmbeddedResource:
			if r := c.Resource; r != nil {
				line(renderContents(r))
				// An embedded binary image or audio resource travels as media too, so a
				// client can show it like an image block.
				if r.Text == "" && len(r.Blob) > 0 && isMedia(r.MIMEType) {
					out.Media = append(out.Media, Media{MIMEType: r.MIMEType, Data: r.Blob})
				}
			}
		case *sdk.ResourceLink:
			line(fmt.Sprintf("[resource link %s %q %s]", c.URI, c.Name, c.MIMEType))
		default:
			line(fmt.Sprintf("[content of type %T not shown]", c))
		}
	}
	if res.StructuredContent != nil {
		sb, err := protocol.Marshal(res.StructuredContent)
		// The SDK mirrors structured output into a text block; show it once.
		if err == nil && (!hasText || !strings.Contains(b.String(), strings.TrimSpace(string(sb)))) {
			line("structuredContent: " + strings.TrimSpace(string(sb)))
		}
	}
	out.Text = b.String()
	return out
}

// isMedia reports whether a media type is an image or audio type.
func isMedia(mimeType string) bool {
	t := strings.ToLower(strings.TrimSpace(mimeType))
	return strings.HasPrefix(t, "image/") || strings.HasPrefix(t, "audio/")
}

func renderContents(r *sdk.ResourceContents) string {
	if r.Text != "" || len(r.Blob) == 0 {
		return fmt.Sprintf("[resource %s %s]\n%s", r.URI, r.MIMEType, r.Text)
	}
	return fmt.Sprintf("[resource %s %s, %d bytes of binary data]", r.URI, r.MIMEType, len(r.Blob))
}

// ReadResource reads one resource of the server.
func (p *Proc) ReadResource(ctx context.Context, uri string) (*sdk.ReadResourceResult, error) {
	cs, err := p.Session(ctx)
	if err != nil {
		return nil, err
	}
	return cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri})
}

// Resources lists the server's resources (every page).
func (p *Proc) Resources(ctx context.Context) ([]*sdk.Resource, error) {
	cs, err := p.Session(ctx)
	if err != nil {
		return nil, err
	}
	if r := cs.InitializeResult(); r != nil && (r.Capabilities == nil || r.Capabilities.Resources == nil) {
		return nil, nil
	}
	var out []*sdk.Resource
	for r, err := range cs.Resources(ctx, nil) {
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// Prompts lists the server's prompts (every page).
func (p *Proc) Prompts(ctx context.Context) ([]*sdk.Prompt, error) {
	cs, err := p.Session(ctx)
	if err != nil {
		return nil, err
	}
	if r := cs.InitializeResult(); r != nil && (r.Capabilities == nil || r.Capabilities.Prompts == nil) {
		return nil, nil
	}
	var out []*sdk.Prompt
	for pr, err := range cs.Prompts(ctx, nil) {
		if err != nil {
			return out, err
		}
		out = append(out, pr)
	}
	return out, nil
}

// GetPrompt gets one prompt with its arguments.
func (p *Proc) GetPrompt(ctx context.Context, name string, args map[string]string) (*sdk.GetPromptResult, error) {
	cs, err := p.Session(ctx)
	if err != nil {
		return nil, err
	}
	return cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: name, Arguments: args})
}

// NegotiatedVersion is the protocol version the connection settled on ("" before a connect).
func (p *Proc) NegotiatedVersion() string { return p.Status().ProtocolVersion }
