// The SDK's typed errors. Each has a stable `kind`, so code that cannot use instanceof (across
// bundles or realms) can still tell them apart.
import type { DaemonInfo, RpcError } from '../protocol.js'

/** What went wrong, as a stable string. */
export type ZidaneErrorKind =
  | 'token-refused'
  | 'forbidden'
  | 'unavailable'
  | 'version-mismatch'
  | 'dropped'
  | 'connect-timeout'
  | 'closed'
  | 'host-changed'
  | 'rpc'
  | 'not-offered'
  | 'worker-version'
  | 'host-gone'
  | 'http'

/** The base of every error the SDK throws or reports. */
export class ZidaneError extends Error {
  override readonly name: string = 'ZidaneError'
  constructor(
    readonly kind: ZidaneErrorKind,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options)
  }
}

/**
 * The server refused the token: HTTP 401 at the upgrade (unknown, revoked or malformed token), or the
 * connection closed with 1008 because the token was revoked. Terminal: the client stops retrying.
 */
export class TokenRefusedError extends ZidaneError {
  override readonly name = 'TokenRefusedError'
  readonly status = 401 as const
  constructor(message = 'The server refused the token (401). Mint a new one with `zidane-server token create --name NAME --scope chat` and connect with it.') {
    super('token-refused', message)
  }
}

/**
 * The server refused this origin or the token's scope: HTTP 403 at the upgrade, or a 1008 close for
 * a refused origin. Terminal.
 */
export class ForbiddenError extends ZidaneError {
  override readonly name = 'ForbiddenError'
  readonly status = 403 as const
  constructor(message = 'The server refused this origin or scope (403). Add the page\'s origin with --allowed-origin, or use a token of a wider scope.') {
    super('forbidden', message)
  }
}

/** The server is up but cannot serve (HTTP 503: database unreachable or shutting down). Retried. */
export class ServerUnavailableError extends ZidaneError {
  override readonly name = 'ServerUnavailableError'
  readonly status = 503 as const
  constructor(message = 'The server is unavailable (503); retrying.') {
    super('unavailable', message)
  }
}

/** The client's and the server's protocol version ranges do not overlap. Terminal. */
export class VersionMismatchError extends ZidaneError {
  override readonly name = 'VersionMismatchError'
  constructor(
    message: string,
    readonly daemon?: DaemonInfo,
  ) {
    super('version-mismatch', message)
  }
}

/**
 * The connection dropped (field case B35), or could not be opened. A request that was already sent
 * has an unknown outcome (outcomeUnknown): the server may have run it, and the SDK never resends it.
 */
export class ConnectionDroppedError extends ZidaneError {
  override readonly name: string = 'ConnectionDroppedError'
  constructor(
    message: string,
    readonly outcomeUnknown = false,
    readonly code?: number,
    readonly status?: number,
  ) {
    super('dropped', message)
  }
}

/** A connect attempt did not finish (upgrade and ipc.hello) within connectTimeoutMs. Retried. */
export class ConnectTimeoutError extends ConnectionDroppedError {
  override readonly name = 'ConnectTimeoutError'
  constructor(ms: number) {
    super(`No connection within ${ms} ms; retrying.`)
    ;(this as { kind: ZidaneErrorKind }).kind = 'connect-timeout'
  }
}

/** The client (or host) was closed by its user; calls made after or pending at close() reject with it. */
export class ClosedError extends ZidaneError {
  override readonly name = 'ClosedError'
  constructor(message = 'The client was closed.') {
    super('closed', message)
  }
}

/** The server at the URL answered with another hostId than the one saved: another server. Terminal. */
export class HostChangedError extends ZidaneError {
  override readonly name = 'HostChangedError'
  constructor(
    readonly expected: string,
    readonly actual: string,
  ) {
    super('host-changed', `Another server answers at this URL: expected hostId ${expected}, got ${actual}. Create a new client (or call acceptHost()) to use it.`)
  }
}

/** A JSON-RPC error answer: code, message and data as the server sent them. */
export class RpcCallError extends ZidaneError implements RpcError {
  override readonly name: string = 'RpcCallError'
  readonly code: number
  readonly data?: unknown
  constructor(
    error: RpcError,
    readonly method: string,
  ) {
    super('rpc', error.message)
    this.code = error.code
    if (error.data !== undefined) this.data = error.data
  }
}

/** The server does not offer the method (MethodNotFound, -32601): show the feature as unavailable. */
export class NotOfferedError extends RpcCallError {
  override readonly name = 'NotOfferedError'
  constructor(error: RpcError, method: string) {
    super(error, method)
    ;(this as { kind: ZidaneErrorKind }).kind = 'not-offered'
  }
}

/** A worker peer speaks another version of the worker protocol. */
export class WorkerVersionError extends ZidaneError {
  override readonly name = 'WorkerVersionError'
  constructor(
    readonly theirs: unknown,
    readonly ours: number,
  ) {
    super('worker-version', `The worker speaks worker protocol version ${String(theirs)}; this side speaks v${ours}. Load matching builds of the page and the worker.`)
  }
}

/** The agent's host (a worker) died or was terminated; what waited on it settles with this. */
export class HostGoneError extends ZidaneError {
  override readonly name = 'HostGoneError'
  constructor(message = 'The agent host is gone (the worker died or was terminated).') {
    super('host-gone', message)
  }
}

/**
 * An HTTP request of the SSE protocol (createSseHost) was answered with an error status: status is
 * the HTTP status, code the JSON-RPC error code the ErrorBody carried (when it had one) and the
 * message the server's, which says what to do.
 */
export class HttpError extends ZidaneError {
  override readonly name = 'HttpError'
  constructor(
    readonly status: number,
    message: string,
    readonly code?: number,
  ) {
    super('http', message)
  }
}

/** True for the errors after which the client stops retrying. */
export function isTerminal(error: unknown): boolean {
  return (
    error instanceof TokenRefusedError ||
    error instanceof ForbiddenError ||
    error instanceof VersionMismatchError ||
    error instanceof HostChangedError ||
    error instanceof ClosedError
  )
}
