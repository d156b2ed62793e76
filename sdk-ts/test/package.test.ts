// The package as a user gets it: the example runs against the real server and prints the scripted
// answer; `npm pack` gives a tarball that a fresh project outside the repository installs offline and
// imports; the built files use no Node-only API.
import net from 'node:net'
import assert from 'node:assert/strict'
import { execFile, execFileSync } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { test } from 'node:test'
import { Database, ServerProcess } from './helpers/server.js'

const sdk = fileURLToPath(new URL('../../', import.meta.url))
const run = promisify(execFile)

test('the example prints the scripted answer', async (t) => {
  const db = new Database()
  const server = await ServerProcess.start({ db })
  t.after(async () => {
    await server.stop()
    server.cleanup()
    db.drop()
  })
  const token = server.mintToken('example')
  const { stdout } = await run(process.execPath, [join(sdk, 'examples', 'node-chat.mjs'), 'Say hello.'], {
    env: { ...process.env, ZIDANE_URL: server.url, ZIDANE_TOKEN: token },
    timeout: 30_000,
  })
  assert.match(stdout, /^Hello! Let me look that up\./)
  assert.match(stdout, /\[tool\] lookup\("Say hello\."\)/)
  assert.match(stdout, /The lookup found: 2 word\(s\) in "Say hello\."; the scripted agent is ready\./)
})

test('the example gives up, saying what to do, when no server answers', async () => {
  const s = net.createServer()
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()))
  const port = (s.address() as net.AddressInfo).port
  await new Promise<void>((r) => s.close(() => r())) // a port nothing listens on
  const err = await run(process.execPath, [join(sdk, 'examples', 'node-chat.mjs'), 'Say hello.'], {
    env: { ...process.env, ZIDANE_URL: `ws://127.0.0.1:${port}`, ZIDANE_TOKEN: 'zds_unused' },
    timeout: 30_000,
  }).then(
    () => assert.fail('the example exited 0 with no server'),
    (e: { code?: number; stderr?: string }) => e,
  )
  assert.equal(err.code, 1)
  assert.match(err.stderr ?? '', /No server answers at ws:\/\/127\.0\.0\.1:\d+ after 5 tries .*Start it \(make run\), or set ZIDANE_URL/)
})

function walk(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => (statSync(join(dir, f)).isDirectory() ? walk(join(dir, f)) : [join(dir, f)]))
}

test('dist uses no Node-only API (browsers and workers load it)', () => {
  for (const f of walk(join(sdk, 'dist')).filter((f) => f.endsWith('.js'))) {
    const src = readFileSync(f, 'utf8')
    assert.doesNotMatch(src, /from ['"]node:|\brequire\(|\bprocess\.|\bBuffer\b/, f)
  }
})

test('npm pack: the tarball installs offline in a project outside the repository and every entry imports', async (t) => {
  const tmp = mkdtempSync(join(tmpdir(), 'zsdk-pack-'))
  t.after(() => rmSync(tmp, { recursive: true, force: true }))
  const out = execFileSync('npm', ['pack', '--silent', '--pack-destination', tmp], { cwd: sdk }).toString().trim().split('\n').at(-1)!
  const tarball = join(tmp, out)
  const files = execFileSync('tar', ['-tzf', tarball]).toString().split('\n')
  assert.ok(files.includes('package/dist/client/index.d.ts'), 'declarations are packed')
  assert.ok(!files.some((f) => f.startsWith('package/src/') || f.startsWith('package/test/')), 'only dist and the README')
  const app = join(tmp, 'app')
  execFileSync('mkdir', ['-p', app])
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', type: 'module', private: true, dependencies: { '@zidane/sdk': `file:${tarball}` } }))
  execFileSync('npm', ['install', '--offline', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: app })
  const script = `
    const root = await import('@zidane/sdk')
    const client = await import('@zidane/sdk/client')
    const chat = await import('@zidane/sdk/chat')
    const adapters = await import('@zidane/sdk/adapters')
    const protocol = await import('@zidane/sdk/protocol')
    const server = await import('@zidane/sdk/server')
    const ok = typeof server.createSseHandler === 'function' && typeof server.toNodeHandler === 'function' && typeof client.createServerClient === 'function' && typeof chat.createSessionStreams === 'function' &&
      typeof chat.applyLiveEvent === 'function' && typeof adapters.createServerHost === 'function' &&
      typeof adapters.createRunHost === 'function' && typeof adapters.createSseHost === 'function' && typeof adapters.createWorkerHost === 'function' &&
      protocol.PROTOCOL_VERSION === 16 && root.ErrorCode.MethodNotFound === -32601
    let react = 'loaded'
    try { await import('@zidane/sdk/react') } catch (e) { react = String(e.message) }
    console.log(JSON.stringify({ ok, react }))
  `
  writeFileSync(join(app, 'check.mjs'), script)
  const { stdout } = await run(process.execPath, ['check.mjs'], { cwd: app })
  const res = JSON.parse(stdout) as { ok: boolean; react: string }
  assert.equal(res.ok, true)
  assert.match(res.react, /Cannot find package 'react'/, 'React is an optional peer of the react entry only')
  assert.ok(!readdirSync(join(app, 'node_modules')).includes('react'), 'no runtime dependency was installed')
})
