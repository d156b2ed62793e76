// The parts of the platform the client uses, as small interfaces, so it runs the same in browsers,
// Web Workers and Node (the global WebSocket of Node 22, or the ws package on Node 20).

/** The part of a WebSocket the client uses: the browser WebSocket and the ws package both fit. */
export interface WebSocketLike {
  readonly readyState: number
  send(data: string): void
  close(code?: number, reason?: string): void
  /** ws only: drops the socket at once without the close handshake. */
  terminate?(): void
  addEventListener(type: 'open', listener: (event: unknown) => void): void
  addEventListener(type: 'message', listener: (event: { data: unknown }) => void): void
  addEventListener(type: 'close', listener: (event: { code: number; reason: string }) => void): void
  addEventListener(type: 'error', listener: (event: { message?: string; error?: unknown }) => void): void
}

/** A WebSocket constructor: globalThis.WebSocket, or WebSocket from the ws package. */
export type WebSocketConstructor = new (url: string, protocols: string[]) => WebSocketLike

/** The part of fetch the client uses for the token check (GET /zidane/token). */
export type FetchLike = (url: string, init: { method: 'GET'; headers: Record<string, string> }) => Promise<{ status: number }>

/** Timers and the time: the platform's by default; tests pass a fake clock. */
export interface Clock {
  now(): number
  setTimeout(fn: () => void, ms: number): unknown
  clearTimeout(handle: unknown): void
}

declare const setTimeout: (fn: () => void, ms: number) => unknown
declare const clearTimeout: (handle: unknown) => void

/** The platform's timers and Date.now. */
export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (h) => clearTimeout(h),
}

/** WebSocket.OPEN, the same in browsers and ws. */
export const OPEN = 1
