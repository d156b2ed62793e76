// A readable store: the shape React's useSyncExternalStore and plain code both read.

/** A value that changes over time: read it with get(), hear about changes with subscribe(). */
export interface ReadableStore<T> {
  /** The current value. The same reference until the value changes. */
  get(): T
  /** Calls listener after each change; returns a function that stops it. */
  subscribe(listener: (value: T) => void): () => void
}

/** A ReadableStore the owner can write. set() notifies only when the value is a new reference. */
export interface WritableStore<T> extends ReadableStore<T> {
  set(value: T): void
}

/** Creates a WritableStore holding initial. */
export function createStore<T>(initial: T): WritableStore<T> {
  let value = initial
  const listeners = new Set<(value: T) => void>()
  return {
    get: () => value,
    subscribe(listener) {
      listeners.add(listener)
      return () => {
        listeners.delete(listener)
      }
    },
    set(next) {
      if (Object.is(next, value)) return
      value = next
      for (const l of [...listeners]) l(next)
    },
  }
}
