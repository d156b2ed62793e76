// @zidane/sdk/adapters: ChatHost adapters (server, approvals, in-page run host, Web Worker) and the
// client, re-exported so one import serves a page.
export type { ChatHost, HostSession, InteractionRequest, InteractionReply, PendingInteraction, LiveEvent } from './types.js'
export { createServerHost } from './server-host.js'
export type { ServerHost, ServerHostOptions } from './server-host.js'
export { createServerApprovalsHost } from './approvals-host.js'
export type { ApprovalsHost } from './approvals-host.js'
export { createRunHost } from './run-host.js'
export type { RunHost, RunHostOptions, RunContext, RunFunction, AbortSignalLike } from './run-host.js'
export { exposeRunHost, createWorkerHost, WORKER_PROTOCOL_VERSION } from './worker.js'
export type { ToWorker, FromWorker, PortLike, WorkerLike, WorkerHostOptions, WorkerSideOptions } from './worker.js'
export { applyLiveEvent } from '../chat/reducer.js'
export { createServerClient } from '../client/client.js'
export type { ServerClient, ServerClientOptions, ConnectionState } from '../client/client.js'
