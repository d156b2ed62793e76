package server

import (
	"bytes"
	"encoding/json"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/hub/jetstream"
)

// Presence across replicas (issue 25 §3, docs/scaling.md "Presence"). Each replica counts what
// it holds: the windows of its own connections (presence.set, or inferred), the runs it owns
// and the approvals and questions they wait on. With --nats-url it sends that share on
// presenceSubject (core NATS, not stored) whenever it changes and every presenceBeat, and keeps
// the shares of the others; its connections get presence:changed with the sum of every live
// share. A share not renewed for presenceTTL (its replica was killed or cut off) is dropped, and
// a replica that stops cleanly withdraws its share at once.

// presenceSubject carries the replicas' presence shares (presenceShare messages).
const presenceSubject = jetstream.LivePrefix + "presence"

// presenceBeat is how often a replica sends its share unchanged; presenceTTL how long the others
// keep a share they no longer hear of: a killed replica's windows and runs leave every other
// replica's presence within presenceTTL + presenceBeat of its last beat.
const (
	presenceBeat = time.Second
	presenceTTL  = 3 * presenceBeat
)

// presenceShare is one replica's share on presenceSubject; Gone withdraws it (clean shutdown).
type presenceShare struct {
	Replica  string                     `json:"replica"`
	Sessions []protocol.SessionPresence `json:"sessions"`
	Gone     bool                       `json:"gone,omitempty"`
}

// remoteShare is another replica's last share, as received.
type remoteShare struct {
	raw      []byte // its sessions' JSON, to tell a change from a beat
	sessions []protocol.SessionPresence
	at       time.Time
}

// presenceShares are the other replicas' shares, by replica; the zero value is ready.
type presenceShares struct {
	mu     sync.Mutex
	remote map[string]remoteShare
	order  sync.Mutex // one presence:changed computed and delivered at a time, in order
}

// startPresenceShare subscribes to the other replicas' shares and sends this one's every
// presenceBeat until the server stops (with a bus only).
func (s *Server) startPresenceShare(bus *jetstream.Bus) error {
	if _, err := bus.Conn().Subscribe(presenceSubject, s.onPresenceShare); err != nil {
		return err
	}
	go s.every(presenceBeat, func() {
		s.sendPresenceShare(bus, s.localPresence(), false)
		if s.prunePresence(time.Now()) {
			s.deliverPresence()
		}
	})
	return nil
}

// sendPresenceShare sends this replica's share (gone: withdraws it).
func (s *Server) sendPresenceShare(bus *jetstream.Bus, local []protocol.SessionPresence, gone bool) {
	b, err := protocol.Marshal(presenceShare{Replica: s.hub.replica, Sessions: local, Gone: gone})
	if err == nil && bus.Connected() {
		err = bus.Conn().Publish(presenceSubject, b)
	}
	if err != nil && !gone {
		s.log.Debug("presence share not sent; the next beat sends it", "err", err)
	}
}

// onPresenceShare records another replica's share and, when it changed what this replica's
// connections see, tells them.
func (s *Server) onPresenceShare(m *nats.Msg) {
	var sh presenceShare
	if json.Unmarshal(m.Data, &sh) != nil || sh.Replica == "" || sh.Replica == s.hub.replica {
		return
	}
	raw, _ := protocol.Marshal(sh.Sessions)
	p := &s.presence
	p.mu.Lock()
	if p.remote == nil {
		p.remote = map[string]remoteShare{}
	}
	old, had := p.remote[sh.Replica]
	changed := false
	if sh.Gone {
		delete(p.remote, sh.Replica)
		changed = had && len(old.sessions) > 0
	} else {
		p.remote[sh.Replica] = remoteShare{raw: raw, sessions: sh.Sessions, at: time.Now()}
		changed = !bytes.Equal(old.raw, raw) && (had || len(sh.Sessions) > 0)
	}
	p.mu.Unlock()
	if changed {
		go s.deliverPresence() // off NATS's dispatch goroutine
	}
}

// prunePresence drops the shares not renewed within presenceTTL of now; true when one that
// counted something went.
func (s *Server) prunePresence(now time.Time) bool {
	p := &s.presence
	p.mu.Lock()
	defer p.mu.Unlock()
	dropped := false
	for id, sh := range p.remote {
		if now.Sub(sh.at) > presenceTTL {
			delete(p.remote, id)
			dropped = dropped || len(sh.sessions) > 0
		}
	}
	return dropped
}

// deliverPresence sends this replica's connections presence:changed with every live share summed
// (only them: each replica tells its own connections).
func (s *Server) deliverPresence() {
	p := &s.presence
	p.order.Lock()
	defer p.order.Unlock()
	sum := map[string]*protocol.SessionPresence{}
	add := func(ps []protocol.SessionPresence) {
		for _, x := range ps {
			t := sum[x.SessionID]
			if t == nil {
				t = &protocol.SessionPresence{SessionID: x.SessionID}
				sum[x.SessionID] = t
			}
			t.Windows += x.Windows
			t.Running = t.Running || x.Running
			t.Attention = t.Attention || x.Attention
			if x.Focused != nil {
				n := *x.Focused
				if t.Focused != nil {
					n += *t.Focused
				}
				t.Focused = &n
			}
		}
	}
	add(s.localPresence())
	p.mu.Lock()
	for _, sh := range p.remote {
		add(sh.sessions)
	}
	p.mu.Unlock()
	out := make([]protocol.SessionPresence, 0, len(sum))
	for _, x := range sum {
		out = append(out, *x)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].SessionID < out[j].SessionID })
	if err := s.hub.publishHere(&protocol.PresenceChangedSignal{Sessions: out}); err != nil {
		s.log.Error("presence:changed not sent", "err", err)
	}
}
