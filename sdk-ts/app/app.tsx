// The web app (issue 24 section 2): pairing, the session list, a session view built from the SDK's
// components, the connection's state, approval mode and sandbox policy, a git panel, usage, presence.
import { useEffect, useState, type FormEvent, type ReactNode } from 'react'
import { createServerApprovalsHost, createServerHost, type ApprovalsHost, type ServerHost } from '../src/adapters/index.js'
import type { ConnectionState } from '../src/client/client.js'
import { ChatProvider, HostComposer, HostInteractions, HostPlan, HostTranscript, SessionList, useChat, useStore } from '../src/react/index.js'
import { forgetAuth, loadAuth, pair, saveAuth, serverUrl, type Auth } from './auth.js'
import { AgentPanel } from './agents.js'
import { ArchivedSessions } from './archived.js'
import { McpPage } from './mcp.js'
import { GitPanel, SessionSettings, UsagePage } from './panels.js'
import { saveTheme, useSharedTheme, type Theme } from './prefs.js'
import { SessionSearch } from './search.js'
import { TerminalPanel } from './terminals.js'
import { SpaceSwitch, useSharedSidebar } from './sidebar.js'
import { useRoute } from './route.js'

function loadTheme(): Theme {
  const t = localStorage.getItem('zidane.theme')
  return t === 'light' || t === 'dark' ? t : 'system'
}

/** The app: the pairing form until a token is kept, then the workspace. */
export function App(): ReactNode {
  const [auth, setAuth] = useState<Auth | null>(() => loadAuth())
  const [refused, setRefused] = useState(false)
  const [theme, setTheme] = useState<Theme>(loadTheme)
  const changeTheme = (t: Theme) => {
    localStorage.setItem('zidane.theme', t)
    setTheme(t)
  }
  if (auth === null)
    return (
      <Pairing
        theme={theme}
        refused={refused}
        onPaired={(a) => {
          saveAuth(a)
          setRefused(false)
          setAuth(a)
        }}
      />
    )
  return (
    <Workspace
      key={auth.token}
      auth={auth}
      theme={theme}
      onTheme={changeTheme}
      onSignedOut={() => {
        forgetAuth()
        setAuth(null)
      }}
      onRefused={() => {
        // The kept token is refused (revoked, expired, or another server's): nothing here works
        // without one, so the page goes back to pairing and says why.
        forgetAuth()
        setRefused(true)
        setAuth(null)
      }}
    />
  )
}

function Pairing({ onPaired, theme, refused }: { onPaired: (a: Auth) => void; theme: Theme; refused: boolean }): ReactNode {
  const [code, setCode] = useState('')
  const [error, setError] = useState<string>()
  const [busy, setBusy] = useState(false)
  const submit = (e: FormEvent) => {
    e.preventDefault()
    setBusy(true)
    setError(undefined)
    pair(code, `web-${navigator.platform || 'browser'}-${Math.random().toString(36).slice(2, 8)}`).then(onPaired, (err: unknown) => {
      setError(err instanceof Error ? err.message : String(err))
      setBusy(false)
    })
  }
  return (
    <div className="zd app-pairing" data-theme={theme}>
      <main className="pairing">
        <h1>Pair this browser</h1>
        {refused && (
          <p className="zd-error" role="status" aria-label="Connection">
            The server refused this browser's token: it was revoked, it expired, or it is another server's. Pair again.
          </p>
        )}
        <p>
          Run <code>zidane-server pair</code> on the server's machine and enter the code it prints.
        </p>
        <form onSubmit={submit}>
          <label>
            Pairing code
            <input className="zd-input" aria-label="Pairing code" value={code} onChange={(e) => setCode(e.target.value)} autoComplete="off" autoFocus placeholder="XXXX-XXXX" />
          </label>
          <button type="submit" className="zd-button zd-primary" disabled={busy || code.trim() === ''}>
            Pair
          </button>
        </form>
        {error && (
          <p className="zd-error" role="alert">
            {error}
          </p>
        )}
      </main>
    </div>
  )
}

interface Hosts {
  host: ServerHost
  approvals: ApprovalsHost
}

function Workspace(props: { auth: Auth; theme: Theme; onTheme: (t: Theme) => void; onSignedOut: () => void; onRefused: () => void }): ReactNode {
  const [hosts, setHosts] = useState<Hosts | null>(null)
  useEffect(() => {
    const host = createServerHost({ url: serverUrl(), token: props.auth.token, appVersion: 'web-app' })
    const approvals = createServerApprovalsHost({ client: host.client })
    setHosts({ host, approvals })
    return () => {
      approvals.close()
      host.close()
    }
  }, [props.auth.token])
  if (hosts === null) return null
  return <Connected hosts={hosts} {...props} />
}

/** The workspace once its hosts exist: back to pairing as soon as the server refuses the token. */
function Connected(props: { hosts: Hosts; auth: Auth; theme: Theme; onTheme: (t: Theme) => void; onSignedOut: () => void; onRefused: () => void }): ReactNode {
  const { hosts, onRefused } = props
  const status = useStore(hosts.host.connection).status
  useEffect(() => {
    if (status === 'unauthorized') onRefused()
  }, [status, onRefused])
  return (
    <ChatProvider host={hosts.host} approvals={hosts.approvals} theme={props.theme} className="app">
      <Shell host={hosts.host} auth={props.auth} theme={props.theme} onTheme={props.onTheme} onSignedOut={props.onSignedOut} />
    </ChatProvider>
  )
}

function connectionText(c: ConnectionState, now: number, since: number): string {
  switch (c.status) {
    case 'open':
      return 'Connected'
    case 'connecting':
      return c.attempt > 0 ? 'Reconnecting…' : 'Connecting…'
    case 'retrying': {
      const at = since + c.delayMs
      const secs = Math.max(0, Math.ceil((at - now) / 1000))
      return `Reconnecting: next try at ${new Date(at).toLocaleTimeString()} (in ${secs} s)`
    }
    case 'unauthorized':
      return 'Token refused: pair this browser again'
    case 'forbidden':
      return `Refused: ${c.error.message}`
    case 'versionMismatch':
      return `This app and the server speak different protocol versions: ${c.error.message}`
    case 'hostChanged':
      return 'Another server answers at this address'
    case 'closed':
      return 'Disconnected'
  }
}

function ConnectionStatus({ host }: { host: ServerHost }): ReactNode {
  const c = useStore(host.connection)
  const [since, setSince] = useState(() => Date.now())
  const [now, setNow] = useState(() => Date.now())
  useEffect(() => setSince(Date.now()), [c])
  useEffect(() => {
    if (c.status !== 'retrying') return
    const t = setInterval(() => setNow(Date.now()), 1000)
    return () => clearInterval(t)
  }, [c])
  return (
    <div className="connection">
      <span role="status" aria-label="Connection" className={`conn conn-${c.status}`}>
        {connectionText(c, now, since)}
      </span>
      {c.status === 'retrying' && (
        <button type="button" className="zd-button" onClick={() => host.client.reconnect()}>
          Retry now
        </button>
      )}
    </div>
  )
}

function Shell(props: { host: ServerHost; auth: Auth; theme: Theme; onTheme: (t: Theme) => void; onSignedOut: () => void }): ReactNode {
  const { host } = props
  const [route, go] = useRoute()
  const [error, setError] = useState<string>()
  const activeId = route.view === 'session' ? route.sessionId : undefined
  // Narrow windows (app.css): the sidebar folds behind the header's "Sessions" button, open on the
  // home view and closed when a view opens.
  const [navOpen, setNavOpen] = useState(route.view === 'home')
  useEffect(() => setNavOpen(route.view === 'home'), [route.view, activeId])
  useSharedTheme(host.client, props.onTheme)
  const sidebar = useSharedSidebar(host.client)
  const { rememberSession, loaded: sidebarLoaded } = sidebar
  useEffect(() => {
    if (activeId !== undefined && sidebarLoaded) rememberSession(activeId)
  }, [activeId, sidebarLoaded, rememberSession])

  // Presence: which session this window shows and whether it has focus.
  useEffect(() => {
    const send = () => host.client.setPresence(activeId ?? null, document.visibilityState === 'visible' && document.hasFocus())
    send()
    addEventListener('focus', send)
    addEventListener('blur', send)
    document.addEventListener('visibilitychange', send)
    return () => {
      removeEventListener('focus', send)
      removeEventListener('blur', send)
      document.removeEventListener('visibilitychange', send)
    }
  }, [host, activeId])

  // Titles and states change elsewhere (renames, other windows): read the list again.
  useEffect(() => {
    let t: ReturnType<typeof setTimeout> | undefined
    const off = host.client.onSignal((s) => {
      if (s.kind !== 'session:updated') return
      clearTimeout(t)
      t = setTimeout(() => void host.refresh().catch(() => {}), 150)
    })
    return () => {
      off()
      clearTimeout(t)
    }
  }, [host])

  const create = () => {
    setError(undefined)
    host.createSession({}).then(
      (s) => go({ view: 'session', sessionId: s.id }),
      (e: unknown) => setError(e instanceof Error ? e.message : String(e)),
    )
  }

  const signOut = async () => {
    // tokens.revokeSelf when the server offers it; the token is forgotten either way.
    if (host.client.offers('tokens.revokeSelf')) await host.client.call('tokens.revokeSelf', {}).catch(() => {})
    props.onSignedOut()
  }

  return (
    <div className="shell">
      <header className="header">
        <a
          className="brand"
          href="/"
          onClick={(e) => {
            e.preventDefault()
            go({ view: 'home' })
          }}
        >
          zidane
        </a>
        <ConnectionStatus host={host} />
        <button type="button" className="zd-button nav-toggle" aria-expanded={navOpen} aria-controls="sidebar" onClick={() => setNavOpen(!navOpen)}>
          Sessions
        </button>
        <span className="zd-spacer" />
        <a
          href="/usage"
          aria-current={route.view === 'usage' ? 'page' : undefined}
          onClick={(e) => {
            e.preventDefault()
            go({ view: 'usage' })
          }}
        >
          Usage
        </a>
        <a
          href="/mcp"
          aria-current={route.view === 'mcp' ? 'page' : undefined}
          onClick={(e) => {
            e.preventDefault()
            go({ view: 'mcp' })
          }}
        >
          MCP
        </a>
        <label className="theme">
          Theme{' '}
          <select value={props.theme} onChange={(e) => {
              const t = e.target.value as Theme
              props.onTheme(t)
              saveTheme(host.client, t).catch((err: unknown) => setError(err instanceof Error ? err.message : String(err)))
            }}
          >
            <option value="system">System</option>
            <option value="light">Light</option>
            <option value="dark">Dark</option>
          </select>
        </label>
        <span className="zd-badge">{props.auth.scope}</span>
        <button type="button" className="zd-button" onClick={() => void signOut()}>
          Sign out
        </button>
      </header>
      <div className="body">
        <aside id="sidebar" className={navOpen ? 'sidebar open' : 'sidebar'}>
          <SessionSearch onOpen={(sessionId, turnId) => go(turnId ? { view: 'session', sessionId, turnId } : { view: 'session', sessionId })} />
          <SpaceSwitch
            sidebar={sidebar}
            onSwitch={(space) => {
              // Back in a space: reopen the conversation last open there.
              const last = sidebar.views[space]?.session
              if (last !== undefined && host.sessions.get().some((s) => s.id === last)) go({ view: 'session', sessionId: last })
            }}
          />
          {sidebar.space === 'archived' ? (
            <ArchivedSessions host={host} />
          ) : (
            <SessionList
              activeId={activeId}
              onSelect={(id) => go({ view: 'session', sessionId: id })}
              onNewSession={create}
              filter={(s) => !s.parentSessionId && (sidebar.space !== 'pinned' || sidebar.pinned.has(s.id))}
              pinned={sidebar.pinned}
              onTogglePin={sidebar.setPinned}
            />
          )}
          {sidebar.error && (
            <p className="zd-error" role="alert">
              {sidebar.error}
            </p>
          )}
          {error && (
            <p className="zd-error" role="alert">
              {error}
            </p>
          )}
        </aside>
        <main className="main">
          {route.view === 'session' ? (
            <SessionView key={route.sessionId} sessionId={route.sessionId} turnId={route.turnId} onOpen={(id) => go({ view: 'session', sessionId: id })} onGone={() => go({ view: 'home' })} />
          ) : route.view === 'usage' ? (
            <UsagePage />
          ) : route.view === 'mcp' ? (
            <McpPage />
          ) : (
            <div className="empty">
              <h1>No session open</h1>
              <p>Pick a session on the left, or start one with “New session”.</p>
            </div>
          )}
        </main>
      </div>
    </div>
  )
}

function SessionView({ sessionId, turnId, onOpen, onGone }: { sessionId: string; turnId: string | undefined; onOpen: (sessionId: string) => void; onGone: () => void }): ReactNode {
  const chat = useChat()
  const host = chat.host as ServerHost
  const sessions = useStore(host.sessions)
  const session = sessions.find((s) => s.id === sessionId)
  const [renaming, setRenaming] = useState(false)
  const [title, setTitle] = useState('')
  const [confirmDelete, setConfirmDelete] = useState(false)
  const [error, setError] = useState<string>()
  const fail = (e: unknown) => setError(e instanceof Error ? e.message : String(e))
  const rename = (e: FormEvent) => {
    e.preventDefault()
    host.client.call('sessions.rename', { sessionId, title }).then(() => {
      setRenaming(false)
      return host.refresh()
    }, fail)
  }
  return (
    <div className="session">
      <div className="session-head">
        {renaming ? (
          <form onSubmit={rename} className="rename">
            <input className="zd-input" aria-label="Session title" value={title} onChange={(e) => setTitle(e.target.value)} autoFocus />
            <button type="submit" className="zd-button zd-primary">
              Save
            </button>
            <button type="button" className="zd-button" onClick={() => setRenaming(false)}>
              Cancel
            </button>
          </form>
        ) : (
          <h1 className="session-title">{session?.title || 'Untitled'}</h1>
        )}
        <span className="zd-spacer" />
        {!renaming && (
          <button
            type="button"
            className="zd-button"
            onClick={() => {
              setTitle(session?.title ?? '')
              setRenaming(true)
            }}
          >
            Rename
          </button>
        )}
        <button type="button" className="zd-button" onClick={() => host.client.call('sessions.archive', { sessionId, archived: true }).then(() => host.refresh()).then(onGone, fail)}>
          Archive
        </button>
        <button
          type="button"
          className="zd-button zd-danger"
          onClick={() => {
            if (!confirmDelete) return setConfirmDelete(true)
            host.client.call('sessions.delete', { sessionId }).then(() => host.refresh()).then(onGone, fail)
          }}
        >
          {confirmDelete ? 'Confirm delete' : 'Delete'}
        </button>
      </div>
      {error && (
        <p className="zd-error" role="alert">
          {error}
        </p>
      )}
      <SessionSettings sessionId={sessionId} />
      <AgentPanel sessionId={sessionId} />
      {session?.parentSessionId && (
        <p className="zd-muted">
          A subagent's child session.{' '}
          <button type="button" className="zd-button" onClick={() => onOpen(session.parentSessionId!)}>
            Open parent session
          </button>
        </p>
      )}
      <HostTranscript sessionId={sessionId} onOpenSession={onOpen} {...(turnId ? { focusTurnId: turnId } : {})} />
      <HostPlan sessionId={sessionId} />
      <HostInteractions sessionId={sessionId} />
      <HostComposer sessionId={sessionId} />
      <GitPanel sessionId={sessionId} />
      <TerminalPanel sessionId={sessionId} />
    </div>
  )
}
