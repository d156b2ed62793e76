package server

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/workspace"
	"github.com/zidane-server/zidane/server/workspace/gitx"
)

type gitHandler struct{ s *Server }

// Git returns the git group's handler (seed "git").
func (h *handlers) Git() protocol.GitHandler { return gitHandler{h.s} }

// maxClonesPerConn bounds the clones one connection runs at once.
const maxClonesPerConn = 4

// cloneJob is a running clone; it belongs to the connection that started it.
type cloneJob struct {
	id     string
	origin *conn
	cancel context.CancelFunc
	// cancelled is set (under Server.gitMu) by git.cancelClone or a dropped connection.
	cancelled bool
}

// gitRepo resolves cwd inside the workspace roots and opens its repository, whose top and git
// folders must lie inside the roots too (core.worktree or a .git file could point elsewhere).
func (s *Server) gitRepo(ctx context.Context, cwd string) (*gitx.Repo, error) {
	_, dir, err := s.resolveCwd(cwd)
	if err != nil {
		return nil, err
	}
	repo, err := s.git.Open(ctx, dir)
	if err != nil {
		if fi, lerr := os.Lstat(filepath.Join(dir, ".git")); lerr == nil && !fi.IsDir() {
			// A .git file or link git could not follow: answer as for one that leads out, so it
			// cannot probe what exists elsewhere.
			return nil, protocol.NewHandlerFailedError(fmt.Sprintf("The repository of %q keeps its data outside the workspace roots (its top, git folder or object stores); use a repository wholly inside %s.", cwd, strings.Join(s.ws.Roots(), ", ")))
		}
		return nil, gitErr(err, dir)
	}
	if err := s.gitDataInside(repo.Top, repo.GitDir, repo.CommonDir); err != nil {
		return nil, protocol.NewHandlerFailedError(fmt.Sprintf("The repository of %q keeps its data outside the workspace roots (its top, git folder or object stores); use a repository wholly inside %s.", cwd, strings.Join(s.ws.Roots(), ", ")))
	}
	return repo, nil
}

// errGitDataOutside: a repository's top, git folder or an object store it borrows lies outside
// the workspace roots. Messages never name the outside path (a client must not probe with it).
var errGitDataOutside = errors.New("git data outside the workspace roots")

// gitDataInside checks that each folder lies inside the roots, and that no object store a git
// folder borrows from (objects/info/alternates, followed through chains, at most 5 deep as git
// does) lies outside: otherwise git reads, clones and media would copy objects from elsewhere.
func (s *Server) gitDataInside(dirs ...string) error {
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if _, err := s.ws.Folder(d); err != nil {
			return errGitDataOutside
		}
	}
	seen := map[string]bool{}
	var walk func(objects string, depth int) error
	walk = func(objects string, depth int) error {
		if seen[objects] || depth > 5 {
			return nil
		}
		seen[objects] = true
		if _, err := s.ws.Folder(objects); err != nil {
			return errGitDataOutside
		}
		// Through the confinement point: a named pipe there is refused at once (T09), a link
		// out of the roots too.
		b, _, cut, err := s.ws.ReadFile(objects, "info/alternates", 1<<20)
		if cut {
			return errGitDataOutside // over 1 MiB: not read whole, so not vouched for
		}
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil
			}
			return errGitDataOutside // unreadable: refuse rather than guess
		}
		for _, line := range strings.Split(string(b), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			if strings.HasPrefix(line, `"`) { // a quoted path: refuse rather than unquote C-style
				return errGitDataOutside
			}
			alt := line
			if !filepath.IsAbs(alt) {
				alt = filepath.Join(objects, alt)
			}
			if err := walk(filepath.Clean(alt), depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	for _, d := range dirs[1:] { // the git folders (dirs[0] is the top)
		if d == "" {
			continue
		}
		if err := walk(filepath.Join(d, "objects"), 0); err != nil {
			return err
		}
	}
	return nil
}

// gitErr turns a runner error into the answer a client can act on.
func gitErr(err error, dir string) error {
	var pe *protocol.Error
	switch {
	case errors.As(err, &pe):
		return err
	case errors.Is(err, gitx.ErrNotRepository):
		return protocol.NewHandlerFailedError(fmt.Sprintf("%q is not in a git repository; pick a folder inside a checkout, or clone one with git.clone.", dir))
	case errors.Is(err, gitx.ErrUnsafeRepository):
		return protocol.NewHandlerFailedError(fmt.Sprintf("Git refuses %q: another user owns the repository (safe.directory). The server runs git as its own user and does not trust other users' repositories; change the owner, or the operator adds it to safe.directory in the server user's global git config.", dir))
	case errors.Is(err, gitx.ErrTimeout):
		return protocol.NewHandlerFailedError("Git took too long and was stopped; try again, or ask for less (one path, a smaller limit).")
	case errors.Is(err, gitx.ErrTooLarge):
		return protocol.NewHandlerFailedError("Git's answer is too large; ask for less (one path, a smaller limit).")
	case errors.Is(err, gitx.ErrUnknownRevision):
		return protocol.NewHandlerFailedError(fmt.Sprintf("%v; pass a branch, a tag or a commit id of this repository.", err))
	case errors.Is(err, gitx.ErrBadName):
		return protocol.NewHandlerFailedError(fmt.Sprintf("%v: pass a valid branch or revision name that does not start with '-'.", err))
	case errors.Is(err, gitx.ErrNoUpstream):
		return protocol.NewHandlerFailedError("The current branch has no upstream to sync with; set one (git branch --set-upstream-to) or check out a branch that has one.")
	case errors.Is(err, gitx.ErrUnnamedRemote):
		return protocol.NewHandlerFailedError(fmt.Sprintf("The branch's upstream remote is refused (%v): git.sync syncs only with a remote configured in the repository (remote.<name>.url) that names no remote helper; add one (git remote add) and set it as the upstream (git branch --set-upstream-to).", err))
	case errors.Is(err, gitx.ErrLocalPush):
		return protocol.NewHandlerFailedError(fmt.Sprintf("git.sync does not push to a local repository (%v): git would start that repository's own receive side, whose hooks would run as the server's user outside the sandbox. Give the remote an https or ssh push URL (git remote set-url --push), or push from your own shell; fetching from a local path still works.", err))
	case errors.Is(err, gitx.ErrHomeURL):
		return protocol.NewHandlerFailedError(fmt.Sprintf("The remote's URL is refused (%v): git would read it from a home folder, outside the workspace roots. Give the remote an absolute path inside the roots, or an https or ssh URL (git remote set-url).", err))
	case errors.Is(err, gitx.ErrDiverged):
		return protocol.NewHandlerFailedError(fmt.Sprintf("The branch %v; merge or rebase it yourself, then sync again.", err))
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return protocol.NewHandlerFailedError("The request was cancelled or timed out.")
	}
	var ge *gitx.Error
	if errors.As(err, &ge) {
		return protocol.NewHandlerFailedError(clip(ge.Error(), 2000))
	}
	return err
}

// clip cuts s to at most n bytes (on a rune boundary), marking the cut with "…".
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func gitChanges(cs []gitx.Change) []protocol.GitChange {
	out := make([]protocol.GitChange, 0, len(cs))
	for _, c := range cs {
		g := protocol.GitChange{Path: c.Path, Kind: protocol.GitChangeKind(c.Kind)}
		if c.From != "" {
			g.From = ptr(c.From)
			g.Similarity = ptr(c.Similarity)
		}
		out = append(out, g)
	}
	return out
}

func gitFiles(fs []gitx.FileStat) []protocol.GitFileStat {
	out := make([]protocol.GitFileStat, 0, len(fs))
	for _, f := range fs {
		g := protocol.GitFileStat{Path: f.Path, Kind: protocol.GitChangeKind(f.Kind), Added: f.Added, Deleted: f.Deleted, Binary: f.Binary}
		if f.From != "" {
			g.From = ptr(f.From)
		}
		out = append(out, g)
	}
	return out
}

func gitPerson(p gitx.Person) protocol.GitPerson {
	return protocol.GitPerson{Name: p.Name, Email: p.Email, At: p.At}
}

// Status implements git.status.
func (h gitHandler) Status(ctx context.Context, p *protocol.GitStatusParams) (*protocol.GitStatus, error) {
	repo, err := h.s.gitRepo(ctx, p.Cwd)
	if err != nil {
		return nil, err
	}
	st, err := h.s.git.Status(ctx, repo.Top)
	if err != nil {
		return nil, gitErr(err, repo.Top)
	}
	h.s.hideStatus(repo.Top, st)
	out := &protocol.GitStatus{
		Root: repo.Top, Staged: gitChanges(st.Staged), Unstaged: gitChanges(st.Unstaged),
		Untracked: st.Untracked, Conflicted: make([]protocol.GitConflict, 0, len(st.Conflicted)),
	}
	for _, c := range st.Conflicted {
		out.Conflicted = append(out.Conflicted, protocol.GitConflict{Path: c.Path, Kind: protocol.GitConflictKind(c.Kind)})
	}
	if st.Branch != "" {
		out.Branch = ptr(st.Branch)
	}
	if st.Head != "" {
		out.Head = ptr(st.Head)
	}
	if st.Upstream != "" {
		out.Upstream = ptr(st.Upstream)
	}
	if st.HasAheadBehind {
		out.Ahead, out.Behind = ptr(st.Ahead), ptr(st.Behind)
	}
	return out, nil
}

// Diff implements git.diff.
func (h gitHandler) Diff(ctx context.Context, p *protocol.GitDiffParams) (*protocol.GitDiff, error) {
	repo, err := h.s.gitRepo(ctx, p.Cwd)
	if err != nil {
		return nil, err
	}
	o := gitx.DiffOptions{Context: -1, Staged: p.Staged != nil && *p.Staged}
	if p.Context != nil {
		o.Context = *p.Context
	}
	if p.Path != nil {
		if o.Path, err = repoPath(*p.Path, "/path"); err != nil {
			return nil, err
		}
	}
	o.Exclude = h.s.ws.Hidden().Under(repo.Top)
	d, err := h.s.git.Diff(ctx, repo.Top, o)
	if err != nil {
		return nil, gitErr(err, repo.Top)
	}
	return &protocol.GitDiff{Root: repo.Top, Files: gitFiles(d.Files), Patch: d.Patch, Truncated: d.Truncated}, nil
}

// hiddenIn reports whether any of rels (relative to the repository's top; "" skipped) is hidden
// (docs/security.md "Hidden paths").
func (s *Server) hiddenIn(top string, rels ...string) bool {
	for _, r := range rels {
		if r != "" && s.ws.Hidden().Contains(filepath.Join(top, filepath.FromSlash(r))) {
			return true
		}
	}
	return false
}

// hideStatus leaves the hidden paths out of a status, as if they did not exist: git.status
// names none of them, whether tracked, changed or untracked.
func (s *Server) hideStatus(top string, st *gitx.Status) {
	hide := func(c gitx.Change) bool { return s.hiddenIn(top, c.Path, c.From) }
	st.Staged = slices.DeleteFunc(st.Staged, hide)
	st.Unstaged = slices.DeleteFunc(st.Unstaged, hide)
	st.Untracked = slices.DeleteFunc(st.Untracked, func(p string) bool { return s.hiddenIn(top, p) })
	st.Conflicted = slices.DeleteFunc(st.Conflicted, func(c gitx.Conflict) bool { return s.hiddenIn(top, c.Path) })
}

// repoPath checks a path relative to a repository's top: no NUL, not absolute, no "..".
func repoPath(p, pointer string) (string, error) {
	clean := filepath.ToSlash(filepath.Clean(p))
	if strings.ContainsRune(p, 0) || filepath.IsAbs(p) || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", protocol.NewInvalidParamsError(fmt.Sprintf("params%s: %q must be a path relative to the repository's top, without '..'.", pointer, p), &protocol.InvalidParamsErrorData{Pointer: pointer})
	}
	return clean, nil
}

// Log implements git.log.
func (h gitHandler) Log(ctx context.Context, p *protocol.GitLogParams) (*protocol.GitLogResult, error) {
	repo, err := h.s.gitRepo(ctx, p.Cwd)
	if err != nil {
		return nil, err
	}
	o := gitx.LogOptions{}
	if p.Rev != nil {
		o.Rev = *p.Rev
		if strings.HasPrefix(o.Rev, "-") {
			return nil, protocol.NewInvalidParamsError("params/rev: a revision cannot start with '-'.", &protocol.InvalidParamsErrorData{Pointer: "/rev"})
		}
	}
	if p.Path != nil {
		if o.Path, err = repoPath(*p.Path, "/path"); err != nil {
			return nil, err
		}
	}
	if p.Limit != nil {
		o.Limit = *p.Limit
	}
	if o.Path != "" && h.s.hiddenIn(repo.Top, o.Path) {
		return &protocol.GitLogResult{Commits: []protocol.GitLogEntry{}}, nil // as if it never existed
	}
	if p.Skip != nil {
		o.Skip = *p.Skip
	}
	cs, err := h.s.git.Log(ctx, repo.Top, o)
	if err != nil {
		return nil, gitErr(err, repo.Top)
	}
	out := &protocol.GitLogResult{Commits: make([]protocol.GitLogEntry, 0, len(cs))}
	for _, c := range cs {
		out.Commits = append(out.Commits, protocol.GitLogEntry{SHA: c.SHA, Parents: c.Parents, Author: gitPerson(c.Author), Committer: gitPerson(c.Committer), Subject: c.Subject})
	}
	return out, nil
}

// Commit implements git.commit: one commit's facts.
func (h gitHandler) Commit(ctx context.Context, p *protocol.GitCommitParams) (*protocol.GitCommit, error) {
	repo, err := h.s.gitRepo(ctx, p.Cwd)
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(p.Rev, "-") {
		return nil, protocol.NewInvalidParamsError("params/rev: a revision cannot start with '-'.", &protocol.InvalidParamsErrorData{Pointer: "/rev"})
	}
	c, err := h.s.git.CommitInfo(ctx, repo.Top, p.Rev)
	if err != nil {
		return nil, gitErr(err, repo.Top)
	}
	c.Files = slices.DeleteFunc(c.Files, func(f gitx.FileStat) bool { return h.s.hiddenIn(repo.Top, f.Path, f.From) })
	return &protocol.GitCommit{SHA: c.SHA, Parents: c.Parents, Author: gitPerson(c.Author), Committer: gitPerson(c.Committer), Subject: c.Subject, Body: c.Body, Files: gitFiles(c.Files)}, nil
}

// head reads where HEAD is after a write.
func (s *Server) gitHead(ctx context.Context, top string) (*protocol.GitHead, error) {
	st, err := s.git.Status(ctx, top)
	if err != nil {
		return nil, gitErr(err, top)
	}
	out := &protocol.GitHead{Head: st.Head}
	if st.Branch != "" {
		out.Branch = ptr(st.Branch)
	}
	return out, nil
}

// Checkout implements git.checkout (admin).
func (h gitHandler) Checkout(ctx context.Context, p *protocol.GitCheckoutParams) (*protocol.GitHead, error) {
	repo, err := h.s.gitRepo(ctx, p.Cwd)
	if err != nil {
		return nil, err
	}
	if err := h.s.git.Checkout(ctx, repo.Top, p.Ref); err != nil {
		return nil, gitErr(err, repo.Top)
	}
	return h.s.gitHead(ctx, repo.Top)
}

// CreateBranch implements git.createBranch (admin).
func (h gitHandler) CreateBranch(ctx context.Context, p *protocol.GitCreateBranchParams) (*protocol.GitHead, error) {
	repo, err := h.s.gitRepo(ctx, p.Cwd)
	if err != nil {
		return nil, err
	}
	from := ""
	if p.From != nil {
		from = *p.From
	}
	if err := h.s.git.CreateBranch(ctx, repo.Top, p.Name, from, p.Checkout == nil || *p.Checkout); err != nil {
		return nil, gitErr(err, repo.Top)
	}
	return h.s.gitHead(ctx, repo.Top)
}

// Sync implements git.sync (admin): every URL git would fetch from or push to passes the same
// rules as a clone's, and a push never goes to a local path (gitx.ErrLocalPush).
func (h gitHandler) Sync(ctx context.Context, p *protocol.GitSyncParams) (*protocol.GitSyncResult, error) {
	repo, err := h.s.gitRepo(ctx, p.Cwd)
	if err != nil {
		return nil, err
	}
	res, err := h.s.git.Sync(ctx, repo.Top, func(u string) error { _, err := h.s.checkRemoteURL(ctx, u); return err })
	if err != nil {
		return nil, gitErr(err, repo.Top)
	}
	return &protocol.GitSyncResult{Pulled: res.Pulled, Pushed: res.Pushed}, nil
}

var (
	schemeRE = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*)://`)
	helperRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9+.-]*::`)
)

// checkRemoteURL applies the clone rules to a remote's URL and returns what to pass to git: a
// URL whose scheme is on the allowlist (scp-like host:path counts as ssh), or a local path
// (or file:// URL) inside the workspace roots, resolved.
func (s *Server) checkRemoteURL(ctx context.Context, u string) (string, error) {
	schemes := s.cfg.CloneSchemes
	if len(schemes) == 0 {
		schemes = gitx.DefaultSchemes
	}
	refuse := func(why string) error {
		return protocol.NewHandlerFailedError(fmt.Sprintf("The URL %q is refused: %s. Allowed: %s URLs, or a local path inside the workspace roots.", u, why, strings.Join(schemes, ", ")))
	}
	if u == "" || strings.HasPrefix(u, "-") || strings.ContainsAny(u, "\x00\n\r") {
		return "", refuse("it is empty, starts with '-' or holds a control character")
	}
	local := ""
	switch m := schemeRE.FindStringSubmatch(u); {
	case m != nil:
		scheme := strings.ToLower(m[1])
		if scheme == "file" {
			pu, err := url.Parse(u)
			if err != nil || (pu.Host != "" && pu.Host != "localhost") {
				return "", refuse("a file URL must name a local path")
			}
			local = pu.Path
			break
		}
		if !slices.Contains(schemes, scheme) {
			return "", refuse("its scheme " + scheme + " is not on the operator's allowlist")
		}
		return u, nil
	case helperRE.MatchString(u):
		return "", refuse("remote helpers (transport::address) are not allowed")
	default:
		colon := strings.IndexByte(u, ':')
		slash := strings.IndexByte(u, '/')
		if colon > 0 && (slash < 0 || colon < slash) {
			if !slices.Contains(schemes, "ssh") {
				return "", refuse("ssh (host:path) is not on the operator's allowlist")
			}
			return u, nil
		}
		local = u
	}
	_, dir, err := s.resolveCwd(local)
	if err != nil {
		return "", refuse("a local path must be an existing folder inside the workspace roots")
	}
	// Git's upload-pack (and clone) take the first of dir/.git, dir, dir.git/.git, dir.git (and
	// a clone dir.bundle) that is a repository: dir itself must be one, and nothing git could
	// take instead of it may lie beside it (a link out of the roots the agent made there).
	for _, alt := range []string{dir + ".git", dir + ".bundle"} {
		if _, err := os.Lstat(alt); err == nil {
			return "", refuse("git could read " + filepath.Base(alt) + " beside it instead; name that repository itself, or remove it")
		}
	}
	// The folder is inside the roots; its git data must be too (a .git file or link, or borrowed
	// object stores, could point elsewhere on the machine).
	if repo, err := s.git.Open(ctx, dir); err == nil {
		if repo.Top != dir {
			return "", refuse("it is a folder inside a repository, not the repository's top folder")
		}
		err = s.gitDataInside(repo.Top, repo.GitDir, repo.CommonDir)
		if err != nil {
			return "", refuse("the repository keeps its data outside the workspace roots")
		}
		return dir, nil
	}
	if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
		return "", refuse("its .git cannot be read as a repository inside the workspace roots")
	}
	if !workspace.IsGitDir(dir) {
		return "", refuse("it is not a repository (a work tree's top folder, or a bare repository)")
	}
	if err := s.gitDataInside(dir, dir); err != nil { // a bare repository: the folder is its git folder
		return "", refuse("the repository keeps its data outside the workspace roots")
	}
	return dir, nil
}

// cloneDest resolves a clone's destination: a new folder whose parent exists inside the roots.
func (s *Server) cloneDest(into string) (string, error) {
	if strings.ContainsRune(into, 0) {
		return "", protocol.NewInvalidParamsError("params/into: a path cannot hold a NUL character.", &protocol.InvalidParamsErrorData{Pointer: "/into"})
	}
	p, err := s.ws.Resolve("", into)
	if err != nil || p.Rel == "." {
		return "", protocol.NewHandlerFailedError(fmt.Sprintf("Cannot clone into %q: the folder must be a new folder inside the workspace roots (%s).", into, strings.Join(s.ws.Roots(), ", ")))
	}
	_, parent, err := s.resolveCwd(filepath.Dir(p.Abs()))
	if err != nil {
		return "", err
	}
	dest := filepath.Join(parent, filepath.Base(p.Abs()))
	if _, err := os.Lstat(dest); err == nil {
		return "", protocol.NewHandlerFailedError(fmt.Sprintf("Cannot clone into %q: it already exists; pick a new folder name.", dest))
	}
	return dest, nil
}

// Clone implements git.clone: checks, then runs the clone in the background; its progress goes
// to this connection only.
func (h gitHandler) Clone(ctx context.Context, p *protocol.GitCloneParams) (*protocol.GitCloneResult, error) {
	s := h.s
	if !s.cfg.AllowClone {
		return nil, protocol.NewHandlerFailedError("Cloning is off on this server; the operator starts it with " + s.flagHint("--allow-clone") + ".")
	}
	c := connFrom(ctx)
	if c == nil {
		return nil, errors.New("no connection")
	}
	src, err := s.checkRemoteURL(ctx, p.URL)
	if err != nil {
		return nil, err
	}
	dest, err := s.cloneDest(p.Into)
	if err != nil {
		return nil, err
	}
	s.gitMu.Lock()
	n := 0
	for _, j := range s.clones {
		if j.origin == c {
			n++
		}
	}
	if n >= maxClonesPerConn {
		s.gitMu.Unlock()
		return nil, protocol.NewHandlerFailedError(fmt.Sprintf("This connection already runs %d clones; wait for one to end.", n))
	}
	cctx, cancel := context.WithCancel(c.ctx) // a dropped connection cancels its clones
	job := &cloneJob{id: uuid.NewString(), origin: c, cancel: cancel}
	s.clones[job.id] = job
	s.gitMu.Unlock()
	s.bgWG.Add(1)
	afterAnswer(ctx, func() {
		go func() {
			defer s.bgWG.Done()
			s.runClone(cctx, job, src, dest)
		}()
	})
	return &protocol.GitCloneResult{CloneID: job.id, Path: dest}, nil
}

func (s *Server) runClone(ctx context.Context, job *cloneJob, src, dest string) {
	defer func() {
		s.gitMu.Lock()
		delete(s.clones, job.id)
		s.gitMu.Unlock()
		job.cancel()
	}()
	publish := func(sig *protocol.GitCloneProgressSignal) {
		if _, err := s.hub.publish(sig, job.origin, ""); err != nil {
			s.log.Warn("clone progress not sent", "err", err)
		}
	}
	publish(&protocol.GitCloneProgressSignal{CloneID: job.id, Phase: protocol.GitCloneProgressPhaseStarting})
	err := s.git.Clone(ctx, src, dest, func(p gitx.Progress) {
		sig := &protocol.GitCloneProgressSignal{CloneID: job.id, Phase: protocol.GitCloneProgressPhase(p.Phase)}
		if p.Percent >= 0 {
			sig.Percent = ptr(p.Percent)
		}
		publish(sig)
	})
	s.gitMu.Lock()
	cancelled := job.cancelled || errors.Is(err, context.Canceled)
	s.gitMu.Unlock()
	switch {
	case err == nil:
		publish(&protocol.GitCloneProgressSignal{CloneID: job.id, Phase: protocol.GitCloneProgressPhaseDone, Percent: ptr(100), Path: ptr(dest)})
	case cancelled:
		publish(&protocol.GitCloneProgressSignal{CloneID: job.id, Phase: protocol.GitCloneProgressPhaseCancelled})
	default:
		msg := gitErr(err, dest).Error()
		var pe *protocol.Error
		if errors.As(gitErr(err, dest), &pe) {
			msg = pe.Message
		}
		s.log.Info("clone failed", "dest", dest, "err", err)
		publish(&protocol.GitCloneProgressSignal{CloneID: job.id, Phase: protocol.GitCloneProgressPhaseFailed, Message: ptr(clip(msg, 2000))})
	}
}

// CancelClone implements git.cancelClone: only the connection that started a clone can stop it.
func (h gitHandler) CancelClone(ctx context.Context, p *protocol.GitCancelCloneParams) (*protocol.GitCancelCloneResult, error) {
	c := connFrom(ctx)
	h.s.gitMu.Lock()
	job := h.s.clones[p.CloneID]
	ok := job != nil && job.origin == c && !job.cancelled
	if ok {
		job.cancelled = true
	}
	h.s.gitMu.Unlock()
	if ok {
		job.cancel()
	}
	return &protocol.GitCancelCloneResult{Cancelled: ok}, nil
}
