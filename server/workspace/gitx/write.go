package gitx

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Checkout switches the work tree at top to ref (a branch, a tag or a commit; a remote branch
// name creates the local branch that tracks it). Git refuses when local changes would be
// overwritten; no hook or filter runs.
func (r *Runner) Checkout(ctx context.Context, top, ref string) error {
	if err := plainRev(ref); err != nil {
		return err
	}
	_, _, err := r.run(ctx, call{dir: top, scan: true, args: []string{"checkout", "--quiet", "--no-recurse-submodules", ref, "--"}})
	return err
}

// ErrBadName: a branch name or revision git would not accept, or one that starts with "-".
var ErrBadName = errors.New("invalid name")

// plainRev refuses a revision that could be read as an option.
func plainRev(rev string) error {
	if rev == "" || strings.HasPrefix(rev, "-") || strings.ContainsAny(rev, "\x00\n") {
		return fmt.Errorf("%w: %q", ErrBadName, rev)
	}
	return nil
}

// CreateBranch creates branch name at from (default HEAD) and, when checkout is set, switches
// to it. The name must pass `git check-ref-format --branch`.
func (r *Runner) CreateBranch(ctx context.Context, top, name, from string, checkout bool) error {
	if err := plainRev(name); err != nil {
		return err
	}
	if _, _, err := r.run(ctx, call{dir: top, readOnly: true, args: []string{"check-ref-format", "--branch", name}}); err != nil {
		return fmt.Errorf("%w: %q is not a valid branch name", ErrBadName, name)
	}
	if from == "" {
		from = "HEAD"
	}
	sha, err := r.resolve(ctx, top, from)
	if err != nil {
		return err
	}
	if _, _, err := r.run(ctx, call{dir: top, scan: true, args: []string{"branch", "--no-track", name, sha}}); err != nil {
		return err
	}
	if checkout {
		return r.Checkout(ctx, top, name)
	}
	return nil
}

// SyncResult says what Sync did.
type SyncResult struct {
	// Pulled is the number of upstream commits fast-forwarded into the branch.
	Pulled int
	// Pushed is the number of local commits pushed to the upstream.
	Pushed int
}

// ErrNoUpstream: the branch has no upstream to sync with.
var ErrNoUpstream = errors.New("no upstream")

// ErrDiverged: the branch and its upstream both have commits the other lacks.
var ErrDiverged = errors.New("diverged from upstream")

// ErrUnnamedRemote: the branch's upstream remote is a URL or path, not a remote configured in
// the repository (remote.<name>.url), or one that names a remote helper (remote.<name>.vcs).
var ErrUnnamedRemote = errors.New("not a configured remote")

// ErrLocalPush: a push URL of the remote is a local path or file:// URL. Git starts the other
// repository's git-receive-pack for it without the runner's settings, and that runs the other
// repository's hooks as the server's user, so the runner never pushes over the local transport.
var ErrLocalPush = errors.New("push to a local repository")

// Sync fetches the current branch's upstream remote, fast-forwards the branch when it is behind
// and pushes it when it is ahead. The remote must be a named remote of the repository.
// checkURL vets every URL git would use for it, resolved as git resolves them (its fetch URLs and
// push URLs: remote.<name>.url, .pushurl, insteadOf and pushInsteadOf rewrites), before anything
// is fetched; the remote's uploadpack and receivepack are never used (the options name the
// programs). A branch that diverged from its upstream is refused (ErrDiverged); a push to a
// local URL is refused (ErrLocalPush), and the push itself runs with the file transport off, so
// git would refuse one too. A fetch from a local URL runs a hardened upload-pack (runner doc).
func (r *Runner) Sync(ctx context.Context, top string, checkURL func(string) error) (*SyncResult, error) {
	st, err := r.Status(ctx, top)
	if err != nil {
		return nil, err
	}
	if st.Branch == "" || st.Upstream == "" {
		return nil, ErrNoUpstream
	}
	remote, err := r.configValue(ctx, top, "branch."+st.Branch+".remote")
	if err != nil || remote == "" || remote == "." {
		return nil, ErrNoUpstream
	}
	merge, err := r.configValue(ctx, top, "branch."+st.Branch+".merge")
	if err != nil || merge == "" {
		return nil, ErrNoUpstream
	}
	if err := plainRev(remote); err != nil {
		return nil, err
	}
	fetchURLs, pushURLs, err := r.remoteURLs(ctx, top, remote)
	if err != nil {
		return nil, err
	}
	for _, u := range append(append([]string{}, fetchURLs...), pushURLs...) {
		if u, err = asGitResolves(top, u); err != nil {
			return nil, err
		}
		if err := checkURL(u); err != nil {
			return nil, err
		}
	}
	long := call{dir: top, scan: true, timeout: r.cloneTimeout()}
	// The remote's uploadpack/receivepack in the repository's config would run a command (the
	// first value wins there, so -c cannot override it): the options name the programs. Git
	// fetches from the first URL.
	long.args = []string{"fetch", "--quiet", "--no-recurse-submodules", "--no-write-fetch-head", "--upload-pack=" + r.uploadPack(fetchURLs[0]), remote}
	if _, _, err := r.run(ctx, long); err != nil {
		return nil, err
	}
	if st, err = r.Status(ctx, top); err != nil {
		return nil, err
	}
	res := &SyncResult{}
	if st.Ahead > 0 && st.Behind > 0 {
		return nil, fmt.Errorf("%w: %d local and %d upstream commits", ErrDiverged, st.Ahead, st.Behind)
	}
	if st.Behind > 0 {
		if _, _, err := r.run(ctx, call{dir: top, scan: true, args: []string{"merge", "--ff-only", "--quiet", "--no-stat", "@{upstream}"}}); err != nil {
			return nil, err
		}
		res.Pulled = st.Behind
	}
	if st.Ahead > 0 {
		for _, u := range pushURLs {
			if IsLocalURL(u) {
				return nil, fmt.Errorf("%w: %s", ErrLocalPush, u)
			}
		}
		long.noLocal = true
		long.args = []string{"push", "--quiet", "--no-recurse-submodules", "--no-signed", "--receive-pack=git-receive-pack", remote, "HEAD:" + merge}
		if _, _, err := r.run(ctx, long); err != nil {
			return nil, err
		}
		res.Pushed = st.Ahead
	}
	return res, nil
}

// ErrHomeURL: a remote's local path starts with "~", which git expands to a home folder.
var ErrHomeURL = errors.New("a local remote path starts with ~")

// asGitResolves returns a remote URL as git run at top resolves it: a relative local path joined
// to top (git's cwd), a path starting with "~" (git expands it to a home folder) refused with
// ErrHomeURL. Other URLs are returned as they are.
func asGitResolves(top, u string) (string, error) {
	if !IsLocalURL(u) || urlSchemeRE.MatchString(u) {
		return u, nil
	}
	if strings.HasPrefix(u, "~") {
		return "", fmt.Errorf("%w: %q", ErrHomeURL, u)
	}
	if !filepath.IsAbs(u) {
		return filepath.Join(top, u), nil
	}
	return u, nil
}

// remoteURLs returns the URLs git fetches from and pushes to for the named remote, rewritten as
// git rewrites them (`git remote get-url --all`, with and without --push). A remote that is not
// configured, or that names a remote helper, is ErrUnnamedRemote.
func (r *Runner) remoteURLs(ctx context.Context, top, remote string) (fetch, push []string, err error) {
	if u, err := r.configValue(ctx, top, "remote."+remote+".url"); err != nil || u == "" {
		return nil, nil, fmt.Errorf("%w: %q", ErrUnnamedRemote, remote)
	}
	if v, err := r.configValue(ctx, top, "remote."+remote+".vcs"); err != nil || v != "" {
		return nil, nil, fmt.Errorf("%w: %q names a remote helper (remote.%s.vcs)", ErrUnnamedRemote, remote, remote)
	}
	get := func(extra ...string) ([]string, error) {
		args := append(append([]string{"remote", "get-url", "--all"}, extra...), remote)
		out, _, err := r.run(ctx, call{dir: top, readOnly: true, args: args})
		if err != nil {
			return nil, err
		}
		urls := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
		if urls[0] == "" {
			return nil, fmt.Errorf("%w: %q has no URL", ErrUnnamedRemote, remote)
		}
		return urls, nil
	}
	if fetch, err = get(); err != nil {
		return nil, nil, err
	}
	if push, err = get("--push"); err != nil {
		return nil, nil, err
	}
	return fetch, push, nil
}

func (r *Runner) configValue(ctx context.Context, top, key string) (string, error) {
	out, _, err := r.run(ctx, call{dir: top, readOnly: true, allowed: map[int]bool{1: true}, args: []string{"config", "--get", key}})
	return strings.TrimSpace(string(out)), err
}

func (r *Runner) cloneTimeout() time.Duration {
	if r.CloneTimeout > 0 {
		return r.CloneTimeout
	}
	return 30 * time.Minute
}

// Progress is one step of a clone: Phase is git's phase (counting, compressing, receiving,
// resolving, checkout) and Percent its completion (0..100), or -1 when git gave none.
type Progress struct {
	Phase   string
	Percent int
}

var progressRE = regexp.MustCompile(`^(?:remote: )?([A-Za-z ]+?): +(\d{1,3})%`)

var phaseNames = map[string]string{
	"Enumerating objects": "counting", "Counting objects": "counting",
	"Compressing objects": "compressing", "Receiving objects": "receiving",
	"Resolving deltas": "resolving", "Updating files": "checkout", "Checking out files": "checkout",
}

// ErrExists: the clone's destination already exists.
var ErrExists = errors.New("destination exists")

// Clone clones url into dest, which must not exist; its parent must. The URL goes after "--".
// Progress is reported through progress (may be nil), at most every 100 ms per phase plus each
// phase's end. The clone is made in a hidden folder beside dest and renamed into place only
// when it succeeded: a failed or cancelled clone (ctx) leaves nothing behind. Submodules are not
// cloned; no hook, filter (Git LFS included) or other program of the repository runs, nor of the
// source's repository when url is local (a hardened upload-pack, runner doc).
func (r *Runner) Clone(ctx context.Context, url, dest string, progress func(Progress)) error {
	parent := filepath.Dir(dest)
	if _, err := os.Lstat(dest); err == nil {
		return fmt.Errorf("%w: %s", ErrExists, dest)
	}
	tmp, err := os.MkdirTemp(parent, ".zidane-clone-")
	if err != nil {
		return fmt.Errorf("make the clone's folder: %w", err)
	}
	defer os.RemoveAll(tmp)
	into := filepath.Join(tmp, "repo")
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		readProgress(pr, progress)
	}()
	_, _, err = r.run(ctx, call{
		// scan: the filter drivers of the operator's config (Git LFS) would run on the checkout;
		// in tmp, not parent: clone reads no repository's config that holds parent.
		dir: parent, timeout: r.cloneTimeout(), stderr: pw, scan: true, scanIn: tmp,
		args: []string{"clone", "--progress", "--no-local", "--no-recurse-submodules", "--template=", "--upload-pack=" + r.uploadPack(url), "--", url, into},
	})
	pw.Close()
	<-done
	if err != nil {
		return err
	}
	err = unix.Renameat2(unix.AT_FDCWD, into, unix.AT_FDCWD, dest, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		// A file system without RENAME_NOREPLACE: check, then rename (a folder created in
		// between and left empty is replaced; a non-empty one makes the rename fail).
		if _, lerr := os.Lstat(dest); lerr == nil {
			return fmt.Errorf("%w: %s", ErrExists, dest)
		}
		err = os.Rename(into, dest)
	}
	if errors.Is(err, unix.EEXIST) || errors.Is(err, unix.ENOTEMPTY) {
		return fmt.Errorf("%w: %s", ErrExists, dest)
	}
	if err != nil {
		return fmt.Errorf("move the clone into place: %w", err)
	}
	return nil
}

// readProgress parses git's progress lines (separated by CR or LF) until r ends.
func readProgress(r io.Reader, progress func(Progress)) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 64<<10)
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		if i := bytes.IndexAny(data, "\r\n"); i >= 0 {
			return i + 1, data[:i], nil
		}
		if atEOF && len(data) > 0 {
			return len(data), data, nil
		}
		return 0, nil, nil
	})
	last := Progress{Percent: -2}
	var lastAt time.Time
	for sc.Scan() {
		m := progressRE.FindStringSubmatch(sc.Text())
		if m == nil || progress == nil {
			continue
		}
		phase, ok := phaseNames[m[1]]
		if !ok {
			continue
		}
		pct, _ := strconv.Atoi(m[2])
		p := Progress{Phase: phase, Percent: min(pct, 100)}
		if p == last {
			continue
		}
		if p.Phase == last.Phase && p.Percent != 100 && time.Since(lastAt) < 100*time.Millisecond {
			continue
		}
		last, lastAt = p, time.Now()
		progress(p)
	}
	io.Copy(io.Discard, r)
}

// Side is one side of a file's change: SideOld the committed version (HEAD, else the index),
// SideNew the work tree's.
type Side string

// The two sides of a change (seed "files": media side=old|new).
const (
	SideOld Side = "old"
	SideNew Side = "new"
)

// ErrNotFound: the path has no such side (not in HEAD nor the index, or not in the work tree).
var ErrNotFound = errors.New("not found")

// ReadSide reads one side of rel (a path relative to the repository's top, forward slashes, no
// "..") as bytes, at most max bytes (ErrTooLarge past it). SideOld reads the blob from HEAD, or
// from the index for a file added since, raw (no filter or textconv runs); SideNew reads the work
// tree's file through an os.Root at the top, so a symlink cannot lead outside the repository.
// This is the runner the files group's media use (seed "files").
func (r *Runner) ReadSide(ctx context.Context, repo *Repo, rel string, side Side, max int64) ([]byte, error) {
	clean := filepath.ToSlash(filepath.Clean(filepath.FromSlash(rel)))
	if rel == "" || filepath.IsAbs(rel) || clean == ".." || strings.HasPrefix(clean, "../") || strings.ContainsRune(rel, 0) {
		return nil, fmt.Errorf("%w: %q is not a path inside the repository", ErrNotFound, rel)
	}
	switch side {
	case SideNew:
		root, err := os.OpenRoot(repo.Top)
		if err != nil {
			return nil, err
		}
		defer root.Close()
		f, err := root.Open(clean)
		if err != nil {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, clean)
		}
		defer f.Close()
		if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("%w: %s is not a file", ErrNotFound, clean)
		}
		b, err := io.ReadAll(io.LimitReader(f, max+1))
		if err != nil {
			return nil, err
		}
		if int64(len(b)) > max {
			return nil, ErrTooLarge
		}
		return b, nil
	case SideOld:
		pr := *r
		pr.MaxOutput = max
		for _, obj := range []string{"HEAD:" + clean, ":0:" + clean} {
			b, _, err := pr.run(ctx, call{dir: repo.Top, readOnly: true, args: []string{"cat-file", "blob", obj}})
			if err == nil {
				return b, nil
			}
			if errors.Is(err, ErrTooLarge) {
				return nil, err
			}
			var ge *Error
			if !errors.As(err, &ge) {
				return nil, err
			}
		}
		return nil, fmt.Errorf("%w: %s has no committed or staged version", ErrNotFound, clean)
	}
	return nil, fmt.Errorf("side must be old or new, not %q", side)
}
