// The ChatHost contract every adapter returns (client seed: "Connecting a host"), so page code stays
// the same wherever the agent runs.
import type { SessionStreams } from '../chat/streams.js'
import type { Elicitation, StreamEvent } from '../protocol.js'
import type { ReadableStore } from '../store.js'

/** A session as a session list shows it. */
export interface HostSession {
  readonly id: string
  readonly title: string
  /** idle, running or error (the last run failed); a server may send other values. */
  readonly status: string
  readonly createdAt?: number
  readonly updatedAt?: number
  /** A subagent's child session (server hosts): the session whose run created it. Lists of sessions leave these out. */
  readonly parentSessionId?: string
  /** The agent that runs its prompts (server hosts). */
  readonly agentId?: string
}

/**
 * A question a run asks the user (ask(), an interaction:request on the server): the prompt, the
 * options to pick from, whether several may be picked and whether free text is allowed.
 */
export interface InteractionRequest {
  readonly prompt: string
  readonly options?: readonly string[]
  readonly multiple?: boolean
  readonly allowText?: boolean
  /** Anything else the page needs to show it (run hosts only). */
  readonly data?: unknown
  /** Set when an MCP server asks (issue 23): its form (requestedSchema) or its URL. */
  readonly elicitation?: Elicitation
}

/**
 * An answer: the picked options and/or text (the server's shape), a plain string (an option's name,
 * else text), or null to dismiss. Run hosts hand the value to ask() as given.
 */
export type InteractionReply = { readonly choices?: readonly string[]; readonly text?: string; readonly action?: 'accept' | 'decline'; readonly values?: Readonly<Record<string, unknown>> } | string | null

/** A question waiting for its answer. */
export interface PendingInteraction {
  readonly id: string
  readonly sessionId: string
  readonly runId: string
  readonly request: InteractionRequest
  /** Set when a subagent's child session asks (server hosts): the parent session it is also shown in. */
  readonly parentSessionId?: string
}

/** The contract of every adapter. */
export interface ChatHost {
  /** Resolves once the host can be used (connected, worker ready). */
  readonly ready: Promise<void>
  /** The transcripts, one per session (hand transcript(sessionId) to the components). */
  readonly streams: SessionStreams
  /** The session list, most recent first. */
  readonly sessions: ReadableStore<readonly HostSession[]>
  /** Questions waiting for an answer, across sessions. */
  readonly interactions: ReadableStore<readonly PendingInteraction[]>
  /** Creates a session and puts it at the top of the list. */
  createSession(options?: { title?: string; cwd?: string }): Promise<HostSession>
  /** Loads a session's transcript into streams and keeps it current. */
  open(sessionId: string): Promise<void>
  /** Sends a prompt; resolves with its run's id once the run is accepted (a follow-up waits its turn). */
  send(sessionId: string, prompt: string): Promise<{ runId: string }>
  /** Stops the session's running prompt, or a queued follow-up by runId. */
  cancel(sessionId: string, runId?: string): Promise<void>
  /** Answers a pending question (null dismisses it). */
  answer(interactionId: string, answer: InteractionReply | unknown): Promise<void>
  /** Stops the host; later calls reject with ClosedError. */
  close(): void
}

/** An event a run emits: a StreamEvent whose turnId the host fills in when it is left out. */
export type LiveEvent = StreamEvent extends infer E ? (E extends { turnId: string } ? Omit<E, 'turnId'> & { turnId?: string } : E) : never
