# zidane-server: `make run` starts the server on a managed local Postgres; `make test` runs every test.
SHELL := /bin/bash
GO ?= go
LISTEN ?= 127.0.0.1:4380
# SERVER_ENV tells the server that make started it, so refusals naming a flag show the ARGS form.
SERVER_ENV = ZIDANE_MAKE_RUN=1 ZIDANE_MAKE_ARGS='$(subst ','"'"',$(ARGS))' 

.PHONY: all generate check-generated build app run test fuzz soak bench bootstrap release release-schema clean

all: build

## generate: rewrite every generated file from schema/
generate:
	$(GO) run ./gen

## check-generated: fail, naming the files, when generated files drift from schema/
check-generated:
	$(GO) run ./gen -check

## build: build the web app into server/webapp/dist (when npm is present), then bin/zidane-server (which embeds it), bin/zidane and bin/zidane-conformance
build: app
	$(GO) build -o bin/ ./cmd/zidane-server ./cmd/zidane ./cmd/zidane-conformance

## app: the web app's production build (sdk-ts/app → server/webapp/dist); without npm it says so and the server serves a page saying how to build it
app:
	@scripts/build-app.sh

## run: build and start the server on its embedded default (a managed local Postgres); MODEL=provider/model picks the model, ARGS="--flag …" passes any start flag
run: build
	@scripts/bootstrap.sh --server
	$(SERVER_ENV) bin/zidane-server start --listen $(LISTEN) $(if $(MODEL),--model $(MODEL)) $(ARGS)

## test: every test, the drift check and the TypeScript type-check
test:
	scripts/test.sh

## fuzz: run each fuzz target for FUZZTIME (default 30s)
fuzz:
	scripts/fuzz.sh $${FUZZTIME:-30s}

## soak: 500 connections of valid and invalid frames for 60 s against the real binary (loopback), 200 random cuts across three replicas on NATS JetStream, and 200 random cuts of createSseHost's streams on the server and through the Node bridge (sdk-ts)
soak:
	ZIDANE_SOAK=1 $(GO) test -count=1 -timeout 10m -run "TestSoak|TestReplicaCuts" -v ./e2e/ | grep -E 'soak:|^(---|ok|FAIL)'
	$(GO) build -o bin/ ./cmd/zidane-server
	cd sdk-ts && node scripts/clean.mjs dist-test && npx tsc -p tsconfig.test.json && ZIDANE_SSE_CUTS=200 node --test --test-reporter=spec --test-name-pattern 'random cuts' dist-test/test/sse-host.test.js

## bench: the figures of docs/benchmarks.md as ratios against baselines run back to back (BENCH_WRITE=1 writes the doc)
bench:
	scripts/bench.sh

## release: cut a release: VERSION=x.y.z (default: the VERSION file), SUMMARY='…' or SUMMARY_FILE=path; snapshot, CHANGELOG.md, commit and tag v<version> (refuses on a dirty tree or an existing tag)
release:
	scripts/release.sh

## release-schema: snapshot the bundled schema as schema/releases/v<protocolVersion>.json
release-schema:
	$(GO) run ./gen -release

bootstrap:
	scripts/bootstrap.sh --all

clean:
	rm -rf bin sdk-ts/node_modules
	find server/webapp/dist -mindepth 1 ! -name .placeholder -delete
