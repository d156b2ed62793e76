// Reload without doubt (issue 7, item 10), against the real zidane-server binary: with a replay
// log of one signal per session, a reset of the connection while a run streams ends in a gap and
// a reload through sessions.loadEvents, whose signalEpoch and $seq watermark say which held live
// signals the snapshot already holds. Reset at many moments of the runs, the transcript the SDK
// rebuilds equals the final sessions.loadEvents exactly: no text doubled, none lost.
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { WebSocket } from 'ws'
import { createServerHost } from '../src/adapters/index.js'
import { createServerClient, type WebSocketConstructor } from '../src/client/index.js'
import type { StreamEvent } from '../src/index.js'
import { realDelay, until } from './helpers/clock.js'
import { CutProxy } from './helpers/proxy.js'
import { Database, ServerProcess } from './helpers/server.js'

const WS = WebSocket as unknown as WebSocketConstructor
let db: Database
let server: ServerProcess
let token: string

before(async () => {
  db = new Database()
  server = await ServerProcess.start({ db, extra: ['--scripted-step-delay', '10ms', '--replay-signals', '1'] })
  token = server.mintToken('sdk-reload')
})

after(async () => {
  await server?.stop()
  server?.cleanup()
  db?.drop()
})

test('reload: resets at many moments of streaming runs rebuild the transcript exactly', async (t) => {
  const cp = await CutProxy.start(server.port)
  t.after(() => cp.close())
  const host = createServerHost({ url: cp.url, token, WebSocket: WS, frames: false, reconnect: { initialMs: 30, maxMs: 60 } })
  t.after(() => host.close())
  await host.ready
  const s = await host.createSession()
  // The prompts go over a connection that is never reset.
  const driver = createServerClient({ url: server.url, token, WebSocket: WS })
  t.after(() => driver.close())
  await driver.ready
  const reasons: string[] = []
  host.client.onResync((r) => reasons.push(r.reason))
  const runs = 16
  for (let i = 0; i < runs; i++) {
    const { runId } = await driver.call('chat.send', { sessionId: s.id, prompt: `Prompt ${i}, streamed while the SDK reloads.` })
    assert.ok(runId)
    await realDelay((i * 37) % 150) // a different moment of the ~150 ms run each time
    cp.rst()
    await until(() => host.streams.transcript(s.id).filter((e) => e.kind === 'run-summary').length >= i + 1, 20_000, `run ${i} in the transcript`)
  }
  const stored = async () => (await driver.call('sessions.loadEvents', { sessionId: s.id })).events as StreamEvent[]
  const want = await stored()
  const same = () => {
    try {
      assert.deepEqual(host.streams.transcript(s.id), want)
      return true
    } catch {
      return false
    }
  }
  await until(same, 15_000, 'the transcript settles').catch(() => {})
  assert.deepEqual(host.streams.transcript(s.id), want, 'no text doubled, none lost')
  assert.ok(reasons.filter((r) => r === 'gap').length >= 8, `resets end in reloads (${reasons.join(',')})`)
})
