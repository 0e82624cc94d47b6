-- Migration 1: committed offsets with their metadata, groups' durable records, and the
-- coordinator slots the multi-broker work (issue 18) will lease. Applied in one transaction
-- under the migrations' advisory lock; never edited once released (add a new file instead).

-- One row per (group, partition): Kafka's OffsetAndMetadata. Text keys use the "C"
-- collation so that the database orders them as the core does (bytewise UTF-8).
CREATE TABLE offsets (
    group_id         text COLLATE "C" NOT NULL,
    topic            text COLLATE "C" NOT NULL,
    -- The core's partitions are u32: bigint holds every one of them.
    partition        bigint NOT NULL CHECK (partition BETWEEN 0 AND 4294967295),
    committed_offset bigint NOT NULL CHECK (committed_offset >= 0),
    leader_epoch     integer,
    metadata         text NOT NULL DEFAULT '',
    -- Milliseconds of the coordinator's clock (0: a commit without metadata).
    commit_timestamp bigint NOT NULL DEFAULT 0 CHECK (commit_timestamp >= 0),
    PRIMARY KEY (group_id, topic, partition)
);

-- One row per group that has a durable record; a tombstone deletes the row.
CREATE TABLE groups (
    group_id   text COLLATE "C" PRIMARY KEY,
    -- The record in this crate's JSON encoding (src/record.rs), with its format version.
    record     jsonb NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- The coordinator slots of the multi-broker design: each group hashes to a slot, one node
-- owns a slot at a time under a lease, and every group write will check, inside its own
-- transaction, that the writer still holds the slot at its epoch. Created now so that the
-- check needs no migration of the tables above; nothing reads or writes it yet.
CREATE TABLE coordinator_slots (
    slot        integer PRIMARY KEY CHECK (slot >= 0),
    owner_node  integer,
    epoch       bigint NOT NULL DEFAULT 0 CHECK (epoch >= 0),
    lease_until timestamptz
);
