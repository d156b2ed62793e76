// Removes the folders named on the command line (relative to sdk-ts/), like rm -rf.
import { rmSync } from 'node:fs'

for (const dir of process.argv.slice(2)) {
  rmSync(new URL(`../${dir}`, import.meta.url), { recursive: true, force: true })
}
