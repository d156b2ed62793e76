// Workspace media in the transcript through tickets (issue 24 section 1; protocol seed "files"): an
// <img> cannot send a token, so the page registers a random ticket on its connection
// (files.mediaTicket) and shows a workspace image from the same origin's
// GET /zidane/media?ticket=…&cwd=…&path=…. A ticket is good while its connection is open: after a
// reconnect a fresh one is registered, and an image that fails to load asks for a fresh one once.
// Nothing else is ever put in an <img>: no address from the model, no other origin. Hosts without
// the files API (run, worker, SSE hosts) show the image's name as text.
import { useEffect, useState, useSyncExternalStore, type ReactNode } from 'react'
import type { ServerClient } from '../client/client.js'
import { useChat } from './context.js'

/** The path of the media route on the server's own origin. */
export const MEDIA_PATH = '/zidane/media'

/** The image file names an <img> may show through the media route (by their extension). */
export const IMAGE_EXTENSIONS: ReadonlySet<string> = new Set(['png', 'jpg', 'jpeg', 'gif', 'webp', 'avif', 'bmp', 'ico', 'svg'])

/** Whether a path names an image file, by its extension. */
export function isImagePath(path: string): boolean {
  const m = /\.([A-Za-z0-9]+)$/.exec(path)
  return m !== null && IMAGE_EXTENSIONS.has(m[1]!.toLowerCase())
}

/** A fresh random ticket: 43 URL-safe characters (32 random bytes, base64url). */
export function newMediaTicket(): string {
  const b = new Uint8Array(32)
  crypto.getRandomValues(b)
  let s = ''
  for (const x of b) s += String.fromCharCode(x)
  return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '')
}

/** The media address of a file: same-origin, relative, the ticket and the file in its query. */
export function mediaUrl(ticket: string, cwd: string, path: string): string {
  const q = new URLSearchParams({ ticket, cwd, path })
  return `${MEDIA_PATH}?${q.toString()}`
}

/** The media tickets of one server client: the ticket of its current connection, renewed as needed. */
export interface MediaTickets {
  /** The ticket registered on the open connection, or undefined (none yet, registering, no files API). */
  current(): string | undefined
  /** Registers a fresh ticket (an image failed to load: its ticket may have died with a connection); at most once per connection and 2 s. */
  renew(): void
  /** Calls fn whenever current() changes; returns a function that stops it. */
  subscribe(fn: () => void): () => void
}

const byClient = new WeakMap<ServerClient, MediaTickets>()

/** The media tickets of a client (one per client, shared by every image of the page). */
export function mediaTicketsOf(client: ServerClient): MediaTickets {
  let t = byClient.get(client)
  if (t === undefined) {
    t = createMediaTickets(client)
    byClient.set(client, t)
  }
  return t
}

function createMediaTickets(client: ServerClient): MediaTickets {
  let ticket: string | undefined
  let conn: unknown // the hello of the connection the ticket is registered on
  let renewedAt = 0
  let busy = false
  const listeners = new Set<() => void>()
  const emit = () => {
    for (const fn of [...listeners]) fn()
  }
  const register = () => {
    const c = client.connection.get()
    if (c.status !== 'open' || !client.offers('files.mediaTicket') || busy) return
    busy = true
    const next = newMediaTicket()
    const on = c.hello
    client.call('files.mediaTicket', { ticket: next }).then(
      () => {
        busy = false
        if (client.connection.get() !== c) return register() // the connection changed meanwhile
        ticket = next
        conn = on
        emit()
      },
      () => {
        busy = false
      },
    )
  }
  let watching = false
  const watch = () => {
    if (watching) return
    watching = true
    client.connection.subscribe(() => {
      const c = client.connection.get()
      if (c.status === 'open' && c.hello !== conn) {
        // A new connection: the old ticket died with the old one.
        if (ticket !== undefined) {
          ticket = undefined
          emit()
        }
        register()
      } else if (c.status !== 'open' && ticket !== undefined) {
        ticket = undefined
        emit()
      }
    })
    register()
  }
  return {
    current() {
      watch()
      return ticket
    },
    renew() {
      const now = Date.now()
      if (now - renewedAt < 2000) return
      renewedAt = now
      ticket = undefined
      emit()
      register()
    },
    subscribe(fn) {
      watch()
      listeners.add(fn)
      return () => listeners.delete(fn)
    },
  }
}

const noTickets: MediaTickets = { current: () => undefined, renew: () => {}, subscribe: () => () => {} }

/** The media tickets of the ChatProvider's server client, or a stand-in that never has one (hosts without the files API). */
export function useMediaTickets(): MediaTickets {
  const { client } = useChat()
  return client ? mediaTicketsOf(client) : noTickets
}

/** Whether the ChatProvider's host can show workspace media (a server client offering files.mediaTicket, once connected). */
export function useMediaAvailable(): boolean {
  const { client } = useChat()
  const tickets = useMediaTickets()
  const ticket = useSyncExternalStore(tickets.subscribe, tickets.current, tickets.current)
  return client !== undefined && ticket !== undefined
}

/** Props of MediaImage. */
export interface MediaImageProps {
  /** The folder path is resolved against (a session's cwd; "" for the first root). */
  cwd: string
  /** The image file: relative to cwd or absolute inside the roots. */
  path: string
  /** The image's text alternative (default: the file's name). */
  alt?: string
  className?: string
  /** Shown while no ticket is registered and when the image cannot be shown (default: the path as text). */
  fallback?: ReactNode
}

/**
 * A workspace image through GET /zidane/media under the connection's ticket. While no ticket is
 * registered, and on hosts without the files API, it shows the fallback (the path as text). A load
 * error asks for a fresh ticket once; a second one shows the fallback with "could not be shown".
 */
export function MediaImage(props: MediaImageProps): ReactNode {
  const tickets = useMediaTickets()
  const ticket = useSyncExternalStore(tickets.subscribe, tickets.current, tickets.current)
  const [failedWith, setFailedWith] = useState<string[]>([])
  const key = `${props.cwd}\0${props.path}`
  useEffect(() => setFailedWith([]), [key])
  const name = props.path.split('/').pop() ?? props.path
  const fallback = props.fallback ?? <span className="zd-media-fallback">{props.path}</span>
  if (ticket === undefined) return fallback
  if (failedWith.length >= 2 || failedWith.includes(ticket))
    return failedWith.length >= 2 ? (
      <span className="zd-media-fallback">
        {props.path} <span className="zd-muted">(could not be shown)</span>
      </span>
    ) : (
      fallback
    )
  return (
    <img
      className={props.className ?? 'zd-media'}
      src={mediaUrl(ticket, props.cwd, props.path)}
      alt={props.alt ?? name}
      loading="lazy"
      decoding="async"
      onError={() => {
        setFailedWith((f) => [...f, ticket])
        tickets.renew()
      }}
    />
  )
}
