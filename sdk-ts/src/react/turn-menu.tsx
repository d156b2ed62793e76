// A turn's menu in the transcript (issue 28 item 5): Fork (history.fork, then the new session
// opens), Roll back here (history.rollback; the answer's restoreId is offered as Restore until
// restoreUntil), Compact session (history.compact). Rollback, restore and compaction publish
// session:reset, which the client applies by loading the transcript again.
import { createContext, useContext, useEffect, useRef, useState, type KeyboardEvent, type ReactNode } from 'react'
import type { ConnectionState } from '../client/client.js'
import type { HistoryRollbackResult } from '../protocol.js'
import { useChat } from './context.js'
import { useStore } from './index.js'

/** What the transcript's rows share with their menus: the session, how to open another, and the last rollback. */
export interface TurnTools {
  readonly sessionId: string
  /** Opens a session (a fork, a child session); absent: the menu has no Fork and child rows no button. */
  readonly onOpenSession?: ((sessionId: string) => void) | undefined
  /** Called with a rollback's answer (the transcript offers Restore while it is valid). */
  readonly onRolledBack: (r: HistoryRollbackResult) => void
  /** Called with a failed call's message. */
  readonly onError: (message: string) => void
}

/** The transcript's TurnTools for its rows; null outside a HostTranscript. */
export const TurnToolsContext = createContext<TurnTools | null>(null)

const closed: ConnectionState = { status: 'closed' }
const noConnection = { get: () => closed, subscribe: () => () => {} }

const errText = (e: unknown) => (e instanceof Error ? e.message : String(e))

/** Props of TurnMenu. */
export interface TurnMenuProps {
  /** A turn of the exchange the menu acts on. */
  turnId: string
}

/** The menu button of one turn; renders nothing on a host without history.* or outside a HostTranscript. */
export function TurnMenu({ turnId }: TurnMenuProps): ReactNode {
  const { client } = useChat()
  const tools = useContext(TurnToolsContext)
  const [open, setOpen] = useState(false)
  const [busy, setBusy] = useState(false)
  const button = useRef<HTMLButtonElement>(null)
  const menu = useRef<HTMLDivElement>(null)
  useStore(client?.connection ?? noConnection) // what the server offers is known once connected
  useEffect(() => {
    if (open) menu.current?.querySelector<HTMLButtonElement>('[role=menuitem]')?.focus()
  }, [open])
  if (!client || !tools || !client.offers('history.fork')) return null
  const { sessionId } = tools
  const close = () => {
    setOpen(false)
    button.current?.focus()
  }
  const run = (f: () => Promise<void>) => {
    setOpen(false)
    setBusy(true)
    f()
      .catch((e: unknown) => tools.onError(errText(e)))
      .finally(() => setBusy(false))
  }
  const fork = () =>
    run(async () => {
      const s = await client.call('history.fork', { sessionId, turnId })
      tools.onOpenSession?.(s.id)
    })
  const rollback = () => run(async () => tools.onRolledBack(await client.call('history.rollback', { sessionId, turnId })))
  const compact = () =>
    run(async () => {
      await client.call('history.compact', { sessionId })
    })
  const onKey = (e: KeyboardEvent<HTMLDivElement>) => {
    const items = [...(menu.current?.querySelectorAll<HTMLButtonElement>('[role=menuitem]') ?? [])]
    const i = items.indexOf(document.activeElement as HTMLButtonElement)
    if (e.key === 'Escape') {
      e.preventDefault()
      e.stopPropagation()
      close()
    } else if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
      e.preventDefault()
      const n = items.length
      items[(i + (e.key === 'ArrowDown' ? 1 : n - 1)) % n]?.focus()
    } else if (e.key === 'Home' || e.key === 'End') {
      e.preventDefault()
      items[e.key === 'Home' ? 0 : items.length - 1]?.focus()
    }
  }
  return (
    <span className="zd-turn-menu">
      <button ref={button} type="button" className="zd-button zd-small zd-turn-menu-button" aria-label="Turn menu" title="Turn menu: fork, roll back, compact" aria-haspopup="menu" aria-expanded={open} disabled={busy} onClick={() => setOpen(!open)}>
        <span aria-hidden="true">⋯</span>
      </button>
      {open && (
        <div ref={menu} role="menu" aria-label="Turn" className="zd-menu" onKeyDown={onKey} onBlur={(e) => !e.currentTarget.contains(e.relatedTarget as Node | null) && setOpen(false)}>
          {tools.onOpenSession && (
            <button type="button" role="menuitem" className="zd-menu-item" onClick={fork}>
              Fork
            </button>
          )}
          <button type="button" role="menuitem" className="zd-menu-item" onClick={rollback}>
            Roll back here
          </button>
          <button type="button" role="menuitem" className="zd-menu-item" onClick={compact}>
            Compact session
          </button>
        </div>
      )}
    </span>
  )
}

/** Props of RollbackNotice. */
export interface RollbackNoticeProps {
  sessionId: string
  rollback: HistoryRollbackResult
  onDone: () => void
}

/** Says what a rollback dropped and offers Restore (history.restore) until the rollback's restoreUntil. */
export function RollbackNotice({ sessionId, rollback, onDone }: RollbackNoticeProps): ReactNode {
  const { client } = useChat()
  const [error, setError] = useState<string>()
  const [busy, setBusy] = useState(false)
  const until = rollback.restoreUntil
  useEffect(() => {
    if (until === undefined) return
    const t = setTimeout(onDone, Math.max(0, Math.min(until - Date.now(), 2 ** 31 - 1)))
    return () => clearTimeout(t)
  }, [until, onDone])
  const restore = () => {
    if (!client || !rollback.restoreId) return
    setBusy(true)
    client.call('history.restore', { sessionId, restoreId: rollback.restoreId }).then(onDone, (e: unknown) => {
      setError(errText(e))
      setBusy(false)
    })
  }
  return (
    <div className="zd-notice" role="status" aria-label="Rollback">
      {rollback.dropped === 0 ? 'Nothing after this turn: nothing was rolled back.' : `Rolled back ${rollback.dropped === 1 ? '1 exchange' : `${rollback.dropped} exchanges`}.`}
      {rollback.restoreId && (
        <button type="button" className="zd-button" disabled={busy} onClick={restore}>
          Restore
        </button>
      )}
      <button type="button" className="zd-button" onClick={onDone}>
        Dismiss
      </button>
      {until !== undefined && <span className="zd-muted"> (Restore works until {new Date(until).toLocaleString()}.)</span>}
      {error && <span className="zd-error"> {error}</span>}
    </div>
  )
}
