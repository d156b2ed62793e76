// A Server-Sent Events parser for a fetch body (the HTML standard's "event stream interpretation"),
// so createSseHost can stream with fetch and send headers: lines end with CRLF, LF or CR (also when
// a CR and its LF arrive in different chunks); `:` starts a comment; a field's value loses one
// leading space; data lines join with LF; a blank line dispatches the record (one without data is
// dropped, as EventSource does); an id holding NUL is ignored; retry is ignored (the host backs off
// by its own rule).

/** One dispatched record: its id (when the record had an id: line), its event type (default "message") and its data. */
export interface SseMessage {
  readonly id?: string
  readonly event: string
  readonly data: string
}

/** Feeds text chunks in order; calls onMessage for each record a blank line completes. */
export interface SseParser {
  push(chunk: string): void
}

/** Creates a parser calling onMessage per record. */
export function createSseParser(onMessage: (m: SseMessage) => void): SseParser {
  let buf = ''
  let data: string[] = []
  let event = ''
  let id: string | undefined

  function line(l: string) {
    if (l === '') {
      if (data.length > 0) {
        const m: { id?: string; event: string; data: string } = { event: event === '' ? 'message' : event, data: data.join('\n') }
        if (id !== undefined) m.id = id
        onMessage(m)
      }
      data = []
      event = ''
      id = undefined
      return
    }
    if (l.charCodeAt(0) === 58) return // ':' a comment (heartbeats)
    const c = l.indexOf(':')
    const field = c < 0 ? l : l.slice(0, c)
    let value = c < 0 ? '' : l.slice(c + 1)
    if (value.charCodeAt(0) === 32) value = value.slice(1)
    switch (field) {
      case 'data':
        data.push(value)
        return
      case 'event':
        event = value
        return
      case 'id':
        if (!value.includes('\0')) id = value
        return
      default:
        return // retry and unknown fields
    }
  }

  return {
    push(chunk) {
      buf += chunk
      let start = 0
      for (;;) {
        let i = start
        while (i < buf.length && buf.charCodeAt(i) !== 10 && buf.charCodeAt(i) !== 13) i++
        if (i >= buf.length) break
        // A CR at the chunk's end may be the first half of a CRLF: wait for the next chunk.
        if (buf.charCodeAt(i) === 13 && i + 1 >= buf.length) break
        line(buf.slice(start, i))
        start = buf.charCodeAt(i) === 13 && buf.charCodeAt(i + 1) === 10 ? i + 2 : i + 1
      }
      buf = buf.slice(start)
    },
  }
}
