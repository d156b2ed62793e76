// <SessionList> on a real React renderer (react-test-renderer): each item's last activity as a short
// time beside its state, outside the button's name (the accessible-names contract: the item's button
// is named by the session's title alone), and formatWhen's steps from today to another year.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { createElement as h } from 'react'
import TestRenderer, { act, type ReactTestInstance } from 'react-test-renderer'
import type { ChatHost, HostSession } from '../src/adapters/types.js'
import { createSessionStreams } from '../src/chat/index.js'
import { ChatProvider, SessionList } from '../src/react/index.js'
import { formatWhen } from '../src/react/session-list.js'
import { createStore } from '../src/store.js'

;(globalThis as { IS_REACT_ACT_ENVIRONMENT?: boolean }).IS_REACT_ACT_ENVIRONMENT = true

/** A host with only what SessionList reads: the sessions and no pending questions. */
function fakeHost(sessions: HostSession[]): ChatHost {
  return { sessions: createStore<readonly HostSession[]>(sessions), interactions: createStore([]), streams: createSessionStreams({ frames: false }) } as unknown as ChatHost
}

/** The text an element contributes to its accessible name: its content without aria-hidden subtrees. */
function nameText(node: ReactTestInstance | string): string {
  if (typeof node === 'string') return node
  if (node.props['aria-hidden'] === 'true' || node.props['aria-hidden'] === true) return ''
  return node.children.map(nameText).join('')
}

function allText(node: ReactTestInstance | string): string {
  return typeof node === 'string' ? node : node.children.map(allText).join('')
}

test('formatWhen: the time today, yesterday, the weekday this week, day and month this year, else with the year', () => {
  const now = new Date(2025, 11, 10, 15, 0).getTime() // Wed 10 Dec 2025, 15:00
  assert.equal(formatWhen(new Date(2025, 11, 10, 14, 32).getTime(), now, 'en-GB'), '14:32')
  assert.equal(formatWhen(new Date(2025, 11, 10, 0, 5).getTime(), now, 'en-GB'), '00:05')
  assert.equal(formatWhen(new Date(2025, 11, 9, 23, 59).getTime(), now, 'en-GB'), 'yesterday')
  assert.equal(formatWhen(new Date(2025, 11, 8, 9, 0).getTime(), now, 'en-GB'), 'Mon')
  assert.equal(formatWhen(new Date(2025, 11, 3, 9, 0).getTime(), now, 'en-GB'), '3 Dec')
  assert.equal(formatWhen(new Date(2024, 11, 3, 9, 0).getTime(), now, 'en-GB'), '3 Dec 2024')
})

test("each item shows its last activity and state, described by them, named by the title alone (full title as its tooltip)", () => {
  const now = Date.now()
  const long = 'A long title that the running badge used to cut down to a few letters'
  const host = fakeHost([
    { id: 's1', title: long, status: 'running', createdAt: now - 3 * 86_400_000, updatedAt: now },
    { id: 's2', title: 'Old one', status: 'idle', createdAt: new Date(2020, 2, 4).getTime(), updatedAt: new Date(2020, 2, 4).getTime() },
    { id: 's3', title: '', status: 'idle' },
  ])
  let r!: TestRenderer.ReactTestRenderer
  act(() => {
    r = TestRenderer.create(h(ChatProvider, { host }, h(SessionList, { onSelect: () => {} })))
  })
  const buttons = r.root.findAll((n) => n.type === 'button' && n.props.className === 'zd-session')
  assert.deepEqual(buttons.map(nameText), [long, 'Old one', 'Untitled'], 'the names are the titles alone')
  assert.deepEqual(
    buttons.map((b) => b.props.title),
    [long, 'Old one', 'Untitled'],
  )

  const [running, old, bare] = buttons as [ReactTestInstance, ReactTestInstance, ReactTestInstance]
  assert.equal(running.props['aria-describedby'], 'zd-when-s1 zd-state-s1')
  const when = running.find((n) => n.type === 'time')
  assert.equal(when.props.id, 'zd-when-s1')
  assert.equal(allText(when), formatWhen(now, now))
  assert.match(allText(when), /^\d\d:\d\d$/, "today's activity is a time")
  assert.equal(allText(running.find((n) => n.props.id === 'zd-state-s1')), 'running')
  assert.equal(allText(old.find((n) => n.type === 'time')), formatWhen(new Date(2020, 2, 4).getTime(), now))
  assert.match(allText(old.find((n) => n.type === 'time')), /2020/)
  assert.equal(old.props['aria-describedby'], 'zd-when-s2')
  // Without a time or a state there is no second line and no description.
  assert.equal(bare.props['aria-describedby'], undefined)
  assert.equal(bare.findAll((n) => n.props.className === 'zd-session-meta').length, 0)
  act(() => r.unmount())
})
