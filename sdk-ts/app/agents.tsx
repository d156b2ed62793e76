// The session's agent picker, its skills and the definition files that could not be used (issue 27
// item 6): agents.list for the session (built-ins build and plan, the project's and the server
// user's definitions), sessions.setAgent on a pick (it takes effect at the next run), skills.list of
// the session's folder, and every problem agents.list and skills.list report, listed in a
// collapsed details block whose summary counts them.
import { useEffect, useState, type ReactNode } from 'react'
import type { ServerHost } from '../src/adapters/index.js'
import type { AgentInfo, DefinitionProblem, SkillInfo } from '../src/protocol.js'
import { useChat, useStore } from '../src/react/index.js'

const errText = (e: unknown) => (e instanceof Error ? e.message : String(e))

interface Loaded {
  agents: readonly AgentInfo[]
  skills: readonly SkillInfo[]
  problems: readonly DefinitionProblem[]
}

/** The agent picker of one session, with the agent's details, the skills and the definition problems. */
export function AgentPanel({ sessionId }: { sessionId: string }): ReactNode {
  const client = (useChat().host as ServerHost).client
  const [agentId, setAgentId] = useState<string>()
  const [loaded, setLoaded] = useState<Loaded>()
  const [error, setError] = useState<string>()
  const [busy, setBusy] = useState(false)
  const [changed, setChanged] = useState<string>()
  // What the server offers is known once connected (a reload mounts this before that).
  const open = useStore(client.connection).status === 'open'

  useEffect(() => {
    if (!open || !client.offers('agents.list')) return
    let live = true
    const load = async () => {
      const s = await client.call('sessions.get', { sessionId })
      if (!live) return
      setAgentId(s.agentId)
      const [a, k] = await Promise.all([
        client.call('agents.list', { sessionId }),
        client.offers('skills.list') ? client.call('skills.list', { cwd: s.cwd }) : Promise.resolve({ skills: [], problems: [] }),
      ])
      if (!live) return
      const seen = new Set<string>()
      const problems = [...a.problems, ...k.problems].filter((p) => {
        const key = `${p.path}\n${p.message}`
        if (seen.has(key)) return false
        seen.add(key)
        return true
      })
      setLoaded({ agents: a.agents, skills: k.skills, problems })
    }
    load().catch((e: unknown) => live && setError(errText(e)))
    const off = client.onSignal((s) => {
      if (s.kind === 'session:updated' && s.sessionId === sessionId && s.session) setAgentId(s.session.agentId)
      // A definition file moved (this project's or the server user's): list again.
      else if (s.kind === 'agents:changed' || s.kind === 'skills:changed') load().catch((e: unknown) => live && setError(errText(e)))
    })
    return () => {
      live = false
      off()
    }
  }, [client, sessionId, open])

  if (!loaded || agentId === undefined) return error ? <p className="zd-error">{error}</p> : null
  const agent = loaded.agents.find((a) => a.id === agentId)
  const pick = (id: string) => {
    const was = agentId
    setAgentId(id)
    setBusy(true)
    setError(undefined)
    setChanged(undefined)
    client
      .call('sessions.setAgent', { sessionId, agentId: id })
      .then(() => setChanged(id))
      .catch((e: unknown) => {
        setAgentId(was)
        setError(errText(e))
      })
      .finally(() => setBusy(false))
  }
  const problemCount = loaded.problems.length + loaded.agents.reduce((n, a) => n + a.problems.length, 0)
  return (
    <div className="agents">
      <label>
        Agent{' '}
        <select value={agentId} disabled={busy} onChange={(e) => pick(e.target.value)} aria-describedby={agent?.description ? 'agent-description' : undefined}>
          {!agent && <option value={agentId}>{agentId}</option>}
          {loaded.agents.map((a) => (
            <option key={a.id} value={a.id}>
              {a.id}
              {a.origin === 'builtin' ? '' : ` (${a.origin})`}
            </option>
          ))}
        </select>
      </label>
      {agent?.description && (
        <span id="agent-description" className="zd-muted">
          {agent.description}
        </span>
      )}
      {changed === agentId && (
        <span className="zd-muted" role="status">
          {changed} runs this session's next prompt
        </span>
      )}
      {error && (
        <span className="zd-error" role="alert">
          {error}
        </span>
      )}
      <details className="agent-details">
        <summary>
          Agent details and skills ({loaded.skills.length === 1 ? '1 skill' : `${loaded.skills.length} skills`}
          {problemCount > 0 ? `, ${problemCount === 1 ? '1 definition problem' : `${problemCount} definition problems`}` : ''})
        </summary>
        {agent && (
          <dl>
            <dt>Tools</dt>
            <dd>{agent.allTools ? `all${agent.tools.length ? ` and ${agent.tools.join(', ')}` : ''}` : agent.tools.join(', ') || 'none'}</dd>
            {agent.model && (
              <>
                <dt>Model</dt>
                <dd>{agent.model}</dd>
              </>
            )}
            {agent.path && (
              <>
                <dt>File</dt>
                <dd>
                  <code>{agent.path}</code>
                </dd>
              </>
            )}
          </dl>
        )}
        <h2 className="zd-dialog-title">Skills</h2>
        {loaded.skills.length === 0 ? (
          <p className="zd-muted">No skills in this project or the server user's folders.</p>
        ) : (
          <ul aria-label="Skills">
            {loaded.skills.map((k) => (
              <li key={k.path}>
                <strong>{k.name}</strong> {k.description}
                {k.allowedTools && k.allowedTools.length > 0 && <span className="zd-muted"> (tools: {k.allowedTools.join(', ')})</span>}
              </li>
            ))}
          </ul>
        )}
        {problemCount > 0 && (
          <>
            <h2 className="zd-dialog-title">Definition problems</h2>
            <ul aria-label="Definition problems">
              {loaded.problems.map((p) => (
                <li key={`${p.path}\n${p.message}`}>
                  <code>{p.path}</code>: {p.message}
                </li>
              ))}
              {loaded.agents.flatMap((a) =>
                a.problems.map((m) => (
                  <li key={`${a.id}\n${m}`}>
                    agent <strong>{a.id}</strong>
                    {a.path ? (
                      <>
                        {' '}
                        (<code>{a.path}</code>)
                      </>
                    ) : null}
                    : {m}
                  </li>
                )),
              )}
            </ul>
          </>
        )}
      </details>
    </div>
  )
}
