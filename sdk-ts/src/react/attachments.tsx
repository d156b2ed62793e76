// Attachments (issue 24 section 1, the composer): images and text files pasted into or dropped on
// the composer become chat.send attachments (base64 data: URLs with a name and a media type), shown
// as chips with their name and size and a remove button; what is over chat.send's bounds (8 files,
// 2 MiB each, 3 MiB together) or of a kind the server does not take is refused with a message
// saying why. The transcript shows a prompt's attachments: images as thumbnails of the stored data
// (only data:image/… URLs of the four image types are ever put in an <img>), text files as chips.
import { useCallback, useRef, useState, type ClipboardEvent, type DragEvent, type ReactNode } from 'react'
import type { Attachment } from '../protocol.js'

/** chat.send's bounds on attachments (schema/chat.json): count, bytes of one file, bytes of all. */
export const ATTACHMENT_LIMITS = Object.freeze({ count: 8, fileBytes: 2 * 1024 * 1024, totalBytes: 3 * 1024 * 1024 })

/** The image types chat.send takes (shown as thumbnails). */
const IMAGE_TYPES = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp'])
/** The non-text/* types chat.send takes as text files (Attachment's description). */
const TEXT_TYPES = new Set(['application/json', 'application/xml', 'application/yaml', 'application/x-yaml', 'application/toml', 'application/javascript', 'application/x-sh', 'application/sql'])
/** Types for files the browser gives none (a dropped .md, .go, …): by extension, else text/plain when the bytes are UTF-8. */
const BY_EXTENSION: Record<string, string> = { json: 'application/json', xml: 'application/xml', yaml: 'application/yaml', yml: 'application/yaml', toml: 'application/toml', sh: 'application/x-sh', sql: 'application/sql', md: 'text/markdown', csv: 'text/csv', html: 'text/html' }

/** An attachment in the composer: what chat.send gets, and its decoded size in bytes. */
export interface PendingAttachment extends Attachment {
  readonly size: number
}

/** Formats a byte count as B, KiB or MiB. */
export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`
  return `${(n / (1024 * 1024)).toFixed(1)} MiB`
}

/** The media type chat.send would store for a file, or undefined when it takes no such file. */
export function attachmentType(name: string, type: string): string | undefined {
  const t = type.split(';')[0]!.trim().toLowerCase()
  if (IMAGE_TYPES.has(t) || TEXT_TYPES.has(t) || t.startsWith('text/')) return t
  if (t !== '' && t !== 'application/octet-stream') return undefined
  const ext = /\.([a-z0-9]+)$/i.exec(name)?.[1]?.toLowerCase()
  return (ext && BY_EXTENSION[ext]) ?? 'text/plain'
}

function base64(bytes: Uint8Array): string {
  let s = ''
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000))
  return btoa(s)
}

/**
 * Reads files as attachments after those already held, checking chat.send's bounds: returns the
 * ones taken and, for each one refused, a sentence saying why (too many, too big, not UTF-8 text,
 * a kind not taken).
 */
export async function readAttachments(files: readonly File[], held: readonly PendingAttachment[]): Promise<{ taken: PendingAttachment[]; refused: string[] }> {
  const taken: PendingAttachment[] = []
  const refused: string[] = []
  let total = held.reduce((n, a) => n + a.size, 0)
  for (const f of files) {
    const name = f.name || 'pasted'
    const type = attachmentType(name, f.type)
    if (type === undefined) {
      refused.push(`${name}: ${f.type} files cannot be attached (images: PNG, JPEG, GIF, WebP; or text files).`)
      continue
    }
    if (held.length + taken.length >= ATTACHMENT_LIMITS.count) {
      refused.push(`${name}: at most ${ATTACHMENT_LIMITS.count} files go with one message.`)
      continue
    }
    if (f.size > ATTACHMENT_LIMITS.fileBytes) {
      refused.push(`${name}: ${formatBytes(f.size)} is over the ${formatBytes(ATTACHMENT_LIMITS.fileBytes)} a file may have.`)
      continue
    }
    if (total + f.size > ATTACHMENT_LIMITS.totalBytes) {
      refused.push(`${name}: the files of one message may have ${formatBytes(ATTACHMENT_LIMITS.totalBytes)} together; remove one or send it apart.`)
      continue
    }
    const bytes = new Uint8Array(await f.arrayBuffer())
    if (!IMAGE_TYPES.has(type)) {
      try {
        new TextDecoder('utf-8', { fatal: true }).decode(bytes)
      } catch {
        refused.push(`${name}: only UTF-8 text files and images can be attached.`)
        continue
      }
    }
    total += bytes.length
    taken.push(Object.freeze({ name: name.replace(/[\r\n]+/g, ' '), mediaType: type, data: `data:${type};base64,${base64(bytes)}`, size: bytes.length }))
  }
  return { taken, refused }
}

/** What useAttachments gives the composer. */
export interface AttachmentsState {
  readonly attachments: readonly PendingAttachment[]
  /** Why the last files were refused, one sentence each joined; undefined when none were. */
  readonly refused: string | undefined
  add(files: readonly File[]): Promise<void>
  remove(index: number): void
  clear(): void
  /** For the textarea: files on the clipboard become attachments (text pastes as text). */
  onPaste(e: ClipboardEvent<HTMLElement>): void
  /** For the composer's form: dropped files become attachments. */
  onDrop(e: DragEvent<HTMLElement>): void
  onDragOver(e: DragEvent<HTMLElement>): void
}

/** The composer's attachments. */
export function useAttachments(): AttachmentsState {
  const [attachments, setAttachments] = useState<readonly PendingAttachment[]>([])
  const [refused, setRefused] = useState<string>()
  const held = useRef(attachments)
  held.current = attachments
  const add = useCallback(async (files: readonly File[]) => {
    if (files.length === 0) return
    const r = await readAttachments(files, held.current)
    setAttachments((cur) => [...cur, ...r.taken].slice(0, ATTACHMENT_LIMITS.count))
    setRefused(r.refused.length > 0 ? r.refused.join(' ') : undefined)
  }, [])
  return {
    attachments,
    refused,
    add,
    remove: (i) => {
      setAttachments((cur) => cur.filter((_, j) => j !== i))
      setRefused(undefined)
    },
    clear: () => {
      setAttachments([])
      setRefused(undefined)
    },
    onPaste: (e) => {
      const files = [...e.clipboardData.files]
      if (files.length === 0) return
      e.preventDefault()
      void add(files)
    },
    onDrop: (e) => {
      const files = [...e.dataTransfer.files]
      if (files.length === 0) return
      e.preventDefault()
      void add(files)
    },
    onDragOver: (e) => {
      if ([...e.dataTransfer.types].includes('Files')) e.preventDefault()
    },
  }
}

/** The composer's chips: each attachment's name and size with a button removing it, and why files were refused. */
export function AttachmentChips({ state }: { state: AttachmentsState }): ReactNode {
  if (state.attachments.length === 0 && state.refused === undefined) return null
  return (
    <div className="zd-attachments">
      {state.attachments.length > 0 && (
        <ul className="zd-chips" aria-label="Attachments">
          {state.attachments.map((a, i) => (
            <li key={`${i}:${a.name}`} className="zd-chip">
              <span className="zd-chip-name">{a.name}</span> <span className="zd-muted">{formatBytes(a.size)}</span>
              <button type="button" className="zd-chip-remove" aria-label={`Remove ${a.name}`} onClick={() => state.remove(i)}>
                ×
              </button>
            </li>
          ))}
        </ul>
      )}
      {state.refused !== undefined && (
        <p className="zd-error" role="alert">
          {state.refused}
        </p>
      )}
    </div>
  )
}

/** A stored image attachment's data: URL when it is one of the image types, base64, else undefined (never put in an img). */
export function imageSource(a: Attachment): string | undefined {
  const m = /^data:(image\/(?:png|jpeg|gif|webp))(?:;[\w=.-]+)*;base64,[A-Za-z0-9+/]*={0,2}$/.exec(a.data)
  return m && IMAGE_TYPES.has(a.mediaType) && m[1] === a.mediaType ? a.data : undefined
}

/** A prompt's attachments in the transcript: images as thumbnails of their stored data, text files as named chips. */
export function PromptAttachments({ attachments }: { attachments: readonly Attachment[] }): ReactNode {
  return (
    <ul className="zd-chips zd-prompt-attachments" aria-label="Attached files">
      {attachments.map((a, i) => {
        const src = imageSource(a)
        return (
          <li key={i} className="zd-chip">
            {src !== undefined ? <img className="zd-thumb" src={src} alt={a.name} width={96} height={96} /> : null}
            <span className="zd-chip-name">{a.name}</span>
          </li>
        )
      })}
    </ul>
  )
}
