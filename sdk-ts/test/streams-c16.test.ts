// Client case C16: the session stream store applies each $seq once per session and epoch, and a
// session it never loaded does not claim to have no earlier messages.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { createSessionStreams, type StreamSource } from '../src/chat/index.js'
import type { SessionsLoadEventsParams, SessionsLoadEventsResult, StreamEvent, WireSignal } from '../src/index.js'

const md = ($seq: number, text: string, sessionId = 'A', turnId = 't1'): WireSignal => ({ kind: 'event', sessionId, runId: 'r1', $seq, event: { kind: 'markdown', text, streaming: true, turnId } })
const texts = (evs: readonly StreamEvent[]) => evs.map((e) => (e as { text?: string }).text)

/** A client as the store sees it: signals and resyncs pushed by the test, hello's epoch settable. */
function fakeClient(epoch: string, load?: (p: SessionsLoadEventsParams) => Promise<SessionsLoadEventsResult>) {
  const signals = new Set<(s: WireSignal) => void>()
  const c: StreamSource & { hello: { signalEpoch: string }; emit(s: WireSignal): void } = {
    hello: { signalEpoch: epoch },
    onSignal(h) {
      signals.add(h)
      return () => signals.delete(h)
    },
    onResync() {
      return () => {}
    },
    call: (_m, p) => (load ? load(p) : Promise.reject(new Error('no loader'))),
    emit(s) {
      for (const h of signals) h(s)
    },
  }
  return c
}

test('C16 a repeated or older $seq is not applied again', () => {
  const s = createSessionStreams({ frames: false })
  for (const x of [md(1, 'He'), md(2, 'llo'), md(3, ' world'), md(2, 'llo'), md(3, ' world'), md(4, '!'), md(1, 'He')]) s.apply(x)
  assert.deepEqual(texts(s.transcript('A')), ['Hello world!'])
  // Another session counts on its own.
  s.apply(md(2, 'B', 'B'))
  assert.deepEqual(texts(s.transcript('B')), ['B'])
  // run:start, turn:end and run:end carry $seq too: a replayed run:end does not end the next run.
  s.apply({ kind: 'run:end', sessionId: 'A', runId: 'r1', ok: true, $seq: 5 } as WireSignal)
  s.apply({ kind: 'run:start', sessionId: 'A', runId: 'r2', $seq: 6 } as WireSignal)
  s.apply({ kind: 'run:end', sessionId: 'A', runId: 'r1', ok: true, $seq: 5 } as WireSignal)
  assert.equal(s.getSnapshot('A').running, true)
})

test('C16 an app that applies a client’s signals and also passes the client gets no doubled text', () => {
  const c = fakeClient('e1')
  const s = createSessionStreams({ frames: false, client: c })
  c.onSignal((sig) => s.apply(sig)) // the client seed: "feed it a client's signals with apply"
  for (const x of [md(1, 'He'), md(2, 'llo'), md(3, ' world')]) c.emit(x)
  assert.deepEqual(texts(s.transcript('A')), ['Hello world'])
  // The server restarted: a new epoch numbers from 1 again, and counts.
  c.hello = { signalEpoch: 'e2' }
  c.emit(md(1, '!'))
  assert.deepEqual(texts(s.transcript('A')), ['Hello world!'])
})

test('C16 a reset with a page’s watermark sets what was seen; one without forgets it', () => {
  const s = createSessionStreams({ frames: false })
  const page = { events: [{ kind: 'markdown', text: 'Hello', streaming: true, turnId: 't1' }] as StreamEvent[], start: 0, exact: true, signalEpoch: 'e', $seq: 2 }
  s.reset('A', page)
  for (const x of [md(1, 'He'), md(2, 'llo'), md(3, ' world')]) s.apply(x)
  assert.deepEqual(texts(s.transcript('A')), ['Hello world'], 'signals the page holds are not applied again')
  s.reset('A', { events: [], start: 0, exact: true })
  s.apply(md(1, 'Again'))
  assert.deepEqual(texts(s.transcript('A')), ['Again'], 'a page without a watermark starts the count again')
  // A page of another epoch: its $seq counts in its epoch.
  s.reset('A', { events: [], start: 0, exact: true, signalEpoch: 'e2', $seq: 0 })
  s.apply(md(1, 'new'))
  assert.deepEqual(texts(s.transcript('A')), ['new'])
})

test('C16 a session the store never loaded does not say it has no earlier messages; its first load keeps later live rows once', async () => {
  const s0 = createSessionStreams({ frames: false })
  assert.equal(s0.getSnapshot('never').page.hasMore, true)
  assert.equal(s0.getSnapshot('never').page.loaded, false)

  const history: StreamEvent[] = [
    { kind: 'user-prompt', text: 'old', turnId: 'u0' },
    { kind: 'markdown', text: 'old answer', streaming: false, turnId: 'a0' },
    { kind: 'user-prompt', text: 'q', turnId: 'u1' },
    { kind: 'markdown', text: 'Hel', streaming: true, turnId: 't1' },
  ]
  let answer!: (r: SessionsLoadEventsResult) => void
  const requests: SessionsLoadEventsParams[] = []
  const c = fakeClient('e', (p) => {
    requests.push(p)
    return new Promise((res) => (answer = res))
  })
  const s = createSessionStreams({ frames: false, client: c })
  c.emit({ kind: 'event', sessionId: 'A', runId: 'r1', $seq: 7, event: { kind: 'user-prompt', text: 'q', turnId: 'u1' } } as WireSignal)
  c.emit(md(8, 'Hel'))
  assert.equal(s.getSnapshot('A').page.hasMore, true, 'live rows alone say nothing of the history')
  const loading = s.loadEarlier('A')
  c.emit(md(9, 'lo')) // arrives while the newest page is read
  answer({ events: history.slice(), start: 0, exact: true, signalEpoch: 'e', $seq: 8 })
  await loading
  assert.deepEqual(requests, [{ sessionId: 'A', limit: 50 }], 'the newest page')
  assert.deepEqual(texts(s.transcript('A')), ['old', 'old answer', 'q', 'Hello'], 'every row once, the live piece after the watermark kept')
  assert.deepEqual(s.getSnapshot('A').page, { hasMore: false, loaded: true, loading: false, start: 0 })
  c.emit(md(9, 'lo'))
  c.emit(md(10, '!'))
  assert.deepEqual(texts(s.transcript('A')).slice(-1), ['Hello!'])
})
