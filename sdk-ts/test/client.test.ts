// createServerClient against a fake server (FS) and a cut proxy (CP): the reconnect, heartbeat,
// auth and resume client cases (shared/cases/client-cases.md).
import assert from 'node:assert/strict'
import net from 'node:net'
import { test } from 'node:test'
import { WebSocket } from 'ws'
import {
  ClosedError,
  ConnectionDroppedError,
  ConnectTimeoutError,
  ForbiddenError,
  HostChangedError,
  NotOfferedError,
  PROTOCOL_VERSION,
  ServerUnavailableError,
  TokenRefusedError,
  VersionMismatchError,
  classifyClose,
  createServerClient,
  isTerminal,
  type ConnectionState,
  type ServerClient,
  type ServerClientOptions,
  type WebSocketConstructor,
  type StreamEvent,
  type WireSignal,
} from '../src/index.js'
import { applyLiveEvent, createSessionStreams } from '../src/chat/index.js'
import { createServerHost } from '../src/adapters/index.js'
import { FakeClock, realDelay, until } from './helpers/clock.js'
import { FakeServer, NO_ANSWER, helloResult, type Req } from './helpers/fake-server.js'
import { CutProxy } from './helpers/proxy.js'

const WS = WebSocket as unknown as WebSocketConstructor
const A = 'session-A'
const B = 'session-B'

function mk(url: string, extra: Partial<ServerClientOptions> = {}): ServerClient {
  return createServerClient({ url, token: 'tok', WebSocket: WS, appVersion: 'test', ...extra })
}

function md(sessionId: string, seq: number, text = `t${seq}`): WireSignal {
  return { kind: 'event', sessionId, runId: 'r', event: { kind: 'markdown', text, streaming: true, turnId: 'T' }, $seq: seq }
}

function states(c: ServerClient): ConnectionState['status'][] {
  const out: ConnectionState['status'][] = [c.connection.get().status]
  c.connection.subscribe((s) => out.push(s.status))
  return out
}

async function freePort(): Promise<number> {
  const s = net.createServer()
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()))
  const port = (s.address() as net.AddressInfo).port
  await new Promise<void>((r) => s.close(() => r()))
  return port
}

/** A fake server behind a cut proxy, both closed when the test ends. */
async function rig(t: { after(fn: () => unknown): void }): Promise<{ fs: FakeServer; cp: CutProxy }> {
  const fs = await FakeServer.start()
  t.after(() => fs.close())
  const cp = await CutProxy.start(fs.port)
  t.after(() => cp.close())
  return { fs, cp }
}

/** A FS whose sessions.resume answers from a per-session log: every signal after afterSeq. */
function serveLog(fs: FakeServer, log: Map<string, WireSignal[]>) {
  fs.handlers['sessions.resume'] = (req: Req) => {
    const { sessionId, afterSeq } = req.params as { sessionId: string; afterSeq: number }
    const all = log.get(sessionId) ?? []
    return { ok: true, signals: all.filter((s) => s.$seq! > afterSeq).map(({ $seq, ...signal }) => ({ seq: $seq!, signal })) }
  }
}

test('handshake: subprotocols, hello first with the version range, typed calls, MethodNotFound is NotOfferedError', async (t) => {
  const fs = await FakeServer.start()
  t.after(() => fs.close())
  const offered: string[] = []
  fs.wss.on('headers', (_h, req) => offered.push(String(req.headers['sec-websocket-protocol'])))
  const c = mk(fs.url)
  t.after(() => c.close())
  const hello = await c.ready
  assert.equal(hello.hostId, 'H1')
  assert.deepEqual(offered, ['zidane,zidane.bearer.tok'])
  const first = fs.requests()[0]!
  assert.equal(first.method, 'ipc.hello')
  assert.deepEqual(first.params, { protocolVersion: PROTOCOL_VERSION, minProtocolVersion: PROTOCOL_VERSION, appVersion: 'test' })
  assert.equal(c.offers('chat.send'), true)
  assert.equal(c.offers('approvals.list'), false)
  fs.handlers['chat.send'] = () => ({ runId: 'r1' })
  assert.deepEqual(await c.call('chat.send', { sessionId: A, prompt: 'hi' }), { runId: 'r1' })
  await assert.rejects(c.call('tokens.list', {}), (e: unknown) => e instanceof NotOfferedError && e.code === -32601 && e.method === 'tokens.list')
  assert.equal(c.notify('chat.send', { sessionId: A, prompt: 'n' }), true)
  await until(() => fs.requests('chat.send').length === 2)
  assert.equal(fs.requests('chat.send')[1]!.id, undefined, 'a notification has no id')
})

test('version mismatch is a terminal VersionMismatchError', async (t) => {
  const fs = await FakeServer.start()
  t.after(() => fs.close())
  fs.handlers['ipc.hello'] = (req) => {
    req.conn.error(req.id, -32010, 'Protocol version mismatch: the server speaks v17, the client v16. Upgrade the client.', { daemon: helloResult() })
    return NO_ANSWER
  }
  const clock = new FakeClock()
  const c = mk(fs.url, { clock })
  await assert.rejects(c.ready, VersionMismatchError)
  assert.equal(c.connection.get().status, 'versionMismatch')
  await clock.advance(60_000)
  assert.equal(fs.conns.length, 1)
  c.close()
})

test('C01 close() wins over every pending reconnect', async (t) => {
  // (a) the server is down: close during the wait between attempts.
  const down = await freePort()
  const cp = await CutProxy.start(down)
  t.after(() => cp.close())
  const clock = new FakeClock()
  const c = mk(cp.url, { clock })
  await until(() => c.connection.get().status === 'retrying', 5000, 'first failure')
  await clock.advance(200)
  c.close()
  await assert.rejects(c.ready, ClosedError)
  await clock.advance(60_000)
  assert.equal(cp.accepted, 1)
  assert.equal(c.connection.get().status, 'closed')
  assert.equal(clock.pending, 0, 'no timer left')

  // (b) close while the socket is CONNECTING; the proxy forwards the upgrade late.
  const fs = await FakeServer.start()
  t.after(() => fs.close())
  const cp2 = await CutProxy.start(fs.port)
  t.after(() => cp2.close())
  cp2.stall()
  const clock2 = new FakeClock()
  const c2 = mk(cp2.url, { clock: clock2 })
  await until(() => cp2.accepted === 1)
  c2.close()
  await clock2.advance(1000)
  cp2.release()
  await realDelay(100)
  await clock2.advance(60_000)
  assert.equal(fs.requests('ipc.hello').length, 0, 'no hello on the late socket')
  assert.equal(cp2.accepted, 1)
  assert.equal(c2.connection.get().status, 'closed')

  // (c) a second close does nothing.
  const seen = states(c2)
  c2.close()
  assert.deepEqual(seen, ['closed'])
})

test('C02 connect timeout aborts cleanly and the retries go on with backoff', async (t) => {
  const { fs, cp } = await rig(t)
  cp.stall()
  const clock = new FakeClock()
  const errors: Error[] = []
  const c = mk(cp.url, { clock, connectTimeoutMs: 10_000, onError: (e) => errors.push(e) })
  const attempts: number[] = []
  c.connection.subscribe((s) => {
    if (s.status === 'connecting') attempts.push(clock.t)
  })
  await until(() => cp.accepted === 1)
  await clock.advance(10_000)
  const s = c.connection.get()
  assert.equal(s.status, 'retrying')
  assert.ok(s.status === 'retrying' && s.error instanceof ConnectTimeoutError)
  // Four more cycles: wait, attempt, 10 s timeout.
  for (let i = 0; i < 4; i++) {
    const before = cp.accepted
    await clock.advance(500 * 2 ** i)
    await until(() => cp.accepted === before + 1, 5000, `attempt ${i + 2}`)
    await clock.advance(10_000)
  }
  assert.equal(cp.accepted, 5, 'exactly five sockets')
  assert.deepEqual(attempts, [10_500, 21_500, 33_500, 47_500], 'backoff 0.5 s, 1 s, 2 s, 4 s after each timeout')
  assert.equal(errors.filter((e) => e instanceof ConnectTimeoutError).length, 5)
  assert.equal(clock.pending, 1, 'only the next retry is scheduled')
  c.close()
  assert.equal(clock.pending, 0)
  assert.equal(fs.conns.length, 0)
})

test('C03 at most one socket at a time', async (t) => {
  const { fs, cp } = await rig(t)
  // (a) 502: one new attempt per failed attempt.
  cp.respond(502)
  const clock = new FakeClock()
  const c = mk(cp.url, { clock })
  await until(() => c.connection.get().status === 'retrying')
  assert.equal(cp.accepted, 1)
  // (b) reconnect() during the wait starts the attempt early, once.
  c.reconnect()
  c.reconnect()
  await until(() => c.connection.get().status === 'retrying' && cp.accepted === 2)
  await realDelay(50)
  assert.equal(cp.accepted, 2)
  c.close()

  // (c) 20 resets 50 ms apart (real timers): never two sockets.
  cp.forward()
  let live = 0
  let maxLive = 0
  class Counting extends WebSocket {
    constructor(url: string, protocols: string[]) {
      super(url, protocols)
      live++
      maxLive = Math.max(maxLive, live)
      this.once('close', () => live--)
    }
    override terminate() {
      if (this.readyState !== this.CLOSED) live-- , this.removeAllListeners('close')
      super.terminate()
    }
  }
  const c2 = mk(cp.url, { WebSocket: Counting as unknown as WebSocketConstructor, reconnect: { initialMs: 10, maxMs: 40 } })
  t.after(() => c2.close())
  await c2.ready
  for (let i = 0; i < 20; i++) {
    cp.rst()
    await realDelay(50)
  }
  await until(() => c2.connection.get().status === 'open' && fs.openConns().length === 1, 5000, 'one connection at the end')
  assert.ok(maxLive <= 1, `at most one socket at a time, saw ${maxLive}`)
  const got: WireSignal[] = []
  c2.onSignal((s) => got.push(s))
  fs.pushAll(md(A, 1))
  await until(() => got.length >= 1)
  await realDelay(30)
  assert.equal(got.length, 1)
})

test('C03 host.refresh() during the backoff starts the attempt early, never a second socket', async (t) => {
  const { fs, cp } = await rig(t)
  fs.handlers['sessions.list'] = () => ({ sessions: [] })
  const clock = new FakeClock()
  const client = mk(cp.url, { clock })
  const host = createServerHost({ client, frames: false })
  t.after(() => {
    host.close()
    client.close()
  })
  await host.ready
  cp.rst()
  await until(() => client.connection.get().status === 'retrying')
  const before = cp.accepted
  const r1 = host.refresh()
  const r2 = host.refresh()
  await Promise.all([r1, r2])
  assert.equal(cp.accepted, before + 1, 'one new socket for both refreshes')
  assert.equal(client.connection.get().status, 'open')
  await clock.advance(60_000)
  assert.equal(cp.accepted, before + 1, 'the cancelled wait dials nothing later')
  assert.equal(fs.openConns().length, 1)
})

test('C05 backoff resets after a real success, and only then', async (t) => {
  const down = await freePort()
  const fs = await FakeServer.start()
  t.after(() => fs.close())
  const cp = await CutProxy.start(down)
  t.after(() => cp.close())
  const clock = new FakeClock()
  const c = mk(cp.url, { clock })
  t.after(() => c.close())
  const attempts: number[] = []
  c.connection.subscribe((s) => {
    if (s.status === 'connecting') attempts.push(clock.t)
  })
  const delays: number[] = []
  c.connection.subscribe((s) => {
    if (s.status === 'retrying') delays.push(s.delayMs)
  })
  /** Waits for each failure (real I/O), then advances the fake clock by its announced delay. */
  const followRetries = async (n: number) => {
    const base = delays.length
    for (let i = 0; i < n; i++) {
      await until(() => delays.length > base + i, 5000, `failure ${i + 1}`)
      await clock.advance(delays[base + i]!)
    }
  }
  await followRetries(6)
  assert.deepEqual(attempts, [500, 1500, 3500, 7500, 15_500, 30_500])
  await until(() => delays.length === 7)
  assert.deepEqual(delays, [500, 1000, 2000, 4000, 8000, 15_000, 15_000], '0.5, 1, 2, 4, 8, 15, 15 s')
  cp.targetPort = fs.port // the server comes up during the 15 s wait
  await clock.advance(15_000)
  await until(() => c.connection.get().status === 'open')
  // Healthy for 60 s: each ping is answered (real I/O) before its deadline can fire.
  for (let k = 1; k <= 3; k++) {
    const pings = fs.requests('$/ping').length
    await clock.advance(20_000)
    await until(() => fs.requests('$/ping').length === pings + 1, 5000, 'a ping')
    await realDelay(50)
  }
  assert.equal(c.connection.get().status, 'open')
  attempts.length = 0
  const cut = clock.t
  cp.rst()
  await until(() => c.connection.get().status === 'retrying')
  await clock.advance(500)
  assert.deepEqual(attempts, [cut + 500], 'the first retry after a healthy period waits 0.5 s')
  await until(() => c.connection.get().status === 'open')

  // (b) accepted and closed with 1011 before hello: the delays keep doubling.
  fs.handlers['ipc.hello'] = (req) => {
    req.conn.ws.close(1011, 'boom')
    return NO_ANSWER
  }
  delays.length = 0
  cp.rst()
  await followRetries(10)
  assert.deepEqual(delays.slice(0, 10), [500, 1000, 2000, 4000, 8000, 15_000, 15_000, 15_000, 15_000, 15_000], 'no hello, no reset')
})

test('C06 a call is never replayed after a reconnect', async (t) => {
  const { fs, cp } = await rig(t)
  const clock = new FakeClock()
  const c = mk(cp.url, { clock })
  t.after(() => c.close())
  await c.ready
  // (a) while waiting to retry, a call rejects at once and is never sent.
  cp.rst()
  await until(() => c.connection.get().status === 'retrying')
  await assert.rejects(c.call('chat.send', { sessionId: A, prompt: 'hi' }), (e: unknown) => e instanceof ConnectionDroppedError && !e.outcomeUnknown)
  await clock.advance(500)
  await until(() => c.connection.get().status === 'open')
  assert.equal(fs.requests('chat.send').length, 0)
  // (b) a chat.send on the wire when the connection resets: outcome unknown, not resent.
  fs.handlers['chat.send'] = () => NO_ANSWER
  const p = c.call('chat.send', { sessionId: A, prompt: 'hi' })
  await until(() => fs.requests('chat.send').length === 1)
  cp.rst()
  await assert.rejects(p, (e: unknown) => e instanceof ConnectionDroppedError && e.outcomeUnknown && /may or may not have run/.test(e.message))
  await clock.advance(1000)
  await until(() => c.connection.get().status === 'open')
  await realDelay(50)
  assert.equal(fs.requests('chat.send').length, 1, 'the server saw one chat.send')
})

test('reconnect: false closes the client at the first drop, with the drop as its error', async (t) => {
  const { fs, cp } = await rig(t)
  const clock = new FakeClock()
  const c = mk(cp.url, { clock, reconnect: false })
  await c.ready
  cp.rst()
  await until(() => c.connection.get().status === 'closed')
  const s = c.connection.get()
  assert.ok(s.status === 'closed' && s.error instanceof ConnectionDroppedError)
  await clock.advance(60_000)
  assert.equal(fs.conns.length, 1)
  await assert.rejects(c.call('sessions.list', {}), ConnectionDroppedError)
  c.close()
})

test('C07 handlers and sockets do not multiply across reconnects', async (t) => {
  const { fs, cp } = await rig(t)
  const c = mk(cp.url, { reconnect: { initialMs: 5, maxMs: 10 } })
  t.after(() => c.close())
  const seen = states(c)
  const calls: WireSignal[] = []
  c.onSignal('event', (s) => calls.push(s))
  await c.ready
  c.follow(A, { fresh: true })
  for (let i = 0; i < 3; i++) {
    const n = fs.conns.length
    cp.rst()
    // The next cut waits for this connection's resume to reach the server: a cut while the frame
    // is still in the proxy would lose it (the test's race under load, not the client's).
    await until(() => fs.conns.length === n + 1 && c.connection.get().status === 'open' && fs.last.frames.some((f) => f.method === 'sessions.resume'))
  }
  fs.pushAll(md(A, 1))
  await until(() => calls.length === 1)
  await realDelay(30)
  assert.equal(calls.length, 1)
  assert.equal(fs.openConns().length, 1)
  for (const conn of fs.conns.slice(1)) assert.equal(conn.frames.filter((f) => f.method === 'sessions.resume').length, 1, 'one resume per followed session per connection')
  for (let i = 1; i < seen.length; i++) assert.notEqual(seen[i], seen[i - 1], `one transition per change: ${seen.join(' ')}`)
  assert.deepEqual(seen, ['connecting', 'open', 'retrying', 'connecting', 'open', 'retrying', 'connecting', 'open', 'retrying', 'connecting', 'open'])
})

test('C08 every pending call settles on close, including ones queued before open', async (t) => {
  const { fs, cp } = await rig(t)
  // Queued before hello, then close(): ClosedError, and ready rejects.
  cp.stall()
  const c = mk(cp.url)
  const queued = c.call('sessions.list', {})
  c.close()
  await assert.rejects(queued, ClosedError)
  await assert.rejects(c.ready, ClosedError)
  // In flight when the connection resets: dropped.
  cp.release()
  fs.handlers['sessions.list'] = () => NO_ANSWER
  const c2 = mk(cp.url)
  t.after(() => c2.close())
  await c2.ready
  const inflight = c2.call('sessions.list', {})
  await until(() => fs.requests('sessions.list').length === 1)
  cp.rst()
  await assert.rejects(inflight, ConnectionDroppedError)
  // send throws (the socket moved to CLOSING between the check and the write): dropped.
  let throwOnSend = false
  class Throwing extends WebSocket {
    override send(data: unknown) {
      if (throwOnSend) throw new Error('WebSocket is not open: readyState 2 (CLOSING)')
      super.send(data as string)
    }
  }
  const c3 = mk(fs.url, { WebSocket: Throwing as unknown as WebSocketConstructor })
  t.after(() => c3.close())
  await c3.ready
  throwOnSend = true
  await assert.rejects(c3.call('sessions.list', {}), (e: unknown) => e instanceof ConnectionDroppedError && /CLOSING/.test(e.message))
})

test('C09 a half-open socket is detected by the heartbeat and dropped without the close handshake', async (t) => {
  const { fs, cp } = await rig(t)
  const log = new Map<string, WireSignal[]>([[A, []]])
  serveLog(fs, log)
  const emit = (seq: number) => {
    const s = md(A, seq)
    log.get(A)!.push(s)
    fs.pushAll(s)
  }
  const c = mk(cp.url, { heartbeatMs: 200, reconnect: { initialMs: 50, maxMs: 100 } })
  t.after(() => c.close())
  const got: number[] = []
  c.onSignal('event', (s) => got.push(s.$seq!))
  await c.ready
  c.follow(A, { fresh: true })
  for (let i = 1; i <= 3; i++) emit(i)
  await until(() => got.length === 3)
  fs.handlers['chat.send'] = () => NO_ANSWER
  const pendingSend = c.call('chat.send', { sessionId: A, prompt: 'x' })
  await until(() => fs.requests('chat.send').length === 1)
  cp.blackhole()
  const cutAt = Date.now()
  for (let i = 4; i <= 9; i++) emit(i)
  await assert.rejects(pendingSend, ConnectionDroppedError)
  assert.ok(Date.now() - cutAt < 3000, 'declared dead within heartbeat plus the ping timeout, not after a close handshake')
  await until(() => got.length === 9, 5000, 'S#1..9')
  assert.deepEqual(got, [1, 2, 3, 4, 5, 6, 7, 8, 9])
  const resumes = fs.requests('sessions.resume')
  assert.equal(resumes.at(-1)!.params.afterSeq, 3)
})

test('C09 a ping answer held behind a backlog of signals is not a dead connection; silence after it is', async (t) => {
  const fs = await FakeServer.start()
  t.after(() => fs.close())
  const log = new Map<string, WireSignal[]>([[A, []]])
  serveLog(fs, log)
  // The server queues the answer behind the signals it is sending (as zidane-server's in-order
  // send queue does): no answer while signals flow.
  fs.handlers['$/ping'] = () => NO_ANSWER
  const c = mk(fs.url, { heartbeatMs: 100, pingTimeoutMs: 150, reconnect: { initialMs: 20, maxMs: 40 } })
  t.after(() => c.close())
  const transitions = states(c)
  let got = 0
  c.onSignal('event', () => got++)
  await c.ready
  c.follow(A, { fresh: true })
  let seq = 0
  const flow = setInterval(() => {
    const s = md(A, ++seq)
    log.get(A)!.push(s)
    fs.pushAll(s)
  }, 20)
  t.after(() => clearInterval(flow))
  await until(() => fs.requests('$/ping').length === 1, 5000, 'a ping')
  await realDelay(1000) // over six ping timeouts with the ping unanswered and signals flowing
  assert.deepEqual(transitions, ['connecting', 'open'], 'no drop while frames arrive')
  assert.equal(fs.conns.length, 1)
  assert.ok(got > 10)
  clearInterval(flow) // now silence: the unanswered ping's deadline declares the connection dead
  const quietAt = Date.now()
  await until(() => transitions.includes('retrying'), 5000, 'declared dead after the silence')
  assert.ok(Date.now() - quietAt < 1500, 'within the heartbeat plus the ping timeout of the last frame')
})

test('C10 throttled timers do not look like a dead server', async (t) => {
  const fs = await FakeServer.start()
  t.after(() => fs.close())
  const clock = new FakeClock()
  const c = mk(fs.url, { clock, heartbeatMs: 20_000 })
  t.after(() => c.close())
  await c.ready
  await clock.jump(65_000) // the heartbeat timer fires 45 s late; the ping goes out now
  await until(() => fs.requests('$/ping').length === 1)
  await realDelay(50) // the answer arrives within milliseconds of the real send
  await clock.advance(20_000)
  await until(() => fs.requests('$/ping').length === 2, 5000, 'the next ping')
  await realDelay(50)
  await clock.advance(10_000)
  assert.equal(c.connection.get().status, 'open')
  assert.equal(fs.conns.length, 1, 'no reconnect')
  assert.ok(fs.requests('$/ping').length >= 2)
})

test('C10 a page that becomes visible after 10 minutes hidden pings at once and judges by that answer', async (t) => {
  const fs = await FakeServer.start()
  t.after(() => fs.close())
  const listeners = new Set<() => void>()
  const doc = {
    visibilityState: 'hidden',
    addEventListener: (_t: string, f: () => void) => listeners.add(f),
    removeEventListener: (_t: string, f: () => void) => listeners.delete(f),
  }
  ;(globalThis as { document?: unknown }).document = doc
  t.after(() => delete (globalThis as { document?: unknown }).document)
  const clock = new FakeClock()
  const c = mk(fs.url, { clock, heartbeatMs: 20_000 })
  t.after(() => c.close())
  await c.ready
  clock.t += 600_000 // hidden: the timers did not run
  const before = fs.requests('$/ping').length
  doc.visibilityState = 'visible'
  for (const f of listeners) f()
  await until(() => fs.requests('$/ping').length === before + 1, 5000, 'a ping on visible')
  await realDelay(50)
  await clock.jump(0) // the overdue heartbeat runs now; its ping is the one in flight or a new one
  await realDelay(50)
  await clock.advance(15_000)
  assert.equal(c.connection.get().status, 'open')
  assert.equal(fs.conns.length, 1, 'one connection: no reconnect after the hidden period')
  c.close()
  assert.equal(listeners.size, 0, 'close() removes the visibility listener')
})

test('C11 a refused token stops the retries (Node: the status; browser: the token check)', async (t) => {
  const { fs, cp } = await rig(t)
  for (const [status, type, terminal] of [
    [401, TokenRefusedError, 'unauthorized'],
    [403, ForbiddenError, 'forbidden'],
  ] as const) {
    cp.respond(status)
    const before = cp.accepted
    const clock = new FakeClock()
    const c = mk(cp.url, { clock })
    await assert.rejects(c.ready, type)
    assert.equal(c.connection.get().status, terminal)
    await clock.advance(120_000)
    assert.equal(cp.accepted - before, 1, `${status}: one attempt`)
    c.close()
  }
  cp.respond(503)
  const before = cp.accepted
  const clock = new FakeClock()
  const c = mk(cp.url, { clock })
  const seen: Array<{ delayMs: number; error: unknown }> = []
  c.connection.subscribe((s) => {
    if (s.status === 'retrying') seen.push(s)
  })
  await until(() => c.connection.get().status === 'retrying')
  const first = c.connection.get()
  assert.ok(first.status === 'retrying' && first.error instanceof ServerUnavailableError)
  for (let i = 0; i < 4; i++) {
    await until(() => seen.length > i, 5000, `503 failure ${i + 1}`)
    await clock.advance(seen[i]!.delayMs)
  }
  await until(() => seen.length === 5)
  assert.deepEqual(seen.map((s) => s.delayMs), [500, 1000, 2000, 4000, 8000], '503 keeps retrying with backoff')
  assert.ok(seen.every((s) => s.error instanceof ServerUnavailableError))
  assert.equal(cp.accepted - before, 5)
  c.close()

  // A browser-like WebSocket: no status, only error + close(1006). The client asks the token check.
  class Blind extends WebSocket {
    override addEventListener(type: string, fn: (e: any) => void) {
      if (type === 'error') return super.addEventListener('error', () => fn({}))
      if (type === 'close') return super.addEventListener('close', (e) => fn({ code: 1006, reason: '' }))
      return super.addEventListener(type as 'open', fn)
    }
  }
  cp.respond(401)
  const checks: Array<{ url: string; auth: string | undefined }> = []
  let answer = 200
  const clock2 = new FakeClock()
  const before2 = cp.accepted
  const c2 = mk(cp.url, {
    clock: clock2,
    WebSocket: Blind as unknown as WebSocketConstructor,
    fetch: async (url, init) => {
      checks.push({ url, auth: init.headers['authorization'] })
      return { status: answer }
    },
  })
  await until(() => c2.connection.get().status === 'retrying')
  assert.deepEqual(checks, [{ url: `http://127.0.0.1:${cp.port}/zidane/token`, auth: 'Bearer tok' }])
  answer = 401
  await clock2.advance(500)
  await assert.rejects(c2.ready, TokenRefusedError)
  assert.equal(c2.connection.get().status, 'unauthorized')
  await clock2.advance(120_000)
  assert.equal(cp.accepted - before2, 2)
  assert.equal(checks.length, 2, 'one check before each retry, none after the refusal')
  c2.close()
})

test('C12 the close-code and status table: which are terminal', () => {
  const table: Array<[status: number | undefined, code: number | undefined, reason: string, kind: string, terminal: boolean]> = [
    [401, undefined, '', 'token-refused', true],
    [403, undefined, '', 'forbidden', true],
    [503, undefined, '', 'unavailable', false],
    [502, undefined, '', 'dropped', false],
    [500, undefined, '', 'dropped', false],
    [undefined, 1008, 'token revoked', 'token-refused', true],
    [undefined, 1008, 'origin not allowed', 'forbidden', true],
    [undefined, 1008, 'no ipc.hello within the handshake timeout', 'dropped', false],
    [undefined, 1008, 'no pong within the timeout', 'dropped', false],
    [undefined, 1000, '', 'dropped', false],
    [undefined, 1001, 'server shutting down', 'dropped', false],
    [undefined, 1002, 'protocol error', 'dropped', false],
    [undefined, 1006, '', 'dropped', false],
    [undefined, 1011, '', 'dropped', false],
    [undefined, 1013, 'send queue full: reconnect and resume', 'dropped', false],
  ]
  for (const [status, code, reason, kind, terminal] of table) {
    const e = classifyClose(status, code, reason)
    assert.equal(e.kind, kind, `${status ?? code} ${reason}`)
    assert.equal(isTerminal(e), terminal, `${status ?? code} ${reason}`)
  }
})

test('C12 a 1008 revocation close is terminal and pending calls reject with the token type', async (t) => {
  const fs = await FakeServer.start()
  t.after(() => fs.close())
  fs.handlers['sessions.list'] = () => NO_ANSWER
  const clock = new FakeClock()
  const c = mk(fs.url, { clock })
  await c.ready
  const p = c.call('sessions.list', {})
  await until(() => fs.requests('sessions.list').length === 1)
  fs.last.ws.close(1008, 'token revoked')
  await assert.rejects(p, TokenRefusedError)
  assert.equal(c.connection.get().status, 'unauthorized')
  await clock.advance(120_000)
  assert.equal(fs.conns.length, 1)
  c.close()
})

test('C13 another hostId at the URL stops the client: no resume, no reload', async (t) => {
  const fs1 = await FakeServer.start()
  const fs2 = await FakeServer.start()
  t.after(() => fs1.close())
  t.after(() => fs2.close())
  fs2.hello = helloResult({ hostId: 'H2', signalEpoch: 'E2' })
  const cp = await CutProxy.start(fs1.port)
  t.after(() => cp.close())
  const clock = new FakeClock()
  const c = mk(cp.url, { clock })
  t.after(() => c.close())
  const got: WireSignal[] = []
  c.onSignal((s) => got.push(s))
  await c.ready
  c.follow(A, { fresh: true })
  fs1.pushAll(md(A, 1))
  await until(() => got.length === 1)
  cp.targetPort = fs2.port
  cp.rst()
  await until(() => c.connection.get().status === 'retrying')
  await clock.advance(500)
  await until(() => c.connection.get().status === 'hostChanged')
  const s = c.connection.get()
  assert.ok(s.status === 'hostChanged' && s.error instanceof HostChangedError && s.error.expected === 'H1' && s.error.actual === 'H2')
  assert.match(s.status === 'hostChanged' ? s.error.message : '', /H1.*H2/)
  assert.equal(fs2.requests('sessions.resume').length, 0)
  assert.equal(fs2.requests('sessions.loadEvents').length, 0)
  await clock.advance(120_000)
  assert.equal(fs2.conns.length, 1, 'no retry')
  assert.deepEqual(c.cursor(A), { epoch: 'E1', seq: 1 }, "A's state is kept")
  // Only an explicit action continues.
  c.acceptHost()
  await until(() => c.connection.get().status === 'open')
  assert.equal(c.hello?.hostId, 'H2')
})

async function resumeScenario(t: { after(fn: () => unknown): void }, script: (req: Req, round: number) => unknown) {
  const { fs, cp } = await rig(t)
  const c = mk(cp.url, { reconnect: { initialMs: 5, maxMs: 10 } })
  t.after(() => c.close())
  const delivered: Array<[string, number]> = []
  const cursorOk: boolean[] = []
  c.onSignal((s) => {
    const sid = (s as { sessionId: string }).sessionId
    delivered.push([sid, s.$seq!])
    if (sid === A) cursorOk.push(c.cursor(A)?.seq === s.$seq)
  })
  await c.ready
  c.follow(A, { fresh: true })
  for (let i = 1; i <= 3; i++) fs.pushAll(md(A, i))
  await until(() => delivered.length === 3)
  let round = 0
  fs.handlers['sessions.resume'] = (req) => script(req, round++)
  cp.rst()
  return { fs, c, delivered, cursorOk }
}

const replay = (seqs: number[]) => ({ ok: true, signals: seqs.map((n) => ({ seq: n, signal: { kind: 'event', sessionId: A, runId: 'r', event: { kind: 'markdown', text: `t${n}`, streaming: true, turnId: 'T' } } })) })

test('C14 live signals during the replay are held, then applied exactly once', async (t) => {
  // Variant 1: live S#7 before the answer 4..7.
  const v1 = await resumeScenario(t, (req) => {
    req.conn.push(md(A, 7))
    req.conn.push(md(B, 5))
    return replay([4, 5, 6, 7])
  })
  await until(() => v1.delivered.filter(([s]) => s === A).length === 7)
  await realDelay(30)
  assert.deepEqual(v1.delivered.filter(([s]) => s === A).map(([, n]) => n), [1, 2, 3, 4, 5, 6, 7])
  const iB = v1.delivered.findIndex(([s]) => s === B)
  const i4 = v1.delivered.findIndex(([s, n]) => s === A && n === 4)
  assert.ok(iB >= 0 && iB < i4, 'B#5 is applied at once, not held behind A')
  assert.ok(v1.cursorOk.every(Boolean), 'the cursor moves before a handler sees the signal')

  // Variant 2: S#7 live, answer 4..6, then S#8 live.
  const v2 = await resumeScenario(t, (req) => {
    req.conn.push(md(A, 7))
    setTimeout(() => req.conn.push(md(A, 8)), 20)
    return replay([4, 5, 6])
  })
  await until(() => v2.delivered.length === 8)
  await realDelay(30)
  assert.deepEqual(v2.delivered.map(([, n]) => n), [1, 2, 3, 4, 5, 6, 7, 8])

  // Variant 3: S#9 live, answer 4..7 (8 missing): no S#9 over the hole; resume again from 7.
  const v3 = await resumeScenario(t, (req, round) => {
    if (round === 0) {
      req.conn.push(md(A, 9))
      return replay([4, 5, 6, 7])
    }
    assert.equal(req.params.afterSeq, 7)
    return replay([8, 9])
  })
  await until(() => v3.delivered.length === 9)
  await realDelay(30)
  assert.deepEqual(v3.delivered.map(([, n]) => n), [1, 2, 3, 4, 5, 6, 7, 8, 9])
})

test('an ephemeral stream:progress (no $seq) of a followed session is delivered at once and is no gap', async (t) => {
  const { fs, cp } = await rig(t)
  const c = mk(cp.url)
  t.after(() => c.close())
  const got: string[] = []
  c.onSignal((s) => got.push(s.$seq === undefined ? s.kind : String(s.$seq)))
  await c.ready
  c.follow(A, { fresh: true })
  fs.pushAll(md(A, 1))
  fs.pushAll({ kind: 'stream:progress', sessionId: A, runId: 'r', turnId: 'T', tokens: 3, tokensPerSecond: 30 })
  fs.pushAll(md(A, 2))
  await until(() => got.length === 3)
  await realDelay(30)
  assert.deepEqual(got, ['1', 'stream:progress', '2'])
  assert.equal(c.cursor(A)?.seq, 2)
  assert.equal(fs.requests('sessions.resume').length, 0, 'no resume: a signal without $seq is outside the sequence')
})

test('C15 the cursor survives a drop that brought nothing new', async (t) => {
  const { fs, cp } = await rig(t)
  const c = mk(cp.url, { reconnect: { initialMs: 5, maxMs: 10 } })
  t.after(() => c.close())
  const got: number[] = []
  c.onSignal((s) => got.push(s.$seq!))
  await c.ready
  c.follow(A, { fresh: true })
  c.follow('session-C', { fresh: true })
  for (let i = 1; i <= 3; i++) fs.pushAll(md(A, i))
  await until(() => got.length === 3)
  let n = 0
  fs.handlers['sessions.resume'] = (req) => {
    if (req.params.sessionId === A && n++ === 0) setTimeout(() => cp.rst(), 5) // drop right after an empty answer
    return { ok: true, signals: [] }
  }
  cp.rst()
  await until(() => fs.requests('sessions.resume').filter((r) => r.params.sessionId === A).length === 2, 5000, 'two resumes of A')
  const resumes = fs.requests('sessions.resume')
  for (const r of resumes.filter((x) => x.params.sessionId === A)) assert.deepEqual(r.params, { sessionId: A, epoch: 'E1', afterSeq: 3 })
  const cs = resumes.filter((x) => x.params.sessionId === 'session-C')
  assert.ok(cs.length >= 2)
  for (const r of cs) assert.deepEqual(r.params, { sessionId: 'session-C', epoch: 'E1', afterSeq: 0 })
})

test('C18 a dead connection’s replay stops, and the cursor never moves backward', async (t) => {
  const { fs, cp } = await rig(t)
  const log = new Map<string, WireSignal[]>([[A, []]])
  for (let i = 1; i <= 200; i++) log.get(A)!.push(md(A, i))
  serveLog(fs, log)
  const c = mk(cp.url, { reconnect: { initialMs: 5, maxMs: 10 } })
  t.after(() => c.close())
  const got: number[] = []
  const cursors: number[] = []
  c.onSignal((s) => {
    got.push(s.$seq!)
    cursors.push(c.cursor(A)!.seq)
    if (s.$seq === 53 && got.filter((x) => x === 53).length === 1) {
      cp.rst()
      for (let i = 201; i <= 210; i++) log.get(A)!.push(md(A, i))
    }
  })
  await c.ready
  c.follow(A, { cursor: { epoch: 'E1', seq: 3 } })
  cp.rst() // reconnect: resume from 3
  await until(() => got.at(-1) === 210, 5000, 'S#210')
  await realDelay(30)
  assert.deepEqual(got, Array.from({ length: 207 }, (_, i) => i + 4), 'every seq from 4 to 210 once, in order')
  for (let i = 1; i < cursors.length; i++) assert.ok(cursors[i]! > cursors[i - 1]!, 'the cursor only increases')
})

test('C19 epoch and gap reload; held live signals above the loadEvents watermark are applied once', async (t) => {
  const { fs, cp } = await rig(t)
  const c = mk(cp.url, { reconnect: { initialMs: 5, maxMs: 10 } })
  t.after(() => c.close())
  const got: number[] = []
  const resyncs: string[] = []
  c.onSignal((s) => got.push(s.$seq!))
  c.onResync((r) => resyncs.push(`${r.reason}:${r.page.events.length}`))
  await c.ready
  c.follow(A, { fresh: true })
  fs.pushAll(md(A, 1))
  await until(() => got.length === 1)
  // (a) a restart: another epoch. The reload takes the snapshot; E2 signals continue it.
  fs.hello = helloResult({ signalEpoch: 'E2' })
  fs.handlers['sessions.resume'] = (req) => (req.params.epoch === 'E2' ? { ok: true, signals: [] } : { ok: false, reason: 'epoch' })
  fs.handlers['sessions.loadEvents'] = (req) => {
    // Live deltas arrive during the reload: 41 is in the snapshot (watermark 41), 42 is not.
    req.conn.push(md(A, 41))
    req.conn.push(md(A, 42))
    return { events: [{ kind: 'user-prompt', text: 'p', turnId: 'u' }], start: 0, exact: true, $seq: 41, signalEpoch: 'E2' }
  }
  cp.rst()
  await until(() => got.includes(42))
  assert.deepEqual(resyncs, ['epoch:1'])
  assert.deepEqual(got, [1, 42], 'no E2 signal continues E1; 41 is in the snapshot, 42 applied once')
  assert.deepEqual(c.cursor(A), { epoch: 'E2', seq: 42 })
  // (b) gap while streaming, from a server without a watermark: held deltas are dropped and the
  // transcript is loaded again at run:end.
  fs.handlers['sessions.resume'] = () => ({ ok: false, reason: 'gap' })
  let loads = 0
  fs.handlers['sessions.loadEvents'] = (req) => {
    loads++
    if (loads === 1) req.conn.push(md(A, 50))
    return { events: [], start: 0, exact: true }
  }
  cp.rst()
  await until(() => resyncs.length === 2)
  assert.equal(resyncs[1], 'gap:0')
  assert.ok(!got.includes(50), 'a held delta without a watermark is not applied over the snapshot')
  fs.pushAll({ kind: 'run:end', sessionId: A, runId: 'r', ok: true, $seq: 51 })
  await until(() => resyncs.length === 3, 5000, 'reload at run:end')
})

test('C31 reconnect storm: one socket at a time, hello first, one resume per session per connection, nothing lost', async (t) => {
  const { fs, cp } = await rig(t)
  const log = new Map<string, WireSignal[]>([
    [A, []],
    [B, []],
  ])
  serveLog(fs, log)
  let live = 0
  let maxLive = 0
  class Counting extends WebSocket {
    private counted = true
    constructor(url: string, protocols: string[]) {
      super(url, protocols)
      live++
      maxLive = Math.max(maxLive, live)
      this.once('close', () => this.uncount())
    }
    private uncount() {
      if (this.counted) live--
      this.counted = false
    }
    override terminate() {
      this.uncount()
      super.terminate()
    }
  }
  const c = mk(cp.url, { WebSocket: Counting as unknown as WebSocketConstructor, heartbeatMs: 100, pingTimeoutMs: 100, reconnect: { initialMs: 10, maxMs: 40 } })
  const transitions = states(c)
  const streams = createSessionStreams({ client: c, frames: false })
  await c.ready
  c.follow(A, { fresh: true })
  c.follow(B, { fresh: true })
  // Two runs stream in A and B: markdown pieces, a tool row every 10th piece.
  let n = 0
  let gen: ReturnType<typeof setInterval> | undefined
  const startRuns = () => (gen = setInterval(() => {
    for (const id of [A, B]) {
      const l = log.get(id)!
      const seq = l.length + 1
      const k = ++n
      const s: WireSignal =
        seq % 10 === 0
          ? { kind: 'event', sessionId: id, runId: 'r', event: { kind: 'tool', tool: 'lookup', callId: `c${k}`, text: 'x', input: null, turnId: 'T' }, $seq: seq }
          : { kind: 'event', sessionId: id, runId: 'r', event: { kind: 'markdown', text: `${k} `, streaming: true, turnId: 'T' }, $seq: seq }
      l.push(s)
      fs.pushAll(s)
    }
  }, 7))
  startRuns()
  // 100 cuts at seeded random points, 50–80 ms apart.
  let seed = 31
  const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31)
  for (let i = 0; i < 100; i++) {
    await realDelay(50 + Math.floor(rnd() * 30))
    if (rnd() < 0.5) cp.rst()
    else cp.blackhole()
  }
  clearInterval(gen)
  assert.ok(log.get(A)!.length > 300)
  await until(() => c.connection.get().status === 'open' && [A, B].every((id) => c.cursor(id)?.seq === log.get(id)!.length), 10_000, 'caught up')
  for (const id of [A, B]) {
    const expected = log.get(id)!.reduce<readonly StreamEvent[]>((rows, s) => applyLiveEvent(rows, (s as { event: StreamEvent }).event), [])
    assert.deepEqual(streams.transcript(id), expected, `${id}: nothing lost, nothing twice`)
  }
  assert.ok(maxLive <= 1, `at most one socket at a time (saw ${maxLive})`)
  assert.ok(fs.conns.length > 20, `the storm reconnected (${fs.conns.length} connections)`)
  for (const conn of fs.conns) {
    if (conn.frames.length === 0) continue
    assert.equal(conn.frames[0]!.method, 'ipc.hello', 'hello first on every connection')
    for (const id of [A, B]) assert.ok(conn.frames.filter((f) => f.method === 'sessions.resume' && f.params.sessionId === id).length <= 1, 'one resume per session per connection')
  }
  c.close()
  const conns = fs.conns.length
  await realDelay(300)
  assert.equal(fs.conns.length, conns, 'nothing dials after close()')
  const allowed: Record<string, string[]> = {
    connecting: ['open', 'retrying', 'closed', 'unauthorized', 'forbidden', 'versionMismatch', 'hostChanged'],
    open: ['retrying', 'closed', 'unauthorized', 'forbidden', 'hostChanged'],
    retrying: ['connecting', 'closed'],
  }
  for (let i = 1; i < transitions.length; i++) assert.ok(allowed[transitions[i - 1]!]?.includes(transitions[i]!), `${transitions[i - 1]} → ${transitions[i]}`)
})

test('setPresence: sent as a notification when offered, declared again on every connection, never to a server without it', async (t) => {
  const { fs, cp } = await rig(t)
  fs.hello = helloResult({ methods: [...helloResult().methods, 'presence.set'] })
  const c = mk(cp.url, { reconnect: { initialMs: 5, maxMs: 10 } })
  t.after(() => c.close())
  c.setPresence(A, true) // before the handshake: goes out once hello answers
  await c.ready
  await until(() => fs.requests('presence.set').length === 1)
  c.setPresence(B, false)
  await until(() => fs.requests('presence.set').length === 2)
  cp.rst()
  await until(() => fs.conns.length === 2 && fs.last.frames.some((f) => f.method === 'presence.set'))
  const sent = fs.requests('presence.set')
  assert.deepEqual(sent.map((r) => [r.conn.index, r.id, r.params]), [
    [0, undefined, { sessionId: A, focused: true }],
    [0, undefined, { sessionId: B, focused: false }],
    [1, undefined, { sessionId: B, focused: false }],
  ])
  // A server that does not offer presence.set never gets it.
  fs.hello = helloResult()
  cp.rst()
  await until(() => fs.conns.length === 3 && c.connection.get().status === 'open')
  c.setPresence(null, false)
  await realDelay(50)
  assert.equal(fs.requests('presence.set').length, 3)
})

test('session:reset (issue 28) reloads the followed session through sessions.loadEvents, and the signals after it continue the snapshot', async (t) => {
  const { fs, cp } = await rig(t)
  const c = mk(cp.url, { reconnect: { initialMs: 5, maxMs: 10 } })
  t.after(() => c.close())
  const got: number[] = []
  const resyncs: string[] = []
  c.onSignal((s) => got.push(s.$seq!))
  c.onResync((r) => resyncs.push(`${r.reason}:${r.page.events.length}`))
  await c.ready
  c.follow(A, { fresh: true })
  fs.pushAll(md(A, 1))
  fs.pushAll(md(A, 2))
  await until(() => got.length === 2)
  fs.handlers['sessions.loadEvents'] = (req) => {
    req.conn.push(md(A, 4)) // after the reload's watermark
    return { events: [{ kind: 'user-prompt', text: 'kept', turnId: 'u' }], start: 0, exact: true, $seq: 3, signalEpoch: 'E1' }
  }
  fs.pushAll({ kind: 'session:reset', sessionId: A, reason: 'rollback', $seq: 3 })
  await until(() => got.includes(4))
  assert.deepEqual(resyncs, ['reset:1'])
  assert.deepEqual(got, [1, 2, 3, 4])
  assert.equal(c.cursor(A)?.seq, 4)
})
