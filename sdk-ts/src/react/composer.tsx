// <HostComposer sessionId>: the message box (issue 24 sections 1 and 5): a textbox "Message", Enter
// sends, Shift+Enter breaks the line, Esc stops the run; "Send" and, while a run streams, "Stop".
// On a server host the draft is saved as the user types (drafts.set, at most every 300 ms) and
// follows draft:changed from other tabs, and a model picker lists models.list and applies the pick
// with sessions.setModel. Completions (completions.tsx): `/` commands, `@` mentions, `#` sessions,
// and ArrowUp in an empty box for the project's earlier prompts.
import { useCallback, useEffect, useRef, useState, type KeyboardEvent, type ReactNode } from 'react'
import type { ModelInfo, WireSignal } from '../protocol.js'
import { AttachmentChips, useAttachments } from './attachments.js'
import { useComposerCompletions } from './completions.js'
import { useChat } from './context.js'
import { useSessionRunning, useStore } from './index.js'
import type { ConnectionState } from '../client/client.js'

const closed: ConnectionState = { status: 'closed' }
const noConnection = { get: () => closed, subscribe: () => () => {} }

/** Props of HostComposer. */
export interface HostComposerProps {
  sessionId: string
  placeholder?: string
  /** Called with a send's failure (the text stays in the box). */
  onError?: (error: Error) => void
}

const DRAFT_DELAY_MS = 300

/** The composer of one session. */
export function HostComposer(props: HostComposerProps): ReactNode {
  const chat = useChat()
  const { host, client } = chat
  const running = useSessionRunning(props.sessionId)
  const [text, setText] = useState('')
  const [error, setError] = useState<string>()
  const [models, setModels] = useState<readonly ModelInfo[]>([])
  const [model, setModel] = useState('')
  const [picking, setPicking] = useState(false)
  const files = useAttachments()
  const [cwd, setCwd] = useState<string>()
  const timer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined)
  const conn = useStore(client?.connection ?? noConnection)
  const open = conn.status === 'open'
  const sync = open && client !== undefined && client.offers('drafts.set')

  // Load the session's draft, and follow other tabs' edits of it.
  useEffect(() => {
    setText('')
    setError(undefined)
    if (!client || !sync) return
    let live = true
    client.call('drafts.get', { sessionId: props.sessionId }).then(
      (d) => live && setText((cur) => (cur === '' ? d.text : cur)),
      () => {},
    )
    const off = client.onSignal((s: WireSignal) => {
      if (s.kind === 'draft:changed' && s.sessionId === props.sessionId) setText(s.text)
    })
    return () => {
      live = false
      off()
      clearTimeout(timer.current)
    }
  }, [client, sync, props.sessionId])

  useEffect(() => {
    if (!open || !client || !client.offers('models.list')) return
    let live = true
    client.call('models.list', {}).then(
      (r) => {
        if (!live) return
        setModels(r.models)
        setModel((m) => m || r.default)
      },
      () => {},
    )
    return () => {
      live = false
    }
  }, [client, open])

  // The picker shows the session's own model when it has one.
  useEffect(() => {
    if (!open || !client || !client.offers('sessions.get')) return
    let live = true
    client.call('sessions.get', { sessionId: props.sessionId }).then(
      (s) => {
        if (!live) return
        setCwd(s.cwd)
        if (s.model !== undefined && s.model !== '') setModel(s.model)
      },
      () => {},
    )
    return () => {
      live = false
    }
  }, [client, open, props.sessionId])

  const saveDraft = useCallback(
    (value: string) => {
      if (!client || !sync) return
      clearTimeout(timer.current)
      const sessionId = props.sessionId
      timer.current = setTimeout(() => {
        const call = value === '' ? client.call('drafts.clear', { sessionId }) : client.call('drafts.set', { sessionId, text: value })
        call.catch(() => {})
      }, DRAFT_DELAY_MS)
    },
    [client, sync, props.sessionId],
  )

  const completions = useComposerCompletions({
    client,
    cwd,
    textarea: chat.composer,
    setText: (t) => {
      setText(t)
      saveDraft(t)
    },
  })

  const send = () => {
    const prompt = text
    if (prompt.trim() === '' || picking) return
    setText('')
    setError(undefined)
    clearTimeout(timer.current)
    if (client && sync) client.call('drafts.clear', { sessionId: props.sessionId }).catch(() => {})
    const attachments = files.attachments.map(({ name, mediaType, data }) => ({ name, mediaType, data }))
    const composed = completions.compose(prompt)
    completions.clear()
    const sessionId = props.sessionId
    const sent =
      client && (attachments.length > 0 || composed.command !== undefined || composed.mentions !== undefined)
        ? host.open(sessionId).then(() => client.call('chat.send', { sessionId, ...composed, ...(attachments.length > 0 ? { attachments } : {}) }))
        : host.send(sessionId, prompt)
    sent.then(() => attachments.length > 0 && files.clear()).catch((e: unknown) => {
      const err = e instanceof Error ? e : new Error(String(e))
      setText((cur) => (cur === '' ? prompt : cur))
      setError(err.message)
      props.onError?.(err)
    })
  }
  const stop = () => {
    host.cancel(props.sessionId).catch((e: unknown) => setError(e instanceof Error ? e.message : String(e)))
  }

  const onKeyDown = (e: KeyboardEvent<HTMLTextAreaElement>) => {
    if (completions.onKeyDown(e)) return
    if (e.key === 'Enter' && !e.shiftKey && !e.nativeEvent.isComposing) {
      e.preventDefault()
      send()
    } else if (e.key === 'Escape' && running) {
      e.preventDefault()
      stop()
    }
  }

  // Sending waits until the pick is applied, so the next prompt runs on the picked model.
  const pick = (id: string) => {
    if (!client) return
    setModel(id)
    setPicking(true)
    client
      .call('sessions.setModel', { sessionId: props.sessionId, model: id })
      .catch((e: unknown) => setError(e instanceof Error ? e.message : String(e)))
      .finally(() => setPicking(false))
  }

  return (
    <form
      className="zd-composer"
      onDrop={files.onDrop}
      onDragOver={files.onDragOver}
      onSubmit={(e) => {
        e.preventDefault()
        send()
      }}
    >
      <AttachmentChips state={files} />
      {completions.popup}
      <textarea
        ref={chat.composer}
        onPaste={files.onPaste}
        className="zd-input"
        aria-label="Message"
        placeholder={props.placeholder ?? 'Message (Enter sends, Shift+Enter for a new line, Esc stops)'}
        rows={3}
        value={text}
        onChange={(e) => {
          setText(e.target.value)
          saveDraft(e.target.value)
          completions.onInput(e.target.value, e.target.selectionStart)
        }}
        {...completions.inputProps}
        onKeyDown={onKeyDown}
      />
      <div className="zd-composer-bar">
        {models.length > 0 && (
          <label className="zd-model">
            Model{' '}
            <select value={model} onChange={(e) => pick(e.target.value)}>
              {models.map((m) => (
                <option key={m.id} value={m.id}>
                  {m.id}
                </option>
              ))}
            </select>
          </label>
        )}
        {error && (
          <span className="zd-error" role="alert">
            {error}
          </span>
        )}
        <span className="zd-spacer" />
        {running && (
          <button type="button" className="zd-button zd-danger" onClick={stop}>
            Stop
          </button>
        )}
        <button type="submit" className="zd-button zd-primary" disabled={text.trim() === '' || picking}>
          Send
        </button>
      </div>
    </form>
  )
}
