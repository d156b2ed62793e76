// Which child session each task call of a transcript created (issue 27 item 6): the child a call's
// result names wins; calls still running take the children no result names, in order; a call with no
// child left (a refused task) gets none.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { Session, StreamEvent } from '../src/index.js'
import { matchTaskChildren } from '../src/react/children.js'

const id = (n: number) => `0000000${n}-0000-4000-8000-000000000000`
const child = (n: number): Session => ({ id: id(n), title: `child ${n}`, projectRoot: '/p', cwd: '/p', agentId: 'helper', status: 'idle', createdAt: n, updatedAt: n, archived: false, hostId: 'h', parentSessionId: 'P' })
const call = (callId: string): StreamEvent => ({ kind: 'tool', tool: 'task', callId, text: 'task', input: {}, turnId: 'T' })
const result = (callId: string, text: string): StreamEvent => ({ kind: 'tool-result', tool: 'task', callId, text, turnId: 'T' }) as StreamEvent

test('task calls matched to their child sessions', () => {
  const events = [call('a'), result('a', `Done.\n\n(The subagent "helper" worked in session ${id(2)}.)`), call('b'), call('c'), call('d')]
  const m = matchTaskChildren(events, [child(1), child(2), child(3)])
  assert.equal(m.get('a')?.id, id(2), "the child the result names, whatever the order")
  assert.equal(m.get('b')?.id, id(1), 'running calls take the unnamed children in order')
  assert.equal(m.get('c')?.id, id(3))
  assert.equal(m.has('d'), false, 'no child left: a refused call has none')
  assert.equal(matchTaskChildren(events, []).size, 0)
})
