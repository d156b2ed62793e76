#!/usr/bin/env bash
# Builds the web app (sdk-ts/app) into server/webapp/dist, which the server embeds (go:embed):
# `make build` runs it before `go build`. Without npm it says so and does nothing: the binary is
# then built without the app and serves a page saying how to build it. An up-to-date build (its
# index.html newer than every source of the app and the SDK) is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
out=server/webapp/dist/index.html
if ! command -v npm >/dev/null 2>&1; then
  echo "build-app: npm not found: the server is built without its web app (install Node.js 20 and npm, then make build)" >&2
  exit 0
fi
if ! grep -q '"build:app"' sdk-ts/package.json; then
  echo "build-app: sdk-ts has no build:app script yet: the server is built without its web app" >&2
  exit 0
fi
if [ -f "$out" ] && [ -z "$(find sdk-ts/app sdk-ts/src sdk-ts/package.json sdk-ts/package-lock.json -newer "$out" -type f -print -quit 2>/dev/null)" ]; then
  exit 0
fi
scripts/bootstrap.sh --app # sdk-ts's node_modules only: the e2e test programs are make test's
echo "build-app: building the web app into server/webapp/dist" >&2
(cd sdk-ts && npm run --silent build:app)
