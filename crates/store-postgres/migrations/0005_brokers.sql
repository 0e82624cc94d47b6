-- Migration 5: brokers registered under a lease, and the coordinator slots' owners. Applied
-- in one transaction under the migrations' advisory lock; never edited once released (add a
-- new file instead).

-- Each process that takes a new registration draws a new incarnation: a registration's
-- rows and the slots it owns name it, so a process that lost its registration (another took
-- the node id after its lease ran out) can tell that it did.
CREATE SEQUENCE broker_incarnations;

-- One row per node id: the process (incarnation) holding it, its listeners as clients
-- reach them, and until when its lease runs (the database's clock: every broker compares
-- against the same now()). A clean stop deletes the row.
CREATE TABLE brokers (
    node_id       integer PRIMARY KEY CHECK (node_id >= 0),
    incarnation   bigint NOT NULL,
    endpoints     jsonb NOT NULL DEFAULT '[]',
    registered_at timestamptz NOT NULL DEFAULT now(),
    lease_until   timestamptz NOT NULL
);

-- The coordinator slots (migration 1 created the table): 0-49 for groups, 50-99 for
-- transactional ids (Kafka's 50 partitions of __consumer_offsets and of
-- __transaction_state). A slot is owned by the incarnation named here while that
-- incarnation's broker row is live; its epoch grows at every change of owner, and every
-- write of a group or a transaction checks it inside its own transaction.
ALTER TABLE coordinator_slots ADD COLUMN owner_incarnation bigint;
INSERT INTO coordinator_slots (slot) SELECT generate_series(0, 99) ON CONFLICT DO NOTHING;
