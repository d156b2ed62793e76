// The web app's build (issue 24 section 2): `cd sdk-ts && npm run build:app` writes it to
// server/webapp/dist/, which the server embeds (go:embed) and serves on every plain GET.
import react from '@vitejs/plugin-react'
import { fileURLToPath } from 'node:url'
import { defineConfig } from 'vite'

export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/',
  plugins: [react()],
  build: {
    outDir: fileURLToPath(new URL('../../server/webapp/dist/', import.meta.url)),
    // The folder holds the server's committed placeholder: scripts/clean.mjs empties assets/ instead.
    emptyOutDir: false,
    assetsDir: 'assets',
    sourcemap: false,
    target: 'es2022',
    modulePreload: { polyfill: false },
  },
})
