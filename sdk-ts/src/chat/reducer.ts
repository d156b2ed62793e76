// applyLiveEvent: merges streamed events into transcript rows the way the server's transcript does,
// so a live transcript equals sessions.loadEvents once the run ends (client case C20).
import type { StreamEvent } from '../protocol.js'

/**
 * Adds one live event to a transcript and returns the new transcript (the input is never changed).
 *
 * The rule (the client seed's, and the server's transcript writer's): a `markdown` event with
 * `streaming: true`, or a streaming `thinking` event, extends the open block of its kind when that
 * block is the last row and belongs to the same turn; otherwise it opens a new block. Any other event
 * is its own row and closes the open block. So thinking or markdown after a tool row starts a new
 * block, as sessions.loadEvents has it. An open block keeps `streaming: true`; closeOpenBlock (at
 * `turn:end` and `run:end`) sets it to false, as loadEvents returns merged blocks.
 */
export function applyLiveEvent(rows: readonly StreamEvent[], event: StreamEvent): readonly StreamEvent[] {
  if ((event.kind === 'markdown' || event.kind === 'thinking') && event.streaming) {
    const last = rows[rows.length - 1]
    if (last !== undefined && last.kind === event.kind && last.streaming && last.turnId === event.turnId) {
      const merged = { ...last, text: last.text + event.text }
      const out = rows.slice(0, -1)
      out.push(merged)
      return out
    }
    const out = closeOpenBlock(rows).slice()
    out.push({ ...event })
    return out
  }
  const out = closeOpenBlock(rows).slice()
  out.push(event)
  return out
}

/** Marks the last row closed (streaming: false) if it is an open markdown or thinking block. */
export function closeOpenBlock(rows: readonly StreamEvent[]): readonly StreamEvent[] {
  const last = rows[rows.length - 1]
  if (last === undefined || !isOpenBlock(last)) return rows
  const out = rows.slice(0, -1)
  out.push({ ...last, streaming: false })
  return out
}

/** True for a markdown or thinking row still being streamed. */
export function isOpenBlock(row: StreamEvent): row is Extract<StreamEvent, { kind: 'markdown' | 'thinking' }> {
  return (row.kind === 'markdown' || row.kind === 'thinking') && row.streaming
}
