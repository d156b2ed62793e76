// connect() against a tiny in-process fake server written with ws.
import assert from 'node:assert/strict'
import type { AddressInfo } from 'node:net'
import { test } from 'node:test'
import { WebSocket, WebSocketServer } from 'ws'
import { connect, ConnectionClosedError, ErrorCode, PROTOCOL_VERSION, RpcCallError, type WireSignal } from '../src/index.js'
import { ipcHelloResult, signalRunStart } from './examples.gen.js'

test('connect: subprotocols, hello first, calls by id, errors, signals', async (t) => {
  const offered: string[][] = []
  const received: Array<{ id: number; method: string; params: unknown }> = []
  const wss = new WebSocketServer({
    port: 0,
    host: '127.0.0.1',
    handleProtocols: (protocols) => {
      offered.push([...protocols])
      return 'zidane'
    },
  })
  t.after(() => new Promise<void>((done) => wss.close(() => done())))
  await new Promise<void>((done) => wss.once('listening', done))

  wss.on('connection', (sock) => {
    sock.on('message', (raw) => {
      const req = JSON.parse(String(raw)) as { id: number; method: string; params: unknown }
      received.push(req)
      const answer = (body: object) => sock.send(JSON.stringify({ jsonrpc: '2.0', id: req.id, ...body }))
      switch (req.method) {
        case 'ipc.hello':
          return answer({ result: ipcHelloResult.result })
        case 'chat.send':
          // A signal first, then the answer: the client must route both.
          sock.send(JSON.stringify(signalRunStart))
          return answer({ result: { runId: '6f577015-ffbf-4204-ba81-320f71e76f46' } })
        default:
          return answer({ error: { code: ErrorCode.MethodNotFound, message: `Unknown method "${req.method}".` } })
      }
    })
  })

  const { port } = wss.address() as AddressInfo
  const conn = await connect(`ws://127.0.0.1:${port}`, 's3cret', { WebSocket })
  t.after(() => conn.close())

  assert.deepEqual(offered, [['zidane', 'zidane.bearer.s3cret']])
  assert.equal(received[0]?.method, 'ipc.hello')
  assert.deepEqual(received[0]?.params, { protocolVersion: PROTOCOL_VERSION, minProtocolVersion: PROTOCOL_VERSION })
  assert.equal(conn.hello.negotiatedProtocolVersion, 16)

  const signals: WireSignal[] = []
  conn.onSignal((s) => signals.push(s))

  const sent = await conn.call('chat.send', { sessionId: '7f6b2bc1-27b2-4052-a2b7-de05d2538178', prompt: 'Say hello.' })
  assert.equal(sent.runId, '6f577015-ffbf-4204-ba81-320f71e76f46')
  assert.equal(received[1]?.method, 'chat.send')
  assert.notEqual(received[1]?.id, received[0]?.id)
  assert.deepEqual(signals, [signalRunStart.params])

  await assert.rejects(conn.call('sessions.list', {}), (err: unknown) => {
    assert.ok(err instanceof RpcCallError)
    assert.equal(err.code, ErrorCode.MethodNotFound)
    assert.equal(err.method, 'sessions.list')
    assert.match(err.message, /Unknown method/)
    return true
  })

  conn.close()
  await assert.rejects(conn.call('$/ping', {}), ConnectionClosedError)
})
