// The MCP screens of the web app (issue 23): the catalog (catalog.mcps rows: status, sign-in
// state, tools as last listed, last Test, stderr tail, and the config files' errors), adding a
// stdio or HTTP server (mcp.upsert), Test (mcp.test), remove (mcp.remove) and Sign in in browser
// mode (auth.oauth.begin with redirectUri <origin>/zidane/oauth/callback, the url opened, then
// auth.oauth.complete). Admin-only controls (the user file, scope host, HTTP servers, sign-in)
// show only when the token may call them (ipc.hello's methods).
import { useCallback, useEffect, useState, type FormEvent, type ReactNode } from 'react'
import type { ServerHost } from '../src/adapters/index.js'
import type { CatalogMcpsResult, McpRow, McpServerConfig, McpTarget } from '../src/protocol.js'
import { useChat, useStore } from '../src/react/index.js'

const errText = (e: unknown) => (e instanceof Error ? e.message : String(e))

/** The browser-mode callback the server takes the code at (seed "auth"). */
export function oauthRedirect(): string {
  return `${location.origin}/zidane/oauth/callback`
}

/** "KEY=VALUE" (or "Key: Value") lines as a record; blank lines are skipped. */
export function parsePairs(text: string, sep: '=' | ':'): Record<string, string> | undefined {
  const out: Record<string, string> = {}
  for (const line of text.split('\n')) {
    const l = line.trim()
    if (!l) continue
    const i = l.indexOf(sep)
    if (i <= 0) throw new Error(`"${l}" is not ${sep === '=' ? 'KEY=VALUE' : 'Name: value'}`)
    out[l.slice(0, i).trim()] = l.slice(i + 1).trim()
  }
  return Object.keys(out).length ? out : undefined
}

/** The MCP page: the catalog of the chosen project and the form that adds a server. */
export function McpPage(): ReactNode {
  const client = (useChat().host as ServerHost).client
  // The token's scope, from ipc.hello's methods: known once connected (and again after a reconnect).
  const open = useStore(client.connection).status === 'open'
  const admin = open && client.offers('auth.oauth.begin')
  const [roots, setRoots] = useState<string[]>([])
  const [cwd, setCwd] = useState<string>()
  const [cat, setCat] = useState<CatalogMcpsResult>()
  const [error, setError] = useState<string>()
  const [busy, setBusy] = useState<Record<string, string>>({})

  useEffect(() => {
    if (!open) return
    client.call('fs.list', {}).then(
      (r) => {
        const rs = r.folders.map((f) => f.path)
        setRoots(rs)
        setCwd((c) => c ?? rs[0])
      },
      (e: unknown) => setError(errText(e)),
    )
  }, [client, open])

  const load = useCallback(() => {
    if (!open) return
    client.call('catalog.mcps', cwd ? { cwd } : {}).then(setCat, (e: unknown) => setError(errText(e)))
  }, [client, cwd, open])
  useEffect(load, [load])

  const act = (name: string, what: string, p: Promise<unknown>) => {
    setError(undefined)
    setBusy((b) => ({ ...b, [name]: what }))
    p.catch((e: unknown) => setError(`${name}: ${errText(e)}`)).finally(() => {
      setBusy((b) => {
        const n = { ...b }
        delete n[name]
        return n
      })
      load()
    })
  }
  const test = (row: McpRow) => act(row.name, 'Testing…', client.call('mcp.test', { name: row.name, ...(cwd ? { cwd } : {}) }))
  const remove = (row: McpRow) =>
    act(row.name, 'Removing…', client.call('mcp.remove', { name: row.name, target: row.origin === 'user' ? 'user' : 'project', ...(cwd ? { cwd } : {}) }))
  const signIn = (row: McpRow) => {
    // Opened now, inside the click, so the browser lets the tab open; it is pointed at the url once known.
    const tab = window.open('about:blank', '_blank')
    act(
      row.name,
      'Signing in…',
      (async () => {
        const begun = await client.call('auth.oauth.begin', { server: row.name, redirectUri: oauthRedirect() })
        if (begun.mode === 'browser') {
          if (tab) tab.location.href = begun.url
          else window.open(begun.url, '_blank')
          await client.call('auth.oauth.complete', { flowId: begun.flowId })
          return
        }
        tab?.close()
        const pasted = window.prompt(`This server's client pins its redirect: open\n${begun.url}\nsign in, then paste the address of the page that failed to load.`)
        if (pasted) await client.call('auth.oauth.complete', { flowId: begun.flowId, input: pasted })
      })(),
    )
  }

  return (
    <div className="mcp">
      <h1>MCP servers</h1>
      {roots.length > 1 && (
        <label>
          Project{' '}
          <select value={cwd} onChange={(e) => setCwd(e.target.value)}>
            {roots.map((r) => (
              <option key={r} value={r}>
                {r}
              </option>
            ))}
          </select>
        </label>
      )}
      {error && (
        <p className="zd-error" role="alert">
          {error}
        </p>
      )}
      {cat && cat.errors.length > 0 && (
        <section aria-label="Config errors">
          <h2>Config errors</h2>
          <ul>
            {cat.errors.map((e, i) => (
              <li key={i} className="zd-error">
                <code>{e.file}</code>
                {e.server ? ` (${e.server})` : ''}: {e.message}
              </li>
            ))}
          </ul>
        </section>
      )}
      <ul className="mcp-rows" aria-label="MCP servers">
        {cat?.servers.map((row) => (
          <McpRowView
            key={row.name}
            row={row}
            admin={admin}
            busy={busy[row.name]}
            onTest={() => test(row)}
            onRemove={() => remove(row)}
            onSignIn={() => signIn(row)}
          />
        ))}
        {cat && cat.servers.length === 0 && <li className="zd-muted">No MCP server is configured here.</li>}
      </ul>
      <AddServer admin={admin} cwd={cwd} onAdded={load} />
    </div>
  )
}

/** How a row's sign-in state reads (an unknown future state shows as it is sent). */
const signInText: Record<string, string> = { none: 'no sign-in', unknown: 'not signed in', signedIn: 'signed in' }

function McpRowView(props: { row: McpRow; admin: boolean; busy: string | undefined; onTest: () => void; onRemove: () => void; onSignIn: () => void }): ReactNode {
  const { row, admin } = props
  const canRemove = row.origin !== 'user' || admin
  return (
    <li className="mcp-row" aria-label={row.name}>
      <div className="mcp-row-head">
        <strong>{row.name}</strong> <span className="zd-badge">{row.status}</span>{' '}
        <span className="zd-muted">
          {row.origin} · {row.transport}
          {row.scope ? ` · scope ${row.scope}` : ''}
          {row.transport === 'stdio' ? (row.shared ? ' · shared' : ' · per session') : ''}
          {row.approved === false ? ' · not approved' : ''}
          {row.transport === 'http' ? ` · ${signInText[row.signIn] ?? `sign-in: ${row.signIn}`}` : ''}
          {row.protocolVersion ? ` · ${row.protocolVersion}` : ''}
        </span>
      </div>
      <code className="mcp-target">{row.command ?? row.url}</code>
      <div className="mcp-actions">
        <button type="button" className="zd-button" disabled={!!props.busy} onClick={props.onTest}>
          Test
        </button>
        {row.transport === 'http' && admin && (
          <button type="button" className="zd-button" disabled={!!props.busy} onClick={props.onSignIn}>
            Sign in
          </button>
        )}
        {canRemove && (
          <button type="button" className="zd-button" disabled={!!props.busy} onClick={props.onRemove}>
            Remove
          </button>
        )}
        {props.busy && <span className="zd-muted">{props.busy}</span>}
      </div>
      {row.lastTest && (
        <p className={row.lastTest.ok ? 'zd-muted' : 'zd-error'}>
          Last test: {row.lastTest.ok ? `ok, ${row.lastTest.tools.length} tools` : `failed: ${row.lastTest.error ?? ''}`} in {row.lastTest.durationMs} ms
        </p>
      )}
      {row.tools.length > 0 && (
        <ul className="mcp-tools" aria-label={`Tools of ${row.name}`}>
          {row.tools.map((t) => (
            <li key={t.agentName}>
              <code>{t.agentName}</code>
              {t.readOnlyHint ? <span className="zd-muted"> (read-only hint)</span> : null}
              {t.description ? <span className="zd-muted"> {t.description}</span> : null}
            </li>
          ))}
        </ul>
      )}
      {row.errors.map((e, i) => (
        <p key={i} className="zd-error">
          {e}
        </p>
      ))}
      {row.stderr && (
        <details>
          <summary>stderr</summary>
          <pre className="mcp-stderr">{row.stderr.slice(-4000)}</pre>
        </details>
      )}
    </li>
  )
}

function AddServer(props: { admin: boolean; cwd: string | undefined; onAdded: () => void }): ReactNode {
  const client = (useChat().host as ServerHost).client
  const { admin } = props
  const [name, setName] = useState('')
  const [kind, setKind] = useState<'stdio' | 'http'>('stdio')
  const [target, setTarget] = useState<McpTarget>('project')
  const [command, setCommand] = useState('')
  const [args, setArgs] = useState('')
  const [env, setEnv] = useState('')
  const [url, setUrl] = useState('')
  const [headers, setHeaders] = useState('')
  const [host, setHost] = useState(false)
  const [shared, setShared] = useState(true)
  const [error, setError] = useState<string>()
  const submit = (e: FormEvent) => {
    e.preventDefault()
    setError(undefined)
    let server: McpServerConfig
    try {
      if (kind === 'http') {
        const h = parsePairs(headers, ':')
        server = { type: 'http', url: url.trim(), ...(h ? { headers: h } : {}) }
      } else {
        const en = parsePairs(env, '=')
        server = {
          command: command.trim(),
          args: args.split('\n').map((a) => a.trim()).filter((a) => a !== ''),
          ...(en ? { env: en } : {}),
          ...(host ? { scope: 'host' } : {}),
          ...(shared ? {} : { shared: false }),
        }
      }
    } catch (err) {
      setError(errText(err))
      return
    }
    client.call('mcp.upsert', { name: name.trim(), target, ...(target === 'project' && props.cwd ? { cwd: props.cwd } : {}), server }).then(() => {
      setName('')
      props.onAdded()
    }, (err: unknown) => setError(errText(err)))
  }
  return (
    <form className="mcp-add" aria-label="Add an MCP server" onSubmit={submit}>
      <h2>Add a server</h2>
      <label>
        Name <input className="zd-input" value={name} onChange={(e) => setName(e.target.value)} required />
      </label>
      <label>
        Kind{' '}
        <select aria-label="Kind" value={kind} onChange={(e) => setKind(e.target.value as 'stdio' | 'http')}>
          <option value="stdio">stdio (a command)</option>
          {admin && <option value="http">HTTP (a URL)</option>}
        </select>
      </label>
      <label>
        File{' '}
        <select aria-label="File" value={target} onChange={(e) => setTarget(e.target.value)}>
          <option value="project">the project's .zidane/mcps.json</option>
          {admin && <option value="user">the server user's ~/.zidane/mcps.json</option>}
        </select>
      </label>
      {kind === 'stdio' ? (
        <>
          <label>
            Command <input className="zd-input" value={command} onChange={(e) => setCommand(e.target.value)} required />
          </label>
          <label>
            Arguments (one a line) <textarea className="zd-input" value={args} onChange={(e) => setArgs(e.target.value)} rows={2} />
          </label>
          <label>
            Environment (KEY=VALUE lines) <textarea className="zd-input" value={env} onChange={(e) => setEnv(e.target.value)} rows={2} />
          </label>
          <label className="mcp-check">
            <input type="checkbox" checked={shared} onChange={(e) => setShared(e.target.checked)} /> Shared by the project's sessions
          </label>
          {admin && (
            <label className="mcp-check">
              <input type="checkbox" checked={host} onChange={(e) => setHost(e.target.checked)} /> Run on the host, outside the sandbox (scope host)
            </label>
          )}
        </>
      ) : (
        <>
          <label>
            URL <input className="zd-input" type="url" value={url} onChange={(e) => setUrl(e.target.value)} required />
          </label>
          <label>
            Headers (Name: value lines) <textarea className="zd-input" value={headers} onChange={(e) => setHeaders(e.target.value)} rows={2} />
          </label>
        </>
      )}
      <button type="submit" className="zd-button zd-primary">
        Add
      </button>
      {error && (
        <p className="zd-error" role="alert">
          {error}
        </p>
      )}
    </form>
  )
}
