// The worker protocol (client seed: "Worker protocol"): plain postMessage objects, each with v: 1 and
// a type. exposeRunHost runs in the worker; createWorkerHost is the page's ChatHost over it.
//
// A message with neither v nor type is someone else's (devtools, other libraries) and is ignored
// silently. A message with a type at another version (or none) is dropped with one warning per peer
// naming both versions; if it is the worker's first message the host fails with WorkerVersionError.
// An unknown type at v1 is dropped with a warning. Nothing dropped reaches a transcript (C28).
import { ClosedError, HostGoneError, WorkerVersionError } from '../client/errors.js'
import type { StreamEvent } from '../protocol.js'
import { createRunHostInternal, type AbortSignalLike, type RunFunction, type RunHost } from './run-host.js'
import type { InteractionRequest, LiveEvent } from './types.js'

/** The worker protocol version this build speaks. */
export const WORKER_PROTOCOL_VERSION = 1 as const

/** Messages the page sends to the worker. */
export type ToWorker =
  | { v: 1; type: 'send'; sessionId: string; runId: string; prompt: string; model?: string }
  | { v: 1; type: 'cancel'; sessionId: string; runId: string }
  | { v: 1; type: 'answer'; interactionId: string; answer: unknown }

/** Messages the worker sends to the page. */
export type FromWorker =
  | { v: 1; type: 'ready' }
  | { v: 1; type: 'event'; sessionId: string; runId: string; event: LiveEvent }
  | { v: 1; type: 'ask'; sessionId: string; runId: string; interactionId: string; request: InteractionRequest }
  | { v: 1; type: 'done'; sessionId: string; runId: string; ok: boolean; error?: string }

/** A port: the worker's global scope (self), a Worker, a MessagePort, or Node's parentPort / Worker. */
export interface PortLike {
  postMessage(message: unknown): void
  // The event's type differs across platforms (MessageEvent, Node's Event): only event.data is read.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  addEventListener?(type: 'message', listener: (event: any) => void): void
  on?(event: 'message', listener: (data: unknown) => void): unknown
}

/** A Worker as the page holds it: a Web Worker, or Node's worker_threads Worker. */
export interface WorkerLike extends PortLike {
  terminate?(): unknown
}

/** Options of both sides. */
export interface WorkerSideOptions {
  /** Hears each protocol warning (default console.warn). */
  onWarning?: (message: string) => void
}

declare const console: { warn(...args: unknown[]): void }

function listen(port: PortLike, fn: (data: unknown) => void) {
  if (typeof port.on === 'function') port.on('message', fn)
  else if (typeof port.addEventListener === 'function') port.addEventListener('message', (e: { data: unknown }) => fn(e.data))
  else throw new Error('The port has neither on() nor addEventListener().')
}

type Check = { ok: true; msg: { type: string } & Record<string, unknown> } | { ok: false; foreign: boolean; version?: unknown }

/** Sorts an incoming message: ours at v1, foreign (ignored), or another version. */
function check(data: unknown): Check {
  if (data === null || typeof data !== 'object') return { ok: false, foreign: true }
  const m = data as Record<string, unknown>
  if (!('v' in m) && !('type' in m)) return { ok: false, foreign: true }
  if (m['v'] !== WORKER_PROTOCOL_VERSION || typeof m['type'] !== 'string') return { ok: false, foreign: false, version: m['v'] }
  return { ok: true, msg: m as { type: string } & Record<string, unknown> }
}

function warner(side: string, onWarning?: (m: string) => void) {
  let versionWarned = false
  const warn = onWarning ?? ((m: string) => console.warn(m))
  return {
    version(v: unknown) {
      if (versionWarned) return
      versionWarned = true
      warn(`zidane worker protocol: dropped a message from the ${side} at version ${v === undefined ? '(none)' : String(v)}; this side speaks v${WORKER_PROTOCOL_VERSION}.`)
    },
    unknown(type: string) {
      warn(`zidane worker protocol: dropped a v${WORKER_PROTOCOL_VERSION} message of unknown type "${type}" from the ${side}.`)
    },
  }
}

declare const AbortController: new () => { readonly signal: AbortSignalLike; abort(reason?: unknown): void }

/**
 * Runs run in a worker for createWorkerHost on the page. port defaults to the worker's global scope
 * (self); in Node's worker_threads pass parentPort.
 */
export function exposeRunHost(run: RunFunction, options: WorkerSideOptions & { port?: PortLike } = {}): void {
  const port = options.port ?? (globalThis as unknown as PortLike)
  const warn = warner('page', options.onWarning)
  const runs = new Map<string, { abort(): void }>()
  const asks = new Map<string, (answer: unknown) => void>()
  let nextAsk = 0
  const post = (m: FromWorker) => port.postMessage(m)

  listen(port, (data) => {
    const c = check(data)
    if (!c.ok) {
      if (!c.foreign) warn.version(c.version)
      return
    }
    const m = c.msg
    switch (m.type) {
      case 'send': {
        const { sessionId, runId, prompt } = m as unknown as Extract<ToWorker, { type: 'send' }>
        const model = (m as { model?: string }).model
        const controller = new AbortController()
        let ended = false
        runs.set(runId, { abort: () => controller.abort() })
        const ctx = {
          prompt,
          sessionId,
          runId,
          ...(model !== undefined ? { model } : {}),
          signal: controller.signal,
          emit(event: LiveEvent) {
            if (!ended) post({ v: 1, type: 'event', sessionId, runId, event })
          },
          ask(request: InteractionRequest): Promise<unknown> {
            if (ended || controller.signal.aborted) return Promise.resolve(null)
            const interactionId = `${runId}:${++nextAsk}`
            return new Promise((resolve) => {
              asks.set(interactionId, resolve)
              controller.signal.addEventListener('abort', () => {
                if (asks.delete(interactionId)) resolve(null)
              })
              post({ v: 1, type: 'ask', sessionId, runId, interactionId, request })
            })
          },
        }
        const finish = (ok: boolean, error?: unknown) => {
          ended = true
          runs.delete(runId)
          const msg: FromWorker = { v: 1, type: 'done', sessionId, runId, ok }
          if (!ok) msg.error = error instanceof Error ? error.message : String(error)
          post(msg)
        }
        let p: Promise<void> | void
        try {
          p = run(ctx)
        } catch (err) {
          finish(false, err)
          return
        }
        Promise.resolve(p).then(
          () => finish(true),
          (err: unknown) => finish(false, err),
        )
        return
      }
      case 'cancel':
        runs.get(String(m['runId']))?.abort()
        return
      case 'answer': {
        const id = String(m['interactionId'])
        const resolve = asks.get(id)
        asks.delete(id)
        resolve?.(m['answer'])
        return
      }
      default:
        warn.unknown(m.type)
    }
  })
  post({ v: 1, type: 'ready' })
}

/** Options of createWorkerHost. */
export interface WorkerHostOptions extends WorkerSideOptions {
  /** Makes ids for sessions and runs. */
  newId?: () => string
  /** Hears a version mismatch or the worker's death. */
  onError?: (error: Error) => void
}

/**
 * A ChatHost whose runs happen in a worker running exposeRunHost. If the worker dies (error, exit,
 * terminate) every run in flight ends with an error row and status error, pending questions resolve to
 * null, and later calls reject with HostGoneError (C29). close() terminates the worker.
 */
export function createWorkerHost(worker: WorkerLike, options: WorkerHostOptions = {}): RunHost {
  const warn = warner('worker', options.onWarning)
  const inflight = new Map<string, { emit(e: LiveEvent): void; ask(r: InteractionRequest): Promise<unknown>; resolve(): void; reject(e: Error): void }>()
  let gone: Error | undefined
  let seenFirst = false
  let resolveReady!: () => void
  let rejectReady!: (e: Error) => void
  const ready = new Promise<void>((res, rej) => {
    resolveReady = res
    rejectReady = rej
  })
  ready.catch(() => {})

  const post = (m: ToWorker) => {
    if (gone) return
    worker.postMessage(m)
  }

  const host = createRunHostInternal({
    ...(options.newId ? { newId: options.newId } : {}),
    run({ prompt, sessionId, runId, model, emit, ask, signal }) {
      if (gone) return Promise.reject(gone)
      return new Promise<void>((resolve, reject) => {
        inflight.set(runId, { emit, ask, resolve, reject })
        signal.addEventListener('abort', () => post({ v: 1, type: 'cancel', sessionId, runId }))
        const m: ToWorker = { v: 1, type: 'send', sessionId, runId, prompt }
        if (model !== undefined) m.model = model
        post(m)
      })
    },
  })

  function die(error: Error) {
    if (gone) return
    gone = error
    rejectReady(error)
    host.fail(error)
    for (const r of [...inflight.values()]) r.reject(error)
    inflight.clear()
    if (!(error instanceof ClosedError)) options.onError?.(error)
  }

  listen(worker, (data) => {
    if (gone) return
    const c = check(data)
    if (!c.ok) {
      if (c.foreign) return
      warn.version(c.version)
      if (!seenFirst) die(new WorkerVersionError(c.version, WORKER_PROTOCOL_VERSION))
      return
    }
    seenFirst = true
    const m = c.msg
    switch (m.type) {
      case 'ready':
        resolveReady()
        return
      case 'event': {
        const r = inflight.get(String(m['runId']))
        r?.emit(m['event'] as StreamEvent)
        return
      }
      case 'ask': {
        const r = inflight.get(String(m['runId']))
        const interactionId = String(m['interactionId'])
        if (!r) return post({ v: 1, type: 'answer', interactionId, answer: null })
        void r.ask(m['request'] as InteractionRequest).then((answer) => post({ v: 1, type: 'answer', interactionId, answer }))
        return
      }
      case 'done': {
        const runId = String(m['runId'])
        const r = inflight.get(runId)
        inflight.delete(runId)
        if (!r) return
        if (m['ok'] === true) r.resolve()
        else r.reject(new Error(typeof m['error'] === 'string' ? m['error'] : 'The run failed in the worker.'))
        return
      }
      default:
        warn.unknown(m.type)
    }
  })

  const onDeath = (what: string) => () => die(new HostGoneError(`The worker ${what}; its runs ended with an error.`))
  if (typeof worker.on === 'function') {
    const on = worker.on.bind(worker) as (e: string, f: (...a: unknown[]) => void) => unknown
    on('error', onDeath('failed'))
    on('exit', onDeath('exited'))
    on('messageerror', onDeath('sent a message that could not be read'))
  } else if (typeof worker.addEventListener === 'function') {
    const add = worker.addEventListener.bind(worker) as unknown as (t: string, f: () => void) => void
    add('error', onDeath('failed'))
    add('messageerror', onDeath('sent a message that could not be read'))
  }

  const baseClose = host.close
  return Object.assign(host, {
    ready,
    close() {
      die(new ClosedError('The worker host was closed.'))
      baseClose()
      try {
        void worker.terminate?.()
      } catch {
        // gone already
      }
    },
  })
}
