// `make bench`'s browser figures (issue 24 section 4), measured in headless Chromium against the
// real bin/zidane-server serving the built app, printed as a Markdown table of budgets:
// the initial route's JavaScript gzipped (lazy chunks apart), a streamed piece's delay from its
// arrival on the page's WebSocket to the DOM showing it (p50, in ms and in animation frames), long
// tasks over a 5,000-piece run, and a 10,000-row transcript's open time and scroll.
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { gzipSync } from 'node:zlib'
import { benchScripts, distDir, launchBrowser, scrollTranscriptToTop, startServer, streamRows } from './harness.js'

type Row = { figure: string; value: number; unit: string; op: '<=' | '>='; target: number }
const rows: Row[] = []
const fmt = (v: number) => (Number.isInteger(v) ? String(v) : v.toFixed(1))

function jsSizes(): void {
  const html = readFileSync(join(distDir, 'index.html'), 'utf8')
  const initial = new Set([...html.matchAll(/(?:src|href)="\/?(assets\/[^"]+\.js)"/g)].map((m) => m[1]!))
  const gz = (f: string) => gzipSync(readFileSync(join(distDir, f)), { level: 9 }).length / 1024
  let first = 0
  for (const f of initial) first += gz(f)
  rows.push({ figure: 'initial route JavaScript, gzipped', value: first, unit: 'KiB', op: '<=', target: 300 })
  for (const f of readdirSync(join(distDir, 'assets')).filter((f) => f.endsWith('.js') && !initial.has(`assets/${f}`)))
    rows.push({ figure: `lazy chunk ${f.replace(/-[\w-]{8}\.js$/, '')}, gzipped (not in the initial route)`, value: gz(`assets/${f}`), unit: 'KiB', op: '<=', target: 300 })
}

/** Runs in the page before the app: marks each streamed piece's arrival, DOM changes, frames, long tasks. */
function instrument(token: string): void {
  localStorage.setItem('zidane.auth', JSON.stringify({ token, scope: 'chat' }))
  const w = window as unknown as Record<string, number[]>
  w['arrivals'] = []
  w['mutations'] = []
  w['frames'] = []
  w['longtasks'] = []
  const closes: string[] = []
  ;(window as unknown as { closes: string[] }).closes = closes
  const Orig = window.WebSocket
  window.WebSocket = class extends Orig {
    constructor(url: string | URL, protocols?: string | string[]) {
      super(url, protocols)
      this.addEventListener('close', (e) => closes.push(`${e.code}${e.reason ? ` ${e.reason}` : ''}`))
      this.addEventListener('message', (e) => {
        if (typeof e.data === 'string' && e.data.includes('"streaming":true')) {
          performance.mark('piece')
          w['arrivals']!.push(performance.now())
        }
      })
    }
  } as typeof WebSocket
  new PerformanceObserver((l) => {
    for (const e of l.getEntries()) w['longtasks']!.push(e.duration)
  }).observe({ type: 'longtask', buffered: true })
  const tick = () => {
    w['frames']!.push(performance.now())
    requestAnimationFrame(tick)
  }
  requestAnimationFrame(tick)
  addEventListener('DOMContentLoaded', () => {
    new MutationObserver(() => w['mutations']!.push(performance.now())).observe(document.body, { subtree: true, childList: true, characterData: true })
  })
}

function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b)
  return s.length === 0 ? NaN : s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!
}

async function main(): Promise<void> {
  jsSizes()
  const { server, db } = await startServer(['--max-output-tokens', '200000'], benchScripts)
  const base = `http://127.0.0.1:${server.port}`
  const browser = await launchBrowser()
  try {
    const context = await browser.newContext({ viewport: { width: 1100, height: 760 } })
    await context.addInitScript(instrument, server.mintToken('bench'))
    const page = await context.newPage()
    await page.goto(base)
    await page.getByRole('status', { name: 'Connection' }).getByText('Connected').waitFor()

    // A paced stream (as a fast model streams), then 5,000 pieces back to back: arrival → DOM
    // in ms and in animation frames, the frame interval measured in the same run (what "one
    // animation frame" is on this machine), and long tasks.
    const stream = async (model: string, prompt: string, end: string) => {
      const before = page.url()
      await page.getByRole('button', { name: 'New session' }).first().click()
      await page.waitForURL((u) => u.pathname.startsWith('/s/') && u.href !== before)
      await page.getByLabel('Model').selectOption(model)
      await page.getByRole('textbox', { name: 'Message' }).fill(prompt)
      await page.waitForFunction(() => [...document.querySelectorAll('button')].some((b) => b.textContent === 'Send' && !b.disabled))
      await page.evaluate(() => {
        const w = window as unknown as Record<string, number[]>
        for (const k of ['arrivals', 'mutations', 'frames', 'longtasks']) w[k]!.length = 0
      })
      await page.getByRole('textbox', { name: 'Message' }).press('Enter')
      await page.getByRole('log', { name: 'Transcript' }).getByText(end, { exact: false }).waitFor({ timeout: 120_000 })
      const m = await page.evaluate(() => {
        const w = window as unknown as Record<string, number[]>
        return { arrivals: w['arrivals']!, mutations: w['mutations']!, frames: w['frames']!, longtasks: w['longtasks']! }
      })
      const delays: number[] = []
      const frames: number[] = []
      let mi = 0
      let fi = 0
      for (const a of m.arrivals) {
        while (mi < m.mutations.length && m.mutations[mi]! < a) mi++
        if (mi >= m.mutations.length) break
        const shown = m.mutations[mi]!
        delays.push(shown - a)
        while (fi < m.frames.length && m.frames[fi]! <= a) fi++
        let n = 0
        for (let j = fi; j < m.frames.length && m.frames[j]! <= shown; j++) n++
        frames.push(n)
      }
      const first = m.arrivals[0] ?? 0
      const last = m.arrivals[m.arrivals.length - 1] ?? 0
      const during = m.frames.filter((f) => f >= first && f <= last)
      const intervals = during.slice(1).map((f, i) => f - during[i]!)
      return { delays, frames, interval: percentile(intervals, 50), longtasks: m.longtasks }
    }
    const paced = await stream('paced/scripted', 'Stream paced pieces.', 'END-OF-PACED')
    rows.push({ figure: `paced stream (50 pieces/s): arrival on the WebSocket → shown in the DOM, p50 (${paced.delays.length} pieces)`, value: percentile(paced.delays, 50), unit: 'ms', op: '<=', target: 16.7 })
    rows.push({ figure: 'paced stream: animation frames from arrival to shown, p50', value: percentile(paced.frames, 50), unit: 'frames', op: '<=', target: 1 })
    rows.push({ figure: 'paced stream: the frame interval while it streams, p50 (for reference)', value: paced.interval, unit: 'ms', op: '<=', target: 16.7 })
    const flood = await stream('many/scripted', 'Stream 5000 pieces.', 'END-OF-PIECES')
    rows.push({ figure: `5,000 pieces back to back: arrival → shown, p50 (${flood.delays.length} pieces; target: the frame interval measured in this run)`, value: percentile(flood.delays, 50), unit: 'ms', op: '<=', target: Math.round(flood.interval * 10) / 10 })
    rows.push({ figure: '5,000 pieces back to back: animation frames from arrival to shown, p50', value: percentile(flood.frames, 50), unit: 'frames', op: '<=', target: 1 })
    rows.push({ figure: 'long tasks over 50 ms during a 5,000-piece run', value: flood.longtasks.filter((d) => d > 50).length, unit: '', op: '<=', target: 0 })
    rows.push({ figure: 'longest task during a 5,000-piece run', value: Math.max(0, ...flood.longtasks), unit: 'ms', op: '<=', target: 50 })

    // A 10,000-row transcript: streamed, then opened by a fresh page, then scrolled to the top.
    // The page's connection must hold through all of it (a close is a drop the user sees).
    const closed = () => page.evaluate(() => [...(window as unknown as { closes: string[] }).closes])
    const before = (await closed()).length
    await streamRows(page)
    const drops = (await closed()).slice(before)
    rows.push({ figure: `10,000-row run: the page's WebSocket closes while it streams${drops.length ? ` (${drops.join('; ')})` : ''}`, value: drops.length, unit: '', op: '<=', target: 0 })
    const url = page.url()
    const fresh = await context.newPage()
    const t0 = Date.now()
    await fresh.goto(url)
    await fresh.getByRole('log', { name: 'Transcript' }).getByText('END-OF-ROWS', { exact: false }).waitFor({ timeout: 60_000 })
    rows.push({ figure: '10,000-row transcript: page load to its last row shown', value: Date.now() - t0, unit: 'ms', op: '<=', target: 1000 })
    const run = await fresh.evaluate(scrollTranscriptToTop)
    const scroll = { steps: run.steps, longtasks: run.longtasks.filter((d) => d > 50).length }
    rows.push({ figure: `10,000-row transcript: long tasks over 50 ms scrolling to the top (${scroll.steps} frames)`, value: scroll.longtasks, unit: '', op: '<=', target: 0 })
  } finally {
    await browser.close()
    await server.stop()
    server.cleanup()
    db.drop()
  }
  console.log('| browser figure (Chromium, the embedded app) | value | target | verdict |')
  console.log('|---|---|---|---|')
  for (const r of rows) {
    const pass = r.op === '<=' ? r.value <= r.target : r.value >= r.target
    console.log(`| ${r.figure} | ${fmt(r.value)}${r.unit ? ` ${r.unit}` : ''} | ${r.op} ${r.target}${r.unit ? ` ${r.unit}` : ''} | ${pass ? 'pass' : '**fail**'} |`)
  }
}

main().catch((e: unknown) => {
  console.error(e)
  process.exit(1)
})
