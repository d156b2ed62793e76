// Fake server (FS): a ws WebSocketServer that answers ipc.hello, $/ping and sessions.resume from a
// script and can push any ipc.signal at any point (client cases' harness vocabulary).
import type { AddressInfo } from 'node:net'
import { WebSocketServer, type WebSocket } from 'ws'
import type { IPCHelloResult, WireSignal } from '../../src/index.js'

export interface Req {
  conn: FSConn
  id: number | undefined
  method: string
  params: any
}

export class FSConn {
  constructor(
    readonly ws: WebSocket,
    readonly index: number,
  ) {}
  readonly frames: Req[] = []
  answer(id: number | undefined, result: unknown) {
    if (id !== undefined && this.ws.readyState === 1) this.ws.send(JSON.stringify({ jsonrpc: '2.0', id, result }))
  }
  error(id: number | undefined, code: number, message: string, data?: unknown) {
    if (id !== undefined && this.ws.readyState === 1) this.ws.send(JSON.stringify({ jsonrpc: '2.0', id, error: { code, message, ...(data !== undefined ? { data } : {}) } }))
  }
  push(signal: WireSignal | Record<string, unknown>) {
    if (this.ws.readyState === 1) this.ws.send(JSON.stringify({ jsonrpc: '2.0', method: 'ipc.signal', params: signal }))
  }
}

export type Handler = (req: Req) => unknown | typeof NO_ANSWER
export const NO_ANSWER = Symbol('no answer')

export function helloResult(over: Partial<IPCHelloResult> = {}): IPCHelloResult {
  return {
    protocolVersion: 16,
    minProtocolVersion: 16,
    negotiatedProtocolVersion: 16,
    appVersion: 'fs',
    pid: 1,
    startedAt: 0,
    buildId: 'b',
    codeVersion: 'c',
    hostId: 'H1',
    hostKind: 'server',
    hostName: 'fs',
    signalEpoch: 'E1',
    methods: ['chat.send', 'sessions.list', 'sessions.resume', 'sessions.loadEvents'],
    adminCommands: { token: 't', pair: 'p' },
    ...over,
  }
}

export class FakeServer {
  wss!: WebSocketServer
  port = 0
  conns: FSConn[] = []
  hello: IPCHelloResult = helloResult()
  handlers: Record<string, Handler> = {}
  /** Answers to sessions.resume by session: afterSeq → result. Default ok with no signals. */
  onRequest?: (req: Req) => void

  static async start(): Promise<FakeServer> {
    const fs = new FakeServer()
    fs.wss = new WebSocketServer({ port: 0, host: '127.0.0.1', handleProtocols: () => 'zidane' })
    await new Promise<void>((r) => fs.wss.once('listening', () => r()))
    fs.port = (fs.wss.address() as AddressInfo).port
    fs.wss.on('connection', (ws) => {
      const conn = new FSConn(ws, fs.conns.length)
      fs.conns.push(conn)
      ws.on('error', () => {})
      ws.on('message', (raw) => {
        const msg = JSON.parse(String(raw)) as { id?: number; method: string; params: unknown }
        const req: Req = { conn, id: msg.id, method: msg.method, params: msg.params }
        conn.frames.push(req)
        fs.onRequest?.(req)
        const h = fs.handlers[msg.method]
        let result: unknown
        if (h) result = h(req)
        else if (msg.method === 'ipc.hello') result = fs.hello
        else if (msg.method === '$/ping') result = { now: Date.now() }
        else if (msg.method === 'sessions.resume') result = { ok: true, signals: [] }
        else if (msg.method === 'sessions.loadEvents') result = { events: [], start: 0, exact: true }
        else return conn.error(msg.id, -32601, `Unknown method "${msg.method}".`)
        if (result === NO_ANSWER) return
        conn.answer(msg.id, result)
      })
    })
    return fs
  }

  get url() {
    return `ws://127.0.0.1:${this.port}`
  }
  get last(): FSConn {
    return this.conns[this.conns.length - 1]!
  }
  /** Every request of every connection, in order. */
  requests(method?: string): Req[] {
    return this.conns.flatMap((c) => c.frames).filter((r) => method === undefined || r.method === method)
  }
  openConns(): FSConn[] {
    return this.conns.filter((c) => c.ws.readyState === 1)
  }
  pushAll(signal: WireSignal | Record<string, unknown>) {
    for (const c of this.openConns()) c.push(signal)
  }
  close(): Promise<void> {
    for (const c of this.conns) c.ws.terminate()
    return new Promise((r) => this.wss.close(() => r()))
  }
}
