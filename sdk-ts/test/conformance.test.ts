// The SDK passes the conformance kit's client mode (issue 29): bin/zidane-conformance plays the
// server side for test/conformance-client.mjs (createServerClient and its resume path, built from
// dist/), cuts it mid-stream, and checks that it applied every known signal exactly once in $seq
// order, skipped the unknown kind and treated MethodNotFound as not offered. The same client with
// --no-resume (it never follows the session) must fail, naming the signal it lost.
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'

/** The repository's root: dist-test/test/ is three levels below it. */
const repo = fileURLToPath(new URL('../../../', import.meta.url))
const kitBin = process.env['ZIDANE_CONFORMANCE_BIN'] ?? join(repo, 'bin', 'zidane-conformance')

/** Runs the kit's client mode on the SDK's test client; resolves with its exit code and output. */
function runKit(clientFlags: string, timeout: string): Promise<{ code: number; out: string }> {
  if (!existsSync(kitBin)) throw new Error(`${kitBin} is missing: run \`go build -o bin/ ./cmd/zidane-conformance\` in the repository (make test does) or set ZIDANE_CONFORMANCE_BIN.`)
  const cmd = `node sdk-ts/test/conformance-client.mjs${clientFlags}`
  return new Promise((resolve) => {
    execFile(kitBin, ['client', '--cmd', cmd, '--timeout', timeout], { cwd: repo }, (err, stdout, stderr) => {
      const code = err === null ? 0 : typeof err.code === 'number' ? err.code : -1
      resolve({ code, out: stdout + stderr })
    })
  })
}

test('conformance kit, client mode: the SDK resumes exactly after a cut, skips unknown kinds, treats MethodNotFound as not offered', async () => {
  const { code, out } = await runKit('', '15s')
  assert.match(out, /^PASS client\/resume-after-cut/m, out)
  assert.match(out, /\b0 failed\b/, out)
  assert.equal(code, 0, out)
})

test('conformance kit, client mode: the SDK client without resume fails, naming the signal it lost', async () => {
  const { code, out } = await runKit(' --no-resume', '2s')
  assert.match(out, /^FAIL client\/resume-after-cut: .*applied line for \$seq 7/m, out)
  assert.equal(code, 1, out)
})
