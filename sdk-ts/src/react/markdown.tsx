// Model text as markdown, safely (issue 24 section 1): react-markdown without raw HTML (HTML in the
// text is dropped, never parsed), links only to http(s) and mailto opened with
// rel="noopener noreferrer", images never fetched from anywhere (shown as a link to click), and code
// blocks highlighted as React elements by a lazily loaded chunk (prism-react-renderer). Names of
// existing files in the text become path chips inside <PathChips> (paths.tsx).
import { Children, lazy, memo, Suspense, type ReactNode } from 'react'
import ReactMarkdown, { type Components } from 'react-markdown'
import { PathText } from './paths.js'

const Highlight = lazy(() => import('./highlight.js'))

/** The link targets kept: http(s) and mailto; anything else (javascript:, data:, relative) becomes no link. */
export function safeUrl(url: string): string | undefined {
  try {
    const u = new URL(url)
    if (u.protocol === 'http:' || u.protocol === 'https:' || u.protocol === 'mailto:') return u.href
  } catch {
    // not an absolute URL
  }
  return undefined
}

/** Children with each string child rendered through PathText (path chips where they are on). */
function withPaths(children: ReactNode): ReactNode {
  return Children.map(children, (c) => (typeof c === 'string' ? <PathText text={c} /> : c))
}

const components: Components = {
  p: ({ children }) => <p>{withPaths(children)}</p>,
  li: ({ children }) => <li>{withPaths(children)}</li>,
  td: ({ children }) => <td>{withPaths(children)}</td>,
  th: ({ children }) => <th>{withPaths(children)}</th>,
  em: ({ children }) => <em>{withPaths(children)}</em>,
  strong: ({ children }) => <strong>{withPaths(children)}</strong>,
  a({ href, children }) {
    const url = href ? safeUrl(href) : undefined
    if (url === undefined) return <span className="zd-badlink">{children}</span>
    return (
      <a href={url} target="_blank" rel="noopener noreferrer">
        {children}
      </a>
    )
  },
  img({ src, alt }) {
    // Never loaded: an image from the model could track the reader or leak what is on the page.
    const url = typeof src === 'string' ? safeUrl(src) : undefined
    const label = `image: ${alt || 'untitled'}`
    return url ? (
      <a className="zd-image" href={url} target="_blank" rel="noopener noreferrer">
        [{label}]
      </a>
    ) : (
      <span className="zd-image">[{label}]</span>
    )
  },
  pre({ children }) {
    return <>{children}</>
  },
  code({ className, children }) {
    const text = String(children ?? '')
    const lang = /language-([\w+-]+)/.exec(className ?? '')?.[1]
    if (lang === undefined && !text.includes('\n')) return <code className="zd-code-inline">{withPaths(children)}</code>
    return <CodeBlock code={text.replace(/\n$/, '')} language={lang ?? 'text'} />
  },
}

/** Props of CodeBlock. */
export interface CodeBlockProps {
  code: string
  language: string
}

/** A code block: plain at once, highlighted when the highlighter chunk has loaded. */
export function CodeBlock(props: CodeBlockProps): ReactNode {
  const plain = (
    <pre className="zd-pre" data-language={props.language}>
      <code>{props.code}</code>
    </pre>
  )
  return (
    <Suspense fallback={plain}>
      <Highlight code={props.code} language={props.language} />
    </Suspense>
  )
}

/** Props of Markdown. */
export interface MarkdownProps {
  text: string
}

/**
 * Splits markdown into blocks at blank lines outside code fences, so a streaming answer re-parses
 * only its last block each frame (the earlier ones are memoized). Reference-style link definitions
 * apply within their own block.
 */
export function markdownBlocks(text: string): string[] {
  const blocks: string[] = []
  let fence: string | null = null
  let start = 0
  let pos = 0
  while (pos <= text.length) {
    const nl = text.indexOf('\n', pos)
    const end = nl < 0 ? text.length : nl
    const line = text.slice(pos, end)
    const m = /^ {0,3}(`{3,}|~{3,})/.exec(line)
    if (m) {
      if (fence === null) fence = m[1]![0]!
      else if (m[1]![0] === fence) fence = null
    } else if (fence === null && line.trim() === '' && end > start) {
      const block = text.slice(start, pos)
      if (block.trim() !== '') blocks.push(block)
      start = end + 1
    }
    if (nl < 0) break
    pos = nl + 1
  }
  const rest = text.slice(start)
  if (rest.trim() !== '') blocks.push(rest)
  return blocks
}

/** Text with nothing markdown or HTML would read specially: shown as a paragraph without parsing. */
const PLAIN = /^(?![ \t]*(?:[-+*>#|]|\d+[.)]|={2,}|-{2,}))[^*_`\[\]<>!~\\&|\n]*$/

const MarkdownBlock = memo(function MarkdownBlock({ text }: MarkdownProps): ReactNode {
  if (PLAIN.test(text)) return <p><PathText text={text} /></p>
  return (
    <ReactMarkdown skipHtml urlTransform={(url) => url} components={components}>
      {text}
    </ReactMarkdown>
  )
})

/** Renders markdown text with the rules above, block by block. */
export const Markdown = memo(function Markdown(props: MarkdownProps): ReactNode {
  const blocks = markdownBlocks(props.text)
  return (
    <div className="zd-md">
      {blocks.map((b, i) => (
        <MarkdownBlock key={i} text={b} />
      ))}
    </div>
  )
})
