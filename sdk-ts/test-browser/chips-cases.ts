// Path chips, workspace media through tickets and the shared sidebar in Chromium (issue 24 items
// 1 and 2), run by app.test.ts on its one browser and server: the scripted provider these cases
// use and the cases themselves. Every wait is on the page's state, never a sleep.
import assert from 'node:assert/strict'
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { BrowserContext, Page, Response } from 'playwright-core'

/** The scripted provider: an answer naming an existing file and a missing one, and a glob whose result names an image. */
export const chipScripts: Record<string, unknown> = {
  chips: {
    loop: true,
    turns: [
      { steps: [{ text: 'See `chips/hello.go` and chips/missing.go for details.' }, { tool: { name: 'glob', arguments: { pattern: 'chips/*.png' }, id: 'g1' } }] },
      { steps: [{ text: 'Found the picture.' }] },
    ],
  },
}

/** A 1×1 PNG. */
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=='

/** What the cases need of app.test.ts. */
export interface ChipsCtx {
  page: Page
  context: BrowserContext
  /** The server's first workspace root (new sessions' folder). */
  root: string
  newSession(p: Page, model?: string): Promise<string>
  send(p: Page, text: string): Promise<void>
}

const transcript = (p: Page) => p.getByRole('log', { name: 'Transcript' })
const idle = (p: Page) => p.getByRole('button', { name: 'Stop' }).waitFor({ state: 'detached', timeout: 20_000 })

function writeChipFiles(root: string): void {
  mkdirSync(join(root, 'chips'), { recursive: true })
  writeFileSync(join(root, 'chips', 'hello.go'), 'package chips\n\n// Hello greets.\nfunc Hello() string { return "hello from the chip" }\n')
  writeFileSync(join(root, 'chips', 'pixel.png'), Buffer.from(PNG, 'base64'))
}

/**
 * An answer naming an existing file shows a chip (files.resolvePaths); clicking it opens the file
 * viewer with the file's content, highlighted (files.read); Escape closes it and focus returns to
 * the chip; a name that is no file stays text. The glob's result names an image, shown from
 * /zidane/media under a ticket registered on the page's connection.
 */
export async function pathChipOpensTheFile({ page, root, newSession, send }: ChipsCtx): Promise<void> {
  writeChipFiles(root)
  const media: Response[] = []
  const onResponse = (r: Response) => {
    if (new URL(r.url()).pathname === '/zidane/media') media.push(r)
  }
  page.on('response', onResponse)
  try {
    await newSession(page, 'chips/scripted')
    await send(page, 'Show me the chips.')
    await transcript(page).getByText('Found the picture.').waitFor({ timeout: 20_000 })
    await idle(page)
    const chip = transcript(page).getByRole('button', { name: 'chips/hello.go', exact: true }).first()
    await chip.waitFor()
    // The missing file stays text: no chip, the name still there.
    assert.equal(await transcript(page).getByRole('button', { name: 'chips/missing.go' }).count(), 0)
    assert.match((await transcript(page).textContent()) ?? '', /chips\/missing\.go/)
    await chip.click()
    const viewer = page.getByRole('dialog', { name: 'File hello.go' })
    await viewer.getByText('hello from the chip').waitFor()
    assert.match((await viewer.textContent()) ?? '', /package chips/)
    // Highlighted by the transcript's highlighter: tokens as elements, never an HTML string.
    await viewer.locator('.zd-tok-keyword').first().waitFor()
    await page.keyboard.press('Escape')
    await viewer.waitFor({ state: 'detached' })
    assert.equal(await chip.evaluate((el) => el === document.activeElement), true, 'focus back on the chip')

    // The image the glob's result names, from the same origin's media route under a ticket.
    const img = transcript(page).getByRole('list', { name: 'Images' }).getByRole('img', { name: 'chips/pixel.png' })
    await img.waitFor()
    await page.waitForFunction(() => {
      const el = document.querySelector('.zd-tool-media img') as HTMLImageElement | null
      return el !== null && el.complete && el.naturalWidth === 1
    })
    const src = (await img.getAttribute('src')) ?? ''
    const u = new URL(src, page.url())
    assert.equal(u.origin, new URL(page.url()).origin)
    assert.equal(u.pathname, '/zidane/media')
    assert.match(u.searchParams.get('ticket') ?? '', /^[A-Za-z0-9_-]{32,}$/)
    assert.equal(u.searchParams.get('path'), join(root, 'chips', 'pixel.png'))
    const ok = media.find((r) => r.status() === 200)
    assert.ok(ok, `a 200 from /zidane/media: ${media.map((r) => r.status()).join(', ')}`)
    assert.equal(ok.headers()['content-type'], 'image/png')
    // Without its ticket the same address is refused: the ticket is what lets the <img> in.
    u.searchParams.set('ticket', 'x'.repeat(40))
    const refused = await page.evaluate((href) => fetch(href).then((r) => r.status), u.pathname + u.search)
    assert.equal(refused, 401)
  } finally {
    page.off('response', onResponse)
  }
}

/** A pin and a space switched in page A show in page B live (sidebar.setView, sidebar.setSpace, sidebar:changed), and back. */
export async function sidebarSharedAcrossPages({ page, context }: ChipsCtx): Promise<void> {
  const title = 'Show me the chips.'
  const item = (p: Page) => p.getByRole('list', { name: 'Sessions' }).getByRole('listitem').filter({ has: p.getByRole('button', { name: title, exact: true }) }).first()
  const pin = (p: Page) => item(p).getByRole('button', { name: 'Pin', exact: true })
  const space = (p: Page, name: string) => p.getByRole('group', { name: 'Space' }).getByRole('button', { name, exact: true })
  const other = await context.newPage()
  try {
    await other.goto(page.url())
    await other.getByRole('status', { name: 'Connection' }).getByText('Connected').waitFor()
    await pin(other).waitFor()
    assert.equal(await pin(other).getAttribute('aria-pressed'), 'false')
    await pin(page).click()
    await other.waitForFunction((t) => {
      const li = [...document.querySelectorAll('[aria-label=Sessions] li')].find((l) => l.querySelector('.zd-session-title')?.textContent === t)
      return li?.querySelector('button[aria-label=Pin]')?.getAttribute('aria-pressed') === 'true'
    }, title)
    // Pinned sessions come first.
    assert.equal(await other.getByRole('list', { name: 'Sessions' }).getByRole('listitem').first().getByRole('button', { name: title, exact: true }).count(), 1)
    // The space on show follows too: Pinned in B shows in A, listing only the pinned session.
    await space(other, 'Pinned').click()
    await page.waitForFunction(() => document.querySelector('[aria-label=Space] button[aria-pressed=true]')?.textContent === 'Pinned')
    assert.equal(await page.getByRole('list', { name: 'Sessions' }).getByRole('listitem').count(), 1)
    // A reload reads them back from the server.
    await other.reload()
    await space(other, 'Pinned').and(other.locator('[aria-pressed=true]')).waitFor()
    // Back as it was, for the cases after this one.
    await space(page, 'All').click()
    await other.waitForFunction(() => document.querySelector('[aria-label=Space] button[aria-pressed=true]')?.textContent === 'All')
    await pin(page).click()
    await other.waitForFunction((t) => {
      const li = [...document.querySelectorAll('[aria-label=Sessions] li')].find((l) => l.querySelector('.zd-session-title')?.textContent === t)
      return li?.querySelector('button[aria-label=Pin]')?.getAttribute('aria-pressed') === 'false'
    }, title)
  } finally {
    await other.close()
  }
}
