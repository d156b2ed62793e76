// The SDK against the real zidane-server binary on a real Postgres, over ws: handshake, chat, a
// forced disconnect mid-run (cut by a loopback TCP proxy), a restart (epoch and reload), a revoked
// token (401 type, no retries) and another server at the same URL (hostId).
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { WebSocket } from 'ws'
import { createServerHost, type ServerHost } from '../src/adapters/index.js'
import { createServerClient, TokenRefusedError, type ServerClient, type WebSocketConstructor } from '../src/client/index.js'
import type { StreamEvent, WireSignal } from '../src/index.js'
import { until } from './helpers/clock.js'
import { CutProxy } from './helpers/proxy.js'
import { Database, ServerProcess } from './helpers/server.js'

const WS = WebSocket as unknown as WebSocketConstructor
let db: Database
let server: ServerProcess
let token: string

before(async () => {
  db = new Database()
  // Pieces 40 ms apart, so a run lasts long enough to be cut in the middle.
  server = await ServerProcess.start({ db, extra: ['--scripted-step-delay', '40ms'] })
  token = server.mintToken('sdk-test')
})

after(async () => {
  await server?.stop()
  server?.cleanup()
  db?.drop()
})

async function runEnded(host: ServerHost, sessionId: string, runs = 1) {
  await until(() => host.streams.getSnapshot(sessionId).status !== 'running' && host.streams.transcript(sessionId).filter((e) => e.kind === 'run-summary').length >= runs, 15_000, 'run:end')
}

async function stored(client: ServerClient, sessionId: string): Promise<StreamEvent[]> {
  return (await client.call('sessions.loadEvents', { sessionId })).events as StreamEvent[]
}

test('integration: handshake and a chat; the live transcript equals sessions.loadEvents (C20)', async (t) => {
  const host = createServerHost({ url: server.url, token, WebSocket: WS, appVersion: 'sdk-test', frames: false })
  t.after(() => host.close())
  const hello = await host.client.ready
  assert.equal(hello.hostKind, 'server')
  assert.equal(hello.negotiatedProtocolVersion, 16)
  assert.ok(host.client.offers('chat.send'))
  const s = await host.createSession({ title: 'sdk' })
  assert.equal(host.sessions.get()[0]!.id, s.id)
  const { runId } = await host.send(s.id, 'Say hello.')
  assert.ok(runId)
  await runEnded(host, s.id)
  const live = host.streams.transcript(s.id)
  const answer = live.filter((e) => e.kind === 'markdown').map((e) => (e as { text: string }).text).join('\n')
  assert.match(answer, /Hello! Let me look that up\./)
  assert.match(answer, /the scripted agent is ready/)
  assert.deepEqual(live, await stored(host.client, s.id))
  assert.equal(host.sessions.get().find((x) => x.id === s.id)!.status, 'idle')
})

test('integration: a forced disconnect mid-run resumes with nothing lost and nothing repeated', async (t) => {
  const cp = await CutProxy.start(server.port)
  t.after(() => cp.close())
  const host = createServerHost({ url: cp.url, token, WebSocket: WS, frames: false, reconnect: { initialMs: 100, maxMs: 200 } })
  t.after(() => host.close())
  await host.ready
  const s = await host.createSession()
  const seqs: number[] = []
  let cuts = 0
  host.client.onSignal((sig: WireSignal) => {
    if ((sig as { sessionId?: string }).sessionId !== s.id) return
    if (sig.$seq === undefined) return // ephemeral (session:updated, stream:progress): outside the sequence
    seqs.push(sig.$seq)
    // Cut twice in the middle of the run: after the first streamed piece and after the tool call.
    if (sig.kind === 'event' && ((sig.event.kind === 'markdown' && cuts === 0) || (sig.event.kind === 'tool' && cuts === 1))) {
      cuts++
      cp.rst()
    }
  })
  await host.send(s.id, 'Say hello.')
  await runEnded(host, s.id)
  assert.equal(cuts, 2)
  assert.ok(cp.accepted >= 3, 'two reconnects')
  assert.deepEqual(seqs, Array.from({ length: seqs.length }, (_, i) => i + 1), 'every $seq once, in order')
  assert.deepEqual(host.streams.transcript(s.id), await stored(host.client, s.id))
})

test('integration: setPresence declares the view and focus; other windows count it; a reconnect declares it again', async (t) => {
  const cp = await CutProxy.start(server.port)
  t.after(() => cp.close())
  // A backoff of about a second, longer than the server's 100 ms presence coalescing: the gap shows.
  const a = createServerClient({ url: cp.url, token, WebSocket: WS, appVersion: 'sdk-test', reconnect: { initialMs: 1000, maxMs: 1000 } })
  t.after(() => a.close())
  const b = createServerClient({ url: server.url, token, WebSocket: WS, appVersion: 'sdk-test' })
  t.after(() => b.close())
  await Promise.all([a.ready, b.ready])
  assert.ok(a.offers('presence.set'))
  const s = await b.call('sessions.create', { cwd: '' })
  let counts: { windows: number; focused: number } | undefined
  b.onSignal('presence:changed', (sig) => {
    const p = sig.sessions.find((x) => x.sessionId === s.id)
    counts = p === undefined ? { windows: 0, focused: 0 } : { windows: p.windows, focused: p.focused ?? 0 }
  })
  const is = (windows: number, focused: number) => counts !== undefined && counts.windows === windows && counts.focused === focused
  a.setPresence(s.id, true)
  await until(() => is(1, 1), 5000, 'windows 1, focused 1')
  a.setPresence(s.id, false)
  await until(() => is(1, 0), 5000, 'focus lost')
  a.setPresence(s.id, true)
  await until(() => is(1, 1), 5000, 'focused again')
  // The dropped connection's view ends with it; the new connection declares it again.
  cp.rst()
  await until(() => is(0, 0), 5000, 'the dropped window gone')
  await until(() => is(1, 1), 5000, 'declared again after the reconnect')
  a.setPresence(null, true)
  await until(() => is(0, 0), 5000, 'null clears the view')
})

test('integration: a restart gives another epoch and a reload (C19 a); the next run continues it', async (t) => {
  const host = createServerHost({ url: server.url, token, WebSocket: WS, frames: false, reconnect: { initialMs: 100, maxMs: 300 } })
  t.after(() => host.close())
  await host.ready
  const epoch1 = host.client.hello!.signalEpoch
  const s = await host.createSession()
  await host.send(s.id, 'First.')
  await runEnded(host, s.id)
  const resyncs: string[] = []
  host.client.onResync((r) => resyncs.push(r.reason))
  await server.stop()
  await server.launch()
  await until(() => host.connection.get().status === 'open' && resyncs.length === 1, 20_000, 'reconnect and reload')
  assert.notEqual(host.client.hello!.signalEpoch, epoch1)
  assert.deepEqual(resyncs, ['epoch'])
  assert.deepEqual(host.streams.transcript(s.id), await stored(host.client, s.id))
  await host.send(s.id, 'Second.')
  await runEnded(host, s.id, 2)
  assert.equal(host.client.cursor(s.id)?.epoch, host.client.hello!.signalEpoch, 'the cursor is in the new epoch')
  assert.deepEqual(host.streams.transcript(s.id), await stored(host.client, s.id))
})

test('integration C12: a revoked token closes with the 401 type and stops the retries', async (t) => {
  const name = 'sdk-revoke'
  const tok = server.mintToken(name)
  const cp = await CutProxy.start(server.port)
  t.after(() => cp.close())
  const client = createServerClient({ url: cp.url, token: tok, WebSocket: WS, reconnect: { initialMs: 50, maxMs: 100 } })
  t.after(() => client.close())
  await client.ready
  server.revokeToken(name)
  await until(() => client.connection.get().status === 'unauthorized', 10_000, 'unauthorized')
  const st = client.connection.get()
  assert.ok(st.status === 'unauthorized' && st.error instanceof TokenRefusedError)
  const accepted = cp.accepted
  await new Promise((r) => setTimeout(r, 600))
  assert.equal(cp.accepted, accepted, 'no reconnect')
  await assert.rejects(client.call('sessions.list', {}), TokenRefusedError)
  // A new client with the revoked token: HTTP 401 at the upgrade, one attempt.
  const again = createServerClient({ url: cp.url, token: tok, WebSocket: WS, reconnect: { initialMs: 50, maxMs: 100 } })
  t.after(() => again.close())
  await assert.rejects(again.ready, TokenRefusedError)
  await new Promise((r) => setTimeout(r, 300))
  assert.equal(cp.accepted, accepted + 1)
})

test('integration C13: another server at the same URL (another hostId) stops the client', async (t) => {
  const db2 = new Database()
  const other = await ServerProcess.start({ db: db2 })
  const tok2 = other.mintToken('sdk-other')
  const port = other.port
  // Remember H1 from the main server, then reach the other server at "the same URL".
  const cp = await CutProxy.start(server.port)
  t.after(() => cp.close())
  const client = createServerClient({ url: cp.url, token: tok2, WebSocket: WS, hostId: (await probeHostId()), reconnect: { initialMs: 50, maxMs: 100 } })
  t.after(async () => {
    client.close()
    await other.stop()
    other.cleanup()
    db2.drop()
  })
  cp.targetPort = port
  await assert.rejects(client.ready, (e: unknown) => (e as { kind?: string }).kind === 'host-changed')
  assert.equal(client.connection.get().status, 'hostChanged')
})

async function probeHostId(): Promise<string> {
  const c = createServerClient({ url: server.url, token, WebSocket: WS })
  const h = await c.ready
  c.close()
  return h.hostId
}
