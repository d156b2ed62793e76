// <HostTranscript sessionId>: the session's transcript as a log named "Transcript" (issue 24
// section 5). Rows are virtualized (@tanstack/react-virtual: only what is on screen is in the DOM),
// older turns load when the reader scrolls near the top (loadEarlier), and the view follows the
// stream while the reader is at the bottom. Markdown is rendered safely (markdown.tsx), tool calls
// are collapsible rows holding their results, file edits show as diffs. A subagent's child session
// shows under its task call (children.tsx), each prompt has a turn menu (turn-menu.tsx), a
// compaction is a marked block, and focusTurnId scrolls to a turn (a search result's). Names of
// existing files in answers and tool rows are path chips opening a file viewer, and the images a
// tool row names show through media tickets (paths.tsx, media.tsx); the images an MCP tool's result
// carries show inline under its row (result-media.tsx).
import { measureElement as measureRowElement, useVirtualizer, type Virtualizer } from '@tanstack/react-virtual'
import { createContext, memo, useCallback, useContext, useEffect, useLayoutEffect, useMemo, useRef, useState, type ReactNode } from 'react'
import type { HistoryRollbackResult, RunSummary, Session, StreamEvent, ToolEvent, ToolResultEvent } from '../protocol.js'
import { ChildSessionRow, matchTaskChildren, useChildSessions } from './children.js'
import { useChat } from './context.js'
import { RollbackNotice, TurnMenu, TurnToolsContext, type TurnTools } from './turn-menu.js'
import { useSessionEvents, useSessionInterrupted, useSessionPage, useSessionRunning, useStore } from './index.js'
import { Markdown } from './markdown.js'
import { PromptAttachments } from './attachments.js'
import { PathChips, PathText, ToolMedia } from './paths.js'
import { ResultMedia } from './result-media.js'

/** One shown row: an event, or a tool call with its result. */
export type TranscriptRow = { readonly event: StreamEvent; readonly result?: ToolResultEvent }

/** Pairs each tool call with its result (by callId); a result without its call stays its own row. */
export function transcriptRows(events: readonly StreamEvent[]): TranscriptRow[] {
  const results = new Map<string, ToolResultEvent>()
  const calls = new Set<string>()
  for (const e of events) {
    if (e.kind === 'tool-result') results.set(e.callId, e)
    else if (e.kind === 'tool') calls.add(e.callId)
  }
  const rows: TranscriptRow[] = []
  for (const e of events) {
    if (e.kind === 'tool-result' && calls.has(e.callId)) continue
    const r = e.kind === 'tool' ? results.get(e.callId) : undefined
    rows.push(r ? { event: e, result: r } : { event: e })
  }
  return rows
}

/** Props of DiffView. */
export interface DiffViewProps {
  diff: string
  label?: string
}

/** A unified diff, each line marked added, removed or context (colors and a +/- sign, not color alone). */
export function DiffView(props: DiffViewProps): ReactNode {
  const lines = props.diff.replace(/\n$/, '').split('\n')
  return (
    <pre className="zd-diff" aria-label={props.label ?? 'Diff'}>
      {lines.map((l, i) => {
        const cls = l.startsWith('+++') || l.startsWith('---') ? 'zd-diff-file' : l.startsWith('+') ? 'zd-diff-add' : l.startsWith('-') ? 'zd-diff-del' : l.startsWith('@@') ? 'zd-diff-hunk' : 'zd-diff-ctx'
        return (
          <span key={i} className={cls}>
            {l}
            {'\n'}
          </span>
        )
      })}
    </pre>
  )
}

function inputText(input: unknown): string {
  if (input === undefined || input === null) return ''
  if (typeof input === 'string') return input
  try {
    return JSON.stringify(input, null, 2)
  } catch {
    return String(input)
  }
}

/** The child sessions of the transcript's task calls (callId → child), for the rows. */
const TaskChildrenContext = createContext<ReadonlyMap<string, Session>>(new Map())

const ToolRow = memo(function ToolRow({ event, result }: { event: ToolEvent; result: ToolResultEvent | undefined }): ReactNode {
  const state = result === undefined ? 'running' : result.isError ? 'failed' : 'done'
  const child = useContext(TaskChildrenContext).get(event.callId)
  const tools = useContext(TurnToolsContext)
  return (
    <>
    {child && <ChildSessionRow child={child} onOpen={tools?.onOpenSession} />}
    <details className={`zd-tool zd-tool-${state}`}>
      <summary>
        <span className="zd-tool-name">{event.tool}</span> <span className="zd-tool-text">{event.text}</span> <span className="zd-badge">{state}</span>
      </summary>
      <pre className="zd-pre"><PathText text={inputText(event.input)} /></pre>
      {result?.diff ? <DiffView diff={result.diff} label={`Diff of ${event.tool}`} /> : null}
      {result && <pre className={result.isError ? 'zd-pre zd-error-text' : 'zd-pre'}><PathText text={result.text} /></pre>}
    </details>
    {result?.media && result.media.length > 0 ? <ResultMedia tool={event.tool} media={result.media} /> : null}
    <ToolMedia texts={result ? [inputText(event.input), result.text] : [inputText(event.input)]} />
    </>
  )
})

/** One transcript row; re-rendered only when its event (or its tool result) changes, not when the row list is rebuilt. */
export const TranscriptItem = memo(function TranscriptItem({ row }: { row: TranscriptRow }): ReactNode {
  const e = row.event
  switch (e.kind) {
    case 'user-prompt':
      return (
        <div className="zd-row zd-user">
          <span className="zd-who">You</span> {e.command !== undefined && <code className="zd-command-name">/{e.command} {e.arguments ?? ''}</code>} <TurnMenu turnId={e.turnId} />
          <div className="zd-user-text">{e.text}</div>
          {e.attachments && e.attachments.length > 0 ? <PromptAttachments attachments={e.attachments} /> : null}
        </div>
      )
    case 'markdown':
      return (
        <div className="zd-row zd-assistant">
          <Markdown text={e.text} />
        </div>
      )
    case 'thinking':
      return (
        <details className="zd-row zd-thinking">
          <summary>Thinking</summary>
          <div className="zd-thinking-text">{e.text}</div>
        </details>
      )
    case 'tool':
      return (
        <div className="zd-row">
          <ToolRow event={e} result={row.result} />
        </div>
      )
    case 'tool-result':
      return (
        <div className="zd-row">
          {e.diff ? <DiffView diff={e.diff} /> : null}
          <pre className={e.isError ? 'zd-pre zd-error-text' : 'zd-pre'}><PathText text={e.text} /></pre>
          {e.media && e.media.length > 0 ? <ResultMedia tool={e.tool} media={e.media} /> : null}
          <ToolMedia texts={[e.text]} />
        </div>
      )
    case 'run-summary':
      return (
        <div className="zd-row zd-summary" title={summaryTitle(e.runSummary)}>
          {e.text}
        </div>
      )
    case 'compaction':
      return (
        <details className="zd-row zd-compaction" role="note" aria-label="Compacted">
          <summary>
            {e.exchanges === 1 ? '1 earlier exchange' : `${e.exchanges} earlier exchanges`} compacted into a summary{e.modelId ? ` by ${e.modelId}` : ''}: the next turns send it instead of them
          </summary>
          <div className="zd-compaction-text">{e.text}</div>
        </details>
      )
    case 'error':
      if (e.stopped)
        return (
          <div className="zd-row zd-stopped-row" role="note" aria-label="Stopped">
            <strong>Stopped: </strong>
            {e.message}
          </div>
        )
      return (
        <div className="zd-row zd-error zd-error-row" role="note">
          <strong>Error: </strong>
          {e.message}
        </div>
      )
    default:
      return null
  }
}, (a, b) => a.row.event === b.row.event && a.row.result === b.row.result)

/** The font metrics row estimates are made from: line height and font size in px, characters per line. */
type RowMetrics = { line: number; font: number; cpl: number }

/** Wrapped lines of a text at cpl characters a line (counted up to 400). */
function textLines(text: string, cpl: number): number {
  let n = 0
  let pos = 0
  for (;;) {
    const nl = text.indexOf('\n', pos)
    n += Math.max(1, Math.ceil(((nl < 0 ? text.length : nl) - pos) / cpl))
    if (nl < 0 || n >= 400) return n
    pos = nl + 1
  }
}

/**
 * A row's size class (rows of one class are drawn the same height: a collapsed thinking, tool or
 * compaction row; a text row of n lines) and its text's line count. A class is undefined where a row's
 * height depends on more than that (attachments, long texts), which are estimated from their kind's one-line class.
 */
function sizeClass(row: TranscriptRow, m: RowMetrics): { kind: string; cls: string | undefined; lines: number } {
  const e = row.event
  let text: string
  switch (e.kind) {
    case 'tool':
      // A result's media show under the row: its height is not the class's.
      if (row.result?.media && row.result.media.length > 0) return { kind: e.kind, cls: undefined, lines: 1 }
      return { kind: e.kind, cls: e.kind, lines: 1 }
    case 'thinking':
    case 'compaction':
      return { kind: e.kind, cls: e.kind, lines: 1 }
    case 'user-prompt':
      if ((e.attachments && e.attachments.length > 0) || e.command !== undefined) return { kind: e.kind, cls: undefined, lines: textLines(e.text, m.cpl) }
      text = e.text
      break
    case 'tool-result':
      if (e.media && e.media.length > 0) return { kind: e.kind, cls: undefined, lines: textLines(e.text, m.cpl) }
      text = e.text
      break
    case 'markdown':
    case 'run-summary':
      text = e.text
      break
    case 'error':
      text = e.message
      break
    default: {
      const kind = (e as { kind: string }).kind
      return { kind, cls: kind, lines: 1 }
    }
  }
  const lines = textLines(text, m.cpl)
  return { kind: e.kind, cls: lines <= 8 ? `${e.kind}:${lines}` : undefined, lines }
}

/** A row's height from the styles (before any row of its class was measured): padding, the lines, a kind's extra. */
function styledEstimate(kind: string, lines: number, m: RowMetrics): number {
  const pad = 0.8 * m.font
  if (kind === 'markdown') return pad + 0.6 * m.font + lines * m.line
  if (kind === 'user-prompt') return pad + 2 * m.line + lines * m.line
  if (kind === 'run-summary') return pad + lines * 0.85 * m.line
  return pad + lines * m.line
}

/**
 * Row height estimates for the virtualizer: the first measured height of each size class, kept and
 * used for every row of that class not measured yet, so the rows scrolled into view mostly measure
 * what was estimated (no scroll correction, no second render for them). Keyed by event, so a list
 * rebuilt while streaming keeps them.
 */
class RowSizes {
  metrics: RowMetrics = { line: 22.5, font: 15, cpl: 90 }
  private readonly learned = new Map<string, number>()
  private classes = new WeakMap<StreamEvent, { kind: string; cls: string | undefined; lines: number; result: ToolResultEvent | undefined }>()

  classOf(row: TranscriptRow): { kind: string; cls: string | undefined; lines: number } {
    let c = this.classes.get(row.event)
    // A tool row's class depends on its result too (its media), which may come later.
    if (c === undefined || c.result !== row.result) {
      c = { ...sizeClass(row, this.metrics), result: row.result }
      this.classes.set(row.event, c)
    }
    return c
  }

  estimate(row: TranscriptRow | undefined, fallback: number | undefined): number {
    if (row === undefined) return fallback ?? 80
    const c = this.classOf(row)
    const known = c.cls === undefined ? undefined : this.learned.get(c.cls)
    if (known !== undefined) return known
    const one = this.learned.get(`${c.kind}:1`)
    if (one !== undefined) return one + (c.lines - 1) * this.metrics.line
    return fallback ?? Math.round(styledEstimate(c.kind, c.lines, this.metrics))
  }

  /** Sets the metrics; true when they changed (the classes are then made again). */
  setMetrics(m: RowMetrics): boolean {
    const o = this.metrics
    if (Math.abs(o.line - m.line) < 0.01 && Math.abs(o.font - m.font) < 0.01 && o.cpl === m.cpl) return false
    this.metrics = m
    this.classes = new WeakMap()
    if (Math.abs(o.line - m.line) >= 0.01 || Math.abs(o.font - m.font) >= 0.01) this.learned.clear()
    return true
  }

  /** Whether a height of the class was measured. */
  knows(cls: string): boolean {
    return this.learned.has(cls)
  }

  /** Keeps a measured height as its class's; true when the class had none (estimates changed). */
  learn(row: TranscriptRow, size: number): boolean {
    const c = this.classOf(row)
    if (c.cls === undefined || this.learned.has(c.cls)) return false
    this.learned.set(c.cls, size)
    return true
  }
}

/** Props of HostTranscript. */
export interface HostTranscriptProps {
  sessionId: string
  /** Estimated row height in pixels before a row is measured (default 80). */
  estimateRowHeight?: number
  /** Opens another session: a fork made from a turn's menu, a subagent's child session. */
  onOpenSession?: (sessionId: string) => void
  /** A turn to scroll to and mark once it is loaded (a search result's turnId). */
  focusTurnId?: string
}

function turnOf(e: StreamEvent): string | undefined {
  return (e as { turnId?: string }).turnId
}

/** The run summary line's legend, in words (its hover title): ↻ model requests, ↑ tokens in, ↓ tokens out. */
export function summaryTitle(r: RunSummary | undefined): string | undefined {
  if (r === undefined) return undefined
  const parts = [
    `${r.modelId}`,
    `${(r.durationMs / 1000).toFixed(1)} s`,
    `${r.turns} model request${r.turns === 1 ? '' : 's'}`,
    r.unreported ? 'token counts not reported by the provider' : `${r.tokensIn} tokens in, ${r.tokensOut} tokens out, ${Math.round(r.tokensPerSecond)} tokens per second`,
  ]
  if (r.droppedExchanges) parts.push(`${r.droppedExchanges} earlier exchange${r.droppedExchanges === 1 ? '' : 's'} left out to fit the context`)
  if (r.compactedExchanges) parts.push(`${r.compactedExchanges} earlier exchange${r.compactedExchanges === 1 ? '' : 's'} compacted`)
  return parts.join(' · ')
}

/** The transcript of one session; opens it on the host (host.open) when shown. */
export function HostTranscript(props: HostTranscriptProps): ReactNode {
  const { host } = useChat()
  const events = useSessionEvents(props.sessionId)
  const page = useSessionPage(props.sessionId)
  const running = useSessionRunning(props.sessionId)
  const interruptedLive = useSessionInterrupted(props.sessionId)
  const sessions = useStore(host.sessions)
  const status = sessions.find((s) => s.id === props.sessionId)?.status
  const rows = useMemo(() => transcriptRows(events), [events])
  // A run the user stopped ends with its "Stopped" row, which says so: no marker beside it.
  const last = rows.length > 0 ? rows[rows.length - 1]!.event : undefined
  const stoppedLast = last?.kind === 'error' && last.stopped === true
  const interrupted = !running && !stoppedLast && (interruptedLive || status === 'interrupted')
  const children = useChildSessions(props.sessionId)
  const taskChildren = useMemo(() => matchTaskChildren(events, children), [events, children])
  const [rollback, setRollback] = useState<HistoryRollbackResult>()
  const [menuError, setMenuError] = useState<string>()
  const onOpenSession = props.onOpenSession
  const tools = useMemo<TurnTools>(() => ({ sessionId: props.sessionId, onOpenSession, onRolledBack: setRollback, onError: setMenuError }), [props.sessionId, onOpenSession])
  const endRollback = useCallback(() => setRollback(undefined), [])
  const scroller = useRef<HTMLDivElement | null>(null)
  const atBottom = useRef(true)
  const firstKey = useRef<number>(0)
  const prevHeight = useRef(0)
  const rowsRef = useRef(rows)
  rowsRef.current = rows
  const sizes = useRef<RowSizes>(undefined as unknown as RowSizes)
  if (sizes.current === undefined) sizes.current = new RowSizes()
  const fixedHeight = props.estimateRowHeight
  // Bumped when estimates change: the measurements are then laid out again (a new getItemKey), and
  // anchorShift (what the estimates above the first row shown changed by) keeps that row in place.
  const [estimates, setEstimates] = useState(0)
  const anchorShift = useRef(0)

  useEffect(() => {
    void host.open(props.sessionId).catch(() => {})
  }, [host, props.sessionId])

  const pageStart = page.start
  // Stable between renders: a new getItemKey makes the virtualizer lay out every row again.
  const getItemKey = useCallback((i: number) => pageStart + i, [pageStart, estimates])
  const estimateSize = useCallback((i: number) => sizes.current.estimate(rowsRef.current[i], fixedHeight), [fixedHeight])
  const measureElement = useCallback(
    (el: Element, entry: ResizeObserverEntry | undefined, v: Virtualizer<HTMLDivElement, Element>) => {
      const size = measureRowElement(el, entry, v)
      const i = v.indexFromElement(el)
      const row = rowsRef.current[i]
      if (row !== undefined && fixedHeight === undefined) {
        const rs = sizes.current
        const cls = rs.classOf(row).cls
        if (cls !== undefined && !rs.knows(cls) && !v.itemSizeCache.has(pageStart + i)) {
          // Rows of this class above the first one shown, not measured yet: their estimates change.
          const first = atBottom.current ? 0 : (v.range?.startIndex ?? 0)
          const rs2 = rowsRef.current
          const before: number[] = []
          const idx: number[] = []
          for (let j = 0; j < first && j < rs2.length; j++) {
            if (j === i || v.itemSizeCache.has(pageStart + j) || rs.classOf(rs2[j]!).kind !== rs.classOf(row).kind) continue
            idx.push(j)
            before.push(rs.estimate(rs2[j], undefined))
          }
          if (rs.learn(row, size)) {
            let shift = 0
            idx.forEach((j, k) => (shift += rs.estimate(rs2[j], undefined) - before[k]!))
            anchorShift.current += shift
            setEstimates((n) => n + 1)
          }
        }
      }
      return size
    },
    [pageStart, fixedHeight],
  )

  const virtualizer = useVirtualizer({
    count: rows.length,
    getScrollElement: () => scroller.current,
    estimateSize,
    measureElement,
    overscan: 6,
    getItemKey,
  })

  // The styles' metrics (font, line height, width) once the list is on the page.
  useLayoutEffect(() => {
    const el = scroller.current
    if (!el) return
    const cs = getComputedStyle(el)
    const font = parseFloat(cs.fontSize) || 15
    const line = cs.lineHeight === 'normal' ? font * 1.2 : parseFloat(cs.lineHeight) || font * 1.5
    const width = el.clientWidth - (parseFloat(cs.paddingLeft) || 0) - (parseFloat(cs.paddingRight) || 0)
    if (sizes.current.setMetrics({ font, line, cpl: Math.max(20, Math.floor(width / (font * 0.5))) })) setEstimates((n) => n + 1)
  }, [])

  // Estimates changed: keep the first row shown where it was (at the bottom, the follow below does).
  useLayoutEffect(() => {
    const el = scroller.current
    const shift = anchorShift.current
    anchorShift.current = 0
    if (el && shift !== 0 && !atBottom.current) el.scrollTop += shift
  }, [estimates])

  // Older rows prepended (page.start went down): keep what the reader looks at in place.
  useLayoutEffect(() => {
    const el = scroller.current
    const totalNow = virtualizer.getTotalSize()
    if (el && page.start < firstKey.current && !atBottom.current) el.scrollTop += totalNow - prevHeight.current
    firstKey.current = page.start
    prevHeight.current = totalNow
  })

  // Follow the stream while the reader is at the bottom (and after rows are measured).
  const total = virtualizer.getTotalSize()
  useLayoutEffect(() => {
    const el = scroller.current
    if (el && atBottom.current) el.scrollTop = el.scrollHeight
  }, [rows, total])

  const lastTop = useRef(0) // scrollTop at the last scroll event: a smaller one is the reader moving up
  // The list's own box changes (a bar above it loads, the window resizes, the composer grows):
  // a reader at the bottom stays there.
  useEffect(() => {
    const el = scroller.current
    if (!el || typeof ResizeObserver === 'undefined') return
    const ro = new ResizeObserver(() => {
      if (!atBottom.current) return
      el.scrollTop = el.scrollHeight
      lastTop.current = el.scrollTop
    })
    ro.observe(el)
    return () => ro.disconnect()
  }, [])

  // At the bottom, the list follows; only the reader moving up leaves it: a scroll that moved
  // down or stayed (the virtualizer keeping rows in place as they are measured, the box
  // shrinking) keeps following, and the follow above or the box's observer pins it again.
  const onScroll = () => {
    const el = scroller.current
    if (!el) return
    if (el.scrollHeight - el.scrollTop - el.clientHeight < 40) atBottom.current = true
    else if (el.scrollTop < lastTop.current) atBottom.current = false
    lastTop.current = el.scrollTop
    if (el.scrollTop < 200 && page.hasMore && page.loaded && !page.loading) void host.streams.loadEarlier(props.sessionId).catch(() => {})
  }

  // A focused turn: scroll to its first row once it is there, once per turn.
  const focusIndex = useMemo(() => (props.focusTurnId === undefined ? -1 : rows.findIndex((r) => turnOf(r.event) === props.focusTurnId)), [rows, props.focusTurnId])
  const focused = useRef<string | undefined>(undefined)
  useEffect(() => {
    if (focusIndex < 0 || focused.current === props.focusTurnId) return
    focused.current = props.focusTurnId
    atBottom.current = false
    virtualizer.scrollToIndex(focusIndex, { align: 'start' })
  }, [focusIndex, props.focusTurnId, virtualizer])

  const items = virtualizer.getVirtualItems()
  return (
    <TurnToolsContext.Provider value={tools}>
    <TaskChildrenContext.Provider value={taskChildren}>
    <PathChips sessionId={props.sessionId}>
    {rollback && <RollbackNotice sessionId={props.sessionId} rollback={rollback} onDone={endRollback} />}
    {menuError && (
      <p className="zd-error" role="alert">
        {menuError}{' '}
        <button type="button" className="zd-button" onClick={() => setMenuError(undefined)}>
          Dismiss
        </button>
      </p>
    )}
    <div className="zd-transcript" ref={scroller} onScroll={onScroll} tabIndex={0} role="log" aria-label="Transcript" aria-busy={running} aria-live="polite">
      {page.loading && <p className="zd-muted">Loading earlier messages…</p>}
      {page.error && <p className="zd-error">Could not load earlier messages: {page.error}</p>}
      <div style={{ height: total, position: 'relative' }}>
        {items.map((it) => (
          <div key={it.key} data-index={it.index} data-turn-id={turnOf(rows[it.index]!.event)} data-focused={it.index === focusIndex ? 'true' : undefined} className={it.index === focusIndex ? 'zd-focused' : undefined} ref={virtualizer.measureElement} style={{ position: 'absolute', top: 0, left: 0, right: 0, transform: `translateY(${it.start}px)` }}>
            <TranscriptItem row={rows[it.index]!} />
          </div>
        ))}
      </div>
      {running && <p className="zd-muted zd-running">Working…</p>}
      {interrupted && (
        <p className="zd-interrupted" role="note" aria-label="Interrupted">
          <strong>Interrupted</strong> — the run stopped before it finished; what it streamed is kept above. Send the prompt again to continue.
        </p>
      )}
    </div>
    </PathChips>
    </TaskChildrenContext.Provider>
    </TurnToolsContext.Provider>
  )
}
