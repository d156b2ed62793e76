// The ui-sse example's dev server: the page and /api/chat on one origin (the SSE protocol sets no
// CORS headers), /api/chat proxied to a zidane-server (ZIDANE_URL, default http://127.0.0.1:4380)
// or to a Node server mounting createSseHandler.
import react from '@vitejs/plugin-react'
import { defineConfig } from 'vite'

export default defineConfig({
  plugins: [react()],
  server: {
    proxy: { '/api/chat': { target: process.env['ZIDANE_URL'] ?? 'http://127.0.0.1:4380', changeOrigin: false } },
  },
})
