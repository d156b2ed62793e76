// Starts the real zidane-server binary (bin/zidane-server, built by `make build`) for the SDK's
// integration tests: on a fresh database of DATABASE_URL's server (created with psql, dropped at the
// end), or on its own managed Postgres under the data dir when DATABASE_URL is not set.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { chmodSync, existsSync, mkdtempSync, realpathSync, rmSync } from 'node:fs'
import net from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { realDelay } from './clock.js'

/** The repository's root: dist-test/test/helpers/ is four levels below it. */
const repo = fileURLToPath(new URL('../../../../', import.meta.url))
export const serverBin = process.env['ZIDANE_SERVER_BIN'] ?? join(repo, 'bin', 'zidane-server')

export function requireBinary(): void {
  if (!existsSync(serverBin)) throw new Error(`${serverBin} is missing: run \`make build\` in the repository (make test does) or set ZIDANE_SERVER_BIN.`)
}

export async function freePort(): Promise<number> {
  const s = net.createServer()
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()))
  const port = (s.address() as net.AddressInfo).port
  await new Promise<void>((r) => s.close(() => r()))
  return port
}

function cleanEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {}
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('ZIDANE_') && k !== 'DATABASE_URL') env[k] = v
  return env
}

/** A database for one server: a fresh one on DATABASE_URL's server, or none (the managed Postgres). */
export class Database {
  readonly url: string | undefined
  private name: string | undefined
  constructor() {
    const base = process.env['DATABASE_URL']
    if (!base) return
    this.name = `zt_sdk_${randomBytes(6).toString('hex')}`
    execFileSync('psql', [base, '-q', '-c', `CREATE DATABASE ${this.name} TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'`], { stdio: 'pipe' })
    const u = new URL(base)
    u.pathname = `/${this.name}`
    this.url = u.toString()
  }
  drop() {
    const base = process.env['DATABASE_URL']
    if (!base || !this.name) return
    try {
      execFileSync('psql', [base, '-q', '-c', `DROP DATABASE IF EXISTS ${this.name} WITH (FORCE)`], { stdio: 'pipe' })
    } catch {
      // best effort
    }
  }
}

export interface ServerOptions {
  db: Database
  dataDir?: string
  port?: number
  extra?: string[]
}

export class ServerProcess {
  proc!: ChildProcess
  stderr = ''
  readonly dataDir: string
  readonly port: number
  readonly root: string
  private exited!: Promise<number | null>

  private constructor(
    readonly opts: ServerOptions,
    port: number,
  ) {
    this.dataDir = opts.dataDir ?? mkdtempSync(join(tmpdir(), 'zsdk-data-'))
    chmodSync(this.dataDir, 0o711) // a managed Postgres run as root drops to the postgres user
    this.root = realpathSync(mkdtempSync(join(tmpdir(), 'zsdk-root-')))
    this.port = port
  }

  static async start(opts: ServerOptions): Promise<ServerProcess> {
    requireBinary()
    const s = new ServerProcess(opts, opts.port ?? (await freePort()))
    await s.launch()
    return s
  }

  get url() {
    return `ws://127.0.0.1:${this.port}`
  }

  private dbArgs(): string[] {
    return this.opts.db.url ? ['--database-url', this.opts.db.url] : []
  }

  async launch(): Promise<void> {
    const args = ['start', '--listen', `127.0.0.1:${this.port}`, '--data-dir', this.dataDir, '--workspace-root', this.root, ...this.dbArgs(), ...(this.opts.extra ?? [])]
    this.stderr = ''
    this.proc = spawn(serverBin, args, { env: cleanEnv(), stdio: ['ignore', 'ignore', 'pipe'] })
    this.proc.stderr!.on('data', (d: Buffer) => (this.stderr += d.toString()))
    this.exited = new Promise((r) => this.proc.once('exit', (code) => r(code)))
    const end = Date.now() + 60_000
    for (;;) {
      if (this.proc.exitCode !== null) throw new Error(`zidane-server exited (${this.proc.exitCode}) before it was healthy:\n${this.stderr}`)
      try {
        const res = await fetch(`http://127.0.0.1:${this.port}/healthz`)
        if (res.status === 200 && (await res.text()) === 'ok') return
      } catch {
        // not yet
      }
      if (Date.now() > end) throw new Error(`zidane-server not healthy within 60 s:\n${this.stderr}`)
      await realDelay(50)
    }
  }

  /** SIGTERM, and waits for the exit. */
  async stop(): Promise<number | null> {
    if (this.proc.exitCode !== null) return this.proc.exitCode
    this.proc.kill('SIGTERM')
    const t = setTimeout(() => this.proc.kill('SIGKILL'), 20_000)
    const code = await this.exited
    clearTimeout(t)
    return code
  }

  private cli(args: string[]): string {
    return execFileSync(serverBin, [...args, '--data-dir', this.dataDir, ...this.dbArgs()], { env: cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] }).toString().trim()
  }

  mintToken(name: string, scope = 'chat'): string {
    const tok = this.cli(['token', 'create', '--name', name, '--scope', scope])
    if (!tok.startsWith('zds_')) throw new Error(`token create printed ${tok}`)
    return tok
  }

  /** A single-use pairing code (zidane-server pair) that POST /zidane/pair trades for a token of scope. */
  pairCode(scope = 'chat'): string {
    const out = this.cli(['pair', '--scope', scope])
    const code = /[A-Z0-9]{4}-[A-Z0-9]{4}/.exec(out)?.[0]
    if (!code) throw new Error(`pair printed ${out}`)
    return code
  }

  revokeToken(name: string): void {
    this.cli(['token', 'revoke', name])
  }

  cleanup() {
    rmSync(this.root, { recursive: true, force: true })
    if (!this.opts.dataDir) rmSync(this.dataDir, { recursive: true, force: true })
  }
}
