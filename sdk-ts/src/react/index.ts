// @zidane/sdk/react: React bindings of the session stream store, on useSyncExternalStore. Every hook
// reads one session and subscribes to that session only, so a token in one session renders no reader
// of another (client cases C24–C27). React is a peer dependency of this entry only.
import { createContext, createElement, useCallback, useContext, useMemo, useRef, useSyncExternalStore, type ReactNode } from 'react'
import { createSessionStreamActions, isEditEvent, type SessionPage, type SessionSnapshot, type SessionStreamActions, type SessionStreams, type StreamProgress } from '../chat/streams.js'
import type { StreamEvent } from '../protocol.js'
import type { ReadableStore } from '../store.js'

const StreamsContext = createContext<SessionStreams | null>(null)

/** Props of SessionStreamsProvider. */
export interface SessionStreamsProviderProps {
  streams: SessionStreams
  children?: ReactNode
}

/** Makes a session stream store available to the hooks below it. Swapping streams re-subscribes every hook. */
export function SessionStreamsProvider(props: SessionStreamsProviderProps): ReactNode {
  return createElement(StreamsContext.Provider, { value: props.streams }, props.children)
}

/** The store of the nearest SessionStreamsProvider. */
export function useSessionStreams(): SessionStreams {
  const streams = useContext(StreamsContext)
  if (streams === null) throw new Error('Wrap the tree in <SessionStreamsProvider streams={streams}>.')
  return streams
}

/** Subscribes to one session and returns pick(snapshot); re-renders only when that value changes. */
function useSessionValue<T>(sessionId: string, pick: (s: SessionSnapshot) => T): T {
  const streams = useSessionStreams()
  const subscribe = useCallback((onChange: () => void) => streams.subscribe(sessionId, onChange), [streams, sessionId])
  const get = () => pick(streams.getSnapshot(sessionId))
  return useSyncExternalStore(subscribe, get, get)
}

const pickEvents = (s: SessionSnapshot) => s.events
const pickRunning = (s: SessionSnapshot) => s.running
const pickPage = (s: SessionSnapshot) => s.page
const pickProgress = (s: SessionSnapshot) => s.progress

/** The session's transcript rows. */
export function useSessionEvents(sessionId: string): readonly StreamEvent[] {
  return useSessionValue(sessionId, pickEvents)
}

/** Whether a run of the session is in progress. */
export function useSessionRunning(sessionId: string): boolean {
  return useSessionValue(sessionId, pickRunning)
}

/** The streaming turn's progress (tokens so far, tokens/s; stream:progress), undefined when no turn streams. */
export function useSessionProgress(sessionId: string): StreamProgress | undefined {
  return useSessionValue(sessionId, pickProgress)
}

/** The session's scrollback state (hasMore, loading, cursor). */
export function useSessionPage(sessionId: string): SessionPage {
  return useSessionValue(sessionId, pickPage)
}

const pickInterrupted = (s: SessionSnapshot) => s.interrupted === true

/** Whether the session's last run ended interrupted (cancelled or stopped by a shutdown) in this page's view. */
export function useSessionInterrupted(sessionId: string): boolean {
  return useSessionValue(sessionId, pickInterrupted)
}

/** Shallow equality of arrays and plain objects: an isEqual for selectors that build new values. */
export function shallowEqual(a: unknown, b: unknown): boolean {
  if (Object.is(a, b)) return true
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false
  if (Array.isArray(a) !== Array.isArray(b)) return false
  const ka = Object.keys(a)
  const kb = Object.keys(b)
  if (ka.length !== kb.length) return false
  for (const k of ka) {
    if (!Object.prototype.hasOwnProperty.call(b, k) || !Object.is((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k])) return false
  }
  return true
}

/**
 * selector(events) of one session. The selection is cached per events reference, so a selector
 * that builds a new array or object does not loop (C24); with isEqual (for example shallowEqual) an
 * equal selection keeps the previous reference and the component does not re-render.
 */
export function useSessionEventsSelector<T>(sessionId: string, selector: (events: readonly StreamEvent[]) => T, isEqual: (a: T, b: T) => boolean = Object.is): T {
  const streams = useSessionStreams()
  const cache = useRef<{ events: readonly StreamEvent[] | undefined; value: T } | null>(null)
  const latest = useRef(selector)
  if (latest.current !== selector) {
    // A new selector (an inline arrow each render): select again once, keeping the old value for isEqual.
    latest.current = selector
    if (cache.current !== null) cache.current = { events: undefined, value: cache.current.value }
  }
  const subscribe = useCallback((onChange: () => void) => streams.subscribe(sessionId, onChange), [streams, sessionId])
  const get = (): T => {
    const events = streams.getSnapshot(sessionId).events
    const c = cache.current
    if (c !== null && c.events === events) return c.value
    const next = latest.current(events)
    if (c !== null && isEqual(c.value, next)) {
      cache.current = { events, value: c.value }
      return c.value
    }
    cache.current = { events, value: next }
    return next
  }
  return useSyncExternalStore(subscribe, get, get)
}

/**
 * The current value of a ReadableStore (client.connection, a host's sessions or interactions),
 * re-rendering when it changes: useSyncExternalStore(store.subscribe, store.get). store.get is the
 * snapshot (the same reference until the value changes); both functions may be passed detached.
 */
export function useStore<T>(store: ReadableStore<T>): T {
  return useSyncExternalStore(store.subscribe, store.get, store.get)
}

const selectEdits = (events: readonly StreamEvent[]) => events.filter(isEditEvent)

/** The session's events that carry a file edit; re-renders only when that list changes. */
export function useSessionEdits(sessionId: string): readonly StreamEvent[] {
  return useSessionEventsSelector(sessionId, selectEdits, shallowEqual)
}

/** The store's writes as stable functions (createSessionStreamActions); new ones only for another store. */
export function useSessionStreamActions(): SessionStreamActions {
  const streams = useSessionStreams()
  return useMemo(() => createSessionStreamActions(streams), [streams])
}

/** Reads a session's snapshot without subscribing (for event handlers). */
export function usePeekSession(): (sessionId: string) => SessionSnapshot {
  const streams = useSessionStreams()
  return useCallback((sessionId: string) => streams.getSnapshot(sessionId), [streams])
}

/** Reads a session's events without subscribing (for event handlers). */
export function usePeekSessionEvents(): (sessionId: string) => readonly StreamEvent[] {
  const streams = useSessionStreams()
  return useCallback((sessionId: string) => streams.getSnapshot(sessionId).events, [streams])
}

/** Reads whether a session runs, without subscribing (for event handlers). */
export function usePeekSessionRunning(): (sessionId: string) => boolean {
  const streams = useSessionStreams()
  return useCallback((sessionId: string) => streams.getSnapshot(sessionId).running, [streams])
}

// The components of the client seed ("Connecting a host") and their parts.
export { ChatProvider, useChat, focusComposer } from './context.js'
export type { ChatProviderProps, ChatContextValue } from './context.js'
export { SessionList } from './session-list.js'
export type { SessionListProps } from './session-list.js'
export { HostTranscript, TranscriptItem, DiffView, transcriptRows } from './transcript.js'
export type { HostTranscriptProps, TranscriptRow, DiffViewProps } from './transcript.js'
export { HostInteractions } from './interactions.js'
export type { HostInteractionsProps } from './interactions.js'
export { HostComposer } from './composer.js'
export type { HostComposerProps } from './composer.js'
export { Markdown, CodeBlock, safeUrl } from './markdown.js'
export type { MarkdownProps, CodeBlockProps } from './markdown.js'
export { AttachmentChips, PromptAttachments, useAttachments, readAttachments, attachmentType, imageSource, formatBytes, ATTACHMENT_LIMITS } from './attachments.js'
export type { AttachmentsState, PendingAttachment } from './attachments.js'
export { useChildSessions, matchTaskChildren, ChildSessionRow } from './children.js'
export type { ChildSessionRowProps } from './children.js'
export { TurnMenu, RollbackNotice, TurnToolsContext } from './turn-menu.js'
export type { TurnMenuProps, RollbackNoticeProps, TurnTools } from './turn-menu.js'
export { useComposerCompletions } from './completions.js'
export type { ComposerCompletions, ComposerCompletionsOptions, ComposedPrompt } from './completions.js'
export { HostPlan, activePlan } from './plans.js'
export type { HostPlanProps } from './plans.js'
export { PathChips, PathChipsContext, PathText, PathChip, ToolMedia, FileViewer, pathCandidates, createPathResolver, pathResolverOf, languageOf, PATH_SCAN_LIMITS, VIEWER_LIMITS } from './paths.js'
export type { PathChipsProps, PathChipsValue, PathTextProps, PathChipProps, FileViewerProps, PathCandidate, PathResolver, PathResolverOptions } from './paths.js'
export { ResultMedia, resultMediaView, INLINE_IMAGE_TYPES, RESULT_MEDIA_LIMITS } from './result-media.js'
export type { ResultMediaProps, ResultMediaView } from './result-media.js'
export { MediaImage, mediaTicketsOf, useMediaTickets, useMediaAvailable, mediaUrl, newMediaTicket, isImagePath, MEDIA_PATH, IMAGE_EXTENSIONS } from './media.js'
export type { MediaImageProps, MediaTickets } from './media.js'
