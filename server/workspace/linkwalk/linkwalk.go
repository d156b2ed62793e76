// Package linkwalk resolves a relative path inside a confined root one component at a time,
// reading each symbolic link it meets instead of following it, so that no link leads out of the
// root unseen: ".." never climbs above the root, a link's target is spliced in front of the rest
// of the path and walked the same way, an absolute target is handed to the caller to place (or
// refuse), and a loop ends after MaxLinks links.
//
// It is the shared core of the workspace's confinement walk (server/workspace) and of the
// resolution of a project's definition files (server/agent/defs). What differs between them, how
// a component is looked at (the hidden paths, which errors mean "nothing there"), which roots an
// absolute target may reach and the messages, lives in the Walker's functions. The package
// imports only the standard library.
package linkwalk

import (
	"errors"
	"path/filepath"
	"strings"
)

// MaxLinks bounds the symbolic links read while resolving one path (Linux's limit is 40): a loop
// of links ends there with ErrTooManyLinks.
const MaxLinks = 40

var (
	// ErrEscapes is Walk's error for a ".." that would climb above the root.
	ErrEscapes = errors.New("linkwalk: the path climbs above its root")
	// ErrTooManyLinks is Walk's error for a path that reads more than MaxLinks links.
	ErrTooManyLinks = errors.New("linkwalk: too many levels of symbolic links")
)

// Walker resolves paths inside roots of type R (an index into the caller's roots, or struct{}
// for a single root). Its functions are required. Walk returns their errors as they are.
type Walker[R any] struct {
	// Lstat looks at rel inside root without following it and reports whether it is a symbolic
	// link. rel is slash-separated and clean, and every component but its last is a folder Walk
	// has already looked at (no link). A component that does not exist, or is to be walked past
	// as it is, reports false and no error; any error ends the walk (a hidden path, say). This
	// is where the caller checks every component the walk visits, a link's target included.
	Lstat func(root R, rel string) (link bool, err error)
	// Readlink returns the target of the link rel inside root.
	Readlink func(root R, rel string) (string, error)
	// Absolute places an absolute link target (as Readlink returned it, not cleaned): the root
	// and the slash path inside it where the walk goes on (the rest of the path follows it). It
	// returns an error for a target outside every root the walk may reach.
	Absolute func(target string) (R, string, error)
	// KeepLast leaves a link at the last component unread: the result names the link itself.
	KeepLast bool
}

// Walk resolves rel (slash-separated, relative to root) and returns the root and the clean slash
// path inside it that rel names ("." for the root itself); every link on the way is read and
// replaced by its target (a last one under KeepLast is kept). Empty and "." components are
// skipped; ".." drops the component before it, and is ErrEscapes at the root. A link's target is
// walked in place of the link: a relative one from the link's folder, an absolute one from where
// Absolute places it. On an error the root returned is R's zero value.
func (w *Walker[R]) Walk(root R, rel string) (R, string, error) {
	var zero R
	todo := strings.Split(rel, "/")
	var done []string
	links := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(done) == 0 {
				return zero, "", ErrEscapes
			}
			done = done[:len(done)-1]
			continue
		}
		cand := strings.Join(append(done[:len(done):len(done)], c), "/")
		link, err := w.Lstat(root, cand)
		if err != nil {
			return zero, "", err
		}
		if !link || (w.KeepLast && last(todo)) {
			done = append(done, c)
			continue
		}
		if links++; links > MaxLinks {
			return zero, "", ErrTooManyLinks
		}
		target, err := w.Readlink(root, cand)
		if err != nil {
			return zero, "", err
		}
		if filepath.IsAbs(target) {
			r, trel, err := w.Absolute(target)
			if err != nil {
				return zero, "", err
			}
			root, done = r, nil
			todo = append(strings.Split(trel, "/"), todo...)
			continue
		}
		todo = append(strings.Split(filepath.ToSlash(target), "/"), todo...)
	}
	if len(done) == 0 {
		return root, ".", nil
	}
	return root, strings.Join(done, "/"), nil
}

// last reports whether todo holds nothing but empty and "." components.
func last(todo []string) bool {
	for _, c := range todo {
		if c != "" && c != "." {
			return false
		}
	}
	return true
}
