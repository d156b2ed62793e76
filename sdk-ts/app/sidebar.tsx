// The sidebar's state shared across browsers (issue 24 section 2, sidebar.*; protocol seed
// "sidebar"): the space on show (All, Pinned or Archived sessions, sidebar.getSpace / sidebar.setSpace) and
// each space's view record (sidebar.getViews / sidebar.setView): { session } is the conversation
// last open in that space, reopened when the reader switches back to it, and the "all" space's
// record also holds { pinned }, the pinned sessions' ids. A page reads them when it connects,
// follows other pages' changes live (sidebar:changed) and reads them again when it gets focus.
import { useCallback, useEffect, useRef, useState, type ReactNode } from 'react'
import type { ServerClient } from '../src/client/client.js'
import { useStore } from '../src/react/index.js'

/** The spaces of the app's sidebar. */
export const SPACES = [
  { id: 'all', label: 'All' },
  { id: 'pinned', label: 'Pinned' },
  { id: 'archived', label: 'Archived' },
] as const

/** A space's id. */
export type SpaceId = (typeof SPACES)[number]['id']

/** A space's view record as the app saves it; other clients may save other members, kept as they are. */
export interface SpaceView {
  /** The session last open in the space. */
  session?: string
  /** The pinned sessions (in the "all" space's record). */
  pinned?: string[]
  [member: string]: unknown
}

function asSpace(v: unknown): SpaceId {
  return SPACES.some((s) => s.id === v) ? (v as SpaceId) : 'all'
}

function asView(v: unknown): SpaceView {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as SpaceView) : {}
}

/** The shared sidebar state and its writes. */
export interface SharedSidebar {
  readonly space: SpaceId
  readonly views: Readonly<Record<string, SpaceView>>
  readonly pinned: ReadonlySet<string>
  /** Shows a space (every page of the server follows). */
  setSpace(space: SpaceId): void
  /** Pins or unpins a session. */
  setPinned(sessionId: string, pinned: boolean): void
  /** Records the session open in the space on show. */
  rememberSession(sessionId: string): void
  /** Whether the server's state has been read (writes before that would drop what it holds). */
  readonly loaded: boolean
  /** The last write's error, if it failed. */
  readonly error: string | undefined
}

/** Keeps the page's sidebar state in step with the server's (see the file's comment). */
export function useSharedSidebar(client: ServerClient): SharedSidebar {
  const conn = useStore(client.connection)
  const open = conn.status === 'open'
  const [space, setSpaceState] = useState<SpaceId>('all')
  const [views, setViews] = useState<Record<string, SpaceView>>({})
  const [error, setError] = useState<string>()
  const [loaded, setLoaded] = useState(false)
  const latest = useRef({ space, views, loaded })
  latest.current = { space, views, loaded }

  useEffect(() => {
    if (!open || !client.offers('sidebar.getViews')) return
    let live = true
    const read = () => {
      void Promise.all([client.call('sidebar.getSpace', {}), client.call('sidebar.getViews', {})]).then(
        ([s, v]) => {
          if (!live) return
          setSpaceState(asSpace(s.space))
          const next: Record<string, SpaceView> = {}
          for (const [k, x] of Object.entries(v.views)) next[k] = asView(x)
          setViews(next)
          setLoaded(true)
        },
        () => {},
      )
    }
    read()
    const off = client.onSignal('sidebar:changed', (s) => {
      if (s.current !== undefined) setSpaceState(asSpace(s.current))
      if (s.space !== undefined) {
        const key = s.space
        setViews((v) => {
          const next = { ...v }
          if (s.view === null || s.view === undefined) delete next[key]
          else next[key] = asView(s.view)
          return next
        })
      }
    })
    addEventListener('focus', read)
    return () => {
      live = false
      off()
      removeEventListener('focus', read)
    }
  }, [client, open])

  const fail = useCallback((e: unknown) => setError(e instanceof Error ? e.message : String(e)), [])
  const saveView = useCallback(
    (key: string, view: SpaceView) => {
      setViews((v) => ({ ...v, [key]: view }))
      if (!client.offers('sidebar.setView')) return
      client.call('sidebar.setView', { space: key, view }).then(() => setError(undefined), fail)
    },
    [client, fail],
  )
  const setSpace = useCallback(
    (next: SpaceId) => {
      setSpaceState(next)
      if (!client.offers('sidebar.setSpace')) return
      client.call('sidebar.setSpace', { space: next }).then(() => setError(undefined), fail)
    },
    [client, fail],
  )
  const setPinned = useCallback(
    (sessionId: string, on: boolean) => {
      const all = latest.current.views.all ?? {}
      const pins = (all.pinned ?? []).filter((id) => id !== sessionId)
      if (on) pins.push(sessionId)
      saveView('all', { ...all, pinned: pins })
    },
    [saveView],
  )
  const rememberSession = useCallback(
    (sessionId: string) => {
      const { space: at, views: vs, loaded: known } = latest.current
      if (!known) return // the views are not read yet: saving now would drop what they hold
      const view = vs[at] ?? {}
      if (view.session !== sessionId) saveView(at, { ...view, session: sessionId })
    },
    [saveView],
  )
  const pinnedList = views.all?.pinned
  const [pinned, setPinnedSet] = useState<ReadonlySet<string>>(new Set())
  useEffect(() => setPinnedSet(new Set(Array.isArray(pinnedList) ? pinnedList.filter((x): x is string => typeof x === 'string') : [])), [pinnedList])
  return { space, views, pinned, setSpace, setPinned, rememberSession, loaded, error }
}

/** The space switch: a group named "Space" of toggle buttons, one per space. */
export function SpaceSwitch({ sidebar, onSwitch }: { sidebar: SharedSidebar; onSwitch?: (space: SpaceId) => void }): ReactNode {
  return (
    <div role="group" aria-label="Space" className="spaces">
      {SPACES.map((s) => (
        <button
          key={s.id}
          type="button"
          className="zd-button"
          aria-pressed={sidebar.space === s.id}
          onClick={() => {
            if (sidebar.space === s.id) return
            sidebar.setSpace(s.id)
            onSwitch?.(s.id)
          }}
        >
          {s.label}
        </button>
      ))}
    </div>
  )
}
