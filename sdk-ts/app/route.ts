// Client routes: / (no session), /s/<sessionId> (?turn=<turnId>: scrolled to that turn), /usage,
// /mcp. The server answers index.html for them.
import { useEffect, useState } from 'react'

/** Where the page is. */
export type Route = { view: 'home' } | { view: 'session'; sessionId: string; turnId?: string } | { view: 'usage' } | { view: 'mcp' }

export function parseRoute(path: string, search = ''): Route {
  const m = /^\/s\/([^/]+)\/?$/.exec(path)
  if (m) {
    const turnId = new URLSearchParams(search).get('turn')
    return turnId ? { view: 'session', sessionId: decodeURIComponent(m[1]!), turnId } : { view: 'session', sessionId: decodeURIComponent(m[1]!) }
  }
  if (path === '/usage') return { view: 'usage' }
  if (path === '/mcp') return { view: 'mcp' }
  return { view: 'home' }
}

export function routePath(r: Route): string {
  if (r.view === 'session') return `/s/${encodeURIComponent(r.sessionId)}${r.turnId ? `?turn=${encodeURIComponent(r.turnId)}` : ''}`
  return r.view === 'usage' ? '/usage' : r.view === 'mcp' ? '/mcp' : '/'
}

/** The current route and a navigate function (history.pushState; back and forward work). */
export function useRoute(): [Route, (r: Route) => void] {
  const [route, setRoute] = useState(() => parseRoute(location.pathname, location.search))
  useEffect(() => {
    const on = () => setRoute(parseRoute(location.pathname, location.search))
    addEventListener('popstate', on)
    return () => removeEventListener('popstate', on)
  }, [])
  const go = (r: Route) => {
    const p = routePath(r)
    if (p !== location.pathname + location.search) history.pushState(null, '', p)
    setRoute(r)
  }
  return [route, go]
}
