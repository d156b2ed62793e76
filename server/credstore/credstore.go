// Package credstore is the server's encrypted credential store (issue 23 §5, §6; seed "auth"):
// MCP servers' OAuth tokens, OAuth client registrations, pre-registered clients' secrets and
// providers' API keys and base URLs.
//
// Every value is sealed with AES-256-GCM under a 32-byte key kept in a file: by default
// <data-dir>/credential.key, created 0600 on first use, or --credential-key-file (replicas that
// share one Postgres share that file and read each other's credentials). The nonce is random per
// write and the row's kind and key are the additional data, so a sealed value copied to another
// row does not open. Postgres holds only ciphertext (table credentials, migration 00060) and a
// non-secret description (Meta) for auth.list. Values are never logged: Secret-typed fields
// print as [redacted].
//
// Kinds and keys:
//
//	KindMCPToken        issuer + " " + MCP server name   an OAuth token (Token)
//	KindMCPClient       issuer + " " + redirect URI      a registered OAuth client (Client)
//	KindMCPClientSecret MCP server name                  a pre-registered client's secret (mcp.upsert's clientSecret)
//	KindProvider        provider name                    a provider's API key and base URL (Provider)
package credstore

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/store"
)

// The kinds of credential.
const (
	KindMCPToken        = "mcp-token"
	KindMCPClient       = "mcp-client"
	KindMCPClientSecret = "mcp-client-secret"
	KindProvider        = "provider"
)

// KeyFileName is the key file's name in the data dir.
const KeyFileName = "credential.key"

// ErrNotFound is returned for a credential that is not stored.
var ErrNotFound = errors.New("credential not stored")

// Store seals and opens credentials in the database. It is safe for concurrent use.
type Store struct {
	db   *store.Store
	aead cipher.AEAD
}

// Meta is a credential's non-secret description, stored in clear beside the sealed value.
type Meta struct {
	// Server is the MCP server, for the MCP kinds.
	Server string `json:"server,omitempty"`
	// Issuer is the authorization server's issuer, for tokens and client registrations.
	Issuer string `json:"issuer,omitempty"`
	// Provider is the provider, for KindProvider.
	Provider string `json:"provider,omitempty"`
	// Fields names the fields stored (never their values).
	Fields []string `json:"fields,omitempty"`
	// ExpiresAt is an access token's expiry (ms since the epoch), 0 when none.
	ExpiresAt int64 `json:"expiresAt,omitempty"`
}

// Info is a stored credential as auth.list shows it.
type Info struct {
	Kind, Key string
	Meta      Meta
	UpdatedAt time.Time
}

// linkNew creates path holding data (mode 0600) only if it does not exist, atomically: data is
// written to a temporary file in path's folder, which is then hard-linked to path (fs.ErrExist
// when path exists) and removed.
func linkNew(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".key-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return werr
	}
	return os.Link(tmp, path) // CreateTemp made it 0600
}

// ID is the credential's id on the wire: kind + ":" + key.
func (i Info) ID() string { return i.Kind + ":" + i.Key }

// SplitID reverses Info.ID.
func SplitID(id string) (kind, key string, ok bool) {
	kind, key, ok = strings.Cut(id, ":")
	return kind, key, ok && kind != "" && key != ""
}

// LoadKey reads the 32-byte key from path (64 hex digits), creating it with a fresh random key
// and mode 0600 when it does not exist. A key file that others may read (group or other
// permission bits) is refused, as is one of the wrong length. The new file appears whole: it is
// written beside path and linked into place, so a process that starts at the same moment reads
// either no file or the whole key, never a half-written one (two processes starting on one data
// dir; the conformance suites' clients).
func LoadKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("credential key: %w", err)
		}
		if err := linkNew(path, []byte(hex.EncodeToString(key)+"\n")); errors.Is(err, fs.ErrExist) {
			return LoadKey(path) // another process made it first
		} else if err != nil {
			return nil, fmt.Errorf("credential key: %w", err)
		}
		return key, nil
	}
	if err != nil {
		return nil, fmt.Errorf("credential key: %w", err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("credential key: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("credential key %s is readable by others (mode %04o); run chmod 600 %s", path, st.Mode().Perm(), path)
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(key) != 32 {
		return nil, fmt.Errorf("credential key %s is not 64 hex digits (32 bytes); restore the right file, or move it away to start a new store (stored credentials are then lost)", path)
	}
	return key, nil
}

// New returns a store over db sealing with key (32 bytes, from LoadKey).
func New(db *store.Store, key []byte) (*Store, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("credential key must be 32 bytes, not %d", len(key))
	}
	blk, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(blk)
	if err != nil {
		return nil, err
	}
	return &Store{db: db, aead: aead}, nil
}

func aad(kind, key string) []byte { return []byte("zidane-cred\x00" + kind + "\x00" + key) }

// Put seals v (any JSON-encodable value) under (kind, key) with its description meta.
func (s *Store) Put(ctx context.Context, kind, key string, v any, meta Meta) error {
	plain, err := protocol.Marshal(v)
	if err != nil {
		return err
	}
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return err
	}
	sealed := s.aead.Seal(nonce, nonce, plain, aad(kind, key))
	mb, err := protocol.Marshal(meta)
	if err != nil {
		return err
	}
	return s.db.PutCredential(ctx, store.Credential{Kind: kind, Key: key, Sealed: sealed, Meta: mb})
}

// Get opens (kind, key) into v. Errors: ErrNotFound; an error naming the key file when the value
// does not open (another key file than the one that sealed it).
func (s *Store) Get(ctx context.Context, kind, key string, v any) (Meta, error) {
	var meta Meta
	c, err := s.db.GetCredential(ctx, kind, key)
	if errors.Is(err, store.ErrNotFound) {
		return meta, ErrNotFound
	}
	if err != nil {
		return meta, err
	}
	n := s.aead.NonceSize()
	if len(c.Sealed) < n {
		return meta, fmt.Errorf("credential %s:%s is damaged; remove it (auth.remove) and store it again", kind, key)
	}
	plain, err := s.aead.Open(nil, c.Sealed[:n], c.Sealed[n:], aad(kind, key))
	if err != nil {
		return meta, fmt.Errorf("credential %s:%s does not open with this server's credential key (was it sealed with another --credential-key-file?); remove it and store it again", kind, key)
	}
	if err := json.Unmarshal(plain, v); err != nil {
		return meta, fmt.Errorf("credential %s:%s: %w", kind, key, err)
	}
	_ = json.Unmarshal(c.Meta, &meta)
	return meta, nil
}

// List returns the stored credentials of kind ("" for all) without their values.
func (s *Store) List(ctx context.Context, kind string) ([]Info, error) {
	rows, err := s.db.ListCredentials(ctx, kind)
	if err != nil {
		return nil, err
	}
	out := make([]Info, 0, len(rows))
	for _, r := range rows {
		i := Info{Kind: r.Kind, Key: r.Key, UpdatedAt: r.UpdatedAt}
		_ = json.Unmarshal(r.Meta, &i.Meta)
		out = append(out, i)
	}
	return out, nil
}

// Delete drops (kind, key); ErrNotFound when there was none.
func (s *Store) Delete(ctx context.Context, kind, key string) error {
	ok, err := s.db.DeleteCredential(ctx, kind, key)
	if err == nil && !ok {
		err = ErrNotFound
	}
	return err
}

// DeleteAll drops every credential and returns how many there were.
func (s *Store) DeleteAll(ctx context.Context) (int, error) { return s.db.DeleteAllCredentials(ctx) }
