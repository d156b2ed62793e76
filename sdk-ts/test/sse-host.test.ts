// createSseHost (issue 26 item 4) against the real zidane-server binary's SSE protocol v1
// (--sse-base-path /api/chat) on a real Postgres, through a loopback TCP proxy that cuts the live
// streams at random moments: the transcript the host ends with equals the stored one (hydrate
// straight from the server), a stream closes a second after its last watcher leaves, and a restart
// (reset: epoch) hydrates again; the same cuts through the Node bridge (createSseHandler) in front of
// it. ZIDANE_SSE_CUTS sets the number of cuts (20 here, 200 under make soak).
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, test, type TestContext } from 'node:test'
import { isDeepStrictEqual } from 'node:util'
import { WebSocket } from 'ws'
import { createSseHost, type SseHost } from '../src/adapters/index.js'
import { createServerClient, type WebSocketConstructor } from '../src/client/index.js'
import { createSseHandler, toNodeHandler } from '../src/server/index.js'
import type { HydrateResponse, StreamEvent } from '../src/index.js'
import { until } from './helpers/clock.js'
import { CutProxy, type Pair } from './helpers/proxy.js'
import { Database, ServerProcess } from './helpers/server.js'

let db: Database
let server: ServerProcess
let token: string

let configDir: string

before(async () => {
  db = new Database()
  // Scripted providers that ask a question (ask/scripted) and that waits a minute mid-answer
  // (slow/scripted); the default stays scripted/scripted.
  configDir = mkdtempSync(join(tmpdir(), 'zsdk-sse-config-'))
  writeFileSync(join(configDir, 'ask.json'), JSON.stringify({ loop: true, turns: [{ steps: [{ ask: { prompt: 'Which color?', options: ['red', 'blue'] } }] }, { steps: [{ text: 'Thanks for the answer.' }] }] }))
  writeFileSync(join(configDir, 'slow.json'), JSON.stringify({ loop: true, turns: [{ steps: [{ text: 'Starting a long answer. ' }, { delay: 60_000 }, { text: 'never shown' }] }] }))
  writeFileSync(join(configDir, 'config.json'), JSON.stringify({ providers: [{ name: 'ask', kind: 'scripted', script: 'ask.json' }, { name: 'slow', kind: 'scripted', script: 'slow.json' }] }))
  // Pieces 20 ms apart: a run lasts a few hundred ms, so cuts land in the middle of runs.
  server = await ServerProcess.start({ db, extra: ['--scripted-step-delay', '20ms', '--config', join(configDir, 'config.json')] })
  token = server.mintToken('sse-host-test')
})

after(async () => {
  await server?.stop()
  server?.cleanup()
  db?.drop()
  if (configDir) rmSync(configDir, { recursive: true, force: true })
})

const auth = () => ({ authorization: `Bearer ${token}` })
const isStream = (request: string) => /^GET \S+\/stream HTTP/.test(request)

/** The stored transcript, hydrated straight from the server (no proxy, no host). */
async function stored(sessionId: string): Promise<StreamEvent[]> {
  const res = await fetch(`http://127.0.0.1:${server.port}/api/chat/sessions/${sessionId}?limit=1000`, { headers: auth() })
  assert.equal(res.status, 200)
  return ((await res.json()) as HydrateResponse).events
}

function userPrompts(host: SseHost, sessionId: string): number {
  return host.streams.transcript(sessionId).filter((e) => e.kind === 'user-prompt').length
}

async function runEnded(host: SseHost, sessionId: string, runs: number) {
  await until(() => host.streams.getSnapshot(sessionId).status !== 'running' && host.streams.transcript(sessionId).filter((e) => e.kind === 'run-summary').length >= runs, 20_000, `run ${runs} ended`)
}

/** Waits until the host's transcript is the stored one, then asserts it (the message shows the difference). */
async function matchesStore(host: SseHost, sessionId: string) {
  let want = await stored(sessionId)
  const end = Date.now() + 10_000
  while (!isDeepStrictEqual(host.streams.transcript(sessionId), want) && Date.now() < end) {
    await new Promise((r) => setTimeout(r, 20))
    want = await stored(sessionId)
  }
  assert.deepEqual(host.streams.transcript(sessionId), want)
}

/** A small deterministic PRNG (mulberry32), so a failing run can be repeated with its seed. */
function prng(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/**
 * Random cuts of the host's live streams at targetPort (the server, or a bridge in front of it):
 * rounds of at most 20 cuts, each on a fresh session (so the soak's 200 keep transcripts short),
 * prompts sent back to back meanwhile, then one more run; every round's transcript must equal the
 * stored one, every prompt once, and every resume must come from Last-Event-ID (no reset).
 */
async function cutRun(t: TestContext, targetPort: number) {
  const cuts = Number(process.env['ZIDANE_SSE_CUTS'] ?? 20)
  const seed = Number(process.env['ZIDANE_SSE_SEED'] ?? Date.now() % 1_000_000)
  const rnd = prng(seed)
  const cp = await CutProxy.start(targetPort)
  t.after(() => cp.close())
  const errors: string[] = []
  let streamRequests = 0
  const counting: typeof fetch = (input, init) => {
    if (String(input).endsWith('/stream')) streamRequests++
    return fetch(input, init)
  }
  const host = createSseHost({ baseUrl: `http://127.0.0.1:${cp.port}/api/chat`, headers: auth, reconnectMs: 20, maxReconnectMs: 200, frames: false, fetch: counting, onError: (e) => errors.push(e.message) })
  t.after(() => host.close())
  await host.ready
  let done = 0
  let rounds = 0
  const start = Date.now()
  while (done < cuts) {
    rounds++
    const s = await host.createSession({ title: `cuts from ${done}` })
    const release = host.watch(s.id)
    await host.open(s.id)
    const roundEnd = Math.min(cuts, done + 20)
    let runs = 0
    let cutting = true
    const cutter = (async () => {
      while (cutting && done < roundEnd) {
        await new Promise((r) => setTimeout(r, 30 + rnd() * 300))
        if (!cutting) break
        if (cp.rstWhere(isStream) > 0) done++
      }
    })()
    while (done < roundEnd) {
      runs++
      await host.send(s.id, `Say hello ${runs}.`)
      await runEnded(host, s.id, runs)
    }
    cutting = false
    await cutter
    // A last run after the cuts: the stream resumed and still delivers.
    runs++
    await host.send(s.id, 'And once more.')
    await runEnded(host, s.id, runs)
    assert.equal(userPrompts(host, s.id), runs, `seed ${seed}: every prompt once`)
    await matchesStore(host, s.id)
    release()
  }
  t.diagnostic(`${cuts} cuts in ${Date.now() - start} ms, ${streamRequests} stream requests, seed ${seed}`)
  assert.ok(streamRequests >= cuts + rounds, `each cut reconnected: ${streamRequests} stream requests for ${cuts} cuts in ${rounds} rounds`)
  assert.ok(errors.every((m) => !/hydrating again/.test(m)), `resumed from Last-Event-ID, no reset: ${errors.join('; ')}`)
}

test('sse host: random cuts of the live stream over a long run; the transcript equals the stored one, each record once', async (t) => {
  await cutRun(t, server.port)
})

test('sse host through the Node bridge (createSseHandler): random cuts; the transcript equals the stored one, each record once', async (t) => {
  const client = createServerClient({ url: server.url, token, WebSocket: WebSocket as unknown as WebSocketConstructor, appVersion: 'sse-host-test' })
  t.after(() => client.close())
  await client.ready
  const handler = createSseHandler({ server: client, cwd: '', authorize: () => 'user', logger: { warn: () => {} } })
  t.after(() => handler.close())
  const bridge = http.createServer(toNodeHandler(handler) as unknown as http.RequestListener)
  await new Promise<void>((r) => bridge.listen(0, '127.0.0.1', () => r()))
  t.after(
    () =>
      new Promise<void>((r) => {
        bridge.closeAllConnections()
        bridge.close(() => r())
      }),
  )
  await cutRun(t, (bridge.address() as AddressInfo).port)
})

/** Resolves when the proxy sees a stream connection close, with the time it closed. */
function streamClosed(cp: CutProxy): Promise<number> {
  return new Promise((resolve) => {
    const off = cp.onClose((p: Pair) => {
      if (p.request !== undefined && isStream(p.request)) {
        off()
        resolve(Date.now())
      }
    })
  })
}

test('sse host: a stream closes a second after nothing watches it; a watcher within that second keeps it', async (t) => {
  const cp = await CutProxy.start(server.port)
  t.after(() => cp.close())
  const host = createSseHost({ baseUrl: `http://127.0.0.1:${cp.port}/api/chat`, headers: auth, frames: false })
  t.after(() => host.close())
  await host.ready
  const s = await host.createSession({ title: 'linger' })
  const openStreams = () => [...cp.pairs].filter((p) => p.request !== undefined && isStream(p.request)).length

  // A subscription to the transcript (what the components' hooks do) watches the session.
  const off = host.streams.subscribe(s.id, () => {})
  await until(() => host.streamState(s.id) === 'open' && openStreams() === 1, 5000, 'the stream open')
  let closed = streamClosed(cp)
  const left = Date.now()
  off()
  let at = await closed
  assert.ok(at - left >= 950 && at - left < 2500, `closed ${at - left} ms after the last watcher left`)
  await until(() => host.streamState(s.id) === 'closed', 2000, 'state closed')

  // Watched again: the stream opens again; a watcher that comes back within the second keeps the
  // same stream open.
  const release1 = host.watch(s.id)
  await until(() => host.streamState(s.id) === 'open' && openStreams() === 1, 5000, 'the stream open again')
  const accepted = cp.accepted
  closed = streamClosed(cp)
  release1()
  await new Promise((r) => setTimeout(r, 400))
  const release2 = host.watch(s.id)
  const back = Date.now()
  await new Promise((r) => setTimeout(r, 300))
  release2()
  const left2 = Date.now()
  at = await closed
  assert.ok(at - left2 >= 950 && at - left2 < 2500, `closed ${at - left2} ms after the second watcher left (${at - back} ms after it came)`)
  assert.equal(cp.accepted, accepted, 'the same stream all along: no reconnect')
})

test('sse host: a restart answers reset (epoch); the host hydrates again and the next run continues the transcript', async (t) => {
  const errors: string[] = []
  const host = createSseHost({ baseUrl: `http://127.0.0.1:${server.port}/api/chat`, headers: auth, reconnectMs: 50, maxReconnectMs: 200, frames: false, onError: (e) => errors.push(e.message) })
  t.after(() => host.close())
  await host.ready
  const s = await host.createSession()
  const release = host.watch(s.id)
  t.after(release)
  await host.open(s.id)
  await host.send(s.id, 'First.')
  await runEnded(host, s.id, 1)
  await server.stop()
  await server.launch()
  await until(() => errors.some((m) => /\(epoch\): hydrating again/.test(m)) && host.streamState(s.id) === 'open', 20_000, 'reset and hydrate again')
  await matchesStore(host, s.id)
  await host.send(s.id, 'Second.')
  await runEnded(host, s.id, 2)
  assert.equal(userPrompts(host, s.id), 2)
  await matchesStore(host, s.id)
})

test('sse host: a question arrives on the stream, is answered through answer (an option) and the run goes on', async (t) => {
  const host = createSseHost({ baseUrl: `http://127.0.0.1:${server.port}/api/chat`, headers: auth, frames: false })
  t.after(() => host.close())
  await host.ready
  const s = await host.createSession({ title: 'ask' })
  const release = host.watch(s.id)
  t.after(release)
  await host.open(s.id)
  const { runId } = await host.send(s.id, 'Ask me.', { model: 'ask/scripted' })
  await until(() => host.interactions.get().length === 1, 10_000, 'the question')
  const q = host.interactions.get()[0]!
  assert.equal(q.sessionId, s.id)
  assert.equal(q.runId, runId)
  assert.equal(q.request.prompt, 'Which color?')
  assert.deepEqual(q.request.options, ['red', 'blue'])
  await host.answer(q.id, 'red')
  assert.deepEqual(host.interactions.get(), [])
  await runEnded(host, s.id, 1)
  assert.match(JSON.stringify(host.streams.transcript(s.id)), /Thanks for the answer\./)
  await matchesStore(host, s.id)
  await assert.rejects(host.answer(q.id, 'blue'), /No pending question/)
})

test('sse host: cancel stops the running prompt through the cancel route; the run ends interrupted and the session is idle', async (t) => {
  const host = createSseHost({ baseUrl: `http://127.0.0.1:${server.port}/api/chat`, headers: auth, frames: false })
  t.after(() => host.close())
  await host.ready
  const s = await host.createSession({ title: 'cancel' })
  const release = host.watch(s.id)
  t.after(release)
  await host.open(s.id)
  await host.send(s.id, 'Take your time.', { model: 'slow/scripted' })
  await until(() => JSON.stringify(host.streams.transcript(s.id)).includes('Starting a long answer.'), 10_000, 'the first piece')
  assert.equal(host.sessions.get().find((x) => x.id === s.id)?.status, 'running')
  await host.cancel(s.id)
  await until(() => !host.streams.getSnapshot(s.id).running, 10_000, 'run:end')
  assert.equal(host.streams.getSnapshot(s.id).status, 'idle')
  assert.equal(host.sessions.get().find((x) => x.id === s.id)?.status, 'idle')
  assert.doesNotMatch(JSON.stringify(host.streams.transcript(s.id)), /never shown/)
  await matchesStore(host, s.id)
})

test('sse host: a hydrate holds the newest turns (hydrateTurns); loadEarlier pages older ones through the hydrate route', async (t) => {
  const writer = createSseHost({ baseUrl: `http://127.0.0.1:${server.port}/api/chat`, headers: auth, frames: false })
  t.after(() => writer.close())
  await writer.ready
  const s = await writer.createSession({ title: 'pages' })
  await writer.open(s.id)
  for (let i = 1; i <= 3; i++) {
    await writer.send(s.id, `Turn ${i}.`)
    await runEnded(writer, s.id, i)
  }
  const reader = createSseHost({ baseUrl: `http://127.0.0.1:${server.port}/api/chat`, headers: auth, frames: false, hydrateTurns: 1, pageSize: 1 })
  t.after(() => reader.close())
  await reader.ready
  await reader.open(s.id)
  const newest = reader.streams.transcript(s.id).length
  assert.ok(newest > 0 && userPrompts(reader, s.id) < 3, 'the newest turn only')
  const page = reader.streams.getSnapshot(s.id).page
  assert.ok(page.loaded && page.hasMore && page.cursor !== undefined)
  let pages = 0
  while (reader.streams.getSnapshot(s.id).page.hasMore) {
    await reader.streams.loadEarlier(s.id)
    pages++
  }
  assert.ok(pages >= 2, `paged ${pages} times`)
  assert.equal(userPrompts(reader, s.id), 3)
  assert.deepEqual(reader.streams.transcript(s.id), await stored(s.id))
})
