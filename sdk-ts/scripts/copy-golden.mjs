// Copies the golden TypeScript bindings of the generator's full and minimal fixtures
// (gen/testdata/fixtures/<name>/golden/sdk-ts__src__protocol.ts.golden) to dist-golden/<name>.ts, so
// tsconfig.golden.json type-checks them like the real bindings (tsc reads only .ts names).
import { copyFileSync, mkdirSync, rmSync } from 'node:fs'

const fixtures = new URL('../../gen/testdata/fixtures/', import.meta.url)
const out = new URL('../dist-golden/', import.meta.url)
rmSync(out, { recursive: true, force: true })
mkdirSync(out, { recursive: true })
for (const name of ['full', 'minimal']) copyFileSync(new URL(`${name}/golden/sdk-ts__src__protocol.ts.golden`, fixtures), new URL(`${name}.ts`, out))
