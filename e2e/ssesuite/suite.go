// Package ssesuite is the conformance suite of the SSE protocol v1 (schema/sse.json; client seed
// "SSE protocol"; issue 26), in raw HTTP with no SDK: it runs against any server of the protocol
// given its base URL and a way to get credentials, so the same cases hold zidane-server (e2e) and
// the Node bridge createSseHandler (sdk-ts) to one behaviour.
package ssesuite

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Target is a server of the SSE protocol under test.
type Target struct {
	// BaseURL is the protocol's base: http://host:port/api/chat.
	BaseURL string
	// Headers returns the headers of an authorized request (Authorization: Bearer …, a cookie);
	// each call may mint new credentials.
	Headers func(t *testing.T) http.Header
	// Unauthorized are headers the target refuses with 401 (an unknown token; authorize false).
	Unauthorized http.Header
	// MaxBody is the target's message limit in bytes: a body one byte over gets 413.
	MaxBody int64
	// Prompt is a prompt whose run streams several records, slowly enough to cut it mid-run.
	Prompt string
	// Heartbeat is the target's heartbeat interval (a comment line while idle); 0 skips the case.
	Heartbeat time.Duration
	// Restart restarts the target's server process (a new signalEpoch) and answers the new
	// BaseURL; nil skips the restart case.
	Restart func(t *testing.T) string
	// StreamsPerToken is the target's bound of open streams per credential (the Headers of one
	// call); 0 skips the bound case.
	StreamsPerToken int
	// Users, when set, returns the headers of two users whose sessions sessionsFor keeps apart
	// (the bridge); nil skips the case.
	Users func(t *testing.T) (alice, bob http.Header)
}

// Header is the protocol header every response carries, with Version as its value.
const (
	Header  = "X-Zidane-Chat-Protocol"
	Version = "1"
)

// Run runs every case of the suite against tg.
func Run(t *testing.T, tg Target) {
	c := &client{tg: tg, base: tg.BaseURL, hc: &http.Client{Timeout: 30 * time.Second}}
	t.Run("Unauthorized", c.unauthorized)
	t.Run("CrossSitePostRefused", c.crossSite)
	t.Run("PostNeedsJSON", c.needsJSON)
	t.Run("BodyOverTheLimit", c.tooLarge)
	t.Run("NotFoundAndMethod", c.notFound)
	t.Run("HydrateThenStream", c.hydrateThenStream)
	t.Run("ResumeAfterCut", c.resumeAfterCut)
	t.Run("StartsNowWithoutLastEventID", c.startsNow)
	t.Run("ResetOnUnknownPosition", c.resetUnknown)
	t.Run("AnswerAndCancel", c.answerAndCancel)
	t.Run("SendTakesChatSendParams", c.sendParams)
	if tg.Heartbeat > 0 {
		t.Run("Heartbeat", c.heartbeat)
	}
	if tg.StreamsPerToken > 0 {
		t.Run("StreamBound", c.streamBound)
	}
	if tg.Users != nil {
		t.Run("SessionsForKeepsUsersApart", c.usersApart)
	}
	if tg.Restart != nil { // last: it moves the base
		t.Run("ResetAfterRestart", c.resetAfterRestart)
	}
}

type client struct {
	tg   Target
	base string
	hc   *http.Client
}

// resp is an answered request, its body read (for a stream: not read).
type resp struct {
	*http.Response
	body []byte
}

// checkHeaders asserts what every response of the protocol carries, and what none does.
func checkHeaders(t *testing.T, r *http.Response, what string) {
	t.Helper()
	assert.Equal(t, Version, r.Header.Get(Header), "%s: every response carries %s: %s", what, Header, Version)
	assert.Equal(t, "no-store", r.Header.Get("Cache-Control"), "%s: Cache-Control", what)
	for k := range r.Header {
		assert.False(t, strings.HasPrefix(strings.ToLower(k), "access-control-"), "%s: no CORS headers (%s)", what, k)
	}
}

func (c *client) do(t *testing.T, method, path string, h http.Header, body []byte) resp {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	require.NoError(t, err)
	for k, vs := range h {
		req.Header[k] = vs
	}
	if body != nil && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	r, err := c.hc.Do(req)
	require.NoError(t, err, "%s %s", method, path)
	b, err := io.ReadAll(r.Body)
	r.Body.Close()
	require.NoError(t, err)
	checkHeaders(t, r, method+" "+path)
	return resp{r, b}
}

// refused asserts a refusal with status and an ErrorBody.
func refused(t *testing.T, r resp, status int, what string) {
	t.Helper()
	require.Equal(t, status, r.StatusCode, "%s: %s", what, r.body)
	var e struct {
		Status  int    `json:"status"`
		Message string `json:"message"`
	}
	require.NoError(t, json.Unmarshal(r.body, &e), "%s: the body is an ErrorBody: %s", what, r.body)
	assert.Equal(t, status, e.Status, what)
	assert.NotEmpty(t, e.Message, what)
}

func (c *client) ok(t *testing.T, method, path string, h http.Header, body, out any) {
	t.Helper()
	var b []byte
	if body != nil {
		var err error
		b, err = json.Marshal(body)
		require.NoError(t, err)
	}
	r := c.do(t, method, path, h, b)
	require.Equal(t, 200, r.StatusCode, "%s %s: %s", method, path, r.body)
	if out != nil {
		require.NoError(t, json.Unmarshal(r.body, out), "%s %s: %s", method, path, r.body)
	}
}

func with(h http.Header, kv ...string) http.Header {
	out := h.Clone()
	if out == nil {
		out = http.Header{}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out.Set(kv[i], kv[i+1])
	}
	return out
}

type session struct {
	ID string `json:"id"`
}

func (c *client) create(t *testing.T, h http.Header) string {
	t.Helper()
	var s session
	c.ok(t, "POST", "/sessions", h, map[string]any{"title": "conformance"}, &s)
	require.NotEmpty(t, s.ID)
	return s.ID
}

type hydrated struct {
	Session     session           `json:"session"`
	Events      []json.RawMessage `json:"events"`
	LastEventID string            `json:"lastEventId"`
}

func (c *client) hydrate(t *testing.T, h http.Header, id string) hydrated {
	t.Helper()
	var hy hydrated
	c.ok(t, "GET", "/sessions/"+id, h, nil, &hy)
	require.Equal(t, id, hy.Session.ID)
	return hy
}

func (c *client) send(t *testing.T, h http.Header, id, prompt string) string {
	t.Helper()
	var out struct {
		RunID string `json:"runId"`
	}
	c.ok(t, "POST", "/sessions/"+id+"/send", h, map[string]any{"prompt": prompt}, &out)
	require.NotEmpty(t, out.RunID)
	return out.RunID
}

// record is one parsed stream record; a comment line is Comment.
type record struct {
	ID, Event string
	Data      json.RawMessage
	Comment   bool
}

func (r record) seq(t *testing.T) (string, int64) {
	t.Helper()
	i := strings.LastIndexByte(r.ID, ':')
	require.Positive(t, i, "record id %q is <epoch>:<seq>", r.ID)
	n, err := strconv.ParseInt(r.ID[i+1:], 10, 64)
	require.NoError(t, err, "record id %q", r.ID)
	return r.ID[:i], n
}

// stream is an open stream.
type stream struct {
	t      *testing.T
	cancel context.CancelFunc
	recs   chan record
	errc   chan error
}

func (c *client) open(t *testing.T, h http.Header, id, lastEventID string) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+"/sessions/"+id+"/stream", nil)
	require.NoError(t, err)
	for k, vs := range h {
		req.Header[k] = vs
	}
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	r, err := (&http.Client{}).Do(req)
	require.NoError(t, err)
	checkHeaders(t, r, "stream")
	if r.StatusCode != 200 {
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		cancel()
		t.Fatalf("stream: %d %s", r.StatusCode, b)
	}
	assert.Equal(t, "text/event-stream", strings.Split(r.Header.Get("Content-Type"), ";")[0])
	assert.Equal(t, "no", r.Header.Get("X-Accel-Buffering"))
	s := &stream{t: t, cancel: cancel, recs: make(chan record, 4096), errc: make(chan error, 1)}
	go func() {
		defer r.Body.Close()
		br := bufio.NewReaderSize(r.Body, 1<<16)
		var cur record
		dataLines := 0
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				s.errc <- err
				close(s.recs)
				return
			}
			line = strings.TrimSuffix(line, "\n")
			switch {
			case line == "":
				if cur.Event != "" || dataLines > 0 {
					if dataLines != 1 {
						s.errc <- fmt.Errorf("record %s %s has %d data lines; the protocol sends one", cur.ID, cur.Event, dataLines)
						close(s.recs)
						return
					}
					s.recs <- cur
				}
				cur, dataLines = record{}, 0
			case strings.HasPrefix(line, ":"):
				s.recs <- record{Comment: true}
			case strings.HasPrefix(line, "id: "):
				cur.ID = line[4:]
			case strings.HasPrefix(line, "event: "):
				cur.Event = line[7:]
			case strings.HasPrefix(line, "data: "):
				cur.Data = json.RawMessage(line[6:])
				dataLines++
			}
		}
	}()
	t.Cleanup(s.close)
	return s
}

func (s *stream) close() { s.cancel() }

// next is the next record (comments skipped unless comments), failing after d.
func (s *stream) next(d time.Duration, comments bool) record {
	s.t.Helper()
	tm := time.NewTimer(d)
	defer tm.Stop()
	for {
		select {
		case r, ok := <-s.recs:
			if !ok {
				s.t.Fatalf("the stream ended: %v", <-s.errc)
			}
			if r.Comment && !comments {
				continue
			}
			return r
		case <-tm.C:
			s.t.Fatalf("no record within %s", d)
		}
	}
}

// untilRunEnd reads records until a run:end (included).
func (s *stream) untilRunEnd() []record {
	s.t.Helper()
	var out []record
	for {
		r := s.next(30*time.Second, false)
		out = append(out, r)
		if r.Event == "run:end" {
			return out
		}
	}
}

// checkRecord asserts a record's form: event is the data's kind; an id's seq is the data's $seq.
func checkRecord(t *testing.T, r record, sessionID string) {
	t.Helper()
	var d struct {
		Kind      string `json:"kind"`
		SessionID string `json:"sessionId"`
		Seq       *int64 `json:"$seq"`
	}
	require.NoError(t, json.Unmarshal(r.Data, &d), "data of %s: %s", r.Event, r.Data)
	assert.Equal(t, r.Event, d.Kind, "event is the signal's kind")
	assert.Equal(t, sessionID, d.SessionID, "a stream carries its session's signals")
	if r.ID != "" {
		_, seq := r.seq(t)
		require.NotNil(t, d.Seq, "a record with an id carries $seq: %s", r.Data)
		assert.Equal(t, seq, *d.Seq, "the id's seq is the signal's $seq")
	} else {
		assert.Nil(t, d.Seq, "a record without id is a signal without $seq: %s", r.Data)
	}
}

// ids are the records' ids in order, those without one left out.
func ids(rs []record) []string {
	var out []string
	for _, r := range rs {
		if r.ID != "" {
			out = append(out, r.ID)
		}
	}
	return out
}

func (c *client) unauthorized(t *testing.T) {
	refused(t, c.do(t, "GET", "/sessions", nil, nil), 401, "no credentials")
	refused(t, c.do(t, "GET", "/sessions", c.tg.Unauthorized, nil), 401, "refused credentials")
	refused(t, c.do(t, "POST", "/sessions", c.tg.Unauthorized, []byte(`{}`)), 401, "refused credentials, POST")
	refused(t, c.do(t, "GET", "/sessions/00000000-0000-0000-0000-000000000000/stream", c.tg.Unauthorized, nil), 401, "refused credentials, stream")
}

func (c *client) crossSite(t *testing.T) {
	h := c.tg.Headers(t)
	refused(t, c.do(t, "POST", "/sessions", with(h, "Origin", "https://evil.example"), []byte(`{}`)), 403, "Origin of another site")
	refused(t, c.do(t, "POST", "/sessions", with(h, "Sec-Fetch-Site", "cross-site"), []byte(`{}`)), 403, "Sec-Fetch-Site: cross-site")
	refused(t, c.do(t, "GET", "/sessions", with(h, "Sec-Fetch-Site", "cross-site"), nil), 403, "cross-site GET")
	u, err := url.Parse(c.base)
	require.NoError(t, err)
	r := c.do(t, "POST", "/sessions", with(h, "Origin", u.Scheme+"://"+u.Host, "Sec-Fetch-Site", "same-origin"), []byte(`{}`))
	assert.Equal(t, 200, r.StatusCode, "the server's own origin: %s", r.body)
}

func (c *client) needsJSON(t *testing.T) {
	h := c.tg.Headers(t)
	refused(t, c.do(t, "POST", "/sessions", with(h, "Content-Type", "text/plain"), []byte(`{}`)), 415, "text/plain")
	refused(t, c.do(t, "POST", "/sessions", with(h, "Content-Type", "application/x-www-form-urlencoded"), []byte(`title=x`)), 415, "a form")
	r := c.do(t, "POST", "/sessions", with(h, "Content-Type", "application/json; charset=utf-8"), []byte(`{}`))
	assert.Equal(t, 200, r.StatusCode, "application/json with a charset: %s", r.body)
	refused(t, c.do(t, "POST", "/sessions", h, []byte(`{"title": 5}`)), 400, "a wrong member type")
}

func (c *client) tooLarge(t *testing.T) {
	h := c.tg.Headers(t)
	id := c.create(t, h)
	big := append([]byte(`{"prompt":"`), bytes.Repeat([]byte("x"), int(c.tg.MaxBody))...)
	big = append(big, `"}`...)
	refused(t, c.do(t, "POST", "/sessions/"+id+"/send", h, big), 413, "a body over the limit")
	// The session is untouched: nothing was sent.
	assert.Empty(t, c.hydrate(t, h, id).Events)
}

func (c *client) notFound(t *testing.T) {
	h := c.tg.Headers(t)
	refused(t, c.do(t, "GET", "/sessions/00000000-0000-0000-0000-000000000000", h, nil), 404, "hydrate of no session")
	refused(t, c.do(t, "GET", "/sessions/00000000-0000-0000-0000-000000000000/stream", h, nil), 404, "stream of no session")
	refused(t, c.do(t, "POST", "/sessions/00000000-0000-0000-0000-000000000000/send", h, []byte(`{"prompt":"x"}`)), 404, "send to no session")
	refused(t, c.do(t, "GET", "/nothing-here", h, nil), 404, "no route")
	r := c.do(t, "DELETE", "/sessions", h, nil)
	refused(t, r, 405, "a method the route does not take")
	assert.NotEmpty(t, r.Header.Get("Allow"))
}

// hydrateThenStream: hydrate gives the position the transcript is consistent with; a stream
// opened there carries the run, records numbered from the next $seq without a hole.
func (c *client) hydrateThenStream(t *testing.T) {
	h := c.tg.Headers(t)
	id := c.create(t, h)
	hy := c.hydrate(t, h, id)
	epoch, seq0 := record{ID: hy.LastEventID}.seq(t)
	s := c.open(t, h, id, hy.LastEventID)
	c.send(t, h, id, c.tg.Prompt)
	rs := s.untilRunEnd()
	require.NotEmpty(t, ids(rs))
	want := seq0
	kinds := map[string]bool{}
	for _, r := range rs {
		checkRecord(t, r, id)
		kinds[r.Event] = true
		if r.ID == "" {
			continue
		}
		e, n := r.seq(t)
		assert.Equal(t, epoch, e, "one epoch")
		want++
		assert.Equal(t, want, n, "records are numbered without a hole")
	}
	assert.True(t, kinds["run:start"] && kinds["event"], "the run's signals: %v", kinds)
	// Hydrating again: the transcript holds the run, consistent with the last record.
	hy2 := c.hydrate(t, h, id)
	assert.NotEmpty(t, hy2.Events)
	assert.Equal(t, ids(rs)[len(ids(rs))-1], hy2.LastEventID)
}

// resumeAfterCut: a stream cut mid-run and reopened with Last-Event-ID ends with exactly the
// records of a stream that was never cut.
func (c *client) resumeAfterCut(t *testing.T) {
	h := c.tg.Headers(t)
	id := c.create(t, h)
	hy := c.hydrate(t, h, id)
	witness := c.open(t, h, id, hy.LastEventID)
	cut := c.open(t, h, id, hy.LastEventID)
	c.send(t, h, id, c.tg.Prompt)
	var got []record
	for len(ids(got)) < 3 {
		r := cut.next(30*time.Second, false)
		got = append(got, r)
		require.NotEqual(t, "run:end", r.Event, "the run ended before the cut; give a slower prompt")
	}
	cut.close()
	last := ids(got)[len(ids(got))-1]
	// The run goes on while the stream is cut: wait (on the witness) until two more records were
	// published, so the resumed stream starts with records from the replay log.
	var want []record
	for len(ids(want)) < len(ids(got))+2 {
		r := witness.next(30*time.Second, false)
		want = append(want, r)
		require.NotEqual(t, "run:end", r.Event, "the run ended during the cut; give a slower prompt")
	}
	resumed := c.open(t, h, id, last)
	got = append(got, resumed.untilRunEnd()...)
	want = append(want, witness.untilRunEnd()...)
	assert.Equal(t, ids(want), ids(got), "nothing lost or doubled")
	wantData := map[string]string{}
	for _, r := range want {
		wantData[r.ID] = string(r.Data)
	}
	for _, r := range got {
		if r.ID != "" {
			assert.JSONEq(t, wantData[r.ID], string(r.Data), "record %s", r.ID)
		}
	}
}

// startsNow: a stream without Last-Event-ID starts when it opens: nothing of earlier runs.
func (c *client) startsNow(t *testing.T) {
	h := c.tg.Headers(t)
	id := c.create(t, h)
	first := c.open(t, h, id, "")
	c.send(t, h, id, c.tg.Prompt)
	first.untilRunEnd()
	hy := c.hydrate(t, h, id)
	_, seq := record{ID: hy.LastEventID}.seq(t)
	s := c.open(t, h, id, "")
	c.send(t, h, id, c.tg.Prompt)
	rs := s.untilRunEnd()
	_, n := record{ID: ids(rs)[0]}.seq(t)
	assert.Equal(t, seq+1, n, "the first record is the first signal after the stream opened")
}

// resetUnknown: a position of another epoch, or past the session's end, answers a reset first.
func (c *client) resetUnknown(t *testing.T) {
	h := c.tg.Headers(t)
	id := c.create(t, h)
	hy := c.hydrate(t, h, id)
	epoch, _ := record{ID: hy.LastEventID}.seq(t)
	for _, tc := range []struct{ last, reason string }{
		{"another-epoch:3", "epoch"},
		{"not an id", "epoch"},
		{epoch + ":999999", "gap"},
	} {
		s := c.open(t, h, id, tc.last)
		r := s.next(10*time.Second, false)
		assert.Equal(t, "reset", r.Event, "Last-Event-ID %q", tc.last)
		assert.Empty(t, r.ID, "a reset carries no id")
		assert.JSONEq(t, `{"reason":"`+tc.reason+`"}`, string(r.Data), "Last-Event-ID %q", tc.last)
		// The stream goes on from now: the next run arrives on it.
		c.send(t, h, id, c.tg.Prompt)
		assert.NotEmpty(t, ids(s.untilRunEnd()))
		s.close()
	}
}

func (c *client) answerAndCancel(t *testing.T) {
	h := c.tg.Headers(t)
	id := c.create(t, h)
	refused(t, c.do(t, "POST", "/sessions/"+id+"/answer", h, []byte(`{"requestId":"r1"}`)), 400, "an answer with neither approval nor question")
	refused(t, c.do(t, "POST", "/sessions/"+id+"/answer", h, []byte(`{"requestId":"r1","approval":"allow","question":{"text":"x"}}`)), 400, "an answer with both")
	r := c.do(t, "POST", "/sessions/"+id+"/answer", h, []byte(`{"requestId":"no-such-request","approval":"allow"}`))
	assert.NotEqual(t, 200, r.StatusCode, "an answer to no request is refused: %s", r.body)
	s := c.open(t, h, id, "")
	c.send(t, h, id, c.tg.Prompt)
	s.next(30*time.Second, false) // the run started
	var out struct {
		Cancelled bool `json:"cancelled"`
	}
	c.ok(t, "POST", "/sessions/"+id+"/cancel", h, map[string]any{}, &out)
	assert.True(t, out.Cancelled)
	s.untilRunEnd()
}

// sendParams: send takes what chat.send takes (attachments, model, command and arguments) with
// chat.send's checks: a bad one is 400 saying what and nothing is sent; good ones go with the prompt.
func (c *client) sendParams(t *testing.T) {
	h := c.tg.Headers(t)
	id := c.create(t, h)
	path := "/sessions/" + id + "/send"
	r := c.do(t, "POST", path, h, []byte(`{"prompt":"x","attachments":[{"name":"a.zip","mediaType":"application/zip","data":"data:application/zip;base64,UEs="}]}`))
	refused(t, r, 400, "an attachment of a kind a prompt does not take")
	assert.Contains(t, string(r.body), "/attachments/0", "the message names the attachment")
	refused(t, c.do(t, "POST", path, h, []byte(`{"prompt":"x","model":"no-such-provider/model"}`)), 400, "a model of no provider")
	r = c.do(t, "POST", path, h, []byte(`{"prompt":"/no-such-command a b","command":"no-such-command","arguments":"a b"}`))
	refused(t, r, 400, "an unknown command")
	assert.Contains(t, string(r.body), "commands.list", "the message says where the commands are")
	refused(t, c.do(t, "POST", path, h, []byte(`{"model":"scripted/scripted"}`)), 400, "no prompt")
	assert.Empty(t, c.hydrate(t, h, id).Events, "nothing of a refused send is kept")

	s := c.open(t, h, id, "")
	note := "data:text/plain;base64," + base64.StdEncoding.EncodeToString([]byte("a note from the page"))
	c.ok(t, "POST", path, h, map[string]any{
		"prompt": "Read it.", "model": "scripted/scripted",
		"attachments": []map[string]string{{"name": "note.txt", "mediaType": "text/plain", "data": note}},
	}, nil)
	s.untilRunEnd()
	var hy struct {
		Session struct {
			Model string `json:"model"`
		} `json:"session"`
		Events []json.RawMessage `json:"events"`
	}
	c.ok(t, "GET", "/sessions/"+id, h, nil, &hy)
	assert.Equal(t, "scripted/scripted", hy.Session.Model, "model is set on the session")
	var prompt string
	for _, e := range hy.Events {
		if strings.Contains(string(e), `"user-prompt"`) {
			prompt = string(e)
		}
	}
	assert.Contains(t, prompt, `"note.txt"`, "the attachment is stored with the prompt")
}

func (c *client) heartbeat(t *testing.T) {
	h := c.tg.Headers(t)
	id := c.create(t, h)
	s := c.open(t, h, id, "")
	r := s.next(c.tg.Heartbeat*4+5*time.Second, true)
	assert.True(t, r.Comment, "an idle stream writes a comment line: %+v", r)
}

func (c *client) streamBound(t *testing.T) {
	h := c.tg.Headers(t)
	id := c.create(t, h)
	for range c.tg.StreamsPerToken {
		c.open(t, h, id, "")
	}
	refused(t, c.do(t, "GET", "/sessions/"+id+"/stream", h, nil), 429, "one stream past the bound")
}

func (c *client) usersApart(t *testing.T) {
	alice, bob := c.tg.Users(t)
	id := c.create(t, alice)
	for _, p := range []struct{ method, path, body string }{
		{"GET", "/sessions/" + id, ""},
		{"GET", "/sessions/" + id + "/stream", ""},
		{"POST", "/sessions/" + id + "/send", `{"prompt":"x"}`},
		{"POST", "/sessions/" + id + "/cancel", `{}`},
	} {
		var b []byte
		if p.body != "" {
			b = []byte(p.body)
		}
		r := c.do(t, p.method, p.path, bob, b)
		assert.Contains(t, []int{403, 404}, r.StatusCode, "%s %s as another user: %s", p.method, p.path, r.body)
	}
	var list struct {
		Sessions []session `json:"sessions"`
	}
	c.ok(t, "GET", "/sessions", bob, nil, &list)
	for _, s := range list.Sessions {
		assert.NotEqual(t, id, s.ID, "another user's session is not listed")
	}
}

// resetAfterRestart: a position of the process before a restart answers reset epoch.
func (c *client) resetAfterRestart(t *testing.T) {
	h := c.tg.Headers(t)
	id := c.create(t, h)
	s := c.open(t, h, id, "")
	c.send(t, h, id, c.tg.Prompt)
	last := ids(s.untilRunEnd())
	s.close()
	c.base = c.tg.Restart(t)
	// The same credentials: they outlive the restart (a token in the database, a user of the app).
	r := c.open(t, h, id, last[len(last)-1]).next(10*time.Second, false)
	assert.Equal(t, "reset", r.Event)
	assert.JSONEq(t, `{"reason":"epoch"}`, string(r.Data))
	hy := c.hydrate(t, h, id)
	assert.NotEmpty(t, hy.Events, "the transcript survives the restart")
	assert.NotEqual(t, strings.Split(last[0], ":")[0], strings.Split(hy.LastEventID, ":")[0], "a new epoch")
}
