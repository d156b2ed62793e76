// The Node bridge (@zidane/sdk/server) against the real zidane-server binary: what the conformance
// suite (e2e/sse_bridge_test.go) cannot see from outside: the admin-token warning, a session's
// watch outliving its last stream by lingerMs and no more, and toNodeHandler keeping a connection
// usable after a refusal it answered without reading the body.
import assert from 'node:assert/strict'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, test } from 'node:test'
import { WebSocket } from 'ws'
import { createServerClient, type ServerClient, type WebSocketConstructor } from '../src/client/index.js'
import { createSseHandler, toNodeHandler } from '../src/server/index.js'
import { until } from './helpers/clock.js'
import { Database, ServerProcess } from './helpers/server.js'

const WS = WebSocket as unknown as WebSocketConstructor
let db: Database
let server: ServerProcess

before(async () => {
  db = new Database()
  server = await ServerProcess.start({ db })
})

after(async () => {
  await server?.stop()
  server?.cleanup()
  db?.drop()
})

let minted = 0
function client(scope: 'chat' | 'admin'): ServerClient {
  return createServerClient({ url: server.url, token: server.mintToken(`bridge-${scope}-${++minted}`, scope), WebSocket: WS, appVersion: 'bridge-test' })
}

test('bridge: it warns when its token is an admin token, and only then', async (t) => {
  for (const scope of ['admin', 'chat'] as const) {
    const c = client(scope)
    t.after(() => c.close())
    const warnings: string[] = []
    createSseHandler({ server: c, cwd: server.root, authorize: () => true, logger: { warn: (m) => warnings.push(m) } })
    await c.ready
    await new Promise((r) => setImmediate(r))
    if (scope === 'admin') {
      assert.equal(warnings.length, 1, 'one warning for an admin token')
      assert.match(warnings[0]!, /admin token/)
      assert.match(warnings[0]!, /--scope chat/, 'it says what to do')
    } else assert.deepEqual(warnings, [], 'no warning for a chat token')
  }
})

test('bridge: a session is watched while a stream is open and for lingerMs after the last one closed', async (t) => {
  const c = client('chat')
  t.after(() => c.close())
  const handler = createSseHandler({ server: c, cwd: server.root, authorize: () => true })
  t.after(() => handler.close())
  await c.ready
  const json = { 'content-type': 'application/json' }
  const created = await handler(new Request('http://app.test/api/chat/sessions', { method: 'POST', headers: json, body: '{}' }))
  assert.equal(created.status, 200)
  const { id } = (await created.json()) as { id: string }
  const open = async () => {
    const r = await handler(new Request(`http://app.test/api/chat/sessions/${id}/stream`))
    assert.equal(r.status, 200)
    assert.equal(r.headers.get('x-zidane-chat-protocol'), '1')
    return r.body!.getReader()
  }
  const a = await open()
  const b = await open()
  assert.deepEqual(handler.watching(), [id])
  await a.cancel()
  assert.deepEqual(handler.watching(), [id], 'another stream is open')
  await b.cancel()
  const closedAt = Date.now()
  assert.deepEqual(handler.watching(), [id], 'the watch lingers')
  await until(() => handler.watching().length === 0, 5000, 'the watch to end')
  const lingered = Date.now() - closedAt
  assert.ok(lingered >= 950 && lingered < 2500, `the watch ended ${lingered} ms after the last stream, about a second`)
  // A stream opened within the linger keeps the watch.
  const d = await open()
  await d.cancel()
  const e = await open()
  await new Promise((r) => setTimeout(r, 1200))
  assert.deepEqual(handler.watching(), [id], 'a stream reopened within the linger keeps the watch')
  await e.cancel()
})

test('bridge: toNodeHandler answers 413 without reading the body and the connection stays usable', async (t) => {
  const c = client('chat')
  t.after(() => c.close())
  const handler = createSseHandler({ server: c, cwd: server.root, authorize: () => true, maxBodyBytes: 1000 })
  t.after(() => handler.close())
  await c.ready
  const srv = http.createServer(toNodeHandler(handler))
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()))
  t.after(() => {
    srv.closeAllConnections()
    srv.close()
  })
  const port = (srv.address() as AddressInfo).port
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  t.after(() => agent.destroy())
  const post = (body: string) =>
    new Promise<{ status: number; body: string; reused: boolean }>((resolve, reject) => {
      const req = http.request({ port, host: '127.0.0.1', method: 'POST', path: '/api/chat/sessions', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
        let b = ''
        res.setEncoding('utf8')
        res.on('data', (d: string) => (b += d))
        res.on('end', () => resolve({ status: res.statusCode!, body: b, reused: req.reusedSocket }))
      })
      req.on('error', reject)
      req.end(body)
    })
  const big = await post(JSON.stringify({ title: 'x'.repeat(300_000) }))
  assert.equal(big.status, 413)
  assert.match(big.body, /over the 1000-byte limit/)
  const ok = await post('{"title":"after"}')
  assert.equal(ok.status, 200, ok.body)
  assert.ok(ok.reused, 'the same connection answered the next request')
})

test('bridge: a dropped upstream connection ends the streams; reopened with Last-Event-ID after the restart they answer reset epoch', async (t) => {
  const c = createServerClient({ url: server.url, token: server.mintToken(`bridge-restart-${++minted}`), WebSocket: WS, appVersion: 'bridge-test', reconnect: { initialMs: 100, maxMs: 500 } })
  t.after(() => c.close())
  const handler = createSseHandler({ server: c, cwd: server.root, authorize: () => true })
  t.after(() => handler.close())
  await c.ready
  const created = await handler(new Request('http://app.test/api/chat/sessions', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }))
  const { id } = (await created.json()) as { id: string }
  const hy = (await (await handler(new Request(`http://app.test/api/chat/sessions/${id}`))).json()) as { lastEventId: string }
  const r = await handler(new Request(`http://app.test/api/chat/sessions/${id}/stream`, { headers: { 'last-event-id': hy.lastEventId } }))
  assert.equal(r.status, 200)
  const reader = r.body!.getReader()
  await server.stop()
  // The stream ends once the client sees the connection drop.
  for (;;) {
    const { done } = await reader.read()
    if (done) break
  }
  await server.launch()
  await until(() => c.connection.get().status === 'open', 20_000, 'the client to reconnect')
  assert.notEqual(c.hello!.signalEpoch, hy.lastEventId.split(':')[0], 'a new epoch')
  const again = await handler(new Request(`http://app.test/api/chat/sessions/${id}/stream`, { headers: { 'last-event-id': hy.lastEventId } }))
  assert.equal(again.status, 200)
  const rd = again.body!.getReader()
  const { value } = await rd.read()
  assert.equal(new TextDecoder().decode(value), 'event: reset\ndata: {"reason":"epoch"}\n\n', 'the first record is a reset without id')
  await rd.cancel()
})
