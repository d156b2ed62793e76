// The web app's Terminals panel in Chromium (issue 24 item 2), run by app.test.ts on its one
// browser and server (started with --project-terminals): an admin page starts a shell in the
// session's folder, types into xterm.js and reads the answer from xterm's accessibility tree, then
// kills it, under the server's CSP with no violation; xterm.js is fetched only when the panel opens;
// a chat token's page shows no panel. Every wait is on the page's state.
import assert from 'node:assert/strict'
import { join } from 'node:path'
import type { Browser, Page } from 'playwright-core'
import { shotsDir } from './harness.js'

/** What the cases need of app.test.ts. */
export interface TermCtx {
  browser: Browser
  base: string
  mintToken(name: string, scope: 'admin' | 'chat'): string
  newSession(p: Page): Promise<string>
  /** axe-core on the page: no serious or critical violation. */
  axe(p: Page, view: string): Promise<void>
}

/** Runs in the page before the app: keeps every CSP violation the page reports. */
function recordCsp(): void {
  const w = window as unknown as { cspViolations: string[] }
  w.cspViolations = []
  document.addEventListener('securitypolicyviolation', (e) => w.cspViolations.push(`${e.violatedDirective} ${e.blockedURI}`))
}

const terminalChunkLoaded = (p: Page) => p.evaluate(() => performance.getEntriesByType('resource').some((r) => /\/assets\/terminal-view-/.test(r.name)))

/** An admin page: open the panel, start a shell, type `echo zidane-$((6*7))` and Enter, see zidane-42, kill it. */
export async function adminRunsATerminal({ browser, base, mintToken, newSession, axe }: TermCtx): Promise<void> {
  const ctx = await browser.newContext({ viewport: { width: 1100, height: 900 } })
  await ctx.addInitScript((t) => localStorage.setItem('zidane.auth', JSON.stringify({ token: t, scope: 'admin' })), mintToken('terminal-admin', 'admin'))
  await ctx.addInitScript(recordCsp)
  const p = await ctx.newPage()
  const errors: string[] = []
  p.on('console', (m) => {
    if (m.type() === 'error' || /Content Security Policy/i.test(m.text())) errors.push(`console: ${m.text()}`)
  })
  p.on('pageerror', (e) => errors.push(`page error: ${e.message}`))
  try {
    await p.goto(base)
    await newSession(p)
    const region = p.getByRole('region', { name: 'Terminal' })
    await region.waitFor()
    assert.equal(await terminalChunkLoaded(p), false, 'xterm.js is not fetched before the panel opens')
    // Keyboard: the summary opens the panel.
    await region.locator('summary').focus()
    await p.keyboard.press('Enter')
    await region.getByText(/a reload or a reconnect ends them/).waitFor()
    await region.getByRole('button', { name: 'New terminal' }).click()
    const input = region.getByRole('textbox', { name: /^Terminal input/ })
    await input.waitFor()
    assert.equal(await terminalChunkLoaded(p), true, 'the terminal chunk came when the panel opened')
    await region.getByRole('status').getByText(/: running$/).waitFor()
    await input.focus()
    await p.keyboard.type('echo zidane-$((6*7))')
    await p.keyboard.press('Enter')
    // xterm's screen reader rows: the command's output, not the echoed command line.
    const tree = region.locator('.xterm-accessibility-tree')
    await tree.getByText(/^\s*zidane-42\s*$/).first().waitFor({ timeout: 15_000 })
    assert.equal(await region.getByRole('list', { name: 'Terminals' }).getByRole('listitem').count(), 1)
    // The pseudo-terminal has the screen's size (terminal.resize), and follows the panel's.
    const rows = () => tree.locator(':scope > div').count()
    const before = await rows()
    await p.keyboard.type('stty size')
    await p.keyboard.press('Enter')
    const size = tree.getByText(/^\s*\d+ \d+\s*$/)
    await size.first().waitFor()
    const [r1, c1] = ((await size.first().textContent()) ?? '').trim().split(' ').map(Number)
    assert.equal(r1, before, 'stty size reports the rows xterm.js shows')
    await region.locator('.terminal-screen').evaluate((el) => (el.style.height = '30em'))
    await p.waitForFunction((n) => document.querySelectorAll('.xterm-accessibility-tree > div').length > n, before)
    const after = await rows()
    await p.keyboard.type('stty size')
    await p.keyboard.press('Enter')
    await tree.getByText(new RegExp(`^\\s*${after} ${c1}\\s*$`)).first().waitFor()
    await axe(p, 'terminal panel')
    await p.screenshot({ path: join(shotsDir, 'terminal.png') })
    // Shift+Tab leaves the terminal (no keyboard trap).
    await p.keyboard.press('Shift+Tab')
    assert.equal(await input.evaluate((el) => el === document.activeElement), false, 'Shift+Tab moved focus out of the terminal')
    await region.getByRole('button', { name: 'Kill' }).click()
    await region.getByRole('status').getByText(/ended by SIGKILL$/).waitFor()
    await region.getByRole('button', { name: 'Close' }).click()
    await region.getByRole('list', { name: 'Terminals' }).waitFor({ state: 'detached' })
    assert.deepEqual(await p.evaluate(() => (window as unknown as { cspViolations: string[] }).cspViolations), [], 'no CSP violation')
    assert.deepEqual(errors, [])
  } finally {
    await ctx.close()
  }
}

/** A chat token's page (on the same server, terminals on) shows no Terminals panel and fetches no xterm.js. */
export async function chatTokenSeesNoTerminals({ browser, base, mintToken, newSession }: TermCtx): Promise<void> {
  const ctx = await browser.newContext({ viewport: { width: 1100, height: 760 } })
  await ctx.addInitScript((t) => localStorage.setItem('zidane.auth', JSON.stringify({ token: t, scope: 'chat' })), mintToken('terminal-chat', 'chat'))
  const p = await ctx.newPage()
  try {
    await p.goto(base)
    await newSession(p)
    await p.getByText('Sandbox:').waitFor() // the session view has talked to the server
    assert.equal(await p.getByRole('region', { name: 'Terminal' }).count(), 0)
    assert.equal(await p.getByText('New terminal').count(), 0)
    assert.equal(await terminalChunkLoaded(p), false)
  } finally {
    await ctx.close()
  }
}
