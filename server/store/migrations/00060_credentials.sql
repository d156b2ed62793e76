-- +goose Up
-- The credential store (issue 23 §5, §6; server/credstore): MCP OAuth tokens, OAuth client
-- registrations, pre-registered clients' secrets and providers' API keys. sealed is AES-256-GCM
-- ciphertext (nonce first) made by the server with the key in its data dir, bound to (kind, key):
-- the database never holds a secret in clear, and replicas sharing the key file read each
-- other's. meta is the non-secret description auth.list shows (server, issuer, fields, expiry).
CREATE TABLE credentials (
    kind       text        NOT NULL,
    key        text        NOT NULL,
    sealed     bytea       NOT NULL,
    meta       jsonb       NOT NULL DEFAULT '{}',
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (kind, key)
);

-- +goose Down
DROP TABLE credentials;
