// createSseHost: a ChatHost over the SSE protocol v1 (client seed: "Your server, over HTTP and
// SSE", "SSE protocol"), the browser side of zidane-server's --sse-base-path and of the Node bridge
// (createSseHandler). It streams with fetch, so the headers reach the stream request too.
import { createSessionStreams, type FrameScheduler, type SessionStreams, type SessionStreamsOptions } from '../chat/streams.js'
import { ClosedError, HttpError } from '../client/errors.js'
import {
  SSE_PROTOCOL_HEADER,
  sseRoutes,
  type AnswerBody,
  type CancelBody,
  type CreateSessionBody,
  type HydrateResponse,
  type SendBody,
  type SendResponse,
  type Session,
  type SessionListResponse,
  type SessionsLoadEventsParams,
  type SessionsLoadEventsResult,
  type SseOperation,
  type StreamReset,
  type WireSignal,
} from '../protocol.js'
import { createStore, type ReadableStore } from '../store.js'
import { toHostSession, toPending } from './server-host.js'
import { createSseParser } from './sse-parse.js'
import type { ChatHost, HostSession, PendingInteraction } from './types.js'

declare const setTimeout: (fn: () => void, ms: number) => unknown
declare const clearTimeout: (handle: unknown) => void

/** Request headers: a record, or a function called before every request (a token that changes). */
export type SseHeaders = Record<string, string> | (() => Record<string, string> | Promise<Record<string, string>>)

/** Options of createSseHost. */
export interface SseHostOptions {
  /** The protocol's base path or URL, e.g. '/api/chat' (the server's --sse-base-path) or 'https://app.example.com/api/chat'. */
  baseUrl: string
  /** Headers for every request, the stream's included (e.g. authorization: Bearer …). */
  headers?: SseHeaders
  /** The first reconnect delay in ms (default 500); it doubles after each failure up to maxReconnectMs. */
  reconnectMs?: number
  /** The longest reconnect delay in ms (default 10 000). */
  maxReconnectMs?: number
  /** How long a session's stream stays open after nothing watches it, in ms (default 1000, the seed's rule). */
  lingerMs?: number
  /** Turns a hydrate loads (the newest page; default: the server's, 200 on zidane-server). */
  hydrateTurns?: number
  /** Turns per loadEarlier page (default 50). */
  pageSize?: number
  /** The fetch to use (default globalThis.fetch). */
  fetch?: typeof fetch
  /** The frame scheduler of the session streams; false reveals at once. */
  frames?: FrameScheduler | false
  /** Hears failures the host retries by itself (a dropped stream, a refused reconnect). */
  onError?: (error: Error) => void
}

/** Where one session's stream stands: closed (nothing watches), hydrating, connecting, open, or waiting to retry. */
export type SseStreamState = 'closed' | 'hydrating' | 'connecting' | 'open' | 'waiting'

/** A ChatHost on the SSE protocol. */
export interface SseHost extends ChatHost {
  /** Reads the session list again. */
  refresh(): Promise<void>
  /**
   * Watches a session: hydrates it when first watched and keeps its stream open until the returned
   * function is called (then the stream closes lingerMs later unless watched again). Subscribing
   * to streams (streams.subscribe, the React hooks) watches the same way.
   */
  watch(sessionId: string): () => void
  /** The state of a session's stream. */
  streamState(sessionId: string): SseStreamState
  /**
   * Sends a prompt (ChatHost.send), optionally with SendBody's model (provider/model, set on the
   * session first) and attachments (base64 data: URLs, as chat.send takes them).
   */
  send(sessionId: string, prompt: string, options?: { model?: string; attachments?: SendBody['attachments'] }): Promise<{ runId: string }>
}

/** A record position `<epoch>:<seq>`; the last colon separates them. */
interface Position {
  readonly epoch: string
  readonly seq: number
}

function parsePosition(id: string): Position | undefined {
  const i = id.lastIndexOf(':')
  if (i <= 0) return undefined
  const seq = Number(id.slice(i + 1))
  if (!Number.isSafeInteger(seq) || seq < 0) return undefined
  return { epoch: id.slice(0, i), seq }
}

/** One session's stream. */
interface Conn {
  watchers: number
  /** The last applied record (or the hydrate's position); undefined: hydrate first. */
  at: Position | undefined
  /** Settles with the first hydrate. */
  hydrated: Promise<void>
  settle: (error?: Error) => void
  settled: boolean
  /** The loop runs. */
  running: boolean
  /** Aborts the running request (stream or hydrate) or the wait before a retry. */
  abort: AbortController | undefined
  linger: unknown
  state: SseStreamState
}

/** Aborted by the host itself (linger over, close): not a failure. */
class Stopped extends Error {}

/** An InteractionReply as the AnswerBody's question: a string is an option's name, else text; null dismisses. */
function toQuestion(p: PendingInteraction, answer: unknown): NonNullable<AnswerBody['question']> {
  if (answer === null || answer === undefined) return { dismissed: true }
  if (typeof answer === 'string') return p.request.options?.includes(answer) ? { choices: [answer] } : { text: answer }
  if (Array.isArray(answer)) return { choices: answer.map(String) }
  const a = answer as { choices?: readonly string[]; text?: string }
  const out: { choices?: string[]; text?: string } = {}
  if (a.choices !== undefined) out.choices = [...a.choices]
  if (a.text !== undefined) out.text = a.text
  return out
}

/** Creates an SSE host and reads the session list. */
export function createSseHost(options: SseHostOptions): SseHost {
  const base = options.baseUrl.replace(/\/+$/, '')
  const doFetch = options.fetch ?? ((input: RequestInfo | URL, init?: RequestInit) => globalThis.fetch(input, init))
  const firstDelay = options.reconnectMs ?? 500
  const maxDelay = options.maxReconnectMs ?? 10_000
  const lingerMs = options.lingerMs ?? 1000
  const conns = new Map<string, Conn>()
  const sessions = createStore<readonly HostSession[]>(Object.freeze([]))
  const interactions = createStore<readonly PendingInteraction[]>(Object.freeze([]))
  let closed = false

  async function headers(extra: Record<string, string>): Promise<Record<string, string>> {
    const h = typeof options.headers === 'function' ? await options.headers() : (options.headers ?? {})
    return { ...h, ...extra }
  }

  function url(op: SseOperation, sessionId?: string, query?: Record<string, number | undefined>): string {
    let path = sseRoutes[op].path as string
    if (sessionId !== undefined) path = path.replace('{sessionId}', encodeURIComponent(sessionId))
    const q = query ? Object.entries(query).filter((e): e is [string, number] => e[1] !== undefined) : []
    return base + path + (q.length > 0 ? '?' + q.map(([k, v]) => `${k}=${v}`).join('&') : '')
  }

  /** An error status's HttpError, with the ErrorBody's message when the body is one. */
  async function failure(res: Response): Promise<HttpError> {
    let message = `The server answered ${res.status} ${res.statusText}.`
    let code: number | undefined
    try {
      const body = (await res.json()) as { message?: unknown; code?: unknown }
      if (typeof body.message === 'string') message = body.message
      if (typeof body.code === 'number') code = body.code
    } catch {
      // not an ErrorBody
    }
    return new HttpError(res.status, message, code)
  }

  /** Calls a JSON route. */
  async function request<T>(op: SseOperation, sessionId?: string, body?: unknown, query?: Record<string, number | undefined>, signal?: AbortSignal): Promise<T> {
    const method = sseRoutes[op].method
    const init: RequestInit = { method, headers: await headers(method === 'POST' ? { 'content-type': 'application/json', accept: 'application/json' } : { accept: 'application/json' }), cache: 'no-store' }
    if (body !== undefined) init.body = JSON.stringify(body)
    if (signal) init.signal = signal
    const res = await doFetch(url(op, sessionId, query), init)
    if (!res.ok) throw await failure(res)
    return (await res.json()) as T
  }

  /** A hydrate as a loadEvents page (its lastEventId as the watermark). */
  async function loadPage(p: SessionsLoadEventsParams, signal?: AbortSignal): Promise<SessionsLoadEventsResult & { session: Session }> {
    const h = await request<HydrateResponse>('hydrate', p.sessionId, undefined, { before: p.before, limit: p.limit }, signal)
    const at = parsePosition(h.lastEventId)
    const page: SessionsLoadEventsResult & { session: Session } = { session: h.session, events: h.events, start: h.start, exact: h.exact, signalEpoch: at?.epoch ?? '', $seq: at?.seq ?? 0 }
    if (h.cursor !== undefined) page.cursor = h.cursor
    return page
  }

  const streamOptions: SessionStreamsOptions = { loadEvents: (p) => loadPage(p), pageSize: options.pageSize ?? 50 }
  if (options.frames !== undefined) streamOptions.frames = options.frames
  const inner = createSessionStreams(streamOptions)
  // Subscribing to a session's transcript watches it: the components' hooks keep its stream open.
  const streams: SessionStreams = {
    ...inner,
    subscribe(sessionId, listener) {
      const off = inner.subscribe(sessionId, listener)
      const release = watch(sessionId)
      return () => {
        off()
        release()
      }
    },
  }

  function report(error: unknown) {
    if (closed || error instanceof Stopped) return
    options.onError?.(error instanceof Error ? error : new Error(String(error)))
  }

  function upsertSession(s: Session) {
    const hs = toHostSession(s)
    const list = sessions.get()
    const i = list.findIndex((x) => x.id === s.id)
    if (i < 0) sessions.set(Object.freeze([hs, ...list]))
    else {
      const next = list.slice()
      next[i] = hs
      sessions.set(Object.freeze(next))
    }
  }

  function setStatus(sessionId: string, status: string) {
    const list = sessions.get()
    const i = list.findIndex((s) => s.id === sessionId)
    if (i < 0 || list[i]!.status === status) return
    const next = list.slice()
    next[i] = Object.freeze({ ...list[i]!, status })
    sessions.set(Object.freeze(next))
  }

  const setPending = (list: readonly PendingInteraction[]) => interactions.set(Object.freeze(list))

  /** What a record means to the host besides the transcript: the list's status, the pending questions. */
  function hear(s: WireSignal) {
    if (s.kind === 'interaction:request') setPending([...interactions.get().filter((p) => p.id !== s.request.requestId), toPending(s.request)])
    else if (s.kind === 'interaction:resolved') {
      if (interactions.get().some((p) => p.id === s.requestId)) setPending(interactions.get().filter((p) => p.id !== s.requestId))
    } else if (s.kind === 'run:start') setStatus(s.sessionId, 'running')
    else if (s.kind === 'run:end') setStatus(s.sessionId, s.ok || s.interrupted ? 'idle' : 'error')
    else if (s.kind === 'session:updated') {
      if (s.deleted) sessions.set(Object.freeze(sessions.get().filter((x) => x.id !== s.sessionId)))
      else if (s.session) upsertSession(s.session)
    }
  }

  function conn(sessionId: string): Conn {
    let c = conns.get(sessionId)
    if (!c) {
      let settle!: (error?: Error) => void
      const hydrated = new Promise<void>((res, rej) => (settle = (e) => (e ? rej(e) : res())))
      hydrated.catch(() => {})
      const entry: Conn = { watchers: 0, at: undefined, hydrated, settle: () => {}, settled: false, running: false, abort: undefined, linger: undefined, state: 'closed' }
      entry.settle = (e) => {
        if (entry.settled) return
        entry.settled = true
        settle(e)
      }
      c = entry
      conns.set(sessionId, c)
    }
    return c
  }

  /** Waits ms unless aborted. */
  function wait(c: Conn, ms: number): Promise<void> {
    const ac = new AbortController()
    c.abort = ac
    return new Promise<void>((resolve, reject) => {
      const t = setTimeout(() => resolve(), ms)
      ac.signal.addEventListener('abort', () => {
        clearTimeout(t)
        reject(new Stopped())
      })
    })
  }

  /** Hydrates: the transcript replaces the session's rows and the stream resumes from its position. */
  async function hydrate(sessionId: string, c: Conn) {
    c.state = 'hydrating'
    const ac = new AbortController()
    c.abort = ac
    const page = await loadPage({ sessionId, ...(options.hydrateTurns !== undefined ? { limit: options.hydrateTurns } : {}) }, ac.signal)
    if (ac.signal.aborted) throw new Stopped()
    upsertSession(page.session)
    inner.reset(sessionId, page)
    c.at = { epoch: page.signalEpoch, seq: page.$seq }
    c.settle()
  }

  /** Reads one stream until it ends. 'reset': hydrate again now; 'ended': the stream dropped. */
  async function stream(sessionId: string, c: Conn, onOpen: () => void): Promise<'reset' | 'ended'> {
    c.state = 'connecting'
    const ac = new AbortController()
    c.abort = ac
    const at = c.at!
    const res = await doFetch(url('stream', sessionId), {
      method: 'GET',
      headers: await headers({ accept: 'text/event-stream', 'last-event-id': `${at.epoch}:${at.seq}` }),
      cache: 'no-store',
      signal: ac.signal,
    })
    if (!res.ok) throw await failure(res)
    if (!res.body) throw new Error('The stream answered without a body.')
    if (res.headers.get(SSE_PROTOCOL_HEADER) === null) report(new Error(`The stream at ${base} answered without ${SSE_PROTOCOL_HEADER}: is baseUrl the SSE protocol's base path?`))
    c.state = 'open'
    onOpen()
    let outcome = 'ended' as 'reset' | 'ended'
    const parser = createSseParser((m) => {
      if (outcome === 'reset' || ac.signal.aborted) return
      if (m.event === 'reset') {
        const why = (() => {
          try {
            return (JSON.parse(m.data) as StreamReset).reason
          } catch {
            return 'unknown'
          }
        })()
        report(new Error(`The stream cannot resume from ${at.epoch}:${at.seq} (${why}): hydrating again.`))
        outcome = 'reset'
        c.at = undefined
        ac.abort()
        return
      }
      let signal: WireSignal
      try {
        signal = JSON.parse(m.data) as WireSignal
      } catch {
        report(new Error(`A stream record's data is not JSON: ${m.data.slice(0, 80)}`))
        return
      }
      if (m.id !== undefined) {
        const p = parsePosition(m.id)
        const cur = c.at
        if (p && cur) {
          if (p.epoch !== cur.epoch) {
            // Another server process without a reset record: the transcript must be read again.
            outcome = 'reset'
            c.at = undefined
            ac.abort()
            return
          }
          if (p.seq <= cur.seq) return // applied already
          c.at = p
        }
      }
      hear(signal)
      inner.apply(signal)
    })
    const reader = res.body.getReader()
    const decoder = new TextDecoder()
    try {
      for (;;) {
        const { done, value } = await reader.read()
        if (done) break
        parser.push(decoder.decode(value, { stream: true }))
        if (outcome === 'reset') break
      }
    } catch (err) {
      if (outcome === 'reset') return 'reset'
      if (ac.signal.aborted) throw new Stopped()
      throw err
    } finally {
      ac.abort() // frees the connection when we stop reading early
    }
    return outcome
  }

  /** Runs while the session is watched (or lingers): hydrate when needed, stream, reconnect with backoff. */
  async function loop(sessionId: string, c: Conn) {
    c.running = true
    let delay = firstDelay
    const wanted = () => !closed && conns.get(sessionId) === c && (c.watchers > 0 || c.linger !== undefined)
    try {
      while (wanted()) {
        try {
          if (c.at === undefined) await hydrate(sessionId, c)
          if (!wanted()) break
          const how = await stream(sessionId, c, () => (delay = firstDelay))
          if (how === 'reset') continue
        } catch (err) {
          if (err instanceof Stopped || !wanted()) break
          // A session that is gone or refused ends the stream for good; open() rejects.
          if (err instanceof HttpError && (err.status === 404 || err.status === 400 || err.status === 403)) {
            report(err)
            c.settle(err)
            conns.delete(sessionId)
            break
          }
          report(err)
        }
        if (!wanted()) break
        c.state = 'waiting'
        try {
          await wait(c, delay)
        } catch {
          break
        }
        delay = Math.min(delay * 2, maxDelay)
      }
    } finally {
      c.running = false
      c.abort = undefined
      c.state = 'closed'
      // Watched again while the loop was stopping (after the abort, before here): start over.
      if (wanted()) start(sessionId, c)
    }
  }

  function start(sessionId: string, c: Conn) {
    if (c.running || closed) return
    void loop(sessionId, c)
  }

  function watch(sessionId: string): () => void {
    if (closed) return () => {}
    const c = conn(sessionId)
    c.watchers++
    if (c.linger !== undefined) {
      clearTimeout(c.linger)
      c.linger = undefined
    }
    start(sessionId, c)
    let released = false
    return () => {
      if (released) return
      released = true
      c.watchers--
      if (c.watchers > 0 || closed) return
      c.linger = setTimeout(() => {
        c.linger = undefined
        if (c.watchers === 0) c.abort?.abort()
      }, lingerMs)
    }
  }

  function guard() {
    if (closed) throw new ClosedError('The host was closed.')
  }

  /** Opens a session: watched until hydrated, then for lingerMs if nothing else watches it. */
  function openSession(sessionId: string): Promise<void> {
    const release = watch(sessionId)
    const c = conns.get(sessionId)!
    c.hydrated.then(release, release)
    return c.hydrated
  }

  async function refresh() {
    guard()
    const res = await request<SessionListResponse>('listSessions')
    if (closed) return
    sessions.set(Object.freeze(res.sessions.map(toHostSession)))
  }

  /** The first list, retried with backoff while the server cannot be reached. */
  async function firstList(): Promise<void> {
    let delay = firstDelay
    for (;;) {
      try {
        return await refresh()
      } catch (err) {
        if (closed || err instanceof HttpError || err instanceof ClosedError) throw err
        report(err)
        await new Promise<void>((r) => setTimeout(r, delay))
        delay = Math.min(delay * 2, maxDelay)
      }
    }
  }

  const ready = firstList()
  ready.catch(() => {})

  const host: SseHost = {
    ready,
    streams,
    sessions: { get: sessions.get, subscribe: sessions.subscribe },
    interactions: { get: interactions.get, subscribe: interactions.subscribe },
    refresh,
    watch,
    streamState: (sessionId) => conns.get(sessionId)?.state ?? 'closed',
    async createSession(opts = {}) {
      guard()
      const body: CreateSessionBody = {}
      if (opts.title !== undefined) body.title = opts.title
      const s = await request<Session>('createSession', undefined, body)
      sessions.set(Object.freeze([toHostSession(s), ...sessions.get().filter((x) => x.id !== s.id)]))
      return toHostSession(s)
    },
    open(sessionId) {
      guard()
      return openSession(sessionId)
    },
    async send(sessionId, prompt, opts = {}) {
      guard()
      // Watch while sending, so the run streams in (the stream resumes from the hydrate's position).
      const release = watch(sessionId)
      try {
        const body: SendBody = { prompt }
        if (opts.model !== undefined) body.model = opts.model
        if (opts.attachments !== undefined) body.attachments = opts.attachments
        const res = await request<SendResponse>('send', sessionId, body)
        return { runId: res.runId }
      } finally {
        release()
      }
    },
    async cancel(sessionId, runId) {
      guard()
      const body: CancelBody = runId !== undefined ? { runId } : {}
      await request('cancel', sessionId, body)
    },
    async answer(interactionId, answer) {
      guard()
      const p = interactions.get().find((x) => x.id === interactionId)
      if (!p) throw new Error(`No pending question ${interactionId}: it was answered, dismissed or withdrawn.`)
      const body: AnswerBody = { requestId: interactionId, question: toQuestion(p, answer) }
      await request('answer', p.sessionId, body)
      setPending(interactions.get().filter((x) => x.id !== interactionId))
    },
    close() {
      if (closed) return
      closed = true
      for (const c of conns.values()) {
        if (c.linger !== undefined) clearTimeout(c.linger)
        c.linger = undefined
        c.abort?.abort()
        c.settle(new ClosedError('The host was closed.'))
      }
      conns.clear()
      inner.dispose()
    },
  }
  return host
}
