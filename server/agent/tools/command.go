package tools

import (
	"regexp"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Command is an exec command line as a shell parser (mvdan.cc/sh/v3/syntax, bash dialect) reads
// it. The safelist (runtime cases R20–R23) matches only a line that parses into exactly one simple
// command whose words are all plain literals: anything it cannot prove to be exactly the approved
// program and subcommand asks.
type Command struct {
	// Line is the command line as the model sent it.
	Line string
	// Simple is true when the line is exactly one simple command: no second command of any kind
	// (; && || | & newline, subshells, substitutions, keywords, functions), no redirections, no
	// leading assignments, and only literal words (no $expansions, globs, braces, tildes or
	// backslashes outside single quotes).
	Simple bool
	// Argv holds the words of a Simple command with quotes removed.
	Argv []string
	// Why says why the line is not Simple ("" when it is).
	Why string
}

// ParseCommand parses line. It never fails: a line that does not parse is simply not Simple.
func ParseCommand(line string) *Command {
	c := &Command{Line: line}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(line), "")
	if err != nil {
		c.Why = "the line does not parse as a shell command"
		return c
	}
	if len(f.Stmts) != 1 {
		c.Why = "the line holds more than one command"
		return c
	}
	st := f.Stmts[0]
	switch {
	case st.Negated, st.Background, st.Coprocess, st.Disown:
		c.Why = "the command is negated or runs in the background"
		return c
	case len(st.Redirs) > 0:
		c.Why = "the command redirects input or output"
		return c
	}
	call, ok := st.Cmd.(*syntax.CallExpr)
	if !ok {
		c.Why = "the line is a compound command (a pipe, a list, a subshell, a keyword or a function)"
		return c
	}
	if len(call.Assigns) > 0 {
		c.Why = "the command sets variables"
		return c
	}
	if len(call.Args) == 0 {
		c.Why = "the line holds no command"
		return c
	}
	for _, w := range call.Args {
		s, ok := literal(w)
		if !ok {
			c.Why = "a word of the command is not a plain literal (an expansion, a glob, a substitution or an escape)"
			c.Argv = nil
			return c
		}
		c.Argv = append(c.Argv, s)
	}
	c.Simple = true
	return c
}

// literal returns a word's value when it is made of plain literals only.
func literal(w *syntax.Word) (string, bool) {
	var b strings.Builder
	for _, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			if strings.ContainsAny(p.Value, "\\*?[]{}~") {
				return "", false
			}
			b.WriteString(p.Value)
		case *syntax.SglQuoted:
			if p.Dollar {
				return "", false
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			if p.Dollar {
				return "", false
			}
			for _, q := range p.Parts {
				l, ok := q.(*syntax.Lit)
				if !ok || strings.Contains(l.Value, "\\") {
					return "", false
				}
				b.WriteString(l.Value)
			}
		default:
			return "", false
		}
	}
	return b.String(), true
}

// codeRunners are programs whose arguments (or the workspace's files) decide what code runs:
// shells, interpreters, wrappers that run another program, and package managers that run install
// scripts. `always` never stores a rule for them (it acts as allow once), because "program and
// subcommand" would mean "any code" (runtime case R23).
var codeRunners = setOf(
	// shells
	"sh", "bash", "zsh", "dash", "ksh", "mksh", "fish", "csh", "tcsh", "busybox",
	// interpreters
	"python", "python2", "python3", "pypy", "pypy3", "node", "nodejs", "deno", "bun", "ruby", "irb", "perl", "php",
	"lua", "luajit", "Rscript", "R", "julia", "osascript", "awk", "gawk", "mawk", "nawk", "sed", "tclsh", "wish",
	"java", "jshell", "groovy", "scala", "kotlin", "swift", "dotnet", "pwsh", "powershell", "expect", "jq", "yq", "vim", "vi", "nvim", "emacs", "ed",
	// wrappers
	"env", "sudo", "doas", "su", "runuser", "xargs", "nohup", "timeout", "nice", "ionice", "chrt", "taskset", "stdbuf",
	"setsid", "exec", "eval", "source", ".", "command", "builtin", "time", "watch", "strace", "ltrace", "gdb", "script",
	"unbuffer", "flock", "parallel", "ssh", "chroot", "nsenter", "unshare", "trap", "alias", "declare", "typeset", "export",
	"valgrind", "perf", "ldd", "hyperfine", "entr", "watchexec", "numactl", "prlimit", "setpriv", "capsh", "sg", "newgrp",
	"pkexec", "systemd-run", "run-parts", "start-stop-daemon", "tmux", "screen", "rlwrap", "fakeroot", "bwrap", "firejail",
	"proot", "xvfb-run", "dbus-run-session", "socat", "direnv", "sem", "chronic",
	// schedulers: what they take runs later, outside the sandbox
	"crontab", "at", "batch",
	// package managers and runners of the project's scripts
	"npm", "npx", "yarn", "pnpm", "pip", "pip3", "pipx", "uv", "uvx", "poetry", "gem", "bundle", "composer", "make", "cmake",
	"gmake", "ninja", "just", "task", "rake", "gradle", "mvn", "ant", "sbt", "bazel", "bazelisk", "meson", "scons", "tox",
	"nox", "pytest", "invoke", "pre-commit", "lefthook", "husky", "conda", "mamba", "pixi", "hatch", "pdm", "rye",
)

// subcommandPrograms take a subcommand as their first argument: their safelist key is
// "program subcommand", and a flag before the subcommand (git -c, git -C, git -p) means no key
// and no match (runtime case R22).
var subcommandPrograms = setOf("git", "go", "cargo", "docker", "podman", "kubectl", "helm", "gh", "systemctl",
	"apt", "apt-get", "brew", "rustup", "terraform", "nix", "zig", "deno", "dotnet", "swift", "hg", "svn")

// neverStored are "program subcommand" pairs that change what later commands run (configuration,
// external tools, hooks run on demand): `always` acts as allow once for them.
var neverStored = setOf("git config", "git submodule", "git bisect", "git difftool", "git mergetool", "git filter-branch",
	"git rebase", "git daemon", "git instaweb", "git web--browse", "git archive", "git send-email", "git credential",
	"go run", "go generate", "go tool", "go env", "cargo run", "cargo install", "docker run", "docker exec", "podman run",
	"podman exec", "kubectl exec", "docker compose", "docker build", "podman build", "nix run", "nix shell", "nix develop",
	"nix build", "cargo xtask", "gh extension", "gh alias")

var plainProgram = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._+-]*$`)

func setOf(xs ...string) map[string]bool {
	m := make(map[string]bool, len(xs))
	for _, x := range xs {
		m[x] = true
	}
	return m
}

// SafelistKey returns the entry an `always` answer stores for the command ("git status", "ls"),
// or "" and the reason nothing is stored (the answer then acts as allow once): a line that is not
// one simple command (R20), a shell, interpreter, wrapper or package manager (R23), a program
// given as a path (it may live in the workspace, where the model can rewrite it), a flag before a
// subcommand, an argument naming a path inside .git (R22), or an option the entry's table of safe
// options does not cover (T02: safeOptions; the command itself would not match the entry).
func (c *Command) SafelistKey() (key, why string) {
	if !c.Simple {
		return "", c.Why
	}
	prog := c.Argv[0]
	switch {
	case !plainProgram.MatchString(prog):
		return "", "the program is given as a path (it may be a file the agent can rewrite)"
	case codeRunners[prog]:
		return "", prog + " runs whatever code its arguments or the project's files say"
	}
	for _, a := range c.Argv[1:] {
		if mentionsGitDir(a) {
			return "", "the command names a path inside .git (writes there ask every time)"
		}
	}
	key, args := prog, c.Argv[1:]
	if subcommandPrograms[prog] {
		if len(c.Argv) < 2 || strings.HasPrefix(c.Argv[1], "-") || !plainProgram.MatchString(c.Argv[1]) {
			return "", "an option before " + prog + "'s subcommand decides what it runs"
		}
		key, args = prog+" "+c.Argv[1], c.Argv[2:]
		if neverStored[key] {
			return "", key + " changes or runs other programs"
		}
	}
	if bad := badOption(prog, key, args); bad != "" {
		if !strings.HasPrefix(bad, "-") {
			return "", "the operand " + bad + " names a git remote helper (<transport>::<address>), which runs a program"
		}
		return "", optionWhy(prog, key, bad)
	}
	return key, ""
}

// Matches reports whether the command may run without asking under the safelist entry (a key
// SafelistKey produced): the command must itself produce exactly that key, so every option it
// holds is on the entry's table of safe options.
func (c *Command) Matches(entry string) bool {
	key, _ := c.SafelistKey()
	return key != "" && key == entry
}

// mentionsGitDir reports whether a (an argument, or an option's value after "=") has a path
// component ".git".
func mentionsGitDir(a string) bool {
	for _, part := range strings.FieldsFunc(a, func(r rune) bool { return r == '/' || r == '=' || r == ':' || r == ',' }) {
		if part == ".git" {
			return true
		}
	}
	return false
}
