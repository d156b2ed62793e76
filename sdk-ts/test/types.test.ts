// Type-level tests of the generated bindings (checked by tsc: a @ts-expect-error that finds no
// error fails the check), and the few runtime values protocol.ts exports.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import {
  ErrorCode,
  HostKindValues,
  MIN_PROTOCOL_VERSION,
  PROTOCOL_VERSION,
  type ServerClient,
  type WireSignal,
  type ErrorDataMap,
  type ErrorResponse,
  type Request,
  type RpcError,
  type Session,
  type Signal,
  type SignalNotification,
  type StreamEvent,
  type SuccessResponse,
  type VersionMismatchErrorData,
} from '../src/index.js'

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false
function assertType<T extends true>(_: T): void {}

// ErrorDataMap keys are the registry's codes.
assertType<Equal<ErrorDataMap[typeof ErrorCode.VersionMismatch], VersionMismatchErrorData>>(true)
assertType<Equal<NonNullable<RpcError<typeof ErrorCode.VersionMismatch>['data']>, VersionMismatchErrorData>>(true)
assertType<Equal<typeof ErrorCode.HandshakeRequired, -32011>>(true)

// Negative tests: each line below must be a type error.
export const negatives = [
  // A missing required field (sessionId; prompt is optional since chat.send takes commands).
  // @ts-expect-error
  { jsonrpc: '2.0', id: 1, method: 'chat.send', params: { prompt: 'p' } } satisfies Request<'chat.send'>,
  // A wrong kind.
  // @ts-expect-error
  { jsonrpc: '2.0', method: 'ipc.signal', params: { kind: 'run:begin', sessionId: 's', runId: 'r' } } satisfies SignalNotification,
  // A wrong method name.
  // @ts-expect-error
  { jsonrpc: '2.0', id: 1, method: 'sessions.nope', params: {} } satisfies Request,
  // A wrong params type (protocolVersion is a number).
  // @ts-expect-error
  { jsonrpc: '2.0', id: 1, method: 'ipc.hello', params: { protocolVersion: '16' } } satisfies Request<'ipc.hello'>,
  // Params of another method.
  // @ts-expect-error
  { jsonrpc: '2.0', id: 1, method: 'sessions.get', params: { prompt: 'x' } } satisfies Request<'sessions.get'>,
  // An extra member the result does not have.
  // @ts-expect-error
  { jsonrpc: '2.0', id: 1, result: { runId: 'r', extra: 1 } } satisfies SuccessResponse<'chat.send'>,
  // VersionMismatch carries data.daemon, not data.pointer.
  // @ts-expect-error
  { jsonrpc: '2.0', id: 1, error: { code: -32010, message: 'm', data: { pointer: '' } } } satisfies ErrorResponse & { error: RpcError<typeof ErrorCode.VersionMismatch> },
  // An optional field set to undefined (exactOptionalPropertyTypes).
  // @ts-expect-error
  { protocolVersion: 16, minProtocolVersion: undefined } satisfies Request<'ipc.hello'>['params'],
]

function callTypes(conn: ServerClient): void {
  // call's result type follows the method.
  const created = conn.call('sessions.create', {})
  assertType<Equal<typeof created, Promise<Session>>>(true)
  // @ts-expect-error: a wrong method name.
  void conn.call('sessions.nope', {})
  // @ts-expect-error: a wrong params type.
  void conn.call('sessions.get', { sessionId: 42 })
  // @ts-expect-error: a missing required field.
  void conn.call('sessions.resume', { sessionId: 's', epoch: 'e' })
  // @ts-expect-error: params must be an object, also for methods without params.
  void conn.call('$/ping', 42)
  // @ts-expect-error: an empty params type takes no members.
  void conn.call('$/ping', { x: 1 })
  void conn.call('$/ping', {})
  // The must-shows: a wrong params type and an unknown method fail to compile.
  // @ts-expect-error: cwd is a string.
  void conn.call('sessions.create', { cwd: 1 })
  // @ts-expect-error: no such method.
  void conn.call('no.such', {})
  // onSignal(kind) narrows the handler's signal.
  conn.onSignal('run:end', (s) => {
    assertType<Equal<typeof s.ok, boolean>>(true)
    // @ts-expect-error: a run:end has no event.
    void s.event
  })
  conn.onSignal((s: WireSignal) => {
    if (s.kind === 'run:end') {
      assertType<Equal<typeof s.runId, string>>(true)
      assertType<Equal<typeof s.ok, boolean>>(true)
    }
    // @ts-expect-error: not narrowed outside the check.
    void s.ok
  })
}
void callTypes

/** Every StreamEvent kind handled; the default proves it with never. */
function describeEvent(e: StreamEvent): string {
  switch (e.kind) {
    case 'user-prompt':
      return `prompt ${e.text}`
    case 'markdown':
      return `${e.streaming ? 'piece' : 'block'} ${e.text}`
    case 'thinking':
      return `thinking ${e.text}`
    case 'tool':
      return `call ${e.tool}#${e.callId}`
    case 'tool-result':
      return `result ${e.callId}${e.isError ? ' (error)' : ''}`
    case 'run-summary':
      return `summary ${e.runSummary.turns} turns`
    case 'error':
      return `error ${e.message}`
    case 'compaction':
      return `compaction of ${e.exchanges} exchanges`
    default: {
      const unknownKind: never = e
      return `unknown ${(unknownKind as { kind: string }).kind}`
    }
  }
}

/** Every Signal kind handled; the default proves it with never. */
function describeSignal(s: Signal): string {
  switch (s.kind) {
    case 'run:start':
      return `start ${s.runId}`
    case 'event':
      return `event ${describeEvent(s.event)}`
    case 'turn:end':
      return `turn ${s.turnId} ${s.usage.input}/${s.usage.output}`
    case 'run:end':
      return `end ${s.runId} ${s.ok ? 'ok' : (s.error ?? 'failed')}`
    case 'presence:changed':
      return `presence ${s.sessions.length}`
    case 'git:refs':
      return `refs ${s.root} ${s.branch ?? ''} ${s.head ?? ''}`
    case 'git:clone:progress':
      return `clone ${s.cloneId} ${s.phase} ${s.percent ?? ''}`
    case 'workspace:exec:data':
      return `exec ${s.terminalId} ${s.data.length}`
    case 'workspace:exec:exit':
      return `exit ${s.terminalId} ${s.exitCode ?? s.signal}`
    case 'approval:request':
      return `approval ${s.request.tool} ${s.request.summary}`
    case 'approval:resolved':
      return `approval ${s.requestId} ${s.resolution}`
    case 'approval:mode':
      return `mode ${s.mode}`
    case 'interaction:request':
      return `question ${s.request.prompt} ${s.request.options.length}`
    case 'interaction:resolved':
      return `question ${s.requestId} ${s.resolution}`
    case 'queue:changed':
      return `queue ${s.items.length}`
    case 'plans:snapshot':
      return `plans ${s.snapshot.plans.length} ${s.snapshot.active ?? 'none'}`
    case 'stream:progress':
      return `progress ${s.runId} ${s.tokens}`
    case 'session:updated':
      return `session ${s.sessionId} ${s.deleted ? 'deleted' : s.session?.title ?? ''}`
    case 'session:reset':
      return `reset ${s.sessionId} ${s.reason}`
    case 'draft:changed':
    case 'prefs:changed':
    case 'settings:changed':
    case 'sidebar:changed':
    case 'agents:changed':
    case 'commands:changed':
    case 'skills:changed':
      return s.kind
    default: {
      const unknownKind: never = s
      return `unknown ${(unknownKind as { kind: string }).kind}`
    }
  }
}

test('ErrorCode values', () => {
  assert.equal(ErrorCode.HandshakeRequired, -32011)
  assert.equal(ErrorCode.VersionMismatch, -32010)
  assert.equal(ErrorCode.MethodNotFound, -32601)
  assert.equal(PROTOCOL_VERSION, 16)
  assert.equal(MIN_PROTOCOL_VERSION, 16)
  assert.deepEqual([...HostKindValues], ['server', 'desktop', 'daemon'])
})

test('narrowing on kind', () => {
  assert.equal(describeSignal({ kind: 'run:start', sessionId: 's', runId: 'r' }), 'start r')
  assert.equal(
    describeSignal({ kind: 'event', sessionId: 's', runId: 'r', event: { kind: 'markdown', text: 'H', streaming: true, turnId: 't' } }),
    'event piece H',
  )
  assert.equal(describeSignal({ kind: 'run:end', sessionId: 's', runId: 'r', ok: false, error: 'boom' }), 'end r boom')
  // A kind from a newer server reaches the default branch instead of throwing.
  assert.equal(describeSignal({ kind: 'future:snapshot' } as unknown as Signal), 'unknown future:snapshot')
})
