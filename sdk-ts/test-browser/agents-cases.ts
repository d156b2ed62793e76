// The web app's agents, commands, subagents, search and turn menu in Chromium (issues 27 item 6 and
// 28 item 5), run by app.test.ts on its one browser and server: the project's .zidane/ files and the
// scripted providers these cases use, and the cases themselves. Every wait is on the page's state.
import assert from 'node:assert/strict'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import type { Page } from 'playwright-core'

type Step = Record<string, unknown>
const turn = (...steps: Step[]) => ({ steps })
const text = (t: string): Step => ({ text: t })

/** The scripted providers: lead hands a write to helper (task), helper asks to write it, quick answers at once. */
export const agentScripts: Record<string, unknown> = {
  lead: { turns: [turn(text('Handing it to the helper. '), { tool: { name: 'task', arguments: { agent: 'helper', prompt: 'Write child.txt.', description: 'child notes' }, id: 't1' } }), turn(text('The helper finished.'))] },
  helper: { turns: [turn({ tool: { name: 'write_file', arguments: { path: 'child.txt', content: 'from the child\n' }, id: 'w1' } }), turn(text('Wrote child.txt.'))] },
  quick: { loop: true, turns: [turn(text('Quick answer.'))] },
}

/** Writes the project's definitions under root/.zidane/: agents lead and helper, a broken agent, a skill and a command. */
export function writeProjectFiles(root: string): void {
  const files: Record<string, string> = {
    '.zidane/agents/lead.md': '---\ndescription: Hands work to the helper\nmodel: lead/scripted\ntools: task, read_file, write_file\n---\nYou lead.\n',
    '.zidane/agents/helper.md': '---\ndescription: Writes files\nmodel: helper/scripted\ntools: write_file, read_file\n---\nYou help.\n',
    '.zidane/agents/broken.md': '---\nname: [unclosed\n---\nBroken.\n',
    '.zidane/skills/notes/SKILL.md': '---\nname: notes\ndescription: Keeps meeting notes tidy\n---\nUse headings.\n',
    'mention-me.txt': 'the mentioned content\n',
    '.zidane/commands/greet.md': '---\ndescription: Greets someone\nargument-hint: <name>\nmodel: quick/scripted\n---\nSay hello to $ARGUMENTS.\n',
  }
  for (const [rel, body] of Object.entries(files)) {
    mkdirSync(dirname(join(root, rel)), { recursive: true })
    writeFileSync(join(root, rel), body)
  }
}

/** What the cases need of app.test.ts. */
export interface Ctx {
  page: Page
  root: string
  newSession(p: Page, model?: string): Promise<string>
  send(p: Page, text: string): Promise<void>
  /** axe-core on the page: no serious or critical violation. */
  axe(p: Page, view: string): Promise<void>
}

const transcript = (p: Page) => p.getByRole('log', { name: 'Transcript' })
const composer = (p: Page) => p.getByRole('textbox', { name: 'Message' })
const sessionOf = (p: Page) => decodeURIComponent(new URL(p.url()).pathname.slice(3))
const idle = (p: Page) => p.getByRole('button', { name: 'Stop' }).waitFor({ state: 'detached', timeout: 20_000 })

/** The agent picker lists build, plan and the project's agents, switches to plan (kept after a reload), and shows skills and the broken file. */
export async function agentPickerSwitchesToPlan({ page, newSession }: Ctx): Promise<void> {
  await newSession(page)
  const picker = page.getByRole('combobox', { name: 'Agent' })
  await page.waitForFunction(() => (document.querySelector('.agents select') as HTMLSelectElement | null)?.value === 'build')
  const options = await picker.locator('option').allTextContents()
  for (const want of ['build', 'plan', 'lead (project)', 'helper (project)']) assert.ok(options.includes(want), `${want} in ${options.join(', ')}`)
  await picker.selectOption('plan')
  await page.getByRole('status').getByText("plan runs this session's next prompt").waitFor()
  await page.reload()
  await page.waitForFunction(() => (document.querySelector('.agents select') as HTMLSelectElement | null)?.value === 'plan')
  const details = page.locator('.agent-details')
  await details.locator('summary').click()
  await details.getByRole('list', { name: 'Skills' }).getByText('Keeps meeting notes tidy').waitFor()
  const problems = (await details.getByRole('list', { name: 'Definition problems' }).textContent()) ?? ''
  assert.match(problems, /broken\.md/)
  assert.match((await details.locator('summary').textContent()) ?? '', /1 skill, \d+ definition problems?/)
}

/**
 * `/` offers the project's command in an accessible listbox; Enter picks it and the prompt runs as
 * chat.send {command, arguments}; ArrowUp recalls it; `@` offers a file, sent as a mention.
 */
export async function slashCommandRuns({ page, newSession, axe }: Ctx): Promise<string> {
  const sessionId = await newSession(page)
  const box = composer(page)
  await box.pressSequentially('/gre')
  const list = page.getByRole('listbox', { name: 'Completions' })
  const option = list.getByRole('option', { name: /\/greet/ })
  await option.waitFor()
  assert.equal(await option.getAttribute('aria-selected'), 'true')
  assert.equal(await box.getAttribute('aria-activedescendant'), await option.getAttribute('id'))
  await axe(page, 'completions open')
  await box.press('Enter')
  await list.waitFor({ state: 'detached' })
  assert.equal(await box.inputValue(), '/greet ')
  await box.pressSequentially('zebracorn')
  await page.waitForFunction(() => [...document.querySelectorAll('button')].some((b) => b.textContent === 'Send' && !b.disabled))
  await box.press('Enter')
  await transcript(page).getByText('Say hello to zebracorn.').waitFor()
  await transcript(page).getByText('/greet zebracorn').waitFor() // the transcript records the command
  await transcript(page).getByText('Quick answer.').waitFor()
  await idle(page)
  // ArrowUp in the empty box brings the prompt back from history.prompts; ArrowDown empties it again.
  await box.press('ArrowUp')
  await page.waitForFunction(() => (document.querySelector('textarea[aria-label=Message]') as HTMLTextAreaElement).value.includes('zebracorn'))
  await box.press('ArrowDown')
  assert.equal(await box.inputValue(), '')
  // @ offers files; Tab picks one as a mention (a chip), which reaches the model as a read_file result.
  await page.getByLabel('Model').selectOption('quick/scripted')
  await box.pressSequentially('Look at @mention-m')
  const file = list.getByRole('option', { name: /mention-me\.txt/ })
  await file.waitFor()
  await box.press('Tab')
  assert.equal(await box.inputValue(), 'Look at @mention-me.txt ')
  await page.getByRole('list', { name: 'Mentions' }).getByText('@mention-me.txt').waitFor()
  await page.waitForFunction(() => [...document.querySelectorAll('button')].some((b) => b.textContent === 'Send' && !b.disabled))
  await box.press('Enter')
  await transcript(page).getByText('Look at @mention-me.txt').waitFor()
  await transcript(page).getByText('read_file', { exact: true }).first().click()
  await transcript(page).getByText('the mentioned content').waitFor()
  await page.getByRole('list', { name: 'Mentions' }).waitFor({ state: 'detached' })
  await idle(page)
  return sessionId
}

/** A subagent's child session shows nested under the parent's task call; its approval is answered in the parent's view. */
export async function subagentNestedAndApprovedFromParent({ page, root, newSession, send }: Ctx): Promise<void> {
  const parent = await newSession(page)
  await page.getByRole('combobox', { name: 'Agent' }).selectOption('lead')
  await page.getByRole('status').getByText("lead runs this session's next prompt").waitFor()
  await send(page, 'Delegate the notes.')
  const approval = page.getByRole('dialog', { name: 'Approval' })
  await approval.waitFor()
  await approval.getByText('Asked by subagent helper').waitFor()
  await approval.getByText('from the child').first().waitFor()
  const row = transcript(page).getByRole('group', { name: /^Subagent helper: child notes/ })
  await row.waitFor()
  assert.equal(await page.getByRole('list', { name: 'Sessions' }).getByRole('button', { name: 'child notes' }).count(), 0, 'a child session is not an item of Sessions')
  await approval.getByRole('button', { name: 'Allow', exact: true }).click()
  await transcript(page).getByText('The helper finished.').waitFor()
  await row.getByText('done').waitFor()
  assert.equal(readFileSync(join(root, 'child.txt'), 'utf8'), 'from the child\n')
  await row.getByRole('button', { name: 'Open child session' }).click()
  await page.waitForURL((u) => u.pathname.startsWith('/s/') && decodeURIComponent(u.pathname.slice(3)) !== parent)
  await transcript(page).getByText('Wrote child.txt.').waitFor()
  await page.getByRole('button', { name: 'Open parent session' }).click()
  await page.waitForURL((u) => decodeURIComponent(u.pathname.slice(3)) === parent)
  await transcript(page).getByText('The helper finished.').waitFor()
}

/** The search box finds a word of one session's prompt, with the word marked, and opens that session at its turn. */
export async function searchOpensTheSession({ page }: Ctx, sessionId: string): Promise<void> {
  await page.getByRole('searchbox', { name: 'Search sessions' }).fill('zebracorn')
  const results = page.getByRole('list', { name: 'Search results' })
  const hit = results.getByRole('button').first()
  await hit.waitFor()
  assert.equal(await results.getByRole('button').count(), 1)
  assert.equal(await hit.locator('mark').first().textContent(), 'zebracorn')
  await hit.click()
  await page.waitForURL((u) => decodeURIComponent(u.pathname.slice(3)) === sessionId && u.searchParams.has('turn'))
  const focused = transcript(page).locator('[data-focused=true]')
  await focused.waitFor()
  assert.match((await focused.textContent()) ?? '', /zebracorn/)
  await page.getByRole('searchbox', { name: 'Search sessions' }).fill('')
}

/** A turn's menu forks the session at its first turn (the fork holds that exchange only) and opens the fork; Roll back here offers Restore, which brings the exchange back. */
export async function forkAndRollBackFromTheTurnMenu({ page, send, axe }: Ctx, sessionId: string): Promise<void> {
  await page.goto(new URL(`/s/${encodeURIComponent(sessionId)}`, page.url()).href)
  await transcript(page).getByText('Look at @mention-me.txt').waitFor()
  await transcript(page).getByRole('button', { name: 'Turn menu' }).first().click()
  await axe(page, 'turn menu open')
  await page.getByRole('menu', { name: 'Turn' }).getByRole('menuitem', { name: 'Fork' }).click()
  await page.waitForURL((u) => u.pathname.startsWith('/s/') && decodeURIComponent(u.pathname.slice(3)) !== sessionId)
  const fork = sessionOf(page)
  await transcript(page).getByText('Say hello to zebracorn.').waitFor()
  await transcript(page).getByText('Quick answer.').waitFor()
  assert.equal(await transcript(page).getByText('Look at @mention-me.txt').count(), 0, 'the fork ends with the first exchange')
  // A second exchange in the fork, then roll back to the first: the second goes, Restore brings it back.
  await page.getByLabel('Model').selectOption('quick/scripted')
  await send(page, 'A second exchange.')
  await transcript(page).getByText('Quick answer.').nth(1).waitFor()
  await idle(page)
  await transcript(page).getByRole('button', { name: 'Turn menu' }).first().click()
  await page.getByRole('menuitem', { name: 'Roll back here' }).click()
  const notice = page.getByRole('status', { name: 'Rollback' })
  await notice.getByText('Rolled back 1 exchange.').waitFor()
  await transcript(page).getByText('A second exchange.').waitFor({ state: 'detached' })
  await notice.getByRole('button', { name: 'Restore' }).click()
  await transcript(page).getByText('A second exchange.').waitFor()
  await notice.waitFor({ state: 'detached' })
  assert.equal(sessionOf(page), fork)
  // Compact session: the summary shows as the marked block, and the transcript keeps everything.
  await transcript(page).getByRole('button', { name: 'Turn menu' }).first().click()
  await page.getByRole('menuitem', { name: 'Compact session' }).click()
  await transcript(page).getByRole('note', { name: 'Compacted' }).waitFor()
  await transcript(page).getByText('A second exchange.').waitFor()
}
