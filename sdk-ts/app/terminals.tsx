// The Terminals panel (issue 24 item 2): for an admin token on a server started with
// --project-terminals (hello's projectTerminals, and hello's methods listing terminal.start), shells
// run in the session's folder (terminal.start), their output shown live in xterm.js, typed into
// (terminal.input), sized to the panel (terminal.resize), killed (terminal.kill) and listed
// (terminal.list). xterm.js is a lazy chunk (terminal-view.tsx, loaded when the panel opens), so the
// initial route carries none of it. Terminals belong to the connection that started them: the
// server ends them when it drops and keeps none of their output, so a reload or a reconnect cannot
// re-attach; the panel says so, and marks the ones that ended that way.
import { lazy, Suspense, useEffect, useState, type ReactNode } from 'react'
import type { ServerHost } from '../src/adapters/index.js'
import type { ServerClient } from '../src/client/client.js'
import type { TerminalInfo } from '../src/protocol.js'
import { createStore, type WritableStore } from '../src/store.js'
import { useChat, useStore } from '../src/react/index.js'

const errText = (e: unknown) => (e instanceof Error ? e.message : String(e))

/** One terminal of this page's connection, as the panel lists it. */
export interface TermRecord {
  /** The terminal's id (terminal.start's terminalId). */
  readonly id: string
  /** Its program, folder, process id and start (terminal.list's entry). */
  readonly info: TerminalInfo
  /** How it ended ("exited with code 0", "ended by SIGKILL", …); undefined while it runs. */
  readonly ended?: string
}

interface Entry {
  id: string
  info?: TerminalInfo
  ended?: string
  /** Output kept for a view that mounts later (the panel reopened, another terminal picked), bounded by outputLimit. */
  chunks: string[]
  size: number
  listeners: Set<(data: string) => void>
  input: string
  sending: boolean
  wantSize: { cols: number; rows: number } | undefined
  sentSize: { cols: number; rows: number } | undefined
  resizing: boolean
}

/** Output kept per terminal for a view that mounts later, in UTF-16 code units (the oldest goes first). */
const outputLimit = 2 << 20
/** The most text one terminal.input carries (the schema allows 1 MiB). */
const inputChunk = 256 << 10

/**
 * The terminals of one client's connection: output buffered from the first signal (it may come
 * before terminal.start's answer is read), input and resizes sent one call at a time so keys keep
 * their order, and the end of every terminal when the connection drops.
 */
export class TerminalSessions {
  /** The terminals started on this page, oldest first, running and ended. */
  readonly list: WritableStore<readonly TermRecord[]> = createStore<readonly TermRecord[]>([])
  /** The last failure of a call the panel made (start, kill, input), for its alert. */
  readonly error: WritableStore<string | undefined> = createStore<string | undefined>(undefined)
  private readonly entries = new Map<string, Entry>()

  constructor(private readonly client: ServerClient) {
    client.onSignal('workspace:exec:data', (s) => {
      const e = this.entry(s.terminalId)
      e.chunks.push(s.data)
      e.size += s.data.length
      while (e.size > outputLimit && e.chunks.length > 1) e.size -= e.chunks.shift()!.length
      for (const l of [...e.listeners]) l(s.data)
    })
    client.onSignal('workspace:exec:exit', (s) => {
      this.end(this.entry(s.terminalId), s.exitCode !== undefined ? `exited with code ${s.exitCode}` : `ended by ${s.signal ?? 'a signal'}`)
    })
    let wasOpen = client.connection.get().status === 'open'
    client.connection.subscribe((c) => {
      const open = c.status === 'open'
      if (wasOpen && !open) for (const e of this.entries.values()) this.end(e, 'ended when the connection dropped')
      if (open) void this.refresh()
      wasOpen = open
    })
  }

  private entry(id: string): Entry {
    let e = this.entries.get(id)
    if (!e) {
      e = { id, chunks: [], size: 0, listeners: new Set(), input: '', sending: false, wantSize: undefined, sentSize: undefined, resizing: false }
      this.entries.set(id, e)
    }
    return e
  }

  private end(e: Entry, how: string): void {
    if (e.ended !== undefined) return
    e.ended = how
    e.input = ''
    this.publish()
  }

  private publish(): void {
    const out: TermRecord[] = []
    for (const e of this.entries.values()) if (e.info) out.push(e.ended === undefined ? { id: e.id, info: e.info } : { id: e.id, info: e.info, ended: e.ended })
    out.sort((a, b) => a.info.startedAt - b.info.startedAt)
    this.list.set(out)
  }

  private fail(e: unknown): void {
    this.error.set(errText(e))
  }

  /** Lists the connection's running terminals (terminal.list) and adds the ones not known yet. */
  async refresh(): Promise<void> {
    if (!this.client.offers('terminal.list')) return
    try {
      const r = await this.client.call('terminal.list', {})
      for (const t of r.terminals) this.entry(t.terminalId).info ??= t
      this.publish()
    } catch (e) {
      this.fail(e)
    }
  }

  /** Starts the server user's shell in cwd (terminal.start); resolves with its id. */
  async start(cwd: string, cols: number, rows: number): Promise<string | undefined> {
    this.error.set(undefined)
    try {
      const r = await this.client.call('terminal.start', { cwd, cols, rows })
      const e = this.entry(r.terminalId)
      e.info = { terminalId: r.terminalId, pid: r.pid, cwd, argv: [], startedAt: Date.now() }
      e.sentSize = { cols, rows }
      this.publish()
      // terminal.list knows the program the server picked ($SHELL, bash or sh).
      void this.refreshInfo(r.terminalId)
      return r.terminalId
    } catch (e) {
      this.fail(e)
      return undefined
    }
  }

  private async refreshInfo(id: string): Promise<void> {
    const r = await this.client.call('terminal.list', {}).catch(() => undefined)
    const t = r?.terminals.find((x) => x.terminalId === id)
    const e = this.entries.get(id)
    if (t && e) {
      e.info = t
      this.publish()
    }
  }

  /**
   * Hears a terminal's output: first everything kept of it (at once, in order), then each piece as
   * it comes. Returns a function that stops it.
   */
  attach(id: string, onData: (data: string) => void): () => void {
    const e = this.entry(id)
    if (e.chunks.length > 0) onData(e.chunks.join(''))
    e.listeners.add(onData)
    return () => {
      e.listeners.delete(onData)
    }
  }

  /** Types data into a running terminal; calls go one at a time, so keys arrive in order. */
  input(id: string, data: string): void {
    const e = this.entries.get(id)
    if (!e || e.ended !== undefined) return
    e.input += data
    this.pumpInput(e)
  }

  private pumpInput(e: Entry): void {
    if (e.sending || e.input === '' || e.ended !== undefined) return
    let n = Math.min(e.input.length, inputChunk)
    if (n < e.input.length && /[\uD800-\uDBFF]/.test(e.input[n - 1]!)) n-- // never split a surrogate pair
    const data = e.input.slice(0, n)
    e.input = e.input.slice(n)
    e.sending = true
    this.client
      .call('terminal.input', { terminalId: e.id, data })
      .catch((err: unknown) => {
        if (e.ended === undefined) this.fail(err)
      })
      .finally(() => {
        e.sending = false
        this.pumpInput(e)
      })
  }

  /** Sets a running terminal's size (terminal.resize), sending only the latest of quick changes. */
  resize(id: string, cols: number, rows: number): void {
    const e = this.entries.get(id)
    if (!e || e.ended !== undefined || !(cols > 0 && rows > 0)) return
    e.wantSize = { cols, rows }
    this.pumpResize(e)
  }

  private pumpResize(e: Entry): void {
    const want = e.wantSize
    if (e.resizing || !want || e.ended !== undefined) return
    if (e.sentSize && e.sentSize.cols === want.cols && e.sentSize.rows === want.rows) return
    e.resizing = true
    this.client
      .call('terminal.resize', { terminalId: e.id, cols: want.cols, rows: want.rows })
      .then(() => (e.sentSize = want))
      .catch(() => {}) // an ended terminal refuses; its exit is on its way
      .finally(() => {
        e.resizing = false
        this.pumpResize(e)
      })
  }

  /** Kills a running terminal (terminal.kill, SIGKILL); its exit signal marks it ended. */
  kill(id: string): void {
    this.error.set(undefined)
    this.client.call('terminal.kill', { terminalId: id }).then(
      (r) => {
        if (!r.killed) this.end(this.entry(id), 'ended')
      },
      (e: unknown) => this.fail(e),
    )
  }

  /** Forgets an ended terminal and its output. */
  forget(id: string): void {
    const e = this.entries.get(id)
    if (!e || e.ended === undefined) return
    this.entries.delete(id)
    this.publish()
  }
}

const perClient = new WeakMap<ServerClient, TerminalSessions>()

/** The TerminalSessions of a client, made on first use. */
export function terminalsOf(client: ServerClient): TerminalSessions {
  let t = perClient.get(client)
  if (!t) {
    t = new TerminalSessions(client)
    perClient.set(client, t)
  }
  return t
}

// The xterm.js view: its own chunk, fetched when the panel first opens.
const loadView = () => import('./terminal-view.js')
const TerminalView = lazy(loadView)

/** A terminal's name in the panel: its program and process id. */
function termName(t: TermRecord): string {
  const prog = t.info.argv[0]?.split('/').pop() || 'shell'
  return `${prog} (pid ${t.info.pid})`
}

/**
 * The Terminals panel of a session (a region named "Terminal"): shown only to an admin token on a
 * server that runs terminals (hello's projectTerminals and methods); nothing for any other token.
 */
export function TerminalPanel({ sessionId }: { sessionId: string }): ReactNode {
  const client = (useChat().host as ServerHost).client
  const conn = useStore(client.connection)
  // The latest hello decides, so a reconnecting page keeps the panel (and its ended terminals).
  const hello = conn.status === 'open' ? conn.hello : client.hello
  if (!hello?.projectTerminals || !hello.methods.includes('terminal.start')) return null
  return <Terminals client={client} sessionId={sessionId} online={conn.status === 'open'} />
}

function Terminals({ client, sessionId, online }: { client: ServerClient; sessionId: string; online: boolean }): ReactNode {
  const sessions = terminalsOf(client)
  const list = useStore(sessions.list)
  const error = useStore(sessions.error)
  const [open, setOpen] = useState(false)
  const [cwd, setCwd] = useState<string>()
  const [selected, setSelected] = useState<string>()
  const [busy, setBusy] = useState(false)

  useEffect(() => {
    if (!open || !online) return
    let live = true
    void loadView() // fetch xterm.js while the folder is looked up
    client.call('sessions.get', { sessionId }).then(
      (s) => live && setCwd(s.cwd),
      (e: unknown) => live && sessions.error.set(errText(e)),
    )
    void sessions.refresh()
    return () => {
      live = false
    }
  }, [client, sessions, sessionId, open, online])

  const current = list.find((t) => t.id === selected) ?? [...list].reverse().find((t) => t.ended === undefined) ?? list[list.length - 1]
  const running = list.filter((t) => t.ended === undefined).length
  const start = () => {
    if (cwd === undefined) return
    setBusy(true)
    sessions
      .start(cwd, 80, 24)
      .then((id) => id && setSelected(id))
      .finally(() => setBusy(false))
  }

  return (
    <section className="terminals" aria-label="Terminal">
      <details onToggle={(e) => setOpen((e.target as HTMLDetailsElement).open)}>
        <summary>Terminals{running > 0 ? ` (${running} running)` : ''}</summary>
        <p className="zd-muted">
          A shell on the server in this session's folder{cwd !== undefined && <> (<code>{cwd}</code>)</>}, as the server's user. Terminals live as long as this page's connection: a reload
          or a reconnect ends them, and the server keeps none of their output to replay. Shift+Tab leaves the terminal.
        </p>
        <div className="terminal-bar">
          <button type="button" className="zd-button" disabled={!online || busy || cwd === undefined} onClick={start}>
            New terminal
          </button>
          {list.length > 0 && (
            <ul aria-label="Terminals" className="terminal-list">
              {list.map((t) => (
                <li key={t.id}>
                  <button type="button" className="zd-session" aria-pressed={t.id === current?.id} onClick={() => setSelected(t.id)}>
                    {termName(t)}
                    {t.ended !== undefined ? `: ${t.ended}` : ''}
                  </button>
                </li>
              ))}
            </ul>
          )}
        </div>
        {error && (
          <p className="zd-error" role="alert">
            {error}
          </p>
        )}
        {open && current && (
          <div className="terminal-current">
            <div className="terminal-head">
              <span role="status">
                {termName(current)} in <code>{current.info.cwd}</code>: {current.ended ?? 'running'}
              </span>
              <span className="zd-spacer" />
              {current.ended === undefined ? (
                <button type="button" className="zd-button zd-danger" onClick={() => sessions.kill(current.id)}>
                  Kill
                </button>
              ) : (
                <button type="button" className="zd-button" onClick={() => sessions.forget(current.id)}>
                  Close
                </button>
              )}
            </div>
            <Suspense fallback={<p className="zd-muted">Loading the terminal…</p>}>
              <TerminalView key={current.id} sessions={sessions} terminalId={current.id} ended={current.ended !== undefined} label={`Terminal input: ${termName(current)}`} />
            </Suspense>
          </div>
        )}
      </details>
    </section>
  )
}
