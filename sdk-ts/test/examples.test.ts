// The examples of schema/examples/, generated into test/examples.gen.ts by `make generate` (the drift
// check keeps them equal to the files; tsc checks each with `satisfies`): each is a well-formed
// JSON-RPC message. Nothing outside sdk-ts/ is read at run time.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { examples } from './examples.gen.js'

const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

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
