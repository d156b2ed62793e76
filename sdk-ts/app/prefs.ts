// Prefs shared across browsers (issue 24 section 2, prefs.*): the theme is the pref "theme" kept by
// the server; a page reads it once connected (prefs.get), follows other pages' changes live
// (prefs:changed) and writes the reader's pick (prefs.set). The page's localStorage keeps the last
// one seen, so a reload paints in it before the server answers.
import { useEffect } from 'react'
import type { ServerClient } from '../src/client/client.js'
import { useStore } from '../src/react/index.js'

/** The app's color schemes. */
export type Theme = 'light' | 'dark' | 'system'

/** The pref key of the theme. */
export const THEME_PREF = 'theme'

/** A pref value as a theme, or undefined when it is none. */
export function asTheme(v: unknown): Theme | undefined {
  return v === 'light' || v === 'dark' || v === 'system' ? v : undefined
}

/**
 * Keeps the page's theme in step with the server's "theme" pref: apply(t) is called with the
 * server's value on connect and on every prefs:changed of it. Returns nothing; use saveTheme to write.
 */
export function useSharedTheme(client: ServerClient, apply: (t: Theme) => void): void {
  const conn = useStore(client.connection)
  const open = conn.status === 'open'
  useEffect(() => {
    if (!open || !client.offers('prefs.get')) return
    let live = true
    client.call('prefs.get', {}).then(
      (r) => {
        const t = asTheme(r.prefs[THEME_PREF])
        if (live && t !== undefined) apply(t)
      },
      () => {},
    )
    const off = client.onSignal((s) => {
      if (s.kind !== 'prefs:changed' || s.key !== THEME_PREF) return
      apply(asTheme(s.value) ?? 'system')
    })
    return () => {
      live = false
      off()
    }
    // apply is the app's setter; a new function each render must not re-read the prefs.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [client, open])
}

/** Writes the reader's theme pick to the server (every page of this server follows it). */
export function saveTheme(client: ServerClient, t: Theme): Promise<void> {
  if (!client.offers('prefs.set')) return Promise.resolve()
  return client.call('prefs.set', { key: THEME_PREF, value: t }).then(() => undefined)
}
