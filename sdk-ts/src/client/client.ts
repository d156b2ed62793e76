// createServerClient: one reconnecting JSON-RPC connection to zidane-server (protocol seed: Connect,
// Handshake, Signals, Reconnect and resume, Paging).
//
// One owner starts connections: at most one socket is connecting or open at any time (C03). Every
// socket belongs to a generation; events of an older generation are ignored (C01, C18). Backoff resets
// only after ipc.hello answers (C05). Calls are never resent on another connection (C06).
import {
  ErrorCode,
  MIN_PROTOCOL_VERSION,
  PROTOCOL_VERSION,
  type IPCHelloParams,
  type IPCHelloResult,
  type Method,
  type MethodMap,
  type RpcError,
  type SessionsLoadEventsResult,
  type SignalKind,
  type SignalMap,
  type WireSignal,
} from '../protocol.js'
import { createStore, type ReadableStore } from '../store.js'
import {
  ClosedError,
  ConnectionDroppedError,
  ConnectTimeoutError,
  ForbiddenError,
  HostChangedError,
  NotOfferedError,
  RpcCallError,
  ServerUnavailableError,
  TokenRefusedError,
  VersionMismatchError,
  isTerminal,
  type ZidaneError,
} from './errors.js'
import { OPEN, systemClock, type Clock, type FetchLike, type WebSocketConstructor, type WebSocketLike } from './transport.js'

/** Backoff between connect attempts: initialMs doubling up to maxMs. */
export interface ReconnectOptions {
  /** The first wait, in ms (default 500). */
  initialMs?: number
  /** The longest wait, in ms (default 15000). */
  maxMs?: number
}

/** Options of createServerClient. */
export interface ServerClientOptions {
  /** ws:// or wss:// address of the server. */
  url: string
  /** The bearer token (zds_…); sent as the subprotocol zidane.bearer.<token>. */
  token: string
  /** The WebSocket constructor; default globalThis.WebSocket (browsers, workers, Node 22). On Node 20 pass ws's. */
  WebSocket?: WebSocketConstructor
  /**
   * fetch for the token check (GET /zidane/token) after a failed upgrade whose status the runtime
   * hides; default globalThis.fetch in pages and workers, none in Node (ws reports the status).
   */
  fetch?: FetchLike
  /** Sent in ipc.hello as appVersion (shown in the server's logs). Default 'web'. */
  appVersion?: string
  /** Backoff options, or false to never reconnect. Default 500 ms doubling to 15 s. */
  reconnect?: ReconnectOptions | false
  /** Interval of $/ping while connected, in ms (default 20000; 0 turns the heartbeat off). */
  heartbeatMs?: number
  /** How long a $/ping may take before the connection counts as dead, in ms, counted from the ping or from the last frame received after it, whichever is later (default min(10000, heartbeatMs)). */
  pingTimeoutMs?: number
  /** Bound on one connect attempt (upgrade and ipc.hello), in ms (default 10000). */
  connectTimeoutMs?: number
  /** The hostId this client saved from an earlier run: another server at the URL is refused (C13). */
  hostId?: string
  /** Hears every error: failed attempts, refusals, handler exceptions. */
  onError?: (error: ZidaneError | Error) => void
  /** Timers and clock (tests). */
  clock?: Clock
}

/**
 * The connection's state. `connecting` covers the upgrade and the handshake; `retrying` is the wait
 * before the next attempt; the last four are terminal.
 */
export type ConnectionState =
  | { readonly status: 'connecting'; readonly attempt: number }
  | { readonly status: 'open'; readonly hello: IPCHelloResult }
  | { readonly status: 'retrying'; readonly attempt: number; readonly delayMs: number; readonly error: ZidaneError }
  | { readonly status: 'unauthorized'; readonly error: TokenRefusedError }
  | { readonly status: 'forbidden'; readonly error: ForbiddenError }
  | { readonly status: 'versionMismatch'; readonly error: VersionMismatchError }
  | { readonly status: 'hostChanged'; readonly error: HostChangedError }
  | { readonly status: 'closed'; readonly error?: ZidaneError }

/** The signal as a handler gets it: on the wire, session signals carry $seq. */
export type SignalOf<K extends SignalKind> = SignalMap[K] & { $seq?: number }

/** A session's resume position: the signal epoch and the last $seq applied under it. */
export interface SessionCursor {
  epoch: string
  seq: number
}

/**
 * A session's transcript was (re)loaded from sessions.loadEvents: on follow with load, or after a
 * resume answered epoch or gap. Replace what is shown with page.events; signals that follow continue it.
 */
export interface Resync {
  sessionId: string
  /** reset: a session:reset said the transcript changed other than by appending (a rollback, a restore, a compaction). */
  reason: 'initial' | 'epoch' | 'gap' | 'error' | 'reset'
  page: SessionsLoadEventsResult
}

/** Options of follow(). */
export interface FollowOptions {
  /** Where the caller's view of the session stands (for example from a saved state). */
  cursor?: SessionCursor
  /** Load the transcript now (a Resync with reason 'initial') and continue from it. */
  load?: boolean
  /** The brand-new session has no signals yet: start at $seq 0 of the current epoch. */
  fresh?: boolean
  /** With load: called once the first load is applied, or with the error it failed with (it is tried again at the next connect). */
  onLoad?: (error?: Error) => void
}

/** A reconnecting client of zidane-server. */
export interface ServerClient {
  /** The first ipc.hello answer; rejects if the client stops (closed, refused) before one. */
  readonly ready: Promise<IPCHelloResult>
  /** The latest ipc.hello answer, once connected. */
  readonly hello: IPCHelloResult | undefined
  /** The connection's state, as a store (useSyncExternalStore-ready). */
  readonly connection: ReadableStore<ConnectionState>
  /**
   * Calls a method and resolves with its result. Rejects with RpcCallError (NotOfferedError for
   * MethodNotFound), ConnectionDroppedError when the connection drops first (outcomeUnknown when the
   * request had been sent), or ClosedError. Calls made while a connect attempt runs wait for it; calls
   * made while waiting to retry reject at once. Nothing is ever resent on another connection.
   */
  call<M extends Method>(method: M, params: MethodMap[M]['params']): Promise<MethodMap[M]['result']>
  /** Calls a method the generated MethodMap does not know (extension RPC, newer servers). */
  callDynamic(method: string, params: object): Promise<unknown>
  /** Sends a notification (no answer). Dropped when not connected; returns whether it was sent. */
  notify<M extends Method>(method: M, params: MethodMap[M]['params']): boolean
  /** Calls handler for every signal, or for signals of one kind. Returns a function that stops it. */
  onSignal(handler: (signal: WireSignal) => void): () => void
  onSignal<K extends SignalKind>(kind: K, handler: (signal: SignalOf<K>) => void): () => void
  /** Calls handler when a followed session's transcript is (re)loaded. */
  onResync(handler: (resync: Resync) => void): () => void
  /** Whether the connection may call the method (hello.methods); false before the handshake. */
  offers(method: string): boolean
  /**
   * Follows a session: after every reconnect its missed signals are replayed (sessions.resume), or its
   * transcript is reloaded (epoch, gap). Returns a function that unfollows.
   */
  follow(sessionId: string, options?: FollowOptions): () => void
  /** The resume position of a followed session. */
  cursor(sessionId: string): SessionCursor | undefined
  /**
   * Declares which session this window shows (null: none) and whether it has the user's focus
   * (presence.set): other windows count it in presence:changed (windows, focused). Sent now as a
   * notification when connected, and again after every reconnect (a new connection shows nothing),
   * to servers that offer presence.set. Call it on every change; once called, the server no longer
   * infers the view from sessions.get and sessions.loadEvents. An unknown session is dropped by the
   * server without an answer; call('presence.set', …) to see such errors.
   */
  setPresence(sessionId: string | null, focused: boolean): void
  /** Connects now if the client is waiting to retry (a user's "reconnect"); never opens a second socket. */
  reconnect(): void
  /** After hostChanged: trust the new server (forget the saved hostId and every cursor) and connect. */
  acceptHost(): void
  /** Closes the client: no reconnect after this; pending calls and an unresolved ready reject with ClosedError. */
  close(): void
}

interface Pending {
  method: string
  gen: number
  sent: boolean
  resolve(result: unknown): void
  reject(error: Error): void
}

interface Followed {
  sessionId: string
  epoch: string | undefined
  seq: number | undefined
  /** A resume or load runs: live signals are held. */
  busy: boolean
  held: WireSignal[]
  /** Reload again at the next run:end (a reload without a $seq watermark during a run). */
  reloadAtRunEnd: boolean
  /** Load the transcript at the next hello instead of resuming. */
  needLoad: boolean
  /** A session:reset was applied while a load or resume ran: reload once it ends. */
  needReset?: boolean
  onLoad?: ((error?: Error) => void) | undefined
}

type Listener = { kind?: string; fn: (signal: WireSignal) => void }

const WS_PATTERN = /Unexpected server response: (\d{3})/

function statusFromError(event: { message?: string; error?: unknown } | undefined): number | undefined {
  const texts = [event?.message, event?.error instanceof Error ? event.error.message : undefined]
  for (const t of texts) {
    const m = t !== undefined ? WS_PATTERN.exec(t) : null
    if (m) return Number(m[1])
  }
  return undefined
}

/**
 * Maps what ended a connection attempt to an error. HTTP statuses: 401 → TokenRefusedError and 403
 * → ForbiddenError (terminal), 503 → ServerUnavailableError (retried), others dropped (retried).
 * Close codes: 1008 with a token reason → TokenRefusedError, with an origin or scope reason →
 * ForbiddenError (terminal); every other code is retried.
 */
export function classifyClose(status: number | undefined, code: number | undefined, reason: string): ZidaneError {
  if (status === 401) return new TokenRefusedError()
  if (status === 403) return new ForbiddenError()
  if (status === 503) return new ServerUnavailableError()
  if (status !== undefined) return new ConnectionDroppedError(`The server answered the upgrade with HTTP ${status}; retrying.`, false, undefined, status)
  if (code === 1008) {
    if (/token|revok|unauthori/i.test(reason)) return new TokenRefusedError(`The server closed the connection: ${reason} (1008). Mint a new token with \`zidane-server token create\`.`)
    if (/origin|scope|forbidden/i.test(reason)) return new ForbiddenError(`The server closed the connection: ${reason} (1008).`)
  }
  const why = code !== undefined ? ` (${code}${reason ? `: ${reason}` : ''})` : ''
  return new ConnectionDroppedError(`The connection dropped${why}.`, false, code)
}

/** The http(s) address of the token check for a ws(s) URL. */
export function tokenCheckUrl(url: string): string {
  const m = /^(wss?|https?):\/\/([^/?#]+)/i.exec(url)
  if (!m) throw new Error(`Not a ws:// or wss:// URL: ${url}`)
  const secure = /^(wss|https)$/i.test(m[1]!)
  return `${secure ? 'https' : 'http'}://${m[2]!}/zidane/token`
}

/** Creates the client and starts connecting. */
export function createServerClient(options: ServerClientOptions): ServerClient {
  const WSMaybe = options.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket
  if (WSMaybe === undefined) throw new Error('No WebSocket: pass options.WebSocket (for example from the ws package) on Node 20.')
  const WS: WebSocketConstructor = WSMaybe
  // The token check runs where the runtime hides a refused upgrade's status: pages and workers.
  // In Node, ws reports the status itself; pass fetch to check anyway (Node 22's global WebSocket).
  const g = globalThis as { fetch?: FetchLike; document?: unknown; importScripts?: unknown }
  const fetchFn = options.fetch ?? (g.document !== undefined || typeof g.importScripts === 'function' ? g.fetch?.bind(globalThis) : undefined)
  const clock = options.clock ?? systemClock
  const backoff = options.reconnect === false ? false : { initialMs: options.reconnect?.initialMs ?? 500, maxMs: options.reconnect?.maxMs ?? 15_000 }
  const heartbeatMs = options.heartbeatMs ?? 20_000
  const pingTimeoutMs = options.pingTimeoutMs ?? Math.min(10_000, heartbeatMs)
  const connectTimeoutMs = options.connectTimeoutMs ?? 10_000
  const appVersion = options.appVersion ?? 'web'

  const state = createStore<ConnectionState>({ status: 'connecting', attempt: 1 })
  const listeners = new Set<Listener>()
  const resyncListeners = new Set<(r: Resync) => void>()
  const followed = new Map<string, Followed>()
  const pending = new Map<number, Pending>()
  /** Calls waiting for the current attempt's hello. */
  let queued: Array<{ method: string; params: unknown; p: Pending; id: number }> = []

  let savedHostId = options.hostId
  let hello: IPCHelloResult | undefined
  let gen = 0
  let ws: WebSocketLike | undefined
  let live = false // hello answered on the current socket
  /** The view declared with setPresence, re-sent after every hello. */
  let presence: { sessionId: string | null; focused: boolean } | undefined
  let attempt = 0 // consecutive failed attempts since the last hello
  let nextId = 1
  let userClosed = false
  let stopped = false // terminal: closed or refused
  let retryTimer: unknown
  let connectTimer: unknown
  let pingTimer: unknown
  let pingDeadline: unknown
  let lastBeat = 0
  /** When the socket last delivered a frame (clock ms): proof of life while a ping's answer waits behind a backlog. */
  let lastFrame = 0

  let resolveReady!: (h: IPCHelloResult) => void
  let rejectReady!: (e: Error) => void
  let readySettled = false
  const ready = new Promise<IPCHelloResult>((res, rej) => {
    resolveReady = res
    rejectReady = rej
  })
  // A caller that never awaits ready must not see an unhandled rejection.
  ready.catch(() => {})

  const report = (e: ZidaneError | Error) => {
    try {
      options.onError?.(e)
    } catch {
      // An onError that throws must not break the connection machinery.
    }
  }

  function setState(s: ConnectionState) {
    state.set(s)
  }

  function clearTimers() {
    clock.clearTimeout(connectTimer)
    clock.clearTimeout(pingTimer)
    clock.clearTimeout(pingDeadline)
    connectTimer = pingTimer = pingDeadline = undefined
  }

  function dropSocket(sock: WebSocketLike | undefined) {
    if (!sock) return
    try {
      if (sock.terminate) sock.terminate()
      else sock.close(1000)
    } catch {
      // A socket that is already gone.
    }
  }

  // ---- connecting -------------------------------------------------------------------------------

  function connect() {
    if (stopped || ws !== undefined) return
    clock.clearTimeout(retryTimer)
    retryTimer = undefined
    const g = ++gen
    live = false
    setState({ status: 'connecting', attempt: attempt + 1 })
    let sock: WebSocketLike
    try {
      sock = new WS(options.url, ['zidane', `zidane.bearer.${options.token}`])
    } catch (err) {
      // A malformed URL: nothing to retry.
      const e = new ConnectionDroppedError(`Cannot open ${options.url}: ${err instanceof Error ? err.message : String(err)}`)
      stop({ status: 'closed', error: e }, e)
      return
    }
    ws = sock
    let httpStatus: number | undefined
    let opened = false
    connectTimer = clock.setTimeout(() => fail(g, new ConnectTimeoutError(connectTimeoutMs)), connectTimeoutMs)
    // ws: the upgrade's status arrives through 'error' ("Unexpected server response: 401").
    sock.addEventListener('error', (event) => {
      const s = statusFromError(event)
      if (s !== undefined) httpStatus = s
    })
    sock.addEventListener('open', () => {
      if (g !== gen) {
        dropSocket(sock) // opened after close() or a timeout (C01 b)
        return
      }
      opened = true
      const params: IPCHelloParams = { protocolVersion: PROTOCOL_VERSION, minProtocolVersion: MIN_PROTOCOL_VERSION, appVersion }
      send(g, 'ipc.hello', params, true).then(
        (result) => onHello(g, result as IPCHelloResult),
        (err: unknown) => {
          if (g !== gen) return
          if (err instanceof RpcCallError && err.code === ErrorCode.VersionMismatch) {
            const data = err.data as { daemon?: IPCHelloResult } | undefined
            const e = new VersionMismatchError(err.message, data?.daemon)
            stop({ status: 'versionMismatch', error: e }, e)
            return
          }
          fail(g, err instanceof Error ? toZidane(err) : new ConnectionDroppedError(String(err)))
        },
      )
    })
    sock.addEventListener('message', (event) => onMessage(g, event.data))
    sock.addEventListener('close', (event) => {
      if (g !== gen) return
      const err = classifyClose(httpStatus, opened ? event.code : undefined, event.reason ?? '')
      if (!opened && httpStatus === undefined && fetchFn !== undefined) {
        // A browser hides the refused upgrade's status: ask the token check before retrying (C11).
        probeToken(g)
        return
      }
      fail(g, err)
    })
  }

  function toZidane(err: Error): ZidaneError {
    if ((err as ZidaneError).kind !== undefined) return err as ZidaneError
    return new ConnectionDroppedError(err.message)
  }

  function probeToken(g: number) {
    // The socket is gone: no second socket until the answer (or its failure) decides.
    ws = undefined
    clearTimers()
    const url = tokenCheckUrl(options.url)
    let done = false
    const settle = (status: number | undefined) => {
      if (done) return
      done = true
      if (g !== gen) return
      if (status === 401 || status === 403) return fail(g, classifyClose(status, undefined, ''))
      if (status === 503) return fail(g, new ServerUnavailableError())
      fail(g, new ConnectionDroppedError('The connection could not be opened; retrying.'))
    }
    const timer = clock.setTimeout(() => settle(undefined), connectTimeoutMs)
    fetchFn!(url, { method: 'GET', headers: { authorization: `Bearer ${options.token}` } }).then(
      (res) => {
        clock.clearTimeout(timer)
        settle(res.status)
      },
      () => {
        clock.clearTimeout(timer)
        settle(undefined)
      },
    )
  }

  function onHello(g: number, result: IPCHelloResult) {
    if (g !== gen) return
    if (savedHostId !== undefined && result.hostId !== savedHostId) {
      const e = new HostChangedError(savedHostId, result.hostId)
      stop({ status: 'hostChanged', error: e }, e)
      return
    }
    savedHostId = result.hostId
    clock.clearTimeout(connectTimer)
    connectTimer = undefined
    hello = result
    live = true
    attempt = 0 // backoff resets only after a real success (C05)
    setState({ status: 'open', hello: result })
    if (!readySettled) {
      readySettled = true
      resolveReady(result)
    }
    startHeartbeat(g)
    // Queued calls of this attempt go now, once.
    const q = queued
    queued = []
    for (const item of q) writeRequest(g, item.id, item.method, item.params, item.p)
    sendPresence()
    for (const f of followed.values()) {
      f.busy = false
      f.held = []
      // Without a cursor a replay would repeat what the view has: load instead.
      if (f.needLoad || f.seq === undefined) void load(f, 'initial', g)
      else void resume(f, g)
    }
  }

  function fail(g: number, error: ZidaneError) {
    if (g !== gen || stopped) return
    const sock = ws
    ws = undefined
    live = false
    clearTimers()
    dropSocket(sock)
    gen++ // nothing of that socket counts any more
    if (!isTerminal(error)) {
      rejectAll((p) => new ConnectionDroppedError(p.sent ? `The connection dropped before "${p.method}" was answered; it may or may not have run. It is not resent.` : `The connection dropped before "${p.method}" was sent.`, p.sent))
    }
    if (isTerminal(error)) {
      const s: ConnectionState =
        error instanceof TokenRefusedError
          ? { status: 'unauthorized', error }
          : error instanceof ForbiddenError
            ? { status: 'forbidden', error }
            : error instanceof VersionMismatchError
              ? { status: 'versionMismatch', error }
              : error instanceof HostChangedError
                ? { status: 'hostChanged', error }
                : { status: 'closed', error }
      stop(s, error)
      return
    }
    report(error)
    if (backoff === false) {
      stop({ status: 'closed', error }, error)
      return
    }
    const delayMs = Math.min(backoff.initialMs * 2 ** attempt, backoff.maxMs)
    attempt++
    setState({ status: 'retrying', attempt, delayMs, error })
    retryTimer = clock.setTimeout(() => {
      retryTimer = undefined
      connect()
    }, delayMs)
  }

  /** Enters a terminal state: no socket, no timer, everything pending rejected with error. */
  function stop(s: ConnectionState, error: ZidaneError) {
    if (stopped) return
    stopped = true
    gen++
    const sock = ws
    ws = undefined
    live = false
    clearTimers()
    clock.clearTimeout(retryTimer)
    retryTimer = undefined
    dropSocket(sock)
    // Refusals reject pending calls with their own type (C12), close() with ClosedError.
    rejectAll(() => error)
    if (!readySettled) {
      readySettled = true
      rejectReady(error)
    }
    if (!(error instanceof ClosedError)) report(error)
    state.set(s)
  }

  function rejectAll(make: (p: Pending) => Error) {
    const all = [...pending.values(), ...queued.map((q) => q.p)]
    pending.clear()
    queued = []
    for (const p of all) p.reject(make(p))
  }

  // ---- heartbeat (C09, C10) ---------------------------------------------------------------------

  function startHeartbeat(g: number) {
    if (heartbeatMs <= 0) return
    lastBeat = clock.now()
    const beat = () => {
      if (g !== gen) return
      const now = clock.now()
      lastBeat = now
      ping(g)
      pingTimer = clock.setTimeout(beat, heartbeatMs)
    }
    pingTimer = clock.setTimeout(beat, heartbeatMs)
  }

  /**
   * Sends one $/ping and arms its deadline. The answer queues behind every frame sent before it
   * (the server's send queue is in order), so a page that is still working through a long
   * backlog of signals gets it late: a frame received within the last pingTimeoutMs proves the
   * connection alive, and the deadline is re-armed from it. Only a connection silent for
   * pingTimeoutMs after the ping counts as dead (C09).
   */
  function ping(g: number) {
    if (pingDeadline !== undefined) return // one ping at a time; its deadline runs from its real send
    const arm = (ms: number) => {
      pingDeadline = clock.setTimeout(() => {
        pingDeadline = undefined
        if (g !== gen) return
        const quiet = clock.now() - lastFrame
        if (quiet < pingTimeoutMs) {
          arm(pingTimeoutMs - quiet)
          return
        }
        fail(g, new ConnectionDroppedError(`No answer to $/ping and no frame within ${pingTimeoutMs} ms: the connection is dead.`))
      }, ms)
    }
    arm(pingTimeoutMs)
    send(g, '$/ping', {}, false).then(
      () => {
        if (g !== gen) return
        clock.clearTimeout(pingDeadline)
        pingDeadline = undefined
      },
      () => {},
    )
  }

  /** Checks liveness now (after a detected timer gap or when a page becomes visible again). */
  function checkAlive() {
    if (!live || ws === undefined) return
    const now = clock.now()
    if (heartbeatMs > 0 && now - lastBeat > 2 * heartbeatMs) {
      lastBeat = now
      ping(gen)
    }
  }
  const doc = (globalThis as { document?: { addEventListener(t: string, f: () => void): void; removeEventListener(t: string, f: () => void): void; visibilityState?: string } }).document
  const onVisible = () => {
    if (doc?.visibilityState === 'visible' && live) {
      lastBeat = clock.now()
      ping(gen)
    }
  }
  doc?.addEventListener('visibilitychange', onVisible)

  // ---- requests ---------------------------------------------------------------------------------

  function send(g: number, method: string, params: unknown, internal: boolean): Promise<unknown> {
    return new Promise((resolve, reject) => {
      const p: Pending = { method, gen: g, sent: false, resolve, reject }
      const id = nextId++
      if (stopped) return reject(userClosed ? new ClosedError() : (currentError() ?? new ClosedError()))
      if (g !== gen || ws === undefined) {
        return reject(new ConnectionDroppedError(`Not connected: "${method}" was not sent. Try again once the connection is back.`))
      }
      if (!live && !internal) {
        queued.push({ method, params, p, id })
        return
      }
      writeRequest(g, id, method, params, p)
    })
  }

  function writeRequest(g: number, id: number, method: string, params: unknown, p: Pending) {
    const sock = ws
    if (g !== gen || sock === undefined || sock.readyState !== OPEN) {
      p.reject(new ConnectionDroppedError(`The connection dropped before "${method}" was sent.`))
      if (g === gen) fail(g, new ConnectionDroppedError('The socket is no longer open.'))
      return
    }
    pending.set(id, p)
    try {
      sock.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }))
      p.sent = true
    } catch (err) {
      pending.delete(id)
      p.reject(new ConnectionDroppedError(`Sending "${method}" failed: ${err instanceof Error ? err.message : String(err)}`))
      fail(g, new ConnectionDroppedError('Writing to the socket failed.'))
    }
  }

  function currentError(): ZidaneError | undefined {
    const s = state.get()
    return 'error' in s ? s.error : undefined
  }

  function onMessage(g: number, data: unknown) {
    if (g !== gen || typeof data !== 'string') return
    lastFrame = clock.now()
    let msg: { id?: unknown; method?: unknown; params?: unknown; result?: unknown; error?: RpcError }
    try {
      msg = JSON.parse(data) as typeof msg
    } catch {
      return
    }
    if (msg === null || typeof msg !== 'object') return
    if (msg.method === 'ipc.signal') {
      if (msg.params !== null && typeof msg.params === 'object') onLive(g, msg.params as WireSignal)
      return
    }
    if (typeof msg.id !== 'number') return
    const p = pending.get(msg.id)
    if (!p) return
    pending.delete(msg.id)
    if (msg.error !== undefined) {
      p.reject(msg.error.code === ErrorCode.MethodNotFound ? new NotOfferedError(msg.error, p.method) : new RpcCallError(msg.error, p.method))
    } else p.resolve(msg.result)
  }

  // ---- signals, resume and reload -----------------------------------------------------------------

  function deliver(signal: WireSignal) {
    for (const l of [...listeners]) {
      if (l.kind !== undefined && l.kind !== signal.kind) continue
      try {
        l.fn(signal)
      } catch (err) {
        report(err instanceof Error ? err : new Error(String(err)))
      }
    }
  }

  function sessionOf(signal: WireSignal): string | undefined {
    const id = (signal as { sessionId?: unknown }).sessionId
    return typeof id === 'string' ? id : undefined
  }

  /** Applies one signal of a followed session: the cursor moves before any handler sees it (C14). */
  function apply(f: Followed, signal: WireSignal, seq: number) {
    f.seq = seq
    f.epoch = hello?.signalEpoch
    deliver(signal)
    if (signal.kind === 'session:reset') {
      // The transcript changed other than by appending: reload it (issue 28). A load or resume in
      // progress reloads after it.
      f.reloadAtRunEnd = false
      if (f.busy) f.needReset = true
      else void load(f, 'reset', gen)
      return
    }
    if (signal.kind === 'run:end' && f.reloadAtRunEnd && !f.busy) {
      f.reloadAtRunEnd = false
      void load(f, 'gap', gen)
    }
  }

  function onLive(g: number, signal: WireSignal) {
    const sid = sessionOf(signal)
    const seq = signal.$seq
    const f = sid !== undefined ? followed.get(sid) : undefined
    if (f === undefined || typeof seq !== 'number') {
      deliver(signal)
      return
    }
    // Before the handshake answers nothing is resumed yet: the resume that follows replays it (C31).
    if (!live) return
    if (f.busy) {
      f.held.push(signal)
      return
    }
    if (f.seq !== undefined && f.epoch === hello?.signalEpoch) {
      if (seq <= f.seq) return // already applied
      if (seq > f.seq + 1) {
        // A hole in the live stream: fetch what is missing before going on.
        f.held.push(signal)
        void resume(f, g)
        return
      }
    }
    apply(f, signal, seq)
  }

  /** Applies held signals in order from the cursor; returns false when a hole remains. */
  function drainHeld(f: Followed, g: number): boolean {
    const held = f.held.sort((a, b) => (a.$seq ?? 0) - (b.$seq ?? 0))
    f.held = []
    for (let i = 0; i < held.length; i++) {
      if (g !== gen) return true
      const s = held[i]!
      const seq = s.$seq!
      if (f.seq !== undefined && seq <= f.seq) continue
      if (f.seq !== undefined && seq !== f.seq + 1) {
        f.held = held.slice(i)
        return false
      }
      apply(f, s, seq)
    }
    return true
  }

  async function resume(f: Followed, g: number): Promise<void> {
    if (f.busy) return
    f.busy = true
    for (let round = 0; round < 3; round++) {
      if (g !== gen || !followed.has(f.sessionId)) return
      const epoch = f.epoch ?? hello!.signalEpoch
      let res: MethodMap['sessions.resume']['result']
      try {
        res = (await send(g, 'sessions.resume', { sessionId: f.sessionId, epoch, afterSeq: f.seq ?? 0 }, false)) as typeof res
      } catch (err) {
        if (g !== gen) return // dropped: the next connection resumes from the same cursor (C15)
        f.busy = false
        return load(f, 'error', g)
      }
      if (g !== gen) return
      if (!res.ok) {
        f.busy = false
        return load(f, res.reason === 'gap' ? 'gap' : 'epoch', g)
      }
      f.epoch = hello!.signalEpoch
      let hole = false
      for (const r of res.signals ?? []) {
        if (g !== gen) return // a dead connection's replay stops here (C18)
        if (f.seq !== undefined && r.seq <= f.seq) continue
        if (f.seq !== undefined && r.seq !== f.seq + 1) {
          hole = true
          break
        }
        apply(f, { ...r.signal, $seq: r.seq } as WireSignal, r.seq)
      }
      if (g !== gen) return
      if (!hole && drainHeld(f, g)) {
        f.busy = false
        return resetIfAsked(f, g)
      }
    }
    f.busy = false
    f.needReset = false
    return load(f, 'gap', g)
  }

  /** Reloads a session whose session:reset was applied during a resume or a load. */
  function resetIfAsked(f: Followed, g: number): Promise<void> | undefined {
    if (!f.needReset || g !== gen) return undefined
    f.needReset = false
    return load(f, 'reset', g)
  }

  /** Loads the session's last page and continues from the snapshot's $seq watermark. */
  async function load(f: Followed, reason: Resync['reason'], g: number): Promise<void> {
    if (f.busy) return
    f.busy = true
    let page: SessionsLoadEventsResult
    try {
      page = await send(g, 'sessions.loadEvents', { sessionId: f.sessionId, limit: 200 }, false) as SessionsLoadEventsResult
    } catch (err) {
      if (g === gen) {
        f.busy = false
        const e = err instanceof Error ? err : new Error(String(err))
        report(e)
        const cb = f.onLoad
        f.onLoad = undefined
        cb?.(e)
      }
      return
    }
    if (g !== gen || !followed.has(f.sessionId)) return
    f.needLoad = false
    const mark = page as SessionsLoadEventsResult & { $seq?: number; signalEpoch?: string }
    for (const l of [...resyncListeners]) {
      try {
        l({ sessionId: f.sessionId, reason, page })
      } catch (err) {
        report(err instanceof Error ? err : new Error(String(err)))
      }
    }
    const sameEpoch = f.epoch === hello!.signalEpoch
    f.epoch = mark.signalEpoch ?? hello!.signalEpoch
    if (typeof mark.$seq === 'number' && (mark.signalEpoch === undefined || mark.signalEpoch === hello!.signalEpoch)) {
      // The snapshot holds every signal up to the watermark: apply the held ones above it.
      f.seq = mark.$seq
      if (!drainHeld(f, g)) {
        f.busy = false
        return resume(f, g)
      }
    } else {
      // No watermark: the snapshot may or may not hold the held signals. Drop them and reload
      // again once the streaming run ends (option iii of C19).
      const held = f.held
      f.held = []
      const last = held.reduce((m, s) => Math.max(m, s.$seq ?? 0), 0)
      f.seq = last > 0 ? last : f.seq !== undefined && sameEpoch ? f.seq : undefined
      if (held.length > 0 && !held.some((s) => s.kind === 'run:end')) f.reloadAtRunEnd = true
    }
    f.busy = false
    const cb = f.onLoad
    f.onLoad = undefined
    cb?.()
    await resetIfAsked(f, g)
  }

  /** Sends the declared presence on the current connection, if any and if the server offers it. */
  function sendPresence() {
    if (presence !== undefined && client.offers('presence.set')) client.notify('presence.set', presence)
  }

  // ---- the public object ---------------------------------------------------------------------------

  const client: ServerClient = {
    ready,
    get hello() {
      return hello
    },
    connection: { get: state.get, subscribe: state.subscribe },
    call<M extends Method>(method: M, params: MethodMap[M]['params']) {
      return send(gen, method, params, false) as Promise<MethodMap[M]['result']>
    },
    callDynamic(method, params) {
      return send(gen, method, params, false)
    },
    notify(method, params) {
      const sock = ws
      if (!live || sock === undefined || sock.readyState !== OPEN) return false
      try {
        sock.send(JSON.stringify({ jsonrpc: '2.0', method, params }))
        return true
      } catch {
        return false
      }
    },
    onSignal(a: string | ((s: WireSignal) => void), b?: (s: never) => void) {
      const l: Listener = typeof a === 'string' ? { kind: a, fn: b as (s: WireSignal) => void } : { fn: a }
      listeners.add(l)
      return () => {
        listeners.delete(l)
      }
    },
    onResync(handler) {
      resyncListeners.add(handler)
      return () => {
        resyncListeners.delete(handler)
      }
    },
    offers(method) {
      return hello?.methods.includes(method) ?? false
    },
    follow(sessionId, opts = {}) {
      let f = followed.get(sessionId)
      if (f === undefined) {
        f = { sessionId, epoch: undefined, seq: undefined, busy: false, held: [], reloadAtRunEnd: false, needLoad: false }
        followed.set(sessionId, f)
      }
      if (opts.cursor) {
        f.epoch = opts.cursor.epoch
        f.seq = opts.cursor.seq
      } else if (opts.fresh) {
        f.epoch = hello?.signalEpoch
        f.seq = 0
      }
      const entry = f
      if (opts.load) {
        entry.needLoad = true
        entry.onLoad = opts.onLoad
        if (live) void load(entry, 'initial', gen) // else at the next hello
      }
      return () => {
        if (followed.get(sessionId) === entry) followed.delete(sessionId)
      }
    },
    cursor(sessionId) {
      const f = followed.get(sessionId)
      return f && f.epoch !== undefined && f.seq !== undefined ? { epoch: f.epoch, seq: f.seq } : undefined
    },
    setPresence(sessionId, focused) {
      presence = { sessionId, focused }
      if (live) sendPresence()
    },
    reconnect() {
      if (stopped) return
      if (ws === undefined && retryTimer !== undefined) connect()
      else checkAlive()
    },
    acceptHost() {
      if (state.get().status !== 'hostChanged') return
      savedHostId = undefined
      presence = undefined // its session belongs to the old server
      for (const f of followed.values()) {
        f.seq = undefined
        f.epoch = undefined
      }
      stopped = false
      attempt = 0
      connect()
    },
    close() {
      if (userClosed) return
      userClosed = true
      doc?.removeEventListener('visibilitychange', onVisible)
      if (stopped) {
        state.set({ status: 'closed', error: currentError() ?? new ClosedError() })
        return
      }
      const sock = ws
      ws = undefined
      stopped = true
      gen++
      live = false
      clearTimers()
      clock.clearTimeout(retryTimer)
      retryTimer = undefined
      if (sock !== undefined) {
        try {
          if (sock.readyState === OPEN) sock.close(1000)
          else dropSocket(sock)
        } catch {
          // gone already
        }
      }
      const e = new ClosedError()
      rejectAll(() => e)
      if (!readySettled) {
        readySettled = true
        rejectReady(e)
      }
      state.set({ status: 'closed' })
    },
  }
  connect()
  return client
}
