// The paired token, kept in the page's storage (localStorage) of this origin.

/** A paired token and its scope (chat or admin). */
export interface Auth {
  token: string
  scope: string
}

const KEY = 'zidane.auth'

/** The saved token, if any. */
export function loadAuth(): Auth | null {
  try {
    const raw = localStorage.getItem(KEY)
    if (!raw) return null
    const a = JSON.parse(raw) as Partial<Auth>
    return typeof a.token === 'string' && a.token !== '' ? { token: a.token, scope: typeof a.scope === 'string' ? a.scope : 'chat' } : null
  } catch {
    return null
  }
}

export function saveAuth(a: Auth): void {
  localStorage.setItem(KEY, JSON.stringify(a))
}

export function forgetAuth(): void {
  localStorage.removeItem(KEY)
}

/**
 * Trades a pairing code (from `zidane-server pair`) for a token at POST /zidane/pair. Rejects with
 * the server's message (a wrong or spent code, too many tries).
 */
export async function pair(code: string, name: string): Promise<Auth> {
  const res = await fetch('/zidane/pair', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ code: code.trim(), name }),
  })
  const text = await res.text()
  let body: { token?: string; scope?: string; error?: string } = {}
  try {
    body = JSON.parse(text) as typeof body
  } catch {
    // a plain-text refusal
  }
  if (!res.ok || typeof body.token !== 'string') throw new Error(body.error ?? (text.trim() || `Pairing failed (HTTP ${res.status}).`))
  return { token: body.token, scope: body.scope ?? 'chat' }
}

/** The WebSocket URL of the server that served this page (same origin). */
export function serverUrl(): string {
  return `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/`
}
