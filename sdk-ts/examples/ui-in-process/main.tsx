// The client seed's page on an in-page host (createRunHost): a scripted run streams an answer,
// calls a tool and asks a question; no server, no API key. Run it with
//   cd sdk-ts && npx vite examples/ui-in-process
import { useEffect, useState } from 'react'
import { createRoot } from 'react-dom/client'
import { createRunHost } from '../../src/adapters/index.js'
import { ChatProvider, useStore } from '../../src/react/index.js'
import { SeedPage } from '../seed-page.js'
import '../../src/react/styles.css'
import '../page.css'

const host = createRunHost({
  async run({ prompt, emit, ask, signal }) {
    emit({ kind: 'markdown', text: 'Looking ', streaming: true })
    emit({ kind: 'markdown', text: 'it **up**.', streaming: true })
    emit({ kind: 'tool', tool: 'lookup', callId: 'c1', text: 'lookup(…)', input: { query: prompt } })
    emit({ kind: 'tool-result', tool: 'lookup', callId: 'c1', text: `found ${prompt.split(/\s+/).length} word(s)` })
    const answer = await ask({ prompt: 'Shall I go on?', options: ['yes', 'no'] })
    if (!signal.aborted) emit({ kind: 'markdown', text: answer === 'yes' || (answer as { choices?: string[] })?.choices?.[0] === 'yes' ? 'Going on: done.' : 'Never mind.', streaming: true })
  },
})

function Page() {
  const sessions = useStore(host.sessions)
  const [id, setId] = useState<string>()
  const create = () => void host.createSession({ title: `Session ${sessions.length + 1}` }).then((s) => setId(s.id))
  useEffect(() => {
    if (host.sessions.get().length === 0) create()
  }, [])
  return <SeedPage id={id} onSelect={setId} onNewSession={create} />
}

createRoot(document.getElementById('root')!).render(
  <ChatProvider host={host}>
    <Page />
  </ChatProvider>,
)
