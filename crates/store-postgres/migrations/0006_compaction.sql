-- Migration 6: compaction of the partition log (PostgresLog::compact). A batch a pass
-- rewrote lists the offsets of the records it still holds, and may carry a delete horizon;
-- each partition remembers where the last pass left it compacted up to. Applied in one
-- transaction under the migrations' advisory lock; never edited once released.

-- `offsets`: NULL for a batch whose records run on from its base offset (every appended
-- one); otherwise each record's offset, matching `timestamps` one to one.
ALTER TABLE batches ADD COLUMN offsets bigint[];
-- When a pass may drop the batch's tombstones (or the marker it is), ms since the epoch.
ALTER TABLE batches ADD COLUMN delete_horizon bigint;

-- Migration 2's check that `timestamps` has one entry per offset of the batch holds for
-- appended batches only now.
DO $$
DECLARE c text;
BEGIN
    SELECT conname INTO c FROM pg_constraint
    WHERE conrelid = 'batches'::regclass AND contype = 'c'
      AND pg_get_constraintdef(oid) LIKE '%cardinality(timestamps)%';
    IF c IS NOT NULL THEN
        EXECUTE format('ALTER TABLE batches DROP CONSTRAINT %I', c);
    END IF;
END $$;

ALTER TABLE batches ADD CONSTRAINT batches_records CHECK (
    (offsets IS NULL AND cardinality(timestamps) = last_offset - base_offset + 1)
    OR (offsets IS NOT NULL AND cardinality(offsets) = cardinality(timestamps)
        AND cardinality(offsets) BETWEEN 1 AND last_offset - base_offset + 1));

-- Below it the partition is compacted: a pass's dirty part starts there.
ALTER TABLE partitions ADD COLUMN cleaned_offset bigint NOT NULL DEFAULT 0;
