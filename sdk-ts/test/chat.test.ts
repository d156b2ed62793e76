// applyLiveEvent and createSessionStreams from recorded signal sequences: the reducer, per-session
// subscriptions, smooth streaming on fake frames, lazy scrollback and run-end compaction.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { applyLiveEvent, createSessionStreams, type FrameScheduler } from '../src/chat/index.js'
import type { SessionsLoadEventsParams, SessionsLoadEventsResult, StreamEvent, WireSignal } from '../src/index.js'

const A = 'A'
const B = 'B'
let seq = 0
const ev = (sessionId: string, event: StreamEvent): WireSignal => ({ kind: 'event', sessionId, runId: 'r1', event, $seq: ++seq })
const md = (text: string, turnId = 'T1', sessionId = A) => ev(sessionId, { kind: 'markdown', text, streaming: true, turnId })
const think = (text: string, turnId = 'T1', sessionId = A) => ev(sessionId, { kind: 'thinking', text, streaming: true, turnId })
const runStart = (sessionId = A, runId = 'r1'): WireSignal => ({ kind: 'run:start', sessionId, runId, $seq: ++seq })
const runEnd = (sessionId = A, runId = 'r1', ok = true): WireSignal => ({ kind: 'run:end', sessionId, runId, ok, $seq: ++seq })
const turnEnd = (sessionId = A, turnId = 'T1'): WireSignal => ({ kind: 'turn:end', sessionId, runId: 'r1', turnId, usage: { input: 1, output: 1, modelId: 'm' }, $seq: ++seq })

/** Fake frames: tick() runs the frame callbacks requested so far. */
class FakeFrames implements FrameScheduler {
  private next = 0
  callbacks = new Map<number, () => void>()
  cancelled = 0
  request(cb: () => void) {
    const id = ++this.next
    this.callbacks.set(id, cb)
    return id
  }
  cancel(h: unknown) {
    if (this.callbacks.delete(h as number)) this.cancelled++
  }
  tick() {
    const cbs = [...this.callbacks.values()]
    this.callbacks.clear()
    for (const cb of cbs) cb()
  }
}

/** A recorded run (the scripted provider's shape), as signals. */
const recorded: WireSignal[] = [
  runStart(),
  ev(A, { kind: 'user-prompt', text: 'Say hello.', turnId: 'U' }),
  think('Let me '),
  think('check.'),
  md('Hel'),
  md('lo'),
  ev(A, { kind: 'tool', tool: 'lookup', callId: 'c1', text: 'lookup(x)', input: { q: 'x' }, turnId: 'T1' }),
  ev(A, { kind: 'tool-result', tool: 'lookup', callId: 'c1', text: 'found', turnId: 'T1' }),
  turnEnd(A, 'T1'),
  think('Now ', 'T2'),
  md(' there', 'T2'),
  md('.', 'T2'),
  turnEnd(A, 'T2'),
  runEnd(),
]

/** What sessions.loadEvents answers for that run (streamed pieces merged, streaming false). */
const stored: StreamEvent[] = [
  { kind: 'user-prompt', text: 'Say hello.', turnId: 'U' },
  { kind: 'thinking', text: 'Let me check.', streaming: false, turnId: 'T1' },
  { kind: 'markdown', text: 'Hello', streaming: false, turnId: 'T1' },
  { kind: 'tool', tool: 'lookup', callId: 'c1', text: 'lookup(x)', input: { q: 'x' }, turnId: 'T1' },
  { kind: 'tool-result', tool: 'lookup', callId: 'c1', text: 'found', turnId: 'T1' },
  { kind: 'thinking', text: 'Now ', streaming: false, turnId: 'T2' },
  { kind: 'markdown', text: ' there.', streaming: false, turnId: 'T2' },
]

test('C20 interleaved thinking and markdown: each piece once, blocks merged by kind', () => {
  for (let run = 0; run < 3; run++) {
    const s = createSessionStreams({ frames: false })
    for (const sig of recorded) s.apply(sig)
    assert.deepEqual(s.transcript(A), stored, 'after run:end the live transcript equals loadEvents')
  }
  // The reducer alone: a markdown after a tool row starts a new block, as loadEvents has it.
  let rows: readonly StreamEvent[] = []
  rows = applyLiveEvent(rows, { kind: 'markdown', text: 'a', streaming: true, turnId: 't' })
  const before = rows
  rows = applyLiveEvent(rows, { kind: 'markdown', text: 'b', streaming: true, turnId: 't' })
  assert.deepEqual(before, [{ kind: 'markdown', text: 'a', streaming: true, turnId: 't' }], 'the input is not changed')
  rows = applyLiveEvent(rows, { kind: 'tool', tool: 'x', callId: 'c', text: '', input: null, turnId: 't' })
  rows = applyLiveEvent(rows, { kind: 'markdown', text: 'c', streaming: true, turnId: 't' })
  assert.deepEqual(rows.map((r) => [r.kind, 'text' in r ? r.text : '']), [
    ['markdown', 'ab'],
    ['tool', ''],
    ['markdown', 'c'],
  ])
  // A non-streaming markdown is its own row.
  rows = applyLiveEvent(rows, { kind: 'markdown', text: 'd', streaming: false, turnId: 't' })
  assert.equal(rows.length, 4)
})

test('C21 smooth streaming flushes the tail at run end, on unsubscribe and never after dispose', () => {
  const text = 'abcdefghij'.repeat(40) // 400 chars
  for (const variant of ['run-end', 'unsubscribe', 'dispose'] as const) {
    const frames = new FakeFrames()
    const s = createSessionStreams({ frames })
    let renders = 0
    const off = s.subscribe(A, () => renders++)
    s.apply(runStart())
    for (let i = 0; i < 40; i++) s.apply(md(text.slice(i * 10, i * 10 + 10)))
    const shown = () => (s.transcript(A)[0] as { text?: string } | undefined)?.text ?? ''
    assert.ok(shown().length < 400, 'not revealed yet')
    frames.tick()
    assert.ok(text.startsWith(shown()) && shown().length > 0, 'the revealed text is a prefix of the applied text')
    if (variant === 'run-end') {
      s.apply(runEnd())
      s.compact(A)
      assert.equal(shown(), text)
      assert.equal((s.transcript(A)[0] as { streaming: boolean }).streaming, false)
      frames.tick()
      assert.equal(shown(), text, 'compaction keeps them')
    } else if (variant === 'unsubscribe') {
      off()
      assert.equal(shown(), text, 'the last reader leaving shows the rest')
    } else {
      s.dispose()
      assert.equal(frames.callbacks.size, 0, 'no frame callback is left after disposal')
      const snap = s.getSnapshot(A)
      s.apply(md('more'))
      assert.equal(s.getSnapshot(A), snap, 'no write reaches a disposed store')
    }
    assert.ok(renders > 0)
  }
  // Reveal over several frames is always a growing prefix.
  const frames = new FakeFrames()
  const s = createSessionStreams({ frames })
  s.subscribe(A, () => {})
  for (let i = 0; i < 40; i++) s.apply(md(text.slice(i * 10, i * 10 + 10)))
  let last = ''
  for (let i = 0; i < 50 && frames.callbacks.size > 0; i++) {
    frames.tick()
    const now = (s.transcript(A)[0] as { text: string }).text
    assert.ok(now.startsWith(last) && text.startsWith(now))
    last = now
  }
  assert.equal(last, text, 'the reveal catches up within a bounded number of frames')
})

test('C25 a write makes a new snapshot for that session only, and old snapshots keep their content', () => {
  const s = createSessionStreams({ frames: false })
  s.apply(md('x', 'T', A))
  s.apply(md('y', 'T', B))
  const s1 = s.getSnapshot(A)
  const b1 = s.getSnapshot(B)
  s.apply(md('z', 'T', A))
  const s2 = s.getSnapshot(A)
  const b2 = s.getSnapshot(B)
  assert.notEqual(s1, s2)
  assert.equal(b1, b2)
  assert.equal((s1.events[0] as { text: string }).text, 'x', 'immutable')
  assert.equal((s2.events[0] as { text: string }).text, 'xz')
  assert.ok(Object.isFrozen(s2))
})

test('C26 a token in session A notifies no subscriber of B (store level)', () => {
  const s = createSessionStreams({ frames: false })
  let a = 0
  let b = 0
  s.subscribe(A, () => a++)
  s.subscribe(B, () => b++)
  s.apply(runStart(A))
  for (let i = 0; i < 100; i++) s.apply(md('.', 'T', A))
  s.apply(runEnd(A))
  assert.equal(b, 0)
  assert.ok(a >= 100)
  assert.equal(s.getSnapshot('never-seen'), s.getSnapshot('other-unseen'), 'one stable empty snapshot')
})

/** A session of 12 turns on a turn-position pager like sessions.loadEvents. */
function pager(turns: StreamEvent[][]) {
  const requests: SessionsLoadEventsParams[] = []
  const load = async (p: SessionsLoadEventsParams): Promise<SessionsLoadEventsResult> => {
    requests.push(p)
    await Promise.resolve()
    const before = p.before ?? turns.length
    const from = Math.max(0, before - (p.limit ?? 200))
    const events = turns.slice(from, before).flat()
    const start = turns.slice(0, from).flat().length
    const mark = { signalEpoch: 'e', $seq: 0 }
    return from > 0 ? { events, start, exact: true, cursor: from, ...mark } : { events, start, exact: true, ...mark }
  }
  return { load, requests }
}

test('C23 lazy scrollback: cursors from the answers, no overlap, no refetch, compaction keeps pages', async () => {
  const turns: StreamEvent[][] = Array.from({ length: 12 }, (_, i) => [
    { kind: 'user-prompt', text: `q${i}`, turnId: `u${i}` },
    { kind: 'tool', tool: 't', callId: `c${i}`, text: '', input: null, turnId: `a${i}` },
    { kind: 'tool-result', tool: 't', callId: `c${i}`, text: 'r', turnId: `a${i}` },
    { kind: 'markdown', text: `a${i}`, streaming: false, turnId: `a${i}` },
  ])
  const { load, requests } = pager(turns)
  const s = createSessionStreams({ frames: false, loadEvents: load, pageSize: 5 })
  s.reset(A, await load({ sessionId: A, limit: 5 }))
  requests.length = 0
  assert.equal(s.getSnapshot(A).page.cursor, 7)
  await s.loadEarlier(A)
  // A new run appends during the second page's request.
  const second = s.loadEarlier(A)
  const same = s.loadEarlier(A)
  assert.equal(second, same, 'two calls in the same tick make one request')
  s.apply(runStart(A, 'r2'))
  s.apply(ev(A, { kind: 'user-prompt', text: 'new', turnId: 'n' }))
  s.apply(md('fresh', 'n2'))
  await second
  assert.deepEqual(requests.map((r) => r.before), [7, 2])
  assert.equal(s.getSnapshot(A).page.hasMore, false)
  await s.loadEarlier(A)
  assert.equal(requests.length, 2, 'no request without an older page')
  s.apply(runEnd(A, 'r2'))
  const all = s.transcript(A)
  assert.deepEqual(all.slice(0, 48), turns.flat(), 'every turn once, in order, tool calls with their results')
  assert.deepEqual(all.slice(48).map((e) => e.kind), ['user-prompt', 'markdown'], "the new run's rows are at the end")
  const callIds = all.filter((e) => e.kind === 'tool').map((e) => (e as { callId: string }).callId)
  assert.equal(new Set(callIds).size, 12)
  s.compact(A)
  assert.equal(s.transcript(A).length, 50, 'compaction keeps every loaded page')
  assert.equal(s.getSnapshot(A).page.hasMore, false)
  await s.loadEarlier(A)
  assert.equal(requests.length, 2, 'a fourth loadEarlier makes no request')
})

test('run status: run:start / run:end set running and error', () => {
  const s = createSessionStreams({ frames: false })
  s.apply(runStart(A))
  assert.equal(s.getSnapshot(A).running, true)
  assert.equal(s.getSnapshot(A).runId, 'r1')
  s.apply(runEnd(A, 'r1', false))
  assert.equal(s.getSnapshot(A).running, false)
  assert.equal(s.getSnapshot(A).status, 'error')
})

test('stream:progress: the running run’s report without $seq, cleared at its turn:end and run:end, dropped outside its run', () => {
  const s = createSessionStreams({ frames: false })
  const progress = (tokens: number, runId = 'r1', turnId = 'T1'): WireSignal => ({ kind: 'stream:progress', sessionId: A, runId, turnId, tokens, tokensPerSecond: tokens * 2 })
  let notified = 0
  s.subscribe(A, () => notified++)
  s.apply(progress(5)) // before run:start (it overtook a held run:start): dropped
  assert.equal(s.getSnapshot(A).progress, undefined)
  assert.equal(notified, 0)
  s.apply(runStart(A))
  s.apply(md('Hel'))
  s.apply(progress(10))
  assert.deepEqual(s.getSnapshot(A).progress, { runId: 'r1', turnId: 'T1', tokens: 10, tokensPerSecond: 20 })
  const events = s.getSnapshot(A).events
  s.apply(progress(15))
  assert.equal(s.getSnapshot(A).progress?.tokens, 15)
  assert.equal(s.getSnapshot(A).events, events, 'progress is not a transcript row')
  s.apply(progress(99, 'other-run')) // another run's: dropped
  assert.equal(s.getSnapshot(A).progress?.tokens, 15)
  s.apply(turnEnd(A, 'T1'))
  assert.equal(s.getSnapshot(A).progress, undefined, 'turn:end has the real counts')
  s.apply(progress(5, 'r1', 'T2'))
  assert.equal(s.getSnapshot(A).progress?.turnId, 'T2')
  s.apply(runEnd(A))
  assert.equal(s.getSnapshot(A).progress, undefined)
  const before = notified
  s.apply(progress(20, 'r1', 'T2')) // after run:end: dropped
  assert.equal(s.getSnapshot(A).progress, undefined)
  assert.equal(notified, before)
})
