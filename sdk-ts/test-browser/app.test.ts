// The web app in a real headless Chromium against the real bin/zidane-server (issue 24, "What it
// must show"): pairing, sessions, streaming, approvals, questions, stop, reload mid-run, a server
// restart, two pages live, shared drafts, XSS payloads, axe-core, screenshots light and dark, and
// the examples on an in-page run host and on createSseHost (ui-sse, over the SSE protocol).
// One browser for the whole file; every wait is on the page's state, never a sleep.
import assert from 'node:assert/strict'
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { execFileSync } from 'node:child_process'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import type { Browser, BrowserContext, Locator, Page } from 'playwright-core'
import type http from 'node:http'
import { WebSocket } from 'ws'
import { createServerClient, type WebSocketConstructor } from '../src/client/index.js'
import { createSseHandler, toNodeHandler } from '../src/server/index.js'
import type { Database, ServerProcess } from '../test/helpers/server.js'
import { agentPickerSwitchesToPlan, agentScripts, forkAndRollBackFromTheTurnMenu, searchOpensTheSession, slashCommandRuns, subagentNestedAndApprovedFromParent, writeProjectFiles, type Ctx } from './agents-cases.js'
import { adminRunsATerminal, chatTokenSeesNoTerminals, type TermCtx } from './terminal-cases.js'
import { mcpScripts, mcpToolImageShowsInline, signInFromTheMcpPage, urlElicitationDoneAndDeclined, type McpCtx } from './mcpweb-cases.js'
import { chipScripts, pathChipOpensTheFile, sidebarSharedAcrossPages, type ChipsCtx } from './chips-cases.js'
import { exactCommand, exampleDir, FakeOpenAI, freePort, launchBrowser, repo, serveStatic, sseExampleDir, shotsDir, startServer, streamPieces } from './harness.js'

const require = createRequire(import.meta.url)
const axeSource = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8')

let browser: Browser
let server: ServerProcess
let db: Database
let base: string
let context: BrowserContext
let page: Page
const openai = new FakeOpenAI()
const problems: string[] = []

/** Records what no page may do: open a dialog, log an error, or ask any other origin for anything. */
function watch(p: Page): void {
  p.on('dialog', (d) => {
    problems.push(`dialog: ${d.message()}`)
    void d.dismiss()
  })
  p.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console error: ${m.text()}`)
  })
  p.on('pageerror', (e) => problems.push(`page error: ${e.message}`))
  p.on('request', (r) => {
    if (!r.url().startsWith(base) && !r.url().startsWith(base.replace('http', 'ws'))) problems.push(`request: ${r.url()}`)
  })
}

const transcript = (p: Page) => p.getByRole('log', { name: 'Transcript' })
const composer = (p: Page) => p.getByRole('textbox', { name: 'Message' })
const connection = (p: Page) => p.getByRole('status', { name: 'Connection' })

async function newSession(p: Page, model?: string): Promise<string> {
  const before = p.url()
  await p.getByRole('button', { name: 'New session' }).first().click()
  await p.waitForURL((u) => u.href !== before && u.pathname.startsWith('/s/'))
  if (model) {
    const picker = p.getByLabel('Model')
    await picker.selectOption(model)
  }
  return decodeURIComponent(new URL(p.url()).pathname.slice(3))
}

async function send(p: Page, text: string): Promise<void> {
  await composer(p).fill(text)
  // Send is enabled once the box has text and a model pick is applied.
  await p.waitForFunction(() => [...document.querySelectorAll('button')].some((b) => b.textContent === 'Send' && !b.disabled))
  await composer(p).press('Enter')
}

/** Waits until the session's run ended (the Stop button went away) with text in the transcript. */
async function waitForText(p: Page, text: string): Promise<void> {
  await transcript(p).getByText(text, { exact: false }).first().waitFor({ timeout: 20_000 })
}
async function waitIdle(p: Page): Promise<void> {
  await p.getByRole('button', { name: 'Stop' }).waitFor({ state: 'detached', timeout: 20_000 })
}

async function axe(p: Page, view: string): Promise<void> {
  await p.evaluate(axeSource)
  const result = (await p.evaluate(() => (window as unknown as { axe: { run(o: unknown): Promise<unknown> } }).axe.run({ resultTypes: ['violations'] }))) as { violations: { id: string; impact: string; help: string; nodes: { target: string[] }[] }[] }
  const bad = result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
  assert.deepEqual(
    bad.map((v) => `${v.id} (${v.impact}): ${v.help} at ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`),
    [],
    `axe-core on ${view}`,
  )
}

/**
 * The contrast ratio (WCAG 2) of an element's text on its background colour; 0 when the element or
 * an ancestor is translucent (opacity < 1) or its background is not opaque, which this does not weigh.
 */
async function contrast(l: Locator): Promise<number> {
  return l.evaluate((el) => {
    for (let e: Element | null = el; e; e = e.parentElement) if (getComputedStyle(e).opacity !== '1') return 0
    const s = getComputedStyle(el)
    const rgba = (c: string) => {
      const m = /^rgba?\(([\d.]+), ([\d.]+), ([\d.]+)(?:, ([\d.]+))?\)$/.exec(c)
      if (!m) throw new Error(`not an rgb() colour: ${c}`)
      return { rgb: [m[1], m[2], m[3]].map(Number), a: m[4] === undefined ? 1 : Number(m[4]) }
    }
    const lum = (rgb: number[]) => {
      const [r, g, b] = rgb.map((v) => (v / 255 <= 0.04045 ? v / 255 / 12.92 : ((v / 255 + 0.055) / 1.055) ** 2.4)) as [number, number, number]
      return 0.2126 * r + 0.7152 * g + 0.0722 * b
    }
    const fg = rgba(s.color)
    const bg = rgba(s.backgroundColor)
    if (fg.a !== 1 || bg.a !== 1) return 0
    const [hi, lo] = [lum(fg.rgb), lum(bg.rgb)].sort((a, b) => b - a) as [number, number]
    return (hi + 0.05) / (lo + 0.05)
  })
}

async function shots(p: Page, name: string): Promise<void> {
  for (const scheme of ['light', 'dark'] as const) {
    await p.emulateMedia({ colorScheme: scheme })
    await p.screenshot({ path: join(shotsDir, `${name}-${scheme}.png`) })
  }
  await p.emulateMedia({ colorScheme: 'light' })
}

describe('web app in Chromium', () => {
  before(async () => {
    mkdirSync(shotsDir, { recursive: true })
    // No --allowed-origin: the page the server serves is same-origin.
    await openai.start()
    // The MCP page's test runs e2e/mcp's reference server in the sandbox, which sees it read-only;
    // the elicitation test runs it from the server user's MCP file (--mcp-config) as "elicit".
    const mcps = join(repo, 'sdk-ts', 'test-results', `mcps-${process.pid}.json`)
    const everything = join(repo, 'e2e', 'mcp', 'node_modules', '@modelcontextprotocol', 'server-everything', 'dist', 'index.js')
    writeFileSync(mcps, JSON.stringify({ mcpServers: { elicit: { command: 'node', args: [everything, 'stdio'], scope: 'host' } } }))
    const elicit = { turns: [{ steps: [{ tool: { name: 'mcp__elicit__trigger-elicitation-request', arguments: {}, id: 'el1' } }] }, { steps: [{ text: 'Elicited.' }] }] }
    const started = await startServer(['--sandbox-expose', join(repo, 'e2e', 'mcp'), '--mcp-config', mcps, '--project-terminals'], { ...agentScripts, ...mcpScripts, ...chipScripts, elicit }, openai)
    server = started.server
    writeProjectFiles(server.root)
    db = started.db
    base = `http://127.0.0.1:${server.port}`
    browser = await launchBrowser()
    context = await browser.newContext({ viewport: { width: 1100, height: 760 } })
    page = await context.newPage()
    watch(page)
  })

  after(async () => {
    await browser?.close()
    await server?.stop()
    server?.cleanup()
    db?.drop()
    await openai.stop()
  })

  test('the components on an in-page run host (examples/ui-in-process): stream, tool row, question', async () => {
    const port = await freePort()
    const stop = await serveStatic(port, exampleDir)
    const p = await context.newPage()
    const seen: string[] = []
    p.on('pageerror', (e) => seen.push(e.message))
    try {
      await p.goto(`http://127.0.0.1:${port}/`)
      await p.getByRole('list', { name: 'Sessions' }).getByRole('button', { name: 'Session 1' }).waitFor()
      // Shift+Enter breaks the line and sends nothing; Enter sends.
      await composer(p).fill('two')
      await composer(p).press('Shift+Enter')
      await composer(p).pressSequentially('words')
      assert.equal(await composer(p).inputValue(), 'two\nwords')
      assert.equal(await transcript(p).getByText('You').count(), 0)
      await composer(p).press('Enter')
      assert.equal(await composer(p).inputValue(), '')
      await transcript(p).getByText('Looking it up.').waitFor()
      await transcript(p).getByText('lookup', { exact: true }).click() // the collapsible tool row opens
      await transcript(p).getByText('found 2 word(s)').waitFor()
      const q = p.getByRole('dialog', { name: 'Question' })
      await q.getByRole('radio', { name: 'yes' }).check()
      await q.getByRole('button', { name: 'Submit' }).click()
      await transcript(p).getByText('Going on: done.').waitFor()
      assert.equal(await composer(p).evaluate((el) => el === document.activeElement), true, 'focus back in the composer')
      assert.deepEqual(seen, [])
    } finally {
      await p.close()
      await stop()
    }
  })

  test('pair with a code from zidane-server pair', async () => {
    await page.goto(base)
    await page.getByRole('textbox', { name: 'Pairing code' }).waitFor()
    await axe(page, 'pairing')
    await shots(page, 'pairing')
    // The themed root covers the page from its top edge (no margin collapsing through it) and
    // nothing scrolls.
    const layout = await page.evaluate(() => ({ top: document.elementFromPoint(5, 5)?.closest('.zd') != null, overflow: document.scrollingElement!.scrollHeight - innerHeight }))
    assert.deepEqual(layout, { top: true, overflow: 0 }, 'the pairing page: themed from the top, no scroll')
    // The Pair button stands as tall as the code's input, bottoms aligned.
    const input = (await page.getByRole('textbox', { name: 'Pairing code' }).boundingBox())!
    const pairBox = (await page.getByRole('button', { name: 'Pair' }).boundingBox())!
    assert.ok(Math.abs(input.height - pairBox.height) < 1 && Math.abs(input.y + input.height - (pairBox.y + pairBox.height)) < 1, `Pair ${pairBox.height} px tall at ${pairBox.y}, the input ${input.height} px at ${input.y}`)
    // Disabled (no code yet), Pair's text keeps WCAG AA contrast in both themes.
    for (const scheme of ['light', 'dark'] as const) {
      await page.emulateMedia({ colorScheme: scheme })
      const ratio = await contrast(page.getByRole('button', { name: 'Pair' }))
      assert.ok(ratio >= 4.5, `the disabled Pair button's contrast in ${scheme}: ${ratio.toFixed(2)}`)
    }
    await page.emulateMedia({ colorScheme: 'light' })
    await page.getByRole('textbox', { name: 'Pairing code' }).fill('WRNG-CODE')
    await page.getByRole('button', { name: 'Pair' }).click()
    await page.getByRole('alert').waitFor()
    problems.length = 0 // the refused POST logs a console error (401)
    await page.getByRole('textbox', { name: 'Pairing code' }).fill(server.pairCode('chat'))
    await page.getByRole('button', { name: 'Pair' }).click()
    await connection(page).getByText('Connected').waitFor()
    assert.match((await page.evaluate(() => localStorage.getItem('zidane.auth'))) ?? '', /zds_/)
  })

  test('create a session, send a prompt and see it stream', async () => {
    await newSession(page)
    await page.getByRole('list', { name: 'Sessions' }).getByRole('listitem').first().waitFor()
    await send(page, 'Stream please.')
    await page.getByRole('button', { name: 'Stop' }).waitFor()
    // Seen part-way: some pieces shown, the last not yet.
    await page.waitForFunction(() => {
      const t = document.querySelector('[role=log][aria-label=Transcript]')?.textContent ?? ''
      return t.includes('p03') && !t.includes('p40')
    })
    await waitForText(page, 'p40')
    await waitIdle(page)
    const text = (await transcript(page).textContent()) ?? ''
    assert.ok(text.includes('Stream please.'))
    assert.equal(await composer(page).evaluate((el) => el === document.activeElement), true, 'focus stays in the composer')
    // The list's item is named by its title alone, its last activity (a time today) on its second line.
    const item = page.getByRole('list', { name: 'Sessions' }).getByRole('button', { name: 'Stream please.', exact: true })
    await item.locator('time').getByText(/^\d\d:\d\d$/).waitFor()
    await axe(page, 'session')
    await shots(page, 'session')
  })

  test('a 400 px wide window: the sidebar folds behind "Sessions", the header wraps, nothing overflows sideways; axe light and dark', async () => {
    const p = await context.newPage()
    watch(p)
    try {
      await p.setViewportSize({ width: 400, height: 800 })
      const sideways = () => p.evaluate(() => [...document.querySelectorAll('.zd *')].filter((e) => e.getBoundingClientRect().right > innerWidth + 0.5 && getComputedStyle(e).position !== 'fixed').map((e) => e.className || e.tagName))
      const toggle = p.getByRole('button', { name: 'Sessions', exact: true })
      // Home: the list is open above the view.
      await p.goto(base)
      await connection(p).getByText('Connected').waitFor()
      assert.equal(await toggle.getAttribute('aria-expanded'), 'true')
      await p.getByRole('list', { name: 'Sessions' }).getByRole('listitem').first().waitFor()
      assert.deepEqual(await sideways(), [], 'nothing wider than the window (home)')
      // A session: the list folds away, the session's view has the width.
      await p.getByRole('list', { name: 'Sessions' }).getByRole('button', { name: 'Stream please.', exact: true }).click()
      await transcript(p).waitFor()
      await p.getByRole('list', { name: 'Sessions' }).waitFor({ state: 'hidden' })
      assert.equal(await toggle.getAttribute('aria-expanded'), 'false')
      assert.deepEqual(await sideways(), [], 'nothing wider than the window (session)')
      const box = (await composer(p).boundingBox())!
      assert.ok(box.width > 300, `the message box is ${box.width} px wide`)
      for (const scheme of ['light', 'dark'] as const) {
        await p.emulateMedia({ colorScheme: scheme })
        await axe(p, `narrow session (${scheme})`)
      }
      await shots(p, 'narrow-session')
      // The toggle opens the list again.
      await toggle.click()
      await p.getByRole('list', { name: 'Sessions' }).getByRole('button', { name: 'Stream please.', exact: true }).waitFor()
      assert.equal(await toggle.getAttribute('aria-expanded'), 'true')
      assert.deepEqual(await sideways(), [], 'nothing wider than the window (list open)')
      for (const scheme of ['light', 'dark'] as const) {
        await p.emulateMedia({ colorScheme: scheme })
        await axe(p, `narrow list (${scheme})`)
      }
      await shots(p, 'narrow-list')
    } finally {
      await p.close()
    }
  })

  test('reload mid-run: the transcript continues, nothing lost or doubled', async () => {
    await newSession(page)
    await send(page, 'Reload during this.')
    await waitForText(page, 'p08')
    await page.reload()
    await waitForText(page, 'p40')
    await waitIdle(page)
    const text = (await transcript(page).textContent()) ?? ''
    const positions = streamPieces.map((piece) => text.split(piece.trim()).length - 1)
    assert.deepEqual(positions, streamPieces.map(() => 1), `each piece once in: ${text}`)
    assert.equal(text.split('Reload during this.').length - 1, 1)
    const order = streamPieces.map((piece) => text.indexOf(piece.trim()))
    assert.deepEqual(order, [...order].sort((a, b) => a - b))
    // Opened again, the session shows its end: the last row (the run summary) is not cut under
    // the composer while the bars above the list load (a short window, so the list overflows).
    await page.setViewportSize({ width: 1100, height: 440 })
    await page.reload()
    await waitForText(page, 'p40')
    await page.getByLabel('Approval mode').waitFor()
    const box = await transcript(page).evaluate((el) => ({ h: el.scrollHeight, c: el.clientHeight }))
    assert.ok(box.h > box.c + 40, `the transcript overflows its box: ${JSON.stringify(box)}`)
    await page.waitForFunction(() => {
      const el = document.querySelector('[role=log][aria-label=Transcript]') as HTMLElement
      return el.scrollHeight - el.scrollTop - el.clientHeight < 2
    }, undefined, { timeout: 5000 }).catch(async (e: unknown) => {
      const m = await transcript(page).evaluate((el) => ({ top: el.scrollTop, h: el.scrollHeight, c: el.clientHeight }))
      throw new Error(`the transcript did not open at its end: ${JSON.stringify(m)}: ${String(e)}`)
    })
    const gap = await transcript(page).evaluate((el) => el.scrollHeight - el.scrollTop - el.clientHeight)
    assert.ok(gap < 2, `the transcript opened ${gap} px short of its end`)
    await page.setViewportSize({ width: 1100, height: 760 })
  })

  test('a page opened mid-run and a page reloaded mid-run show the run (Stop), and Stop from the new page ends it in both', async () => {
    const sessionId = await newSession(page, 'slow/scripted')
    await send(page, 'Run while a page opens.')
    await waitForText(page, 'Starting a long answer.')
    const other = await context.newPage()
    watch(other)
    // This page never saw the run start: sessions.get's running state turns Stop on.
    await other.goto(`${base}/s/${encodeURIComponent(sessionId)}`)
    await waitForText(other, 'Starting a long answer.')
    await other.getByRole('button', { name: 'Stop' }).waitFor()
    await other.reload()
    await other.getByRole('button', { name: 'Stop' }).waitFor()
    await other.getByRole('button', { name: 'Stop' }).click()
    await waitIdle(other)
    await waitIdle(page)
    const text = (await transcript(other).textContent()) ?? ''
    assert.equal(text.includes('never shown'), false)
    await other.close()
  })

  test('approve a write (its content shown) and deny a command (shown exactly)', async () => {
    await newSession(page, 'write/scripted')
    await send(page, 'Write the notes.')
    const approval = page.getByRole('dialog', { name: 'Approval' })
    await approval.waitFor()
    await approval.getByText('hello from the agent').first().waitFor()
    assert.equal(await approval.getByRole('button', { name: 'Allow', exact: true }).evaluate((el) => el === document.activeElement), true, 'focus moves to the dialog')
    await axe(page, 'approval')
    await shots(page, 'approval')
    await approval.getByRole('button', { name: 'Allow', exact: true }).click()
    await waitForText(page, 'Now a command.')
    await approval.waitFor()
    assert.equal(await approval.getByLabel('Command').textContent(), exactCommand)
    await approval.getByRole('button', { name: 'Deny' }).click()
    await waitForText(page, 'All done.')
    await waitIdle(page)
    assert.equal(await composer(page).evaluate((el) => el === document.activeElement), true, 'focus back in the composer')
    const sessionCwd = server.root
    assert.equal(readFileSync(join(sessionCwd, 'notes.txt'), 'utf8'), 'hello from the agent\n')
    assert.equal(existsSync(join(sessionCwd, 'out.txt')), false, 'the denied command did not run')
  })

  test('answer a question', async () => {
    await newSession(page, 'ask/scripted')
    await send(page, 'Ask me.')
    const q = page.getByRole('dialog', { name: 'Question' })
    await q.waitFor()
    await q.getByText('Which color?').waitFor()
    await q.getByRole('radio', { name: 'blue' }).check()
    await q.getByRole('button', { name: 'Submit' }).click()
    await waitForText(page, 'Thanks for the answer.')
    await q.waitFor({ state: 'detached' })
  })

  test('answer an MCP server\'s form elicitation (server-everything)', async () => {
    await newSession(page, 'elicit/scripted')
    await send(page, 'Elicit.')
    const approval = page.getByRole('dialog', { name: 'Approval' })
    await approval.waitFor()
    await approval.getByRole('button', { name: 'Allow', exact: true }).click()
    const form = page.getByRole('dialog', { name: 'Elicitation' })
    await form.waitFor()
    await form.getByText('Please provide inputs for the following fields:').waitFor()
    assert.equal(await form.getByLabel('Integer', { exact: true }).inputValue(), '42', 'defaults filled in')
    await form.getByLabel('String (required)', { exact: true }).fill('Ada Lovelace')
    await form.getByRole('button', { name: 'Submit' }).click()
    await waitForText(page, 'Elicited.')
    await form.waitFor({ state: 'detached' })
    assert.match((await transcript(page).textContent()) ?? '', /Name: Ada Lovelace/)
  })

  test('a follow-up queued and removed; stop a run with Esc', async () => {
    await newSession(page, 'slow/scripted')
    await send(page, 'Take long.')
    await waitForText(page, 'Starting a long answer.')
    await page.getByRole('button', { name: 'Stop' }).waitFor()
    // A prompt sent while the run streams waits in the follow-up queue, and can be removed.
    await send(page, 'A queued follow-up.')
    const queue = page.getByRole('region', { name: 'Follow-up queue' })
    await queue.getByText('A queued follow-up.').waitFor()
    await queue.getByRole('button', { name: 'Remove follow-up: A queued follow-up.' }).click()
    await queue.waitFor({ state: 'detached' })
    await composer(page).press('Escape')
    await waitForText(page, 'The queued prompt was cancelled.')
    await waitIdle(page)
    const text = (await transcript(page).textContent()) ?? ''
    assert.equal(text.includes('never shown'), false)
    // The server records the removed follow-up as cancelled; it never ran (one answer only).
    assert.equal(text.split('Starting a long answer.').length - 1, 1, `the removed follow-up never ran: ${text}`)
    assert.ok(text.includes('The queued prompt was cancelled.'), text)
    // The user's own stop reads as stopped, not as an error, with no Interrupted marker beside
    // it; the same after a reload (ErrorEvent.stopped is kept in the transcript).
    for (const when of ['live', 'after a reload']) {
      if (when !== 'live') {
        await page.reload()
        await waitForText(page, 'The queued prompt was cancelled.')
      }
      await transcript(page).getByRole('note', { name: 'Stopped' }).filter({ hasText: 'The run was cancelled.' }).waitFor()
      const shown = (await transcript(page).textContent()) ?? ''
      assert.equal(shown.includes('Error:'), false, `${when}: a stop is not shown as an error: ${shown}`)
      assert.equal(await page.getByRole('note', { name: 'Interrupted' }).count(), 0, `${when}: no Interrupted marker beside the Stopped row`)
    }
  })

  test('model output with HTML, javascript: links and outside images runs and loads nothing', async () => {
    problems.length = 0
    await newSession(page, 'xss/scripted')
    await send(page, 'Show payloads.')
    await waitForText(page, 'End of payloads.')
    await waitIdle(page)
    await transcript(page).locator('.zd-tok-keyword').first().waitFor() // the highlighter chunk loaded
    const found = await transcript(page).evaluate((log) => ({
      pwned: (window as unknown as { __pwned?: number }).__pwned,
      elements: log.querySelectorAll('script, img, iframe, [onerror]').length,
      jsLinks: [...log.querySelectorAll('a')].filter((a) => !/^(https?|mailto):/.test(a.href)).length,
      links: [...log.querySelectorAll('a')].map((a) => `${a.href} ${a.rel}`),
    }))
    assert.equal(found.pwned, undefined)
    assert.equal(found.elements, 0)
    assert.equal(found.jsLinks, 0)
    for (const l of found.links) assert.match(l, /noopener noreferrer$/)
    assert.deepEqual(problems, [])
  })

  test('two pages on one session see each other live; a draft typed in one is in the other', async () => {
    const sessionId = await newSession(page)
    const other = await context.newPage()
    watch(other)
    await other.goto(`${base}/s/${encodeURIComponent(sessionId)}`)
    await connection(other).getByText('Connected').waitFor()
    await transcript(other).waitFor()
    await send(page, 'Seen by the other page.')
    await waitForText(other, 'Seen by the other page.')
    await waitForText(other, 'p40')
    await waitIdle(page)
    await composer(page).fill('a draft from page one')
    await other.waitForFunction(() => (document.querySelector('textarea[aria-label=Message]') as HTMLTextAreaElement).value === 'a draft from page one')
    await composer(page).fill('')
    await other.close()
  })

  // Issues 27 and 28 in the app (agents-cases.ts).
  const ctx = (): Ctx => ({ page, root: server.root, newSession, send, axe })
  let greeted = ''
  test('agent picker: build, plan and the project agents; switches to plan; skills and a broken file listed', () => agentPickerSwitchesToPlan(ctx()))
  test('/ completion offers a project command and runs it as chat.send {command, arguments}; ArrowUp recalls it; @ sends a mention', async () => {
    greeted = await slashCommandRuns(ctx())
  })
  test('a restored draft holding "@men" opens no completion list; typing opens it, and it closes when focus leaves the textbox; "/zzz" says where commands come from', async () => {
    const list = page.getByRole('listbox', { name: 'Completions' })
    const first = await newSession(page)
    await composer(page).pressSequentially('@men')
    await list.waitFor()
    await composer(page).press('Escape')
    await list.waitFor({ state: 'detached' })
    // drafts.set is saved as the user types: another page on the session gets the draft.
    const other = await context.newPage()
    watch(other)
    await other.goto(`${base}/s/${encodeURIComponent(first)}`)
    await other.waitForFunction(() => (document.querySelector('textarea[aria-label=Message]') as HTMLTextAreaElement | null)?.value === '@men')
    await composer(other).click() // in the textbox, but nothing typed: no list
    await new Promise((r) => setTimeout(r, 400)) // well past the list's 60 ms query delay and its answer
    assert.equal(await other.getByRole('listbox', { name: 'Completions' }).count(), 0, 'a restored draft opened the completion list')
    await composer(other).press('End')
    await composer(other).pressSequentially('t')
    await other.getByRole('listbox', { name: 'Completions' }).getByRole('option', { name: /mention-me\.txt/ }).waitFor()
    await transcript(other).click({ position: { x: 5, y: 5 } })
    await other.getByRole('listbox', { name: 'Completions' }).waitFor({ state: 'detached' })
    // A "/word" no command matches says where commands come from, and goes with the focus too.
    await composer(other).fill('')
    await composer(other).pressSequentially('/zzz')
    const hint = other.getByRole('status', { name: 'Completions' })
    await hint.getByText('No command matches /zzz.', { exact: false }).waitFor()
    await hint.getByText('.zidane/commands/', { exact: true }).waitFor()
    await transcript(other).click({ position: { x: 5, y: 5 } })
    await hint.waitFor({ state: 'detached' })
    await composer(other).fill('')
    await other.close()
    await composer(page).fill('')
  })

  test('typing right after a completion is picked keeps its order, even when the page draws late', async () => {
    const slow = await context.newPage()
    watch(slow)
    // Every animation frame comes 200 ms late, as on a busy machine.
    await slow.addInitScript(() => {
      const raf = window.requestAnimationFrame.bind(window)
      window.requestAnimationFrame = (cb) => raf(() => setTimeout(() => cb(performance.now()), 200))
    })
    await slow.goto(base)
    await connection(slow).getByText('Connected').waitFor()
    await newSession(slow)
    const box = composer(slow)
    await box.pressSequentially('/gre')
    await slow.getByRole('listbox', { name: 'Completions' }).getByRole('option', { name: /\/greet/ }).waitFor()
    await box.press('Enter')
    await box.pressSequentially('zebracorn', { delay: 60 }) // from at once to past the pick's late frame
    assert.equal(await box.inputValue(), '/greet zebracorn')
    await box.fill('')
    await slow.close()
  })

  test("a subagent's child session nested under its parent's run; its approval answered from the parent's view", () => subagentNestedAndApprovedFromParent(ctx()))
  test('search finds a word and opens the session at its turn', () => searchOpensTheSession(ctx(), greeted))
  test("a turn's menu: fork opens the fork; roll back and restore; compact shows the marked block", () => forkAndRollBackFromTheTurnMenu(ctx(), greeted))

  // The Terminals panel (terminal-cases.ts).
  const termCtx = (): TermCtx => ({ browser, base, mintToken: (n, scope) => server.mintToken(n, scope), newSession, axe })
  test('terminals: an admin starts a shell in xterm.js, types echo zidane-$((6*7)), sees zidane-42, kills it; no CSP violation', () => adminRunsATerminal(termCtx()))
  test('terminals: a chat token sees no Terminals panel', () => chatTokenSeesNoTerminals(termCtx()))

  // Issue 24 items 1 and 2: path chips, media through tickets, the shared sidebar (chips-cases.ts).
  const chipsCtx = (): ChipsCtx => ({ page, context, root: server.root, newSession, send })
  test('path chips: an existing file named in an answer opens in the viewer; a missing one stays text; a tool result image from /zidane/media', () => pathChipOpensTheFile(chipsCtx()))
  test('sidebar: a pin and the space on show changed in one page show in the other live (sidebar.*)', () => sidebarSharedAcrossPages(chipsCtx()))

  test('rename, archive and delete sessions from the list', async () => {
    const sessions = page.getByRole('list', { name: 'Sessions' })
    await newSession(page)
    await page.getByRole('button', { name: 'Rename', exact: true }).click()
    await page.getByRole('textbox', { name: 'Session title' }).fill('Renamed <b>session</b>')
    await page.getByRole('button', { name: 'Save' }).click()
    await sessions.getByRole('button', { name: 'Renamed <b>session</b>' }).waitFor()
    await page.getByRole('button', { name: 'Archive', exact: true }).click()
    await sessions.getByRole('button', { name: 'Renamed <b>session</b>' }).waitFor({ state: 'detached' })
    // The Archived space lists it (sessions.list archived: true); Unarchive brings it back to All.
    const space = (name: string) => page.getByRole('group', { name: 'Space' }).getByRole('button', { name, exact: true })
    await space('Archived').click()
    const archived = page.getByRole('list', { name: 'Archived sessions' })
    const item = archived.getByRole('listitem').filter({ hasText: 'Renamed <b>session</b>' })
    await item.waitFor()
    assert.equal(await page.locator('b', { hasText: 'session' }).count(), 0, 'the title is text, never HTML')
    await axe(page, 'archived')
    await shots(page, 'archived')
    await item.getByRole('button', { name: 'Unarchive' }).click()
    await item.waitFor({ state: 'detached' })
    await space('All').click()
    await sessions.getByRole('button', { name: 'Renamed <b>session</b>', exact: true }).waitFor()
    await newSession(page)
    await page.getByRole('button', { name: 'Rename', exact: true }).click()
    await page.getByRole('textbox', { name: 'Session title' }).fill('To delete')
    await page.getByRole('button', { name: 'Save' }).click()
    await sessions.getByRole('button', { name: 'To delete' }).waitFor()
    await page.getByRole('button', { name: 'Delete', exact: true }).click()
    await page.getByRole('button', { name: 'Confirm delete' }).click()
    await sessions.getByRole('button', { name: 'To delete' }).waitFor({ state: 'detached' })
    await page.getByRole('heading', { name: 'No session open' }).waitFor()
    await sessions.getByRole('button', { name: 'Seen by the other page.' }).click()
  })

  test("git panel: the session folder's branch, changed and untracked files, a file's diff, the log; the approval mode set in one page shows in the other", async () => {
    const git = (...args: string[]) => execFileSync('git', ['-C', server.root, ...args], { stdio: 'pipe' })
    writeFileSync(join(server.root, 'tracked.txt'), 'one\n')
    git('init', '-q', '-b', 'trunk')
    git('-c', 'user.name=T', '-c', 'user.email=t@example.com', 'add', 'tracked.txt')
    git('-c', 'user.name=T', '-c', 'user.email=t@example.com', 'commit', '-q', '-m', 'the first commit')
    writeFileSync(join(server.root, 'tracked.txt'), 'one\ntwo <b>bold</b>\n')
    writeFileSync(join(server.root, 'untracked-note.txt'), 'new\n')
    try {
      const sessionId = await newSession(page)
      await page.getByText('Git', { exact: true }).click()
      const changed = page.getByRole('list', { name: 'Changed files' })
      await page.getByText('trunk').waitFor()
      await changed.getByText('untracked untracked-note.txt').waitFor()
      await changed.getByRole('button', { name: /tracked\.txt/ }).click()
      const diff = page.getByLabel('Diff of tracked.txt')
      await diff.getByText('two <b>bold</b>', { exact: false }).waitFor()
      assert.equal(await page.locator('b', { hasText: 'bold' }).count(), 0, 'the diff is text, never HTML')
      await page.getByRole('list', { name: 'Commits' }).getByText('the first commit').waitFor()
      // Open, the panel scrolls in its own box: the transcript keeps its room in the window.
      const room = await transcript(page).evaluate((el) => el.clientHeight)
      assert.ok(room >= 150, `the transcript shrank to ${room} px with the git panel open`)
      await axe(page, 'git')
      await shots(page, 'git')
      // The approval mode: set here, live in a second page on the session (approval:mode).
      const other = await context.newPage()
      watch(other)
      await other.goto(`${base}/s/${encodeURIComponent(sessionId)}`)
      const mode = (p: Page) => p.getByLabel('Approval mode')
      await mode(other).waitFor()
      const before = await mode(other).inputValue()
      const next = before === 'locked' ? 'ask' : 'locked'
      await mode(page).selectOption(next)
      await other.waitForFunction((v) => [...document.querySelectorAll('label')].find((l) => l.textContent?.startsWith('Approval mode'))?.querySelector('select')?.value === v, next)
      await mode(page).selectOption(before)
      await other.close()
    } finally {
      rmSync(join(server.root, '.git'), { recursive: true, force: true })
      rmSync(join(server.root, 'tracked.txt'), { force: true })
      rmSync(join(server.root, 'untracked-note.txt'), { force: true })
    }
  })

  test('presence: the page declares the session it shows and its focus (presence.set); another client sees it move in presence:changed', async () => {
    const watcher = createServerClient({ url: server.url, token: server.mintToken('presence-watch'), WebSocket: WebSocket as unknown as WebSocketConstructor, appVersion: 'presence-watch' })
    type Seen = { sessionId: string; windows: number; focused?: number }
    let last: Seen[] = []
    const changed: (() => void)[] = []
    watcher.onSignal('presence:changed', (sig) => {
      last = sig.sessions as Seen[]
      for (const f of changed.splice(0)) f()
    })
    const until = async (ok: (s: Seen[]) => boolean, what: string) => {
      const deadline = Date.now() + 10_000
      while (!ok(last)) {
        if (Date.now() > deadline) assert.fail(`presence:changed never showed ${what}: ${JSON.stringify(last)}`)
        await new Promise<void>((r) => {
          changed.push(r)
          setTimeout(r, 500)
        })
      }
    }
    try {
      await watcher.ready
      await page.bringToFront()
      const first = await newSession(page)
      const viewed = (id: string) => (s: Seen[]) => s.some((p) => p.sessionId === id && p.windows >= 1 && (p.focused ?? 0) >= 1)
      await until(viewed(first), `${first} viewed with focus`)
      const second = await newSession(page)
      await until((s) => viewed(second)(s) && !s.some((p) => p.sessionId === first && p.windows > 0), `the view moved from ${first} to ${second}`)
    } finally {
      watcher.close()
    }
  })

  test('usage page', async () => {
    await page.getByRole('link', { name: 'Usage' }).click()
    await page.getByRole('heading', { name: 'Usage' }).waitFor()
    await page.getByText('By model').waitFor()
    await axe(page, 'usage')
    await shots(page, 'usage')
    await page.goBack()
    await transcript(page).waitFor()
  })

  test('MCP page: an admin adds a stdio server (the reference server of e2e/mcp), tests it, sees its tools, removes it; a chat token sees no admin controls', async () => {
    // The chat page: the catalog and the form, without the admin-only kinds and files.
    await page.getByRole('link', { name: 'MCP' }).click()
    await page.getByRole('heading', { name: 'MCP servers' }).waitFor()
    await page.getByRole('form', { name: 'Add an MCP server' }).waitFor()
    // The form's selects stand as tall as its inputs; the checkbox sits before its label's text, on its line.
    const addForm = page.getByRole('form', { name: 'Add an MCP server' })
    const nameBox = (await addForm.getByLabel('Name').boundingBox())!
    for (const select of ['Kind', 'File']) {
      const box = (await addForm.getByLabel(select).boundingBox())!
      assert.ok(Math.abs(box.height - nameBox.height) < 1, `the ${select} select is ${box.height} px tall, the Name input ${nameBox.height} px`)
    }
    const check = await addForm.getByRole('checkbox', { name: "Shared by the project's sessions" }).evaluate((box) => {
      const label = box.closest('label')!.getBoundingClientRect()
      const b = box.getBoundingClientRect()
      return { left: b.left - label.left, oneLine: label.height < 2 * parseFloat(getComputedStyle(box.closest('label')!).lineHeight) }
    })
    assert.deepEqual(check, { left: 0, oneLine: true }, 'the checkbox starts its label, on one line')
    assert.equal(await page.getByRole('option', { name: 'HTTP (a URL)' }).count(), 0)
    assert.equal(await page.getByRole('option', { name: /server user's/ }).count(), 0)
    await page.goBack()
    await transcript(page).waitFor()

    // An admin token's page (its own storage): add, Test, see the tools, remove.
    const everything = join(repo, 'e2e', 'mcp', 'node_modules', '@modelcontextprotocol', 'server-everything', 'dist', 'index.js')
    assert.ok(existsSync(everything), 'e2e/mcp is installed (scripts/bootstrap.sh --ts)')
    const adminCtx = await browser.newContext({ viewport: { width: 1100, height: 760 } })
    await adminCtx.addInitScript((t) => localStorage.setItem('zidane.auth', JSON.stringify({ token: t, scope: 'admin' })), server.mintToken('mcp-admin', 'admin'))
    const p = await adminCtx.newPage()
    watch(p)
    try {
      await p.goto(`${base}/mcp`)
      const form = p.getByRole('form', { name: 'Add an MCP server' })
      await form.getByRole('option', { name: 'HTTP (a URL)' }).waitFor({ state: 'attached' })
      await form.getByLabel('Name').fill('everything')
      await form.getByLabel('Command').fill(process.execPath)
      await form.getByLabel('Arguments (one a line)').fill(`${everything}\nstdio`)
      await form.getByRole('button', { name: 'Add' }).click()
      const row = p.getByRole('list', { name: 'MCP servers' }).getByRole('listitem', { name: 'everything' })
      await row.getByText('project · stdio · scope context · shared').waitFor()
      await row.getByRole('button', { name: 'Test' }).click()
      await row.getByText(/^Last test: ok, \d+ tools/).waitFor({ timeout: 30_000 })
      await row.getByRole('list', { name: 'Tools of everything' }).getByText('mcp__everything__echo', { exact: true }).waitFor()
      await axe(p, 'mcp')
      await shots(p, 'mcp')
      await row.getByRole('button', { name: 'Remove' }).click()
      await row.waitFor({ state: 'detached' })
    } finally {
      await adminCtx.close()
    }
  })

  // Issue 23's sign-in and URL elicitation (mcpweb-cases.ts).
  const mcpCtx = (): McpCtx => ({ browser, page, base, mintToken: (n, s) => server.mintToken(n, s), newSession, send, watch, axe, problems })
  test('MCP sign-in in browser mode: Sign in, the authorization server redirects to /zidane/oauth/callback, the row says signed in, Test lists its tools', () => signInFromTheMcpPage(mcpCtx()))
  test("an MCP server's URL elicitation: the address as text and a noopener link; Done and Decline reach the server", () => urlElicitationDoneAndDeclined(mcpCtx()))
  test("an MCP tool's image result (server-everything's get-tiny-image) shows as an img from a data: URL, decoded, and again after a reload", () => mcpToolImageShowsInline(mcpCtx()))

  test('kill and restart the server: the app reconnects and reloads', async () => {
    // Its own session: the cases before it leave the page wherever they ended.
    await newSession(page)
    await send(page, 'Before the restart.')
    await waitForText(page, 'Before the restart.')
    await waitIdle(page)
    await server.stop()
    await connection(page).getByText(/next try at/).waitFor({ timeout: 20_000 })
    await shots(page, 'reconnecting')
    await server.launch()
    await connection(page).getByText('Connected').waitFor({ timeout: 30_000 })
    await waitForText(page, 'Before the restart.')
    await send(page, 'After the restart.')
    await waitForText(page, 'After the restart.')
    await waitIdle(page)
    problems.length = 0
  })

  test('attachments: a dropped image and a pasted text file reach the model; refusals; thumbnails in the transcript', async () => {
    await newSession(page, 'fake/gpt-fake')
    const png = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=='
    // A drop of an image and a PDF on the composer: the image becomes a chip, the PDF is refused.
    await page.locator('form.zd-composer').evaluate((form, b64) => {
      const dt = new DataTransfer()
      const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0))
      dt.items.add(new File([bytes], 'dot.png', { type: 'image/png' }))
      dt.items.add(new File(['%PDF-1.4'], 'doc.pdf', { type: 'application/pdf' }))
      form.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }))
    }, png)
    const chips = page.getByRole('list', { name: 'Attachments' })
    await chips.getByText('dot.png').waitFor()
    await page.getByRole('alert').getByText('doc.pdf: application/pdf files cannot be attached', { exact: false }).waitFor()
    // A paste of a text file (and of one more, removed again).
    await composer(page).evaluate((box) => {
      for (const [name, text] of [['notes.md', '# Notes\nsecret sauce\n'], ['extra.txt', 'extra']] as const) {
        const dt = new DataTransfer()
        dt.items.add(new File([text], name, { type: name.endsWith('.md') ? 'text/markdown' : 'text/plain' }))
        box.dispatchEvent(new ClipboardEvent('paste', { clipboardData: dt, bubbles: true, cancelable: true }))
      }
    })
    await chips.getByText('extra.txt').waitFor()
    await chips.getByRole('button', { name: 'Remove extra.txt' }).click()
    await chips.getByText('extra.txt').waitFor({ state: 'detached' })
    const before = openai.requests.length
    await send(page, 'What is in these files?')
    await waitForText(page, 'Got it.')
    await waitIdle(page)
    await chips.waitFor({ state: 'detached' }) // sent: the chips are gone
    // The fake model's request holds the image as an image part and the text file's content.
    const body = JSON.stringify(openai.requests.slice(before))
    assert.ok(body.includes(`data:image/png;base64,${png}`), body.slice(0, 2000))
    assert.ok(body.includes('secret sauce'), body.slice(0, 2000))
    assert.equal(body.includes('extra.txt'), false)
    // The transcript shows them: the image as a thumbnail of its stored data, the text file by name.
    const shown = transcript(page).getByRole('list', { name: 'Attached files' })
    await shown.getByRole('img', { name: 'dot.png' }).waitFor()
    await shown.getByText('notes.md').waitFor()
    await page.reload()
    await transcript(page).getByRole('list', { name: 'Attached files' }).getByRole('img', { name: 'dot.png' }).waitFor()
  })

  test('the plan the agent keeps (update_plan, plans:snapshot) shows with its steps, and after a reload (plans.get)', async () => {
    await newSession(page, 'plan/scripted')
    await send(page, 'Make a plan.')
    await waitForText(page, 'Plan made.')
    const plan = page.getByRole('region', { name: 'Plan' })
    await plan.getByText('1 of 3 done').waitFor()
    const steps = await plan.getByRole('listitem').allTextContents()
    assert.deepEqual(steps.map((s) => s.replace(/^\W+/, '')), ['Read the code done', 'Write the fix in progress', 'Run the tests pending'])
    await page.reload()
    await page.getByRole('region', { name: 'Plan' }).getByText('Write the fix').waitFor()
  })

  test('the sandbox policy: read-only for a chat token, set and cleared by an admin token (sessions.setSandbox)', async () => {
    const sessionId = await newSession(page)
    await page.getByText('Sandbox:').waitFor()
    assert.equal(await page.getByRole('combobox', { name: 'Sandbox policy' }).count(), 0)
    const adminCtx = await browser.newContext({ viewport: { width: 1100, height: 760 } })
    await adminCtx.addInitScript((t) => localStorage.setItem('zidane.auth', JSON.stringify({ token: t, scope: 'admin' })), server.mintToken('sandbox-admin', 'admin'))
    const p = await adminCtx.newPage()
    watch(p)
    try {
      await p.goto(`${base}/s/${encodeURIComponent(sessionId)}`)
      const picker = p.getByRole('combobox', { name: 'Sandbox policy' })
      await picker.waitFor()
      assert.equal(await picker.inputValue(), '')
      const label = (await picker.locator('option[value=""]').textContent()) ?? ''
      const policy = /\((.+)\)$/.exec(label)?.[1] ?? ''
      assert.ok(policy !== '', label)
      await picker.selectOption(policy)
      await picker.locator('option[value=""]').getByText('Server default (as the server sets it)').waitFor({ state: 'attached' }) // set: true
      await p.reload()
      await p.getByRole('combobox', { name: 'Sandbox policy' }).waitFor()
      assert.equal(await p.getByRole('combobox', { name: 'Sandbox policy' }).inputValue(), policy, 'the session keeps the policy set for it')
      await p.getByRole('combobox', { name: 'Sandbox policy' }).selectOption('')
      await p.getByRole('combobox', { name: 'Sandbox policy' }).locator(`option[value=""]`).getByText(`Server default (${policy})`).waitFor({ state: 'attached' })
    } finally {
      await adminCtx.close()
    }
  })

  test('prefs: the theme picked in one page is the other page\'s live (prefs.*)', async () => {
    const other = await context.newPage()
    watch(other)
    await other.goto(page.url())
    await connection(other).getByText('Connected').waitFor()
    await page.getByLabel('Theme').selectOption('dark')
    await other.waitForFunction(() => document.querySelector('.zd.app')?.getAttribute('data-theme') === 'dark')
    await other.getByLabel('Theme').selectOption('light')
    await page.waitForFunction(() => document.querySelector('.zd.app')?.getAttribute('data-theme') === 'light')
    await other.close()
  })

  test('a run cut by a server restart shows the interrupted marker', async () => {
    await newSession(page, 'slow/scripted')
    await send(page, 'Take long, then get cut.')
    await waitForText(page, 'Starting a long answer.')
    await server.stop()
    await connection(page).getByText(/next try at|Reconnecting/).waitFor({ timeout: 20_000 })
    await server.launch()
    await connection(page).getByText('Connected').waitFor({ timeout: 30_000 })
    await page.getByRole('note', { name: 'Interrupted' }).waitFor()
    await page.reload()
    await page.getByRole('note', { name: 'Interrupted' }).waitFor()
    await waitForText(page, 'Starting a long answer.')
    problems.length = 0
  })

  test('sign out revokes the token on the server (tokens.revokeSelf) and forgets it', async () => {
    const token = JSON.parse((await page.evaluate(() => localStorage.getItem('zidane.auth'))) ?? '{}').token as string
    await page.getByRole('button', { name: 'Sign out' }).click()
    await page.getByRole('textbox', { name: 'Pairing code' }).waitFor()
    assert.equal(await page.evaluate(() => localStorage.getItem('zidane.auth')), null)
    // The token is refused now: a socket offering it is turned away before the handshake.
    const opened = await page.evaluate(
      (t) =>
        new Promise<boolean>((resolve) => {
          const ws = new WebSocket(`ws://${location.host}/`, ['zidane', `zidane.bearer.${t}`])
          ws.onopen = () => resolve(true)
          ws.onerror = () => resolve(false)
        }),
      token,
    )
    assert.equal(opened, false)
    // A page that still holds the revoked token (another browser profile, a stale tab) goes back
    // to pairing at once, says why in the Connection status, and forgets the token.
    const stale = await browser.newContext({ viewport: { width: 1100, height: 760 } })
    await stale.addInitScript((t: string) => {
      if (sessionStorage.getItem('seeded') === null) {
        sessionStorage.setItem('seeded', '1')
        localStorage.setItem('zidane.auth', JSON.stringify({ token: t, scope: 'chat' }))
      }
    }, token)
    const p = await stale.newPage()
    await p.goto(base)
    await p.getByRole('status', { name: 'Connection' }).getByText("The server refused this browser's token", { exact: false }).waitFor()
    await p.getByRole('textbox', { name: 'Pairing code' }).waitFor()
    assert.equal(await p.getByRole('button', { name: 'New session' }).count(), 0, 'no workspace without a token')
    assert.equal(await p.evaluate(() => localStorage.getItem('zidane.auth')), null)
    await axe(p, 'refused-token')
    await stale.close()
    problems.length = 0 // the refused socket logs a console error
  })

  /** The ui-sse page at url: a new session, a prompt, and its pieces arriving one by one. */
  async function sseStreams(url: string): Promise<void> {
    const p = await context.newPage()
    const seen: string[] = []
    p.on('pageerror', (e) => seen.push(e.message))
    p.on('console', (m) => {
      if (m.type() === 'error') seen.push(`console error: ${m.text()}`)
    })
    p.on('websocket', (w) => seen.push(`websocket: ${w.url()}`))
    try {
      await p.goto(url)
      await p.getByRole('button', { name: 'New session' }).first().click()
      await composer(p).fill('Stream over SSE.')
      await composer(p).press('Enter')
      await transcript(p).getByText('Stream over SSE.').waitFor()
      // The pieces arrive one by one: the first shows while the last has not come yet.
      await transcript(p).getByText(/p01/).waitFor()
      assert.equal(await transcript(p).getByText(/p40/).count(), 0, 'the first piece shows before the run ends')
      await transcript(p).getByText(/p40/).waitFor({ timeout: 15_000 })
      assert.deepEqual(seen, [])
    } finally {
      await p.close()
    }
  }

  test('the components on createSseHost (examples/ui-sse) on zidane-server\'s /api/chat: a prompt streams', async () => {
    const port = await freePort()
    const stop = await serveStatic(port, sseExampleDir, { prefix: '/api/chat/', port: server.port })
    try {
      await sseStreams(`http://127.0.0.1:${port}/#token=${server.mintToken('ui-sse')}`)
    } finally {
      await stop()
    }
  })

  test('examples/ui-sse served with the Node bridge (createSseHandler on node:http, the token on the server side): a prompt streams', async () => {
    const client = createServerClient({ url: server.url, token: server.mintToken('ui-sse-bridge'), WebSocket: WebSocket as unknown as WebSocketConstructor, appVersion: 'ui-sse-bridge' })
    await client.ready
    const handler = createSseHandler({ server: client, cwd: '', authorize: () => 'page-user', logger: { warn: () => {} } })
    const port = await freePort()
    const stop = await serveStatic(port, sseExampleDir, { prefix: '/api/chat/', handle: toNodeHandler(handler) as unknown as http.RequestListener })
    try {
      await sseStreams(`http://127.0.0.1:${port}/`)
    } finally {
      handler.close()
      client.close()
      await stop()
    }
  })
})
