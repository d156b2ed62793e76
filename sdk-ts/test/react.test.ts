// The React hooks on a real React renderer (react-test-renderer): per-session subscriptions, stable
// selections, snapshots that change by reference, and hooks that follow their props (C24–C27).
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { createElement as h, useState, type ReactNode } from 'react'
import TestRenderer, { act } from 'react-test-renderer'
import { createSessionStreams, type SessionStreams, type SessionStreamActions } from '../src/chat/index.js'
import type { StreamEvent, WireSignal } from '../src/index.js'
import {
  SessionStreamsProvider,
  shallowEqual,
  usePeekSession,
  useSessionEdits,
  useSessionEvents,
  useSessionEventsSelector,
  useSessionPage,
  useSessionRunning,
  useSessionStreamActions,
} from '../src/react/index.js'

;(globalThis as { IS_REACT_ACT_ENVIRONMENT?: boolean }).IS_REACT_ACT_ENVIRONMENT = true

const A = 'A'
const B = 'B'
const md = (sessionId: string, text: string): WireSignal => ({ kind: 'event', sessionId, runId: 'r', event: { kind: 'markdown', text, streaming: true, turnId: 'T' } })
const tool = (sessionId: string, callId: string): WireSignal => ({ kind: 'event', sessionId, runId: 'r', event: { kind: 'tool', tool: 'edit', callId, text: '', input: { path: 'a.txt' }, turnId: 'T' } })

function mount(streams: SessionStreams, children: ReactNode) {
  let r!: TestRenderer.ReactTestRenderer
  act(() => {
    r = TestRenderer.create(h(SessionStreamsProvider, { streams }, children))
  })
  return r
}

test('C24 selectors that build new values do not loop; an unknown session has one stable empty value', () => {
  const streams = createSessionStreams({ frames: false })
  const errors: unknown[] = []
  const origError = console.error
  console.error = (...a: unknown[]) => errors.push(a)
  try {
    const renders = { tools: 0, count: 0, empty: 0 }
    const empties: unknown[] = []
    function Tools() {
      renders.tools++
      const tools = useSessionEventsSelector(A, (s) => s.filter((e) => e.kind === 'tool'), shallowEqual)
      return h('i', null, tools.length)
    }
    function Count() {
      renders.count++
      const c = useSessionEventsSelector(A, (s) => ({ n: s.length }))
      return h('i', null, c.n)
    }
    function Empty() {
      renders.empty++
      empties.push(useSessionEvents('Z'))
      return null
    }
    const r = mount(streams, [h(Tools, { key: 1 }), h(Count, { key: 2 }), h(Empty, { key: 3 })])
    const base = { ...renders }
    act(() => streams.apply(tool(A, 'c1')))
    assert.equal(renders.tools, base.tools + 1, 'the tool selector re-renders after the tool event')
    const afterTool = renders.tools
    act(() => streams.apply(md(A, 'x')))
    assert.equal(renders.tools, afterTool, 'and not after the md delta (equality option)')
    assert.ok(renders.count <= base.count + 2, 'the object selector renders once per change, no loop')
    assert.equal(renders.empty, base.empty, 'the unknown session never re-renders')
    assert.ok(empties.every((e) => e === empties[0]))
    assert.deepEqual(errors, [], 'no React error')
    act(() => r.unmount())
  } finally {
    console.error = origError
  }
})

test('C25 a write re-renders the reader of A with the new text', () => {
  const streams = createSessionStreams({ frames: false })
  let text = ''
  function View() {
    const ev = useSessionEvents(A)
    text = ev.map((e) => ('text' in e ? e.text : '')).join('')
    return null
  }
  mount(streams, h(View))
  act(() => streams.apply(md(A, 'Hel')))
  act(() => streams.apply(md(A, 'lo')))
  assert.equal(text, 'Hello')
})

test('C26 a token in session A renders no reader of B; peek and actions components render 0 times', () => {
  const streams = createSessionStreams({ frames: false })
  const renders: Record<string, number> = {}
  const count = (k: string) => (renders[k] = (renders[k] ?? 0) + 1)
  const actionsSeen: SessionStreamActions[] = []
  function Reader({ id }: { id: string }) {
    count(`events-${id}`)
    useSessionEvents(id)
    return null
  }
  function Running({ id }: { id: string }) {
    count(`running-${id}`)
    useSessionRunning(id)
    return null
  }
  function Page({ id }: { id: string }) {
    count(`page-${id}`)
    useSessionPage(id)
    return null
  }
  function Edits({ id }: { id: string }) {
    count(`edits-${id}`)
    useSessionEdits(id)
    return null
  }
  function Peek() {
    count('peek')
    usePeekSession()
    actionsSeen.push(useSessionStreamActions())
    return null
  }
  const tree = [A, B].flatMap((id) => [h(Reader, { id, key: `r${id}` }), h(Running, { id, key: `u${id}` }), h(Page, { id, key: `p${id}` }), h(Edits, { id, key: `e${id}` })])
  mount(streams, [...tree, h(Peek, { key: 'peek' })])
  const base = { ...renders }
  act(() => {
    streams.apply({ kind: 'run:start', sessionId: A, runId: 'r' })
  })
  for (let i = 0; i < 100; i++) act(() => streams.apply(md(A, '.')))
  act(() => streams.apply({ kind: 'run:end', sessionId: A, runId: 'r', ok: true }))
  for (const k of ['events-B', 'running-B', 'page-B', 'edits-B', 'peek']) assert.equal(renders[k], base[k], `${k} renders 0 times`)
  assert.ok(renders['events-A']! > base['events-A']!)
  assert.equal(renders['running-A'], base['running-A']! + 2, 'running renders on start and end only')
  assert.equal(renders['page-A'], base['page-A'], 'the page did not change')
  assert.equal(renders['edits-A'], base['edits-A'], 'no edit arrived')
  assert.ok(actionsSeen.every((a) => a === actionsSeen[0]))
})

test('C27 hooks follow prop changes; swapping the store re-subscribes', () => {
  const s1 = createSessionStreams({ frames: false })
  const s2 = createSessionStreams({ frames: false })
  let renders = 0
  let shown: readonly StreamEvent[] = []
  let captured: SessionStreamActions | undefined
  let setId!: (id: string) => void
  function View() {
    const [id, set] = useState(A)
    setId = set
    renders++
    shown = useSessionEvents(id)
    const actions = useSessionStreamActions()
    captured ??= actions
    return null
  }
  let r!: TestRenderer.ReactTestRenderer
  act(() => {
    r = TestRenderer.create(h(SessionStreamsProvider, { streams: s1 }, h(View)))
  })
  assert.equal(s1.subscriberCount(A), 1)
  act(() => setId(B))
  assert.equal(s1.subscriberCount(A), 0, 'unsubscribed from A')
  assert.equal(s1.subscriberCount(B), 1)
  const base = renders
  act(() => s1.apply(md(A, 'a')))
  assert.equal(renders, base, "A's delta renders nothing")
  act(() => s1.apply(md(B, 'b')))
  assert.equal(renders, base + 1)
  assert.equal((shown[0] as { text: string }).text, 'b')
  // An action captured before the switch acts on its store, with no session bound in.
  act(() => captured!.apply(md(B, 'c')))
  assert.equal((shown[0] as { text: string }).text, 'bc')
  // Swapping the store.
  act(() => r.update(h(SessionStreamsProvider, { streams: s2 }, h(View))))
  assert.equal(s1.subscriberCount(B), 0)
  assert.equal(s2.subscriberCount(B), 1)
  act(() => s2.apply(md(B, 'z')))
  assert.equal((shown[0] as { text: string }).text, 'z')
  act(() => r.unmount())
  assert.equal(s2.subscriberCount(B), 0)
})
