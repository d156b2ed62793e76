package agent

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/agent/provider"
	"github.com/zidane-server/zidane/server/oneline"
)

// The bounds of chat.send's attachments (issue 24, schema/chat.json): at most MaxAttachments
// files, each at most MaxAttachmentBytes once decoded, all together at most MaxAttachmentsBytes.
// They keep a prompt's user-prompt signal (base64: 4/3 of the bytes) well under the 16 MiB message
// limit and within one session's 4 MiB of replay log.
const (
	MaxAttachments      = 8
	MaxAttachmentBytes  = 2 << 20
	MaxAttachmentsBytes = 3 << 20
)

// imageTypes are the image media types passed to models as images (the types OpenAI's and
// Anthropic's vision inputs both take).
var imageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// textTypes are the non-text/* media types taken as text files.
var textTypes = map[string]bool{
	"application/json": true, "application/xml": true, "application/yaml": true, "application/x-yaml": true,
	"application/toml": true, "application/javascript": true, "application/x-sh": true, "application/sql": true,
}

// AttachmentProblem is a refused attachment: the JSON pointer into chat.send's params of the
// member at fault (/attachments/N or /attachments/N/member) and what to do.
type AttachmentProblem struct {
	Pointer, Message string
}

// CheckAttachments checks chat.send's attachments against their bounds and kinds, decoding each:
// nil when all are good, else the first problem.
func CheckAttachments(as []protocol.Attachment) *AttachmentProblem {
	if len(as) > MaxAttachments {
		return &AttachmentProblem{"/attachments", fmt.Sprintf("%d attachments: at most %d go with one prompt; send the rest with another.", len(as), MaxAttachments)}
	}
	total := 0
	for i, a := range as {
		at := fmt.Sprintf("/attachments/%d", i)
		if p := oneline.Problem("an attachment's name", a.Name); p != "" {
			return &AttachmentProblem{at + "/name", "The attachment's name is refused: " + p + "."}
		}
		_, data, err := decodeAttachment(a)
		if err != nil {
			return &AttachmentProblem{at + err.member, fmt.Sprintf("Attachment %q: %s", a.Name, err.msg)}
		}
		total += len(data)
		if total > MaxAttachmentsBytes {
			return &AttachmentProblem{at, fmt.Sprintf("The attachments up to %q hold %d bytes: all of a prompt's attachments together may hold at most %d (3 MiB); send some with another prompt.", a.Name, total, MaxAttachmentsBytes)}
		}
	}
	return nil
}

type attachErr struct{ member, msg string }

// Attachment kinds.
const (
	kindImage = "image"
	kindText  = "text"
)

// mediaEssence is a media type without its parameters, lower-cased.
func mediaEssence(t string) string {
	if mt, _, err := mime.ParseMediaType(t); err == nil {
		return mt
	}
	return strings.ToLower(strings.TrimSpace(t))
}

// decodeAttachment decodes a's data: URL and returns its kind (kindImage or kindText) and bytes.
func decodeAttachment(a protocol.Attachment) (string, []byte, *attachErr) {
	mt := mediaEssence(a.MediaType)
	kind := ""
	switch {
	case imageTypes[mt]:
		kind = kindImage
	case strings.HasPrefix(mt, "text/") || textTypes[mt]:
		kind = kindText
	default:
		return "", nil, &attachErr{"/mediaType", fmt.Sprintf("%q is not a kind a prompt takes: send an image (PNG, JPEG, GIF or WebP) or a text file (text/*, JSON, XML, YAML, TOML, JavaScript, shell, SQL).", a.MediaType)}
	}
	const prefix = "data:"
	if len(a.Data) < len(prefix) || !strings.EqualFold(a.Data[:len(prefix)], prefix) {
		return "", nil, &attachErr{"/data", "data must be a data: URL, data:" + mt + ";base64,<bytes>."}
	}
	head, payload, ok := strings.Cut(a.Data[len(prefix):], ",")
	if !ok || len(head) < len(";base64") || !strings.EqualFold(head[len(head)-len(";base64"):], ";base64") {
		return "", nil, &attachErr{"/data", "data must be a base64 data: URL, data:" + mt + ";base64,<bytes>."}
	}
	if got := mediaEssence(head[:len(head)-len(";base64")]); got != mt {
		return "", nil, &attachErr{"/data", fmt.Sprintf("the data: URL's type %q is not the mediaType %q; send the same type in both.", got, mt)}
	}
	if base64.StdEncoding.DecodedLen(len(payload)) > MaxAttachmentBytes+2 {
		return "", nil, &attachErr{"", fmt.Sprintf("about %d bytes: one attachment may hold at most %d (2 MiB); shrink it or send a part.", base64.StdEncoding.DecodedLen(len(payload)), MaxAttachmentBytes)}
	}
	data, err := base64.StdEncoding.DecodeString(payload)
	if err != nil {
		return "", nil, &attachErr{"/data", "the data: URL's bytes are not valid base64 (" + err.Error() + ")."}
	}
	if len(data) > MaxAttachmentBytes {
		return "", nil, &attachErr{"", fmt.Sprintf("%d bytes: one attachment may hold at most %d (2 MiB); shrink it or send a part.", len(data), MaxAttachmentBytes)}
	}
	if len(data) == 0 {
		return "", nil, &attachErr{"/data", "the file is empty."}
	}
	if kind == kindText && !utf8.Valid(data) {
		return "", nil, &attachErr{"/data", "a text file must be UTF-8; convert it, or send it as an image if it is one."}
	}
	if kind == kindText && bytes.IndexByte(data, 0) >= 0 {
		return "", nil, &attachErr{"/data", "a text file may not hold NUL bytes (it looks like a binary file); send a text file or an image."}
	}
	if kind == kindImage {
		// The bytes must be what the type says: a provider given a mislabelled image fails the
		// whole turn, and a client showing it trusts the type.
		if got := http.DetectContentType(data); got != mt {
			return "", nil, &attachErr{"/data", fmt.Sprintf("the bytes are not %s (they look like %s); send the file with its real type.", mt, got)}
		}
	}
	return kind, data, nil
}

// userMessage is the provider message of a user prompt: its text, each text file appended as a
// <file> block, and its images apart. A stored attachment that no longer decodes (it cannot be
// written so: chat.send checks them) is named in the text rather than dropped silently.
func userMessage(e *protocol.UserPromptEvent) provider.Message {
	m := provider.Message{Role: provider.RoleUser, Text: e.Text}
	if len(e.Attachments) == 0 {
		return m
	}
	var b strings.Builder
	b.WriteString(e.Text)
	for _, a := range e.Attachments {
		kind, data, err := decodeAttachment(a)
		switch {
		case err != nil:
			fmt.Fprintf(&b, "\n\n[attachment %q could not be read: %s]", a.Name, err.msg)
		case kind == kindImage:
			m.Images = append(m.Images, provider.Image{Name: a.Name, MediaType: mediaEssence(a.MediaType), Data: data})
		default:
			fmt.Fprintf(&b, "\n\n<file name=%q type=%q>\n%s\n</file>", a.Name, mediaEssence(a.MediaType), data)
		}
	}
	m.Text = b.String()
	return m
}

// promptImages lists the names of the images among a prompt's attachments.
func promptImages(as []protocol.Attachment) []string {
	var out []string
	for _, a := range as {
		if imageTypes[mediaEssence(a.MediaType)] {
			out = append(out, a.Name)
		}
	}
	return out
}

// withoutImages returns msgs with every image replaced by a note in its message's text, for a
// model that takes none (earlier prompts' images: the prompt being answered never gets this far
// with one, noImagesError). msgs is not changed.
func withoutImages(msgs []provider.Message) []provider.Message {
	var out []provider.Message
	for i, m := range msgs {
		if len(m.Images) == 0 {
			continue
		}
		if out == nil {
			out = append([]provider.Message(nil), msgs...)
		}
		var b strings.Builder
		b.WriteString(m.Text)
		for _, im := range m.Images {
			fmt.Fprintf(&b, "\n\n[image %q (%s) was attached here; this model takes no images]", im.Name, im.MediaType)
		}
		out[i].Text, out[i].Images = b.String(), nil
	}
	if out == nil {
		return msgs
	}
	return out
}

// noImagesError is the run's error when its prompt holds images its model cannot take.
func noImagesError(modelID string, names []string) *runError {
	return &runError{fmt.Sprintf("The model %s takes no images, so nothing was sent to it: %s attached to this prompt. Pick a model that takes images (an OpenAI-compatible or Anthropic one, sessions.setModel), or send the prompt without them.", modelID, quoteList(names))}
}

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	if len(q) == 1 {
		return q[0] + " is"
	}
	return strings.Join(q, ", ") + " are"
}
