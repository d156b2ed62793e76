package server

import (
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/agent"
	"github.com/zidane-server/zidane/server/agent/provider"
	"github.com/zidane-server/zidane/server/agent/provider/anthropic"
	"github.com/zidane-server/zidane/server/agent/provider/anthropic/anthropictest"
	"github.com/zidane-server/zidane/server/agent/provider/openai"
	"github.com/zidane-server/zidane/server/agent/provider/openai/openaitest"
)

func dataURL(mediaType string, b []byte) string {
	return "data:" + mediaType + ";base64," + base64.StdEncoding.EncodeToString(b)
}

// sendWith sends a prompt with attachments and returns the decoded answer.
func (c *testConn) sendWith(sid, prompt string, as []protocol.Attachment) map[string]any {
	c.t.Helper()
	b, err := protocol.Marshal(protocol.ChatSendParams{SessionID: sid, Prompt: &prompt, Attachments: as})
	require.NoError(c.t, err)
	return c.call("chat.send", string(b))
}

// testAttachments are a pasted image (a small PNG) and a text file.
func testAttachments(t *testing.T) []protocol.Attachment {
	return []protocol.Attachment{
		{Name: "shot.png", MediaType: "image/png", Data: dataURL("image/png", pngBytes(t))},
		{Name: "notes.txt", MediaType: "text/plain", Data: dataURL("text/plain;charset=utf-8", []byte("line one\nzwölf <b>"))},
	}
}

// checkStoredAttachments: the prompt's user-prompt event in the transcript holds the attachments
// as sent.
func checkStoredAttachments(t *testing.T, c *testConn, sid string) {
	t.Helper()
	for _, ev := range c.events(sid) {
		if ev["kind"] == "user-prompt" {
			b, _ := json.Marshal(ev["attachments"])
			want, _ := json.Marshal(testAttachments(t))
			assert.JSONEq(t, string(want), string(b), "stored with the prompt")
			return
		}
	}
	t.Fatal("no user-prompt event")
}

// attachedRun sends a prompt with testAttachments to a new session of a server on provider p,
// after enqueue queued the fake's answer; the run must end ok, and the transcript holds them.
func attachedRun(t *testing.T, p provider.Provider, enqueue func()) (*testConn, string) {
	t.Helper()
	e := newAgentEnv(t, p, nil)
	c := e.dial()
	c.hello()
	sid := c.newSession()
	enqueue()
	m := c.sendWith(sid, "What is in the picture?", testAttachments(t))
	require.Nil(t, m["error"], "%v", m["error"])
	end := c.runEndOf(sid, m["result"].(map[string]any)["runId"].(string))
	require.Equal(t, true, end["ok"], "%v", end)
	checkStoredAttachments(t, c, sid)
	return c, sid
}

// TestAttachmentsThroughTheOpenAIFake (issue 24): chat.send's image reaches an OpenAI-compatible
// model as an image_url part holding its data: URL, the text file as text in the user message;
// both are stored with the prompt, and the next turn sends the image again from the transcript.
func TestAttachmentsThroughTheOpenAIFake(t *testing.T) {
	fake := openaitest.New(t)
	fake.Validate(openaitest.CheckHistory)
	p := openai.New(openai.Config{BaseURL: fake.BaseURL(), Models: []provider.Model{{ID: "openai/m", Provider: "openai", Name: "m", ContextWindow: 32000}}})
	c, sid := attachedRun(t, p, func() { fake.Enqueue(openaitest.Reply("A red dot.", 900, 4)) })

	fake.Enqueue(openaitest.Reply("Still a red dot.", 900, 4))
	require.Equal(t, true, c.runEndOf(sid, c.prompt(sid, "And now?"))["ok"])
	reqs := fake.StreamRequests()
	require.Len(t, reqs, 2)
	for i, r := range reqs {
		chat, err := openaitest.Chat(r)
		require.NoError(t, err)
		var user *openaitest.ChatMessage
		for j := range chat.Messages {
			if chat.Messages[j].Role == "user" {
				user = &chat.Messages[j]
				break
			}
		}
		require.NotNil(t, user, "request %d", i)
		var urls []string
		for _, part := range user.Parts {
			if part.Type == "image_url" {
				urls = append(urls, part.ImageURL.URL)
			}
		}
		assert.Equal(t, []string{dataURL("image/png", pngBytes(t))}, urls, "request %d carries the image", i)
		assert.Contains(t, user.Content, "What is in the picture?")
		assert.Contains(t, user.Content, "<file name=\"notes.txt\" type=\"text/plain\">\nline one\nzwölf <b>\n</file>", "the text file as text")
	}
}

// TestAttachmentsThroughTheAnthropicFake: the image reaches Anthropic as a base64 image block
// before the text, the text file inside the text block.
func TestAttachmentsThroughTheAnthropicFake(t *testing.T) {
	fake := anthropictest.New(t)
	fake.Validate(anthropictest.CheckHistory)
	p := anthropic.New(anthropic.Config{BaseURL: fake.URL(), Models: []provider.Model{{ID: "anthropic/m", Provider: "anthropic", Name: "m", ContextWindow: 32000}}})
	attachedRun(t, p, func() { fake.Enqueue(anthropictest.Reply("A red dot.", 900, 4)) })
	reqs := fake.StreamRequests()
	require.Len(t, reqs, 1)
	mr, err := anthropictest.Messages(reqs[0])
	require.NoError(t, err)
	require.NotEmpty(t, mr.Messages)
	blocks := mr.Messages[0].Content
	require.Len(t, blocks, 2, "an image block and a text block")
	require.Equal(t, "image", blocks[0].Type)
	require.NotNil(t, blocks[0].Source)
	assert.Equal(t, "base64", blocks[0].Source.Type)
	assert.Equal(t, "image/png", blocks[0].Source.MediaType)
	assert.Equal(t, base64.StdEncoding.EncodeToString(pngBytes(t)), blocks[0].Source.Data)
	assert.Equal(t, "text", blocks[1].Type)
	assert.Contains(t, blocks[1].Text, "<file name=\"notes.txt\" type=\"text/plain\">")
}

// TestAttachmentsModelWithoutImages: the scripted model takes no images, and the run says so
// (an error event and run:end naming the image and what to do) before a turn; a text file alone
// goes to it as text.
func TestAttachmentsModelWithoutImages(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial()
	c.hello()
	sid := c.newSession()
	m := c.sendWith(sid, "Look.", testAttachments(t)[:1])
	require.Nil(t, m["error"], "%v", m["error"])
	end := c.runEndOf(sid, m["result"].(map[string]any)["runId"].(string))
	assert.Equal(t, false, end["ok"])
	assert.Contains(t, end["error"], "takes no images")
	assert.Contains(t, end["error"], `"shot.png"`)
	var errEv string
	for _, ev := range c.events(sid) {
		if ev["kind"] == "error" {
			errEv = ev["message"].(string)
		}
	}
	assert.Contains(t, errEv, "takes no images", "the transcript says so too")

	m = c.sendWith(sid, "Read it.", testAttachments(t)[1:])
	require.Nil(t, m["error"], "%v", m["error"])
	assert.Equal(t, true, c.runEndOf(sid, m["result"].(map[string]any)["runId"].(string))["ok"], "a text file goes to any model")
}

// TestAttachmentBoundsRefused: attachments past the bounds, of another kind, or malformed are
// InvalidParams naming the member and what to do, and nothing of the prompt is kept.
func TestAttachmentBoundsRefused(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial()
	c.hello()
	sid := c.newSession()
	img := testAttachments(t)[0]
	many := make([]protocol.Attachment, agent.MaxAttachments+1)
	for i := range many {
		many[i] = img
	}
	big := make([]byte, agent.MaxAttachmentBytes+1)
	part := make([]byte, agent.MaxAttachmentBytes)
	copy(part, pngBytes(t)) // a PNG's signature first: the bytes are sniffed against the type
	for _, tc := range []struct {
		name    string
		as      []protocol.Attachment
		pointer string
		says    string
	}{
		{"too many", many, "/attachments", "at most 8"},
		{"too large", []protocol.Attachment{{Name: "big.png", MediaType: "image/png", Data: dataURL("image/png", big)}}, "/attachments/0", "at most 2097152"},
		{"too large together", []protocol.Attachment{{Name: "a.png", MediaType: "image/png", Data: dataURL("image/png", part)}, {Name: "b.png", MediaType: "image/png", Data: dataURL("image/png", part)}}, "/attachments/1", "at most 3145728"},
		{"another kind", []protocol.Attachment{{Name: "a.zip", MediaType: "application/zip", Data: dataURL("application/zip", []byte("PK"))}}, "/attachments/0/mediaType", "not a kind a prompt takes"},
		{"not a data URL", []protocol.Attachment{{Name: "a.png", MediaType: "image/png", Data: "https://example.com/a.png"}}, "/attachments/0/data", "data: URL"},
		{"not base64", []protocol.Attachment{{Name: "a.png", MediaType: "image/png", Data: "data:image/png,abc"}}, "/attachments/0/data", "base64"},
		{"bad base64", []protocol.Attachment{{Name: "a.png", MediaType: "image/png", Data: "data:image/png;base64,@@@@"}}, "/attachments/0/data", "not valid base64"},
		{"types differ", []protocol.Attachment{{Name: "a.png", MediaType: "image/png", Data: dataURL("image/jpeg", pngBytes(t))}}, "/attachments/0/data", `"image/jpeg" is not the mediaType`},
		{"text not UTF-8", []protocol.Attachment{{Name: "a.txt", MediaType: "text/plain", Data: dataURL("text/plain", []byte{0xff, 0xfe, 'a'})}}, "/attachments/0/data", "UTF-8"},
		{"empty", []protocol.Attachment{{Name: "a.txt", MediaType: "text/plain", Data: "data:text/plain;base64,"}}, "/attachments/0/data", "empty"},
		{"bytes not of the type", []protocol.Attachment{{Name: "a.png", MediaType: "image/png", Data: dataURL("image/png", []byte("<html><script>alert(1)</script>"))}}, "/attachments/0/data", "the bytes are not image/png"},
		{"text with NUL", []protocol.Attachment{{Name: "a.txt", MediaType: "text/plain", Data: dataURL("text/plain", []byte("a\x00b"))}}, "/attachments/0/data", "NUL"},
		{"name with a newline", []protocol.Attachment{{Name: "a\nb.png", MediaType: "image/png", Data: img.Data}}, "/attachments/0/name", "name"},
	} {
		m := c.sendWith(sid, "Look.", tc.as)
		require.Equal(t, protocol.CodeInvalidParams, errCode(m), "%s: %v", tc.name, m)
		er := m["error"].(map[string]any)
		assert.Equal(t, tc.pointer, er["data"].(map[string]any)["pointer"], tc.name)
		assert.Contains(t, er["message"], tc.says, tc.name)
	}
	assert.Empty(t, c.events(sid), "nothing of a refused prompt is kept")
}
