// @zidane/sdk/server: the Node bridge of the SSE protocol v1 (client seed "Your server, over HTTP and
// SSE", "SSE protocol", "Security"; issue 26 item 3). createSseHandler serves the protocol of
// schema/sse.json to an app's browsers in front of a zidane-server it reaches with one shared
// createServerClient(...) WebSocket, as a Web-standard (request: Request) => Promise<Response>.
export { createSseHandler } from './handler.js'
export type { SseHandler, SseHandlerOptions, Authorize, SessionsFor, OnCreate } from './handler.js'
export { toNodeHandler } from './node.js'
export type { NodeRequestLike, NodeResponseLike, NodeHandlerOptions } from './node.js'
