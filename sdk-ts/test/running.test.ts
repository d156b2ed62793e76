// Issue 24: a page that never saw a run's run:start (it opened the session mid-run, or reloaded
// after a resume's gap) still shows the run as running, from sessions.get read after the page,
// and turns idle at the run's run:end. Against the real binary; the run is held open by a
// scripted question, so "mid-run" is a state the test waits on, not a moment it guesses.
import assert from 'node:assert/strict'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, test, type TestContext } from 'node:test'
import { WebSocket } from 'ws'
import { createServerHost } from '../src/adapters/index.js'
import { createServerClient, type WebSocketConstructor } from '../src/client/index.js'
import { until } from './helpers/clock.js'
import { CutProxy } from './helpers/proxy.js'
import { Database, ServerProcess } from './helpers/server.js'

const WS = WebSocket as unknown as WebSocketConstructor
let db: Database
let server: ServerProcess
let token: string

before(async () => {
  db = new Database()
  const dir = mkdtempSync(join(tmpdir(), 'zsdk-running-'))
  // The run asks a question and waits for its answer: it stays running until the test answers.
  writeFileSync(join(dir, 'ask.json'), JSON.stringify({ loop: true, turns: [{ steps: [{ text: 'Asking. ' }, { ask: { prompt: 'Which color?', options: ['red', 'blue'] } }] }, { steps: [{ text: 'Thanks.' }] }] }))
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ providers: [{ name: 'ask', kind: 'scripted', script: 'ask.json' }], default: 'ask/scripted' }))
  server = await ServerProcess.start({ db, extra: ['--config', join(dir, 'config.json'), '--replay-signals', '1'] })
  token = server.mintToken('sdk-running')
})

after(async () => {
  await server?.stop()
  server?.cleanup()
  db?.drop()
})

/** A driver connection (never cut) with a new session, and a function that waits for the session's next question. */
async function setup(t: TestContext) {
  const driver = createServerClient({ url: server.url, token, WebSocket: WS })
  t.after(() => driver.close())
  await driver.ready
  const s = await driver.call('sessions.create', {})
  const asked: string[] = []
  driver.onSignal('interaction:request', (e) => {
    if (e.sessionId === s.id) asked.push(e.request.requestId)
  })
  const ended: string[] = []
  driver.onSignal('run:end', (e) => {
    if (e.sessionId === s.id) ended.push(e.runId)
  })
  driver.follow(s.id, { fresh: true })
  return { driver, s, asked, ended }
}

test('running: a page that opens a session mid-run shows it running, and idle at run:end', async (t) => {
  const { driver, s, asked, ended } = await setup(t)
  await driver.call('chat.send', { sessionId: s.id, prompt: 'Ask me something.' })
  await until(() => asked.length === 1, 10_000, 'the run asks its question')
  const host = createServerHost({ url: server.url, token, WebSocket: WS, frames: false })
  t.after(() => host.close())
  await host.ready
  await host.open(s.id)
  await until(() => host.streams.getSnapshot(s.id).running, 5_000, 'the page opened mid-run shows the run as running')
  assert.equal(host.streams.getSnapshot(s.id).status, 'running')
  await driver.call('interactions.answer', { sessionId: s.id, requestId: asked[0]!, answer: { choices: ['blue'] } })
  await until(() => ended.length === 1, 10_000, 'the run ends')
  await until(() => !host.streams.getSnapshot(s.id).running, 5_000, 'the page turns idle at run:end')
  assert.equal(host.streams.getSnapshot(s.id).runId, ended[0], "run:end names the run the page did not know the id of")
})

test('running: a reload after a gap mid-run shows the run as running', async (t) => {
  const { driver, s, asked } = await setup(t)
  const cp = await CutProxy.start(server.port)
  t.after(() => cp.close())
  const host = createServerHost({ url: cp.url, token, WebSocket: WS, frames: false, reconnect: { initialMs: 30, maxMs: 60 } })
  t.after(() => host.close())
  await host.ready
  await host.open(s.id)
  const reasons: string[] = []
  host.client.onResync((r) => reasons.push(r.reason))
  let sawStart = false
  host.client.onSignal((sig) => (sawStart ||= sig.kind === 'run:start'))
  cp.stall() // the page is away while the run starts: its run:start is missed
  cp.rst()
  await driver.call('chat.send', { sessionId: s.id, prompt: 'Ask me while the page is away.' })
  await until(() => asked.length === 1, 10_000, 'the run asks its question')
  cp.release()
  await until(() => reasons.includes('gap'), 10_000, 'the resume ends in a reload')
  await until(() => host.streams.getSnapshot(s.id).running, 5_000, 'the reloaded page shows the run as running')
  assert.equal(sawStart, false, 'the page never received the run:start (the case under test)')
  await driver.call('interactions.answer', { sessionId: s.id, requestId: asked[0]!, answer: { choices: ['red'] } })
  await until(() => !host.streams.getSnapshot(s.id).running, 10_000, 'the page turns idle at run:end')
})
