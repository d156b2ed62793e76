// <SessionList activeId onSelect onNewSession>: the host's sessions as a list named "Sessions"
// (issue 24 section 5), each item a button named by the session's title, with its last activity (a
// short time: "14:32", "yesterday", "3 Dec") and its state: running, or needs attention (a question or
// an approval waits). The time and the state are a second line of the button, left out of its name
// (aria-hidden) and given as its description (aria-describedby). With pinned and onTogglePin, each
// item has a Pin toggle (aria-pressed) and pinned sessions come first.
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

const DAY = 24 * 60 * 60 * 1000

/**
 * A session's last activity, short: the time for today ("14:32"), "yesterday", the weekday within the
 * week ("Mon"), the day and month within the year ("3 Dec"), else the date with its year. locale
 * defaults to the reader's.
 */
export function formatWhen(ms: number, now: number = Date.now(), locale?: string): string {
  const at = new Date(ms)
  const midnight = new Date(now)
  midnight.setHours(0, 0, 0, 0)
  const start = midnight.getTime()
  if (ms >= start) return at.toLocaleTimeString(locale, { hour: '2-digit', minute: '2-digit', hourCycle: 'h23' })
  if (ms >= start - DAY) return 'yesterday'
  if (ms >= start - 6 * DAY) return at.toLocaleDateString(locale, { weekday: 'short' })
  if (at.getFullYear() === midnight.getFullYear()) return at.toLocaleDateString(locale, { day: 'numeric', month: 'short' })
  return at.toLocaleDateString(locale, { day: 'numeric', month: 'short', year: 'numeric' })
}

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
  const now = Date.now()
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
          const state = attention || running || s.status === 'error'
          const when = s.updatedAt ?? s.createdAt
          const described = [when !== undefined ? `zd-when-${s.id}` : '', state ? `zd-state-${s.id}` : ''].filter(Boolean).join(' ')
          const title = s.title || 'Untitled'
          return (
            <li key={s.id}>
              <button
                type="button"
                className="zd-session"
                title={title}
                aria-current={s.id === props.activeId ? 'page' : undefined}
                aria-describedby={described || undefined}
                onClick={() => props.onSelect(s.id)}
              >
                <span className="zd-session-title">{title}</span>
                {described && (
                  <span className="zd-session-meta" aria-hidden="true">
                    {when !== undefined && (
                      <time id={`zd-when-${s.id}`} dateTime={new Date(when).toISOString()}>
                        {formatWhen(when, now)}
                      </time>
                    )}
                    {state && (
                      <span id={`zd-state-${s.id}`} className={`zd-badge zd-${attention ? 'attention' : s.status}`}>
                        {attention ? 'needs attention' : running ? 'running' : 'error'}
                      </span>
                    )}
                  </span>
                )}
              </button>
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
