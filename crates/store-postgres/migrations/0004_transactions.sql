-- Migration 4: the transaction coordinator's records (transactional ids, their producer ids
-- and epochs, their state, partitions and groups, and a PrepareCommit's pending offsets).
-- Applied in one transaction under the migrations' advisory lock; never edited once
-- released (add a new file instead).

-- One row per transactional id that has a durable record; a tombstone deletes the row.
-- The id uses the "C" collation (bytewise order, as the core sorts them).
CREATE TABLE transactions (
    transactional_id text COLLATE "C" PRIMARY KEY,
    -- The record in this crate's JSON encoding (src/txn_record.rs), with its format version.
    record           jsonb NOT NULL,
    updated_at       timestamptz NOT NULL DEFAULT now()
);
