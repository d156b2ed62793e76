package gitx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Repo locates a repository: the top of its work tree and its git folders, all absolute and
// with symlinks resolved.
type Repo struct {
	// Top is the top folder of the work tree.
	Top string
	// GitDir is the repository's git folder (.git, or a linked worktree's folder under it).
	GitDir string
	// CommonDir holds the refs and objects shared by every worktree (GitDir for a plain clone).
	CommonDir string
}

// Open finds the repository that holds dir. It fails with ErrNotRepository when dir is not in a
// work tree (a bare repository has none), ErrUnsafeRepository when another user owns it.
func (r *Runner) Open(ctx context.Context, dir string) (*Repo, error) {
	out, _, err := r.run(ctx, call{dir: dir, readOnly: true, args: []string{"rev-parse", "--path-format=absolute", "--show-toplevel", "--absolute-git-dir", "--git-common-dir"}})
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) != 3 || lines[0] == "" {
		return nil, fmt.Errorf("%w: %s has no work tree", ErrNotRepository, dir)
	}
	repo := &Repo{Top: lines[0], GitDir: lines[1], CommonDir: lines[2]}
	for _, p := range []*string{&repo.Top, &repo.GitDir, &repo.CommonDir} {
		if d, err := filepath.EvalSymlinks(*p); err == nil {
			*p = d
		}
	}
	return repo, nil
}

// Change is one changed path of a status or a diff.
type Change struct {
	// Path is relative to the top of the work tree, with forward slashes.
	Path string
	// From is the source path of a rename or copy.
	From string
	// Kind is added, modified, deleted, renamed, copied or typeChanged.
	Kind string
	// Similarity is a rename's or copy's similarity in percent (0 otherwise).
	Similarity int
}

// Conflict is one unmerged path and how its sides differ: both-modified, both-added,
// both-deleted, added-by-us, added-by-them, deleted-by-us, deleted-by-them.
type Conflict struct {
	Path string
	Kind string
}

// Status is a work tree's state, from `git status --porcelain=v2 -z --branch`.
type Status struct {
	// Branch is the checked-out branch; empty when HEAD is detached.
	Branch string
	// Head is HEAD's commit; empty before the first commit.
	Head string
	// Upstream is the branch's upstream (e.g. origin/main); empty when none.
	Upstream string
	// HasAheadBehind tells whether Ahead and Behind are known (an upstream that exists).
	HasAheadBehind bool
	Ahead, Behind  int
	Staged         []Change
	Unstaged       []Change
	Untracked      []string
	Conflicted     []Conflict
}

var kindByCode = map[byte]string{'A': "added", 'M': "modified", 'D': "deleted", 'R': "renamed", 'C': "copied", 'T': "typeChanged"}

var conflictKinds = map[string]string{
	"UU": "both-modified", "AA": "both-added", "DD": "both-deleted",
	"AU": "added-by-us", "UA": "added-by-them", "DU": "deleted-by-us", "UD": "deleted-by-them",
}

// Status reads the status of the work tree at top (untracked files listed one by one; submodules
// compared by commit only, so no git runs inside them).
func (r *Runner) Status(ctx context.Context, top string) (*Status, error) {
	out, _, err := r.run(ctx, call{dir: top, readOnly: true, scan: true, args: []string{
		"status", "--porcelain=v2", "-z", "--branch", "--untracked-files=all", "--ignore-submodules=dirty", "--find-renames",
	}})
	if err != nil {
		return nil, err
	}
	return parseStatus(out)
}

func parseStatus(out []byte) (*Status, error) {
	st := &Status{Staged: []Change{}, Unstaged: []Change{}, Untracked: []string{}, Conflicted: []Conflict{}}
	recs := bytes.Split(out, []byte{0})
	for i := 0; i < len(recs); i++ {
		rec := string(recs[i])
		if rec == "" {
			continue
		}
		switch rec[0] {
		case '#':
			f := strings.Fields(rec)
			if len(f) < 3 {
				continue
			}
			switch f[1] {
			case "branch.oid":
				if f[2] != "(initial)" {
					st.Head = f[2]
				}
			case "branch.head":
				if f[2] != "(detached)" {
					st.Branch = f[2]
				}
			case "branch.upstream":
				st.Upstream = f[2]
			case "branch.ab":
				if len(f) >= 4 {
					st.Ahead, _ = strconv.Atoi(strings.TrimPrefix(f[2], "+"))
					st.Behind, _ = strconv.Atoi(strings.TrimPrefix(f[3], "-"))
					st.HasAheadBehind = true
				}
			}
		case '1', '2':
			n := 9
			if rec[0] == '2' {
				n = 10
			}
			f := strings.SplitN(rec, " ", n)
			if len(f) != n {
				return nil, fmt.Errorf("git status: unexpected record %q", rec)
			}
			xy := f[1]
			c := Change{Path: f[n-1]}
			if rec[0] == '2' {
				if i+1 >= len(recs) {
					return nil, fmt.Errorf("git status: rename record without its source")
				}
				i++
				c.From = string(recs[i])
				c.Similarity, _ = strconv.Atoi(f[8][1:])
			}
			if k, ok := kindByCode[xy[0]]; ok {
				s := c
				s.Kind = k
				if k != "renamed" && k != "copied" {
					s.From, s.Similarity = "", 0
				}
				st.Staged = append(st.Staged, s)
			}
			if k, ok := kindByCode[xy[1]]; ok {
				u := c
				u.Kind = k
				if k != "renamed" && k != "copied" {
					// A staged rename then modified: the work tree change is on the new path.
					u.From, u.Similarity = "", 0
				}
				st.Unstaged = append(st.Unstaged, u)
			}
		case 'u':
			f := strings.SplitN(rec, " ", 11)
			if len(f) != 11 {
				return nil, fmt.Errorf("git status: unexpected record %q", rec)
			}
			k := conflictKinds[f[1]]
			if k == "" {
				k = "both-modified"
			}
			st.Conflicted = append(st.Conflicted, Conflict{Path: f[10], Kind: k})
		case '?':
			st.Untracked = append(st.Untracked, rec[2:])
		}
	}
	return st, nil
}

// DiffOptions choose what Diff compares.
type DiffOptions struct {
	// Staged compares the index with HEAD; otherwise the work tree is compared with the index.
	Staged bool
	// Path limits the diff to one file (relative to the top).
	Path string
	// Exclude are paths (relative to the top, forward slashes) left out of the diff with
	// everything below them: the hidden paths (docs/security.md "Hidden paths").
	Exclude []string
	// Context is the number of context lines (git's default 3 when negative).
	Context int
	// MaxPatchBytes bounds the patch text; past it the patch is cut and Truncated is set.
	// Default 4 MiB.
	MaxPatchBytes int
}

// FileStat is one file of a diff with its line counts.
type FileStat struct {
	Change
	// Added and Deleted count lines; both are 0 for a binary file.
	Added, Deleted int
	Binary         bool
}

// Diff is a diff's files and its unified patch text.
type Diff struct {
	Files []FileStat
	// Patch is the unified diff (git diff --patch), valid UTF-8 (invalid bytes become U+FFFD).
	Patch     string
	Truncated bool
}

// Diff compares the work tree with the index, or the index with HEAD (Staged), optionally for
// one path. External diff and textconv drivers never run.
func (r *Runner) Diff(ctx context.Context, top string, o DiffOptions) (*Diff, error) {
	base := []string{"diff", "--no-ext-diff", "--no-textconv", "--no-color", "--find-renames", "--ignore-submodules=dirty"}
	if o.Staged {
		base = append(base, "--cached")
	}
	tail := []string{"--"}
	if o.Path != "" {
		tail = append(tail, ":(literal)"+o.Path)
	}
	for _, x := range o.Exclude {
		tail = append(tail, ":(exclude,literal)"+x)
	}
	out, _, err := r.run(ctx, call{dir: top, readOnly: true, scan: true, args: concat(base, []string{"--numstat", "-z"}, tail)})
	if err != nil {
		return nil, err
	}
	files, err := parseNumstat(out)
	if err != nil {
		return nil, err
	}
	args := concat(base, []string{"--patch"})
	if o.Context >= 0 {
		args = append(args, "--unified="+strconv.Itoa(o.Context))
	}
	max := o.MaxPatchBytes
	if max <= 0 {
		max = 4 << 20
	}
	pr := *r
	pr.MaxOutput = int64(max)
	patch, _, err := pr.run(ctx, call{dir: top, readOnly: true, scan: true, args: concat(args, tail)})
	d := &Diff{Files: files}
	if errors.Is(err, ErrTooLarge) {
		d.Truncated = true
		// Run again keeping the first max bytes.
		var buf limitedBuffer
		buf.max, buf.keep = int64(max), true
		if _, _, err := r.run(ctx, call{dir: top, readOnly: true, scan: true, args: concat(args, tail), stdout: &buf}); err != nil {
			return nil, err
		}
		patch = buf.Bytes()
	} else if err != nil {
		return nil, err
	}
	d.Patch = validUTF8(patch)
	return d, nil
}

func concat(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// validUTF8 keeps b as text, replacing invalid bytes with U+FFFD.
func validUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// parseNumstat reads `--numstat -z` output: "added\tdeleted\tpath\0", or for a rename
// "added\tdeleted\t\0from\0to\0"; binary files show "-" counts.
func parseNumstat(out []byte) ([]FileStat, error) {
	files := []FileStat{}
	recs := bytes.Split(out, []byte{0})
	for i := 0; i < len(recs); i++ {
		rec := string(recs[i])
		if rec == "" {
			continue
		}
		f := strings.SplitN(rec, "\t", 3)
		if len(f) != 3 {
			return nil, fmt.Errorf("git numstat: unexpected record %q", rec)
		}
		fs := FileStat{Change: Change{Kind: "modified"}}
		if f[0] == "-" && f[1] == "-" {
			fs.Binary = true
		} else {
			fs.Added, _ = strconv.Atoi(f[0])
			fs.Deleted, _ = strconv.Atoi(f[1])
		}
		if f[2] == "" {
			if i+2 >= len(recs) {
				return nil, fmt.Errorf("git numstat: rename without its paths")
			}
			fs.From, fs.Path = string(recs[i+1]), string(recs[i+2])
			fs.Kind = "renamed"
			i += 2
		} else {
			fs.Path = f[2]
		}
		files = append(files, fs)
	}
	return files, nil
}

// resolve returns the full commit id of rev, or an error when it names no commit.
func (r *Runner) resolve(ctx context.Context, top, rev string) (string, error) {
	out, _, err := r.run(ctx, call{dir: top, readOnly: true, args: []string{"rev-parse", "--verify", "--quiet", "--end-of-options", rev + "^{commit}"}})
	if err != nil {
		var ge *Error
		if errors.As(err, &ge) {
			return "", fmt.Errorf("%w: %q", ErrUnknownRevision, rev)
		}
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// ErrUnknownRevision: the revision names no commit of the repository.
var ErrUnknownRevision = errors.New("unknown revision")

// Person is a commit's author or committer.
type Person struct {
	Name, Email string
	// At is the time in milliseconds since the Unix epoch.
	At int64
}

// Commit is one commit's facts.
type Commit struct {
	SHA       string
	Parents   []string
	Author    Person
	Committer Person
	Subject   string
	// Body is the message after the subject line (empty in Log).
	Body string
	// Files are the paths the commit changed against its first parent (only from CommitInfo).
	Files []FileStat
}

// logFormat: fields separated by US (0x1f); -z ends each record with NUL.
const logFormat = "%H%x1f%P%x1f%an%x1f%ae%x1f%at%x1f%cn%x1f%ce%x1f%ct%x1f%s"

// LogOptions bound a log.
type LogOptions struct {
	// Rev is where the walk starts; default HEAD.
	Rev string
	// Path limits the log to commits touching one path (relative to the top).
	Path string
	// Limit is the most commits returned (1..1000; default 50). Skip skips that many first.
	Limit, Skip int
}

// Log lists commits from Rev backwards (newest first), bounded by Limit. An empty repository
// has none.
func (r *Runner) Log(ctx context.Context, top string, o LogOptions) ([]Commit, error) {
	rev := o.Rev
	if rev == "" {
		rev = "HEAD"
		if _, err := r.resolve(ctx, top, rev); err != nil {
			return []Commit{}, nil // no commit yet
		}
	}
	limit := o.Limit
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, 1000)
	args := []string{"log", "-z", "--no-color", "--no-show-signature", "--format=" + logFormat, "--max-count=" + strconv.Itoa(limit)}
	if o.Skip > 0 {
		args = append(args, "--skip="+strconv.Itoa(o.Skip))
	}
	args = append(args, "--end-of-options", rev, "--")
	if o.Path != "" {
		args = append(args, ":(literal)"+o.Path)
	}
	out, _, err := r.run(ctx, call{dir: top, readOnly: true, scan: true, args: args})
	if err != nil {
		var ge *Error
		if errors.As(err, &ge) && (strings.Contains(ge.Stderr, "unknown revision") || strings.Contains(ge.Stderr, "bad revision")) {
			return nil, fmt.Errorf("%w: %q", ErrUnknownRevision, rev)
		}
		return nil, err
	}
	commits := []Commit{}
	for _, rec := range bytes.Split(out, []byte{0}) {
		rec = bytes.TrimLeft(rec, "\n")
		if len(rec) == 0 {
			continue
		}
		c, err := parseCommitFields(string(rec), 9)
		if err != nil {
			return nil, err
		}
		commits = append(commits, c)
	}
	return commits, nil
}

func parseCommitFields(rec string, n int) (Commit, error) {
	f := strings.SplitN(rec, "\x1f", n)
	if len(f) != n {
		return Commit{}, fmt.Errorf("git log: unexpected record %q", rec)
	}
	at := func(s string) int64 { v, _ := strconv.ParseInt(strings.TrimSpace(s), 10, 64); return v * 1000 }
	c := Commit{
		SHA: f[0], Parents: []string{},
		Author:    Person{Name: validUTF8([]byte(f[2])), Email: validUTF8([]byte(f[3])), At: at(f[4])},
		Committer: Person{Name: validUTF8([]byte(f[5])), Email: validUTF8([]byte(f[6])), At: at(f[7])},
		Subject:   validUTF8([]byte(f[8])),
	}
	if f[1] != "" {
		c.Parents = strings.Fields(f[1])
	}
	if n > 9 {
		c.Body = validUTF8([]byte(strings.TrimRight(f[9], "\n")))
	}
	return c, nil
}

// CommitInfo reads one commit's facts (for a transcript's SHA chip): ids, people, message and
// the files it changed against its first parent (all files for a root commit).
func (r *Runner) CommitInfo(ctx context.Context, top, rev string) (*Commit, error) {
	sha, err := r.resolve(ctx, top, rev)
	if err != nil {
		return nil, err
	}
	out, _, err := r.run(ctx, call{dir: top, readOnly: true, scan: true, args: []string{
		"show", "-s", "-z", "--no-color", "--no-show-signature", "--format=" + logFormat + "%x1f%b", "--end-of-options", sha,
	}})
	if err != nil {
		return nil, err
	}
	c, err := parseCommitFields(strings.TrimRight(string(out), "\x00"), 10)
	if err != nil {
		return nil, err
	}
	ns, _, err := r.run(ctx, call{dir: top, readOnly: true, scan: true, args: []string{
		"diff-tree", "-r", "-z", "--root", "--no-commit-id", "--find-renames", "--numstat", "--no-ext-diff", "--no-textconv", "--end-of-options", sha,
	}})
	if err != nil {
		return nil, err
	}
	if c.Files, err = parseNumstat(ns); err != nil {
		return nil, err
	}
	// numstat tells renames but not adds and deletes: take the kinds from --name-status.
	st, _, err := r.run(ctx, call{dir: top, readOnly: true, scan: true, args: []string{
		"diff-tree", "-r", "-z", "--root", "--no-commit-id", "--find-renames", "--name-status", "--end-of-options", sha,
	}})
	if err != nil {
		return nil, err
	}
	kinds := parseNameStatus(st)
	for i := range c.Files {
		if k, ok := kinds[c.Files[i].Path]; ok {
			c.Files[i].Kind = k
		}
	}
	return &c, nil
}

// parseNameStatus reads `--name-status -z`: "X\0path\0" or "R100\0from\0to\0"; it maps each
// (new) path to its kind.
func parseNameStatus(out []byte) map[string]string {
	m := map[string]string{}
	recs := bytes.Split(out, []byte{0})
	for i := 0; i < len(recs); i++ {
		s := string(recs[i])
		if s == "" {
			continue
		}
		k := kindByCode[s[0]]
		if k == "" {
			k = "modified"
		}
		if (s[0] == 'R' || s[0] == 'C') && i+2 < len(recs) {
			m[string(recs[i+2])] = k
			i += 2
			continue
		}
		if i+1 < len(recs) {
			m[string(recs[i+1])] = k
			i++
		}
	}
	return m
}
