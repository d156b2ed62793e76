// A fake clock for the client's timers: advance() fires due timers in order and lets real I/O
// (sockets, fetch) run between them.
import type { Clock } from '../../src/client/index.js'

export const realDelay = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

export class FakeClock implements Clock {
  t = 0
  private seq = 0
  private timers = new Map<number, { at: number; fn: () => void }>()

  now = () => this.t
  setTimeout = (fn: () => void, ms: number): unknown => {
    const id = ++this.seq
    this.timers.set(id, { at: this.t + Math.max(0, ms), fn })
    return id
  }
  clearTimeout = (h: unknown) => {
    this.timers.delete(h as number)
  }

  /** Timers still scheduled. */
  get pending(): number {
    return this.timers.size
  }

  /** Moves time forward by ms, firing each due timer at its time; settle ms of real time after each. */
  async advance(ms: number, settle = 25): Promise<void> {
    const target = this.t + ms
    for (;;) {
      let next: [number, { at: number; fn: () => void }] | undefined
      for (const e of this.timers) if (e[1].at <= target && (!next || e[1].at < next[1].at || (e[1].at === next[1].at && e[0] < next[0]))) next = e
      if (!next) break
      this.timers.delete(next[0])
      this.t = next[1].at
      next[1].fn()
      await realDelay(settle)
    }
    this.t = target
    await realDelay(settle)
  }

  /** Jumps the time without firing anything (a throttled tab), then fires what is overdue at the new time. */
  async jump(ms: number, settle = 15): Promise<void> {
    this.t += ms
    for (const [id, e] of [...this.timers].sort((a, b) => a[1].at - b[1].at)) {
      if (e.at > this.t || !this.timers.has(id)) continue
      this.timers.delete(id)
      e.fn()
      await realDelay(settle)
    }
  }
}

/** Waits until cond() holds (real time), failing after ms. */
export async function until(cond: () => boolean, ms = 5000, what = 'condition'): Promise<void> {
  const end = Date.now() + ms
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await realDelay(5)
  }
}
