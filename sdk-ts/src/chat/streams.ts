// createSessionStreams: the session stream store for a client of many concurrent sessions
// (client seed: per-session subscriptions, smooth streaming per (session, owner) on an injected frame
// scheduler, lazy scrollback with loadEarlier, run-end compaction).
import type { SessionsLoadEventsParams, SessionsLoadEventsResult, StreamEvent, WireSignal } from '../protocol.js'
import { applyLiveEvent, closeOpenBlock, isOpenBlock } from './reducer.js'

/** Schedules a callback for the next frame: requestAnimationFrame in a page, a fake in tests. */
export interface FrameScheduler {
  request(callback: () => void): unknown
  cancel(handle: unknown): void
}

/** Where a session's scrollback stands. */
export interface SessionPage {
  /**
   * An older page can be loaded (loadEarlier). True while the store holds no page of the session
   * (loaded false): its history is not known, and loadEarlier loads the newest page.
   */
  readonly hasMore: boolean
  /** The store holds a page of the session (reset, or a first loadEarlier answered). */
  readonly loaded: boolean
  /** A loadEarlier request runs. */
  readonly loading: boolean
  /** How many transcript events come before the first loaded row. */
  readonly start: number
  /** The before cursor of the next older page (a turn position), when hasMore. */
  readonly cursor?: number
  /** The last loadEarlier failure's message. */
  readonly error?: string
}

/** One session as readers see it. A new object after every change of the session, never mutated. */
export interface SessionSnapshot {
  /** The transcript rows, merged by applyLiveEvent; an open block may show a prefix while it is revealed. */
  readonly events: readonly StreamEvent[]
  /** A run is in progress (between run:start and run:end). */
  readonly running: boolean
  /** The running (or last) run's id. */
  readonly runId?: string
  /** idle, running or error (the last run failed). */
  readonly status: 'idle' | 'running' | 'error'
  readonly page: SessionPage
  /**
   * The streaming turn's last stream:progress (at most 4 a second): set while a model turn of the
   * running run streams, cleared at its turn:end (which has the provider's counts) and at run:end.
   * The signal is ephemeral (no $seq, never replayed): after a reconnect it is absent until the
   * next report.
   */
  readonly progress?: StreamProgress
  /**
   * The last run ended interrupted (its run:end had interrupted: true: cancelled, or stopped by a
   * server shutdown); cleared at the next run:start.
   */
  readonly interrupted?: true
}

/** A streaming turn's progress (the stream:progress signal's numbers). */
export interface StreamProgress {
  readonly runId: string
  readonly turnId: string
  /** Output tokens of the turn so far (estimated while streaming). */
  readonly tokens: number
  /** Output tokens per second since the turn's first token. */
  readonly tokensPerSecond: number
}

/**
 * A page of a transcript as reset takes it: a sessions.loadEvents result, whose watermark
 * (signalEpoch, $seq) a locally built page may leave out.
 */
export type TranscriptPage = Omit<SessionsLoadEventsResult, 'signalEpoch' | '$seq'> & Partial<Pick<SessionsLoadEventsResult, 'signalEpoch' | '$seq'>>

/** Loads a page of a session's transcript (sessions.loadEvents). */
export type LoadEvents = (params: SessionsLoadEventsParams) => Promise<SessionsLoadEventsResult>

/** What createSessionStreams can attach to: a ServerClient fits. */
export interface StreamSource {
  /** The latest ipc.hello answer: its signalEpoch names the epoch of the signals that follow. */
  readonly hello?: { readonly signalEpoch: string } | undefined
  onSignal(handler: (signal: WireSignal) => void): () => void
  onResync(handler: (r: { sessionId: string; page: SessionsLoadEventsResult }) => void): () => void
  call(method: 'sessions.loadEvents', params: SessionsLoadEventsParams): Promise<SessionsLoadEventsResult>
}

/** Options of createSessionStreams. */
export interface SessionStreamsOptions {
  /** Feed the store from this client's signals and resyncs, and page through it. */
  client?: StreamSource
  /** Pages older events (default: the client's sessions.loadEvents). */
  loadEvents?: LoadEvents
  /** The frame scheduler for smooth streaming; default requestAnimationFrame (or a 16 ms timer); false reveals at once. */
  frames?: FrameScheduler | false
  /** Turns per loadEarlier page (default 50). */
  pageSize?: number
}

/** The session stream store. */
export interface SessionStreams {
  /**
   * Applies one signal (event, run:start, stream:progress, turn:end, run:end; others are ignored),
   * once: a session signal whose $seq is not above the last one applied to that session in the
   * same epoch is ignored, so an app that calls apply with a client's signals and also passes (or
   * attaches) that client gets each signal once. The epoch is the attached client's
   * hello.signalEpoch, or else the one of the session's last reset page; a new epoch, or a reset,
   * starts the count again. Signals without $seq (stream:progress, locally made ones) always apply.
   */
  apply(signal: WireSignal): void
  /**
   * Replaces a session's transcript with a loaded page (sessions.loadEvents). A page with a
   * watermark (signalEpoch, $seq) sets what was seen to it: signals up to that $seq are in the
   * page and are not applied again. A page without one (built locally) forgets what was seen.
   */
  reset(sessionId: string, page: TranscriptPage): void
  /**
   * Sets whether the session's run is going on from the session's record (sessions.get's status),
   * read after a reset: a page that loaded mid-run, or reloaded after a gap, never saw the run's
   * run:start. Read after the page, the status is right in every order: a later run:end has a $seq
   * above the page's watermark and is applied after it. The run's id stays unknown until its
   * stream:progress or run:end names it.
   */
  setStatus(sessionId: string, status: string): void
  /** The session's transcript rows (the snapshot's events). */
  transcript(sessionId: string): readonly StreamEvent[]
  /** The session's snapshot; one shared empty snapshot for a session the store has not seen. */
  getSnapshot(sessionId: string): SessionSnapshot
  /** Calls listener after each change of that session only. */
  subscribe(sessionId: string, listener: () => void): () => void
  /** How many listeners a session has (tests, diagnostics). */
  subscriberCount(sessionId: string): number
  /**
   * Loads the next older page; no request when there is none or one runs (its promise is
   * returned). For a session the store holds no page of (page.loaded false) it loads the newest
   * page, keeping the live rows that came after the page's watermark.
   */
  loadEarlier(sessionId: string): Promise<void>
  /** Run-end compaction: flushes the reveal and closes open blocks; loaded pages and the cursor stay. */
  compact(sessionId: string): void
  /** Feeds the store from a client; returns a function that detaches it. */
  attach(client: StreamSource): () => void
  /** Stops frames and detaches; later writes are ignored. */
  dispose(): void
}

/** A change of a snapshot: a key present with undefined clears that field (runId, progress). */
type SnapshotPatch = { [K in keyof SessionSnapshot]?: SessionSnapshot[K] | undefined }

/** The page of a session the store holds no page of: its history is not known (C16). */
const EMPTY_PAGE: SessionPage = Object.freeze({ hasMore: true, loaded: false, loading: false, start: 0 })
const EMPTY_EVENTS: readonly StreamEvent[] = Object.freeze([])
/** The snapshot of every session the store has not seen: the same reference on every call (C24). */
export const EMPTY_SESSION: SessionSnapshot = Object.freeze({ events: EMPTY_EVENTS, running: false, status: 'idle', page: EMPTY_PAGE })

interface State {
  rows: readonly StreamEvent[]
  snapshot: SessionSnapshot
  /** Smooth streaming of the open block: its owner (kind and turn) and the characters shown. */
  reveal?: { owner: string; shown: number } | undefined
  loading?: Promise<void> | undefined
  /** Counts resets, so a page that answers after a reset is dropped. */
  version: number
  /** The last $seq applied and its epoch (undefined: nothing yet, or forgotten by a reset without a watermark). */
  seen?: { epoch: string | undefined; seq: number } | undefined
  /** While the first load of a never-loaded session runs: the events applied meanwhile, with their $seq. */
  inFlight?: Array<{ seq: number | undefined; event: StreamEvent }> | undefined
}

declare const setTimeout: (fn: () => void, ms: number) => unknown
declare const clearTimeout: (handle: unknown) => void

function defaultFrames(): FrameScheduler {
  const g = globalThis as { requestAnimationFrame?: (cb: () => void) => unknown; cancelAnimationFrame?: (h: unknown) => void }
  if (typeof g.requestAnimationFrame === 'function' && typeof g.cancelAnimationFrame === 'function') {
    return { request: (cb) => g.requestAnimationFrame!(cb), cancel: (h) => g.cancelAnimationFrame!(h) }
  }
  return { request: (cb) => setTimeout(cb, 16), cancel: (h) => clearTimeout(h) }
}

/** The page state a loaded page gives. */
function pageOf(page: TranscriptPage): SessionPage {
  return Object.freeze(page.cursor !== undefined ? { hasMore: true, loaded: true, loading: false, start: page.start, cursor: page.cursor } : { hasMore: false, loaded: true, loading: false, start: page.start })
}

/** Creates the store. */
export function createSessionStreams(options: SessionStreamsOptions = {}): SessionStreams {
  const states = new Map<string, State>()
  const listeners = new Map<string, Set<() => void>>()
  const frames = options.frames === false ? undefined : (options.frames ?? defaultFrames())
  const pageSize = options.pageSize ?? 50
  let loader: LoadEvents | undefined = options.loadEvents ?? (options.client ? (p) => options.client!.call('sessions.loadEvents', p) : undefined)
  const revealing = new Set<string>()
  let frame: unknown
  let disposed = false
  const detachers: Array<() => void> = []
  const sources: StreamSource[] = []

  /** The epoch of the signals arriving now: the first attached client's that has said hello. */
  function clientEpoch(): string | undefined {
    for (const c of sources) if (c.hello?.signalEpoch !== undefined) return c.hello.signalEpoch
    return undefined
  }

  /** Whether a session signal was applied already (same epoch, $seq not above the last); records it if not. */
  function repeated(s: State, signal: WireSignal): boolean {
    const seq = (signal as { $seq?: unknown }).$seq
    if (typeof seq !== 'number') return false
    const epoch = clientEpoch() ?? s.seen?.epoch
    if (s.seen !== undefined && s.seen.epoch === epoch && seq <= s.seen.seq) return true
    s.seen = { epoch, seq }
    return false
  }

  function state(id: string): State {
    let s = states.get(id)
    if (!s) {
      s = { rows: EMPTY_EVENTS, snapshot: EMPTY_SESSION, version: 0 }
      states.set(id, s)
    }
    return s
  }

  function notify(id: string) {
    const ls = listeners.get(id)
    if (!ls) return
    for (const l of [...ls]) l()
  }

  /** The rows as shown: an open block being revealed is cut to the characters shown so far. */
  function visible(s: State): readonly StreamEvent[] {
    const r = s.reveal
    if (r === undefined) return s.rows
    const last = s.rows[s.rows.length - 1]
    if (last === undefined || !isOpenBlock(last) || r.shown >= last.text.length) return s.rows
    const out = s.rows.slice(0, -1)
    if (r.shown > 0) out.push({ ...last, text: last.text.slice(0, r.shown) })
    return out
  }

  function publish(id: string, s: State, patch: SnapshotPatch = {}) {
    const events = visible(s)
    const prev = s.snapshot
    const runId = 'runId' in patch ? patch.runId : prev.runId
    const progress = 'progress' in patch ? patch.progress : prev.progress
    const interrupted = 'interrupted' in patch ? patch.interrupted : prev.interrupted
    const next: SessionSnapshot = {
      events: events === prev.events ? prev.events : events,
      running: patch.running ?? prev.running,
      status: patch.status ?? prev.status,
      page: patch.page ?? prev.page,
      ...(runId !== undefined ? { runId } : {}),
      ...(progress !== undefined ? { progress } : {}),
      ...(interrupted ? { interrupted } : {}),
    }
    if (next.events === prev.events && next.running === prev.running && next.status === prev.status && next.page === prev.page && next.runId === prev.runId && next.progress === prev.progress && next.interrupted === prev.interrupted) return
    s.snapshot = Object.freeze(next)
    notify(id)
  }

  function flushReveal(id: string, s: State) {
    s.reveal = undefined
    revealing.delete(id)
  }

  function schedule() {
    if (frame !== undefined || frames === undefined || disposed) return
    frame = frames.request(tick)
  }

  function tick() {
    frame = undefined
    if (disposed) return
    for (const id of [...revealing]) {
      const s = states.get(id)
      const last = s?.rows[s.rows.length - 1]
      if (!s || !s.reveal || last === undefined || !isOpenBlock(last)) {
        revealing.delete(id)
        if (s) {
          s.reveal = undefined
          publish(id, s)
        }
        continue
      }
      const backlog = last.text.length - s.reveal.shown
      s.reveal.shown += Math.max(4, Math.ceil(backlog / 6))
      if (s.reveal.shown >= last.text.length) flushReveal(id, s)
      publish(id, s)
    }
    if (revealing.size > 0) schedule()
  }

  function applyEvent(id: string, s: State, event: StreamEvent) {
    const before = s.rows[s.rows.length - 1]
    s.rows = applyLiveEvent(s.rows, event)
    const last = s.rows[s.rows.length - 1]!
    const smooth = frames !== undefined && (listeners.get(id)?.size ?? 0) > 0 && isOpenBlock(last)
    if (!smooth) {
      flushReveal(id, s)
      publish(id, s)
      return
    }
    const owner = `${last.kind}:${last.turnId}`
    // Extending the open block changes nothing on show (the rows are cut where the reveal stands):
    // the next frame publishes, so a burst of pieces renders once a frame, not once a piece.
    const extended = before !== undefined && isOpenBlock(before) && `${before.kind}:${before.turnId}` === owner
    if (s.reveal === undefined || s.reveal.owner !== owner) {
      // Extending a block shown whole so far keeps it shown; a new block starts hidden. A block
      // before it is closed now and shown whole (only the last row is ever cut).
      s.reveal = { owner, shown: extended ? before.text.length : 0 }
    }
    revealing.add(id)
    schedule()
    if (!extended) publish(id, s)
  }

  function compactState(id: string, s: State) {
    flushReveal(id, s)
    s.rows = closeOpenBlock(s.rows).slice()
  }

  const streams: SessionStreams = {
    apply(signal) {
      if (disposed) return
      const id = (signal as { sessionId?: unknown }).sessionId
      if (typeof id !== 'string') return
      if (signal.kind !== 'event' && signal.kind !== 'run:start' && signal.kind !== 'turn:end' && signal.kind !== 'run:end') {
        if (signal.kind !== 'stream:progress') return
      } else if (repeated(state(id), signal)) return
      switch (signal.kind) {
        case 'event': {
          const s = state(id)
          s.inFlight?.push({ seq: (signal as { $seq?: number }).$seq, event: signal.event })
          applyEvent(id, s, signal.event)
          return
        }
        case 'run:start': {
          const s = state(id)
          publish(id, s, { running: true, status: 'running', runId: signal.runId, progress: undefined, interrupted: undefined })
          return
        }
        case 'stream:progress': {
          // Ephemeral: it may overtake sequenced signals a resume still holds, so only the running
          // run's report counts (one before its run:start or after its run:end is dropped).
          const s = states.get(id)
          // A run known only from setStatus has no id yet: its first report names it.
          if (!s || !s.snapshot.running || (s.snapshot.runId !== undefined && s.snapshot.runId !== signal.runId)) return
          if (s.snapshot.runId === undefined) publish(id, s, { runId: signal.runId })
          const progress: StreamProgress = Object.freeze({ runId: signal.runId, turnId: signal.turnId, tokens: signal.tokens, tokensPerSecond: signal.tokensPerSecond })
          publish(id, s, { progress })
          return
        }
        case 'turn:end': {
          const s = state(id)
          flushReveal(id, s)
          s.rows = closeOpenBlock(s.rows)
          publish(id, s, s.snapshot.progress?.turnId === signal.turnId ? { progress: undefined } : {})
          return
        }
        case 'run:end': {
          const s = state(id)
          compactState(id, s)
          publish(id, s, { running: false, status: signal.ok || signal.interrupted ? 'idle' : 'error', runId: signal.runId, progress: undefined, interrupted: signal.interrupted === true ? true : undefined })
          return
        }
        default:
          return
      }
    },
    reset(sessionId, page) {
      if (disposed) return
      const s = state(sessionId)
      flushReveal(sessionId, s)
      s.version++
      s.loading = undefined
      s.inFlight = undefined
      s.rows = Object.freeze(page.events.slice())
      s.seen = typeof page.$seq === 'number' ? { epoch: page.signalEpoch ?? clientEpoch(), seq: page.$seq } : undefined
      // A page whose last row ends a run (its run-summary, or the error it failed or stopped
      // with) has no run in progress at its watermark: a later run's run:start comes with its
      // prompt, which would follow. The ended run's run:end may be at or below the watermark, so
      // it is never applied: a reload after a resume's gap kept showing the run as running.
      const last = page.events[page.events.length - 1]
      const ended = s.snapshot.running && (last?.kind === 'run-summary' || last?.kind === 'error')
      publish(sessionId, s, ended ? { page: pageOf(page), running: false, status: last.kind === 'error' ? 'error' : 'idle', progress: undefined } : { page: pageOf(page) })
    },
    setStatus(sessionId, status) {
      if (disposed) return
      const s = state(sessionId)
      const running = status === 'running'
      if (running === s.snapshot.running) return
      publish(sessionId, s, running ? { running: true, status: 'running', runId: undefined, progress: undefined, interrupted: undefined } : { running: false, status: status === 'idle' ? 'idle' : 'error', progress: undefined })
    },
    transcript(sessionId) {
      return streams.getSnapshot(sessionId).events
    },
    getSnapshot(sessionId) {
      return states.get(sessionId)?.snapshot ?? EMPTY_SESSION
    },
    subscribe(sessionId, listener) {
      let set = listeners.get(sessionId)
      if (!set) {
        set = new Set()
        listeners.set(sessionId, set)
      }
      const entry = () => listener()
      set.add(entry)
      return () => {
        const cur = listeners.get(sessionId)
        if (!cur) return
        cur.delete(entry)
        if (cur.size === 0) {
          listeners.delete(sessionId)
          // Nobody watches: show the rest of the text now instead of animating it for no one (C21).
          const s = states.get(sessionId)
          if (s?.reveal !== undefined && !disposed) {
            flushReveal(sessionId, s)
            publish(sessionId, s)
          }
        }
      }
    },
    subscriberCount(sessionId) {
      return listeners.get(sessionId)?.size ?? 0
    },
    loadEarlier(sessionId) {
      const s = states.get(sessionId)
      if (disposed || !s || !s.snapshot.page.hasMore) return Promise.resolve()
      if (s.loading) return s.loading
      if (!loader) return Promise.reject(new Error('loadEarlier needs a client or a loadEvents option.'))
      const page = s.snapshot.page
      const version = s.version
      publish(sessionId, s, { page: Object.freeze({ ...page, loading: true }) })
      const params: SessionsLoadEventsParams = { sessionId, limit: pageSize }
      if (page.cursor !== undefined) params.before = page.cursor
      const first = !page.loaded
      if (first) s.inFlight = []
      const p = loader(params).then(
        (res) => {
          if (disposed || s.version !== version) return
          s.loading = undefined
          if (first) {
            // The newest page holds every row applied before the request; of those applied
            // meanwhile, keep the ones after its watermark (all of them when it has none).
            const mark = typeof res.$seq === 'number' && (res.signalEpoch === undefined || res.signalEpoch === (clientEpoch() ?? s.seen?.epoch)) ? res.$seq : undefined
            let rows: readonly StreamEvent[] = Object.freeze(res.events.slice())
            for (const x of s.inFlight ?? []) if (mark === undefined || x.seq === undefined || x.seq > mark) rows = applyLiveEvent(rows, x.event)
            s.inFlight = undefined
            flushReveal(sessionId, s)
            s.rows = rows
            if (mark !== undefined && (s.seen === undefined || s.seen.seq < mark)) s.seen = { epoch: res.signalEpoch ?? clientEpoch() ?? s.seen?.epoch, seq: mark }
          } else s.rows = Object.freeze([...res.events, ...s.rows])
          publish(sessionId, s, { page: pageOf(res) })
        },
        (err: unknown) => {
          if (disposed || s.version !== version) return
          s.loading = undefined
          s.inFlight = undefined
          publish(sessionId, s, { page: Object.freeze({ ...page, loading: false, error: err instanceof Error ? err.message : String(err) }) })
          throw err
        },
      )
      s.loading = p
      return p
    },
    compact(sessionId) {
      const s = states.get(sessionId)
      if (disposed || !s) return
      compactState(sessionId, s)
      publish(sessionId, s)
    },
    attach(client) {
      if (!loader) loader = (p) => client.call('sessions.loadEvents', p)
      sources.push(client)
      const a = client.onSignal((sig) => streams.apply(sig))
      const b = client.onResync((r) => streams.reset(r.sessionId, r.page))
      const detach = () => {
        a()
        b()
        const i = sources.indexOf(client)
        if (i >= 0) sources.splice(i, 1)
      }
      detachers.push(detach)
      return detach
    },
    dispose() {
      if (disposed) return
      disposed = true
      if (frame !== undefined && frames) frames.cancel(frame)
      frame = undefined
      revealing.clear()
      for (const d of detachers.splice(0)) d()
    },
  }
  if (options.client) streams.attach(options.client)
  return streams
}

/** The store's writes as plain functions bound to one store (useSessionStreamActions). */
export interface SessionStreamActions {
  apply(signal: WireSignal): void
  reset(sessionId: string, page: TranscriptPage): void
  loadEarlier(sessionId: string): Promise<void>
  compact(sessionId: string): void
}

/** Binds the store's writes; the functions keep their identity for the store's life. */
export function createSessionStreamActions(streams: SessionStreams): SessionStreamActions {
  return Object.freeze({
    apply: (signal: WireSignal) => streams.apply(signal),
    reset: (sessionId: string, page: SessionsLoadEventsResult) => streams.reset(sessionId, page),
    loadEarlier: (sessionId: string) => streams.loadEarlier(sessionId),
    compact: (sessionId: string) => streams.compact(sessionId),
  })
}

/** Tools whose calls edit files (useSessionEdits). */
const EDIT_TOOLS = /^(edit|write|write_file|edit_file|multi_edit|multiedit|apply_patch|create_file|str_replace|patch)$/i

/** True for a tool call that edits a file: an editing tool, or an input naming a path and new content. */
export function isEditEvent(e: StreamEvent): boolean {
  if (e.kind !== 'tool') return false
  if (EDIT_TOOLS.test(e.tool)) return true
  const input = e.input as Record<string, unknown> | null
  return input !== null && typeof input === 'object' && typeof input['path'] === 'string' && ('content' in input || 'newText' in input || 'patch' in input)
}
