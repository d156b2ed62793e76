package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// The command's view (field case T04) is built, not the host less a list: its root is a fresh
// tmpfs holding only the folders it may see, each bound at its own path, so a host unix socket,
// a file or a folder outside them is not there at all, whenever it was made.

// viewHome is the command's HOME: a folder of the view's private /tmp, empty at every start
// (field case T06: nothing one command writes there is read by the next).
const viewHome = "/tmp/home"

// systemDirs are the host folders a view shows read-only when they exist (links, as /bin on a
// merged /usr, are shown as the same links).
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/nix", "/sys"}

// Sizes of the view's private tmpfs folders.
const (
	viewRootOpts = "mode=0755,size=1m,nr_inodes=16384"
	viewTmpOpts  = "mode=1777,size=512m,nr_inodes=131072"
	viewRunOpts  = "mode=0755,size=16m,nr_inodes=4096"
)

type opKind int

const (
	opHide opKind = iota
	opRO
	opRW
)

// viewOp is one step of building the view: bind a host folder (read-only or read-write) or
// cover a path.
type viewOp struct {
	path string
	kind opKind
}

// within reports whether p is dir or lies below it.
func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// viewOps orders the steps: shallow first, covers before binds at the same depth, so a folder
// bound inside a hidden one is shown on top of the cover and a hidden path inside a bound folder
// covers it. A folder already shown by another bind is not bound again (a read-only one inside
// any bind, a read-write one inside a read-write bind); a read-write folder inside a read-only
// one is bound on top.
func viewOps(sp *launchSpec) []viewOp {
	var ops []viewOp
	seen := map[string]bool{}
	for _, h := range sp.Hide {
		ops = append(ops, viewOp{h, opHide})
	}
	for _, w := range sp.Writable {
		if seen[w] || slices.ContainsFunc(sp.Writable, func(o string) bool { return o != w && within(w, o) }) {
			continue
		}
		seen[w] = true
		ops = append(ops, viewOp{w, opRW})
	}
	for _, r := range sp.Readable {
		if seen[r] || slices.ContainsFunc(sp.Writable, func(o string) bool { return within(r, o) }) ||
			slices.ContainsFunc(sp.Readable, func(o string) bool { return o != r && within(r, o) }) {
			continue
		}
		seen[r] = true
		ops = append(ops, viewOp{r, opRO})
	}
	slices.SortStableFunc(ops, func(a, b viewOp) int { return strings.Count(a.path, "/") - strings.Count(b.path, "/") })
	return ops
}

// beneath opens p (absolute, as the view names it) below the view's root fd, following no link
// and leaving the root for nothing; the answer is an O_PATH descriptor.
func beneath(root int, p string, flags uint64) (int, error) {
	rel := strings.TrimLeft(p, "/")
	if rel == "" {
		rel = "."
	}
	return unix.Openat2(root, rel, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW | flags,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS})
}

// ensureDir opens folder p below root, making the folders missing on the way (only possible in
// the view's own tmpfs: a bound folder is read-only or the host's).
func ensureDir(root int, p string) (int, error) {
	fd, err := unix.FcntlInt(uintptr(root), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	for _, c := range strings.Split(strings.Trim(p, "/"), "/") {
		if c == "" {
			continue
		}
		next, err := beneath(fd, c, unix.O_DIRECTORY)
		if errors.Is(err, unix.ENOENT) {
			if err = unix.Mkdirat(fd, c, 0o755); err == nil || errors.Is(err, unix.EEXIST) {
				next, err = beneath(fd, c, unix.O_DIRECTORY)
			}
		}
		unix.Close(fd)
		if err != nil {
			return -1, fmt.Errorf("%s: %w", p, err)
		}
		fd = next
	}
	return fd, nil
}

// ensureTarget opens where the mount tree will go at p below root: a folder for a folder, a file
// (made empty when missing) for anything else.
func ensureTarget(root int, p string, tree int) (int, error) {
	var st unix.Stat_t
	if err := unix.Fstat(tree, &st); err != nil {
		return -1, fmt.Errorf("%s: %w", p, err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return ensureDir(root, p)
	}
	i := strings.LastIndex(p, "/")
	parent, err := ensureDir(root, p[:i])
	if err != nil {
		return -1, err
	}
	defer unix.Close(parent)
	fd, err := unix.Openat(parent, p[i+1:], unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o644)
	if err == nil {
		unix.Close(fd)
	} else if !errors.Is(err, unix.EEXIST) {
		return -1, fmt.Errorf("%s: %w", p, err)
	}
	return beneath(parent, p[i+1:], 0)
}

// fdPath names what an open descriptor refers to, for the calls that take a path.
func fdPath(fd int) string { return fmt.Sprintf("/proc/self/fd/%d", fd) }

// moveTree attaches the detached mount tree at the folder target names.
func moveTree(tree, target int) error {
	return unix.MoveMount(tree, "", target, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
}

// readOnly makes the mount at fd (recursively when rec) read-only.
func readOnly(fd int, rec bool) error {
	flags := unix.AT_EMPTY_PATH
	if rec {
		flags |= unix.AT_RECURSIVE
	}
	return unix.MountSetattr(fd, "", uint(flags), &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY})
}

// pinParents makes each folder between the bound folder holding the hidden path h and h a mount
// of its own (a recursive clone onto itself): rename refuses to move a mount (EBUSY), so a
// command cannot carry a hidden path out from under its hidden name (`mv .config .old`), where
// the server's tools would find it by its new name.
func pinParents(root int, h string, ops []viewOp, keep func(int) int) error {
	var bound string
	for _, o := range ops {
		if o.kind != opHide && within(h, o.path) && len(o.path) > len(bound) {
			bound = o.path
		}
	}
	if bound == "" {
		return nil
	}
	var dirs []string
	for d := filepath.Dir(h); d != bound && within(d, bound); d = filepath.Dir(d) {
		dirs = append(dirs, d)
	}
	for _, d := range slices.Backward(dirs) { // the shallowest first: each clone holds the deeper
		target, err := beneath(root, d, unix.O_DIRECTORY)
		if err != nil {
			return err
		}
		keep(target)
		tree, err := unix.OpenTree(target, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE|unix.AT_EMPTY_PATH)
		if err != nil {
			return err
		}
		keep(tree)
		if err := moveTree(tree, target); err != nil {
			return err
		}
	}
	return nil
}

// buildView makes the command's root: a tmpfs on sp.Stage holding the folders of sp.Readable
// (read-only) and sp.Writable (read-write) at their own paths, sp.Links, a fresh /proc, a minimal
// /dev, a private /tmp (with the empty HOME) and /run; sp.Hide covered, each of sp.GitDirs
// read-only again, sp.Sockets covered; then pivots into it and lets the host's tree go. Every
// path is resolved below the new root without following links, so nothing a command wrote in a
// root can aim a mount elsewhere. The mounts are private to the sandbox's mount namespace; the
// command, holding no capability and confined by Landlock, cannot undo them.
func buildView(sp *launchSpec) error {
	if sp.Stage == "" {
		return errors.New("no stage folder")
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %w", err)
	}
	var fds []int
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	keep := func(fd int) int { fds = append(fds, fd); return fd }
	// Clones of what the view shows, taken before anything is covered.
	ops := viewOps(sp)
	trees := map[string]int{}
	for _, o := range ops {
		if o.kind == opHide {
			continue
		}
		fd, err := unix.OpenTree(unix.AT_FDCWD, o.path, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE|unix.AT_SYMLINK_NOFOLLOW)
		if err != nil {
			return fmt.Errorf("%s: %w", o.path, err)
		}
		keep(fd)
		if o.kind == opRO {
			if err := readOnly(fd, true); err != nil {
				return fmt.Errorf("read-only %s: %w", o.path, err)
			}
		}
		trees[o.path] = fd
	}
	devs := map[string]int{}
	for _, d := range []string{"null", "zero", "full", "random", "urandom", "tty"} {
		if fd, err := unix.Open("/dev/"+d, unix.O_PATH|unix.O_CLOEXEC, 0); err == nil {
			devs[d] = keep(fd)
		}
	}
	if _, ok := devs["null"]; !ok {
		return errors.New("no /dev/null")
	}
	// A command on a host terminal (a project terminal) keeps that terminal, and only it.
	ttys := map[string]int{}
	for fd := 0; fd < 3; fd++ {
		name, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
		if err != nil || !strings.HasPrefix(name, "/dev/pts/") || strings.Contains(name[len("/dev/pts/"):], "/") {
			continue
		}
		if _, ok := ttys[name[len("/dev/"):]]; ok {
			continue
		}
		if h, err := unix.Open(name, unix.O_PATH|unix.O_CLOEXEC, 0); err == nil {
			ttys[name[len("/dev/"):]] = keep(h)
		}
	}

	// The new root, and what every view has.
	if err := unix.Mount("tmpfs", sp.Stage, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, viewRootOpts); err != nil {
		return fmt.Errorf("root: %w", err)
	}
	root, err := unix.Open(sp.Stage, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("root: %w", err)
	}
	keep(root)
	at := fdPath(root)
	for _, d := range []string{"proc", "dev", "tmp", "run"} {
		if err := unix.Mkdirat(root, d, 0o755); err != nil {
			return fmt.Errorf("/%s: %w", d, err)
		}
	}
	if err := unix.Mount("proc", at+"/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("/proc: %w", err)
	}
	if err := minimalDev(at, devs, ttys); err != nil {
		return fmt.Errorf("/dev: %w", err)
	}
	if err := unix.Mount("tmpfs", at+"/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, viewTmpOpts); err != nil {
		return fmt.Errorf("/tmp: %w", err)
	}
	if err := os.Mkdir(at+viewHome, 0o700); err != nil {
		return fmt.Errorf("home: %w", err)
	}
	if err := unix.Mount("tmpfs", at+"/run", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, viewRunOpts); err != nil {
		return fmt.Errorf("/run: %w", err)
	}

	if sp.Self != "" {
		if !strings.HasPrefix(sp.Self, "/run/") || strings.Count(sp.Self, "/") != 2 {
			return fmt.Errorf("self %s: not a file of /run", sp.Self)
		}
		// By its path: /proc/self/exe names a mount of the server's namespace, which cannot be
		// cloned from this one.
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("self: %w", err)
		}
		f, err := os.OpenFile(at+sp.Self, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o555)
		if err != nil {
			return fmt.Errorf("self: %w", err)
		}
		f.Close()
		tree, err := unix.OpenTree(unix.AT_FDCWD, exe, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if err != nil {
			return fmt.Errorf("self: clone: %w", err)
		}
		keep(tree)
		if err := readOnly(tree, false); err != nil {
			return fmt.Errorf("self: read-only: %w", err)
		}
		target, err := beneath(root, sp.Self, 0)
		if err != nil {
			return fmt.Errorf("self: %w", err)
		}
		keep(target)
		if err := moveTree(tree, target); err != nil {
			return fmt.Errorf("self: %w", err)
		}
	}
	var covers []string
	for _, o := range ops {
		if o.kind != opHide {
			target, err := ensureTarget(root, o.path, trees[o.path])
			if err != nil {
				return fmt.Errorf("show %w", err)
			}
			keep(target)
			if err := moveTree(trees[o.path], target); err != nil {
				return fmt.Errorf("show %s: %w", o.path, err)
			}
			continue
		}
		target, err := beneath(root, o.path, 0)
		if err != nil {
			continue // not in the view (or not as the server resolved it): nothing to cover
		}
		keep(target)
		var st unix.Stat_t
		if err := unix.Fstat(target, &st); err != nil {
			return fmt.Errorf("hide %s: %w", o.path, err)
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			if err := unix.Mount("tmpfs", fdPath(target), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0700,size=64k,nr_inodes=256"); err != nil {
				return fmt.Errorf("hide %s: %w", o.path, err)
			}
			covers = append(covers, o.path)
		} else if err := bindFD(devs["null"], fdPath(target), false); err != nil {
			return fmt.Errorf("hide %s: %w", o.path, err)
		}
		if err := pinParents(root, o.path, ops, keep); err != nil {
			return fmt.Errorf("hide %s: %w", o.path, err)
		}
	}
	for _, g := range sp.GitDirs {
		target, err := beneath(root, g, 0)
		if errors.Is(err, unix.ENOENT) {
			continue // gone, or under a cover
		}
		if err != nil {
			return fmt.Errorf(".git %s: %w", g, err)
		}
		keep(target)
		tree, err := unix.OpenTree(target, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE|unix.AT_EMPTY_PATH)
		if err != nil {
			return fmt.Errorf(".git %s: %w", g, err)
		}
		keep(tree)
		if err := readOnly(tree, true); err != nil {
			return fmt.Errorf(".git %s: %w", g, err)
		}
		if err := moveTree(tree, target); err != nil {
			return fmt.Errorf(".git %s: %w", g, err)
		}
	}
	for _, s := range sp.Sockets {
		target, err := beneath(root, s, 0)
		if err != nil {
			continue
		}
		keep(target)
		var st unix.Stat_t
		if unix.Fstat(target, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFSOCK {
			if err := bindFD(devs["null"], fdPath(target), false); err != nil {
				return fmt.Errorf("cover socket %s: %w", s, err)
			}
		}
	}
	links := map[string]string{"/var/tmp": "/tmp", "/var/run": "/run"}
	for p, target := range sp.Links {
		links[p] = target
	}
	for p, target := range links {
		parent, name := p[:strings.LastIndex(p, "/")], p[strings.LastIndex(p, "/")+1:]
		dir, err := ensureDir(root, parent)
		if err != nil {
			return fmt.Errorf("link %w", err)
		}
		keep(dir)
		if err := unix.Symlinkat(target, dir, name); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("link %s: %w", p, err)
		}
	}
	for _, c := range covers {
		fd, err := beneath(root, c, 0)
		if err != nil {
			return fmt.Errorf("read-only cover %s: %w", c, err)
		}
		keep(fd)
		if err := readOnly(fd, false); err != nil {
			return fmt.Errorf("read-only cover %s: %w", c, err)
		}
	}
	if err := readOnly(root, false); err != nil {
		return fmt.Errorf("read-only root: %w", err)
	}
	// Into the view; the host's tree is let go.
	if err := unix.Fchdir(root); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the host's root: %w", err)
	}
	return unix.Chdir("/")
}

// bindFD bind-mounts what fd names onto target (recursively when rec).
func bindFD(fd int, target string, rec bool) error {
	flags := uintptr(unix.MS_BIND)
	if rec {
		flags |= unix.MS_REC
	}
	return unix.Mount(fdPath(fd), target, "", flags, "")
}

// bindOnNewFile makes the file p and binds what fd names onto it.
func bindOnNewFile(fd int, p string, mode os.FileMode) error {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	f.Close()
	if err := bindFD(fd, p, false); err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	return nil
}

// minimalDev makes root's /dev a tmpfs holding only the harmless devices, a private devpts (or,
// for a command on a host terminal, that terminal alone) and a private /dev/shm: no disk, no
// memory device, no other terminal of the host.
func minimalDev(root string, devs, ttys map[string]int) error {
	dev := root + "/dev"
	if err := unix.Mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=64k,nr_inodes=256"); err != nil {
		return err
	}
	for name, fd := range devs {
		if err := bindOnNewFile(fd, dev+"/"+name, 0o666); err != nil {
			return err
		}
	}
	for _, d := range []string{"/pts", "/shm"} {
		if err := os.Mkdir(dev+d, 0o755); err != nil {
			return err
		}
	}
	if len(ttys) == 0 {
		if err := unix.Mount("devpts", dev+"/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
			return fmt.Errorf("devpts: %w", err)
		}
	} else {
		if err := unix.Mount("tmpfs", dev+"/pts", "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=16k,nr_inodes=64"); err != nil {
			return fmt.Errorf("pts: %w", err)
		}
		for name, fd := range ttys {
			if err := bindOnNewFile(fd, dev+"/"+name, 0o620); err != nil {
				return err
			}
		}
	}
	if err := unix.Mount("tmpfs", dev+"/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777,size=64m"); err != nil {
		return fmt.Errorf("shm: %w", err)
	}
	for link, target := range map[string]string{"/ptmx": "pts/ptmx", "/fd": "/proc/self/fd",
		"/stdin": "/proc/self/fd/0", "/stdout": "/proc/self/fd/1", "/stderr": "/proc/self/fd/2"} {
		if err := os.Symlink(target, dev+link); err != nil {
			return err
		}
	}
	return unix.MountSetattr(-1, dev, 0, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY})
}
