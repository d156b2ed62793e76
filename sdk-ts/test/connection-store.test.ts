// The README's promise about client.connection (issue 22 item 8): it is a ReadableStore that
// React's useSyncExternalStore reads as written there, useSyncExternalStore(client.connection.subscribe,
// client.connection.get), and through useStore; the snapshot keeps its reference until the state changes.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { createElement as h, useSyncExternalStore } from 'react'
import TestRenderer, { act } from 'react-test-renderer'
import { createServerClient, type WebSocketConstructor } from '../src/client/index.js'
import { useStore } from '../src/react/index.js'

;(globalThis as { IS_REACT_ACT_ENVIRONMENT?: boolean }).IS_REACT_ACT_ENVIRONMENT = true

/** A socket that never opens: the client stays connecting until it is closed. */
class SilentSocket {
  readyState = 0
  protocol = ''
  constructor(readonly url: string) {}
  addEventListener() {}
  removeEventListener() {}
  send() {}
  close() {
    this.readyState = 3
  }
}

test('client.connection works with useSyncExternalStore as the README writes it, and with useStore', () => {
  const client = createServerClient({ url: 'ws://127.0.0.1:9', token: 't', WebSocket: SilentSocket as unknown as WebSocketConstructor, reconnect: false })
  const seen: string[] = []
  function Status() {
    const state = useSyncExternalStore(client.connection.subscribe, client.connection.get)
    const same = useStore(client.connection)
    assert.equal(same, state)
    seen.push(state.status)
    return h('span', null, state.status)
  }
  let r!: TestRenderer.ReactTestRenderer
  act(() => {
    r = TestRenderer.create(h(Status))
  })
  assert.equal(r.toJSON() && (r.toJSON() as { children: string[] }).children[0], 'connecting')
  assert.equal(client.connection.get(), client.connection.get(), 'the same snapshot until the state changes')
  act(() => client.close())
  assert.equal((r.toJSON() as { children: string[] }).children[0], 'closed')
  assert.deepEqual([...new Set(seen)], ['connecting', 'closed'])
  act(() => r.unmount())
})
