// The package's entry: the generated protocol bindings and the handwritten client.
export * from './protocol.js'
export { connect, RpcCallError, ConnectionClosedError } from './client.js'
export type { Connection, ConnectOptions, WebSocketLike, WebSocketConstructor } from './client.js'
