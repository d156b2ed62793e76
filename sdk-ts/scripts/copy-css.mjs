// Copies the components' stylesheet (src/react/styles.css) beside the built entry: @zidane/sdk/react/styles.css.
import { copyFileSync } from 'node:fs'

copyFileSync(new URL('../src/react/styles.css', import.meta.url), new URL('../dist/react/styles.css', import.meta.url))
