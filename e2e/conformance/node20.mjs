// Lets the conformance CLI run on Node 20: it imports fs.globSync by name, which Node added in 22.
// Loaded with `node --import ./node20.mjs`; on Node 22 and later it does nothing. The shim's
// globSync is never reached by the client scenarios (it lists SEP files for other commands).
import { register } from 'node:module';
import fs from 'node:fs';

if (typeof fs.globSync !== 'function') {
  const shim = new URL('./fsshim.mjs', import.meta.url).href;
  register('data:text/javascript,' + encodeURIComponent(`
export async function resolve(spec, ctx, next) {
  if ((spec === 'fs' || spec === 'node:fs') && ctx.parentURL && ctx.parentURL.includes('/@modelcontextprotocol/conformance/')) {
    return { url: ${JSON.stringify(shim)}, shortCircuit: true };
  }
  return next(spec, ctx);
}`));
}
