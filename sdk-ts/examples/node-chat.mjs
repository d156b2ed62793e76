#!/usr/bin/env node
// Sends one prompt to zidane-server and prints the streamed answer, through @zidane/sdk's
// createServerHost. Plain JavaScript on the built package (npm run build), so Node 20 runs it as it is.
//
//   ZIDANE_TOKEN=zds_… node sdk-ts/examples/node-chat.mjs "Say hello."
//
// ZIDANE_URL defaults to ws://127.0.0.1:4380 (make run). Node 20 has no global WebSocket: the ws
// package provides one.
import { WebSocket } from 'ws'
import { createServerHost } from '@zidane/sdk/adapters'

const url = process.env.ZIDANE_URL ?? 'ws://127.0.0.1:4380'
const token = process.env.ZIDANE_TOKEN
const prompt = process.argv.slice(2).join(' ') || 'Say hello.'
if (!token) {
  console.error('Set ZIDANE_TOKEN (mint one: bin/zidane-server token create --name example --scope chat).')
  process.exit(2)
}

const host = createServerHost({ url, token, WebSocket, appVersion: 'node-chat-example', reconnect: { initialMs: 500, maxMs: 2000 } })
// Say why nothing happens yet: a server that does not answer is retried, not a silent wait, and
// given up on after a few tries (an example is not a daemon).
const maxTries = 5
host.client.connection.subscribe(() => {
  const c = host.client.connection.get()
  if (c.status !== 'retrying') return
  if (c.attempt >= maxTries) {
    console.error(`No server answers at ${url} after ${maxTries} tries (${c.error.message}). Start it (make run), or set ZIDANE_URL to its address.`)
    process.exit(1)
  }
  console.error(`No answer from ${url} (${c.error.message}); retrying. Is the server running there? Set ZIDANE_URL for another address.`)
})
try {
  await host.ready
} catch (err) {
  console.error(`Cannot connect to ${url}: ${err.message}`)
  process.exit(1)
}

const session = await host.createSession({ title: 'node-chat example' })
console.error(`session ${session.id}`)

// Print each streamed piece as it arrives; tool calls and their results on their own lines.
const done = new Promise((resolve) => {
  host.client.onSignal((signal) => {
    if (signal.sessionId !== session.id) return
    if (signal.kind === 'event') {
      const e = signal.event
      if (e.kind === 'markdown' && e.streaming) process.stdout.write(e.text)
      else if (e.kind === 'tool') process.stdout.write(`\n[tool] ${e.text}\n`)
      else if (e.kind === 'tool-result') process.stdout.write(`[result] ${e.text}\n`)
      else if (e.kind === 'error') process.stdout.write(`\n[error] ${e.message}\n`)
    } else if (signal.kind === 'turn:end') {
      process.stdout.write('\n')
    } else if (signal.kind === 'approval:request' || signal.kind === 'interaction:request') {
      process.stderr.write('\n[waiting] the agent asks for an answer this example does not give; answer it from bin/zidane or an app, or it expires as a denial\n')
    } else if (signal.kind === 'run:end') {
      resolve(signal)
    }
  })
})

await host.send(session.id, prompt)
const end = await done
host.close()
process.exit(end.ok ? 0 : 1)
