// createServerApprovalsHost: tool approvals of zidane-server (client seed: "Limits": ApprovalsHost).
//
// BUILT AGAINST THE SEED, NOT THE SCHEMA: the server's approvals (approvals.list / approvals.answer,
// safelist.list / safelist.revoke, the approval:request / approval:resolved signals) are not in
// schema/ yet, so these calls go through callDynamic and the shapes below follow the seed and the
// runtime cases. Once the schema has them, switch to the generated types. A server without them
// answers MethodNotFound: `offered` turns false and the host shows nothing.
import { createServerClient, type ServerClient, type ServerClientOptions } from '../client/client.js'
import { NotOfferedError } from '../client/errors.js'
import type { WireSignal } from '../protocol.js'
import { createStore, type ReadableStore } from '../store.js'

/** A tool call waiting for the user's decision. */
export interface Approval {
  readonly id: string
  readonly sessionId: string
  readonly tool: string
  readonly input?: unknown
  readonly [key: string]: unknown
}

/** The user's decision: allow once, deny, or always allow (saved to the safelist). */
export type ApprovalDecision = 'allow' | 'deny' | 'always'

/** An "Always allow" entry. */
export interface SafelistEntry {
  readonly id: string
  readonly [key: string]: unknown
}

/** The approvals of one server. */
export interface ApprovalsHost {
  /** Pending approvals, oldest first. */
  readonly approvals: ReadableStore<readonly Approval[]>
  /** Whether the server offers approvals (undefined until known). */
  readonly offered: ReadableStore<boolean | undefined>
  answer(approvalId: string, decision: ApprovalDecision): Promise<void>
  safelist(cwd?: string): Promise<readonly SafelistEntry[]>
  revoke(entryId: string): Promise<void>
  refresh(): Promise<void>
  close(): void
}

/** Creates the approvals host on a client (shared with createServerHost) or its own. */
export function createServerApprovalsHost(options: Omit<ServerClientOptions, 'clock'> | { client: ServerClient }): ApprovalsHost {
  const owned = !('client' in options)
  const client = 'client' in options ? options.client : createServerClient(options)
  const approvals = createStore<readonly Approval[]>(Object.freeze([]))
  const offered = createStore<boolean | undefined>(undefined)

  const off = client.onSignal((s: WireSignal) => {
    const sig = s as unknown as { kind: string; approval?: Approval; id?: string; approvalId?: string }
    if (sig.kind === 'approval:request' && sig.approval) {
      const a = sig.approval
      approvals.set(Object.freeze([...approvals.get().filter((x) => x.id !== a.id), a]))
    } else if (sig.kind === 'approval:resolved') {
      const id = sig.approvalId ?? sig.id ?? sig.approval?.id
      approvals.set(Object.freeze(approvals.get().filter((x) => x.id !== id)))
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
        const res = (await client.callDynamic('approvals.list', {})) as { approvals?: Approval[] }
        offered.set(true)
        approvals.set(Object.freeze([...(res.approvals ?? [])]))
      } catch (err) {
        if (err instanceof NotOfferedError) {
          offered.set(false)
          return
        }
        throw err
      }
    },
    async answer(approvalId, decision) {
      await client.callDynamic('approvals.answer', { approvalId, decision })
      approvals.set(Object.freeze(approvals.get().filter((x) => x.id !== approvalId)))
    },
    async safelist(cwd) {
      const res = (await client.callDynamic('safelist.list', cwd !== undefined ? { cwd } : {})) as { entries?: SafelistEntry[] }
      return Object.freeze([...(res.entries ?? [])])
    },
    async revoke(entryId) {
      await client.callDynamic('safelist.revoke', { id: entryId })
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
