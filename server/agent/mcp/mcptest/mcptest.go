// Package mcptest is an MCP server built with the official Go SDK for the tests of issue 23: the
// same server serves stdio (the test binary run again as a helper process, ServeIfAsked) and
// streamable HTTP (Handler, for httptest). Its tools: echo, image, structured, readfile, dial,
// add_tool (adds a tool, which notifies tools/list_changed), die (the process exits mid-call),
// elicit_form and elicit_url (ask the client for an elicitation, form or URL mode, and report
// the answer), elicit_push (a form pushed as a 2025-11-25 elicitation/create during the call)
// and sample (asks the client for a sampling/createMessage and reports it); its resource test://hello and its prompts greet and hello_resource (a message embedding
// test://hello and a resource link to it).
package mcptest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/zidane-server/zidane/protocol"
)

// EnvServe is the environment variable that makes a test binary serve MCP on stdio (ServeIfAsked).
const EnvServe = "ZIDANE_MCPTEST_SERVE"

// HelloText is the text of the resource test://hello.
const HelloText = "hello from the test resource"

// ServeIfAsked serves the test server on stdin/stdout and exits when EnvServe is "1"; call it
// first in TestMain.
func ServeIfAsked() {
	if os.Getenv(EnvServe) != "1" {
		return
	}
	if err := New().Run(context.Background(), &sdk.StdioTransport{}); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

// StdioConfig is what an mcps.json entry needs to run the test server: this test binary, with
// EnvServe set.
func StdioConfig() (command string, env map[string]string) {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	return exe, map[string]string{EnvServe: "1"}
}

// Handler serves the test server over streamable HTTP (one server for every session).
func Handler() http.Handler {
	s := New()
	return sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil)
}

type textIn struct {
	Text string `json:"text" jsonschema:"the text to echo"`
}

type pathIn struct {
	Path string `json:"path" jsonschema:"a file to read"`
}

type addrIn struct {
	Addr string `json:"addr" jsonschema:"host:port to dial over TCP"`
}

type nameIn struct {
	Name string `json:"name" jsonschema:"the tool to add"`
}

// Sum is the structured tool's output.
type Sum struct {
	Total int `json:"total"`
}

type sumIn struct {
	A int `json:"a"`
	B int `json:"b"`
}

// FormMessage is elicit_form's message.
const FormMessage = "Tell the test server about you."

// ElicitURL is elicit_url's address.
const ElicitURL = "https://auth.example.test/connect?session=1"

// FormSchema is elicit_form's requested schema: name (string, required), age (integer 0..150),
// color (enum red, green, blue) and subscribe (boolean).
func FormSchema() map[string]any {
	return map[string]any{"type": "object", "required": []string{"name"}, "properties": map[string]any{
		"name":      map[string]any{"type": "string", "title": "Name", "minLength": 1},
		"age":       map[string]any{"type": "integer", "title": "Age", "minimum": 0, "maximum": 150},
		"color":     map[string]any{"type": "string", "title": "Color", "enum": []string{"red", "green", "blue"}},
		"subscribe": map[string]any{"type": "boolean", "title": "Subscribe"},
	}}
}

// ElicitReport is what elicit_form and elicit_url answer: the action and the content as JSON,
// e.g. `elicit: accept {"name":"Ada"}`.
func ElicitReport(r *sdk.ElicitResult) string {
	b, _ := protocol.Marshal(r.Content)
	return "elicit: " + r.Action + " " + string(b)
}

// PNG is a 1×1 PNG the image tool returns.
var PNG = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82")

func text(s string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
}

// New builds the test server.
func New() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "zidane-mcptest", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "Echo the text back.", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *sdk.CallToolRequest, in textIn) (*sdk.CallToolResult, any, error) {
			return text("echo: " + in.Text), nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "image", Description: "Return a 1x1 PNG and an embedded resource."},
		func(_ context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{
				&sdk.TextContent{Text: "an image follows"},
				&sdk.ImageContent{Data: PNG, MIMEType: "image/png"},
				&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "test://embedded", MIMEType: "text/plain", Text: "embedded text"}},
			}}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "structured", Description: "Add two numbers (structured output)."},
		func(_ context.Context, _ *sdk.CallToolRequest, in sumIn) (*sdk.CallToolResult, Sum, error) {
			return nil, Sum{Total: in.A + in.B}, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "readfile", Description: "Read a file (for the sandbox tests)."},
		func(_ context.Context, _ *sdk.CallToolRequest, in pathIn) (*sdk.CallToolResult, any, error) {
			b, err := os.ReadFile(in.Path)
			if err != nil {
				return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "read failed: " + err.Error()}}}, nil, nil
			}
			return text("read: " + string(b)), nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "dial", Description: "Dial a TCP address (for the sandbox tests)."},
		func(_ context.Context, _ *sdk.CallToolRequest, in addrIn) (*sdk.CallToolResult, any, error) {
			c, err := net.DialTimeout("tcp", in.Addr, 2*time.Second)
			if err != nil {
				return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "dial failed: " + err.Error()}}}, nil, nil
			}
			_ = c.Close()
			return text("dial: connected"), nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "add_tool", Description: "Add a tool named name (tools/list_changed follows)."},
		func(_ context.Context, _ *sdk.CallToolRequest, in nameIn) (*sdk.CallToolResult, any, error) {
			sdk.AddTool(s, &sdk.Tool{Name: in.Name, Description: "added at run time"},
				func(_ context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
					return text("added tool ran"), nil, nil
				})
			return text("added " + in.Name), nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "die", Description: "Exit the server process in the middle of the call."},
		func(_ context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			os.Stderr.WriteString("mcptest: dying as asked\n")
			os.Exit(3)
			return nil, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "elicit_form", Description: "Ask the user for a form (name, age, color, subscribe) and report the answer."},
		func(_ context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			if r, ok := req.Params.InputResponses["form"].(*sdk.ElicitResult); ok {
				return text(ElicitReport(r)), nil, nil
			}
			return &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{"form": &sdk.ElicitParams{Mode: "form", Message: FormMessage, RequestedSchema: FormSchema()}}}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "elicit_url", Description: "Ask the user to open an address and report the answer."},
		func(_ context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			if r, ok := req.Params.InputResponses["url"].(*sdk.ElicitResult); ok {
				return text(ElicitReport(r)), nil, nil
			}
			return &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{"url": &sdk.ElicitParams{Mode: "url", Message: "Sign in to the test service.", URL: ElicitURL, ElicitationID: "el-1"}}}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "elicit_push", Description: "Ask the user for a name with a 2025-11-25 elicitation/create pushed during the call, and report the answer."},
		func(ctx context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			r, err := req.Session.Elicit(ctx, &sdk.ElicitParams{Mode: "form", Message: FormMessage,
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}})
			if err != nil {
				return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "elicit failed: " + err.Error()}}}, nil, nil
			}
			return text(ElicitReport(r)), nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "sample", Description: "Ask the client's model (sampling/createMessage) and report its answer."},
		func(_ context.Context, req *sdk.CallToolRequest, in textIn) (*sdk.CallToolResult, any, error) {
			if r, ok := req.Params.InputResponses["sample"].(*sdk.CreateMessageWithToolsResult); ok {
				var parts []string
				for _, c := range r.Content {
					if t, ok := c.(*sdk.TextContent); ok {
						parts = append(parts, t.Text)
					}
				}
				return text(fmt.Sprintf("sampled (%s): %v", r.Model, parts)), nil, nil
			}
			return &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{"sample": &sdk.CreateMessageParams{MaxTokens: 50,
				Messages: []*sdk.SamplingMessage{{Role: "user", Content: &sdk.TextContent{Text: in.Text}}}}}}, nil, nil
		})
	s.AddPrompt(&sdk.Prompt{Name: "hello_resource", Description: "A prompt that attaches the resource test://hello."},
		func(_ context.Context, _ *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
			return &sdk.GetPromptResult{Messages: []*sdk.PromptMessage{
				{Role: "user", Content: &sdk.TextContent{Text: "Summarize the attached resource."}},
				{Role: "user", Content: &sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "test://hello", MIMEType: "text/plain", Text: HelloText}}},
				{Role: "user", Content: &sdk.ResourceLink{URI: "test://hello", Name: "hello", MIMEType: "text/plain"}},
			}}, nil
		})
	s.AddResource(&sdk.Resource{URI: "test://hello", Name: "hello", MIMEType: "text/plain"},
		func(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
			return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: HelloText}}}, nil
		})
	s.AddPrompt(&sdk.Prompt{Name: "greet", Description: "Greet someone.", Arguments: []*sdk.PromptArgument{{Name: "name", Required: true}}},
		func(_ context.Context, req *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
			return &sdk.GetPromptResult{Messages: []*sdk.PromptMessage{{Role: "user", Content: &sdk.TextContent{Text: "Say hello to " + req.Params.Arguments["name"] + "."}}}}, nil
		})
	return s
}
