// createServerHost: a ChatHost over zidane-server's protocol through createServerClient (client seed:
// "zidane-server, over WebSocket").
import { createSessionStreams, type FrameScheduler, type SessionStreamsOptions } from '../chat/streams.js'
import { createServerClient, type ConnectionState, type ServerClient, type ServerClientOptions } from '../client/client.js'
import { ClosedError } from '../client/errors.js'
import type { InteractionRequest as WireInteraction, Session, WireSignal } from '../protocol.js'
import { NotOfferedError } from '../client/errors.js'
import { createStore, type ReadableStore } from '../store.js'
import type { ChatHost, HostSession, PendingInteraction } from './types.js'

/** Options of createServerHost: the client's options, or a client to share. */
export type ServerHostOptions = (Omit<ServerClientOptions, 'clock'> & { cwd?: string; frames?: FrameScheduler | false }) | { client: ServerClient; cwd?: string; frames?: FrameScheduler | false }

/** A ChatHost on zidane-server. */
export interface ServerHost extends ChatHost {
  readonly client: ServerClient
  /** The connection's state. */
  readonly connection: ReadableStore<ConnectionState>
  /** Reads the session list again (connects first if the client waits to retry). */
  refresh(): Promise<void>
}

/** A wire interaction request as a host's PendingInteraction (the server and SSE hosts). */
export function toPending(r: WireInteraction): PendingInteraction {
  return Object.freeze({
    id: r.requestId,
    sessionId: r.sessionId,
    runId: r.runId,
    request: Object.freeze({ prompt: r.prompt, options: Object.freeze([...r.options]), multiple: r.multiple, allowText: r.allowText, ...(r.elicitation ? { elicitation: r.elicitation } : {}) }),
    ...(r.parentSessionId ? { parentSessionId: r.parentSessionId } : {}),
  })
}

/** The server's answer shape from an InteractionReply: a string is an option's name, else text. */
function toWireAnswer(p: PendingInteraction, answer: unknown): { choices?: string[]; text?: string; action?: string; values?: unknown } | null {
  if (answer === null || answer === undefined) return null
  if (typeof answer === 'string') return p.request.options?.includes(answer) ? { choices: [answer] } : { text: answer }
  if (Array.isArray(answer)) return { choices: answer.map(String) }
  const a = answer as { choices?: readonly string[]; text?: string; action?: string; values?: unknown }
  const out: { choices?: string[]; text?: string; action?: string; values?: unknown } = {}
  if (a.choices !== undefined) out.choices = [...a.choices]
  if (a.text !== undefined) out.text = a.text
  if (a.action !== undefined) out.action = a.action // an MCP elicitation's answer (issue 23)
  if (a.values !== undefined) out.values = a.values
  return out
}

/** A wire Session as a host's HostSession (the server and SSE hosts). */
export function toHostSession(s: Session): HostSession {
  return Object.freeze({ id: s.id, title: s.title, status: s.status, createdAt: s.createdAt, updatedAt: s.updatedAt, ...(s.parentSessionId ? { parentSessionId: s.parentSessionId } : {}), ...(s.agentId ? { agentId: s.agentId } : {}) })
}

/** Creates a server host and starts connecting (unless given a client). */
export function createServerHost(options: ServerHostOptions): ServerHost {
  const owned = !('client' in options)
  const client = 'client' in options ? options.client : createServerClient(options)
  const streamOptions: SessionStreamsOptions = { loadEvents: (p) => client.call('sessions.loadEvents', p) }
  if (options.frames !== undefined) streamOptions.frames = options.frames
  const streams = createSessionStreams(streamOptions)
  const sessions = createStore<readonly HostSession[]>(Object.freeze([]))
  const interactions = createStore<readonly PendingInteraction[]>(Object.freeze([]))
  const opened = new Map<string, { unfollow: () => void; loaded: Promise<void>; resolve: () => void }>()
  let closed = false

  function setStatus(sessionId: string, status: string) {
    const list = sessions.get()
    const i = list.findIndex((s) => s.id === sessionId)
    if (i < 0 || list[i]!.status === status) return
    const next = list.slice()
    next[i] = Object.freeze({ ...list[i]!, status })
    sessions.set(Object.freeze(next))
  }

  const setPending = (list: readonly PendingInteraction[]) => interactions.set(Object.freeze(list))
  const offSignal = client.onSignal((s: WireSignal) => {
    if (s.kind === 'interaction:request') setPending([...interactions.get().filter((p) => p.id !== s.request.requestId), toPending(s.request)])
    else if (s.kind === 'interaction:resolved') {
      if (interactions.get().some((p) => p.id === s.requestId)) setPending(interactions.get().filter((p) => p.id !== s.requestId))
    }
    if (s.kind === 'run:start') setStatus(s.sessionId, 'running')
    else if (s.kind === 'run:end') setStatus(s.sessionId, s.ok || s.interrupted ? 'idle' : 'error')
    const id = (s as { sessionId?: string }).sessionId
    if (id !== undefined && opened.has(id)) streams.apply(s)
  })
  const offResync = client.onResync((r) => {
    const o = opened.get(r.sessionId)
    if (!o) return
    streams.reset(r.sessionId, r.page)
    o.resolve()
    // The page may have loaded mid-run (a page opened then, or a reload after a gap): its run:start
    // is at or below the watermark and never applied. The session's status, read after the page,
    // says whether a run goes on; a later run:end is above the watermark and applied after it.
    client.call('sessions.get', { sessionId: r.sessionId }).then(
      (session) => {
        if (!closed && opened.get(r.sessionId) === o) streams.setStatus(r.sessionId, session.status)
      },
      () => {},
    )
  })
  // Each (re)connect reads the list again: sessions may have changed while the connection was down.
  let wasOpen = false
  const offState = client.connection.subscribe((s) => {
    const open = s.status === 'open'
    if (open && !wasOpen) void host.refresh().catch(() => {})
    wasOpen = open
  })

  function guard() {
    if (closed) throw new ClosedError('The host was closed.')
  }

  function openSession(sessionId: string, fresh: boolean): Promise<void> {
    const cur = opened.get(sessionId)
    if (cur) return cur.loaded
    let resolve!: () => void
    let reject!: (e: Error) => void
    const loaded = new Promise<void>((res, rej) => {
      resolve = res
      reject = rej
    })
    const entry = { unfollow: () => {}, loaded, resolve }
    opened.set(sessionId, entry)
    if (fresh) {
      streams.reset(sessionId, { events: [], start: 0, exact: true })
      entry.unfollow = client.follow(sessionId, { fresh: true })
      resolve()
    } else {
      entry.unfollow = client.follow(sessionId, {
        load: true,
        onLoad: (error) => {
          if (!error) return resolve()
          // An unknown session or a refused read: open() fails, and a later open() tries again.
          entry.unfollow()
          if (opened.get(sessionId) === entry) opened.delete(sessionId)
          reject(error)
        },
      })
    }
    return loaded
  }

  const ready = client.ready.then(() => undefined)
  ready.catch(() => {})

  const host: ServerHost = {
    client,
    connection: client.connection,
    ready,
    streams,
    sessions: { get: sessions.get, subscribe: sessions.subscribe },
    interactions: { get: interactions.get, subscribe: interactions.subscribe },
    async refresh() {
      guard()
      if (client.connection.get().status === 'retrying') client.reconnect()
      const res = await client.call('sessions.list', {})
      if (closed) return
      sessions.set(Object.freeze(res.sessions.map(toHostSession)))
      try {
        const pending = await client.call('interactions.list', {})
        if (!closed) setPending(pending.requests.map(toPending))
      } catch (err) {
        if (!(err instanceof NotOfferedError)) throw err
      }
    },
    async createSession(opts = {}) {
      guard()
      const params: { cwd: string; title?: string } = { cwd: opts.cwd ?? ('cwd' in options && options.cwd !== undefined ? options.cwd : '') }
      if (opts.title !== undefined) params.title = opts.title
      const s = toHostSession(await client.call('sessions.create', params))
      sessions.set(Object.freeze([s, ...sessions.get().filter((x) => x.id !== s.id)]))
      await openSession(s.id, true)
      return s
    },
    open(sessionId) {
      guard()
      return openSession(sessionId, false)
    },
    async send(sessionId, prompt) {
      guard()
      await openSession(sessionId, false)
      return client.call('chat.send', { sessionId, prompt })
    },
    async cancel(sessionId, runId) {
      guard()
      await client.call('chat.cancel', runId !== undefined ? { sessionId, runId } : { sessionId })
    },
    async answer(interactionId, answer) {
      guard()
      const p = interactions.get().find((x) => x.id === interactionId)
      if (!p) throw new Error(`No pending question ${interactionId}: it was answered, dismissed or withdrawn.`)
      await client.call('interactions.answer', { sessionId: p.sessionId, requestId: interactionId, answer: toWireAnswer(p, answer) })
      setPending(interactions.get().filter((x) => x.id !== interactionId))
    },
    close() {
      if (closed) return
      closed = true
      offSignal()
      offResync()
      offState()
      for (const o of opened.values()) o.unfollow()
      opened.clear()
      streams.dispose()
      if (owned) client.close()
    },
  }
  return host
}
