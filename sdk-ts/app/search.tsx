// The search box over every session (issue 28 item 5): search.sessions as the user types (after a
// short pause), results best first with their snippet, whose matched words (highlights, UTF-16
// ranges) are <mark> elements around plain text (a snippet is text, never HTML), and "More results"
// for the next page. A result opens its session at its turn (onOpen(sessionId, turnId)).
import { useEffect, useRef, useState, type ReactNode } from 'react'
import type { ServerHost } from '../src/adapters/index.js'
import type { SearchResult, TextRange } from '../src/protocol.js'
import { useChat, useStore } from '../src/react/index.js'

const SEARCH_DELAY_MS = 200

/** snippet cut at the highlights into plain text and marked text (overlapping or out-of-range ranges are clipped). */
export function highlightParts(snippet: string, highlights: readonly TextRange[]): { text: string; mark: boolean }[] {
  const parts: { text: string; mark: boolean }[] = []
  let at = 0
  for (const h of [...highlights].sort((a, b) => a.start - b.start)) {
    const start = Math.max(at, Math.min(h.start, snippet.length))
    const end = Math.max(start, Math.min(h.start + h.length, snippet.length))
    if (start > at) parts.push({ text: snippet.slice(at, start), mark: false })
    if (end > start) parts.push({ text: snippet.slice(start, end), mark: true })
    at = end
  }
  if (at < snippet.length) parts.push({ text: snippet.slice(at), mark: false })
  return parts
}

/** The search box and its results. */
export function SessionSearch({ onOpen }: { onOpen: (sessionId: string, turnId: string | undefined) => void }): ReactNode {
  const client = (useChat().host as ServerHost).client
  const [query, setQuery] = useState('')
  const [results, setResults] = useState<readonly SearchResult[]>([])
  const [cursor, setCursor] = useState<string>()
  const [searched, setSearched] = useState<string>()
  const [error, setError] = useState<string>()
  const seq = useRef(0)
  useStore(client.connection) // what the server offers is known once connected

  useEffect(() => {
    const q = query.trim()
    const n = ++seq.current
    if (q === '') {
      setResults([])
      setCursor(undefined)
      setSearched(undefined)
      setError(undefined)
      return
    }
    const t = setTimeout(() => {
      client.call('search.sessions', { query: q, limit: 20 }).then(
        (r) => {
          if (n !== seq.current) return
          setResults(r.results)
          setCursor(r.nextCursor)
          setSearched(q)
          setError(undefined)
        },
        (e: unknown) => n === seq.current && setError(e instanceof Error ? e.message : String(e)),
      )
    }, SEARCH_DELAY_MS)
    return () => clearTimeout(t)
  }, [client, query])

  const more = () => {
    if (!cursor || searched === undefined) return
    const n = seq.current
    client.call('search.sessions', { query: searched, limit: 20, cursor }).then(
      (r) => {
        if (n !== seq.current) return
        setResults((cur) => [...cur, ...r.results])
        setCursor(r.nextCursor)
      },
      (e: unknown) => setError(e instanceof Error ? e.message : String(e)),
    )
  }

  if (!client.offers('search.sessions')) return null
  return (
    <div role="search" className="search" aria-label="Session search">
      <input
        type="search"
        className="zd-input"
        aria-label="Search sessions"
        placeholder="Search every session"
        value={query}
        onChange={(e) => setQuery(e.target.value)}
        onKeyDown={(e) => {
          if (e.key === 'Escape') setQuery('')
        }}
      />
      {error && (
        <p className="zd-error" role="alert">
          {error}
        </p>
      )}
      {searched !== undefined && (
        <ul aria-label="Search results" className="search-results">
          {results.map((r) => (
            <li key={r.session.id}>
              <button type="button" className="zd-session search-result" onClick={() => onOpen(r.session.id, r.turnId)}>
                <span className="search-title">{r.session.title || 'Untitled'}</span>
                {r.snippet !== '' && (
                  <span className="search-snippet">
                    {highlightParts(r.snippet, r.highlights).map((p, i) => (p.mark ? <mark key={i}>{p.text}</mark> : <span key={i}>{p.text}</span>))}
                  </span>
                )}
              </button>
            </li>
          ))}
          {results.length === 0 && <li className="zd-muted">Nothing found for “{searched}”.</li>}
        </ul>
      )}
      {cursor && (
        <button type="button" className="zd-button" onClick={more}>
          More results
        </button>
      )}
    </div>
  )
}
