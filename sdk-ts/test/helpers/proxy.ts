// Cut proxy (CP): a TCP proxy between the client and a server, with the client cases' controls:
// rst() destroys both sides, blackhole() stops forwarding on open pairs (no FIN, no RST), stall()
// accepts new sockets but forwards nothing until release(), respond(status) answers upgrades with a
// canned HTTP status. It counts sockets open at the same time. For HTTP it remembers each pair's
// latest request line (rstWhere cuts the pairs carrying a given request; onClose hears a pair end).
import net from 'node:net'

/** One proxied connection: the client's socket, the upstream one and the latest HTTP request line the client sent on it. */
export interface Pair {
  client: net.Socket
  request?: string
  upstream?: net.Socket
  blackholed: boolean
  buffered: Buffer[]
}

export class CutProxy {
  server!: net.Server
  port = 0
  pairs = new Set<Pair>()
  accepted = 0
  maxOpen = 0
  mode: { kind: 'forward' } | { kind: 'stall' } | { kind: 'respond'; status: number } = { kind: 'forward' }
  private stalled: Pair[] = []
  private closers = new Set<(p: Pair) => void>()

  constructor(public targetPort: number) {}

  static async start(targetPort: number): Promise<CutProxy> {
    const p = new CutProxy(targetPort)
    p.server = net.createServer((sock) => p.onSocket(sock))
    await new Promise<void>((r) => p.server.listen(0, '127.0.0.1', () => r()))
    p.port = (p.server.address() as net.AddressInfo).port
    return p
  }

  get url() {
    return `ws://127.0.0.1:${this.port}`
  }
  get open(): number {
    return this.pairs.size
  }

  private onSocket(client: net.Socket) {
    this.accepted++
    const pair: Pair = { client, blackholed: false, buffered: [] }
    this.pairs.add(pair)
    this.maxOpen = Math.max(this.maxOpen, this.pairs.size)
    client.on('error', () => {})
    client.on('close', () => {
      this.pairs.delete(pair)
      pair.upstream?.destroy()
      for (const f of [...this.closers]) f(pair)
    })
    const mode = this.mode
    if (mode.kind === 'respond') {
      client.once('data', () => {
        client.end(`HTTP/1.1 ${mode.status} Refused\r\nContent-Type: text/plain\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`)
      })
      return
    }
    client.on('data', (d) => {
      const line = /^(GET|POST|PUT|DELETE|PATCH|HEAD|OPTIONS) \S+ HTTP\/1\.[01]/m.exec(d.toString('latin1'))
      if (line) pair.request = line[0]
      if (pair.blackholed) return
      if (pair.upstream) pair.upstream.write(d)
      else pair.buffered.push(d)
    })
    if (mode.kind === 'stall') {
      this.stalled.push(pair)
      return
    }
    this.connectUpstream(pair)
  }

  private connectUpstream(pair: Pair) {
    const up = net.connect(this.targetPort, '127.0.0.1')
    pair.upstream = up
    up.on('error', () => pair.client.destroy())
    up.on('close', () => {
      if (!pair.blackholed) pair.client.destroy()
    })
    up.on('data', (d) => {
      if (!pair.blackholed && !pair.client.destroyed) pair.client.write(d)
    })
    for (const b of pair.buffered.splice(0)) up.write(b)
  }

  /** Destroys every open pair with a TCP reset. */
  rst() {
    for (const p of [...this.pairs]) {
      p.upstream?.resetAndDestroy()
      p.client.resetAndDestroy()
      this.pairs.delete(p)
    }
  }
  /** Destroys with a TCP reset the open pairs whose latest request line matches; returns how many. */
  rstWhere(match: (request: string) => boolean): number {
    let n = 0
    for (const p of [...this.pairs]) {
      if (p.request === undefined || !match(p.request)) continue
      p.upstream?.resetAndDestroy()
      p.client.resetAndDestroy()
      this.pairs.delete(p)
      n++
    }
    return n
  }
  /** Calls f when a pair's client side closes (whoever closed it); returns a function that stops it. */
  onClose(f: (p: Pair) => void): () => void {
    this.closers.add(f)
    return () => this.closers.delete(f)
  }
  /** Stops forwarding on every open pair, keeping the sockets open. */
  blackhole() {
    for (const p of this.pairs) p.blackholed = true
  }
  stall() {
    this.mode = { kind: 'stall' }
  }
  /** Connects the stalled sockets upstream and forwards what they sent. */
  release() {
    this.mode = { kind: 'forward' }
    for (const p of this.stalled.splice(0)) if (!p.client.destroyed) this.connectUpstream(p)
  }
  respond(status: number) {
    this.mode = { kind: 'respond', status }
  }
  forward() {
    this.mode = { kind: 'forward' }
  }
  close(): Promise<void> {
    this.rst()
    return new Promise((r) => this.server.close(() => r()))
  }
}
