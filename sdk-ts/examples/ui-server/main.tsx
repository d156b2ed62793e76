// The client seed's page on zidane-server (createServerHost, with its tool approvals). With `make
// run` in one terminal:
//   ZIDANE_SERVER_ALLOWED_ORIGINS=http://localhost:5173 make run      (or --allowed-origin)
//   cd sdk-ts && npx vite examples/ui-server
// then open http://localhost:5173/#url=ws://127.0.0.1:4380&token=$(bin/zidane-server token create --name ui --scope chat)
import { useState } from 'react'
import { createRoot } from 'react-dom/client'
import { createServerApprovalsHost, createServerHost } from '../../src/adapters/index.js'
import { ChatProvider, useStore } from '../../src/react/index.js'
import { SeedPage } from '../seed-page.js'
import '../../src/react/styles.css'
import '../page.css'

const params = new URLSearchParams(location.hash.slice(1))
const host = createServerHost({ url: params.get('url') ?? 'ws://127.0.0.1:4380', token: params.get('token') ?? '' })
const approvals = createServerApprovalsHost({ client: host.client })

function Page() {
  const connection = useStore(host.connection)
  const [id, setId] = useState<string>()
  const create = () => void host.createSession({}).then((s) => setId(s.id))
  return (
    <SeedPage
      id={id}
      onSelect={setId}
      onNewSession={create}
      aside={
        <p role="status" aria-label="Connection">
          {connection.status}
        </p>
      }
    />
  )
}

createRoot(document.getElementById('root')!).render(
  <ChatProvider host={host} approvals={approvals}>
    <Page />
  </ChatProvider>,
)
