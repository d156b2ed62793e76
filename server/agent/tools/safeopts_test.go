package tools

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSafeOptionsMatcher: a call matches its entry only when every option is on the entry's
// table, written exactly; values of listed options are consumed (attached or as the next
// argument), words after "--" are operands, short clusters split per getopt.
func TestSafeOptionsMatcher(t *testing.T) {
	for _, c := range []struct {
		line, entry string
		match       bool
		why         string // part of why nothing would be stored ("" when it matches)
	}{
		// the six pairs of case T02 (their first command is stored, the second never matches)
		{"git clone . /ws/c1", "git clone", true, ""},
		{`git clone -u "touch PWNED; git-upload-pack" . /ws/c2`, "git clone", false, "-u"},
		{"git push . HEAD:refs/heads/x", "git push", true, ""},
		{`git push --exe="touch PWNED; git-receive-pack" . HEAD:refs/heads/y`, "git push", false, "may read it as --exec"},
		{"git fetch --dry-run .", "git fetch", true, ""},
		{`git fetch --dry-run --upload-pa="touch PWNED; git-upload-pack" .`, "git fetch", false, "--upload-pack"},
		{"tar -cf t.tar main.go", "tar", true, ""},
		{`tar -cf t2.tar --checkpoint=1 --checkpoint-act="exec=touch PWNED" main.go`, "tar", false, "--checkpoint"},
		{"rsync -a main.go copy.go", "rsync", true, ""},
		{`rsync -e "sh -c 'touch PWNED'" main.go h:x`, "rsync", false, "-e can make rsync run another program"},
		{"go build -o /ws/gomod/out .", "go build", true, ""},
		{"go build -o /ws/gomod/out2 -toolexec=/ws/evil.sh .", "go build", false, "-toolexec"},
		// variants: other abbreviations, short forms, attached values
		{"git clone --upload=x . c", "git clone", false, "--upload-pack"},
		{"git clone --upl x . c", "git clone", false, "--upload-pack"},
		{"git clone -uCMD . c", "git clone", false, "-u"},
		{"git clone -qu CMD . c", "git clone", false, "-u"},
		{"git clone --template=t . c", "git clone", false, "--template"},
		{"git clone -c core.hooksPath=h . c", "git clone", false, "-c"},
		{"git clone --config=core.pager=x . c", "git clone", false, "--config"},
		{"git push --receive-pack=x . HEAD", "git push", false, "--receive-pack"},
		{"git push --rec=x . HEAD", "git push", false, "--receive-pack"},
		{"git fetch --upload-pack x .", "git fetch", false, "--upload-pack"},
		{"git fetch ext::sh", "git fetch", false, "remote helper"},
		{"git ls-remote ext::sh", "git ls-remote", false, "remote helper"},
		{"git ls-remote --upload-pack=x .", "git ls-remote", false, "--upload-pack"},
		{"git ls-remote -q .", "git ls-remote", false, "operands only"},
		{"tar -cf t.tar --to-command=sh a", "tar", false, "--to-command"},
		{"tar -cIsh -f t.tar a", "tar", false, "-I"},
		{"tar -cf t.tar -I sh a", "tar", false, "-I"},
		{"tar --use-compress-program=sh -cf t.tar a", "tar", false, "--use-compress-program"},
		{"tar --use-compress=sh -cf t.tar a", "tar", false, "--use-compress-program"},
		{"tar cfI t.tar sh a", "tar", false, "-I"},
		{"rsync --rsh=sh a h:x", "rsync", false, "--rsh"},
		{"rsync -ae sh a h:x", "rsync", false, "-e"},
		{"rsync --rsync-path=x a h:x", "rsync", false, "--rsync-path"},
		{"go test -exec=/ws/evil.sh ./...", "go test", false, "-exec"},
		{"go vet -vettool=/ws/evil .", "go vet", false, "-vettool"},
		{"go build --toolexec /ws/evil.sh .", "go build", false, "-toolexec"},
		{`go build -ldflags=-extld=/ws/evil .`, "go build", false, "-ldflags"},
		{"find . -name x -exec sh ;", "find", false, "-exec"},
		{"find . -delete", "find", false, "-delete"},
		{"rg --pre ./x y", "rg", false, "--pre"},
		{"rg -z y", "rg", false, "-z"},
		{"sort --compress-program=sh f", "sort", false, "--compress-program"},
		{"git diff --output=../out/victim.txt", "git diff", false, "--output"},
		{"git diff --out=../out/victim.txt", "git diff", false, "--output"},
		{"git log --ext-diff", "git log", false, "--ext-diff"},
		{"git diff --textconv", "git diff", false, "--textconv"},
		{"git grep -O x", "git grep", false, "-O"},
		{"git commit -e -m x", "git commit", false, "-e"},
		{"git log --show-signature", "git log", false, "--show-signature"},
		{"cargo build --target=./evil.json", "cargo build", false, "--target"},
		{"rsync --copy-as=root a b", "rsync", false, "--copy-as"},
		// an unknown option on a program without a table: operands only
		{"cowsay hello", "cowsay", true, ""},
		{"cowsay -f dragon hello", "cowsay", false, "operands only"},
		{"docker ps", "docker ps", true, ""},
		{"docker ps -a", "docker ps", false, "operands only"},
		{"cowsay -- -f", "cowsay", true, ""},
		// safe options, clusters, values, "--"
		{"git status", "git status", true, ""},
		{"git status -sb", "git status", true, ""},
		{"git status -uno --porcelain=v2", "git status", true, ""},
		{"git status --porc", "git status", false, "--porc"},
		{"git log -3 --oneline --format='%h %s' -n 5 -- -x", "git log", true, ""},
		{"git log -n", "git log", false, "-n"},
		{"git diff --stat --cached HEAD", "git diff", true, ""},
		{"git show -s --format=%H", "git show", true, ""},
		{"git push -u origin main", "git push", true, ""},
		{"git commit -am msg", "git commit", true, ""},
		{"git commit -m -x", "git commit", true, ""}, // -x is -m's value
		{"ls -la --color=auto", "ls", true, ""},
		{"ls -laQ", "ls", true, ""},
		{"ls -laZ9", "ls", false, "-9"},
		{"head -20 f", "head", true, ""},
		{"grep -rn -e --exec -- -x .", "grep", true, ""},
		{"tar xzf a.tgz -C out", "tar", true, ""},
		{"tar -xzf a.tgz --strip-components=1", "tar", true, ""},
		{"tar cf", "tar", false, "cf"},
		{"rsync -avz --delete --exclude=.git2 src/ dst/", "rsync", true, ""},
		{"go test -run TestX -count=1 -race ./...", "go test", true, ""},
		{"go build -buildvcs=false -o out .", "go build", true, ""},
		{"find . -name '*.go' -type f -print", "find", true, ""},
		{"find . '(' -name a -o -name b ')' -prune", "find", true, ""},
		{"cp -r a b", "cp", true, ""},
		{"cp a.gitignore b", "cp", true, ""},
	} {
		cmd := ParseCommand(c.line)
		require.True(t, cmd.Simple, c.line)
		assert.Equal(t, c.match, cmd.Matches(c.entry), c.line)
		key, why := cmd.SafelistKey()
		if c.match {
			assert.Equal(t, c.entry, key, c.line)
			assert.Empty(t, why, c.line)
			continue
		}
		assert.Empty(t, key, "always on %q stores nothing", c.line)
		assert.Contains(t, why, c.why, c.line)
	}
}

// TestNeverStoredRunners: programs that run what their operands or the project's files say
// (schedulers, wrappers, build and test runners) store no entry, whatever their arguments.
func TestNeverStoredRunners(t *testing.T) {
	for _, line := range []string{"crontab cron.txt", "at now", "ninja", "pytest", "run-parts scripts", "socat - EXEC:sh",
		"valgrind ./a", "hyperfine x", "ldd ./a", "tmux new sh", "just build", "gradle build", "docker compose up", "nix run",
		"sh -c true", "python3", "env", "xargs", "make", "find", "npm run build"} {
		key, why := ParseCommand(line).SafelistKey()
		if line == "find" {
			assert.Equal(t, "find", key, "find without an action is stored")
			continue
		}
		assert.Empty(t, key, line)
		assert.NotEmpty(t, why, line)
	}
}

// TestSafeOptionsTablesAreWellFormed: every table's names are options of their style.
func TestSafeOptionsTablesAreWellFormed(t *testing.T) {
	for key, tb := range safeOptions {
		for name := range tb.opts {
			assert.Regexp(t, `^--?[A-Za-z0-9.][A-Za-z0-9_-]*$`, name, key)
			if tb.style == styleGNU && !startsLong(name) {
				assert.Len(t, name, 2, "%s: a getopt short option is one letter: %s", key, name)
			}
		}
		prog, _, _ := cut(key)
		for _, r := range runsProgram[prog] {
			_, listed := tb.opts[r]
			if key == "git rev-parse" && r == "--git-dir" || key == "git push" && r == "-u" {
				continue
			}
			assert.False(t, listed, "%s lists %s, which runs another program", key, r)
		}
	}
}

func startsLong(s string) bool { return len(s) > 2 && s[1] == '-' }

func cut(key string) (string, string, bool) {
	for i := 0; i < len(key); i++ {
		if key[i] == ' ' {
			return key[:i], key[i+1:], true
		}
	}
	return key, "", false
}
