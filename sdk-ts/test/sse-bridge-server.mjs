// The Node bridge on node:http, as an app would mount it, for e2e/sse_bridge_test.go: the SSE
// conformance suite (e2e/ssesuite) runs against it in front of the real zidane-server.
//
//   ZIDANE_URL=ws://127.0.0.1:PORT ZIDANE_TOKEN=zds_… BRIDGE_CWD=/folder BRIDGE_DIST=/built/server \
//     node test/sse-bridge-server.mjs
//
// BRIDGE_DIST is the folder of the built src/server (tsconfig.bridge.json). authorize takes
// `Authorization: Bearer user-<name>` as user <name> and refuses anything else; sessionsFor gives a
// user the sessions they created (onCreate records them, in BRIDGE_STATE when set). It prints `listening <port>` once it
// accepts, and logs the handler's warnings on stderr.
import { createServer } from 'node:http'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { pathToFileURL } from 'node:url'
import { join } from 'node:path'
import { WebSocket } from 'ws'

const env = (name, fallback) => {
  const v = process.env[name] ?? fallback
  if (v === undefined) throw new Error(`${name} is not set`)
  return v
}
const dist = env('BRIDGE_DIST')
const { createSseHandler, toNodeHandler } = await import(pathToFileURL(join(dist, 'server', 'index.js')).href)
const { createServerClient } = await import(pathToFileURL(join(dist, 'client', 'index.js')).href)

const server = createServerClient({ url: env('ZIDANE_URL'), token: env('ZIDANE_TOKEN'), WebSocket, appVersion: 'sse-bridge-test', reconnect: { initialMs: 100, maxMs: 1000 } })
// Who created which session: kept in BRIDGE_STATE (a JSON file) when set, as an app's store
// would keep it, so a bridge started again knows its users' sessions.
const statePath = process.env.BRIDGE_STATE
/** @type {Map<string, Set<string>>} */
const owned = new Map(statePath && existsSync(statePath) ? Object.entries(JSON.parse(readFileSync(statePath, 'utf8'))).map(([u, ids]) => [u, new Set(ids)]) : [])
const save = () => {
  if (statePath) writeFileSync(statePath, JSON.stringify(Object.fromEntries([...owned].map(([u, ids]) => [u, [...ids]]))))
}
const handler = createSseHandler({
  server,
  basePath: env('BRIDGE_BASE', '/api/chat'),
  cwd: env('BRIDGE_CWD'),
  maxBodyBytes: Number(env('BRIDGE_MAX_BODY', String(16 << 20))),
  heartbeatMs: Number(env('BRIDGE_HEARTBEAT_MS', '15000')),
  authorize: (request) => {
    const m = /^Bearer user-([A-Za-z0-9_-]{1,64})$/.exec(request.headers.get('authorization') ?? '')
    return m ? m[1] : null
  },
  sessionsFor: (user) => owned.get(user) ?? [],
  onCreate: (user, session) => {
    let s = owned.get(user)
    if (s === undefined) owned.set(user, (s = new Set()))
    s.add(session.id)
    save()
  },
  logger: { warn: (msg) => console.error(msg) },
})
await server.ready
const http = createServer(toNodeHandler(handler))
http.listen(Number(env('BRIDGE_PORT', '0')), '127.0.0.1', () => {
  console.log(`listening ${http.address().port}`)
})
const stop = () => {
  handler.close()
  server.close()
  http.close()
  http.closeAllConnections?.()
  process.exit(0)
}
process.on('SIGTERM', stop)
process.on('SIGINT', stop)
