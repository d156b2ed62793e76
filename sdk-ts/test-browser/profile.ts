// A CPU profile of the bench's 10,000-row scroll (npm run profile:browser): the real binary and the
// embedded app, the rows scenario streamed, a fresh page opened on it, then Chromium's profiler
// (CDP Profiler.*) over the scroll to the top; prints the long tasks and the functions with the
// most self time. A tool for finding what a budget's miss costs, not a test.
import { benchScripts, launchBrowser, scrollTranscriptToTop, startServer, streamRows } from './harness.js'

type Node = { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; hitCount?: number }

async function main(): Promise<void> {
  const { server, db } = await startServer(['--max-output-tokens', '200000'], benchScripts)
  const browser = await launchBrowser()
  try {
    const context = await browser.newContext({ viewport: { width: 1100, height: 760 } })
    await context.addInitScript((token: string) => {
      localStorage.setItem('zidane.auth', JSON.stringify({ token, scope: 'chat' }))
      const w = window as unknown as Record<string, number[]>
      w['longtasks'] = []
      new PerformanceObserver((l) => {
        for (const e of l.getEntries()) w['longtasks']!.push(e.duration)
      }).observe({ type: 'longtask', buffered: true })
    }, server.mintToken('profile'))
    const page = await context.newPage()
    await page.goto(`http://127.0.0.1:${server.port}`)
    await streamRows(page)
    const fresh = await context.newPage()
    await fresh.goto(page.url())
    await fresh.getByRole('log', { name: 'Transcript' }).getByText('END-OF-ROWS', { exact: false }).waitFor({ timeout: 60_000 })
    const cdp = await context.newCDPSession(fresh)
    await cdp.send('Profiler.enable')
    await cdp.send('Profiler.setSamplingInterval', { interval: 200 })
    await cdp.send('Profiler.start')
    const run = await fresh.evaluate(scrollTranscriptToTop)
    const r = { steps: run.steps, long: run.longtasks.filter((d) => d > 50) }
    const { profile } = (await cdp.send('Profiler.stop')) as { profile: { nodes: Node[]; samples: number[]; timeDeltas: number[] } }
    const self = new Map<string, number>()
    const dt = new Map<number, number>()
    profile.samples.forEach((id, i) => dt.set(id, (dt.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)))
    for (const n of profile.nodes) {
      const f = n.callFrame
      const key = `${f.functionName || '(anonymous)'} ${f.url.replace(/^.*\//, '')}:${f.lineNumber}`
      self.set(key, (self.get(key) ?? 0) + (dt.get(n.id) ?? 0) / 1000)
    }
    console.log(`scroll: ${r.steps} frames, long tasks over 50 ms: ${r.long.length} (${r.long.map((d) => Math.round(d)).join(', ')} ms)`)
    for (const [k, ms] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 25)) console.log(`${ms.toFixed(1).padStart(8)} ms  ${k}`)
  } finally {
    await browser.close()
    await server.stop()
    server.cleanup()
    db.drop()
  }
}

main().catch((e: unknown) => {
  console.error(e)
  process.exit(1)
})
