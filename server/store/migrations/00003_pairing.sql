-- +goose Up
-- pairing_codes are single-use codes traded for a token at POST /zidane/pair; only a SHA-256 of
-- the code is kept.
CREATE TABLE pairing_codes (
    id         uuid        PRIMARY KEY,
    hash       bytea       NOT NULL UNIQUE CHECK (octet_length(hash) = 32),
    scope      text        NOT NULL CHECK (scope IN ('chat', 'admin', 'machine')),
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    used_at    timestamptz,
    token_id   uuid        REFERENCES tokens (id)
);
CREATE INDEX pairing_codes_expires_idx ON pairing_codes (expires_at);

-- +goose Down
DROP TABLE pairing_codes;
