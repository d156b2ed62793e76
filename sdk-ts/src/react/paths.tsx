// Path chips (issue 24 section 1; protocol seed "files"): names in the model's answers and in tool
// calls and results that are files or folders of the session's folder become chips. The names of a
// render are gathered and resolved in one files.resolvePaths call per folder (batched, at most 500
// names a call), and the answers cached per client; only names the server says exist inside the
// roots become chips, the rest stay text. A file chip opens a read-only viewer (files.read, bounded;
// code highlighted by the transcript's highlighter, images through the media route). Text stays
// text: nothing is parsed as HTML. Without a server client offering files.resolvePaths (run, worker
// and SSE hosts) everything renders as plain text.
import { createContext, Fragment, useCallback, useContext, useEffect, useLayoutEffect, useMemo, useRef, useState, useSyncExternalStore, type ReactNode } from 'react'
import type { ServerClient } from '../client/client.js'
import type { FilesReadResult, ResolvedPath } from '../protocol.js'
import { useChat } from './context.js'
import { CodeBlock } from './markdown.js'
import { isImagePath, MediaImage } from './media.js'

/** A name found in text: where it is and the name to resolve (without a :line[:col] suffix). */
export interface PathCandidate {
  /** Offset of the name in the text. */
  readonly start: number
  /** Offset just past the name (a :line suffix is left as text). */
  readonly end: number
  /** The name as written. */
  readonly name: string
}

/** Bounds of the scan: texts longer than MAX_SCAN_CHARS are scanned in their first part only. */
export const PATH_SCAN_LIMITS = Object.freeze({ maxScanChars: 64 * 1024, maxCandidates: 200, maxNameChars: 300 })

const TOKEN = /[^\s"'`<>()[\]{}|,;*]+/gu
const NAME_CHARS = /^[\p{L}\p{N}_@+\-.~/]+$/u
const EXTENSION = /[\p{L}\p{N}_\-]\.[A-Za-z][A-Za-z0-9]{0,11}$/u

/** The names in text that may be paths: a token with a slash, or one ending in a file extension; not URLs, not numbers. */
export function pathCandidates(text: string): PathCandidate[] {
  const out: PathCandidate[] = []
  const scan = text.length > PATH_SCAN_LIMITS.maxScanChars ? text.slice(0, PATH_SCAN_LIMITS.maxScanChars) : text
  for (const m of scan.matchAll(TOKEN)) {
    let tok = m[0]
    let start = m.index
    if (tok.includes('://') || /^(?:mailto|https?|javascript|data):/i.test(tok)) continue
    // Trailing punctuation of prose, then a :line[:col] suffix.
    const trail = /[.:!?]+$/.exec(tok)
    if (trail) tok = tok.slice(0, -trail[0].length)
    const line = /:\d+(?::\d+)?$/.exec(tok)
    if (line) tok = tok.slice(0, -line[0].length)
    const lead = /^[.:]+(?=[^./])/.exec(tok) // ":foo" but keep "./" and "../"
    if (lead) {
      tok = tok.slice(lead[0].length)
      start += lead[0].length
    }
    if (tok.length < 2 || tok.length > PATH_SCAN_LIMITS.maxNameChars || !NAME_CHARS.test(tok)) continue
    if (!/[\p{L}]/u.test(tok)) continue // 1.5, 10/20
    const slash = tok.includes('/') && tok.replace(/[./~]/g, '') !== ''
    if (!slash && !EXTENSION.test(tok)) continue
    if (!slash && /@/.test(tok)) continue // an e-mail address
    out.push({ start, end: start + tok.length, name: tok })
    if (out.length >= PATH_SCAN_LIMITS.maxCandidates) break
  }
  return out
}

/** The per-client cache and batcher of files.resolvePaths. */
export interface PathResolver {
  /** The answer for a name of a folder: the resolved path, null when it names nothing, undefined when not asked yet. */
  lookup(cwd: string, name: string): ResolvedPath | null | undefined
  /** Asks for names not yet known; they are sent together with the other requests of this frame. */
  request(cwd: string, names: readonly string[]): void
  /** Calls fn when answers arrive; returns a function that stops it. */
  subscribe(fn: () => void): () => void
  /** Grows with every batch of answers (a snapshot for useSyncExternalStore). */
  version(): number
}

/** Options of createPathResolver. */
export interface PathResolverOptions {
  /** How long requests gather before one call per folder is sent, in ms (default 30). */
  delayMs?: number
  /** How long "names nothing" is believed, in ms (default 10000): a file the agent writes later becomes a chip. */
  negativeTtlMs?: number
}

const MAX_NAMES_PER_CALL = 500

/** A resolver over client's files.resolvePaths (see PathResolver). */
export function createPathResolver(client: ServerClient, options: PathResolverOptions = {}): PathResolver {
  const delay = options.delayMs ?? 30
  const negativeTtl = options.negativeTtlMs ?? 10_000
  const found = new Map<string, ResolvedPath>()
  const missing = new Map<string, number>() // key -> when it was answered missing
  const inFlight = new Set<string>()
  const pending = new Map<string, Set<string>>()
  const listeners = new Set<() => void>()
  let version = 0
  let timer: ReturnType<typeof setTimeout> | undefined
  const key = (cwd: string, name: string) => `${cwd}\0${name}`
  const emit = () => {
    version++
    for (const fn of [...listeners]) fn()
  }
  const flush = () => {
    timer = undefined
    const batches = [...pending]
    pending.clear()
    for (const [cwd, set] of batches) {
      const names = [...set]
      for (let i = 0; i < names.length; i += MAX_NAMES_PER_CALL) {
        const part = names.slice(i, i + MAX_NAMES_PER_CALL)
        for (const n of part) inFlight.add(key(cwd, n))
        client.call('files.resolvePaths', { cwd, names: part }).then(
          (r) => {
            const now = Date.now()
            const got = new Set<string>()
            for (const p of r.paths) {
              found.set(key(cwd, p.name), p)
              missing.delete(key(cwd, p.name))
              got.add(p.name)
            }
            for (const n of part) {
              inFlight.delete(key(cwd, n))
              if (!got.has(n)) missing.set(key(cwd, n), now)
            }
            emit()
          },
          () => {
            const now = Date.now()
            for (const n of part) {
              inFlight.delete(key(cwd, n))
              missing.set(key(cwd, n), now)
            }
            emit()
          },
        )
      }
    }
  }
  return {
    lookup(cwd, name) {
      const k = key(cwd, name)
      const f = found.get(k)
      if (f !== undefined) return f
      const at = missing.get(k)
      if (at !== undefined) return null
      return undefined
    },
    request(cwd, names) {
      if (!client.offers('files.resolvePaths')) return
      const now = Date.now()
      for (const n of names) {
        const k = key(cwd, n)
        if (found.has(k) || inFlight.has(k)) continue
        const at = missing.get(k)
        if (at !== undefined && now - at < negativeTtl) continue
        let set = pending.get(cwd)
        if (set === undefined) pending.set(cwd, (set = new Set()))
        set.add(n)
      }
      if (pending.size > 0 && timer === undefined) timer = setTimeout(flush, delay)
    },
    subscribe(fn) {
      listeners.add(fn)
      return () => listeners.delete(fn)
    },
    version: () => version,
  }
}

const resolvers = new WeakMap<ServerClient, PathResolver>()

/** The resolver of a client (one per client: every transcript of the page shares its cache). */
export function pathResolverOf(client: ServerClient): PathResolver {
  let r = resolvers.get(client)
  if (r === undefined) resolvers.set(client, (r = createPathResolver(client)))
  return r
}

/** What path chips need: the resolver, the folder names are resolved against, and the viewer. */
export interface PathChipsValue {
  readonly resolver: PathResolver
  /** The session's folder (absolute, inside the roots). */
  readonly cwd: string
  /** Opens the file viewer on a resolved file. */
  open(path: ResolvedPath, from?: HTMLElement | null): void
}

/** Set by PathChips; without it PathText renders plain text. */
export const PathChipsContext = createContext<PathChipsValue | null>(null)

/** Props of PathChips. */
export interface PathChipsProps {
  sessionId: string
  children?: ReactNode
}

/**
 * Turns on path chips below it for one session: reads the session's folder (sessions.get) and
 * holds the file viewer. On a host without a server client offering files.resolvePaths, or until
 * the folder is known, it renders its children as they are (plain text).
 */
export function PathChips(props: PathChipsProps): ReactNode {
  const { client } = useChat()
  const [cwd, setCwd] = useState<string>()
  const [viewing, setViewing] = useState<{ path: ResolvedPath; from: HTMLElement | null }>()
  const open = client !== undefined
  useEffect(() => {
    setCwd(undefined)
    if (client === undefined) return
    let live = true
    const read = () => {
      if (!client.offers('files.resolvePaths') || !client.offers('sessions.get')) return
      client.call('sessions.get', { sessionId: props.sessionId }).then(
        (s) => {
          if (live) setCwd(s.cwd)
        },
        () => {},
      )
    }
    read()
    const off = client.connection.subscribe(() => {
      if (client.connection.get().status === 'open') read()
    })
    return () => {
      live = false
      off()
    }
  }, [client, props.sessionId])
  const value = useMemo<PathChipsValue | null>(
    () => (open && client && cwd !== undefined ? { resolver: pathResolverOf(client), cwd, open: (path, from) => setViewing({ path, from: from ?? null }) } : null),
    [open, client, cwd],
  )
  const close = useCallback(() => {
    const from = viewing?.from
    setViewing(undefined)
    from?.focus()
  }, [viewing])
  return (
    <PathChipsContext.Provider value={value}>
      {props.children}
      {viewing && value && <FileViewer cwd={value.cwd} path={viewing.path} onClose={close} />}
    </PathChipsContext.Provider>
  )
}

/** Props of PathText. */
export interface PathTextProps {
  text: string
}

/** Text whose names of existing files and folders are chips (inside PathChips); plain text elsewhere. */
export function PathText(props: PathTextProps): ReactNode {
  const ctx = useContext(PathChipsContext)
  if (ctx === null) return props.text
  return <ResolvedText text={props.text} ctx={ctx} />
}

function useResolved(ctx: PathChipsValue, names: readonly string[]): void {
  useEffect(() => {
    if (names.length > 0) ctx.resolver.request(ctx.cwd, names)
  }, [ctx, names])
  useSyncExternalStore(ctx.resolver.subscribe, ctx.resolver.version, ctx.resolver.version)
}

function ResolvedText({ text, ctx }: { text: string; ctx: PathChipsValue }): ReactNode {
  const candidates = useMemo(() => pathCandidates(text), [text])
  const names = useMemo(() => candidates.map((c) => c.name), [candidates])
  useResolved(ctx, names)
  const parts: ReactNode[] = []
  let at = 0
  for (const c of candidates) {
    const r = ctx.resolver.lookup(ctx.cwd, c.name)
    if (!r) continue
    if (c.start > at) parts.push(text.slice(at, c.start))
    parts.push(<PathChip key={c.start} name={c.name} path={r} />)
    at = c.end
  }
  if (parts.length === 0) return text
  if (at < text.length) parts.push(text.slice(at))
  return <>{parts.map((p, i) => (typeof p === 'string' ? <Fragment key={`t${i}`}>{p}</Fragment> : p))}</>
}

/** Props of PathChip. */
export interface PathChipProps {
  /** The name as written. */
  name: string
  path: ResolvedPath
}

/** One chip: a file is a button that opens the viewer, a folder a marked name (its path as its title). */
export function PathChip(props: PathChipProps): ReactNode {
  const ctx = useContext(PathChipsContext)
  if (props.path.kind !== 'file' || ctx === null)
    return (
      <span className="zd-path-chip zd-path-folder" title={props.path.path} data-path={props.path.path}>
        {props.name}
      </span>
    )
  return (
    <button type="button" className="zd-path-chip" title={props.path.path} data-path={props.path.path} aria-haspopup="dialog" onClick={(e) => ctx.open(props.path, e.currentTarget)}>
      {props.name}
    </button>
  )
}

/** The image files of texts (a tool call's input and result) that exist: shown below the call through the media route. */
export function ToolMedia({ texts }: { texts: readonly string[] }): ReactNode {
  const ctx = useContext(PathChipsContext)
  if (ctx === null) return null
  return <ToolMediaList texts={texts} ctx={ctx} />
}

function ToolMediaList({ texts, ctx }: { texts: readonly string[]; ctx: PathChipsValue }): ReactNode {
  const joined = texts.join('\n')
  const names = useMemo(() => [...new Set(pathCandidates(joined).map((c) => c.name))].filter(isImagePath), [joined])
  useResolved(ctx, names)
  const images: ResolvedPath[] = []
  const seen = new Set<string>()
  for (const n of names) {
    const r = ctx.resolver.lookup(ctx.cwd, n)
    if (r && r.kind === 'file' && !seen.has(r.path)) {
      seen.add(r.path)
      images.push(r)
    }
    if (images.length >= 4) break
  }
  if (images.length === 0) return null
  return (
    <ul className="zd-tool-media" aria-label="Images">
      {images.map((r) => (
        <li key={r.path}>
          <button type="button" className="zd-media-open" aria-haspopup="dialog" title={r.path} onClick={(e) => ctx.open(r, e.currentTarget)}>
            <MediaImage cwd={ctx.cwd} path={r.path} alt={r.name} className="zd-thumb" />
          </button>
        </li>
      ))}
    </ul>
  )
}

/** files.read's answer bound for the viewer, and the most text it highlights (longer files show plain). */
export const VIEWER_LIMITS = Object.freeze({ maxBytes: 256 * 1024, maxHighlightChars: 100 * 1024 })

const LANGUAGES: Record<string, string> = {
  ts: 'typescript', tsx: 'tsx', js: 'javascript', mjs: 'javascript', cjs: 'javascript', jsx: 'jsx', go: 'go', py: 'python', rs: 'rust',
  json: 'json', md: 'markdown', css: 'css', html: 'markup', xml: 'markup', svg: 'markup', yaml: 'yaml', yml: 'yaml', sh: 'bash', bash: 'bash',
  c: 'c', h: 'c', cc: 'cpp', cpp: 'cpp', hpp: 'cpp', java: 'java', kt: 'kotlin', swift: 'swift', sql: 'sql', graphql: 'graphql', rb: 'ruby', php: 'php',
}

/** The highlighter's language of a file, by its extension ("text" when unknown). */
export function languageOf(path: string): string {
  const m = /\.([A-Za-z0-9]+)$/.exec(path)
  return (m && LANGUAGES[m[1]!.toLowerCase()]) || 'text'
}

/** Props of FileViewer. */
export interface FileViewerProps {
  /** The folder the file was resolved in. */
  cwd: string
  path: ResolvedPath
  onClose(): void
}

function formatSize(n: number): string {
  return n < 1024 ? `${n} B` : n < 1024 * 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 1024 / 1024).toFixed(1)} MiB`
}

/**
 * A read-only view of one file, as a modal dialog named "File <name>": text through files.read (at
 * most VIEWER_LIMITS.maxBytes, the rest said to be cut), highlighted as React elements; an image
 * through the media route. Escape or Close closes it; focus moves into it and back to the chip.
 */
export function FileViewer(props: FileViewerProps): ReactNode {
  const { client } = useChat()
  const [state, setState] = useState<{ result?: FilesReadResult; error?: string }>({})
  const closeRef = useRef<HTMLButtonElement>(null)
  const image = isImagePath(props.path.path)
  useEffect(() => {
    setState({})
    if (image) return
    if (client === undefined || !client.offers('files.read')) {
      setState({ error: 'This server cannot show files (no files.read).' })
      return
    }
    let live = true
    client.call('files.read', { cwd: props.cwd, path: props.path.path, maxBytes: VIEWER_LIMITS.maxBytes }).then(
      (result) => live && setState({ result }),
      (e: unknown) => live && setState({ error: e instanceof Error ? e.message : String(e) }),
    )
    return () => {
      live = false
    }
  }, [client, props.cwd, props.path.path, image])
  useLayoutEffect(() => closeRef.current?.focus(), [])
  const name = props.path.path.split('/').pop() ?? props.path.path
  const r = state.result
  return (
    <div className="zd-viewer-backdrop" onClick={(e) => e.target === e.currentTarget && props.onClose()}>
      <section
        role="dialog"
        aria-modal="true"
        aria-label={`File ${name}`}
        className="zd-dialog zd-viewer"
        onKeyDown={(e) => {
          if (e.key === 'Escape') {
            e.stopPropagation()
            props.onClose()
          }
        }}
      >
        <header className="zd-viewer-head">
          <h2 className="zd-dialog-title">{props.path.path}</h2>
          <button type="button" className="zd-button" ref={closeRef} onClick={props.onClose}>
            Close
          </button>
        </header>
        {image ? (
          <MediaImage cwd={props.cwd} path={props.path.path} className="zd-viewer-image" />
        ) : state.error !== undefined ? (
          <p className="zd-error" role="alert">
            {state.error}
          </p>
        ) : r === undefined ? (
          <p className="zd-muted">Loading…</p>
        ) : r.binary ? (
          <p className="zd-muted">A binary file ({formatSize(r.size)}): not shown.</p>
        ) : (
          <>
            {r.truncated && (
              <p className="zd-muted" role="note">
                Showing the first {formatSize(new TextEncoder().encode(r.text).length)} of {formatSize(r.size)}.
              </p>
            )}
            <div className="zd-viewer-body" tabIndex={0} aria-label={`Content of ${name}`}>
              {r.text.length <= VIEWER_LIMITS.maxHighlightChars ? (
                <CodeBlock code={r.text.replace(/\n$/, '')} language={languageOf(r.path)} />
              ) : (
                <pre className="zd-pre">
                  <code>{r.text}</code>
                </pre>
              )}
            </div>
          </>
        )}
      </section>
    </div>
  )
}
