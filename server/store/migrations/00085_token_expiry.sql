-- +goose Up
-- A token may expire (issue 24: `zidane-server pair --ttl-token D`): past expires_at it is refused
-- like a revoked one. A pairing code carries the life of the token it trades for.
ALTER TABLE tokens ADD COLUMN expires_at timestamptz;
ALTER TABLE pairing_codes ADD COLUMN token_ttl interval CHECK (token_ttl > interval '0');

-- +goose Down
ALTER TABLE pairing_codes DROP COLUMN token_ttl;
ALTER TABLE tokens DROP COLUMN expires_at;
