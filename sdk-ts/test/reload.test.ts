// Reload without doubt (issue 7, item 10), against the real zidane-server binary: with a replay
// log of one signal per session, a reset of the connection while a run streams ends in a gap and
// a reload through sessions.loadEvents, whose signalEpoch and $seq watermark say which held live
// signals the snapshot already holds. Reset at many moments of the runs, the transcript the SDK
// rebuilds equals the final sessions.loadEvents exactly: no text doubled, none lost.
import assert from 'node:assert/strict'
import { after, before, test, type TestContext } from 'node:test'
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

/** A host through a cut proxy with a new session, a driver that sends the prompts over a connection never reset, and the host's resync reasons. */
async function setup(t: TestContext) {
  const cp = await CutProxy.start(server.port)
  t.after(() => cp.close())
  const host = createServerHost({ url: cp.url, token, WebSocket: WS, frames: false, reconnect: { initialMs: 30, maxMs: 60 } })
  t.after(() => host.close())
  await host.ready
  const s = await host.createSession()
  const driver = createServerClient({ url: server.url, token, WebSocket: WS })
  t.after(() => driver.close())
  await driver.ready
  const reasons: string[] = []
  host.client.onResync((r) => reasons.push(r.reason))
  return { cp, host, s, driver, reasons }
}

test('reload: resets at many moments of streaming runs rebuild the transcript exactly', async (t) => {
  const { cp, host, s, driver, reasons } = await setup(t)
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

// The browser bench's streamRows: a page busy with a 10,000-row run lost its connection, its
// resume answered gap, and the reload held the whole run, its run:end at or below the watermark,
// so no run:end ever reached the page: it showed Stop until reloaded. The reloaded page ends the run.
test('reload: a run that ended while the connection was down is not running after the reload', async (t) => {
  const { cp, host, s, driver, reasons } = await setup(t)
  let ended = false
  driver.onSignal('run:end', (e) => (ended ||= e.sessionId === s.id))
  let pageSawEnd = false
  host.client.onSignal((sig) => {
    if (sig.kind === 'run:end') pageSawEnd = true
    if (sig.kind === 'run:start') {
      cp.stall() // the page's reconnect waits until the run has ended
      cp.rst()
    }
  })
  await driver.call('chat.send', { sessionId: s.id, prompt: 'A prompt whose run ends while the page is away.' })
  await until(() => ended, 20_000, 'the run ends')
  assert.equal(host.streams.getSnapshot(s.id).running, true, 'the page saw the run start')
  cp.release()
  await until(() => host.streams.transcript(s.id).some((e) => e.kind === 'run-summary'), 20_000, 'the reload holds the run summary')
  assert.equal(pageSawEnd, false, 'the page never received the run:end (the case under test)')
  assert.ok(reasons.includes('gap'), `the resume ended in a reload (${reasons.join(',')})`)
  assert.equal(host.streams.getSnapshot(s.id).running, false, 'the page does not show the run as running')
})
