-- Migration 2: the partition log (PostgresLog, the PartitionLog port over PostgreSQL):
-- topics, their partitions' bounds, and the record batches as the appender encoded them.
-- Applied in one transaction under the migrations' advisory lock; never edited once
-- released (add a new file instead).

-- One row per topic. Names use the "C" collation (bytewise order, as the log sorts them).
CREATE TABLE topics (
    name       text COLLATE "C" PRIMARY KEY,
    -- Kafka's topic id: 16 random bytes (a version-4 UUID, never all zeros) drawn at creation.
    topic_id   bytea NOT NULL UNIQUE DEFAULT uuid_send(gen_random_uuid())
               CHECK (octet_length(topic_id) = 16),
    partitions bigint NOT NULL CHECK (partitions BETWEEN 1 AND 4294967295)
);

-- One row per partition: its bounds. The row is the append lock: an append takes it
-- FOR UPDATE, so appends to one partition are serialised and get consecutive offsets.
CREATE TABLE partitions (
    topic          text COLLATE "C" NOT NULL REFERENCES topics (name) ON DELETE CASCADE,
    partition      bigint NOT NULL CHECK (partition BETWEEN 0 AND 4294967295),
    -- The first readable offset (retention and DeleteRecords move it; it may fall inside
    -- a batch).
    log_start      bigint NOT NULL DEFAULT 0 CHECK (log_start >= 0),
    -- The offset the next record gets; every record below it is readable.
    high_watermark bigint NOT NULL DEFAULT 0 CHECK (high_watermark >= log_start),
    PRIMARY KEY (topic, partition)
);

-- One row per appended batch that still holds a readable record.
CREATE TABLE batches (
    topic         text COLLATE "C" NOT NULL,
    partition     bigint NOT NULL,
    base_offset   bigint NOT NULL CHECK (base_offset >= 0),
    last_offset   bigint NOT NULL,
    -- The largest record timestamp (ms), and every record's, in offset order: what
    -- ListOffsets by timestamp and MAX_TIMESTAMP look into without decoding the batch.
    max_timestamp bigint NOT NULL,
    timestamps    bigint[] NOT NULL,
    -- The batch exactly as the appender encoded it (the broker: Kafka's v2 RecordBatch).
    encoded       bytea NOT NULL,
    PRIMARY KEY (topic, partition, base_offset),
    FOREIGN KEY (topic, partition) REFERENCES partitions (topic, partition) ON DELETE CASCADE,
    CHECK (last_offset >= base_offset),
    CHECK (cardinality(timestamps) = last_offset - base_offset + 1)
);

-- Reads find the first batch holding an offset through its last offset.
CREATE UNIQUE INDEX batches_last_offset ON batches (topic, partition, last_offset);
