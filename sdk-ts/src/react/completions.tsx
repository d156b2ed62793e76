// The composer's completions (issue 28 items 2 and 4, issue 27 item 6), on a server host: as the
// user types a word starting with `/` (commands), `@` (files and folders) or `#` (sessions),
// completions.query offers items in a listbox under the box (role listbox and option, the textbox's
// aria-activedescendant naming the active one). ArrowUp/ArrowDown move, Enter or Tab picks, Escape
// closes. A picked command makes the prompt a command (chat.send {command, arguments}); a picked
// file or folder is a mention (chat.send mentions: its absolute path), shown as a chip with Remove.
// ArrowUp in an empty box walks the project's prompt history (history.prompts), ArrowDown back.
import { useEffect, useId, useRef, useState, type KeyboardEvent, type ReactNode, type RefObject } from 'react'
import type { ServerClient } from '../client/client.js'
import type { CompletionItem, Mention } from '../protocol.js'

/** What chat.send gets beside the session: a prompt, or a command and its arguments, and the mentions. */
export interface ComposedPrompt {
  prompt?: string
  command?: string
  arguments?: string
  mentions?: Mention[]
}

/** The completions of one composer (useComposerCompletions). */
export interface ComposerCompletions {
  /** Props for the textbox: aria-autocomplete, aria-controls and aria-activedescendant, and onBlur (the list closes when focus leaves). */
  readonly inputProps: { 'aria-autocomplete': 'list'; 'aria-controls'?: string; 'aria-activedescendant'?: string; onBlur: () => void }
  /** The listbox (null when closed) and the mention chips, to render beside the textbox. */
  readonly popup: ReactNode
  /** Handles a key of the textbox; true when it used it (the composer then does nothing more). */
  onKeyDown(e: KeyboardEvent<HTMLTextAreaElement>): boolean
  /** Called after the text changed (typed or set), with the caret's position. */
  onInput(text: string, caret: number): void
  /** What the text sends: a command when it starts with a known command's /name, and the mentions. */
  compose(text: string): ComposedPrompt
  /** Forgets the mentions and closes the list (after a send). */
  clear(): void
}

/** Options of useComposerCompletions. */
export interface ComposerCompletionsOptions {
  /** The server client; without one (or without completions.query) nothing is offered. */
  client: ServerClient | undefined
  /** The session's folder (completions.query's and history.prompts' cwd); undefined until known. */
  cwd: string | undefined
  textarea: RefObject<HTMLTextAreaElement>
  /** Replaces the composer's text (a pick, a history step). */
  setText: (text: string) => void
}

const QUERY_DELAY_MS = 60
const commandLine = /^\/(\S+)(?:\s+([\s\S]*))?$/

/** The word the caret is in or ends, when it starts with a trigger (the server decides the rest). */
function triggerWord(text: string, caret: number): boolean {
  const before = text.slice(0, caret)
  const m = /(^|\s)([@/#]\S*)$/.exec(before)
  return m !== null
}

/** The composer's completions, mentions and prompt history. */
export function useComposerCompletions(opts: ComposerCompletionsOptions): ComposerCompletions {
  const { client, cwd, textarea, setText } = opts
  const id = useId()
  const [items, setItems] = useState<readonly CompletionItem[]>([])
  const [noCommand, setNoCommand] = useState<string>() // a "/word" that no command matches: say where commands come from
  const [active, setActive] = useState(0)
  const [mentions, setMentions] = useState<readonly { path: string; label: string }[]>([])
  const commands = useRef(new Set<string>())
  const seq = useRef(0)
  const timer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined)
  const history = useRef<{ prompts: readonly string[]; at: number } | null>(null)
  const typedEarly = useRef(false) // a trigger word typed before completions were offered
  const offered = client !== undefined && cwd !== undefined && client.offers('completions.query')

  useEffect(() => () => clearTimeout(timer.current), [])

  // The command names, so a typed /name (not picked) is sent as a command too.
  useEffect(() => {
    if (!client || cwd === undefined || !client.offers('commands.list')) return
    let live = true
    const load = () =>
      client.call('commands.list', { cwd }).then(
        (r) => {
          if (live) commands.current = new Set(r.commands.map((c) => c.name))
        },
        () => {},
      )
    void load()
    const off = client.onSignal((s) => {
      if (s.kind === 'commands:changed') void load()
    })
    return () => {
      live = false
      off()
    }
  }, [client, cwd])

  /** The list is offered only while the user is in the textbox. */
  const focused = () => textarea.current !== null && textarea.current.ownerDocument.activeElement === textarea.current

  const close = () => {
    seq.current++
    clearTimeout(timer.current)
    setItems([])
    setNoCommand(undefined)
    setActive(0)
  }

  const onInput = (text: string, caret: number) => {
    if (history.current && text !== history.current.prompts[history.current.at]) history.current = null
    typedEarly.current = !offered && triggerWord(text, caret)
    if (!offered || !triggerWord(text, caret)) {
      if (items.length > 0 || timer.current) close()
      return
    }
    const n = ++seq.current
    clearTimeout(timer.current)
    timer.current = setTimeout(() => {
      client!.call('completions.query', { cwd: cwd!, text, position: caret, limit: 12 }).then(
        (r) => {
          if (n !== seq.current || !focused()) return
          const slash = /(^|\s)(\/\S*)$/.exec(text.slice(0, caret))
          setNoCommand(r.items.length === 0 && slash ? slash[2] : undefined)
          setItems(r.items)
          setActive(0)
        },
        () => n === seq.current && setItems([]),
      )
    }, QUERY_DELAY_MS)
  }

  // Typed before the session's folder was known (or before the connection opened): ask now, if
  // the user is still in the textbox. A draft restored into it was not typed: it opens no list.
  useEffect(() => {
    const el = textarea.current
    if (offered && el && typedEarly.current && focused()) onInput(el.value, el.selectionStart)
  }, [offered])

  const pick = (item: CompletionItem) => {
    const el = textarea.current
    const text = el?.value ?? ''
    const next = text.slice(0, item.range.start) + item.insertText + text.slice(item.range.start + item.range.length)
    const caret = item.range.start + item.insertText.length
    if (item.kind === 'command') commands.current.add(item.insertText.trim().replace(/^\//, ''))
    if ((item.kind === 'file' || item.kind === 'folder') && item.path) {
      const path = item.path
      setMentions((cur) => (cur.some((m) => m.path === path) ? cur : [...cur, { path, label: item.label }]))
    }
    close()
    setText(next)
    requestAnimationFrame(() => {
      el?.focus()
      // Typed on meanwhile (a fast typist, a busy page): the caret is where the typing left it.
      if (el?.value !== next) return
      el.setSelectionRange(caret, caret)
      // A folder's insert ends with '/': offer what is inside it.
      if (item.kind === 'folder') onInput(next, caret)
    })
  }

  const walkHistory = (e: KeyboardEvent<HTMLTextAreaElement>, up: boolean): boolean => {
    const el = e.currentTarget
    const h = history.current
    const walking = h !== null && el.value === h.prompts[h.at]
    if (!walking && (!up || el.value !== '')) return false
    if (!client || cwd === undefined || !client.offers('history.prompts')) return false
    e.preventDefault()
    if (!walking) {
      client.call('history.prompts', { cwd, limit: 50 }).then(
        (r) => {
          if (r.prompts.length === 0 || el.value !== '') return
          history.current = { prompts: r.prompts.map((p) => p.text), at: 0 }
          setText(r.prompts[0]!.text)
        },
        () => {},
      )
      return true
    }
    const at = h!.at + (up ? 1 : -1)
    if (at < 0) {
      history.current = null
      setText('')
    } else if (at < h!.prompts.length) {
      h!.at = at
      setText(h!.prompts[at]!)
    }
    return true
  }

  const onKeyDown = (e: KeyboardEvent<HTMLTextAreaElement>): boolean => {
    if (e.nativeEvent.isComposing) return false
    if (items.length > 0) {
      switch (e.key) {
        case 'ArrowDown':
        case 'ArrowUp':
          e.preventDefault()
          setActive((a) => (a + (e.key === 'ArrowDown' ? 1 : items.length - 1)) % items.length)
          return true
        case 'Enter':
        case 'Tab':
          if (e.shiftKey) return false
          e.preventDefault()
          pick(items[active] ?? items[0]!)
          return true
        case 'Escape':
          e.preventDefault()
          close()
          return true
      }
      return false
    }
    if ((e.key === 'ArrowUp' || e.key === 'ArrowDown') && !e.shiftKey && !e.altKey && !e.metaKey && !e.ctrlKey) return walkHistory(e, e.key === 'ArrowUp')
    return false
  }

  const compose = (text: string): ComposedPrompt => {
    const out: ComposedPrompt = {}
    const m = commandLine.exec(text.trim())
    if (m && commands.current.has(m[1]!)) {
      out.command = m[1]!
      const args = (m[2] ?? '').trim()
      if (args !== '') out.arguments = args
    } else out.prompt = text
    if (mentions.length > 0) out.mentions = mentions.map((x) => ({ path: x.path }))
    return out
  }

  const open = items.length > 0
  const optionId = (i: number) => `${id}-opt-${i}`
  const popup = (
    <>
      {mentions.length > 0 && (
        <ul className="zd-mentions" aria-label="Mentions">
          {mentions.map((x) => (
            <li key={x.path} className="zd-chip">
              <span title={x.path}>@{x.label}</span>{' '}
              <button type="button" className="zd-button zd-small" aria-label={`Remove mention ${x.label}`} onClick={() => setMentions((cur) => cur.filter((y) => y.path !== x.path))}>
                ×
              </button>
            </li>
          ))}
        </ul>
      )}
      {noCommand !== undefined && !open && (
        <p className="zd-muted zd-completions-empty" role="status" aria-label="Completions">
          {noCommand === '/' ? 'No commands here.' : `No command matches ${noCommand}.`} A command is a Markdown file in the project's <code>.zidane/commands/</code> (or the server user's{' '}
          <code>~/.zidane/commands/</code>).
        </p>
      )}
      {open && (
        <ul id={`${id}-list`} role="listbox" aria-label="Completions" className="zd-completions">
          {items.map((it, i) => (
            <li
              key={`${it.kind}:${it.label}:${i}`}
              id={optionId(i)}
              role="option"
              aria-selected={i === active}
              className={i === active ? 'zd-completion zd-active' : 'zd-completion'}
              onMouseDown={(e) => {
                e.preventDefault() // keeps focus in the textbox
                pick(it)
              }}
            >
              <span className="zd-completion-label">{it.label}</span>
              {it.detail && <span className="zd-muted"> {it.detail}</span>}
              <span className="zd-badge">{it.kind}</span>
            </li>
          ))}
        </ul>
      )}
    </>
  )
  const inputProps: ComposerCompletions['inputProps'] = open ? { 'aria-autocomplete': 'list', 'aria-controls': `${id}-list`, 'aria-activedescendant': optionId(active), onBlur: close } : { 'aria-autocomplete': 'list', onBlur: close }
  return {
    inputProps,
    popup,
    onKeyDown,
    onInput,
    compose,
    clear: () => {
      setMentions([])
      history.current = null
      close()
    },
  }
}
