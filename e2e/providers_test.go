package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/agent/provider/openai/openaitest"
	"github.com/zidane-server/zidane/server/store/storetest"
)

// The real binary with an OpenAI-compatible endpoint named in <data-dir>/config.json, its key
// in an environment variable named by keyEnv, and --model choosing it: answers come from the
// endpoint, the second prompt's request carries the first exchange, and the key reaches the
// endpoint but never the server's output.
func TestConfiguredOpenAIEndpoint(t *testing.T) {
	const key = "sk-e2e-fake-key-7f3a9c"
	t.Setenv("E2E_FAKE_LLM_KEY", key)
	f := openaitest.New(t)
	f.Validate(openaitest.CheckHistory)
	f.Enqueue(openaitest.Reply("Hi from the fake endpoint.", 11, 4), openaitest.Reply("Yes, you said: first prompt.", 30, 6))
	data := t.TempDir()
	cfg := fmt.Sprintf(`{"providers":[{"name":"fake","kind":"openai","baseUrl":%q,"keyEnv":"E2E_FAKE_LLM_KEY","models":[{"name":"m","contextWindow":128000}]}]}`, f.BaseURL())
	require.NoError(t, os.WriteFile(filepath.Join(data, "config.json"), []byte(cfg), 0o600))
	s := startServer(t, serverOpts{dbURL: storetest.URL(t), dataDir: data, extra: []string{"--model", "fake/m"}})
	tok := s.mintToken("cli", "chat")

	code, out, errs := runCLI(t, s, tok, "-c", "first prompt")
	require.Equal(t, 0, code, "stderr: %s", errs)
	assert.Contains(t, out, "Hi from the fake endpoint.")
	m := regexp.MustCompile(`session ([0-9a-f-]{36})`).FindStringSubmatch(errs)
	require.NotNil(t, m, "stderr: %s", errs)
	code, out, errs = runCLI(t, s, tok, "-c", "do you remember?", "--session", m[1])
	require.Equal(t, 0, code, "stderr: %s", errs)
	assert.Contains(t, out, "Yes, you said: first prompt.")

	reqs := f.StreamRequests()
	require.Len(t, reqs, 2)
	assert.Equal(t, "Bearer "+key, reqs[0].Header.Get("Authorization"))
	second, err := openaitest.Chat(reqs[1])
	require.NoError(t, err)
	assert.Equal(t, "m", second.Model)
	var convo []string
	for _, msg := range second.Messages {
		if msg.Role != "system" {
			convo = append(convo, msg.Role+": "+msg.Content)
		}
	}
	assert.Equal(t, []string{"user: first prompt", "assistant: Hi from the fake endpoint.", "user: do you remember?"}, convo)
	assert.NotContains(t, s.stdout.String()+s.stderr.String(), key)
	assert.Contains(t, s.stderr.String(), "key from E2E_FAKE_LLM_KEY (set)")
}
