// createSseHandler: the SSE protocol v1 (schema/sse.json) served in front of a zidane-server.
//
// Every browser request is checked here (cross-site, route, authorize, media type, size, the
// user's sessions and the bridge's folder) before anything reaches the server; the JSON routes then
// call the WebSocket method the route names on the one shared client, and a stream carries the
// session's signals as the server numbered them (`<epoch>:<seq>` passed through; a resume is the
// server's sessions.resume). Streams of one session share a watch that ends a second after its
// last stream closed.
import {
  ErrorCode,
  SSE_DEFAULT_BASE_PATH,
  SSE_PROTOCOL_HEADER,
  SSE_PROTOCOL_VERSION,
  sseRoutes,
  type AnswerResponse,
  type CancelResponse,
  type ErrorBody,
  type HydrateResponse,
  type ResumeFailure,
  type SendResponse,
  type Session,
  type SessionListResponse,
  type SseOperation,
  type StreamReset,
  type WireSignal,
} from '../protocol.js'
import type { ConnectionState, ServerClient } from '../client/index.js'
import { RpcCallError } from '../client/errors.js'

/**
 * Decides who a request comes from: any value but false, null and undefined is the user (true
 * included); those three refuse the request with 401. It runs first on every request; it must
 * check a session cookie or a bearer token (client seed "Security").
 */
export type Authorize<U> = (request: Request) => U | false | null | undefined | Promise<U | false | null | undefined>

/** The ids of the sessions a user may reach (list, hydrate, stream, send, answer, cancel). */
export type SessionsFor<U> = (user: U) => Iterable<string> | Promise<Iterable<string>>

/** Called once a user created a session, before createSession answers (record who created it). */
export type OnCreate<U> = (user: U, session: Session) => void | Promise<void>

/** Options of createSseHandler. */
export interface SseHandlerOptions<U = unknown> {
  /** A createServerClient(...) to the zidane-server; shared by every browser, never closed by the handler. */
  server: ServerClient
  /** Where the routes are mounted, without a trailing slash; default '/api/chat'. */
  basePath?: string
  /**
   * The folder every session runs in, as the server spells it (an absolute path inside one of its
   * workspace roots). Browsers never pick a folder; sessions in other folders are neither listed nor
   * reachable (404).
   */
  cwd: string
  /** Runs first on every request; see Authorize. */
  authorize: Authorize<U>
  /**
   * The sessions a user may reach, enforced on every route: another user's session answers 404 (as
   * one that does not exist, so ids are not disclosed) and is left out of listSessions. Default:
   * every authorized user reaches every session in cwd.
   */
  sessionsFor?: SessionsFor<U>
  /** Called when a user created a session (for example to add it to what sessionsFor answers). */
  onCreate?: OnCreate<U>
  /** A request body's bound in bytes (413 past it); default 16 MiB, the server's default message limit. */
  maxBodyBytes?: number
  /** How often an idle stream writes a comment line (`: ping`), in ms; default 15000. */
  heartbeatMs?: number
  /** How long a session's watch outlives its last stream, in ms; default 1000. */
  lingerMs?: number
  /** Bytes a slow stream may have queued before it is ended (the browser resumes); default 64 MiB. */
  maxQueuedBytes?: number
  /**
   * Origins accepted besides the request's own (new URL(request.url).origin): the page's public
   * origin when a proxy in front of the app rewrites Host. No CORS headers are ever sent.
   */
  allowedOrigins?: string[]
  /** Where warnings go (an admin token, failed calls); default console. */
  logger?: { warn(message: string): void }
}

/** The handler: a Web-standard fetch handler, plus close() which ends every open stream. */
export interface SseHandler {
  (request: Request): Promise<Response>
  /** Ends every open stream and watch; the handler answers 503 afterwards. The client stays open. */
  close(): void
  /** The sessions watched now: with a stream open, or whose last stream closed under lingerMs ago. */
  watching(): string[]
}

/** A refusal: an HTTP status, the ErrorBody's message and the JSON-RPC code when a method refused. */
class Refusal extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly code?: number,
  ) {
    super(message)
  }
}

const encoder = new TextEncoder()

/** One open stream: its controller and what it already wrote. */
interface Sink {
  /** Writes records; false: the stream is gone or too slow, and ended. */
  write(chunk: string): boolean
  end(): void
  /** The last $seq written (or replayed), -1 before the first; records at or below it are dropped. */
  lastSeq: number
  /** While the resume runs: live records held, written after the replay. */
  held: WireSignal[] | undefined
}

/** A session's watch: its open streams; it ends lingerMs after the last one closed. */
interface Watch {
  sinks: Set<Sink>
  linger: ReturnType<typeof setTimeout> | undefined
}

/** Encodes one stream record; data is one line (JSON.stringify escapes every line break). */
function record(id: string | undefined, event: string, data: unknown): string {
  return `${id !== undefined ? `id: ${id}\n` : ''}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`
}

/** Reads a record id "<epoch>:<seq>" (the last colon separates); undefined for anything else. */
function parsePosition(s: string): { epoch: string; seq: number } | undefined {
  const i = s.lastIndexOf(':')
  if (i <= 0) return undefined
  const tail = s.slice(i + 1)
  if (!/^[0-9]{1,15}$/.test(tail)) return undefined
  return { epoch: s.slice(0, i), seq: Number(tail) }
}

/** The route of a path below the base path, or why none (404, or 405 with the method it takes). */
function matchRoute(rel: string, method: string): { op: SseOperation; sessionId?: string } | { allow?: string } {
  const segs = rel.replace(/^\//, '').split('/')
  const allow: string[] = []
  for (const [op, spec] of Object.entries(sseRoutes) as Array<[SseOperation, (typeof sseRoutes)[SseOperation]]>) {
    const ps = spec.path.replace(/^\//, '').split('/')
    if (ps.length !== segs.length) continue
    let sid: string | undefined
    let same = true
    for (let i = 0; i < ps.length && same; i++) {
      const p = ps[i]!
      const s = segs[i]!
      if (p.startsWith('{')) {
        if (s === '') same = false
        else sid = decodeURIComponent(s)
      } else if (p !== s) same = false
    }
    if (!same) continue
    if (spec.method !== method) {
      if (!allow.includes(spec.method)) allow.push(spec.method)
      continue
    }
    return sid !== undefined ? { op, sessionId: sid } : { op }
  }
  return allow.length > 0 ? { allow: allow.join(', ') } : {}
}

/** The HTTP status of a method's error, as zidane-server's own SSE handler maps it. */
function statusOf(code: number): number {
  switch (code) {
    case ErrorCode.InvalidParams:
    case ErrorCode.ParseError:
    case ErrorCode.InvalidRequest:
      return 400
    case ErrorCode.Forbidden:
    case ErrorCode.WrongConnectionKind:
      return 403
    case ErrorCode.ResponseTooLarge:
      return 413
    case ErrorCode.InternalError:
      return 500
    default:
      return 409
  }
}

/** A path without its trailing slashes ('/' stays). */
function cleanPath(p: string): string {
  const t = p.replace(/\/+$/, '')
  return t === '' ? '/' : t
}

/**
 * Creates the SSE protocol's handler over a zidane-server client. It warns (logger.warn) once the
 * client is connected when its token is an admin token: the browsers' requests then run with admin
 * rights, where a chat token is all the routes need.
 */
export function createSseHandler<U = unknown>(options: SseHandlerOptions<U>): SseHandler {
  const server = options.server
  const basePath = (options.basePath ?? SSE_DEFAULT_BASE_PATH).replace(/\/+$/, '')
  const maxBody = options.maxBodyBytes ?? 16 << 20
  const heartbeatMs = options.heartbeatMs ?? 15_000
  const lingerMs = options.lingerMs ?? 1000
  const maxQueued = options.maxQueuedBytes ?? 64 << 20
  const logger = options.logger ?? console
  const allowedOrigins = new Set(options.allowedOrigins ?? [])
  /** The folders that are cwd: as given, and as the server answered it in a created session. */
  const folders = new Set([cleanPath(options.cwd)])
  const watches = new Map<string, Watch>()
  let closed = false

  void server.ready.then(
    (hello) => {
      // The admin scope's methods are offered to admin tokens only.
      if (hello.methods.includes('tokens.list') || hello.methods.includes('settings.set')) {
        logger.warn('createSseHandler: the client\'s token is an admin token: every browser request runs with admin rights. Mint a chat token (zidane-server token create --name web --scope chat) for the bridge.')
      }
    },
    () => {},
  )

  // One listener for every session: a signal goes to the streams of its session's watch.
  const stopSignals = server.onSignal((signal) => {
    const sid = (signal as { sessionId?: unknown }).sessionId
    if (typeof sid !== 'string') return
    const w = watches.get(sid)
    if (w === undefined) return
    for (const sink of [...w.sinks]) deliver(sink, signal)
  })
  // A dropped upstream connection may have lost signals: end every stream, so each browser comes
  // back with Last-Event-ID and resumes from the server's replay log (or gets a reset).
  let wasOpen = server.connection.get().status === 'open'
  const stopConnection = server.connection.subscribe(() => {
    const s: ConnectionState = server.connection.get()
    const open = s.status === 'open'
    if (wasOpen && !open) endAll()
    wasOpen = open
  })

  function endAll() {
    for (const w of watches.values()) for (const sink of [...w.sinks]) sink.end()
  }

  function deliver(sink: Sink, signal: WireSignal) {
    if (sink.held !== undefined) {
      sink.held.push(signal)
      return
    }
    const seq = signal.$seq
    if (typeof seq !== 'number') {
      sink.write(record(undefined, signal.kind, signal))
      return
    }
    if (seq <= sink.lastSeq) return
    if (sink.lastSeq >= 0 && seq > sink.lastSeq + 1) {
      // A hole: end the stream; the browser resumes after what it has.
      sink.end()
      return
    }
    const epoch = server.hello?.signalEpoch ?? ''
    sink.lastSeq = seq
    sink.write(record(`${epoch}:${seq}`, signal.kind, signal))
  }

  function watch(sessionId: string): Watch {
    let w = watches.get(sessionId)
    if (w === undefined) {
      w = { sinks: new Set(), linger: undefined }
      watches.set(sessionId, w)
    }
    clearTimeout(w.linger)
    w.linger = undefined
    return w
  }

  function unwatch(sessionId: string, sink: Sink) {
    const w = watches.get(sessionId)
    if (w === undefined || !w.sinks.delete(sink) || w.sinks.size > 0) return
    clearTimeout(w.linger)
    w.linger = setTimeout(() => {
      if (watches.get(sessionId) === w && w.sinks.size === 0) watches.delete(sessionId)
    }, lingerMs)
  }

  async function call<T>(method: string, params: object): Promise<T> {
    try {
      return (await server.callDynamic(method, params)) as T
    } catch (err) {
      if (err instanceof RpcCallError) throw new Refusal(statusOf(err.code), err.message, err.code)
      const why = err instanceof Error ? err.message : String(err)
      throw new Refusal(503, `Service Unavailable: the agent server is not reachable (${why}); try again shortly.`)
    }
  }

  function inFolder(s: Session): boolean {
    return folders.has(cleanPath(s.cwd))
  }

  async function reachable(user: U): Promise<Set<string> | undefined> {
    if (options.sessionsFor === undefined) return undefined
    return new Set(await options.sessionsFor(user))
  }

  /** The session of a route, checked against the user's sessions and the folder; 404 otherwise. */
  async function sessionOf(user: U, sessionId: string): Promise<Session> {
    const notFound = new Refusal(404, `Not found: no session ${JSON.stringify(sessionId)}; list them with GET ${basePath}/sessions.`)
    const mine = await reachable(user)
    if (mine !== undefined && !mine.has(sessionId)) throw notFound
    let s: Session
    try {
      s = await call<Session>('sessions.get', { sessionId })
    } catch (err) {
      if (err instanceof Refusal && err.code !== undefined && /not found/i.test(err.message)) throw notFound
      if (err instanceof Refusal && err.code === ErrorCode.InvalidParams) throw notFound
      throw err
    }
    if (!inFolder(s)) throw notFound
    return s
  }

  async function readBody(request: Request): Promise<Record<string, unknown>> {
    const ct = request.headers.get('content-type') ?? ''
    if (ct.split(';')[0]!.trim().toLowerCase() !== 'application/json') {
      throw new Refusal(415, 'Unsupported Media Type: a POST of the SSE protocol sends Content-Type: application/json.')
    }
    const tooLarge = () => new Refusal(413, `Content Too Large: the body is over the ${maxBody}-byte limit.`)
    const declared = Number(request.headers.get('content-length') ?? '')
    if (Number.isFinite(declared) && declared > maxBody) throw tooLarge()
    const chunks: Uint8Array[] = []
    let n = 0
    if (request.body !== null) {
      const reader = request.body.getReader()
      for (;;) {
        const { done, value } = await reader.read()
        if (done) break
        n += value.byteLength
        if (n > maxBody) {
          await reader.cancel().catch(() => {})
          throw tooLarge()
        }
        chunks.push(value)
      }
    }
    const buf = new Uint8Array(n)
    let off = 0
    for (const c of chunks) {
      buf.set(c, off)
      off += c.byteLength
    }
    const text = new TextDecoder().decode(buf).trim()
    if (text === '') return {}
    let v: unknown
    try {
      v = JSON.parse(text)
    } catch (err) {
      throw new Refusal(400, `Bad Request: the body is not JSON: ${err instanceof Error ? err.message : String(err)}`, ErrorCode.InvalidParams)
    }
    if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new Refusal(400, 'Bad Request: the body is a JSON object.', ErrorCode.InvalidParams)
    return v as Record<string, unknown>
  }

  /** The members of body named in keys, those present only (the server checks their types). */
  function pick(body: Record<string, unknown>, keys: string[]): Record<string, unknown> {
    const out: Record<string, unknown> = {}
    for (const k of keys) if (body[k] !== undefined) out[k] = body[k]
    return out
  }

  function queryInt(url: URL, name: string): number | undefined {
    const v = url.searchParams.getAll(name)
    if (v.length === 0) return undefined
    if (v.length > 1 || !/^-?[0-9]{1,10}$/.test(v[0]!)) throw new Refusal(400, `Bad Request: query ${name} is one integer.`, ErrorCode.InvalidParams)
    return Number(v[0])
  }

  async function listSessions(user: U, url: URL): Promise<SessionListResponse> {
    const params: Record<string, unknown> = {}
    const archived = url.searchParams.get('archived')
    if (archived !== null) {
      if (archived !== 'true' && archived !== 'false') throw new Refusal(400, 'Bad Request: query archived is true or false.', ErrorCode.InvalidParams)
      params['archived'] = archived === 'true'
    }
    const limit = queryInt(url, 'limit')
    if (limit !== undefined) params['limit'] = limit
    const cursor = url.searchParams.get('cursor')
    if (cursor !== null) params['cursor'] = cursor
    const res = await call<SessionListResponse>('sessions.list', params)
    const mine = await reachable(user)
    const out: SessionListResponse = { sessions: res.sessions.filter((s) => inFolder(s) && (mine === undefined || mine.has(s.id))) }
    if (res.nextCursor !== undefined) out.nextCursor = res.nextCursor
    return out
  }

  async function createSession(user: U, body: Record<string, unknown>): Promise<Session> {
    const s = await call<Session>('sessions.create', { ...pick(body, ['title']), cwd: options.cwd })
    folders.add(cleanPath(s.cwd))
    await options.onCreate?.(user, s)
    return s
  }

  async function hydrate(sessionId: string, url: URL, session: Session): Promise<HydrateResponse> {
    const params: Record<string, unknown> = { sessionId, limit: queryInt(url, 'limit') ?? 200 }
    const before = queryInt(url, 'before')
    if (before !== undefined) params['before'] = before
    const page = await call<{ events: HydrateResponse['events']; start: number; exact: boolean; cursor?: number; signalEpoch: string; $seq: number }>('sessions.loadEvents', params)
    const out: HydrateResponse = { session, events: page.events, start: page.start, exact: page.exact, lastEventId: `${page.signalEpoch}:${page.$seq}` }
    if (page.cursor !== undefined) out.cursor = page.cursor
    return out
  }

  async function answer(sessionId: string, body: Record<string, unknown>): Promise<AnswerResponse> {
    const { requestId, approval, question } = body as { requestId?: unknown; approval?: unknown; question?: unknown }
    let res: { ok: boolean }
    if (approval !== undefined && question === undefined) {
      res = await call('approvals.answer', { sessionId, requestId, decision: approval })
    } else if (question !== undefined && approval === undefined) {
      if (question === null || typeof question !== 'object') throw new Refusal(400, 'Bad Request: body/question is an object (choices, text or dismissed).', ErrorCode.InvalidParams)
      const q = question as { choices?: unknown; text?: unknown; dismissed?: unknown }
      const params: Record<string, unknown> = { sessionId, requestId }
      if (q.dismissed !== true) params['answer'] = pick(q as Record<string, unknown>, ['choices', 'text'])
      res = await call('interactions.answer', params)
    } else {
      throw new Refusal(400, 'Bad Request: an AnswerBody holds exactly one of approval (an approval:request) and question (an interaction:request).', ErrorCode.InvalidParams)
    }
    return { ok: res.ok }
  }

  /** Opens a session's stream: the replay after Last-Event-ID (or a reset), then the live records. */
  async function stream(sessionId: string, lastEventId: string | null): Promise<Response> {
    let reset: ResumeFailure | undefined
    let at: { epoch: string; seq: number } | undefined
    if (lastEventId !== null && lastEventId.trim() !== '') {
      at = parsePosition(lastEventId.trim())
      if (at === undefined) reset = 'epoch' // not an id this server gave: hydrate again
    }
    let ctrl!: ReadableStreamDefaultController<Uint8Array>
    let timer: ReturnType<typeof setInterval> | undefined
    let ended = false
    const body = new ReadableStream<Uint8Array>(
      {
        start(c) {
          ctrl = c
        },
        cancel() {
          finish()
        },
      },
      { highWaterMark: 0, size: (chunk) => chunk.byteLength },
    )
    const finish = () => {
      if (ended) return
      ended = true
      clearInterval(timer)
      unwatch(sessionId, sink)
      try {
        ctrl.close()
      } catch {
        // already closed or cancelled
      }
    }
    const sink: Sink = {
      lastSeq: -1,
      held: [],
      write(chunk) {
        if (ended) return false
        const bytes = encoder.encode(chunk)
        // desiredSize falls below zero by the bytes the reader has not taken yet.
        if (-(ctrl.desiredSize ?? 0) + bytes.byteLength > maxQueued) {
          finish() // a slow reader: it resumes with Last-Event-ID
          return false
        }
        ctrl.enqueue(bytes)
        return true
      },
      end: finish,
    }
    const w = watch(sessionId)
    w.sinks.add(sink)
    const first: string[] = []
    try {
      const epoch = server.hello?.signalEpoch
      if (epoch === undefined) throw new Refusal(503, 'Service Unavailable: the agent server is not reachable; try again shortly.')
      if (at !== undefined && reset === undefined) {
        if (at.epoch !== epoch) reset = 'epoch'
        else {
          const res = await call<{ ok: boolean; signals?: Array<{ seq: number; signal: WireSignal }>; reason?: ResumeFailure }>('sessions.resume', { sessionId, epoch: at.epoch, afterSeq: at.seq }).catch((err: unknown) => {
            // A position past the session's last $seq is not one this server gave: hydrate again.
            if (err instanceof Refusal && err.code === ErrorCode.InvalidParams) return { ok: false, reason: 'gap' as const, signals: undefined }
            throw err
          })
          if (!res.ok) reset = res.reason ?? 'gap'
          else {
            sink.lastSeq = at.seq
            for (const r of res.signals ?? []) {
              if (r.seq <= sink.lastSeq) continue
              sink.lastSeq = r.seq
              first.push(record(`${at.epoch}:${r.seq}`, r.signal.kind, { ...r.signal, $seq: r.seq }))
            }
          }
        }
      }
    } catch (err) {
      w.sinks.delete(sink)
      unwatch(sessionId, sink)
      throw err
    }
    if (reset !== undefined) {
      const data: StreamReset = { reason: reset }
      first.unshift(record(undefined, 'reset', data))
    }
    const held = sink.held ?? []
    sink.held = undefined
    for (const chunk of first) sink.write(chunk)
    for (const s of held) deliver(sink, s)
    timer = setInterval(() => {
      if (!ended) sink.write(': ping\n\n')
    }, heartbeatMs)
    return new Response(body, {
      status: 200,
      headers: { 'content-type': 'text/event-stream; charset=utf-8', 'x-accel-buffering': 'no' },
    })
  }

  async function serve(request: Request): Promise<Response> {
    if (closed) throw new Refusal(503, 'Service Unavailable: the handler is closed.')
    if ((request.headers.get('sec-fetch-site') ?? '').toLowerCase() === 'cross-site') {
      throw new Refusal(403, 'Forbidden: a cross-site request (Sec-Fetch-Site: cross-site). The SSE protocol answers its own origin only (no CORS): serve the page from this origin or proxy the requests.')
    }
    const url = new URL(request.url)
    const origin = request.headers.get('origin')
    if (origin !== null && origin !== url.origin && !allowedOrigins.has(origin)) {
      throw new Refusal(403, `Forbidden: origin ${JSON.stringify(origin)} not allowed. The SSE protocol answers its own origin only (no CORS): serve the page from ${url.origin}, or, behind a proxy that rewrites Host, list the page's origin in createSseHandler's allowedOrigins.`)
    }
    if (url.pathname !== basePath && !url.pathname.startsWith(basePath + '/')) {
      throw new Refusal(404, `Not found: ${url.pathname} is not below the SSE protocol's base path ${basePath}.`)
    }
    const m = matchRoute(url.pathname.slice(basePath.length), request.method)
    if (!('op' in m)) {
      if (m.allow !== undefined) throw Object.assign(new Refusal(405, `Method Not Allowed: ${url.pathname} answers ${m.allow}.`), { allow: m.allow })
      throw new Refusal(404, `Not found: no route of the SSE protocol at ${url.pathname}; the routes are in GET /zidane/sse/openapi.json of the agent server.`)
    }
    const user = await options.authorize(request)
    if (user === false || user === null || user === undefined) {
      throw new Refusal(401, 'Unauthorized: sign in first (this server\'s authorize refused the request).')
    }
    const body = request.method === 'POST' ? await readBody(request) : {}
    const session = m.sessionId !== undefined ? await sessionOf(user, m.sessionId) : undefined
    const sid = m.sessionId ?? ''
    switch (m.op) {
      case 'listSessions':
        return json(200, await listSessions(user, url))
      case 'createSession':
        return json(200, await createSession(user, body))
      case 'hydrate':
        return json(200, await hydrate(sid, url, session!))
      case 'stream':
        return stream(sid, request.headers.get('last-event-id'))
      case 'send': {
        const res = await call<SendResponse>('chat.send', { sessionId: sid, ...pick(body, ['prompt', 'command', 'arguments', 'model', 'attachments']) })
        return json(200, { runId: res.runId } satisfies SendResponse)
      }
      case 'answer':
        return json(200, await answer(sid, body))
      case 'cancel': {
        const res = await call<CancelResponse>('chat.cancel', { sessionId: sid, ...pick(body, ['runId']) })
        return json(200, { cancelled: res.cancelled } satisfies CancelResponse)
      }
    }
  }

  function json(status: number, v: unknown, extra?: Record<string, string>): Response {
    return new Response(JSON.stringify(v) + '\n', { status, headers: { 'content-type': 'application/json', ...extra } })
  }

  const handler = (async (request: Request): Promise<Response> => {
    let res: Response
    try {
      res = await serve(request)
    } catch (err) {
      let r: Refusal
      if (err instanceof Refusal) r = err
      else {
        logger.warn(`createSseHandler: ${request.method} ${request.url} failed: ${err instanceof Error ? err.stack ?? err.message : String(err)}`)
        r = new Refusal(500, `The bridge failed: ${err instanceof Error ? err.message : String(err)}`)
      }
      const e: ErrorBody = { status: r.status, message: r.message }
      if (r.code !== undefined) e.code = r.code
      const allow = (r as { allow?: string }).allow
      res = json(r.status, e, allow !== undefined ? { allow } : undefined)
    }
    res.headers.set(SSE_PROTOCOL_HEADER, String(SSE_PROTOCOL_VERSION))
    res.headers.set('cache-control', 'no-store')
    res.headers.set('x-content-type-options', 'nosniff')
    return res
  }) as SseHandler
  handler.watching = () => [...watches.keys()]
  handler.close = () => {
    closed = true
    stopSignals()
    stopConnection()
    endAll()
    for (const w of watches.values()) clearTimeout(w.linger)
    watches.clear()
  }
  return handler
}
