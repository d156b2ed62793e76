// A small protocol client: one WebSocket, the ipc.hello handshake, typed calls and ipc.signal delivery.
import {
  MIN_PROTOCOL_VERSION,
  PROTOCOL_VERSION,
  type IPCHelloParams,
  type IPCHelloResult,
  type Method,
  type MethodMap,
  type RpcError,
  type WireSignal,
} from './protocol.js'

// In browsers and Node alike, but not in the ES2022 lib this package builds against.
declare function queueMicrotask(callback: () => void): void

/** The part of a WebSocket the client uses: the global WebSocket (Node 22, browsers) and `ws` both fit. */
export interface WebSocketLike {
  readonly protocol: string
  send(data: string): void
  close(code?: number, reason?: string): void
  addEventListener(type: 'open', listener: (event: unknown) => void): void
  addEventListener(type: 'message', listener: (event: { data: unknown }) => void): void
  addEventListener(type: 'close', listener: (event: { code: number; reason: string }) => void): void
  addEventListener(type: 'error', listener: (event: unknown) => void): void
}

export type WebSocketConstructor = new (url: string, protocols: string[]) => WebSocketLike

export interface ConnectOptions {
  /** The WebSocket constructor; default the global one (Node 22 and later, browsers). */
  WebSocket?: WebSocketConstructor
  /** Sent in ipc.hello as appVersion. */
  appVersion?: string
}

/** A JSON-RPC error answer, thrown by call: code, message and data as the server sent them. */
export class RpcCallError extends Error implements RpcError {
  override readonly name = 'RpcCallError'
  readonly code: number
  readonly data?: unknown

  constructor(error: RpcError, readonly method: string) {
    super(error.message)
    this.code = error.code
    if (error.data !== undefined) this.data = error.data
  }
}

/** The connection closed (or never opened) before the answer came. */
export class ConnectionClosedError extends Error {
  override readonly name = 'ConnectionClosedError'
}

export interface Connection {
  /** The server's ipc.hello answer. */
  readonly hello: IPCHelloResult
  /** Sends a request and resolves with its result, or rejects with RpcCallError. */
  call<M extends Method>(method: M, params: MethodMap[M]['params']): Promise<MethodMap[M]['result']>
  /** Calls fn for every ipc.signal; returns a function that stops it. */
  onSignal(fn: (signal: WireSignal) => void): () => void
  close(): void
}

interface Pending {
  method: string
  resolve(result: unknown): void
  reject(error: Error): void
}

/**
 * Opens a WebSocket to url with the subprotocols ['zidane', 'zidane.bearer.' + token], sends
 * ipc.hello and resolves once the server accepted it.
 */
export function connect(url: string, token: string, options: ConnectOptions = {}): Promise<Connection> {
  const WS = options.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket
  if (WS === undefined) {
    return Promise.reject(new Error('No WebSocket: pass options.WebSocket (for example from the ws package) on Node 20.'))
  }
  const ws = new WS(url, ['zidane', `zidane.bearer.${token}`])
  const pending = new Map<number, Pending>()
  const listeners = new Set<(signal: WireSignal) => void>()
  let nextId = 1
  let closed: ConnectionClosedError | undefined

  function call<M extends Method>(method: M, params: MethodMap[M]['params']): Promise<MethodMap[M]['result']> {
    if (closed) return Promise.reject(closed)
    const id = nextId++
    return new Promise((resolve, reject) => {
      pending.set(id, { method, resolve: resolve as (result: unknown) => void, reject })
      try {
        ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }))
      } catch (err) {
        pending.delete(id)
        reject(err instanceof Error ? err : new Error(String(err)))
      }
    })
  }

  ws.addEventListener('message', (event) => {
    if (typeof event.data !== 'string') return
    let msg: { id?: unknown; method?: unknown; params?: unknown; result?: unknown; error?: RpcError }
    try {
      msg = JSON.parse(event.data) as typeof msg
    } catch {
      return
    }
    if (msg.method === 'ipc.signal') {
      for (const fn of [...listeners]) {
        try {
          fn(msg.params as WireSignal)
        } catch (err) {
          queueMicrotask(() => {
            throw err
          })
        }
      }
      return
    }
    if (typeof msg.id !== 'number') return
    const p = pending.get(msg.id)
    if (!p) return
    pending.delete(msg.id)
    if (msg.error !== undefined) p.reject(new RpcCallError(msg.error, p.method))
    else p.resolve(msg.result)
  })

  // ws throws an 'error' event nobody listens to; a close event always follows it.
  ws.addEventListener('error', () => {})
  ws.addEventListener('close', (event) => {
    closed = new ConnectionClosedError(`The connection closed (${event.code}${event.reason ? `: ${event.reason}` : ''}).`)
    for (const p of pending.values()) p.reject(closed)
    pending.clear()
  })

  return new Promise<Connection>((resolve, reject) => {
    ws.addEventListener('close', () => reject(closed))
    ws.addEventListener('open', () => {
      const params: IPCHelloParams = { protocolVersion: PROTOCOL_VERSION, minProtocolVersion: MIN_PROTOCOL_VERSION }
      if (options.appVersion !== undefined) params.appVersion = options.appVersion
      call('ipc.hello', params).then(
        (hello) =>
          resolve({
            hello,
            call,
            onSignal(fn) {
              listeners.add(fn)
              return () => listeners.delete(fn)
            },
            close: () => ws.close(1000),
          }),
        (err: unknown) => {
          ws.close(1000)
          reject(err)
        },
      )
    })
  })
}
