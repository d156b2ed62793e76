// Subagents' child sessions in their parent's transcript (issue 27 item 6): orchestration.list reads
// a session's children, session:updated keeps them current, and each `task` tool call of the
// transcript is matched to the child it created, shown nested under the call as a row naming the
// child's agent and state with a button that opens it. Child sessions are never items of the
// "Sessions" list (issue 24 item 5).
import { useEffect, useState, type ReactNode } from 'react'
import type { Session, StreamEvent, WireSignal } from '../protocol.js'
import { useChat } from './context.js'

const noChildren: readonly Session[] = Object.freeze([])

/** The direct children of a session on a server host (orchestration.list, then session:updated), oldest first; empty elsewhere. */
export function useChildSessions(sessionId: string): readonly Session[] {
  const { client } = useChat()
  const [children, setChildren] = useState<readonly Session[]>(noChildren)
  useEffect(() => {
    setChildren(noChildren)
    if (!client) return
    let live = true
    const load = () => {
      if (!client.offers('orchestration.list')) return
      client.call('orchestration.list', { sessionId }).then(
        (r) => live && setChildren(Object.freeze([...r.children])),
        () => {},
      )
    }
    load()
    const off = client.onSignal((s: WireSignal) => {
      if (s.kind !== 'session:updated') return
      const child = s.session
      if (s.deleted) {
        setChildren((cur) => (cur.some((c) => c.id === s.sessionId) ? Object.freeze(cur.filter((c) => c.id !== s.sessionId)) : cur))
      } else if (child && child.parentSessionId === sessionId) {
        setChildren((cur) => {
          const i = cur.findIndex((c) => c.id === child.id)
          if (i < 0) return Object.freeze([...cur, child])
          const next = cur.slice()
          next[i] = child
          return Object.freeze(next)
        })
      }
    })
    const offConn = client.connection.subscribe((c) => {
      if (c.status === 'open') load()
    })
    return () => {
      live = false
      off()
      offConn()
    }
  }, [client, sessionId])
  return children
}

const sessionIdIn = /\bsession ([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\b/

/**
 * Which child each `task` call created (callId → child): the child whose id the call's result
 * names (the task tool's result ends "worked in session <id>"), else the calls without one take the
 * children no result names, in order.
 */
export function matchTaskChildren(events: readonly StreamEvent[], children: readonly Session[]): Map<string, Session> {
  const out = new Map<string, Session>()
  if (children.length === 0) return out
  const byId = new Map(children.map((c) => [c.id, c]))
  const calls: string[] = []
  const named = new Map<string, string>()
  for (const e of events) {
    if (e.kind === 'tool' && e.tool === 'task') calls.push(e.callId)
    else if (e.kind === 'tool-result' && e.tool === 'task') {
      const m = sessionIdIn.exec(e.text)
      if (m && byId.has(m[1]!)) named.set(e.callId, m[1]!)
    }
  }
  const claimed = new Set(named.values())
  const rest = children.filter((c) => !claimed.has(c.id))
  let next = 0
  for (const callId of calls) {
    const id = named.get(callId)
    if (id !== undefined) out.set(callId, byId.get(id)!)
    else if (next < rest.length) out.set(callId, rest[next++]!)
  }
  return out
}

const stateText = (status: string) => (status === 'running' ? 'running' : status === 'error' ? 'failed' : status === 'idle' ? 'done' : status)

/** Props of ChildSessionRow. */
export interface ChildSessionRowProps {
  child: Session
  /** Opens the child session; without it the row shows no button. */
  onOpen?: ((sessionId: string) => void) | undefined
}

/** A subagent's child session under its parent's task call: its agent, title and state, and a button opening it. */
export function ChildSessionRow({ child, onOpen }: ChildSessionRowProps): ReactNode {
  const state = stateText(child.status)
  return (
    <div className="zd-child" role="group" aria-label={`Subagent ${child.agentId}: ${child.title}`}>
      <span className="zd-who">Subagent {child.agentId}</span> <span className="zd-child-title">{child.title}</span>{' '}
      <span className={`zd-badge zd-${child.status}`}>{state}</span>
      {onOpen && (
        <button type="button" className="zd-button" onClick={() => onOpen(child.id)}>
          Open child session
        </button>
      )}
    </div>
  )
}
