package tools

import (
	"strings"
)

// The safelist allows what it knows (turn-3 case T02): a stored entry ("git clone", "tar") covers
// a later call only when every option of the call is on the entry's table of safe options below,
// written exactly (no abbreviation, even where the program accepts a unique prefix). A program or
// subcommand without a table covers calls with operands only. Arguments after "--" are operands.

// optArg says whether a safe option takes a value.
type optArg uint8

const (
	// argNone: a flag; a value attached to it ("--stat=x") means no match (Go-style bool flags
	// accept "=true"/"=false").
	argNone optArg = iota
	// argRequired: takes a value, attached ("-fX", "--file=X") or as the next argument.
	argRequired
	// argOptional: may take a value, attached only ("--porcelain=v2", "-uno").
	argOptional
)

// optStyle is how a program reads its options.
type optStyle uint8

const (
	// styleGNU is getopt_long (and git's parse-options): "-abc" is a cluster of short options (a
	// short option taking a value takes the rest of the cluster or the next argument), "--name"
	// and "--name=value" are long options; options may follow operands.
	styleGNU optStyle = iota
	// styleGo is Go's flag package: "-name", "--name", "-name=value", no clusters.
	styleGo
	// styleFind is find's expression: each word starting with "-" is one primary, whole.
	styleFind
)

// optTable is the safe options of one program or "program subcommand".
type optTable struct {
	style optStyle
	// numeric: "-<digits>" is accepted (head -5, git log -3, grep -2).
	numeric bool
	// oldTar: a first argument without a leading "-" is a cluster of short options whose values
	// are the following arguments in order (tar cf x.tar ...).
	oldTar bool
	opts   map[string]optArg
}

// table parses a spec: names separated by spaces, a trailing ":" for a value, "::" for an
// optional attached value.
func table(style optStyle, spec ...string) *optTable {
	t := &optTable{style: style, opts: map[string]optArg{}}
	for _, s := range spec {
		for _, name := range strings.Fields(s) {
			switch {
			case strings.HasSuffix(name, "::"):
				t.opts[strings.TrimSuffix(name, "::")] = argOptional
			case strings.HasSuffix(name, ":"):
				t.opts[strings.TrimSuffix(name, ":")] = argRequired
			default:
				t.opts[name] = argNone
			}
		}
	}
	return t
}

func (t *optTable) withNumeric() *optTable { t.numeric = true; return t }

func (t *optTable) withOldTar() *optTable { t.oldTar = true; return t }

// Shared option sets of git's diff family (log, show, diff): output formats only; --output,
// --ext-diff, --textconv and their kin are not here.
const (
	gitDiffOpts = "-p -u --patch -s --no-patch -U: --unified: --raw --patch-with-raw --stat:: --shortstat --numstat " +
		"--dirstat:: --summary --name-only --name-status --compact-summary -z --color:: --no-color --word-diff:: " +
		"--color-words:: --no-ext-diff --no-textconv --check --full-index --binary --abbrev:: --no-abbrev -M:: " +
		"--find-renames:: -C:: --find-copies:: -B:: --break-rewrites:: -D --irreversible-delete -l: -R --relative:: " +
		"--no-relative -a --text -w --ignore-all-space -b --ignore-space-change --ignore-space-at-eol " +
		"--ignore-blank-lines --ignore-cr-at-eol -W --function-context --diff-filter: --minimal --patience " +
		"--histogram --diff-algorithm: --indent-heuristic --no-indent-heuristic --src-prefix: --dst-prefix: " +
		"--no-prefix --default-prefix --no-renames --exit-code --quiet --ita-invisible-in-index -S: -G: " +
		"--pickaxe-all --pickaxe-regex --inter-hunk-context: --submodule:: --ignore-submodules::"
	gitLogOpts = "-n: --max-count: --skip: --since: --after: --until: --before: --author: --committer: --grep: " +
		"--all-match --invert-grep -i --regexp-ignore-case -E --extended-regexp -F --fixed-strings -P --perl-regexp " +
		"--oneline --format: --pretty:: --abbrev-commit --no-abbrev-commit --graph --decorate:: --no-decorate " +
		"--all --branches:: --tags:: --remotes:: --reverse --first-parent --merges --no-merges --min-parents: " +
		"--max-parents: --follow --date: --relative-date --topo-order --date-order --author-date-order " +
		"--left-right --cherry-pick --cherry-mark --cherry --boundary --simplify-by-decoration --full-history " +
		"--ancestry-path --source --mailmap --no-mailmap --use-mailmap --walk-reflogs -g -L: -c --cc -m " +
		"--diff-merges: --no-diff-merges --remerge-diff --full-diff --log-size --parents --children --no-walk:: " +
		"--do-walk --encoding: --expand-tabs:: --no-expand-tabs --notes:: --no-notes --name-status --count"
)

// safeOptions holds the tables by "program subcommand" (for the programs with subcommands) or by
// program. Options that write elsewhere or run another program (git's --output, --ext-diff,
// --textconv, --upload-pack, --receive-pack, --exec, clone's -u, --template, --config; tar's
// --to-command, -I, --use-compress-program, --checkpoint-action, --info-script; rsync's -e/--rsh,
// --rsync-path; go's -toolexec, -exec, -vettool, -ldflags, -overlay; find's -exec, -ok, -delete,
// -fprint; rg's --pre, -z; sort's --compress-program; pagers and editors) are on no table.
var safeOptions = map[string]*optTable{
	"git status": table(styleGNU, "-s --short -b --branch --porcelain:: --long -v --verbose -u:: --untracked-files:: ",
		"--ignored:: --ignore-submodules:: -z --column:: --no-column --ahead-behind --no-ahead-behind --show-stash ",
		"--renames --no-renames --find-renames::"),
	"git log":      table(styleGNU, gitDiffOpts, gitLogOpts).withNumeric(),
	"git show":     table(styleGNU, gitDiffOpts, gitLogOpts).withNumeric(),
	"git diff":     table(styleGNU, gitDiffOpts, "--cached --staged --merge-base --no-index"),
	"git rev-list": table(styleGNU, gitLogOpts, "--objects --all --not --quiet").withNumeric(),
	"git shortlog": table(styleGNU, "-s --summary -n --numbered -e --email -c --committer --all --no-merges "+
		"--since: --until: --author: --format: -w::").withNumeric(),
	"git branch": table(styleGNU, "-a --all -r --remotes -v --verbose -l --list --show-current --contains: "+
		"--no-contains: --merged: --no-merged: --sort: --format: --points-at: -d --delete -D -m --move -M -c --copy "+
		"-C -f --force -u: --set-upstream-to: --unset-upstream -t --track:: --no-track --column:: --no-column "+
		"--color:: --no-color --abbrev:: --no-abbrev -q --quiet -i --ignore-case --omit-empty"),
	"git add": table(styleGNU, "-A --all --no-all -u --update -v --verbose -n --dry-run -f --force -N "+
		"--intent-to-add --ignore-removal --no-ignore-removal --refresh --ignore-errors --ignore-missing "+
		"--renormalize --sparse --chmod:"),
	"git commit": table(styleGNU, "-m: --message: -F: --file: -a --all --amend --no-edit -q --quiet "+
		"--allow-empty --allow-empty-message -s --signoff --no-signoff --author: --date: -n --no-verify "+
		"--only -o --include -i --dry-run --short --porcelain --long -z --no-gpg-sign --reset-author "+
		"--untracked-files:: -u:: --no-status --status --cleanup:"),
	"git checkout": table(styleGNU, "-b: -B: -f --force -q --quiet --detach -t --track:: --no-track --ours "+
		"--theirs -m --merge --orphan: --no-overlay --overlay --ignore-other-worktrees --progress --no-progress"),
	"git switch": table(styleGNU, "-c: --create: -C: --force-create: --detach -f --force --discard-changes -q "+
		"--quiet -t --track:: --no-track --orphan: -m --merge --guess --no-guess --progress --no-progress "+
		"--ignore-other-worktrees"),
	"git restore": table(styleGNU, "-s: --source: -S --staged -W --worktree -q --quiet --ours --theirs -m "+
		"--merge --overlay --no-overlay --ignore-unmerged --progress --no-progress"),
	"git stash": table(styleGNU, "-u --include-untracked --no-include-untracked -k --keep-index --no-keep-index "+
		"-m: --message: -q --quiet --index -a --all --staged -S"),
	"git tag": table(styleGNU, "-l --list -n:: --sort: --contains: --no-contains: --merged: --no-merged: "+
		"--points-at: --format: -m: --message: -a --annotate -d --delete -f --force --column:: --no-column "+
		"-i --ignore-case --no-sign --color::"),
	"git fetch": table(styleGNU, "--dry-run -q --quiet -v --verbose --all -p --prune -P --prune-tags -t --tags "+
		"-n --no-tags --depth: --deepen: --shallow-since: --shallow-exclude: --unshallow --update-shallow "+
		"-f --force --progress --no-progress -a --append --atomic -j: --jobs: --no-recurse-submodules "+
		"--filter: --set-upstream --refetch --multiple --no-write-fetch-head --write-fetch-head --ipv4 -4 --ipv6 -6 "+
		"--no-show-forced-updates --show-forced-updates --porcelain --prefetch -k --keep"),
	"git pull": table(styleGNU, "--ff-only --ff --no-ff --no-rebase -q --quiet -v --verbose --no-edit --commit "+
		"--no-commit --squash --no-squash --depth: --shallow-since: --unshallow --tags -t --no-tags --all -p "+
		"--prune --progress --no-progress --no-recurse-submodules --autostash --no-autostash --stat -n --no-stat "+
		"--dry-run -4 -6 --ipv4 --ipv6 --set-upstream -j: --jobs:"),
	"git push": table(styleGNU, "-n --dry-run -q --quiet -v --verbose --tags --all --branches --mirror "+
		"--follow-tags --no-follow-tags -u --set-upstream -f --force --force-with-lease:: --no-force-with-lease "+
		"--force-if-includes --no-force-if-includes -d --delete --no-verify --verify --atomic --no-atomic "+
		"--prune --porcelain --progress --no-progress --no-signed --no-recurse-submodules -4 -6 --ipv4 --ipv6 "+
		"--no-thin --thin"),
	"git clone": table(styleGNU, "--depth: -b: --branch: --single-branch --no-single-branch --no-tags --tags "+
		"--bare --mirror -q --quiet -v --verbose --progress --no-progress -o: --origin: --shallow-since: "+
		"--shallow-exclude: --filter: --also-filter-submodules --sparse -n --no-checkout -l --local --no-local "+
		"--no-hardlinks --no-reject-shallow --reject-shallow --revision: -4 -6 --ipv4 --ipv6 -j: --jobs: "+
		"--no-recurse-submodules --dissociate"),
	"git remote": table(styleGNU, "-v --verbose -t: -m: --tags --no-tags -f --push --add --delete --all -n "+
		"--dry-run"),
	"git rev-parse": table(styleGNU, "--show-toplevel --abbrev-ref:: --short:: --verify -q --quiet --git-dir "+
		"--absolute-git-dir --git-common-dir --is-inside-work-tree --is-inside-git-dir --is-bare-repository "+
		"--is-shallow-repository --show-prefix --show-cdup --symbolic --symbolic-full-name --all --branches:: "+
		"--tags:: --remotes:: --show-object-format:: --default: --sq --not --revs-only --no-revs --flags "+
		"--no-flags --show-superproject-working-tree --path-format: --git-path:"),
	"git ls-files": table(styleGNU, "-c --cached -m --modified -o --others -d --deleted -i --ignored "+
		"--exclude-standard -z -s --stage --full-name --error-unmatch -u --unmerged -k --killed -t -v -f "+
		"--directory --no-empty-directory --eol --deduplicate -x: --exclude: -X: --exclude-from: --abbrev:: "+
		"--format: --sparse --debug"),
	"git blame": table(styleGNU, "-L: -w -M:: -C:: -e --show-email -s -l -t -f --show-name -n --show-number "+
		"-p --porcelain --line-porcelain --incremental --date: --root --show-stats -b --abbrev:: --color-lines "+
		"--color-by-age --progress --no-progress --since: --first-parent --reverse: --ignore-rev: -c --score-debug"),
	"git grep": table(styleGNU, "-n --line-number -i --ignore-case -w --word-regexp -v --invert-match -l "+
		"--files-with-matches --name-only -L --files-without-match -c --count -E --extended-regexp -G "+
		"--basic-regexp -F --fixed-strings -P --perl-regexp -e: -f: -h -H --full-name --cached --untracked "+
		"--no-index --no-exclude-standard --exclude-standard -r --recursive --no-recursive --max-depth: -A: "+
		"--after-context: -B: --before-context: -C: --context: -o --only-matching -q --quiet -z --null --heading "+
		"--break -p --show-function -W --function-context --all-match --and --or --not -I -a --text --threads: "+
		"--color:: --no-color --column -m: --max-count:").withNumeric(),
	"git merge": table(styleGNU, "--ff-only --ff --no-ff --abort --continue --quit -m: -F: --file: --no-edit "+
		"-q --quiet -v --verbose --squash --no-squash --commit --no-commit --stat -n --no-stat --log:: --no-log "+
		"--autostash --no-autostash --allow-unrelated-histories --no-verify --progress --no-progress --signoff "+
		"--no-signoff --no-gpg-sign --no-overwrite-ignore --overwrite-ignore --cleanup:"),
	"git cherry-pick": table(styleGNU, "-n --no-commit -x -m: --mainline: --no-edit -s --signoff --abort "+
		"--continue --skip --quit --ff --allow-empty --allow-empty-message --keep-redundant-commits "+
		"--empty: --no-gpg-sign --cleanup:"),
	"git revert": table(styleGNU, "-n --no-commit -m: --mainline: --no-edit -s --signoff --abort --continue "+
		"--skip --quit --no-gpg-sign --reference --cleanup:"),
	"git reset": table(styleGNU, "--soft --mixed --hard --merge --keep -q --quiet --no-refresh --refresh -N "+
		"--intent-to-add --no-recurse-submodules"),
	"git mv": table(styleGNU, "-f --force -k -n --dry-run -v --verbose"),
	"git rm": table(styleGNU, "--cached -r -f --force -q --quiet -n --dry-run --ignore-unmatch --sparse"),
	"git init": table(styleGNU, "-q --quiet -b: --initial-branch: --bare --shared:: --object-format: "+
		"--ref-format:"),
	"git clean": table(styleGNU, "-n --dry-run -f --force -d -x -X -q --quiet -e: --exclude:"),
	"git describe": table(styleGNU, "--tags --always --abbrev:: --dirty:: --broken:: --long --exact-match "+
		"--all --contains --match: --exclude: --first-parent --candidates:"),
	"git show-ref": table(styleGNU, "--head --tags --branches --heads -d --dereference -s --hash:: --abbrev:: "+
		"--verify -q --quiet --exists --exclude-existing::"),
	"git for-each-ref": table(styleGNU, "--format: --sort: --count: --contains:: --no-contains:: --merged:: "+
		"--no-merged:: --points-at: --shell --perl --python --tcl --exclude: --include-root-refs --omit-empty "+
		"--ignore-case"),
	"git cat-file": table(styleGNU, "-p -t -s -e --batch:: --batch-check:: --batch-command:: "+
		"--batch-all-objects -z -Z --unordered --buffer --follow-symlinks --allow-unknown-type --use-mailmap "+
		"--no-use-mailmap"),
	"git reflog": table(styleGNU, gitLogOpts, "--all").withNumeric(),
	"git apply": table(styleGNU, "--check --stat --numstat --summary -R --reverse -3 --3way --index --cached "+
		"-p: -C: -v --verbose -q --quiet --whitespace: --ignore-whitespace --ignore-space-change --recount "+
		"--allow-empty --reject --intent-to-add -N -z --unidiff-zero --include: --exclude: --directory:"),
	"git count-objects": table(styleGNU, "-v --verbose -H --human-readable"),
	"git worktree":      table(styleGNU, "-v --verbose --porcelain -z --expire: -n --dry-run"),

	"ls": table(styleGNU, "-a --all -A --almost-all -b --escape -B --ignore-backups -c -C -d --directory -D "+
		"--dired -f -F --classify:: --file-type -g -G --no-group -h --human-readable --si -H -i --inode -I: "+
		"--ignore: --hide: -k --kibibytes -l -L --dereference -m -n --numeric-uid-gid -N --literal -o -p "+
		"--indicator-style: -q --hide-control-chars --show-control-chars -Q --quote-name --quoting-style: -r "+
		"--reverse -R --recursive -s --size -S --sort: -t --time: --time-style: -T: --tabsize: -u -U -v -w: "+
		"--width: -x -X -Z --context -1 --color:: --colour:: --group-directories-first --full-time --author "+
		"--block-size: --hyperlink:: --format:"),
	"cat": table(styleGNU, "-A --show-all -b --number-nonblank -e -E --show-ends -n --number -s "+
		"--squeeze-blank -t -T --show-tabs -u -v --show-nonprinting"),
	"head": table(styleGNU, "-n: --lines: -c: --bytes: -q --quiet --silent -v --verbose -z --zero-terminated").withNumeric(),
	"tail": table(styleGNU, "-n: --lines: -c: --bytes: -q --quiet --silent -v --verbose -z --zero-terminated "+
		"-f --follow:: -F --retry --pid: -s: --sleep-interval: --max-unchanged-stats:").withNumeric(),
	"wc": table(styleGNU, "-c --bytes -m --chars -l --lines -w --words -L --max-line-length --total:"),
	"grep": table(styleGNU, "-E --extended-regexp -F --fixed-strings -G --basic-regexp -P --perl-regexp "+
		"-e: --regexp: -f: --file: -i --ignore-case --no-ignore-case -w --word-regexp -x --line-regexp -y "+
		"-s --no-messages -v --invert-match -V --version --help -m: --max-count: -b --byte-offset "+
		"-n --line-number --line-buffered -H --with-filename -h --no-filename --label: -o --only-matching "+
		"-q --quiet --silent --binary-files: -a --text -I -d: --directories: -D: --devices: -r --recursive -R "+
		"--dereference-recursive --include: --exclude: --exclude-from: --exclude-dir: -L "+
		"--files-without-match -l --files-with-matches -c --count -T --initial-tab -Z --null -z --null-data "+
		"-A: --after-context: -B: --before-context: -C: --context: --color:: --colour:: -U --binary "+
		"--group-separator: --no-group-separator").withNumeric(),
	"rg": table(styleGNU, "-e: --regexp: -f: --file: -i --ignore-case -S --smart-case -s --case-sensitive "+
		"-w --word-regexp -x --line-regexp -v --invert-match -F --fixed-strings -l --files-with-matches "+
		"--files-without-match -c --count --count-matches -o --only-matching -q --quiet -n --line-number -N "+
		"--no-line-number -H --with-filename -I --no-filename --heading --no-heading --column --no-column "+
		"-g: --glob: --iglob: -t: --type: -T: --type-not: --type-list -A: --after-context: -B: "+
		"--before-context: -C: --context: -m: --max-count: -d: --max-depth: --maxdepth: -u --unrestricted "+
		"-. --hidden --no-hidden --no-ignore --no-ignore-vcs --no-ignore-dot --no-ignore-parent "+
		"--no-ignore-global --no-ignore-exclude --no-ignore-files --files --json --no-json --vimgrep -L "+
		"--follow --no-follow -0 --null -U --multiline --multiline-dotall -P --pcre2 --no-pcre2 --trim "+
		"--no-trim --stats --no-stats --sort: --sortr: -r: --replace: -j: --threads: -M: --max-columns: "+
		"--max-columns-preview --max-filesize: --color: --colors: -p --pretty -a --text --binary --no-binary "+
		"--no-messages --no-config --passthru --one-file-system --engine: -E: --encoding: --crlf --no-crlf "+
		"--null-data --line-buffered --block-buffered --debug --trace --include-zero --context-separator: "+
		"--field-match-separator: --field-context-separator: -b --byte-offset --glob-case-insensitive "+
		"--ignore-file-case-insensitive -V --version -h --help"),
	"find": table(styleFind, "-H -L -P -name: -iname: -path: -ipath: -wholename: -iwholename: -regex: "+
		"-iregex: -regextype: -type: -xtype: -maxdepth: -mindepth: -mtime: -mmin: -atime: -amin: -ctime: "+
		"-cmin: -newer: -anewer: -cnewer: -size: -perm: -user: -group: -uid: -gid: -links: -inum: -samefile: "+
		"-lname: -ilname: -fstype: -used: -empty -readable -writable -executable -print -print0 -printf: -ls "+
		"-prune -quit -not -a -and -o -or -true -false -depth -d -xdev -mount -noleaf -follow -nouser "+
		"-nogroup -daystart -ignore_readdir_race -noignore_readdir_race"),
	"tar": table(styleGNU, "-c --create -x --extract --get -t --list "+
		"-r --append -u --update -d --diff --compare -f: --file: -z --gzip --gunzip --ungzip -j --bzip2 -J "+
		"--xz --zstd --lzip --lzma -a --auto-compress -v --verbose -C: --directory: --exclude: "+
		"--exclude-vcs --exclude-vcs-ignores --exclude-backups --exclude-caches -X: --exclude-from: -T: "+
		"--files-from: --null --no-null --strip-components: -k --keep-old-files --keep-newer-files "+
		"--skip-old-files --overwrite --no-overwrite-dir --overwrite-dir -m --touch --no-same-owner "+
		"--same-owner --no-same-permissions -p --preserve-permissions --same-permissions -o -O --to-stdout "+
		"-h --dereference --hard-dereference -W --verify --totals:: --numeric-owner --owner: --group: "+
		"--mode: --mtime: --sort: --wildcards --no-wildcards --anchored --no-anchored --recursion "+
		"--no-recursion --one-file-system --show-transformed-names -s --preserve-order --same-order "+
		"--format: -H: -b: --blocking-factor: -B --read-full-records -i --ignore-zeros -S --sparse "+
		"--warning: --force-local --no-acls --no-xattrs --no-selinux --acls --xattrs --delay-directory-restore "+
		"--no-delay-directory-restore --unlink-first -U --recursive-unlink --remove-files -l "+
		"--check-links --label: -V: -n --seek --no-seek --full-time --utc --backup:: --suffix:").withOldTar(),
	"rsync": table(styleGNU, "-v --verbose -q --quiet -c --checksum -a --archive -r --recursive -R --relative "+
		"--no-implied-dirs -b --backup --backup-dir: --suffix: -u --update --inplace --append --append-verify "+
		"-d --dirs --mkpath -l --links -L --copy-links --copy-unsafe-links --safe-links --munge-links -k "+
		"--copy-dirlinks -K --keep-dirlinks -H --hard-links -p --perms -E --executability --chmod: -A --acls "+
		"-X --xattrs -o --owner -g --group --devices --specials -D -t --times -U --atimes -O --omit-dir-times "+
		"-J --omit-link-times --super --fake-super -S --sparse --preallocate -n --dry-run -W --whole-file "+
		"--no-whole-file -x --one-file-system -B: --block-size: --existing --ignore-existing --remove-source-files "+
		"--delete --delete-before --delete-during --delete-delay --delete-after --delete-excluded "+
		"--ignore-missing-args --delete-missing-args --ignore-errors --force --max-delete: --max-size: "+
		"--min-size: --max-alloc: -P --partial --partial-dir: --delay-updates -m --prune-empty-dirs "+
		"--numeric-ids --usermap: --groupmap: --chown: --timeout: --contimeout: -I --ignore-times "+
		"--size-only --modify-window: -y --fuzzy --compare-dest: --copy-dest: --link-dest: -z --compress "+
		"--compress-choice: --zc: --compress-level: --zl: --skip-compress: -C --cvs-exclude -f: --filter: -F "+
		"--exclude: --exclude-from: --include: --include-from: --files-from: -0 --from0 -s --protect-args "+
		"--secluded-args --trust-sender --address: --port: --sockopts: --blocking-io --outbuf: "+
		"--stats -8 --8-bit-output -h --human-readable --progress -i --itemize-changes --out-format: "+
		"--info: --debug: --stderr: --list-only --bwlimit: --stop-after: --stop-at: --fsync -4 --ipv4 -6 "+
		"--ipv6 --no-motd --no-inc-recursive --no-i-r --iconv: --checksum-choice: --cc: --no-perms --no-owner "+
		"--no-group --no-times --no-links --no-recursive --no-r --no-D --no-devices --no-specials "+
		"--no-relative --no-R --no-compress --no-z --no-v --no-o --no-g --no-p --no-t"),

	"go build": table(styleGo, goBuildOpts),
	"go test": table(styleGo, goBuildOpts, "-run: -skip: -bench: -benchtime: -benchmem -count: -timeout: "+
		"-short -failfast -parallel: -cpu: -shuffle: -list: -json -cover -covermode: -coverpkg: "+
		"-coverprofile: -cpuprofile: -memprofile: -memprofilerate: -blockprofile: -blockprofilerate: "+
		"-mutexprofile: -mutexprofilefraction: -trace: -outputdir: -fuzz: -fuzztime: -fuzzminimizetime: "+
		"-vet: -fullpath -c"),
	"go vet":     table(styleGo, goBuildOpts, "-json -c:"),
	"go install": table(styleGo, goBuildOpts),
	"go list": table(styleGo, goBuildOpts, "-f: -json -m -u -e -deps -test -find -versions -retracted "+
		"-compiled -export -reuse:"),
	"go mod": table(styleGo, "-e -v -x -json -go: -compat: -fmt -print -modcacherw -module: -require: "+
		"-droprequire: -exclude: -dropexclude: -replace: -dropreplace: -retract: -dropretract: -tool: -droptool: "+
		"-godebug: -dropgodebug: -o: -diff"),
	"go fmt":     table(styleGo, "-n -x -mod:"),
	"go doc":     table(styleGo, "-all -c -cmd -short -src -u"),
	"go version": table(styleGo, "-m -v -json"),
	"go clean":   table(styleGo, "-cache -testcache -modcache -fuzzcache -i -r -n -x"),
	"go get":     table(styleGo, "-u:: -t -x -v -d -tool"),
	"gofmt":      table(styleGo, "-l -d -w -s -e -r: -tabs -tabwidth: -comments"),

	"cargo build":  table(styleGNU, cargoOpts),
	"cargo check":  table(styleGNU, cargoOpts),
	"cargo test":   table(styleGNU, cargoOpts, "--no-run --no-fail-fast --doc"),
	"cargo clippy": table(styleGNU, cargoOpts, "--no-deps --fix --allow-dirty --allow-staged"),
	"cargo fmt":    table(styleGNU, "--all --check -q --quiet -v --verbose -p: --package: --message-format:"),
	"cargo tree":   table(styleGNU, cargoOpts, "-i: --invert: -e: --edges: -d --duplicates --depth: --prefix:"),

	"echo":      table(styleGNU, "-n -e -E"),
	"pwd":       table(styleGNU, "-L -P"),
	"mkdir":     table(styleGNU, "-p --parents -v --verbose -m: --mode:"),
	"touch":     table(styleGNU, "-a -c --no-create -m -d: --date: -t: -r: --reference: -h --no-dereference --time:"),
	"cp":        table(styleGNU, cpOpts, "-a --archive -r -R --recursive -p --preserve:: --no-preserve: --parents -l --link -s --symbolic-link -L --dereference -P --no-dereference -x --one-file-system --attributes-only --sparse: --reflink::"),
	"mv":        table(styleGNU, cpOpts),
	"rm":        table(styleGNU, "-f --force -r -R --recursive -d --dir -v --verbose -I --one-file-system --preserve-root::"),
	"rmdir":     table(styleGNU, "-p --parents -v --verbose --ignore-fail-on-non-empty"),
	"ln":        table(styleGNU, "-s --symbolic -f --force -n --no-dereference -v --verbose -r --relative -T --no-target-directory -t: --target-directory: -L -P --logical --physical -b --backup:: -S: --suffix:"),
	"chmod":     table(styleGNU, "-R --recursive -v --verbose -c --changes -f --silent --quiet --reference:"),
	"diff":      table(styleGNU, "-u -U: --unified:: -c -C: --context:: -q --brief -s --report-identical-files -r --recursive -N --new-file --unidirectional-new-file -i --ignore-case -w --ignore-all-space -b --ignore-space-change -B --ignore-blank-lines -E --ignore-tab-expansion -Z --ignore-trailing-space --strip-trailing-cr -a --text -y --side-by-side -W: --width: -p --show-c-function -F: --show-function-line: --label: -x: --exclude: -X: --exclude-from: -S: --starting-file: --color:: --no-dereference -t --expand-tabs -T --initial-tab --suppress-common-lines --normal -e --ed -n --rcs -d --minimal --speed-large-files --horizon-lines: --tabsize: --suppress-blank-empty --left-column --from-file: --to-file: --ignore-file-name-case --no-ignore-file-name-case -l"),
	"sort":      table(styleGNU, "-b --ignore-leading-blanks -d --dictionary-order -f --ignore-case -g --general-numeric-sort -i --ignore-nonprinting -M --month-sort -h --human-numeric-sort -n --numeric-sort -R --random-sort -r --reverse -V --version-sort -k: --key: -t: --field-separator: -u --unique -s --stable -c --check:: -C -m --merge -o: --output: -z --zero-terminated -S: --buffer-size: -T: --temporary-directory: --parallel: --sort:"),
	"uniq":      table(styleGNU, "-c --count -d --repeated -D -u --unique -i --ignore-case -f: --skip-fields: -s: --skip-chars: -w: --check-chars: -z --zero-terminated --group::"),
	"cut":       table(styleGNU, "-b: --bytes: -c: --characters: -d: --delimiter: -f: --fields: -n --complement -s --only-delimited -z --zero-terminated --output-delimiter:"),
	"tr":        table(styleGNU, "-c -C --complement -d --delete -s --squeeze-repeats -t --truncate-set1"),
	"file":      table(styleGNU, "-b --brief -i --mime --mime-type --mime-encoding -L --dereference -h --no-dereference -s --special-files -N --no-pad -0 --print0 -k --keep-going -r --raw --extension --apple -E"),
	"stat":      table(styleGNU, "-L --dereference -f --file-system -c: --format: --printf: -t --terse --cached:"),
	"du":        table(styleGNU, "-a --all -s --summarize -h --human-readable -c --total -d: --max-depth: --apparent-size -b --bytes -k -m -x --one-file-system --exclude: -L --dereference -P --no-dereference -S --separate-dirs --si -t: --threshold: --time:: --inodes -l --count-links -B: --block-size: -0 --null"),
	"df":        table(styleGNU, "-a --all -h --human-readable -H --si -i --inodes -k -l --local -P --portability -T --print-type -t: --type: -x: --exclude-type: --total --output:: -B: --block-size:"),
	"which":     table(styleGNU, "-a"),
	"basename":  table(styleGNU, "-a --multiple -s: --suffix: -z --zero"),
	"dirname":   table(styleGNU, "-z --zero"),
	"realpath":  table(styleGNU, "-e --canonicalize-existing -m --canonicalize-missing -L --logical -P --physical -q --quiet -s --strip --no-symlinks -z --zero --relative-to: --relative-base:"),
	"readlink":  table(styleGNU, "-f --canonicalize -e --canonicalize-existing -m --canonicalize-missing -n --no-newline -q --quiet -s --silent -v --verbose -z --zero"),
	"date":      table(styleGNU, "-u --utc --universal -d: --date: -I:: --iso-8601:: -R --rfc-email --rfc-3339: -r: --reference:"),
	"tree":      table(styleGNU, "-a -d -l -f -x -L: -P: -I: --gitignore --noreport -i -q -N -Q -p -u -g -s -h --si --du -D --timefmt: -F --inodes --device -v -t -c -U -r --dirsfirst --filesfirst --prune --matchdirs --ignore-case -n -C -J -X --charset:"),
	"seq":       table(styleGNU, "-f: --format: -s: --separator: -w --equal-width"),
	"uname":     table(styleGNU, "-a --all -s --kernel-name -n --nodename -r --kernel-release -v --kernel-version -m --machine -p --processor -i --hardware-platform -o --operating-system"),
	"nl":        table(styleGNU, "-b: -n: -w: -s: -v: -i:"),
	"tac":       table(styleGNU, "-b -r -s:"),
	"sha256sum": table(styleGNU, sumOpts),
	"md5sum":    table(styleGNU, sumOpts),
	"base64":    table(styleGNU, "-d --decode -i --ignore-garbage -w: --wrap:"),
	"od":        table(styleGNU, "-A: -j: -N: -t: -v -w:: -a -b -c -d -f -i -l -o -s -x --address-radix: --skip-bytes: --read-bytes: --format: --output-duplicates --width::"),
}

const (
	// goBuildOpts are the build flags shared by go build, test, vet, install and list (no
	// -toolexec, -exec, -vettool, -ldflags, -gcflags, -asmflags, -gccgoflags, -overlay, -modfile,
	// -C, -compiler, -pkgdir).
	goBuildOpts = "-o: -v -x -n -a -race -msan -asan -cover -covermode: -coverpkg: -tags: -trimpath -mod: " +
		"-buildvcs -work -p: -buildmode: -pgo: -json -linkshared -installsuffix:"
	// cargoOpts are the flags shared by cargo build, check, test, clippy and tree (no --config, -Z,
	// --manifest-path, --target-dir, -C, --target: a target given as a JSON file names its linker).
	cargoOpts = "--release -r --all-targets --workspace --all --exclude: --lib --bins --bin: --tests --test: " +
		"--examples --example: --benches --bench: -p: --package: -F: --features: --all-features " +
		"--no-default-features -q --quiet -v --verbose --locked --offline --frozen -j: --jobs: " +
		"--message-format: --color: --timings:: --profile: --keep-going --future-incompat-report"
	sumOpts = "-c --check -b --binary -t --text --tag --quiet --status --strict -w --warn -z --zero --ignore-missing"
	cpOpts  = "-f --force -i --interactive -n --no-clobber -u --update:: -v --verbose -b --backup:: -S: " +
		"--suffix: -t: --target-directory: -T --no-target-directory --strip-trailing-slashes --debug"
)

// runsProgram names, per program, options that run another program or write where the call does
// not say: a call holding one (or an abbreviation of one) is told so, not merely "not covered".
var runsProgram = map[string][]string{
	"git": {"--upload-pack", "--receive-pack", "--exec", "--output", "--ext-diff", "--textconv", "--open-files-in-pager",
		"-O", "--config", "--template", "--tool", "--extcmd", "--exec-path", "--git-dir", "--work-tree", "--paginate",
		"--edit", "--gpg-sign", "--strategy", "--rebase", "--separate-git-dir", "--recurse-submodules", "--show-signature"},
	"tar":   {"--to-command", "--use-compress-program", "-I", "--checkpoint-action", "--info-script", "-F", "--new-volume-script", "--rsh-command", "--rmt-command", "--transform", "--absolute-names", "-P"},
	"rsync": {"-e", "--rsh", "--rsync-path", "--copy-as", "--daemon", "--config", "--write-batch", "--read-batch", "--only-write-batch", "-M", "--remote-option", "--log-file"},
	"go":    {"-toolexec", "-exec", "-vettool", "-ldflags", "-gcflags", "-asmflags", "-gccgoflags", "-overlay", "-modfile", "-C", "-compiler"},
	"cargo": {"--config", "-Z", "--manifest-path", "-C", "--target"},
	"find":  {"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"},
	"rg":    {"--pre", "--pre-glob", "-z", "--search-zip"},
	"sort":  {"--compress-program"},
	"zip":   {"-T", "--unzip-command", "-TT"},
}

// badOption returns the first argument of args (the words after the program and, for programs
// with subcommands, after the subcommand) that the entry key's table does not cover, and "" when
// every option is on it. A program without a table covers operands only. For git an operand
// holding "::" (<transport>::<address>, which runs the git-remote-<transport> helper) is not
// covered either.
func badOption(prog, key string, args []string) string {
	t := safeOptions[key]
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return badOperand(prog, args[i+1:])
		case a == "-" || !strings.HasPrefix(a, "-"):
			if i == 0 && t != nil && t.oldTar && a != "" {
				// tar's old style: "cf x.tar" is "-c -f x.tar".
				for j := 0; j < len(a); j++ {
					k, ok := t.opts["-"+a[j:j+1]]
					if !ok || k == argOptional {
						return "-" + a[j:j+1]
					}
					if k == argRequired {
						i++
					}
				}
				if i >= len(args) {
					return a // a value is missing
				}
				continue
			}
			if bad := badOperand(prog, args[i:i+1]); bad != "" {
				return bad
			}
			continue
		case t == nil:
			return optionName(a)
		case t.numeric && isDigits(a[1:]):
			continue
		}
		var consumed int
		var bad string
		switch {
		case t.style == styleFind:
			consumed, bad = t.word(a, false)
		case t.style == styleGo:
			consumed, bad = t.goFlag(a)
		case strings.HasPrefix(a, "--"):
			consumed, bad = t.word(a, true)
		default:
			consumed, bad = t.cluster(a)
		}
		if bad != "" {
			return bad
		}
		i += consumed
		if i >= len(args) {
			return a // a value is missing
		}
	}
	return ""
}

// badOperand returns the first of operands a git call may not hold ("" for other programs).
func badOperand(prog string, operands []string) string {
	if prog != "git" {
		return ""
	}
	for _, o := range operands {
		if strings.Contains(o, "::") {
			return o
		}
	}
	return ""
}

// word checks a whole-word option ("--name", "--name=value", find's "-name"); consumed is 1 when
// its value is the next argument.
func (t *optTable) word(a string, attach bool) (consumed int, bad string) {
	name, hasVal := a, false
	if attach {
		name, _, hasVal = strings.Cut(a, "=")
	}
	k, ok := t.opts[name]
	switch {
	case !ok:
		return 0, name
	case k == argNone && hasVal:
		return 0, name
	case k == argRequired && !hasVal:
		return 1, ""
	}
	return 0, ""
}

// goFlag checks a Go-style flag ("-name", "--name", "-name=value").
func (t *optTable) goFlag(a string) (consumed int, bad string) {
	name, _, hasVal := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
	k, ok := t.opts["-"+name]
	switch {
	case !ok:
		return 0, "-" + name
	case k == argRequired && !hasVal:
		return 1, ""
	}
	return 0, ""
}

// cluster checks a cluster of short options ("-la", "-cf", "-uno"): an option taking a value
// takes the rest of the cluster, or the next argument when it ends the cluster.
func (t *optTable) cluster(a string) (consumed int, bad string) {
	for j := 1; j < len(a); j++ {
		name := "-" + a[j:j+1]
		k, ok := t.opts[name]
		switch {
		case !ok:
			return 0, name
		case k == argOptional:
			return 0, ""
		case k == argRequired:
			if j+1 < len(a) {
				return 0, ""
			}
			return 1, ""
		}
	}
	return 0, ""
}

// optionName is an option argument's name: "--name" of "--name=value", "-x" of "-xyz".
func optionName(a string) string {
	if strings.HasPrefix(a, "--") {
		n, _, _ := strings.Cut(a, "=")
		return n
	}
	if len(a) > 2 {
		return a[:2]
	}
	return a
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// optionWhy says why an option the table does not cover makes the call ask.
func optionWhy(prog, key, opt string) string {
	for _, r := range runsProgram[prog] {
		if opt == r {
			return "the option " + opt + " can make " + prog + " run another program or write elsewhere"
		}
		if strings.HasPrefix(opt, "--") && len(opt) > 3 && strings.HasPrefix(r, opt) {
			return "the option " + opt + " is not covered: " + prog + " may read it as " + r + ", which can make it run another program or write elsewhere"
		}
	}
	if safeOptions[key] == nil {
		return "the option " + opt + " is not covered: a stored " + key + " entry covers calls with operands only (no options)"
	}
	return "the option " + opt + " is not on the list of options a stored " + key + " entry covers (docs/security.md)"
}
