// The web app's MCP sign-in and URL elicitation in Chromium (issue 23, "The web app ... signs in
// (browser mode) and shows ... elicitation dialogs"), run by app.test.ts on its one browser and
// server: the scripted provider the URL case uses, and the cases. Every wait is on the page's state.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { createInterface } from 'node:readline'
import { join } from 'node:path'
import type { Browser, Page } from 'playwright-core'
import { repo } from './harness.js'

const turn = (...steps: Record<string, unknown>[]) => ({ steps })

/** The address server-everything's trigger-url-elicitation asks the person to open. */
const elicitAddress = 'https://auth.example.test/connect?session=web'

/** The scripted providers: elicitUrl calls server-everything's trigger-url-elicitation (the "elicit" server of app.test.ts) each prompt, then says so; tinyImage calls its get-tiny-image (an image content block, a PNG). */
export const mcpScripts: Record<string, unknown> = {
  elicitUrl: {
    loop: true,
    turns: [
      turn({ tool: { name: 'mcp__elicit__trigger-url-elicitation', arguments: { url: elicitAddress, message: 'Connect the test account.', elicitationId: 'web-1' }, id: 'u1' } }),
      turn({ text: 'URL elicited.' }),
    ],
  },
  tinyImage: {
    loop: true,
    turns: [turn({ tool: { name: 'mcp__elicit__get-tiny-image', arguments: {}, id: 'i1' } }), turn({ text: 'Image fetched.' })],
  },
}

/** What the cases need of app.test.ts. */
export interface McpCtx {
  browser: Browser
  page: Page
  /** The server's origin, http://127.0.0.1:PORT. */
  base: string
  mintToken(name: string, scope: 'chat' | 'admin'): string
  newSession(p: Page, model?: string): Promise<string>
  send(p: Page, text: string): Promise<void>
  /** Records what a page may not do (app.test.ts's watch). */
  watch(p: Page): void
  axe(p: Page, view: string): Promise<void>
  /** What the watched pages did that they may not (emptied by a case that checks it). */
  problems: string[]
}

const transcript = (p: Page) => p.getByRole('log', { name: 'Transcript' })
const idle = (p: Page) => p.getByRole('button', { name: 'Stop' }).waitFor({ state: 'detached', timeout: 20_000 })

/** Runs e2e/oauth/as.mjs (the MCP TypeScript SDK's example authorization server and an MCP server it protects) until stop. */
async function startAuthServer(): Promise<{ as: string; mcp: string; stop(): void }> {
  const dir = join(repo, 'e2e', 'oauth')
  assert.ok(existsSync(join(dir, 'node_modules', '@modelcontextprotocol', 'sdk')), 'e2e/oauth is installed (scripts/bootstrap.sh --ts)')
  const child = spawn(process.execPath, ['as.mjs'], { cwd: dir, stdio: ['pipe', 'pipe', 'inherit'] })
  const line = await new Promise<string>((resolve, reject) => {
    const rl = createInterface({ input: child.stdout! })
    rl.once('line', (l) => {
      rl.close()
      resolve(l)
    })
    child.once('exit', (code) => reject(new Error(`as.mjs exited (${code}) before printing its addresses`)))
  })
  const a = JSON.parse(line) as { as: string; mcp: string }
  return { ...a, stop: () => child.stdin!.end() } // as.mjs exits when its stdin closes
}

/**
 * Browser-mode sign-in from the MCP page: an admin adds an HTTP MCP server behind the example
 * authorization server to the server user's file, clicks Sign in; the app begins with
 * redirectUri <origin>/zidane/oauth/callback (mode browser), the tab it opened goes to the
 * authorization server, which redirects to the server's callback; auth.oauth.complete resolves,
 * the row says signed in, and Test lists the server's tool with the token.
 */
export async function signInFromTheMcpPage({ browser, base, mintToken, watch, axe }: McpCtx): Promise<void> {
  const auth = await startAuthServer()
  const ctx = await browser.newContext({ viewport: { width: 1100, height: 760 } })
  await ctx.addInitScript((t) => localStorage.setItem('zidane.auth', JSON.stringify({ token: t, scope: 'admin' })), mintToken('mcp-signin', 'admin'))
  const p = await ctx.newPage()
  watch(p)
  try {
    await p.goto(`${base}/mcp`)
    const form = p.getByRole('form', { name: 'Add an MCP server' })
    await form.getByRole('option', { name: 'HTTP (a URL)' }).waitFor({ state: 'attached' })
    await form.getByLabel('Name').fill('guarded')
    await form.getByLabel('Kind').selectOption('http')
    await form.getByLabel('File').selectOption('user')
    await form.getByLabel('URL').fill(auth.mcp)
    await form.getByRole('button', { name: 'Add' }).click()
    const row = p.getByRole('list', { name: 'MCP servers' }).getByRole('listitem', { name: 'guarded' })
    await row.getByText(/user · http · not signed in/).waitFor()

    const [tab] = await Promise.all([ctx.waitForEvent('page'), row.getByRole('button', { name: 'Sign in' }).click()])
    // The authorization server's page redirects at once (the example grants without a consent
    // page) to the server's own callback, which says the sign-in is done.
    await tab.waitForURL((u) => u.href.startsWith(`${base}/zidane/oauth/callback?`), { timeout: 20_000 })
    const asked = (await (await fetch(`${auth.as}test/log`)).json()) as { authorize: { redirectUri: string; resource: string | null }[] }
    assert.deepEqual(asked.authorize.map((a) => a.redirectUri), [`${base}/zidane/oauth/callback`], 'the redirect the app passed')
    assert.equal(asked.authorize[0]!.resource, auth.mcp, 'the resource parameter names the MCP server')
    await row.getByText(/user · http · signed in/).waitFor({ timeout: 20_000 })
    await tab.close()

    await row.getByRole('button', { name: 'Test' }).click()
    await row.getByText(/^Last test: ok, 1 tools/).waitFor({ timeout: 30_000 })
    await row.getByRole('list', { name: 'Tools of guarded' }).getByText('mcp__guarded__whoami', { exact: true }).waitFor()
    await axe(p, 'mcp signed in')
    await row.getByRole('button', { name: 'Remove' }).click()
    await row.waitFor({ state: 'detached' })
  } finally {
    await ctx.close()
    auth.stop()
  }
}

/**
 * URL-mode elicitation: server-everything's trigger-url-elicitation asks the person to open an
 * address; the Elicitation dialog shows it as text and as a link opened with rel noopener
 * noreferrer; Done answers the server accept, Decline decline, and the tool call completes.
 */
export async function urlElicitationDoneAndDeclined({ page, newSession, send }: McpCtx): Promise<void> {
  await newSession(page, 'elicitUrl/scripted')
  for (const [button, said] of [['Done', 'User completed the URL elicitation flow'], ['Decline', 'User declined to open the URL']] as const) {
    await send(page, `Elicit a URL, then ${button}.`)
    const approval = page.getByRole('dialog', { name: 'Approval' })
    await approval.waitFor()
    await approval.getByRole('button', { name: 'Allow', exact: true }).click()
    const dialog = page.getByRole('dialog', { name: 'Elicitation' })
    await dialog.waitFor()
    await dialog.getByText('Connect the test account.').waitFor()
    assert.equal(await dialog.getByLabel('Address').textContent(), elicitAddress)
    const link = dialog.getByRole('link', { name: 'Open the address' })
    assert.equal(await link.getAttribute('href'), elicitAddress)
    assert.equal(await link.getAttribute('target'), '_blank')
    assert.equal(await link.getAttribute('rel'), 'noopener noreferrer')
    await dialog.getByRole('button', { name: button }).click()
    await dialog.waitFor({ state: 'detached' })
    await idle(page)
    const text = (await transcript(page).textContent()) ?? ''
    assert.ok(text.includes(said), `the server got ${button}: ${text.slice(-400)}`)
  }
  const text = (await transcript(page).textContent()) ?? ''
  assert.equal(text.split('URL elicited.').length - 1, 2, 'both tool calls completed and the runs went on')
}

/**
 * An MCP tool's image result in the transcript: server-everything's get-tiny-image returns a PNG
 * content block; the tool row shows it as an <img> from a data:image/png URL (the page's CSP,
 * img-src 'self' data: blob:, lets it load), decoded (naturalWidth > 0), alt text naming the
 * tool, visible with the row collapsed; after a reload it shows again from the stored event, and
 * the page asked no other origin for anything and logged no error (a CSP violation is one).
 */
export async function mcpToolImageShowsInline({ page, newSession, send, axe, problems }: McpCtx): Promise<void> {
  problems.length = 0
  await newSession(page, 'tinyImage/scripted')
  await send(page, 'Fetch the tiny image.')
  const approval = page.getByRole('dialog', { name: 'Approval' })
  await approval.waitFor()
  await approval.getByRole('button', { name: 'Allow', exact: true }).click()
  await transcript(page).getByText('Image fetched.').waitFor({ timeout: 20_000 })
  await idle(page)
  const shown = async () => {
    const img = transcript(page).getByRole('list', { name: 'Media from mcp__elicit__get-tiny-image' }).getByRole('img', { name: 'Image from mcp__elicit__get-tiny-image' })
    await img.waitFor()
    await img.evaluate((el: HTMLImageElement) => el.decode())
    return img.evaluate((el: HTMLImageElement) => ({ src: el.src.slice(0, 22), width: el.naturalWidth, height: el.naturalHeight, visible: el.checkVisibility() }))
  }
  const live = await shown()
  assert.equal(live.src, 'data:image/png;base64,')
  assert.ok(live.width > 0 && live.height > 0, `the PNG decoded: ${live.width}×${live.height}`)
  assert.equal(live.visible, true, 'shown while the tool row is collapsed')
  await axe(page, 'tool image')
  await page.reload()
  await transcript(page).getByText('Image fetched.').waitFor({ timeout: 20_000 })
  const stored = await shown()
  assert.deepEqual(stored, live, 'the stored event shows the same image')
  assert.deepEqual(problems, [])
}
