package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/store"
	"github.com/zidane-server/zidane/server/store/storetest"
)

// serverCmd runs `zidane-server args… --database-url <the server's database>` and returns its exit
// code, stdout and stderr.
func (s *serverProc) serverCmd(args ...string) (int, string, string) {
	t := s.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, serverBin, append(args, "--database-url", s.opts.dbURL)...)
	cmd.Env = env(false)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	require.NoError(t, ctx.Err(), "zidane-server %v timed out", args)
	var ee *exec.ExitError
	if err != nil {
		require.True(t, errors.As(err, &ee), "zidane-server %v: %v", args, err)
		return ee.ExitCode(), out.String(), errb.String()
	}
	return 0, out.String(), errb.String()
}

// TestFieldCase_T15_NamesHoldNoControls: a pairing client's name and an operator's --name with a
// newline, a tab, an escape sequence or a bidi override are refused saying why (POST /zidane/pair
// answers 400 and the code still works; token create exits non-zero), and token list shows a
// name stored before this check on one line, so no row can forge another.
func TestFieldCase_T15_NamesHoldNoControls(t *testing.T) {
	url := storetest.URL(t)
	s := startServer(t, serverOpts{dbURL: url})
	code, out, errs := s.serverCmd("pair", "--scope", "chat")
	require.Equal(t, 0, code, errs)
	pair := strings.TrimSpace(out)

	post := func(name string) (int, string) {
		body, _ := json.Marshal(map[string]string{"code": pair, "name": name})
		resp, err := http.Post("http://"+s.addr+"/zidane/pair", "application/json", bytes.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	forged := "phone\nadmin1          admin  2026-12-01T21:16:02Z  -                     2026-12-01T21:20:00Z"
	for _, name := range []string{forged, "bad\nname\u202e", "tab\there", "esc\x1b[2K", "rtl\u202eenohp", "ls\u2028x"} {
		status, body := post(name)
		assert.Equal(t, http.StatusBadRequest, status, "%q: %s", name, body)
		assert.Contains(t, body, "a token name cannot hold", "%q", name)
	}
	status, body := post("phone")
	require.Equal(t, http.StatusOK, status, "a refused name does not spend the code: %s", body)

	code, out, errs = s.serverCmd("token", "create", "--name", strings.Repeat("n", 201), "--scope", "chat")
	assert.NotEqual(t, 0, code)
	assert.Empty(t, out)
	assert.Contains(t, errs, "at most 200")
	for _, name := range []string{"evil\nrow", "evil\u202erow", "evil\x1b[2Krow", "cli\u200b"} {
		code, out, errs := s.serverCmd("token", "create", "--name", name, "--scope", "admin")
		assert.NotEqual(t, 0, code, "token create --name %q", name)
		assert.Empty(t, out, "no token is printed")
		assert.Contains(t, errs, "a token name cannot hold", "%q", name)
	}

	// A name stored before names were checked still prints as one row.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := store.Open(ctx, url, store.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	_, _, err = st.CreateToken(ctx, "legacy\nadmin9  admin  2026-12-01T21:16:02Z  -  2026-12-01T21:20:00Z\u202e", "chat")
	require.NoError(t, err)
	toks, err := st.ListTokens(ctx)
	st.Close()
	require.NoError(t, err)

	code, out, errs = s.serverCmd("token", "list")
	require.Equal(t, 0, code, errs)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	assert.Len(t, lines, 1+len(toks), "a header and one row per token: %s", out)
	for _, l := range lines {
		assert.False(t, strings.HasPrefix(l, "admin9"), "no row starts inside another: %q", l)
	}
	assert.NotContains(t, out, "\u202e")
	assert.Contains(t, out, `legacy\nadmin9`)
}
