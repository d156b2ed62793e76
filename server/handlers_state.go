package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/store"
)

// The state every app of the server shares (seed "drafts", "settings", "prefs", "sidebar"), kept
// in Postgres. Drafts arrive on every keystroke, so they live in memory and are written coalesced.

type draftsHandler struct{ s *Server }
type settingsHandler struct{ s *Server }
type prefsHandler struct{ s *Server }
type sidebarHandler struct{ s *Server }

// Drafts returns the drafts group's handler.
func (h *handlers) Drafts() protocol.DraftsHandler { return draftsHandler{h.s} }

// Settings returns the settings group's handler.
func (h *handlers) Settings() protocol.SettingsHandler { return settingsHandler{h.s} }

// Prefs returns the prefs group's handler.
func (h *handlers) Prefs() protocol.PrefsHandler { return prefsHandler{h.s} }

// Sidebar returns the sidebar group's handler.
func (h *handlers) Sidebar() protocol.SidebarHandler { return sidebarHandler{h.s} }

// Bounds of the shared state (the schema's descriptions say them too).
const (
	maxPrefs      = 500
	maxSpaces     = 200
	maxStateValue = 64 << 10
	// maxStateBytes bounds the prefs, and the sidebar views, in all (keys and values): one
	// prefs.get or sidebar.getViews answer carries them all, so they must fit one message.
	maxStateBytes  = 4 << 20
	draftsCoalesce = 250 * time.Millisecond
)

// Client-state namespaces (store.State).
const (
	nsSettings     = "settings"
	nsPrefs        = "prefs"
	nsSidebarView  = "sidebar.view"
	nsSidebarSpace = "sidebar.space"
)

// draftBook keeps each session's latest draft in memory and writes the changed ones to Postgres
// at most every draftsCoalesce, in one statement: a burst of keystrokes costs a handful of writes,
// never a commit each.
type draftBook struct {
	st     *store.Store
	log    *slog.Logger
	mu     sync.Mutex
	drafts map[string]store.Draft // sessions whose draft is known (loaded or set)
	dirty  map[string]struct{}
	wake   chan struct{}
	done   chan struct{}
	// writes counts the batches written to Postgres (tests read it).
	writes atomic.Int64
}

func newDraftBook(st *store.Store, log *slog.Logger) *draftBook {
	return &draftBook{st: st, log: log, drafts: map[string]store.Draft{}, dirty: map[string]struct{}{}, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// run writes dirty drafts until ctx ends, then writes what is left once more.
func (b *draftBook) run(ctx context.Context) {
	defer close(b.done)
	for {
		select {
		case <-b.wake:
		case <-ctx.Done():
			b.flush(context.Background())
			return
		}
		select { // let a burst gather
		case <-time.After(draftsCoalesce):
		case <-ctx.Done():
		}
		b.flush(ctx)
	}
}

// flush writes the dirty drafts; a failed batch stays dirty and is tried again at the next wake.
func (b *draftBook) flush(ctx context.Context) {
	b.mu.Lock()
	batch := make([]store.Draft, 0, len(b.dirty))
	for id := range b.dirty {
		batch = append(batch, b.drafts[id])
	}
	clear(b.dirty)
	b.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	b.writes.Add(1)
	if err := b.st.SaveDrafts(wctx, batch); err != nil {
		b.log.Error("save drafts", "n", len(batch), "err", err)
		b.mu.Lock()
		for _, d := range batch {
			if cur, ok := b.drafts[d.SessionID]; ok && cur.UpdatedAt.Equal(d.UpdatedAt) {
				b.dirty[d.SessionID] = struct{}{}
			}
		}
		b.mu.Unlock()
		time.AfterFunc(time.Second, func() { b.poke() })
	}
}

func (b *draftBook) poke() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// set records a draft (in memory now, in Postgres within draftsCoalesce).
func (b *draftBook) set(id, text string) store.Draft {
	d := store.Draft{SessionID: id, Text: text, UpdatedAt: time.Now()}
	b.mu.Lock()
	b.drafts[id] = d
	b.dirty[id] = struct{}{}
	b.mu.Unlock()
	b.poke()
	return d
}

// get returns a session's draft, from memory or else from Postgres.
func (b *draftBook) get(ctx context.Context, id string) (store.Draft, error) {
	b.mu.Lock()
	d, ok := b.drafts[id]
	b.mu.Unlock()
	if ok {
		return d, nil
	}
	d, err := b.st.GetDraft(ctx, id)
	if err != nil {
		return d, err
	}
	b.mu.Lock()
	if _, set := b.drafts[id]; !set { // a set that raced the read wins
		b.drafts[id] = d
	} else {
		d = b.drafts[id]
	}
	b.mu.Unlock()
	return d, nil
}

// known reports whether the session's draft is in memory (so the session was checked to exist).
func (b *draftBook) known(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.drafts[id]
	return ok
}

func draftOut(d store.Draft) *protocol.Draft {
	out := &protocol.Draft{SessionID: d.SessionID, Text: d.Text}
	if d.Text != "" && !d.UpdatedAt.IsZero() {
		at := ms(d.UpdatedAt)
		out.UpdatedAt = &at
	}
	return out
}

// Set implements drafts.set (usually a notification): the latest text per session, pushed to the
// session's other windows.
func (h draftsHandler) Set(ctx context.Context, p *protocol.DraftsSetParams) (*protocol.DraftsSetResult, error) {
	if !h.s.drafts.known(p.SessionID) {
		if _, err := h.s.getSession(ctx, p.SessionID, "Create the session first."); err != nil {
			return nil, err
		}
	}
	d := h.s.drafts.set(p.SessionID, p.Text)
	h.s.publishDraft(d, connFrom(ctx))
	return &protocol.DraftsSetResult{}, nil
}

// Get implements drafts.get.
func (h draftsHandler) Get(ctx context.Context, p *protocol.DraftsGetParams) (*protocol.Draft, error) {
	if !h.s.drafts.known(p.SessionID) {
		if _, err := h.s.getSession(ctx, p.SessionID, "List the sessions with sessions.list."); err != nil {
			return nil, err
		}
	}
	d, err := h.s.drafts.get(ctx, p.SessionID)
	if err != nil {
		return nil, storeErr(err, "")
	}
	return draftOut(d), nil
}

// Clear implements drafts.clear.
func (h draftsHandler) Clear(ctx context.Context, p *protocol.DraftsClearParams) (*protocol.DraftsClearResult, error) {
	if _, err := h.Set(ctx, &protocol.DraftsSetParams{SessionID: p.SessionID, Text: ""}); err != nil {
		return nil, err
	}
	return &protocol.DraftsClearResult{}, nil
}

// loadSettings reads the stored settings into the typed record.
func (s *Server) loadSettings(ctx context.Context) (*protocol.Settings, error) {
	kv, err := s.store.State(ctx, nsSettings)
	if err != nil {
		return nil, storeErr(err, "")
	}
	obj, _ := protocol.Marshal(kv)
	out := &protocol.Settings{}
	if err := json.Unmarshal(obj, out); err != nil {
		return nil, fmt.Errorf("stored settings do not decode: %w", err)
	}
	return out, nil
}

// Get implements settings.get.
func (h settingsHandler) Get(ctx context.Context, _ *protocol.SettingsGetParams) (*protocol.Settings, error) {
	return h.s.loadSettings(ctx)
}

// Set implements settings.set (admin): the members given replace the stored ones (the params were
// validated against the Settings schema), and every window gets settings:changed.
func (h settingsHandler) Set(ctx context.Context, p *protocol.SettingsSetParams) (*protocol.Settings, error) {
	b, err := protocol.Marshal(p.Settings)
	if err != nil {
		return nil, err
	}
	var kv map[string]json.RawMessage
	if err := json.Unmarshal(b, &kv); err != nil {
		return nil, err
	}
	if len(kv) == 0 {
		return h.s.loadSettings(ctx) // nothing to change, nothing to announce
	}
	if err := h.s.store.SetState(ctx, nsSettings, kv, 0, 0); err != nil {
		return nil, storeErr(err, "params/settings")
	}
	out, err := h.s.loadSettings(ctx)
	if err != nil {
		return nil, err
	}
	h.s.publishState(&protocol.SettingsChangedSignal{Settings: *out}, connFrom(ctx))
	return out, nil
}

// checkValue bounds a client-state value.
func checkValue(v json.RawMessage, member string) error {
	if len(v) > maxStateValue {
		return protocol.NewInvalidParamsError(fmt.Sprintf("params/%s: %d bytes, at most %d; store less.", member, len(v), maxStateValue), &protocol.InvalidParamsErrorData{Pointer: "/" + member})
	}
	return nil
}

func limitErr(err error, what, member string) error {
	if errors.Is(err, store.ErrLimitBytes) {
		return protocol.NewHandlerFailedError(fmt.Sprintf("The server keeps at most %d MiB of these in all, so that one answer carries them; remove some first (a null value removes one).", maxStateBytes>>20))
	}
	if errors.Is(err, store.ErrLimit) {
		return protocol.NewHandlerFailedError(fmt.Sprintf("The server keeps at most %s; remove one first.", what))
	}
	return storeErr(err, "params/"+member)
}

// checkName refuses a key or space name Postgres cannot keep as text (NUL), and "__proto__":
// prefs.get and sidebar.getViews answer maps that JavaScript clients keep in plain objects, where
// obj["__proto__"] = value does not add a member but replaces the object's prototype (break-it:
// in the web app's sidebar a view saved under it vanished from the map, and its members read as
// the records of the spaces that have none: {"all":{"pinned":[…]}} pinned sessions in "all").
func checkName(v, member string) error {
	if strings.IndexByte(v, 0) >= 0 {
		return protocol.NewInvalidParamsError(fmt.Sprintf("params/%s: a name cannot hold a NUL character.", member), &protocol.InvalidParamsErrorData{Pointer: "/" + member})
	}
	// A name is an identifier an app shows or matches, never text to lay out: a control or an
	// invisible formatting character (a line break, a bidi override, a zero-width space) only
	// makes two names look alike or one look like another (break-it).
	for _, r := range v {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return protocol.NewInvalidParamsError(fmt.Sprintf("params/%s: a name cannot hold the control or formatting character %U; use visible characters.", member, r), &protocol.InvalidParamsErrorData{Pointer: "/" + member})
		}
	}
	if v == "__proto__" {
		return protocol.NewInvalidParamsError(fmt.Sprintf("params/%s: \"__proto__\" is refused: in a JavaScript object it names the prototype, not a member; pick another name.", member), &protocol.InvalidParamsErrorData{Pointer: "/" + member})
	}
	return nil
}

func isNull(v json.RawMessage) bool {
	return len(v) == 0 || bytes.Equal(bytes.TrimSpace(v), []byte("null"))
}

// Get implements prefs.get.
func (h prefsHandler) Get(ctx context.Context, _ *protocol.PrefsGetParams) (*protocol.PrefsGetResult, error) {
	kv, err := h.s.store.State(ctx, nsPrefs)
	if err != nil {
		return nil, storeErr(err, "")
	}
	return &protocol.PrefsGetResult{Prefs: kv}, nil
}

// Set implements prefs.set: null removes the pref; every window gets prefs:changed.
func (h prefsHandler) Set(ctx context.Context, p *protocol.PrefsSetParams) (*protocol.PrefsSetResult, error) {
	v := p.Value
	if err := checkValue(v, "value"); err != nil {
		return nil, err
	}
	if err := checkName(p.Key, "key"); err != nil {
		return nil, err
	}
	if isNull(v) {
		v = nil
	}
	if err := h.s.store.SetState(ctx, nsPrefs, map[string]json.RawMessage{p.Key: v}, maxPrefs, maxStateBytes); err != nil {
		return nil, limitErr(err, fmt.Sprintf("%d prefs", maxPrefs), "key")
	}
	sig := &protocol.PrefsChangedSignal{Key: p.Key, Value: v}
	if v == nil {
		sig.Value = json.RawMessage("null")
	}
	h.s.publishState(sig, connFrom(ctx))
	return &protocol.PrefsSetResult{}, nil
}

// GetViews implements sidebar.getViews.
func (h sidebarHandler) GetViews(ctx context.Context, _ *protocol.SidebarGetViewsParams) (*protocol.SidebarGetViewsResult, error) {
	kv, err := h.s.store.State(ctx, nsSidebarView)
	if err != nil {
		return nil, storeErr(err, "")
	}
	return &protocol.SidebarGetViewsResult{Views: kv}, nil
}

// GetSpace implements sidebar.getSpace.
func (h sidebarHandler) GetSpace(ctx context.Context, _ *protocol.SidebarGetSpaceParams) (*protocol.SidebarGetSpaceResult, error) {
	kv, err := h.s.store.State(ctx, nsSidebarSpace)
	if err != nil {
		return nil, storeErr(err, "")
	}
	res := &protocol.SidebarGetSpaceResult{}
	if v, ok := kv["current"]; ok {
		var sp string
		if json.Unmarshal(v, &sp) == nil {
			res.Space = &sp
		}
	}
	return res, nil
}

// SetView implements sidebar.setView: the record is stored as given; a null view removes the
// space's record.
func (h sidebarHandler) SetView(ctx context.Context, p *protocol.SidebarSetViewParams) (*protocol.SidebarSetViewResult, error) {
	if err := checkValue(p.View, "view"); err != nil {
		return nil, err
	}
	if err := checkName(p.Space, "space"); err != nil {
		return nil, err
	}
	v := p.View
	if isNull(v) {
		v = nil
	}
	if err := h.s.store.SetState(ctx, nsSidebarView, map[string]json.RawMessage{p.Space: v}, maxSpaces, maxStateBytes); err != nil {
		return nil, limitErr(err, fmt.Sprintf("%d sidebar spaces (a null view removes one)", maxSpaces), "space")
	}
	space := p.Space
	h.s.publishState(&protocol.SidebarChangedSignal{Space: &space, View: p.View}, connFrom(ctx))
	return &protocol.SidebarSetViewResult{}, nil
}

// SetSpace implements sidebar.setSpace.
func (h sidebarHandler) SetSpace(ctx context.Context, p *protocol.SidebarSetSpaceParams) (*protocol.SidebarSetSpaceResult, error) {
	if err := checkName(p.Space, "space"); err != nil {
		return nil, err
	}
	v, _ := protocol.Marshal(p.Space)
	if err := h.s.store.SetState(ctx, nsSidebarSpace, map[string]json.RawMessage{"current": v}, 0, 0); err != nil {
		return nil, storeErr(err, "params/space")
	}
	space := p.Space
	h.s.publishState(&protocol.SidebarChangedSignal{Current: &space}, connFrom(ctx))
	return &protocol.SidebarSetSpaceResult{}, nil
}

// publishDraft pushes a draft to the session's other windows (draft:changed is delivered to
// "others": every permitted connection but the one that typed it).
func (s *Server) publishDraft(d store.Draft, from *conn) {
	s.publishState(&protocol.DraftChangedSignal{SessionID: d.SessionID, Text: d.Text}, from)
}

// publishState pushes a shared-state signal.
func (s *Server) publishState(sig protocol.Signal, from *conn) {
	if _, err := s.hub.publish(sig, from, ""); err != nil {
		s.log.Warn("publish", "kind", sig.SignalKind(), "err", err)
	}
}
