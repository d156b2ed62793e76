// The session's settings (approval mode, sandbox policy), the git panel and the usage page.
import { useEffect, useState, type ReactNode } from 'react'
import type { ServerHost } from '../src/adapters/index.js'
import type { ApprovalMode, GitLogEntry, GitStatus, SessionSandbox, UsageSummaryResult } from '../src/protocol.js'
import { ApprovalModeValues, SandboxPolicyValues } from '../src/protocol.js'
import { DiffView, useChat } from '../src/react/index.js'

function useClient() {
  return (useChat().host as ServerHost).client
}

const errText = (e: unknown) => (e instanceof Error ? e.message : String(e))

/** The approval mode (approvals.getMode / setMode, approval:mode) and the sandbox policy of a session. */
export function SessionSettings({ sessionId }: { sessionId: string }): ReactNode {
  const client = useClient()
  const [mode, setMode] = useState<ApprovalMode>()
  const [sandbox, setSandbox] = useState<SessionSandbox>()
  const [error, setError] = useState<string>()
  useEffect(() => {
    let live = true
    client.call('approvals.getMode', { sessionId }).then((r) => live && setMode(r.mode), () => {})
    client.call('sessions.getSandbox', { sessionId }).then((r) => live && setSandbox(r), () => {})
    const off = client.onSignal((s) => {
      if (s.kind === 'approval:mode' && s.sessionId === sessionId) setMode(s.mode)
    })
    return () => {
      live = false
      off()
    }
  }, [client, sessionId])
  const canSetMode = client.offers('approvals.setMode')
  return (
    <div className="settings">
      {mode !== undefined && (
        <label>
          Approval mode{' '}
          <select
            value={mode}
            disabled={!canSetMode}
            onChange={(e) => {
              const m = e.target.value
              setError(undefined)
              client.call('approvals.setMode', { sessionId, mode: m }).then(() => setMode(m), (err: unknown) => setError(errText(err)))
            }}
          >
            {ApprovalModeValues.map((m) => (
              <option key={m} value={m}>
                {m}
              </option>
            ))}
          </select>
        </label>
      )}
      {sandbox !== undefined && <SandboxSetting sessionId={sessionId} sandbox={sandbox} onChange={setSandbox} onError={setError} />}
      {error && (
        <span className="zd-error" role="alert">
          {error}
        </span>
      )}
    </div>
  )
}

/**
 * The session's sandbox policy: shown to every token; an admin token (its hello offers
 * sessions.setSandbox) gets a picker "Sandbox policy" whose "Server default" clears the session's own.
 */
function SandboxSetting(props: { sessionId: string; sandbox: SessionSandbox; onChange: (s: SessionSandbox) => void; onError: (e: string | undefined) => void }): ReactNode {
  const client = useClient()
  const { sandbox } = props
  if (!client.offers('sessions.setSandbox'))
    return (
      <span className="zd-muted">
        Sandbox: <code>{sandbox.policy}</code>
        {sandbox.set ? '' : ' (server default)'}
      </span>
    )
  const values: string[] = [...SandboxPolicyValues]
  if (!values.includes(sandbox.policy)) values.push(sandbox.policy)
  return (
    <label>
      Sandbox policy{' '}
      <select
        value={sandbox.set ? sandbox.policy : ''}
        onChange={(e) => {
          const v = e.target.value
          props.onError(undefined)
          client.call('sessions.setSandbox', v === '' ? { sessionId: props.sessionId } : { sessionId: props.sessionId, policy: v }).then(props.onChange, (err: unknown) => props.onError(errText(err)))
        }}
      >
        <option value="">{`Server default (${sandbox.set ? 'as the server sets it' : sandbox.policy})`}</option>
        {values.map((v) => (
          <option key={v} value={v}>
            {v}
          </option>
        ))}
      </select>
    </label>
  )
}

/** The git panel of the session's folder: status, a file's diff, the log. */
export function GitPanel({ sessionId }: { sessionId: string }): ReactNode {
  const client = useClient()
  const [open, setOpen] = useState(false)
  const [status, setStatus] = useState<GitStatus>()
  const [log, setLog] = useState<readonly GitLogEntry[]>([])
  const [diff, setDiff] = useState<{ path: string; patch: string }>()
  const [cwd, setCwd] = useState<string>()
  const [error, setError] = useState<string>()
  useEffect(() => {
    if (!open) return
    let live = true
    setError(undefined)
    client
      .call('sessions.get', { sessionId })
      .then(async (s) => {
        if (!live) return
        setCwd(s.cwd)
        const [st, lg] = await Promise.all([client.call('git.status', { cwd: s.cwd }), client.call('git.log', { cwd: s.cwd, limit: 20 })])
        if (!live) return
        setStatus(st)
        setLog(lg.commits)
      })
      .catch((e: unknown) => live && setError(errText(e)))
    return () => {
      live = false
    }
  }, [client, sessionId, open])
  const show = (path: string, staged: boolean) => {
    if (!cwd) return
    client.call('git.diff', { cwd, path, staged }).then((d) => setDiff({ path, patch: d.patch }), (e: unknown) => setError(errText(e)))
  }
  const changes = status ? [...status.staged.map((c) => ({ ...c, staged: true })), ...status.unstaged.map((c) => ({ ...c, staged: false }))] : []
  return (
    <details className="git" onToggle={(e) => setOpen((e.target as HTMLDetailsElement).open)}>
      <summary>Git</summary>
      {error && <p className="zd-muted">{error}</p>}
      {status && (
        <div>
          <p>
            Branch <code>{status.branch ?? '(detached)'}</code>
            {status.ahead ? `, ${status.ahead} ahead` : ''}
            {status.behind ? `, ${status.behind} behind` : ''}
          </p>
          {changes.length === 0 && status.untracked.length === 0 && <p className="zd-muted">No changes: the working tree is clean.</p>}
          <ul aria-label="Changed files">
            {changes.map((c) => (
              <li key={`${c.staged}:${c.path}`}>
                <button type="button" className="zd-session" onClick={() => show(c.path, c.staged)}>
                  {c.kind} {c.path}
                  {c.staged ? ' (staged)' : ''}
                </button>
              </li>
            ))}
            {status.untracked.map((p) => (
              <li key={`u:${p}`}>untracked {p}</li>
            ))}
          </ul>
          {diff && <DiffView diff={diff.patch || '(no changes)'} label={`Diff of ${diff.path}`} />}
          <h2 className="zd-dialog-title">Log</h2>
          <ol aria-label="Commits">
            {log.map((c) => (
              <li key={c.sha} title={c.subject}>
                <code>{c.sha.slice(0, 8)}</code> {c.subject}
              </li>
            ))}
          </ol>
        </div>
      )}
    </details>
  )
}

/** The usage page: usage.summary's totals by day and by model. */
export function UsagePage(): ReactNode {
  const client = useClient()
  const [usage, setUsage] = useState<UsageSummaryResult>()
  const [error, setError] = useState<string>()
  useEffect(() => {
    client.call('usage.summary', { days: 30 }).then(setUsage, (e: unknown) => setError(errText(e)))
  }, [client])
  const table = (caption: string, rows: UsageSummaryResult['days']) => (
    <table className="usage">
      <caption>{caption}</caption>
      <thead>
        <tr>
          <th scope="col">{caption === 'By day' ? 'Day' : 'Model'}</th>
          <th scope="col">Tokens in</th>
          <th scope="col">Tokens out</th>
          <th scope="col">Runs</th>
          <th scope="col">Sessions</th>
        </tr>
      </thead>
      <tbody>
        {rows.map((r) => (
          <tr key={r.key}>
            <th scope="row">{r.key}</th>
            <td>{r.tokensIn}</td>
            <td>{r.tokensOut}</td>
            <td>{r.runs}</td>
            <td>{r.sessions}</td>
          </tr>
        ))}
      </tbody>
    </table>
  )
  return (
    <div className="usage-page">
      <h1>Usage</h1>
      {error && <p className="zd-error">{error}</p>}
      {usage && (
        <>
          <p>
            Last 30 days ({usage.timeZone}): {usage.total.tokensIn} tokens in, {usage.total.tokensOut} tokens out, {usage.total.runs} runs.
          </p>
          {table('By day', usage.days)}
          {table('By model', usage.models)}
        </>
      )}
    </div>
  )
}
