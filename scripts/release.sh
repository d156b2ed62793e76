#!/usr/bin/env bash
# release.sh: cut a release (make release). VERSION=x.y.z (default: the VERSION file) is the product
# version; SUMMARY='…' or SUMMARY_FILE=path is the written summary (a re-cut keeps the existing one).
# It refuses on a dirty tree or when the tag v<version> exists; otherwise it writes VERSION and the
# SDK's package version, regenerates, runs the drift check and the breaking-change gate, snapshots
# schema/releases/v<protocolVersion>.json (overwriting it on a re-cut of an untagged release), writes
# the release's CHANGELOG.md section, commits and tags v<version>.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
GO=${GO:-go}
GEN=${GEN:-$GO run ./gen} # the generator (a test passes a built one)

die() { echo "release: $*" >&2; exit 1; }

V=${VERSION:-$(tr -d '[:space:]' < VERSION)}
[[ $V =~ ^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$ ]] \
  || die "VERSION=$V is not a semantic version (MAJOR.MINOR.PATCH, e.g. 0.2.0)"
TAG=v$V
[ -z "$(git status --porcelain)" ] || die "the tree has uncommitted changes; commit or remove them first:
$(git status --short | head -20)"
if git rev-parse -q --verify "refs/tags/$TAG" >/dev/null; then
  die "tag $TAG exists: $TAG is released and frozen; cut the next version with VERSION=x.y.z make release"
fi
SUM=${SUMMARY:-}
if [ -n "${SUMMARY_FILE:-}" ]; then
  [ -f "$SUMMARY_FILE" ] || die "SUMMARY_FILE=$SUMMARY_FILE: no such file"
  SUM=$(cat "$SUMMARY_FILE")
fi

# The product version's one source, and the SDK's package version read from it.
echo "$V" > VERSION
node -e '
const fs = require("fs"), v = process.argv[1];
for (const f of ["sdk-ts/package.json", "sdk-ts/package-lock.json"]) {
  if (!fs.existsSync(f)) continue;
  const j = JSON.parse(fs.readFileSync(f, "utf8"));
  j.version = v;
  if (j.packages && j.packages[""]) j.packages[""].version = v;
  fs.writeFileSync(f, JSON.stringify(j, null, 2) + "\n");
}' "$V"

$GEN
# The drift check and the gate against the newest release snapshot (before this one overwrites it).
$GEN -check || die "the schema does not pass the gate; fix what it names, then run make release again"

# The previous release's bundle: the newest v* tag's (none before the first release).
PREV_ARGS=()
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
if last=$(git describe --tags --abbrev=0 --match 'v[0-9]*' 2>/dev/null); then
  git show "$last:protocol/bundle_gen.json" > "$tmp" && PREV_ARGS=(-prev "$tmp")
fi
$GEN -release -changelog CHANGELOG.md -summary "$SUM" "${PREV_ARGS[@]}"

PV=$(sed -n 's/^[[:space:]]*"protocolVersion": *\([0-9]*\).*/\1/p' schema/protocol.json | head -1)
git add -A VERSION CHANGELOG.md schema/releases protocol client sdk-ts/package.json sdk-ts/package-lock.json \
  sdk-ts/src/protocol.ts sdk-ts/test/examples.gen.ts docs/protocol.md e2e/wirekit/scenarios/examples
git commit -q -m "Release $TAG (protocol v$PV): snapshot schema/releases/v$PV.json, CHANGELOG.md"
git tag -a "$TAG" -m "zidane-server $TAG (protocol v$PV)"
echo "release: tagged $TAG (protocol v$PV) at $(git rev-parse --short HEAD); push it with: git push origin main $TAG"
