-- +goose Up
-- The $seq of the last session signal whose event the transcript holds, and that $seq's signal
-- epoch (issue 25 §1, docs/scaling.md): written in the transaction of each transcript write, so a
-- replica that does not run the session answers a watermark consistent with the stored rows, and
-- one taking over a dead replica's run reads the signal stream after it (what was streamed but not
-- written). 0 and '' when unknown (rows written before this column, or without a signal hub).
ALTER TABLE sessions ADD COLUMN signal_seq bigint NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN signal_epoch text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE sessions DROP COLUMN signal_epoch;
ALTER TABLE sessions DROP COLUMN signal_seq;
