// The browser tests' harness: the real bin/zidane-server (test/helpers/server.ts) serving the built
// app (server/webapp/dist, embedded by go:embed: build the app before bin/), scripted providers for each scenario, and one headless
// Chromium (Debian's chromium with playwright-core, kept off the network by its flags) for every test.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import http from 'node:http'
import { join, extname, normalize } from 'node:path'
import { fileURLToPath } from 'node:url'
import { chromium, type Browser, type Page } from 'playwright-core'
import { Database, freePort, ServerProcess } from '../test/helpers/server.js'

/** The repository's root (dist-browser/test-browser/ is three levels below it). */
export const repo = fileURLToPath(new URL('../../../', import.meta.url))
export const distDir = join(repo, 'server', 'webapp', 'dist')
/** The ui-in-process example, built by npm run test:browser. */
export const exampleDir = join(repo, 'sdk-ts', 'test-results', 'ui-in-process')
/** Screenshots go here (ignored by git). */
export const shotsDir = join(repo, 'sdk-ts', 'test-results', 'screenshots')

/** The flags of the preamble: headless, and nothing reaches out on its own. */
export const chromiumFlags = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync']

export function chromiumPath(): string {
  for (const p of [process.env['CHROMIUM_BIN'], '/usr/bin/chromium', '/usr/bin/chromium-browser']) if (p && existsSync(p)) return p
  throw new Error('chromium is missing: scripts/bootstrap.sh --browser installs it (apt-get install chromium), or set CHROMIUM_BIN.')
}

export function launchBrowser(): Promise<Browser> {
  return chromium.launch({ executablePath: chromiumPath(), args: chromiumFlags, headless: true })
}

type Step = Record<string, unknown>
const turn = (...steps: Step[]) => ({ steps })
const text = (t: string): Step => ({ text: t })
const delay = (ms: number): Step => ({ delay: ms })

/** The streamed pieces of the stream provider: p01 … p40, 60 ms apart (about 2.5 s a run). */
export const streamPieces = Array.from({ length: 40 }, (_, i) => `p${String(i + 1).padStart(2, '0')} `)

/** The XSS payloads the xss provider streams as model text. */
export const xssText =
  'Payloads: <script>window.__pwned = 1; alert(1)</script> and <img src=x onerror="window.__pwned = 2; alert(2)"> then ' +
  '[click me](javascript:alert(3)) and ![pixel](http://203.0.113.9/pixel.png) and <iframe src="http://203.0.113.9/frame"></iframe>\n\n' +
  '```js\nconst answer = 42 // highlighted\n```\n\nEnd of payloads.'

export const exactCommand = `rm -rf ./important && echo '<b>"quoted"</b>' | tee out.txt`

/** One scripted provider per scenario; a session picks one with the composer's model picker. */
const scripts: Record<string, unknown> = {
  stream: { loop: true, turns: [turn(...streamPieces.flatMap((p) => [text(p), delay(60)]))] },
  slow: { loop: true, turns: [turn(text('Starting a long answer. '), delay(60_000), text('never shown'))] },
  write: {
    turns: [
      turn(text('Writing the notes. '), { tool: { name: 'write_file', arguments: { path: 'notes.txt', content: 'hello from the agent\n' }, id: 'w1' } }),
      turn(text('Now a command. '), { tool: { name: 'exec', arguments: { command: exactCommand }, id: 'x1' } }),
      turn(text('All done.')),
    ],
  },
  ask: { turns: [turn({ ask: { prompt: 'Which color?', options: ['red', 'blue'] } }), turn(text('Thanks for the answer.'))] },
  xss: { loop: true, turns: [turn(text(xssText))] },
  plan: {
    turns: [
      turn(text('Planning. '), { tool: { name: 'update_plan', arguments: { explanation: 'First pass', steps: [{ title: 'Read the code', status: 'done' }, { title: 'Write the fix', status: 'in_progress' }, { title: 'Run the tests', status: 'pending' }] }, id: 'p1' } }),
      turn(text('Plan made.')),
    ],
  },
}

/**
 * The bench's providers: paced (400 pieces 20 ms apart, 50 a second, as a fast model streams),
 * many (5,000 pieces streamed back to back) and rows (10,000 rows: thinking and text alternate).
 */
export const benchScripts: Record<string, unknown> = {
  paced: { loop: true, turns: [turn(...Array.from({ length: 400 }, (_, i) => [delay(20), text(`p${i} `)]).flat(), text('END-OF-PACED'))] },
  many: { loop: true, turns: [turn(...Array.from({ length: 5000 }, (_, i) => text(`w${i} `)), text('END-OF-PIECES'))] },
  rows: { loop: true, turns: [turn(...Array.from({ length: 5000 }, (_, i) => [{ thinking: `t${i}` }, text(`row ${i}`)]).flat(), text(' END-OF-ROWS'))] },
}

/**
 * A fake OpenAI-compatible endpoint (Chat Completions, streamed): records each request's JSON body
 * and answers "Got it." as the real wire format streams it; GET /models lists gpt-fake. Its base URL goes in a provider "fake"
 * of kind openai with the model fake/gpt-fake.
 */
export class FakeOpenAI {
  readonly requests: Array<Record<string, unknown>> = []
  private srv?: http.Server
  port = 0
  async start(): Promise<void> {
    this.srv = http.createServer((req, res) => {
      let body = ''
      req.on('data', (d: Buffer) => (body += d.toString()))
      req.on('end', () => {
        if (req.method === 'GET' && (req.url ?? '').endsWith('/models')) {
          res.writeHead(200, { 'content-type': 'application/json' })
          res.end(JSON.stringify({ object: 'list', data: [{ id: 'gpt-fake', object: 'model', created: 0, owned_by: 'test' }] }))
          return
        }
        try {
          this.requests.push(JSON.parse(body) as Record<string, unknown>)
        } catch {
          this.requests.push({ unparsed: body })
        }
        res.writeHead(200, { 'content-type': 'text/event-stream' })
        const chunk = (o: unknown) => res.write(`data: ${JSON.stringify(o)}\n\n`)
        const base = { id: 'c1', object: 'chat.completion.chunk', created: 0, model: 'gpt-fake' }
        chunk({ ...base, choices: [{ index: 0, delta: { role: 'assistant', content: 'Got it.' }, finish_reason: null }] })
        chunk({ ...base, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })
        chunk({ ...base, choices: [], usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 } })
        res.end('data: [DONE]\n\n')
      })
    })
    await new Promise<void>((r) => this.srv!.listen(0, '127.0.0.1', () => r()))
    this.port = (this.srv.address() as { port: number }).port
  }
  get baseUrl(): string {
    return `http://127.0.0.1:${this.port}/v1`
  }
  stop(): Promise<void> {
    return new Promise<void>((r) => {
      if (!this.srv) return r()
      this.srv.closeAllConnections()
      this.srv.close(() => r())
    })
  }
}

/** The server with the scenario providers (default model stream/scripted), and more when given; with openai, a provider "fake" of kind openai at its base URL. */
export async function startServer(extra: string[] = [], more: Record<string, unknown> = {}, openai?: FakeOpenAI): Promise<{ server: ServerProcess; db: Database; configDir: string }> {
  const db = new Database()
  const configDir = join(repo, 'sdk-ts', 'test-results', `config-${process.pid}`)
  mkdirSync(configDir, { recursive: true })
  const all = { ...scripts, ...more }
  for (const [name, script] of Object.entries(all)) writeFileSync(join(configDir, `${name}.json`), JSON.stringify(script))
  const providers: unknown[] = Object.keys(all).map((name) => ({ name, kind: 'scripted', script: `${name}.json` }))
  if (openai) providers.push({ name: 'fake', kind: 'openai', baseUrl: openai.baseUrl, models: [{ name: 'gpt-fake', contextWindow: 100000 }] })
  writeFileSync(join(configDir, 'config.json'), JSON.stringify({ providers, default: 'stream/scripted' }))
  const server = await ServerProcess.start({ db, extra: ['--config', join(configDir, 'config.json'), ...extra] })
  return { server, db, configDir }
}

const types: Record<string, string> = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css' }

/** The ui-sse example, built by npm run test:browser. */
export const sseExampleDir = join(repo, 'sdk-ts', 'test-results', 'ui-sse')

/**
 * A static server of a built page (the examples). With api, requests below api.prefix go to
 * api.handle (a node:http handler: the Node bridge through toNodeHandler), or are forwarded as they
 * are (headers, body, a streamed answer) to 127.0.0.1:api.port, so the page and the SSE protocol
 * share one origin as the seed asks.
 */
export async function serveStatic(port: number, root: string, api?: { prefix: string; port: number } | { prefix: string; handle: http.RequestListener }): Promise<() => Promise<void>> {
  const srv = http.createServer((req, res) => {
    if (api && 'handle' in api && (req.url ?? '').startsWith(api.prefix)) return void api.handle(req, res)
    const proxy = api && 'port' in api ? api : undefined
    if (proxy && (req.url ?? '').startsWith(proxy.prefix)) {
      const up = http.request({ host: '127.0.0.1', port: proxy.port, method: req.method, path: req.url, headers: req.headers }, (ur) => {
        res.writeHead(ur.statusCode ?? 502, ur.headers)
        ur.pipe(res)
      })
      up.on('error', () => res.destroy())
      res.on('close', () => up.destroy())
      req.pipe(up)
      return
    }
    const file = normalize(join(root, new URL(req.url ?? '/', 'http://x').pathname))
    const f = file.startsWith(root) && existsSync(file) && extname(file) !== '' ? file : join(root, 'index.html')
    res.writeHead(200, { 'content-type': types[extname(f)] ?? 'application/octet-stream' })
    res.end(readFileSync(f))
  })
  await new Promise<void>((r) => srv.listen(port, '127.0.0.1', () => r()))
  return () =>
    new Promise<void>((r) => {
      srv.closeAllConnections()
      srv.close(() => r())
    })
}

export { freePort }

/**
 * Runs in a page (page.evaluate): scrolls the transcript from the bottom to the top, 2,000 px a
 * frame, as the bench measures it; returns the frames taken and the long tasks (the page's
 * window.longtasks, durations in ms, emptied first) seen meanwhile.
 */
export async function scrollTranscriptToTop(): Promise<{ steps: number; longtasks: number[] }> {
  const w = window as unknown as Record<string, number[]>
  w['longtasks']!.length = 0
  const log = document.querySelector('[role=log][aria-label=Transcript]') as HTMLElement
  const frame = () => new Promise((r) => requestAnimationFrame(r))
  let steps = 0
  while (log.scrollTop > 0 && steps < 5000) {
    log.scrollTop = Math.max(0, log.scrollTop - 2000)
    await frame()
    steps++
  }
  await frame()
  return { steps, longtasks: [...w['longtasks']!] }
}

/** In a page of the app: a new session on the bench's rows model, "Make 10000 rows." sent, waited until the run ended. */
export async function streamRows(page: Page): Promise<void> {
  const first = page.url()
  await page.getByRole('button', { name: 'New session' }).first().click()
  await page.waitForURL((u) => u.pathname.startsWith('/s/') && u.href !== first)
  await page.getByLabel('Model').selectOption('rows/scripted')
  await page.getByRole('textbox', { name: 'Message' }).fill('Make 10000 rows.')
  await page.waitForFunction(() => [...document.querySelectorAll('button')].some((b) => b.textContent === 'Send' && !b.disabled))
  await page.getByRole('textbox', { name: 'Message' }).press('Enter')
  await page.getByRole('log', { name: 'Transcript' }).getByText('END-OF-ROWS', { exact: false }).waitFor({ timeout: 180_000 })
  await page.getByRole('button', { name: 'Stop' }).waitFor({ state: 'detached', timeout: 60_000 })
}
