// The examples under schema/examples/ at run time: test/examples.gen.ts (type-checked with
// `satisfies` by tsc) holds exactly the files' messages, and each is a well-formed JSON-RPC message.
import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { test } from 'node:test'
import { examples } from './examples.gen.js'

// Compiled to dist-test/test/, so the examples are three folders up.
const dir = new URL('../../../schema/examples/', import.meta.url)
const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

test('examples.gen.ts holds every example file as it is', () => {
  const files = readdirSync(dir).filter((f) => f.endsWith('.json')).sort()
  assert.deepEqual(examples.map(([file]) => file), files)
  for (const [file, message] of examples) {
    assert.deepEqual(message, JSON.parse(readFileSync(new URL(file, dir), 'utf8')), file)
  }
})

test('every example is one JSON-RPC 2.0 message with a UUID id', () => {
  for (const [file, message] of examples) {
    const m = message as Record<string, unknown>
    assert.equal(m['jsonrpc'], '2.0', file)
    if (file.startsWith('signal.')) {
      assert.equal(m['method'], 'ipc.signal', file)
      assert.ok(!('id' in m), `${file}: a notification has no id`)
      continue
    }
    assert.match(String(m['id']), uuid, file)
    const kind = file.startsWith('error.') ? 'error' : file.includes('.request') ? 'method' : 'result'
    assert.ok(kind in m, `${file}: has ${kind}`)
  }
})
