// The client seed's page ("Connecting a host"), shared by the examples: the same components on
// whichever host the example's ChatProvider was given.
import type { ReactNode } from 'react'
import { HostComposer, HostInteractions, HostTranscript, SessionList } from '../src/react/index.js'

/** Props of SeedPage. */
export interface SeedPageProps {
  id: string | undefined
  onSelect(id: string): void
  onNewSession(): void
  /** Shown above the session list (the connection's state, for a server). */
  aside?: ReactNode
}

/** The session list beside the open session's transcript, interactions and composer. */
export function SeedPage(props: SeedPageProps): ReactNode {
  return (
    <div className="page">
      <aside>
        {props.aside}
        <SessionList activeId={props.id} onSelect={props.onSelect} onNewSession={props.onNewSession} />
      </aside>
      {props.id && (
        <main>
          <HostTranscript sessionId={props.id} />
          <HostInteractions sessionId={props.id} />
          <HostComposer sessionId={props.id} />
        </main>
      )}
    </div>
  )
}
