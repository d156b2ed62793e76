// toNodeHandler: mounts a Web-standard fetch handler (createSseHandler's) on node:http. Bun and
// Deno take the handler as it is; Node 20's http server speaks IncomingMessage/ServerResponse.
//
// The types below are the parts of node:http the adapter uses, so the SDK builds without Node's
// type definitions: pass http.createServer's request and response as they are.

/** The part of node:http's IncomingMessage the adapter reads. */
export interface NodeRequestLike extends AsyncIterable<Uint8Array> {
  method?: string | undefined
  url?: string | undefined
  headers: Record<string, string | string[] | undefined>
  /** The connection: a TLS socket (node:https) has encrypted true. */
  socket?: object | null
  /** Discards the body (one the handler answered without reading, such as 413). */
  resume?(): unknown
}

/** The part of node:http's ServerResponse the adapter writes. */
export interface NodeResponseLike {
  statusCode: number
  setHeader(name: string, value: string | string[]): unknown
  flushHeaders?(): void
  write(chunk: Uint8Array): boolean
  end(): unknown
  once(event: 'drain' | 'close', listener: () => void): unknown
  on(event: 'close', listener: () => void): unknown
  destroy?(error?: Error): unknown
  readonly writableEnded?: boolean
}

/** Options of toNodeHandler. */
export interface NodeHandlerOptions {
  /**
   * Read the request's scheme and host from X-Forwarded-Proto and X-Forwarded-Host (a proxy in
   * front of the app sets them). Default false: the socket's scheme and the Host header, which is
   * what the handler's same-origin check compares Origin with.
   */
  trustProxy?: boolean
  /** Called with an error the handler threw (it answers 500 then); default console.error. */
  onError?: (error: unknown) => void
}

/** How much of a body the handler left unread is drained before the connection is dropped. */
const DRAIN_BYTES = 16 << 20

async function drain(it: AsyncIterator<Uint8Array>): Promise<void> {
  let n = 0
  try {
    for (;;) {
      const r = await it.next()
      if (r.done) return
      n += r.value.byteLength
      if (n > DRAIN_BYTES) {
        await it.return?.()
        return
      }
    }
  } catch {
    // the connection is gone
  }
}

function first(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v
}

/**
 * Adapts a fetch handler to node:http: `http.createServer(toNodeHandler(handler))`. The request's
 * body streams into the Request (duplex 'half'), the Response's body streams out chunk by chunk
 * with backpressure (a stream record is written as it comes), and a client that goes away cancels
 * the body, which ends the SSE stream.
 */
export function toNodeHandler(
  handler: (request: Request) => Promise<Response>,
  options: NodeHandlerOptions = {},
): (req: NodeRequestLike, res: NodeResponseLike) => void {
  const onError = options.onError ?? ((e: unknown) => console.error('toNodeHandler:', e))
  return (req, res) => {
    void serve(req, res).catch((err) => {
      onError(err)
      try {
        if (!res.writableEnded) {
          res.statusCode = 500
          res.end()
        }
      } catch {
        // the connection is gone
      }
    })
  }

  async function serve(req: NodeRequestLike, res: NodeResponseLike) {
    const fwdProto = options.trustProxy ? first(req.headers['x-forwarded-proto'])?.split(',')[0]?.trim() : undefined
    const fwdHost = options.trustProxy ? first(req.headers['x-forwarded-host'])?.split(',')[0]?.trim() : undefined
    const proto = fwdProto ?? ((req.socket as { encrypted?: boolean } | null | undefined)?.encrypted ? 'https' : 'http')
    const host = fwdHost ?? first(req.headers['host']) ?? 'localhost'
    const headers = new Headers()
    for (const [k, v] of Object.entries(req.headers)) {
      if (v === undefined || k.startsWith(':')) continue
      if (Array.isArray(v)) for (const x of v) headers.append(k, x)
      else headers.set(k, v)
    }
    const method = req.method ?? 'GET'
    const abort = new AbortController()
    let done = false
    res.on('close', () => {
      if (!done) abort.abort()
    })
    const init: RequestInit & { duplex?: 'half' } = { method, headers, signal: abort.signal }
    // The body is read only when the handler reads it; whatever it leaves (an answer given before
    // the body was read, such as 413) is drained once it answered, so the client's upload ends and
    // the connection stays usable (past DRAIN_BYTES the connection is dropped instead).
    let it: AsyncIterator<Uint8Array> | undefined
    if (method !== 'GET' && method !== 'HEAD') {
      init.body = new ReadableStream<Uint8Array>({
        async pull(c) {
          it ??= req[Symbol.asyncIterator]()
          const r = await it.next()
          if (r.done) c.close()
          else c.enqueue(r.value)
        },
      })
      init.duplex = 'half'
    }
    const response = await handler(new Request(`${proto}://${host}${req.url ?? '/'}`, init))
    if (it === undefined) req.resume?.()
    else void drain(it)
    res.statusCode = response.status
    const cookies: string[] = []
    response.headers.forEach((v, k) => {
      if (k === 'set-cookie') cookies.push(v)
      else res.setHeader(k, v)
    })
    if (cookies.length > 0) res.setHeader('set-cookie', cookies)
    if (response.body === null) {
      done = true
      res.end()
      return
    }
    res.flushHeaders?.()
    const reader = response.body.getReader()
    let gone = false
    res.on('close', () => {
      gone = true
      void reader.cancel().catch(() => {})
    })
    try {
      for (;;) {
        const { done: end, value } = await reader.read()
        if (end || gone) break
        if (!res.write(value)) await new Promise<void>((r) => {
          res.once('drain', r)
          res.once('close', r)
        })
      }
    } finally {
      done = true
      if (!gone) res.end()
    }
  }
}
