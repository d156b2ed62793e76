// The TypeScript SDK as a client under test of the conformance kit's client mode (README,
// "Protocol conformance kit"; e2e/wirekit/client.go):
//
//   zidane-conformance client --cmd 'node sdk-ts/test/conformance-client.mjs'
//
// started as `node conformance-client.mjs --url ws://… --token T --session S`, it connects with the
// built SDK's createServerClient (Node 20: ws as the WebSocket), follows S (the SDK's resume path:
// sessions.resume after every reconnect), asks sessions.get once (printing {"notOffered":
// "sessions.get"} on MethodNotFound, a NotOfferedError, and carrying on) and prints one JSON line
// {"seq":N,"kind":"…"} per signal of S the SDK applied, skipping kinds the SDK does not know
// (SIGNAL_KINDS). Unknown fields are ignored because nothing reads them. It runs until killed.
// --no-resume makes it a broken client (it never follows S, so nothing is resumed after a cut),
// for the test that client mode fails it (conformance.test.ts).
import { parseArgs } from 'node:util'
import WebSocket from 'ws'
import { createServerClient, NotOfferedError } from '../dist/client/index.js'
import { SIGNAL_KINDS } from '../dist/protocol.js'

const { values } = parseArgs({
  options: { url: { type: 'string' }, token: { type: 'string' }, session: { type: 'string' }, 'no-resume': { type: 'boolean' } },
})
const { url, token, session } = values
if (!url || !token || !session) {
  process.stderr.write('conformance-client: --url, --token and --session are required\n')
  process.exit(2)
}
const known = new Set(SIGNAL_KINDS)
const print = (v) => process.stdout.write(JSON.stringify(v) + '\n')

const client = createServerClient({
  url,
  token,
  WebSocket,
  appVersion: 'zidane-conformance-sdk-ts',
  reconnect: { initialMs: 50, maxMs: 500 },
  onError: (e) => process.stderr.write(`conformance-client: ${e.message}\n`),
})
// fresh: start at $seq 0 of the server's epoch, so the first hello resumes from the start (rather
// than loading a transcript page, which would replace signals instead of applying them).
if (!values['no-resume']) client.follow(session, { fresh: true })
client.onSignal((s) => {
  if (s.sessionId !== session || typeof s.$seq !== 'number' || !known.has(s.kind)) return
  print({ seq: s.$seq, kind: s.kind })
})

client.ready.then(
  async () => {
    try {
      await client.call('sessions.get', { sessionId: session })
    } catch (e) {
      if (e instanceof NotOfferedError) print({ notOffered: 'sessions.get' }) // not offered: carry on without it
      else process.stderr.write(`conformance-client: sessions.get: ${e.message}\n`)
    }
  },
  (e) => {
    process.stderr.write(`conformance-client: stopped: ${e.message}\n`)
    process.exit(1)
  },
)
