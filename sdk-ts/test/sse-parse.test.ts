// The SSE parser createSseHost reads a fetch body with (the HTML standard's event stream
// interpretation): fields, comments, multi-line data and line ends split across chunks.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { createSseParser, type SseMessage } from '../src/adapters/index.js'

test('sse parser: multi-line data, comments, id and event, CRLF and CR split across chunks', () => {
  const got: SseMessage[] = []
  const p = createSseParser((m) => got.push(m))
  p.push(': ping\n\nid: e:1\nevent: event\ndata: {"a":\n')
  p.push('data: 1}\n\n')
  p.push('data:no space\r')
  p.push('\ndata:  two spaces\r\n\r')
  p.push('\nevent: only-event\n\nid: bad\0id\ndata: x\rretry: 5\r\r')
  p.push('data')
  p.push('\n\n')
  assert.deepEqual(got, [
    { id: 'e:1', event: 'event', data: '{"a":\n1}' },
    { event: 'message', data: 'no space\n two spaces' },
    { event: 'message', data: 'x' },
    { event: 'message', data: '' },
  ])
})
