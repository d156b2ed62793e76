// createRunHost in the page, and exposeRunHost / createWorkerHost over a real worker_threads Worker
// standing in for a Web Worker (worker protocol v1, C28, C29).
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Worker } from 'node:worker_threads'
import { WebSocket } from 'ws'
import { createRunHost, createServerApprovalsHost, createServerHost, createWorkerHost, type ChatHost, type RunHost } from '../src/adapters/index.js'
import { ClosedError, HostGoneError, WorkerVersionError, createServerClient, type WebSocketConstructor } from '../src/client/index.js'
import { FakeServer, NO_ANSWER } from './helpers/fake-server.js'
import type { StreamEvent } from '../src/index.js'
import { until } from './helpers/clock.js'

const WS = WebSocket as unknown as WebSocketConstructor
const worker = (mode: string) => new Worker(new URL('./fixtures/agent-worker.js', import.meta.url), { workerData: { mode } })

function rows(host: ChatHost, id: string) {
  return host.streams.transcript(id).map((e: StreamEvent) => `${e.kind}:${'text' in e ? e.text : 'message' in e ? e.message : ''}`)
}

async function answerNext(host: ChatHost, answer: unknown) {
  await until(() => host.interactions.get().length > 0, 5000, 'a question')
  await host.answer(host.interactions.get()[0]!.id, answer)
}

/** The seed's scripted run, checked through any host. */
async function seedRun(host: RunHost | ChatHost) {
  await host.ready
  const s = await host.createSession({ title: 't' })
  assert.equal(host.sessions.get()[0]!.id, s.id)
  await host.send(s.id, 'q')
  await answerNext(host, 'yes')
  await until(() => host.streams.getSnapshot(s.id).status === 'idle' && !host.streams.getSnapshot(s.id).running && rows(host, s.id).length === 5, 5000, 'run end')
  assert.deepEqual(rows(host, s.id), ['user-prompt:q', 'markdown:Looking it up.', 'tool:lookup(…)', 'tool-result:found it', 'markdown:Thanks.'])
  return s
}

test('run host: the seed run, the prompt echo, ask, follow-ups wait, an error row, cancel, restore', async () => {
  let n = 0
  const order: string[] = []
  let release!: () => void
  const host = createRunHost({
    newId: () => `id${++n}`,
    async run({ prompt, emit, ask, signal }) {
      order.push(`start ${prompt}`)
      if (prompt === 'boom') {
        emit({ kind: 'markdown', text: 'x', streaming: true })
        throw new Error('kaput')
      }
      if (prompt === 'slow') await new Promise<void>((r) => (release = r))
      if (prompt === 'wait') {
        await new Promise<void>((r) => signal.addEventListener('abort', () => r()))
        emit({ kind: 'markdown', text: 'after cancel', streaming: true })
        return
      }
      if (prompt === 'q') {
        emit({ kind: 'markdown', text: 'Looking ', streaming: true })
        emit({ kind: 'markdown', text: 'it up.', streaming: true })
        emit({ kind: 'tool', tool: 'lookup', callId: 'c1', text: 'lookup(…)', input: { query: prompt } })
        emit({ kind: 'tool-result', tool: 'lookup', callId: 'c1', text: 'found it' })
        const answer = await ask({ prompt: 'Use it?' })
        if (!signal.aborted) emit({ kind: 'markdown', text: answer ? 'Thanks.' : 'Never mind.', streaming: true })
        return
      }
      order.push(`end ${prompt}`)
    },
  })
  const s = await seedRun(host)
  // A follow-up waits for the current run.
  await host.send(s.id, 'slow')
  await host.send(s.id, 'next')
  await until(() => order.includes('start slow'))
  assert.ok(!order.includes('start next'))
  release()
  await until(() => order.includes('end next'))
  assert.ok(order.indexOf('end slow') < order.indexOf('start next'))
  // A run that throws: an error row and status error; the next prompt still runs.
  await host.send(s.id, 'boom')
  await until(() => host.sessions.get()[0]!.status === 'error')
  assert.deepEqual(rows(host, s.id).slice(-2), ['markdown:x', 'error:kaput'])
  await host.send(s.id, 'fine')
  await until(() => order.includes('end fine'))
  assert.equal(host.sessions.get()[0]!.status, 'idle')
  // Cancel: the run's signal aborts, nothing it emits afterwards is shown.
  await host.send(s.id, 'wait')
  await until(() => host.streams.getSnapshot(s.id).running)
  await host.cancel(s.id)
  await until(() => !host.streams.getSnapshot(s.id).running)
  assert.deepEqual(rows(host, s.id).slice(-1), ['error:Cancelled.'])
  // restore puts a saved session with its history at the top.
  host.restore({ id: 'saved', title: 'Saved', status: 'idle' }, [{ kind: 'user-prompt', text: 'old', turnId: 'u' }])
  assert.equal(host.sessions.get()[0]!.id, 'saved')
  assert.deepEqual(rows(host, 'saved'), ['user-prompt:old'])
  host.close()
  await assert.rejects(host.send(s.id, 'x'), ClosedError)
})

test('worker host: the seed run through a real worker_threads Worker', async (t) => {
  const w = worker('ok')
  const host = createWorkerHost(w)
  t.after(() => host.close())
  await seedRun(host)
})

test('C28 version mismatch: drop, warn once per peer, and tell it apart from foreign messages', async (t) => {
  // The worker sends a v2 and a version-less message, a foreign object and an unknown v1 type.
  const w = worker('garbage')
  const pageWarnings: string[] = []
  const workerWarnings: string[] = []
  w.on('message', (m: { source?: string; warning?: string }) => {
    if (m.source === 'test') workerWarnings.push(m.warning!)
  })
  const host = createWorkerHost(w, { onWarning: (m) => pageWarnings.push(m) })
  t.after(() => host.close())
  await host.ready
  await until(() => pageWarnings.length === 2, 5000, 'page warnings')
  assert.equal(pageWarnings.filter((m) => /version/.test(m)).length, 1, 'one version warning per peer')
  assert.match(pageWarnings[0]!, /version 2; this side speaks v1/)
  assert.match(pageWarnings[1]!, /unknown type "no-such-type"/)
  assert.equal(host.streams.transcript('s').length, 0, 'nothing applied')
  // The page sends a v2 message to the v1 worker: dropped with one warning.
  w.postMessage({ v: 2, type: 'send', sessionId: 's', runId: 'r', prompt: 'x' })
  w.postMessage({ v: 2, type: 'send', sessionId: 's', runId: 'r2', prompt: 'x' })
  await until(() => workerWarnings.length === 1)
  assert.match(workerWarnings[0]!, /from the page at version 2; this side speaks v1/)
  // The host still works.
  await seedRun(host)
  assert.equal(workerWarnings.length, 1)

  // A worker whose first message is at another version: ready rejects with a typed error.
  const w2 = worker('v2')
  const errors: Error[] = []
  const host2 = createWorkerHost(w2, { onError: (e) => errors.push(e), onWarning: () => {} })
  t.after(() => host2.close())
  await assert.rejects(host2.ready, (e: unknown) => e instanceof WorkerVersionError && e.theirs === 2 && e.ours === 1)
  assert.ok(errors[0] instanceof WorkerVersionError)
  await assert.rejects(host2.createSession(), WorkerVersionError)
})

test('C29 a dead worker settles everything that waits on it', async (t) => {
  // (a) run throws after two deltas: an error row, status error, and a follow-up still runs.
  {
    const host = createWorkerHost(worker('ok'))
    t.after(() => host.close())
    await host.ready
    const s = await host.createSession()
    await host.send(s.id, 'boom')
    await until(() => host.sessions.get()[0]!.status === 'error')
    assert.deepEqual(rows(host, s.id), ['user-prompt:boom', 'markdown:Half done', 'error:the model failed'])
    await host.send(s.id, 'again')
    await answerNext(host, null)
    await until(() => rows(host, s.id).at(-1) === 'markdown:Never mind.')
  }
  // (b) the run waits in ask and the worker is terminated; (c) the worker exits mid-stream.
  for (const how of ['terminate', 'exit'] as const) {
    const w = worker('ok')
    const errors: Error[] = []
    const host = createWorkerHost(w, { onError: (e) => errors.push(e) })
    t.after(() => host.close())
    await host.ready
    const s = await host.createSession()
    await host.send(s.id, how === 'exit' ? 'exit' : 'q')
    if (how === 'terminate') {
      await until(() => host.interactions.get().length === 1)
      await w.terminate()
    }
    await until(() => host.sessions.get()[0]!.status === 'error', 5000, `${how}: status error`)
    assert.equal(host.interactions.get().length, 0, 'the pending question settled')
    assert.match(rows(host, s.id).at(-1)!, /^error:The worker exited/)
    assert.ok(errors[0] instanceof HostGoneError)
    await assert.rejects(host.send(s.id, 'later'), HostGoneError)
  }
})

test('createServerApprovalsHost: pending approvals from list and signals, answer, safelist, mode; not offered', async (t) => {
  const fs = await FakeServer.start()
  t.after(() => fs.close())
  const req = (id: string, at: number) => ({ requestId: id, sessionId: 'S', runId: 'r', callId: `c${id}`, tool: 'exec', input: { cmd: 'ls' }, summary: 'ls', cwd: '/w', createdAt: at, expiresAt: at + 60_000 })
  fs.handlers['approvals.list'] = () => ({ requests: [req('b', 2), req('a', 1)] })
  fs.handlers['approvals.answer'] = () => ({ ok: true })
  fs.handlers['safelist.list'] = (r) => ({ entries: [{ id: 'e1', projectRoot: r.params.projectRoot ?? '/w', tool: 'exec', prefix: 'ls', createdAt: 1, createdBy: 'tok' }] })
  fs.handlers['safelist.revoke'] = () => ({ revoked: true })
  fs.handlers['approvals.getMode'] = () => ({ mode: 'ask' })
  fs.handlers['approvals.setMode'] = () => ({ mode: 'locked' })
  const client = createServerClient({ url: fs.url, token: 't', WebSocket: WS })
  t.after(() => client.close())
  const host = createServerApprovalsHost({ client })
  t.after(() => host.close())
  await until(() => host.offered.get() === true)
  assert.deepEqual(host.approvals.get().map((a) => a.requestId), ['a', 'b'], 'oldest first')
  fs.pushAll({ kind: 'approval:request', sessionId: 'S', runId: 'r', request: req('c', 3), $seq: 1 })
  fs.pushAll({ kind: 'approval:resolved', sessionId: 'S', runId: 'r', requestId: 'a', resolution: 'expired', $seq: 2 })
  await until(() => host.approvals.get().map((a) => a.requestId).join() === 'b,c')
  assert.deepEqual(await host.answer('c', 'always'), { ok: true })
  assert.deepEqual(fs.requests('approvals.answer')[0]!.params, { sessionId: 'S', requestId: 'c', decision: 'always' })
  assert.deepEqual(host.approvals.get().map((a) => a.requestId), ['b'])
  await assert.rejects(host.answer('zzz', 'allow'), /No pending approval/)
  assert.equal((await host.safelist('/w'))[0]!.prefix, 'ls')
  assert.equal(await host.revoke('e1'), true)
  assert.equal(await host.mode('S'), 'ask')
  await host.setMode('S', 'locked')
  assert.deepEqual(fs.requests('approvals.setMode')[0]!.params, { sessionId: 'S', mode: 'locked' })

  // A server without approvals: offered turns false, nothing is shown.
  const bare = await FakeServer.start()
  t.after(() => bare.close())
  const h2 = createServerApprovalsHost({ url: bare.url, token: 't', WebSocket: WS })
  t.after(() => h2.close())
  await until(() => h2.offered.get() === false)
  assert.deepEqual(h2.approvals.get(), [])
})

test('createServerHost: questions from interactions.list and interaction signals, answered by option or text', async (t) => {
  const fs = await FakeServer.start()
  t.after(() => fs.close())
  const q = (id: string) => ({ requestId: id, sessionId: 'S', runId: 'r', callId: 'c', prompt: 'Which?', options: ['red', 'blue'], multiple: false, allowText: true, createdAt: 1 })
  fs.handlers['sessions.list'] = () => ({ sessions: [] })
  fs.handlers['interactions.list'] = () => ({ requests: [q('q1')] })
  fs.handlers['interactions.answer'] = () => ({ ok: true })
  const host = createServerHost({ url: fs.url, token: 't', WebSocket: WS, frames: false })
  t.after(() => host.close())
  await host.ready
  await until(() => host.interactions.get().length === 1)
  assert.deepEqual(host.interactions.get()[0], { id: 'q1', sessionId: 'S', runId: 'r', request: { prompt: 'Which?', options: ['red', 'blue'], multiple: false, allowText: true } })
  fs.pushAll({ kind: 'interaction:request', sessionId: 'S', runId: 'r', request: q('q2'), $seq: 1 })
  await until(() => host.interactions.get().length === 2)
  await host.answer('q1', 'blue')
  await host.answer('q2', 'something else')
  assert.deepEqual(
    fs.requests('interactions.answer').map((r) => r.params),
    [
      { sessionId: 'S', requestId: 'q1', answer: { choices: ['blue'] } },
      { sessionId: 'S', requestId: 'q2', answer: { text: 'something else' } },
    ],
  )
  assert.equal(host.interactions.get().length, 0)
  fs.pushAll({ kind: 'interaction:request', sessionId: 'S', runId: 'r', request: q('q3'), $seq: 2 })
  await until(() => host.interactions.get().length === 1)
  fs.pushAll({ kind: 'interaction:resolved', sessionId: 'S', runId: 'r', requestId: 'q3', resolution: 'withdrawn', $seq: 3 })
  await until(() => host.interactions.get().length === 0)

  // open() of a session the server cannot read fails (and can be tried again); then it loads.
  let known = false
  fs.handlers['sessions.loadEvents'] = (r) => {
    if (!known) {
      r.conn.error(r.id, -32014, 'Session "S2" not found.')
      return NO_ANSWER
    }
    return { events: [{ kind: 'user-prompt', text: 'hi', turnId: 'u' }], start: 0, exact: true }
  }
  await assert.rejects(host.open('S2'), /not found/)
  known = true
  await host.open('S2')
  assert.deepEqual(rows(host, 'S2'), ['user-prompt:hi'])
})
