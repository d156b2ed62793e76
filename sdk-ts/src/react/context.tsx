// <ChatProvider host>: the host the components below it work on (client seed, "Connecting a host").
// Any ChatHost works; a server host (createServerHost) also lights up what only zidane-server has:
// drafts shared across tabs, the model picker, the follow-up queue and tool approvals.
import { createContext, useContext, useMemo, useRef, type ReactNode, type RefObject } from 'react'
import type { ApprovalsHost } from '../adapters/approvals-host.js'
import type { ChatHost } from '../adapters/types.js'
import type { ServerClient } from '../client/client.js'
import { SessionStreamsProvider } from './index.js'

/** What the components share: the host, the server's client when there is one, and the composer's textbox. */
export interface ChatContextValue {
  readonly host: ChatHost
  /** The server client of a server host (createServerHost), else undefined. */
  readonly client: ServerClient | undefined
  /** The tool approvals (createServerApprovalsHost), when given. */
  readonly approvals: ApprovalsHost | undefined
  /** The composer's textbox, where focus returns after a dialog is answered. */
  readonly composer: RefObject<HTMLTextAreaElement>
}

const ChatContext = createContext<ChatContextValue | null>(null)

/** Props of ChatProvider. */
export interface ChatProviderProps {
  host: ChatHost
  /** Tool approvals to show in HostInteractions (zidane-server only: createServerApprovalsHost). */
  approvals?: ApprovalsHost
  /** The color scheme: light, dark, or system (default: follows prefers-color-scheme). */
  theme?: 'light' | 'dark' | 'system'
  className?: string
  children?: ReactNode
}

/**
 * Makes host available to SessionList, HostTranscript, HostInteractions and HostComposer, and its
 * streams to the session hooks. Renders one <div class="zd"> that scopes the components' styles
 * (import '@zidane/sdk/react/styles.css'; nothing outside .zd is styled) and carries data-theme.
 */
export function ChatProvider(props: ChatProviderProps): ReactNode {
  const composer = useRef<HTMLTextAreaElement>(null)
  const client = (props.host as { client?: ServerClient }).client
  const value = useMemo<ChatContextValue>(() => ({ host: props.host, client, approvals: props.approvals, composer }), [props.host, client, props.approvals])
  return (
    <ChatContext.Provider value={value}>
      <SessionStreamsProvider streams={props.host.streams}>
        <div className={props.className ? `zd ${props.className}` : 'zd'} data-theme={props.theme ?? 'system'}>
          {props.children}
        </div>
      </SessionStreamsProvider>
    </ChatContext.Provider>
  )
}

/** The nearest ChatProvider's value; throws outside one. */
export function useChat(): ChatContextValue {
  const v = useContext(ChatContext)
  if (v === null) throw new Error('Wrap the tree in <ChatProvider host={host}>.')
  return v
}

/** Moves focus back to the composer's textbox (after a dialog is answered). */
export function focusComposer(chat: ChatContextValue): void {
  chat.composer.current?.focus()
}
