package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/workspace"
)

// The fs and files groups (seed "fs", "files"): folders for a picker, text search, path chips and
// media tickets. Every path goes through the one confinement point, server/workspace.

type fsHandler struct{ s *Server }
type filesHandler struct{ s *Server }

// Fs returns the fs group's handler.
func (h *handlers) Fs() protocol.FsHandler { return fsHandler{h.s} }

// Files returns the files group's handler.
func (h *handlers) Files() protocol.FilesHandler { return filesHandler{h.s} }

// maxListed bounds fs.list; the search bounds are in the schema's descriptions.
const (
	maxListed        = 5000
	folderSearchTime = 2 * time.Second
	folderSearchMax  = 20000
	textSearchTime   = 3 * time.Second
	maxMediaTickets  = 16
)

// folder resolves an absolute folder inside the roots for the fs group; a path outside the roots
// is refused with the same answer whether it exists or not.
func (s *Server) folder(p, member string) (workspace.Path, error) {
	if strings.ContainsRune(p, 0) {
		return workspace.Path{}, protocol.NewInvalidParamsError(fmt.Sprintf("params/%s: a path cannot hold a NUL character.", member), &protocol.InvalidParamsErrorData{Pointer: "/" + member})
	}
	rp, err := s.ws.Folder(p)
	if err == nil {
		return rp, nil
	}
	if workspace.IsOutside(err) || !filepath.IsAbs(p) {
		return workspace.Path{}, protocol.NewHandlerFailedError(fmt.Sprintf("%q is not a folder inside the workspace roots (%s); pass an absolute folder inside one of them.", p, strings.Join(s.ws.Roots(), ", ")))
	}
	return workspace.Path{}, protocol.NewHandlerFailedError(err.Error())
}

func folderEntry(abs string, link bool) protocol.FolderEntry {
	e := protocol.FolderEntry{Name: filepath.Base(abs), Path: abs}
	if link {
		e.Link = ptr(true)
	}
	return e
}

// List implements fs.list: the roots, or the folders of one folder. A link is listed only when it
// resolves to a folder inside the roots.
func (h fsHandler) List(ctx context.Context, p *protocol.FsListParams) (*protocol.FsListResult, error) {
	res := &protocol.FsListResult{Folders: []protocol.FolderEntry{}}
	if p.Path == nil || *p.Path == "" {
		for _, r := range h.s.ws.Roots() {
			res.Folders = append(res.Folders, folderEntry(r, false))
		}
		return res, nil
	}
	rp, err := h.s.folder(*p.Path, "path")
	if err != nil {
		return nil, err
	}
	dir := rp.Abs()
	res.Path = dir
	if rp.Rel != "." {
		parent := filepath.Dir(dir)
		res.Parent = &parent
	}
	_, des, err := h.s.ws.ReadDir(dir, ".")
	if err != nil {
		return nil, protocol.NewHandlerFailedError(err.Error())
	}
	for _, de := range des {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		switch {
		case de.IsDir():
			res.Folders = append(res.Folders, folderEntry(filepath.Join(dir, de.Name()), false))
		case de.Type()&fs.ModeSymlink != 0:
			// Listed only when it leads to a folder inside the roots.
			if _, err := h.s.ws.Folder(filepath.Join(dir, de.Name())); err == nil {
				res.Folders = append(res.Folders, folderEntry(filepath.Join(dir, de.Name()), true))
			}
		default:
			continue
		}
		if len(res.Folders) >= maxListed {
			res.Truncated = true
			break
		}
	}
	return res, nil
}

// Search implements fs.search: folder names, breadth first, bounded in count, folders visited
// and time.
func (h fsHandler) Search(ctx context.Context, p *protocol.FsSearchParams) (*protocol.FsSearchResult, error) {
	dirs := h.s.ws.Roots()
	if p.Under != nil && *p.Under != "" {
		rp, err := h.s.folder(*p.Under, "under")
		if err != nil {
			return nil, err
		}
		dirs = []string{rp.Abs()}
	}
	limit := 50
	if p.Limit != nil {
		limit = *p.Limit
	}
	if strings.ContainsRune(p.Query, 0) {
		return nil, protocol.NewInvalidParamsError("params/query: a name cannot hold a NUL character.", &protocol.InvalidParamsErrorData{Pointer: "/query"})
	}
	sctx, cancel := context.WithTimeout(ctx, folderSearchTime)
	defer cancel()
	found, truncated, err := h.s.ws.FindFolders(sctx, dirs, p.Query, limit, folderSearchMax)
	if err != nil {
		return nil, protocol.NewHandlerFailedError(err.Error())
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	res := &protocol.FsSearchResult{Folders: make([]protocol.FolderEntry, 0, len(found)), Truncated: truncated}
	for _, f := range found {
		res.Folders = append(res.Folders, folderEntry(f.Abs(), false))
	}
	return res, nil
}

// CreateFolder implements fs.createFolder, when the operator allows it.
func (h fsHandler) CreateFolder(ctx context.Context, p *protocol.FsCreateFolderParams) (*protocol.FolderEntry, error) {
	if !h.s.cfg.AllowCreateFolders {
		return nil, protocol.NewHandlerFailedError("Creating folders is off on this server; its operator can start it with " + h.s.flagHint("--allow-create-folders") + ".")
	}
	clean := filepath.Clean(p.Path)
	name := filepath.Base(clean)
	if !filepath.IsAbs(p.Path) || name == "." || name == ".." || name == string(filepath.Separator) {
		return nil, protocol.NewInvalidParamsError("params/path: pass the absolute path of the new folder inside the workspace roots.", &protocol.InvalidParamsErrorData{Pointer: "/path"})
	}
	if strings.ContainsRune(p.Path, 0) {
		return nil, protocol.NewInvalidParamsError("params/path: a path cannot hold a NUL character.", &protocol.InvalidParamsErrorData{Pointer: "/path"})
	}
	if len(name) > 255 {
		return nil, protocol.NewInvalidParamsError("params/path: a folder name has at most 255 bytes; pick a shorter name.", &protocol.InvalidParamsErrorData{Pointer: "/path"})
	}
	if _, err := h.s.ws.Folder(clean); err == nil {
		return nil, protocol.NewHandlerFailedError(fmt.Sprintf("%q already exists; pick another name.", clean))
	}
	parent, err := h.s.folder(filepath.Dir(clean), "path")
	if err != nil {
		return nil, err
	}
	if _, _, err := h.s.ws.Stat(parent.Abs(), name); err == nil {
		return nil, protocol.NewHandlerFailedError(fmt.Sprintf("%q already exists; pick another name.", clean))
	}
	made, err := h.s.ws.MkdirAll(parent.Abs(), name, 0o755)
	if workspace.IsOutside(err) { // a hidden path (docs/security.md "Hidden paths")
		return nil, protocol.NewHandlerFailedError(fmt.Sprintf("%q is outside the workspace roots (%s); use a path inside them.", clean, strings.Join(h.s.ws.Roots(), ", ")))
	}
	if err != nil {
		return nil, protocol.NewHandlerFailedError(fmt.Sprintf("%q could not be created; check that its parent is a writable folder inside the workspace roots.", clean))
	}
	e := folderEntry(made.Abs(), false)
	return &e, nil
}

// Search implements files.search: RE2 line matches below cwd, honouring .gitignore, bounded.
func (h filesHandler) Search(ctx context.Context, p *protocol.FilesSearchParams) (*protocol.FilesSearchResult, error) {
	_, dir, err := h.s.resolveCwd(p.Cwd)
	if err != nil {
		return nil, err
	}
	expr := p.Pattern
	if p.IgnoreCase != nil && *p.IgnoreCase {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, protocol.NewInvalidParamsError(fmt.Sprintf("params/pattern: not an RE2 regular expression (%v); fix the pattern.", err), &protocol.InvalidParamsErrorData{Pointer: "/pattern"})
	}
	limit := 200
	if p.Limit != nil {
		limit = *p.Limit
	}
	sctx, cancel := context.WithTimeout(ctx, textSearchTime)
	defer cancel()
	ms, truncated, err := h.s.ws.Grep(sctx, dir, re, workspace.GrepOptions{MaxMatches: limit})
	if err != nil {
		return nil, protocol.NewHandlerFailedError(err.Error())
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	res := &protocol.FilesSearchResult{Matches: make([]protocol.TextMatch, 0, len(ms)), Truncated: truncated}
	for _, m := range ms {
		res.Matches = append(res.Matches, protocol.TextMatch{Path: m.Path, Line: m.Line, Text: m.Text})
	}
	return res, nil
}

// ResolvePaths implements files.resolvePaths: which names are files or folders inside the roots.
func (h filesHandler) ResolvePaths(ctx context.Context, p *protocol.FilesResolvePathsParams) (*protocol.FilesResolvePathsResult, error) {
	if len(p.Names) > 500 {
		return nil, protocol.NewInvalidParamsError(fmt.Sprintf("params/names: %d names, at most 500; send them in several calls.", len(p.Names)), &protocol.InvalidParamsErrorData{Pointer: "/names"})
	}
	_, dir, err := h.s.resolveCwd(p.Cwd)
	if err != nil {
		return nil, err
	}
	res := &protocol.FilesResolvePathsResult{Paths: []protocol.ResolvedPath{}}
	for _, name := range p.Names {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		n := strings.TrimSpace(name)
		if n == "" || strings.ContainsRune(n, 0) {
			continue
		}
		rp, fi, err := h.s.ws.Stat(dir, n)
		if err != nil {
			continue
		}
		kind := protocol.PathKindFile
		if fi.IsDir() {
			kind = protocol.PathKindFolder
		} else if !fi.Mode().IsRegular() {
			continue
		}
		res.Paths = append(res.Paths, protocol.ResolvedPath{Name: name, Kind: kind, Path: rp.Abs()})
	}
	return res, nil
}

// MediaTicket implements files.mediaTicket: the ticket is good for GET /zidane/media while this
// connection is open.
func (h filesHandler) MediaTicket(ctx context.Context, p *protocol.FilesMediaTicketParams) (*protocol.FilesMediaTicketResult, error) {
	c := connFrom(ctx)
	if c == nil {
		return nil, protocol.NewHandlerFailedError("Media tickets need a WebSocket connection.")
	}
	if err := h.s.media.register(c, p.Ticket); err != nil {
		return nil, err
	}
	return &protocol.FilesMediaTicketResult{}, nil
}

// files.read bounds (schema/files.json): the default and the most bytes one answer carries.
const (
	readDefaultBytes = 256 << 10
	readMaxBytes     = 1 << 20
)

// Read implements files.read: the start of a text file inside the roots, for a file viewer. The
// file is opened through the workspace's one confinement point; a binary file answers no text.
func (h filesHandler) Read(ctx context.Context, p *protocol.FilesReadParams) (*protocol.FilesReadResult, error) {
	_, dir, err := h.s.resolveCwd(p.Cwd)
	if err != nil {
		return nil, err
	}
	limit := readDefaultBytes
	if p.MaxBytes != nil {
		limit = min(max(*p.MaxBytes, 1), readMaxBytes)
	}
	f, rp, err := h.s.ws.Open(dir, p.Path)
	if err != nil {
		if workspace.IsOutside(err) {
			return nil, protocol.NewHandlerFailedError(fmt.Sprintf("%q is not a file inside the workspace roots (%s); pass a path files.resolvePaths answered.", p.Path, strings.Join(h.s.ws.Roots(), ", ")))
		}
		return nil, protocol.NewHandlerFailedError(fmt.Sprintf("%q cannot be read: %v; pass a file files.resolvePaths answered.", p.Path, err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, protocol.NewHandlerFailedError(fmt.Sprintf("%q cannot be read: %v.", p.Path, err))
	}
	buf := make([]byte, min(int64(limit)+1, max(fi.Size()+1, 8<<10+1)))
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, protocol.NewHandlerFailedError(fmt.Sprintf("%q cannot be read: %v.", p.Path, err))
	}
	data := buf[:n]
	res := &protocol.FilesReadResult{Path: rp.Abs(), Size: fi.Size()}
	if looksBinary(data[:min(len(data), 8<<10)], len(data) > 8<<10) {
		res.Binary = ptr(true)
		res.Truncated = fi.Size() > 0
		return res, nil
	}
	if len(data) > limit {
		data = data[:limit]
		res.Truncated = true
		for len(data) > 0 && !utf8.Valid(data[max(0, len(data)-utf8.UTFMax):]) {
			data = data[:len(data)-1] // cut at a character boundary
		}
	}
	if int64(n) < fi.Size() && !res.Truncated {
		res.Truncated = true // the file grew while it was read
	}
	res.Text = string(data)
	return res, nil
}

// looksBinary reports whether head looks binary: a NUL, or invalid UTF-8 (a rune cut at the end
// of a head that goes on is not counted).
func looksBinary(head []byte, cut bool) bool {
	if bytes.IndexByte(head, 0) >= 0 {
		return true
	}
	if cut {
		for i := 0; i < utf8.UTFMax && len(head) > 0 && !utf8.Valid(head); i++ {
			head = head[:len(head)-1]
		}
	}
	return !utf8.Valid(head)
}
