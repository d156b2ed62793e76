// The code highlighter, a lazy chunk: prism-react-renderer's tokens as React elements (never an HTML
// string). Colors come from the theme's CSS variables (styles.css, .zd-tok-*), so light and dark
// both read well.
import { Highlight, Prism } from 'prism-react-renderer'
import type { ReactNode } from 'react'
import type { CodeBlockProps } from './markdown.js'

const emptyTheme = { plain: {}, styles: [] }

/** The highlighted block; languages Prism does not know render plain. */
export default function HighlightedCode(props: CodeBlockProps): ReactNode {
  const lang = Prism.languages[props.language] ? props.language : 'text'
  return (
    <Highlight prism={Prism} theme={emptyTheme} code={props.code} language={lang}>
      {({ tokens, getLineProps, getTokenProps }) => (
        <pre className="zd-pre" data-language={props.language}>
          <code>
            {tokens.map((line, i) => {
              const { style: _ls, ...lineProps } = getLineProps({ line })
              return (
                <div key={i} {...lineProps}>
                  {line.map((token, j) => {
                    const { style: _ts, className, ...tokenProps } = getTokenProps({ token })
                    return <span key={j} {...tokenProps} className={`${className} ${token.types.map((t) => `zd-tok-${t}`).join(' ')}`} />
                  })}
                </div>
              )
            })}
          </code>
        </pre>
      )}
    </Highlight>
  )
}
