-- +goose Up
-- drafts: the composer's unsent text per session (seed "drafts"), as a JSON string so that any
-- Unicode, NUL included, survives byte for byte. Written coalesced by the server.
CREATE TABLE drafts (
    session_id uuid        PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    text_json  text        NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- client_state: the state every client of the server shares, by namespace ("settings", "prefs",
-- "sidebar.view", "sidebar.space") and key; value is JSON text.
CREATE TABLE client_state (
    ns         text        NOT NULL,
    key        text        NOT NULL,
    value      text        NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (ns, key)
);

-- +goose Down
DROP TABLE client_state;
DROP TABLE drafts;
