// <SessionList activeId onSelect onNewSession>: the host's sessions as a list named "Sessions"
// (issue 24 section 5), each item a button named by the session's title, with its state: running, or
// needs attention (a question or an approval waits). With pinned and onTogglePin, each item has a
// Pin toggle (aria-pressed) and pinned sessions come first.
import { useMemo, type ReactNode } from 'react'
import type { HostSession } from '../adapters/types.js'
import { useChat } from './context.js'
import { useStore } from './index.js'

/** Props of SessionList. */
export interface SessionListProps {
  /** The session shown (marked aria-current). */
  activeId?: string | undefined
  onSelect(sessionId: string): void
  /** Shows a "New session" button when given. */
  onNewSession?: () => void
  /** Leaves sessions out (for example archived or child sessions). */
  filter?: (session: HostSession) => boolean
  /** The pinned sessions' ids: listed first, their Pin toggles pressed. */
  pinned?: ReadonlySet<string>
  /** Shows a Pin toggle on each item when given; called with the new state. */
  onTogglePin?: (sessionId: string, pinned: boolean) => void
}

const noneWaiting: readonly { sessionId: string }[] = Object.freeze([])
/** The approvals of a host without them: the same empty list on every read (useSyncExternalStore needs that). */
const noApprovals = { get: () => noneWaiting, subscribe: () => () => {} }

/** The session list. */
export function SessionList(props: SessionListProps): ReactNode {
  const chat = useChat()
  const sessions = useStore(chat.host.sessions)
  const questions = useStore(chat.host.interactions)
  const approvals = useStore(chat.approvals?.approvals ?? noApprovals)
  const waiting = useMemo(() => {
    const s = new Set<string>()
    for (const q of questions) s.add(q.sessionId)
    for (const a of approvals) s.add(a.sessionId)
    return s
  }, [questions, approvals])
  const filtered = props.filter ? sessions.filter(props.filter) : sessions
  const pins = props.pinned
  const shown = pins && pins.size > 0 ? [...filtered.filter((s) => pins.has(s.id)), ...filtered.filter((s) => !pins.has(s.id))] : filtered
  return (
    <nav className="zd-sessions" aria-label="Session list">
      {props.onNewSession && (
        <button type="button" className="zd-button zd-primary" onClick={props.onNewSession}>
          New session
        </button>
      )}
      <ul aria-label="Sessions" className="zd-session-items">
        {shown.map((s) => {
          const attention = waiting.has(s.id)
          const running = s.status === 'running'
          return (
            <li key={s.id}>
              <button
                type="button"
                className="zd-session"
                aria-current={s.id === props.activeId ? 'page' : undefined}
                aria-describedby={attention || running || s.status === 'error' ? `zd-state-${s.id}` : undefined}
                onClick={() => props.onSelect(s.id)}
              >
                {s.title || 'Untitled'}
              </button>
              {(attention || running || s.status === 'error') && (
                <span id={`zd-state-${s.id}`} className={`zd-badge zd-${attention ? 'attention' : s.status}`}>
                  {attention ? 'needs attention' : running ? 'running' : 'error'}
                </span>
              )}
              {props.onTogglePin && (
                <button type="button" className="zd-pin" aria-label="Pin" title={pins?.has(s.id) ? 'Unpin' : 'Pin'} aria-pressed={pins?.has(s.id) === true} onClick={() => props.onTogglePin!(s.id, !pins?.has(s.id))}>
                  {pins?.has(s.id) ? '★' : '☆'}
                </button>
              )}
            </li>
          )
        })}
      </ul>
      {shown.length === 0 && <p className="zd-muted">No sessions yet.</p>}
    </nav>
  )
}
