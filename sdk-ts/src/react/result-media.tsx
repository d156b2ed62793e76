// Media embedded in tool results (issue 24 section 1, "media"): an MCP tool's image and audio
// blocks travel on the tool-result event as base64 (ToolResultEvent.media). The transcript shows
// an image inline as a data: URL only when it is one of the raster types that run nothing
// (PNG, JPEG, GIF, WebP), its bytes carry that type's signature and it is at most
// RESULT_MEDIA_LIMITS.imageBytes; anything else (SVG, which may script; audio; unknown types;
// larger images) is a label naming its kind, type and size, with nothing to open or download.
// Workspace files named in a tool row show through media tickets instead (paths.tsx, media.tsx).
import { useMemo, type ReactNode } from 'react'
import type { ToolResultMedia } from '../protocol.js'
import { formatBytes } from './attachments.js'

/** The types an embedded image is put in an <img> as (a data: URL): raster formats only, never SVG. */
export const INLINE_IMAGE_TYPES: ReadonlySet<string> = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp'])

/** The bounds of inline media: decoded bytes of one image shown inline, blocks shown of one result. */
export const RESULT_MEDIA_LIMITS = Object.freeze({ imageBytes: 2 * 1024 * 1024, count: 8 })

/** How one media block of a tool result is shown: an inline image, or a label saying what it is. */
export type ResultMediaView =
  | { readonly kind: 'image'; readonly src: string; readonly alt: string; readonly mimeType: string; readonly bytes: number }
  | { readonly kind: 'label'; readonly text: string; readonly mimeType: string; readonly bytes: number }

/** A media type's essence: lower case, without parameters ("" when there is none). */
function essence(t: string): string {
  return (t.split(';')[0] ?? '').trim().toLowerCase()
}

/** The decoded size of standard padded base64, or undefined when the text is not that. */
function base64Bytes(data: string): number | undefined {
  if (data.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(data)) return undefined
  const pad = data.endsWith('==') ? 2 : data.endsWith('=') ? 1 : 0
  return (data.length / 4) * 3 - pad
}

/** Whether base64 bytes start with the signature of an inline image type (as browsers sniff them). */
function hasSignature(type: string, data: string): boolean {
  let head: string
  try {
    head = atob(data.slice(0, 16))
  } catch {
    return false
  }
  switch (type) {
    case 'image/png':
      return head.startsWith('\x89PNG\r\n\x1a\n')
    case 'image/jpeg':
      return head.startsWith('\xff\xd8\xff')
    case 'image/gif':
      return head.startsWith('GIF87a') || head.startsWith('GIF89a')
    case 'image/webp':
      return head.startsWith('RIFF') && head.slice(8, 12) === 'WEBP'
    default:
      return false
  }
}

/**
 * How a tool's media block is shown. alt names the tool ("Image from <tool>", with its number when
 * the result has several). A label is "<kind> (<type>, <size>)", and says why an image is not shown
 * inline when it could have been one (too large, bytes not of its type, not base64).
 */
export function resultMediaView(media: ToolResultMedia, tool: string, index = 0, count = 1): ResultMediaView {
  const type = essence(media.mimeType ?? '')
  const word = type.startsWith('image/') ? 'image' : type.startsWith('audio/') ? 'audio' : 'media'
  const data = typeof media.data === 'string' ? media.data : ''
  const bytes = base64Bytes(data)
  const what = `${word} (${type || 'no type'}${bytes === undefined ? '' : `, ${formatBytes(bytes)}`})`
  const label = (why?: string): ResultMediaView => ({ kind: 'label', text: why ? `${what}: ${why}` : what, mimeType: type, bytes: bytes ?? 0 })
  if (!INLINE_IMAGE_TYPES.has(type)) return label(type === 'image/svg+xml' ? 'SVG is not shown inline' : undefined)
  if (bytes === undefined) return label('not valid base64, not shown')
  if (bytes > RESULT_MEDIA_LIMITS.imageBytes) return label(`too large to show inline (over ${formatBytes(RESULT_MEDIA_LIMITS.imageBytes)})`)
  if (!hasSignature(type, data)) return label(`its bytes are not ${type}, not shown`)
  const alt = count > 1 ? `Image ${index + 1} of ${count} from ${tool}` : `Image from ${tool}`
  return { kind: 'image', src: `data:${type};base64,${data}`, alt, mimeType: type, bytes }
}

/** Props of ResultMedia. */
export interface ResultMediaProps {
  /** The tool whose result holds the media (named in the images' alt text). */
  tool: string
  media: readonly ToolResultMedia[] | undefined
}

/**
 * A tool result's media blocks as a list named "Media from <tool>": images inline (resultMediaView's
 * rules), the rest as labels; at most RESULT_MEDIA_LIMITS.count blocks, the others counted.
 */
export function ResultMedia({ tool, media }: ResultMediaProps): ReactNode {
  const views = useMemo(() => {
    const all = media ?? []
    const shown = all.slice(0, RESULT_MEDIA_LIMITS.count)
    return { views: shown.map((m, i) => resultMediaView(m, tool, i, all.length)), more: all.length - shown.length }
  }, [media, tool])
  if (views.views.length === 0) return null
  return (
    <ul className="zd-result-media" aria-label={`Media from ${tool}`}>
      {views.views.map((v, i) => (
        <li key={i}>{v.kind === 'image' ? <img className="zd-result-image" src={v.src} alt={v.alt} decoding="async" /> : <span className="zd-media-label">{v.text}</span>}</li>
      ))}
      {views.more > 0 && <li className="zd-muted">{views.more === 1 ? '1 more media block not shown' : `${views.more} more media blocks not shown`}</li>}
    </ul>
  )
}
