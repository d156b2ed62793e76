// One terminal's screen in xterm.js, loaded as its own chunk by terminals.tsx (the initial route
// carries none of it): the terminal's output so far and then live, keys typed sent as
// terminal.input, and its size following the panel's (the fit addon on a ResizeObserver, sent as
// terminal.resize). Screen reader mode is on, so its rows are in the accessibility tree; the input
// textarea carries a label; Shift+Tab leaves the terminal (Tab stays the shell's).
import { FitAddon } from '@xterm/addon-fit'
import { Terminal, type ITheme } from '@xterm/xterm'
import '@xterm/xterm/css/xterm.css'
import { useEffect, useRef, type ReactNode } from 'react'
import type { TerminalSessions } from './terminals.js'

/** The terminal's colours: the panel's own (the app's light or dark theme), as computed. */
function themeOf(el: HTMLElement): ITheme {
  const cs = getComputedStyle(el)
  return { background: cs.backgroundColor, foreground: cs.color, cursor: cs.color, cursorAccent: cs.backgroundColor, selectionBackground: cs.outlineColor }
}

/** Props of TerminalView. */
export interface TerminalViewProps {
  /** The page's terminals: output, input and resizes go through it. */
  sessions: TerminalSessions
  /** The terminal shown. */
  terminalId: string
  /** The program ended: the screen stays, typing goes nowhere. */
  ended: boolean
  /** The input textarea's accessible name. */
  label: string
}

/** The xterm.js screen of one terminal of this page's connection. */
export default function TerminalView({ sessions, terminalId, ended, label }: TerminalViewProps): ReactNode {
  const box = useRef<HTMLDivElement>(null)
  const term = useRef<Terminal>(undefined)

  useEffect(() => {
    const el = box.current!
    const t = new Terminal({ screenReaderMode: true, fontFamily: getComputedStyle(el).fontFamily, fontSize: 13, scrollback: 5000, theme: themeOf(el) })
    const fit = new FitAddon()
    t.loadAddon(fit)
    t.open(el)
    term.current = t
    // Shift+Tab is not the shell's: the browser moves focus out of the terminal.
    t.attachCustomKeyEventHandler((e) => !(e.key === 'Tab' && e.shiftKey))
    const subs = [t.onData((d) => sessions.input(terminalId, d)), t.onResize(({ cols, rows }) => sessions.resize(terminalId, cols, rows))]
    const detach = sessions.attach(terminalId, (d) => t.write(d))
    const refit = () => {
      if (el.clientWidth === 0 || el.clientHeight === 0) return // hidden: nothing to fit to
      fit.fit()
      sessions.resize(terminalId, t.cols, t.rows)
    }
    refit()
    const ro = new ResizeObserver(refit)
    ro.observe(el)
    // The app's theme changes (the picker, prefs from another page, the system's scheme): recolour.
    const root = el.closest('.zd')
    const recolour = () => (t.options.theme = themeOf(el))
    const mo = new MutationObserver(recolour)
    if (root) mo.observe(root, { attributes: true, attributeFilter: ['data-theme'] })
    const mq = matchMedia('(prefers-color-scheme: dark)')
    mq.addEventListener('change', recolour)
    return () => {
      mq.removeEventListener('change', recolour)
      mo.disconnect()
      ro.disconnect()
      detach()
      for (const s of subs) s.dispose()
      term.current = undefined
      t.dispose()
    }
  }, [sessions, terminalId])

  useEffect(() => {
    const t = term.current
    if (!t) return
    t.options.disableStdin = ended
  }, [ended])

  useEffect(() => {
    term.current?.textarea?.setAttribute('aria-label', label)
  }, [label])

  return <div ref={box} className="terminal-screen" />
}
