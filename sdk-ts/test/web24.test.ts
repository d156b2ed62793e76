// The store's render budget and run-end marker, and the composer's attachment checks (issue 24
// sections 1, 2 and 4): a burst of streamed pieces notifies readers once a frame, not once a piece;
// run:end interrupted is kept on the snapshot until the next run:start; files over chat.send's bounds
// or of a kind it does not take are refused with a sentence saying why.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { createSessionStreams, type FrameScheduler } from '../src/chat/index.js'
import type { WireSignal } from '../src/index.js'
import { ATTACHMENT_LIMITS, attachmentType, imageSource, readAttachments } from '../src/react/attachments.js'
import { summaryTitle } from '../src/react/transcript.js'

let seq = 0
const md = (text: string): WireSignal => ({ kind: 'event', sessionId: 'A', runId: 'r1', event: { kind: 'markdown', text, streaming: true, turnId: 'T1' }, $seq: ++seq })

class Frames implements FrameScheduler {
  cbs: Array<() => void> = []
  request(cb: () => void) {
    this.cbs.push(cb)
    return this.cbs.length
  }
  cancel() {}
  tick() {
    const cbs = this.cbs.splice(0)
    for (const cb of cbs) cb()
  }
}

test('a burst of pieces notifies once a frame, and what is shown is a growing prefix', () => {
  const frames = new Frames()
  const s = createSessionStreams({ frames })
  let renders = 0
  s.subscribe('A', () => renders++)
  s.apply({ kind: 'run:start', sessionId: 'A', runId: 'r1', $seq: ++seq })
  const start = renders
  let all = ''
  for (let i = 0; i < 500; i++) {
    s.apply(md(`w${i} `))
    all += `w${i} `
  }
  assert.ok(renders - start <= 2, `500 pieces in one task notified ${renders - start} times`)
  let frame = 0
  let last = ''
  while (frames.cbs.length > 0 && frame < 100) {
    const before = renders
    frames.tick()
    frame++
    assert.ok(renders - before <= 1, 'one notification a frame')
    const shown = (s.transcript('A')[0] as { text?: string } | undefined)?.text ?? ''
    assert.ok(shown.startsWith(last) && all.startsWith(shown))
    last = shown
  }
  assert.equal(last, all, 'the reveal catches up')
})

test('run:end interrupted marks the snapshot until the next run:start', () => {
  const s = createSessionStreams({ frames: false })
  s.apply({ kind: 'run:start', sessionId: 'A', runId: 'r1', $seq: ++seq })
  assert.equal(s.getSnapshot('A').interrupted, undefined)
  s.apply({ kind: 'run:end', sessionId: 'A', runId: 'r1', ok: false, interrupted: true, error: 'The run was cancelled.', $seq: ++seq })
  assert.equal(s.getSnapshot('A').interrupted, true)
  assert.equal(s.getSnapshot('A').running, false)
  s.apply({ kind: 'run:start', sessionId: 'A', runId: 'r2', $seq: ++seq })
  assert.equal(s.getSnapshot('A').interrupted, undefined)
  s.apply({ kind: 'run:end', sessionId: 'A', runId: 'r2', ok: true, $seq: ++seq })
  assert.equal(s.getSnapshot('A').interrupted, undefined)
})

test('attachments: kinds, bounds and the data: URL', async () => {
  assert.equal(attachmentType('a.png', 'image/png'), 'image/png')
  assert.equal(attachmentType('notes.md', ''), 'text/markdown')
  assert.equal(attachmentType('main.go', ''), 'text/plain')
  assert.equal(attachmentType('x.pdf', 'application/pdf'), undefined)
  const png = new File([new Uint8Array([0x89, 0x50, 0x4e, 0x47])], 'dot.png', { type: 'image/png' })
  const text = new File(['héllo\n'], 'hello.txt', { type: 'text/plain' })
  const r = await readAttachments([png, text], [])
  assert.deepEqual(r.refused, [])
  assert.equal(r.taken[0]!.data, 'data:image/png;base64,iVBORw==')
  assert.equal(r.taken[1]!.data, `data:text/plain;base64,${Buffer.from('héllo\n').toString('base64')}`)
  assert.equal(r.taken[1]!.size, 7)
  assert.equal(imageSource(r.taken[0]!), r.taken[0]!.data)
  assert.equal(imageSource({ name: 'x', mediaType: 'image/png', data: 'javascript:alert(1)' }), undefined)
  assert.equal(imageSource({ name: 'x', mediaType: 'image/svg+xml', data: 'data:image/svg+xml;base64,PHN2Zz4=' }), undefined)

  const pdf = new File(['%PDF'], 'doc.pdf', { type: 'application/pdf' })
  const binary = new File([new Uint8Array([0xff, 0xfe, 0x00])], 'blob.txt', { type: 'text/plain' })
  const big = new File([new Uint8Array(ATTACHMENT_LIMITS.fileBytes + 1)], 'big.png', { type: 'image/png' })
  const bad = await readAttachments([pdf, binary, big], [])
  assert.equal(bad.taken.length, 0)
  assert.match(bad.refused[0]!, /doc\.pdf: application\/pdf files cannot be attached/)
  assert.match(bad.refused[1]!, /blob\.txt: only UTF-8 text/)
  assert.match(bad.refused[2]!, /big\.png: 2\.0 MiB is over the 2\.0 MiB/)

  const half = () => new File([new Uint8Array(1.5 * 1024 * 1024)], 'half.png', { type: 'image/png' })
  const total = await readAttachments([half(), half(), half()], [])
  assert.equal(total.taken.length, 2)
  assert.match(total.refused[0]!, /3\.0 MiB together/)
  const held = Array.from({ length: 8 }, () => r.taken[1]!)
  const many = await readAttachments([text], held)
  assert.match(many.refused[0]!, /at most 8 files/)
})

test("the run summary's title says in words what its symbols mean", () => {
  assert.equal(
    summaryTitle({ modelId: 'scripted/scripted', durationMs: 1234, turns: 2, tokensIn: 279, tokensOut: 28, tokensPerSecond: 28000.4 }),
    'scripted/scripted · 1.2 s · 2 model requests · 279 tokens in, 28 tokens out, 28000 tokens per second',
  )
  assert.equal(
    summaryTitle({ modelId: 'm', durationMs: 0, turns: 1, tokensIn: 0, tokensOut: 0, tokensPerSecond: 0, unreported: true, droppedExchanges: 1, compactedExchanges: 3 }),
    'm · 0.0 s · 1 model request · token counts not reported by the provider · 1 earlier exchange left out to fit the context · 3 earlier exchanges compacted',
  )
  assert.equal(summaryTitle(undefined), undefined)
})
