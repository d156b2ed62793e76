// The package's root entry: the generated protocol bindings and the client. The chat store, the
// hosts and the React hooks have their own entries (@zidane/sdk/chat, /adapters, /react).
export * from './protocol.js'
export * from './client/index.js'
