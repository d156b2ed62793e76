// The sidebar's Archived space: the archived sessions (sessions.list {archived: true}, every page),
// each with an Unarchive button (sessions.archive {archived: false}) that brings it back to All. The
// list is read again when a session changes anywhere (session:updated).
import { useCallback, useEffect, useState, type ReactNode } from 'react'
import type { ServerHost } from '../src/adapters/index.js'
import type { Session } from '../src/protocol.js'
import { formatWhen } from '../src/react/session-list.js'

/** At most this many pages of archived sessions are read (100 a page). */
const MAX_PAGES = 20

/** The archived sessions, a list named "Archived sessions" with an Unarchive button on each. */
export function ArchivedSessions({ host }: { host: ServerHost }): ReactNode {
  const [sessions, setSessions] = useState<readonly Session[] | null>(null)
  const [error, setError] = useState<string>()
  const fail = useCallback((e: unknown) => setError(e instanceof Error ? e.message : String(e)), [])
  const read = useCallback(async () => {
    const all: Session[] = []
    let cursor: string | undefined
    for (let page = 0; page < MAX_PAGES; page++) {
      const res = await host.client.call('sessions.list', cursor === undefined ? { archived: true } : { archived: true, cursor })
      all.push(...res.sessions.filter((s) => !s.parentSessionId))
      cursor = res.nextCursor
      if (cursor === undefined) break
    }
    return all
  }, [host])

  useEffect(() => {
    let live = true
    let t: ReturnType<typeof setTimeout> | undefined
    const load = () =>
      read().then((list) => {
        if (!live) return
        setSessions(list)
        setError(undefined)
      }, fail)
    load()
    const off = host.client.onSignal((s) => {
      if (s.kind !== 'session:updated') return
      clearTimeout(t)
      t = setTimeout(load, 150)
    })
    return () => {
      live = false
      off()
      clearTimeout(t)
    }
  }, [host, read, fail])

  const unarchive = (sessionId: string) => {
    setError(undefined)
    host.client.call('sessions.archive', { sessionId, archived: false }).then(() => {
      setSessions((list) => list?.filter((s) => s.id !== sessionId) ?? null)
      return host.refresh()
    }, fail).catch(fail)
  }

  const now = Date.now()
  return (
    <div className="archived">
      <ul aria-label="Archived sessions" className="zd-session-items">
        {(sessions ?? []).map((s) => (
          <li key={s.id}>
            <span className="archived-title" id={`archived-${s.id}`} title={s.title || 'Untitled'}>
              {s.title || 'Untitled'}
              <time className="zd-session-meta" dateTime={new Date(s.updatedAt).toISOString()}>
                {formatWhen(s.updatedAt, now)}
              </time>
            </span>
            <button type="button" className="zd-button zd-small" aria-describedby={`archived-${s.id}`} onClick={() => unarchive(s.id)}>
              Unarchive
            </button>
          </li>
        ))}
      </ul>
      {sessions !== null && sessions.length === 0 && <p className="zd-muted">No archived sessions.</p>}
      {error && (
        <p className="zd-error" role="alert">
          {error}
        </p>
      )}
    </div>
  )
}
