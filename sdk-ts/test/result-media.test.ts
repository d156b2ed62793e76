// Media embedded in tool results (issue 24 section 1, result-media.tsx): only PNG, JPEG, GIF and
// WebP whose bytes carry their type's signature, at most RESULT_MEDIA_LIMITS.imageBytes, become an
// <img> with a data: URL, alt text naming the tool; SVG, audio, unknown types, larger images and
// bad base64 are labels "<kind> (<type>, <size>)" with no address at all. The transcript's tool row
// shows them under the call, rendered on a real React renderer.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { createElement as h } from 'react'
import TestRenderer, { act } from 'react-test-renderer'
import type { ToolResultMedia } from '../src/protocol.js'
import { RESULT_MEDIA_LIMITS, TranscriptItem, resultMediaView } from '../src/react/index.js'

;(globalThis as { IS_REACT_ACT_ENVIRONMENT?: boolean }).IS_REACT_ACT_ENVIRONMENT = true

const b64 = (bytes: string) => Buffer.from(bytes, 'latin1').toString('base64')
/** A 1×1 PNG (server/agent/mcp/mcptest's). */
const png = b64('\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82')
const svg = b64('<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"><script>alert(2)</script></svg>')
const tool = 'mcp__everything__get-tiny-image'

test('PNG, JPEG, GIF and WebP with their signatures are inline images with a data: URL and alt text naming the tool', () => {
  const v = resultMediaView({ mimeType: 'image/png', data: png }, tool)
  assert.deepEqual(v, { kind: 'image', src: `data:image/png;base64,${png}`, alt: `Image from ${tool}`, mimeType: 'image/png', bytes: 67 })
  for (const [type, head] of [['image/jpeg', '\xff\xd8\xff\xe0\x00\x10JFIF'], ['image/gif', 'GIF89a\x01\x00\x01\x00'], ['image/webp', 'RIFF\x1a\x00\x00\x00WEBPVP8L']] as const) {
    const v2 = resultMediaView({ mimeType: type, data: b64(head + '\x00\x00\x00') }, tool, 1, 3)
    assert.equal(v2.kind, 'image', type)
    assert.ok(v2.kind === 'image' && v2.src.startsWith(`data:${type};base64,`), type)
    assert.equal(v2.kind === 'image' && v2.alt, `Image 2 of 3 from ${tool}`)
  }
  // The type's parameters and case do not matter; the data: URL carries the essence only.
  const v3 = resultMediaView({ mimeType: 'IMAGE/PNG; foo=bar', data: png }, tool)
  assert.equal(v3.kind === 'image' && v3.src.slice(0, 22), 'data:image/png;base64,')
})

test('SVG, audio and unknown types are labels with their type and size; nothing of theirs is an address', () => {
  const cases: Array<[ToolResultMedia, string]> = [
    [{ mimeType: 'image/svg+xml', data: svg }, `image (image/svg+xml, ${Buffer.from(svg, 'base64').length} B): SVG is not shown inline`],
    [{ mimeType: 'audio/wav', data: b64('RIFF\x00\x00\x00\x00WAVE') }, 'audio (audio/wav, 12 B)'],
    [{ mimeType: 'image/bmp', data: b64('BM\x00\x00') }, 'image (image/bmp, 4 B)'],
    [{ mimeType: 'application/pdf', data: b64('%PDF-1.7') }, 'media (application/pdf, 8 B)'],
    [{ mimeType: '', data: png }, 'media (no type, 67 B)'],
  ]
  for (const [m, text] of cases) {
    const v = resultMediaView(m, tool)
    assert.equal(v.kind, 'label', m.mimeType)
    assert.equal(v.kind === 'label' && v.text, text)
    assert.ok(!JSON.stringify(v).includes('data:'), `${m.mimeType}: no data: URL`)
  }
})

test('an image over the bound, bytes not of the type, or text that is not base64 is a label saying why', () => {
  const big = b64('\x89PNG\r\n\x1a\n' + '\x00'.repeat(RESULT_MEDIA_LIMITS.imageBytes))
  const v = resultMediaView({ mimeType: 'image/png', data: big }, tool)
  assert.equal(v.kind === 'label' && v.text, 'image (image/png, 2.0 MiB): too large to show inline (over 2.0 MiB)')
  const disguised = resultMediaView({ mimeType: 'image/png', data: svg }, tool)
  assert.equal(disguised.kind, 'label', 'an SVG sent as image/png is not put in an img')
  assert.match(disguised.kind === 'label' ? disguised.text : '', /its bytes are not image\/png/)
  for (const data of ['javascript:alert(1)', `${png}"onerror="alert(1)`, `${png.slice(0, -1)}`, 'data:image/png;base64,' + png]) {
    const bad = resultMediaView({ mimeType: 'image/png', data }, tool)
    assert.equal(bad.kind === 'label' && bad.text, 'image (image/png): not valid base64, not shown', data.slice(0, 30))
  }
})

test("a tool row shows its result's images under the call and the rest as labels, at most RESULT_MEDIA_LIMITS.count", () => {
  const media: ToolResultMedia[] = [{ mimeType: 'image/png', data: png }, { mimeType: 'image/svg+xml', data: svg }]
  for (let i = 0; i < RESULT_MEDIA_LIMITS.count; i++) media.push({ mimeType: 'audio/wav', data: 'AAAA' })
  const row = {
    event: { kind: 'tool' as const, tool, callId: 'c1', text: 'MCP everything: get-tiny-image', input: {}, turnId: 'T1' },
    result: { kind: 'tool-result' as const, tool, callId: 'c1', text: "Here's the image you requested:\n[image image/png, 67 bytes]", media, turnId: 'T1' },
  }
  let r!: TestRenderer.ReactTestRenderer
  act(() => {
    r = TestRenderer.create(h(TranscriptItem, { row }))
  })
  const list = r.root.find((n) => n.props['aria-label'] === `Media from ${tool}`)
  const imgs = list.findAllByType('img')
  assert.equal(imgs.length, 1, 'only the PNG is an img')
  assert.equal(imgs[0]!.props.src, `data:image/png;base64,${png}`)
  assert.equal(imgs[0]!.props.alt, `Image 1 of 10 from ${tool}`)
  const texts = list.findAll((n) => n.props.className === 'zd-media-label').map((n) => n.children.join(''))
  assert.equal(texts.length, RESULT_MEDIA_LIMITS.count - 1)
  assert.match(texts[0]!, /^image \(image\/svg\+xml, \d+ B\): SVG is not shown inline$/)
  assert.equal(list.findAll((n) => n.props.className === 'zd-muted')[0]!.children.join(''), '2 more media blocks not shown')
  // A result without media shows no list.
  const { media: _, ...plain } = row.result
  act(() => r.update(h(TranscriptItem, { row: { event: row.event, result: plain } })))
  assert.equal(r.root.findAll((n) => n.props['aria-label'] === `Media from ${tool}`).length, 0)
})
