// createServerApprovalsHost: the tool approvals of zidane-server (client seed, "Limits": ApprovalsHost),
// on the generated approvals and safelist methods and the approval:request / approval:resolved
// signals. A server that does not offer them answers MethodNotFound: `offered` turns false.
import { createServerClient, type ServerClient, type ServerClientOptions } from '../client/client.js'
import { NotOfferedError } from '../client/errors.js'
import type { ApprovalDecision, ApprovalMode, ApprovalRequest, ApprovalsAnswerResult, SafelistEntry, WireSignal } from '../protocol.js'
import { createStore, type ReadableStore } from '../store.js'

/** The approvals of one server. */
export interface ApprovalsHost {
  /** Pending approval requests, oldest first, across sessions. */
  readonly approvals: ReadableStore<readonly ApprovalRequest[]>
  /** Whether the server offers approvals (undefined until known). */
  readonly offered: ReadableStore<boolean | undefined>
  /** Answers a pending request: allow once, deny, or always (saved to the safelist). */
  answer(requestId: string, decision: ApprovalDecision): Promise<ApprovalsAnswerResult>
  /** The "Always allow" entries, of one project or all. */
  safelist(projectRoot?: string): Promise<readonly SafelistEntry[]>
  /** Removes a safelist entry; resolves with whether one was removed. */
  revoke(entryId: string): Promise<boolean>
  /** A session's approval mode. */
  mode(sessionId: string): Promise<ApprovalMode>
  setMode(sessionId: string, mode: ApprovalMode): Promise<void>
  /** Reads the pending requests again (done at every (re)connect). */
  refresh(): Promise<void>
  close(): void
}

/** Creates the approvals host on a client (shared with createServerHost) or its own. */
export function createServerApprovalsHost(options: Omit<ServerClientOptions, 'clock'> | { client: ServerClient }): ApprovalsHost {
  const owned = !('client' in options)
  const client = 'client' in options ? options.client : createServerClient(options)
  const approvals = createStore<readonly ApprovalRequest[]>(Object.freeze([]))
  const offered = createStore<boolean | undefined>(undefined)

  const remove = (requestId: string) => {
    const list = approvals.get()
    if (list.some((a) => a.requestId === requestId)) approvals.set(Object.freeze(list.filter((a) => a.requestId !== requestId)))
  }

  const off = client.onSignal((s: WireSignal) => {
    if (s.kind === 'approval:request') {
      const r = s.request
      approvals.set(Object.freeze([...approvals.get().filter((a) => a.requestId !== r.requestId), r]))
    } else if (s.kind === 'approval:resolved') {
      remove(s.requestId)
    }
  })
  let wasOpen = false
  const offState = client.connection.subscribe((st) => {
    if (st.status === 'open' && !wasOpen) void host.refresh().catch(() => {})
    wasOpen = st.status === 'open'
  })

  const host: ApprovalsHost = {
    approvals: { get: approvals.get, subscribe: approvals.subscribe },
    offered: { get: offered.get, subscribe: offered.subscribe },
    async refresh() {
      try {
        const res = await client.call('approvals.list', {})
        offered.set(true)
        approvals.set(Object.freeze([...res.requests].sort((a, b) => a.createdAt - b.createdAt)))
      } catch (err) {
        if (err instanceof NotOfferedError) {
          offered.set(false)
          return
        }
        throw err
      }
    },
    async answer(requestId, decision) {
      const r = approvals.get().find((a) => a.requestId === requestId)
      if (!r) throw new Error(`No pending approval ${requestId}: it was answered, withdrawn or expired.`)
      const res = await client.call('approvals.answer', { sessionId: r.sessionId, requestId, decision })
      remove(requestId)
      return res
    },
    async safelist(projectRoot) {
      const res = await client.call('safelist.list', projectRoot !== undefined ? { projectRoot } : {})
      return Object.freeze([...res.entries])
    },
    async revoke(entryId) {
      return (await client.call('safelist.revoke', { id: entryId })).revoked
    },
    async mode(sessionId) {
      return (await client.call('approvals.getMode', { sessionId })).mode
    },
    async setMode(sessionId, mode) {
      await client.call('approvals.setMode', { sessionId, mode })
    },
    close() {
      off()
      offState()
      if (owned) client.close()
    },
  }
  if (client.connection.get().status === 'open') {
    wasOpen = true
    void host.refresh().catch(() => {})
  }
  return host
}
