// createRunHost: a ChatHost that keeps sessions, transcripts and pending questions in memory and
// calls run once per prompt (client seed: "In the page or a Web Worker").
import { createSessionStreams, type FrameScheduler } from '../chat/streams.js'
import { ClosedError } from '../client/errors.js'
import type { StreamEvent, WireSignal } from '../protocol.js'
import { createStore } from '../store.js'
import type { ChatHost, HostSession, InteractionRequest, LiveEvent, PendingInteraction } from './types.js'

/** The part of AbortSignal a run reads (the platform's AbortSignal fits). */
export interface AbortSignalLike {
  readonly aborted: boolean
  readonly reason?: unknown
  addEventListener(type: 'abort', listener: () => void): void
}

declare const AbortController: new () => { readonly signal: AbortSignalLike; abort(reason?: unknown): void }

/** What run gets for one prompt. */
export interface RunContext {
  readonly prompt: string
  readonly sessionId: string
  readonly runId: string
  /** The session's model, when the host has models. */
  readonly model?: string
  /** Adds an event to the transcript (ignored once the run ended or was cancelled). */
  emit(event: LiveEvent): void
  /** Asks the user; resolves with the answer, or null when dismissed, cancelled or the host is gone. */
  ask(request: InteractionRequest): Promise<unknown>
  /** Aborted when the user cancels the run. */
  readonly signal: AbortSignalLike
}

/** The function that answers one prompt. */
export type RunFunction = (context: RunContext) => Promise<void> | void

/** Options of createRunHost. */
export interface RunHostOptions {
  run: RunFunction
  /** Initial sessions, most recent first. */
  sessions?: readonly HostSession[]
  /** Initial transcripts by session id. */
  transcripts?: Readonly<Record<string, readonly StreamEvent[]>>
  /** Model ids; the first is each new session's model. */
  models?: readonly string[]
  /** Makes ids for sessions, runs and questions (default crypto.randomUUID, else a counter). */
  newId?: () => string
  /** The streams' frame scheduler (see createSessionStreams); false reveals at once. */
  frames?: FrameScheduler | false
}

/** A run host: a ChatHost plus restore. */
export interface RunHost extends ChatHost {
  /** Adds a saved session with its history at the top of the list. */
  restore(session: HostSession, events: readonly StreamEvent[]): void
}

/** Internal: a run host whose owner can end it (createWorkerHost). */
export interface RunHostInternal extends RunHost {
  /** Ends the host with error: later calls reject with it, queued prompts are dropped. */
  fail(error: Error): void
}

interface Queued {
  runId: string
  prompt: string
}

interface SessionRuns {
  queue: Queued[]
  current?: { runId: string; controller: { readonly signal: AbortSignalLike; abort(reason?: unknown): void }; cancelled: boolean; ended: boolean } | undefined
}

function defaultNewId(): () => string {
  const c = (globalThis as { crypto?: { randomUUID?: () => string } }).crypto
  if (c?.randomUUID) return () => c.randomUUID!()
  let n = 0
  return () => `id-${++n}-${Math.random().toString(36).slice(2)}`
}

/** Creates a run host. */
export function createRunHost(options: RunHostOptions): RunHost {
  return createRunHostInternal(options)
}

/** createRunHost with the fail() the worker host uses. */
export function createRunHostInternal(options: RunHostOptions): RunHostInternal {
  const newId = options.newId ?? defaultNewId()
  const streams = createSessionStreams({ frames: options.frames ?? false })
  const sessions = createStore<readonly HostSession[]>(Object.freeze([...(options.sessions ?? [])]))
  const interactions = createStore<readonly PendingInteraction[]>(Object.freeze([]))
  const answers = new Map<string, (answer: unknown) => void>()
  const runs = new Map<string, SessionRuns>()
  const seqs = new Map<string, number>()
  let closedError: Error | undefined

  // A local session's history is what it holds: every one starts loaded (its page has no more).
  for (const sess of options.sessions ?? []) streams.reset(sess.id, { events: [...(options.transcripts?.[sess.id] ?? [])], start: 0, exact: true })
  for (const [id, events] of Object.entries(options.transcripts ?? {})) if (!(options.sessions ?? []).some((x) => x.id === id)) streams.reset(id, { events: [...events], start: 0, exact: true })

  function signal(s: WireSignal) {
    const id = (s as { sessionId: string }).sessionId
    const seq = (seqs.get(id) ?? 0) + 1
    seqs.set(id, seq)
    streams.apply({ ...s, $seq: seq } as WireSignal)
  }

  function setStatus(sessionId: string, status: string) {
    const list = sessions.get()
    const i = list.findIndex((s) => s.id === sessionId)
    if (i < 0 || list[i]!.status === status) return
    const next = list.slice()
    next[i] = { ...list[i]!, status, updatedAt: Date.now() }
    sessions.set(Object.freeze(next))
  }

  function dropInteractions(pred: (p: PendingInteraction) => boolean) {
    const list = interactions.get()
    const keep = list.filter((p) => !pred(p))
    for (const p of list) {
      if (pred(p)) {
        const resolve = answers.get(p.id)
        answers.delete(p.id)
        resolve?.(null)
      }
    }
    if (keep.length !== list.length) interactions.set(Object.freeze(keep))
  }

  function runsOf(sessionId: string): SessionRuns {
    let r = runs.get(sessionId)
    if (!r) {
      r = { queue: [] }
      runs.set(sessionId, r)
    }
    return r
  }

  async function runNext(sessionId: string) {
    const r = runsOf(sessionId)
    if (r.current || r.queue.length === 0) return
    if (closedError) {
      r.queue = []
      return
    }
    const item = r.queue.shift()!
    const controller = new AbortController()
    const cur = { runId: item.runId, controller, cancelled: false, ended: false }
    r.current = cur
    const turnId = item.runId
    setStatus(sessionId, 'running')
    signal({ kind: 'run:start', sessionId, runId: item.runId })
    signal({ kind: 'event', sessionId, runId: item.runId, event: { kind: 'user-prompt', text: item.prompt, turnId } })
    const model = options.models?.[0]
    const ctx: RunContext = {
      prompt: item.prompt,
      sessionId,
      runId: item.runId,
      ...(model !== undefined ? { model } : {}),
      signal: controller.signal,
      emit(event) {
        if (cur.ended || cur.cancelled) return
        signal({ kind: 'event', sessionId, runId: item.runId, event: { ...event, turnId: event.turnId ?? turnId } as StreamEvent })
      },
      ask(request) {
        if (cur.ended || cur.cancelled || closedError) return Promise.resolve(null)
        const id = newId()
        return new Promise((resolve) => {
          answers.set(id, resolve)
          interactions.set(Object.freeze([...interactions.get(), Object.freeze({ id, sessionId, runId: item.runId, request })]))
        })
      },
    }
    let error: unknown
    let failed = false
    try {
      await options.run(ctx)
    } catch (err) {
      failed = true
      error = err
    }
    cur.ended = true
    dropInteractions((p) => p.runId === item.runId)
    if (cur.cancelled) {
      signal({ kind: 'event', sessionId, runId: item.runId, event: { kind: 'error', message: 'Cancelled.', stopped: true, turnId } })
      signal({ kind: 'run:end', sessionId, runId: item.runId, ok: false, interrupted: true })
      setStatus(sessionId, 'idle')
    } else if (failed) {
      const message = error instanceof Error ? error.message : String(error)
      signal({ kind: 'event', sessionId, runId: item.runId, event: { kind: 'error', message, turnId } })
      signal({ kind: 'run:end', sessionId, runId: item.runId, ok: false, error: message })
      setStatus(sessionId, 'error')
    } else {
      signal({ kind: 'run:end', sessionId, runId: item.runId, ok: true })
      setStatus(sessionId, 'idle')
    }
    r.current = undefined
    void runNext(sessionId)
  }

  const host: RunHostInternal = {
    ready: Promise.resolve(),
    streams,
    sessions: { get: sessions.get, subscribe: sessions.subscribe },
    interactions: { get: interactions.get, subscribe: interactions.subscribe },
    async createSession(opts = {}) {
      if (closedError) throw closedError
      const now = Date.now()
      const s: HostSession = Object.freeze({ id: newId(), title: opts.title ?? 'New session', status: 'idle', createdAt: now, updatedAt: now })
      sessions.set(Object.freeze([s, ...sessions.get()]))
      streams.reset(s.id, { events: [], start: 0, exact: true })
      return s
    },
    async open(sessionId) {
      if (closedError) throw closedError
      if (!sessions.get().some((s) => s.id === sessionId)) throw new Error(`No session ${sessionId} in this host.`)
    },
    async send(sessionId, prompt) {
      if (closedError) throw closedError
      if (!sessions.get().some((s) => s.id === sessionId)) throw new Error(`No session ${sessionId} in this host. Create it first.`)
      const runId = newId()
      runsOf(sessionId).queue.push({ runId, prompt })
      void runNext(sessionId)
      return { runId }
    },
    async cancel(sessionId, runId) {
      const r = runs.get(sessionId)
      if (!r) return
      if (r.current && (runId === undefined || r.current.runId === runId) && !r.current.cancelled) {
        r.current.cancelled = true
        r.current.controller.abort()
        dropInteractions((p) => p.runId === r.current!.runId)
        return
      }
      if (runId !== undefined) r.queue = r.queue.filter((q) => q.runId !== runId)
    },
    async answer(interactionId, answer) {
      const resolve = answers.get(interactionId)
      if (!resolve) throw new Error(`No pending question ${interactionId}.`)
      answers.delete(interactionId)
      interactions.set(Object.freeze(interactions.get().filter((p) => p.id !== interactionId)))
      resolve(answer)
    },
    restore(session, events) {
      sessions.set(Object.freeze([session, ...sessions.get().filter((s) => s.id !== session.id)]))
      streams.reset(session.id, { events: [...events], start: 0, exact: true })
    },
    fail(error) {
      if (closedError) return
      closedError = error
      for (const r of runs.values()) r.queue = []
      dropInteractions(() => true)
    },
    close() {
      host.fail(new ClosedError('The host was closed.'))
      for (const r of runs.values()) {
        if (r.current && !r.current.ended) {
          r.current.cancelled = true
          r.current.controller.abort()
        }
      }
    },
  }
  return host
}
