// <HostInteractions sessionId>: what waits for the user in one session (issue 24 section 1): the
// oldest pending tool approval as a dialog named "Approval" (the exact command or the write's diff
// or new content; Allow, Always allow with what it would store, Deny; how many more wait), the
// oldest question as a dialog named "Question" (radio buttons for one answer, checkboxes for
// several, a textbox "Answer" when free text is allowed, Submit), an MCP server's elicitation as a
// dialog named "Elicitation" (issue 23: a form with a labelled field per requestedSchema property,
// Submit, Decline and Cancel; or a URL shown as text and a link opened without opener or referrer,
// Done and Decline), and the follow-up queue with Remove (server hosts). Focus moves to a dialog when it appears and back to the composer after.
import { useEffect, useId, useRef, useState, type FormEvent, type ReactNode, type RefObject } from 'react'
import type { HostSession, PendingInteraction } from '../adapters/types.js'
import type { ApprovalDecision, ApprovalRequest, Elicitation, QueuedPrompt, WireSignal } from '../protocol.js'
import { focusComposer, useChat } from './context.js'
import { useStore } from './index.js'
import { DiffView } from './transcript.js'

const noRequests: readonly ApprovalRequest[] = Object.freeze([])
/** The approvals of a host without them: the same empty list on every read (useSyncExternalStore needs that). */
const none = { get: () => noRequests, subscribe: () => () => {} }

function useFocusOnMount<T extends HTMLElement>(key: string): RefObject<T> {
  const ref = useRef<T>(null)
  useEffect(() => {
    ref.current?.focus()
  }, [key])
  return ref
}

function field(input: unknown, name: string): string | undefined {
  if (typeof input !== 'object' || input === null) return undefined
  const v = (input as Record<string, unknown>)[name]
  return typeof v === 'string' ? v : undefined
}

/**
 * Who asks, when a subagent's child session asks in its parent's view: the child's agent and title
 * from the host's session list (which holds child sessions), else its id.
 */
function useAsker(sessionId: string, shownIn: string): string | undefined {
  const sessions = useStore(useChat().host.sessions)
  if (sessionId === shownIn) return undefined
  const s = sessions.find((x) => x.id === sessionId)
  const who = s?.agentId ? `subagent ${s.agentId}` : 'a subagent'
  return s?.title ? `${who} in its child session “${s.title}”` : `${who} in its child session ${sessionId}`
}

/**
 * Whether a request of session sessionId (whose parent is parentSessionId) shows in session shownIn:
 * its own, or one of its ancestors' (a subagent's requests reach every ancestor up to the root),
 * walking parentSessionId through the host's sessions, at most 8 levels.
 */
function asksIn(sessionId: string, parentSessionId: string | undefined, shownIn: string, sessions: readonly HostSession[]): boolean {
  if (sessionId === shownIn) return true
  let p = parentSessionId
  for (let i = 0; p !== undefined && i < 8; i++) {
    if (p === shownIn) return true
    const at: string = p
    p = sessions.find((s) => s.id === at)?.parentSessionId
  }
  return false
}

/** The approval dialog of one request. */
function ApprovalDialog({ request, more, shownIn, onAnswer }: { request: ApprovalRequest; more: number; shownIn: string; onAnswer: (d: ApprovalDecision) => Promise<void> }): ReactNode {
  const asker = useAsker(request.sessionId, shownIn)
  const first = useFocusOnMount<HTMLButtonElement>(request.requestId)
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<string>()
  const titleId = useId()
  const command = field(request.input, 'command')
  const content = field(request.input, 'content')
  const path = field(request.input, 'path')
  const answer = (d: ApprovalDecision) => {
    setBusy(true)
    onAnswer(d).catch((e: unknown) => {
      setError(e instanceof Error ? e.message : String(e))
      setBusy(false)
    })
  }
  return (
    <section role="dialog" aria-label="Approval" aria-describedby={titleId} className="zd-dialog">
      <h2 id={titleId} className="zd-dialog-title">
        {request.tool} wants to run{path ? ` on ${path}` : ''}
      </h2>
      {asker && <p className="zd-asker">Asked by {asker}: answering here answers it there.</p>}
      <p className="zd-summary-text">{request.summary}</p>
      {command !== undefined && (
        <pre className="zd-pre zd-command" aria-label="Command">
          {command}
        </pre>
      )}
      {request.diff ? <DiffView diff={request.diff} label="Diff of the write" /> : content !== undefined ? (
        <pre className="zd-pre" aria-label="New file content">
          {content}
        </pre>
      ) : command === undefined ? (
        <pre className="zd-pre">{JSON.stringify(request.input, null, 2)}</pre>
      ) : null}
      <p className="zd-muted">In {request.cwd}</p>
      {error && <p className="zd-error">{error}</p>}
      <div className="zd-actions">
        <button ref={first} type="button" className="zd-button zd-primary" disabled={busy} onClick={() => answer('allow')}>
          Allow
        </button>
        <button type="button" className="zd-button" disabled={busy} onClick={() => answer('always')} aria-describedby={request.alwaysStores ? `${titleId}-always` : undefined}>
          Always allow
        </button>
        <button type="button" className="zd-button zd-danger" disabled={busy} onClick={() => answer('deny')}>
          Deny
        </button>
      </div>
      {request.alwaysStores && (
        <p id={`${titleId}-always`} className="zd-muted">
          Always allow saves: <code>{request.alwaysStores}</code>
        </p>
      )}
      {more > 0 && <p className="zd-muted">{more === 1 ? '1 more approval waits.' : `${more} more approvals wait.`}</p>}
    </section>
  )
}

/** The question dialog of one pending interaction. */
function QuestionDialog({ pending, shownIn, onAnswer }: { pending: PendingInteraction; shownIn: string; onAnswer: (a: { choices?: string[]; text?: string } | null) => Promise<void> }): ReactNode {
  const r = pending.request
  const asker = useAsker(pending.sessionId, shownIn)
  const options = r.options ?? []
  const [picked, setPicked] = useState<string[]>([])
  const [text, setText] = useState('')
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<string>()
  const ref = useFocusOnMount<HTMLFieldSetElement>(pending.id)
  const name = useId()
  useEffect(() => {
    ref.current?.querySelector<HTMLInputElement>('input,textarea')?.focus()
  }, [pending.id, ref])
  const submit = (ev: FormEvent) => {
    ev.preventDefault()
    const a: { choices?: string[]; text?: string } = {}
    if (picked.length > 0) a.choices = picked
    if (text.trim() !== '') a.text = text
    setBusy(true)
    onAnswer(a).catch((e: unknown) => {
      setError(e instanceof Error ? e.message : String(e))
      setBusy(false)
    })
  }
  return (
    <section role="dialog" aria-label="Question" className="zd-dialog">
      <form onSubmit={submit}>
        <fieldset ref={ref} className="zd-fieldset">
          <legend className="zd-dialog-title">{r.prompt}</legend>
          {asker && <p className="zd-asker">Asked by {asker}.</p>}
          {options.map((o) => (
            <label key={o} className="zd-choice">
              <input
                type={r.multiple ? 'checkbox' : 'radio'}
                name={name}
                value={o}
                checked={picked.includes(o)}
                onChange={(e) => setPicked(r.multiple ? (e.target.checked ? [...picked, o] : picked.filter((p) => p !== o)) : [o])}
              />{' '}
              {o}
            </label>
          ))}
          {(r.allowText || options.length === 0) && (
            <label className="zd-answer">
              Answer
              <textarea aria-label="Answer" value={text} onChange={(e) => setText(e.target.value)} rows={2} />
            </label>
          )}
        </fieldset>
        {error && <p className="zd-error">{error}</p>}
        <div className="zd-actions">
          <button type="submit" className="zd-button zd-primary" disabled={busy || (picked.length === 0 && text.trim() === '')}>
            Submit
          </button>
          <button type="button" className="zd-button" disabled={busy} onClick={() => void onAnswer(null).catch(() => {})}>
            Dismiss
          </button>
        </div>
      </form>
    </section>
  )
}

/** One field of an elicitation form (MCP PrimitiveSchemaDefinition). */
interface FormField {
  type?: string
  title?: string
  description?: string
  enum?: string[]
  enumNames?: string[]
  oneOf?: { const: string; title?: string }[]
  format?: string
  minimum?: number
  maximum?: number
  items?: { enum?: string[]; anyOf?: { const: string; title?: string }[] }
  default?: unknown
}

/** The choices of a string field or an array's items, with their labels. */
function choicesOf(f: FormField | FormField['items']): { value: string; label: string }[] | undefined {
  if (!f) return undefined
  const ff = f as FormField
  if (ff.enum) return ff.enum.map((v, i) => ({ value: v, label: ff.enumNames?.[i] ?? v }))
  const list = ff.oneOf ?? (f as { anyOf?: { const: string; title?: string }[] }).anyOf
  return list?.map((o) => ({ value: o.const, label: o.title ?? o.const }))
}

const inputTypes: Record<string, string> = { email: 'email', uri: 'url', date: 'date', 'date-time': 'datetime-local' }

/** An MCP server's elicitation (issue 23): its form, or its URL to open. */
function ElicitationDialog({ pending, elicitation, onAnswer }: { pending: PendingInteraction; elicitation: Elicitation; onAnswer: (a: { action: 'accept' | 'decline'; values?: Record<string, unknown> } | null) => Promise<void> }): ReactNode {
  const schema = (elicitation.requestedSchema ?? {}) as { properties?: Record<string, FormField>; required?: string[] }
  const fields = Object.entries(schema.properties ?? {})
  const required = new Set(schema.required ?? [])
  const [values, setValues] = useState<Record<string, unknown>>(() => Object.fromEntries(fields.filter(([, f]) => f.default !== undefined).map(([k, f]) => [k, f.default])))
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<string>()
  const ref = useFocusOnMount<HTMLElement>(pending.id)
  const id = useId()
  useEffect(() => {
    ref.current?.querySelector<HTMLElement>('input,select,a')?.focus()
  }, [pending.id, ref])
  const answer = (a: { action: 'accept' | 'decline'; values?: Record<string, unknown> } | null) => {
    setBusy(true)
    setError(undefined)
    onAnswer(a).catch((e: unknown) => {
      setError(e instanceof Error ? e.message : String(e))
      setBusy(false)
    })
  }
  const set = (k: string, v: unknown) => setValues((old) => ({ ...old, [k]: v }))
  const submit = (ev: FormEvent) => {
    ev.preventDefault()
    const out: Record<string, unknown> = {}
    for (const [k, f] of fields) {
      const v = values[k]
      if (v === undefined || (v === '' && !required.has(k))) continue
      out[k] = (f.type === 'number' || f.type === 'integer') && typeof v === 'string' ? (v === '' ? v : Number(v)) : v
    }
    answer({ action: 'accept', values: out })
  }
  const title = (
    <p className="zd-dialog-title">
      <strong>{elicitation.server}</strong> asks: {elicitation.message}
    </p>
  )
  if (elicitation.mode === 'url') {
    return (
      <section role="dialog" aria-label="Elicitation" className="zd-dialog" ref={ref}>
        {title}
        <p>
          <code aria-label="Address">{elicitation.url}</code>
        </p>
        {webAddress(elicitation.url) ? (
          <p>
            <a href={elicitation.url} target="_blank" rel="noopener noreferrer">
              Open the address
            </a>
          </p>
        ) : (
          <p className="zd-error">Not an http(s) address: it is not offered as a link.</p>
        )}
        {error && <p className="zd-error">{error}</p>}
        <div className="zd-actions">
          <button type="button" className="zd-button zd-primary" disabled={busy} onClick={() => answer({ action: 'accept' })}>
            Done
          </button>
          <button type="button" className="zd-button" disabled={busy} onClick={() => answer({ action: 'decline' })}>
            Decline
          </button>
        </div>
      </section>
    )
  }
  return (
    <section role="dialog" aria-label="Elicitation" className="zd-dialog">
      <form onSubmit={submit}>
        <fieldset ref={ref as RefObject<HTMLFieldSetElement>} className="zd-fieldset">
          <legend>{title}</legend>
          {fields.map(([k, f]) => {
            const label = `${f.title ?? k}${required.has(k) ? ' (required)' : ''}`
            const fid = `${id}-${k}`
            const choices = choicesOf(f.type === 'array' ? f.items : f)
            let input: ReactNode
            if (f.type === 'boolean') {
              input = <input id={fid} type="checkbox" checked={values[k] === true} onChange={(e) => set(k, e.target.checked)} />
            } else if (f.type === 'array') {
              const picked = Array.isArray(values[k]) ? (values[k] as string[]) : []
              input = (
                <span role="group" aria-labelledby={fid}>
                  {(choices ?? []).map((c) => (
                    <label key={c.value} className="zd-choice">
                      <input type="checkbox" checked={picked.includes(c.value)} onChange={(e) => set(k, e.target.checked ? [...picked, c.value] : picked.filter((p) => p !== c.value))} /> {c.label}
                    </label>
                  ))}
                </span>
              )
            } else if (choices) {
              input = (
                <select id={fid} value={typeof values[k] === 'string' ? (values[k] as string) : ''} onChange={(e) => set(k, e.target.value)}>
                  <option value="">—</option>
                  {choices.map((c) => (
                    <option key={c.value} value={c.value}>
                      {c.label}
                    </option>
                  ))}
                </select>
              )
            } else {
              const num = f.type === 'number' || f.type === 'integer'
              input = (
                <input
                  id={fid}
                  type={num ? 'number' : (inputTypes[f.format ?? ''] ?? 'text')}
                  step={f.type === 'integer' ? 1 : num ? 'any' : undefined}
                  min={f.minimum}
                  max={f.maximum}
                  value={values[k] === undefined ? '' : String(values[k])}
                  onChange={(e) => set(k, e.target.value)}
                />
              )
            }
            return (
              <div key={k} className="zd-field">
                <label htmlFor={fid} id={f.type === 'array' ? fid : undefined}>
                  {label}
                </label>{' '}
                {input}
                {f.description && <small className="zd-hint">{f.description}</small>}
              </div>
            )
          })}
        </fieldset>
        {error && <p className="zd-error">{error}</p>}
        <div className="zd-actions">
          <button type="submit" className="zd-button zd-primary" disabled={busy}>
            Submit
          </button>
          <button type="button" className="zd-button" disabled={busy} onClick={() => answer({ action: 'decline' })}>
            Decline
          </button>
          <button type="button" className="zd-button" disabled={busy} onClick={() => answer(null)}>
            Cancel
          </button>
        </div>
      </form>
    </section>
  )
}

/** The follow-up queue of a session on a server host: queue.list, then queue:changed. */
function useQueue(sessionId: string): readonly QueuedPrompt[] {
  const { client } = useChat()
  const [items, setItems] = useState<readonly QueuedPrompt[]>([])
  useEffect(() => {
    if (!client) return
    let live = true
    setItems([])
    const off = client.onSignal((s: WireSignal) => {
      if (s.kind === 'queue:changed' && s.sessionId === sessionId) setItems(s.items)
    })
    const load = () =>
      client.call('queue.list', { sessionId }).then(
        (r) => live && setItems(r.items),
        () => {},
      )
    void load()
    const offConn = client.connection.subscribe((c) => {
      if (c.status === 'open') void load()
    })
    return () => {
      live = false
      off()
      offConn()
    }
  }, [client, sessionId])
  return items
}

/** Props of HostInteractions. */
export interface HostInteractionsProps {
  sessionId: string
}

/** What waits for the user in the session. */
export function HostInteractions(props: HostInteractionsProps): ReactNode {
  const chat = useChat()
  // A subagent's child session asks in its own view and in its parent's.
  const sessions = useStore(chat.host.sessions)
  const questions = useStore(chat.host.interactions).filter((q) => asksIn(q.sessionId, q.parentSessionId, props.sessionId, sessions))
  const approvals = useStore(chat.approvals?.approvals ?? none).filter((a) => asksIn(a.sessionId, a.parentSessionId, props.sessionId, sessions))
  const queue = useQueue(props.sessionId)
  const approval = approvals[0]
  const question = questions[0]
  const done = () => focusComposer(chat)
  return (
    <div className="zd-interactions">
      {approval && chat.approvals && (
        <ApprovalDialog
          key={approval.requestId}
          request={approval}
          more={approvals.length - 1}
          shownIn={props.sessionId}
          onAnswer={async (d) => {
            await chat.approvals!.answer(approval.requestId, d)
            done()
          }}
        />
      )}
      {!approval && question?.request.elicitation && (
        <ElicitationDialog
          key={question.id}
          pending={question}
          elicitation={question.request.elicitation}
          onAnswer={async (a) => {
            await chat.host.answer(question.id, a)
            done()
          }}
        />
      )}
      {!approval && question && !question.request.elicitation && (
        <QuestionDialog
          key={question.id}
          pending={question}
          shownIn={props.sessionId}
          onAnswer={async (a) => {
            await chat.host.answer(question.id, a)
            done()
          }}
        />
      )}
      {queue.length > 0 && (
        <section className="zd-queue" aria-label="Follow-up queue">
          <h2 className="zd-dialog-title">Queued follow-ups</h2>
          <ol>
            {queue.map((q) => (
              <li key={q.runId}>
                <span className="zd-queue-text">{q.prompt}</span>{' '}
                <button type="button" className="zd-button" aria-label={`Remove follow-up: ${q.prompt.slice(0, 60)}`} onClick={() => void chat.client?.call('queue.remove', { sessionId: props.sessionId, runId: q.runId }).catch(() => {})}>
                  Remove
                </button>
              </li>
            ))}
          </ol>
        </section>
      )}
    </div>
  )
}

/** Whether url is an http(s) address (the only kind an elicitation's link opens). */
function webAddress(url: string | undefined): boolean {
  try {
    const u = new URL(url ?? '')
    return u.protocol === 'https:' || u.protocol === 'http:'
  } catch {
    return false
  }
}
