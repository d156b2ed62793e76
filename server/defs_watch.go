package server

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/agent/defs"
	"github.com/zidane-server/zidane/server/workspace/watch"
)

// defsQuiet is how long the definition folders must be quiet before their lists are read again:
// a burst of writes (an editor's save, a git checkout) is one signal.
const defsQuiet = 150 * time.Millisecond

// maxDefsProjects bounds the projects whose definition folders are watched (the first ones
// listed win; the rest are read at each call as before, without signals).
const maxDefsProjects = 64

// defsWatch publishes agents:changed, skills:changed and commands:changed (issue 27 items 2–3)
// when what agents.list, skills.list or commands.list answers for a project moves. It watches,
// through the server's one watcher, the definition folders of the server user's home and of
// each project a client listed or ran: <base>, <base>/.zidane, <base>/.claude, their agents,
// skills and commands folders, and each skill's folder. Nothing read here loosens a guard: it
// only tells clients to list again.
type defsWatch struct {
	s    *Server
	sub  *watch.Sub
	home string

	mu    sync.Mutex
	roots map[string]*defsPrints // project root ("" = the server user's home) → last lists
	kick  chan struct{}
}

// defsPrints are the SHA-256 fingerprints of one base's three lists as last read.
type defsPrints struct{ agents, skills, commands [32]byte }

// defsSubdirs are the folders under a base that hold definitions.
var defsSubdirs = []string{".zidane", ".claude", ".zidane/agents", ".zidane/skills", ".zidane/commands", ".claude/skills", ".claude/commands", ".claude/agents"}

func (s *Server) newDefsWatch() {
	d := &defsWatch{s: s, sub: s.watcher.Subscribe(), home: s.cfg.UserHome, roots: map[string]*defsPrints{}, kick: make(chan struct{}, 1)}
	s.defsWatch = d
	if d.home != "" {
		d.track("")
	}
	go d.loop()
}

// track starts watching root's definition folders ("" = the server user's), once.
func (d *defsWatch) track(root string) {
	if d == nil {
		return
	}
	d.mu.Lock()
	if _, ok := d.roots[root]; ok || len(d.roots) >= maxDefsProjects {
		d.mu.Unlock()
		return
	}
	d.roots[root] = nil // being read: reread skips it until its first lists are in
	d.mu.Unlock()
	d.watchFolders(root)
	p := d.prints(root)
	d.mu.Lock()
	d.roots[root] = &p
	d.mu.Unlock()
}

func (d *defsWatch) base(root string) string {
	if root == "" {
		return d.home
	}
	return root
}

// watchFolders adds the base's definition folders that exist (and the base, so a new .zidane
// or .claude is seen); a folder the watcher cannot add is read at the next call as before.
func (d *defsWatch) watchFolders(root string) {
	b := d.base(root)
	dirs := []string{b}
	for _, sd := range defsSubdirs {
		dirs = append(dirs, filepath.Join(b, sd))
	}
	for _, sk := range []string{".zidane/skills", ".claude/skills"} {
		if es, err := os.ReadDir(filepath.Join(b, sk)); err == nil {
			for i, e := range es {
				if i >= defs.MaxEntries {
					break
				}
				if e.IsDir() {
					dirs = append(dirs, filepath.Join(b, sk, e.Name()))
				}
			}
		}
	}
	for _, dir := range dirs {
		if d.sub.Watching(dir) {
			continue
		}
		if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
			continue
		}
		if err := d.sub.Add(dir); err != nil {
			d.s.log.Debug("definitions folder not watched (lists are read at each call)", "dir", dir, "err", err)
		}
	}
}

// relevant reports whether an event at name concerns the definition folders of some base: the
// events of a project root's own files do not.
func (d *defsWatch) relevant(name string) bool {
	for _, marker := range []string{string(filepath.Separator) + ".zidane", string(filepath.Separator) + ".claude"} {
		if strings.Contains(name, marker) {
			return true
		}
	}
	return false
}

func (d *defsWatch) loop() {
	defer d.sub.Close()
	var quiet <-chan time.Time
	for {
		select {
		case <-d.s.baseCtx.Done():
			return
		case <-d.sub.Overflow():
			quiet = time.After(defsQuiet)
		case ev := <-d.sub.Events():
			if d.relevant(ev.Name) {
				quiet = time.After(defsQuiet)
			}
		case <-d.kick:
			quiet = time.After(defsQuiet)
		case <-quiet:
			quiet = nil
			d.reread()
		}
	}
}

// reread reads every tracked base's lists again and publishes a signal for each list that moved.
func (d *defsWatch) reread() {
	d.mu.Lock()
	roots := make([]string, 0, len(d.roots))
	for r := range d.roots {
		roots = append(roots, r)
	}
	d.mu.Unlock()
	for _, root := range roots {
		// Watch first, read second: a change after the read is an event, one before it is read.
		d.watchFolders(root)
		now := d.prints(root)
		d.mu.Lock()
		was := d.roots[root]
		d.roots[root] = &now
		d.mu.Unlock()
		if was == nil {
			continue
		}
		var pr *string
		if root != "" {
			r := root
			pr = &r
		}
		if now.agents != was.agents {
			d.s.publishState(&protocol.AgentsChangedSignal{ProjectRoot: pr}, nil)
		}
		if now.skills != was.skills {
			d.s.publishState(&protocol.SkillsChangedSignal{ProjectRoot: pr}, nil)
		}
		if now.commands != was.commands {
			d.s.publishState(&protocol.CommandsChangedSignal{ProjectRoot: pr}, nil)
		}
	}
}

// prints reads root's lists as the list methods answer them (the server user's alone for "")
// and fingerprints each.
func (d *defsWatch) prints(root string) defsPrints {
	var set *defs.Set
	if root == "" {
		set = defs.Load(d.home, defs.Source{})
	} else {
		set = d.s.runs.Definitions(root)
	}
	sum := func(v any) [32]byte {
		b, _ := protocol.Marshal(v)
		return sha256.Sum256(b)
	}
	type skill struct{ Name, Description, Path string }
	skills := make([]skill, 0, len(set.Skills))
	for _, sk := range set.Skills {
		skills = append(skills, skill{sk.Name, sk.Description, sk.Path})
	}
	var agentProblems, other []defs.Problem
	for _, p := range set.Problems {
		if strings.Contains(p.Path, string(filepath.Separator)+"agents") {
			agentProblems = append(agentProblems, p)
		} else {
			other = append(other, p)
		}
	}
	return defsPrints{
		agents:   sum([]any{set.Agents, agentProblems}),
		skills:   sum([]any{skills, other}),
		commands: sum([]any{set.Commands, other}),
	}
}
