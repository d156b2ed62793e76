// @zidane/sdk/client: the reconnecting protocol client, its errors and the transport interfaces.
export { createServerClient, classifyClose, tokenCheckUrl } from './client.js'
export type { ServerClient, ServerClientOptions, ConnectionState, ReconnectOptions, SignalOf, SessionCursor, Resync, FollowOptions } from './client.js'
export * from './errors.js'
export { systemClock } from './transport.js'
export type { WebSocketLike, WebSocketConstructor, FetchLike, Clock } from './transport.js'
export { createStore } from '../store.js'
export type { ReadableStore, WritableStore } from '../store.js'
