// The web app's entry: mounts <App> (app.tsx) in #root.
import { StrictMode } from 'react'
import { createRoot } from 'react-dom/client'
import '../src/react/styles.css'
import './app.css'
import { App } from './app.js'

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <App />
  </StrictMode>,
)
