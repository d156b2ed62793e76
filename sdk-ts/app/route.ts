// Client routes: / (no session), /s/<sessionId>, /usage. The server answers index.html for them.
import { useEffect, useState } from 'react'

/** Where the page is. */
export type Route = { view: 'home' } | { view: 'session'; sessionId: string } | { view: 'usage' }

export function parseRoute(path: string): Route {
  const m = /^\/s\/([^/]+)\/?$/.exec(path)
  if (m) return { view: 'session', sessionId: decodeURIComponent(m[1]!) }
  if (path === '/usage') return { view: 'usage' }
  return { view: 'home' }
}

export function routePath(r: Route): string {
  return r.view === 'session' ? `/s/${encodeURIComponent(r.sessionId)}` : r.view === 'usage' ? '/usage' : '/'
}

/** The current route and a navigate function (history.pushState; back and forward work). */
export function useRoute(): [Route, (r: Route) => void] {
  const [route, setRoute] = useState(() => parseRoute(location.pathname))
  useEffect(() => {
    const on = () => setRoute(parseRoute(location.pathname))
    addEventListener('popstate', on)
    return () => removeEventListener('popstate', on)
  }, [])
  const go = (r: Route) => {
    const p = routePath(r)
    if (p !== location.pathname) history.pushState(null, '', p)
    setRoute(r)
  }
  return [route, go]
}
