#!/usr/bin/env node
// The ui-sse page served together with the Node bridge, as an app would: one node:http server on
// one origin serves the built page and mounts createSseHandler (@zidane/sdk/server) under /api/chat,
// in front of a zidane-server reached over one createServerClient. With `make run` in one terminal:
//
//   cd sdk-ts && npm run build && npx vite build examples/ui-sse
//   ZIDANE_TOKEN=$(../bin/zidane-server token create --name ui-sse --scope chat) node examples/ui-sse/server.mjs
//
// then open http://127.0.0.1:4390/ (PORT sets the port, ZIDANE_URL the server, default
// ws://127.0.0.1:4380, ZIDANE_CWD the folder every session runs in, default the server's first
// workspace root). The page sends no token: the bridge holds it. authorize lets everyone in, which is
// only right on 127.0.0.1 where nobody else reaches it; an app checks its own cookie or token there.
import { existsSync, readFileSync } from 'node:fs'
import { createServer } from 'node:http'
import { extname, join, normalize } from 'node:path'
import { fileURLToPath } from 'node:url'
import { WebSocket } from 'ws'
import { createServerClient } from '@zidane/sdk/client'
import { createSseHandler, toNodeHandler } from '@zidane/sdk/server'

const token = process.env.ZIDANE_TOKEN
if (!token) {
  console.error('Set ZIDANE_TOKEN (mint one: bin/zidane-server token create --name ui-sse --scope chat).')
  process.exit(2)
}
const root = fileURLToPath(new URL('./dist/', import.meta.url))
if (!existsSync(join(root, 'index.html'))) {
  console.error('Build the page first: cd sdk-ts && npx vite build examples/ui-sse')
  process.exit(2)
}

const server = createServerClient({ url: process.env.ZIDANE_URL ?? 'ws://127.0.0.1:4380', token, WebSocket, appVersion: 'ui-sse-example' })
const handler = createSseHandler({
  server,
  basePath: '/api/chat',
  cwd: process.env.ZIDANE_CWD ?? '',
  authorize: () => 'local-user',
})
const api = toNodeHandler(handler)
const types = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css' }

const http = createServer((req, res) => {
  const path = new URL(req.url ?? '/', 'http://x').pathname
  if (path === '/api/chat' || path.startsWith('/api/chat/')) return api(req, res)
  const file = normalize(join(root, path))
  const f = file.startsWith(root) && extname(file) !== '' && existsSync(file) ? file : join(root, 'index.html')
  res.writeHead(200, { 'content-type': types[extname(f)] ?? 'application/octet-stream' })
  res.end(readFileSync(f))
})
await server.ready
const port = Number(process.env.PORT ?? 4390)
http.listen(port, '127.0.0.1', () => console.log(`ui-sse on http://127.0.0.1:${port}/ (the bridge at /api/chat)`))
const stop = () => {
  handler.close()
  server.close()
  http.close()
  http.closeAllConnections?.()
  process.exit(0)
}
process.on('SIGTERM', stop)
process.on('SIGINT', stop)
