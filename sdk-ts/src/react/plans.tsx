// <HostPlan sessionId>: the session's plan (issue 24 section 1, interactions: plans): the steps the
// agent keeps with its update_plan tool, read with plans.get when shown and followed live through
// plans:snapshot (sent at each run's start and on every change). A region named "Plan" holding an
// ordered list of the steps, each with its status in words (done, in progress, pending), not only
// a color. Shows nothing on hosts without a server client, or while the session has no plan.
import { useEffect, useState, type ReactNode } from 'react'
import type { PlanSnapshot, WireSignal } from '../protocol.js'
import { useChat } from './context.js'
import { useStore } from './index.js'
import type { ConnectionState } from '../client/client.js'

const closed: ConnectionState = { status: 'closed' }
const noConnection = { get: () => closed, subscribe: () => () => {} }

/** Props of HostPlan. */
export interface HostPlanProps {
  sessionId: string
}

const STATUS_TEXT: Record<string, string> = { done: 'done', in_progress: 'in progress', pending: 'pending' }

/** The active plan of a snapshot (its active id, else the first), or undefined. */
export function activePlan(s: PlanSnapshot | undefined): PlanSnapshot['plans'][number] | undefined {
  if (!s || s.plans.length === 0) return undefined
  return s.plans.find((p) => p.id === s.active) ?? s.plans[0]
}

/** The session's plan with its steps. */
export function HostPlan(props: HostPlanProps): ReactNode {
  const { client } = useChat()
  const conn = useStore(client?.connection ?? noConnection)
  const open = conn.status === 'open'
  const [snap, setSnap] = useState<PlanSnapshot>()

  useEffect(() => {
    setSnap(undefined)
    if (!client || !open || !client.offers('plans.get')) return
    let live = true
    let seen = false
    const off = client.onSignal((s: WireSignal) => {
      if (s.kind !== 'plans:snapshot' || s.sessionId !== props.sessionId) return
      seen = true
      setSnap(s.snapshot)
    })
    client.call('plans.get', { sessionId: props.sessionId }).then(
      (r) => live && !seen && setSnap(r),
      () => {},
    )
    return () => {
      live = false
      off()
    }
  }, [client, open, props.sessionId])

  const plan = activePlan(snap)
  if (!plan || plan.steps.length === 0) return null
  const done = plan.steps.filter((s) => s.status === 'done').length
  return (
    <section className="zd-plan" role="region" aria-label="Plan">
      <h2 className="zd-plan-title">
        Plan <span className="zd-muted">{`${done} of ${plan.steps.length} done`}</span>
      </h2>
      {plan.explanation ? <p className="zd-muted">{plan.explanation}</p> : null}
      <ol className="zd-plan-steps">
        {plan.steps.map((s, i) => (
          <li key={i} className={`zd-plan-step zd-plan-${s.status}`} aria-current={s.status === 'in_progress' ? 'step' : undefined}>
            <span className="zd-plan-mark" aria-hidden="true">
              {s.status === 'done' ? '✓' : s.status === 'in_progress' ? '▸' : '○'}
            </span>{' '}
            <span className="zd-plan-text">{s.title}</span> <span className="zd-badge">{STATUS_TEXT[s.status] ?? s.status}</span>
          </li>
        ))}
      </ol>
    </section>
  )
}
