// The client seed's page on the SSE protocol v1 (createSseHost): the same components as the other
// examples, streaming with fetch from the page's own origin. With `make run` in one terminal, either
// - with the Node bridge (createSseHandler) on the page's own server, which holds the token:
//     cd sdk-ts && npm run build && npx vite build examples/ui-sse
//     ZIDANE_TOKEN=$(../bin/zidane-server token create --name ui-sse --scope chat) node examples/ui-sse/server.mjs
//   then open http://127.0.0.1:4390/
// - or straight on zidane-server's own /api/chat (vite.config.ts proxies it to 127.0.0.1:4380):
//     cd sdk-ts && npx vite examples/ui-sse
//   then open http://localhost:5173/#token=$(bin/zidane-server token create --name ui --scope chat)
//   The page sends the token as Authorization: Bearer on every request, the stream's included.
// An app with its own sign-in (a cookie) passes no headers and lets its server check the cookie.
import { useState } from 'react'
import { createRoot } from 'react-dom/client'
import { createSseHost } from '../../src/adapters/index.js'
import { ChatProvider } from '../../src/react/index.js'
import { SeedPage } from '../seed-page.js'
import '../../src/react/styles.css'
import '../page.css'

const params = new URLSearchParams(location.hash.slice(1))
const token = params.get('token') ?? ''
const host = createSseHost({
  baseUrl: params.get('base') ?? '/api/chat',
  headers: (): Record<string, string> => (token ? { authorization: `Bearer ${token}` } : {}),
})

function Page() {
  const [id, setId] = useState<string>()
  const create = () => void host.createSession({}).then((s) => setId(s.id))
  return <SeedPage id={id} onSelect={setId} onNewSession={create} />
}

createRoot(document.getElementById('root')!).render(
  <ChatProvider host={host}>
    <Page />
  </ChatProvider>,
)
