/*
 * queen--1.0--1.1.sql: ALTER EXTENSION queen UPDATE TO '1.1'.
 *
 * Leaves a 1.0 database as queen--1.1.sql makes one (t/095_upgrade.pl
 * compares the two and reads, pops, acks and deduplicates rows 1.0 wrote).
 * What changes is storage (schema/1_tables.sql says why):
 *   - a segment's transactionId hashes move from its log_txns row into its
 *     own row (log_segments.hashes); log_txns keeps only the hashes of
 *     segments retention purged while their dedup window needs them;
 *   - a segment up to a page stays in its row (toast_tuple_target).
 * Every segment row is rewritten once, so the update takes as long as
 * writing the log's rows again; pushes and pops wait for it (the lock
 * ALTER TABLE takes).
 */

\echo Use "ALTER EXTENSION queen UPDATE TO '1.1'" to load this file. \quit

ALTER TABLE queen.log_segments ADD COLUMN hashes bytea;
ALTER TABLE queen.log_segments ALTER COLUMN hashes SET STORAGE EXTERNAL;
ALTER TABLE queen.log_segments SET (toast_tuple_target = 8160);

-- Rows whose hashes 1.0's purge had removed (below txns_start) keep NULL:
-- no reader looks below txns_start.
UPDATE queen.log_segments s SET hashes = t.hashes
  FROM queen.log_txns t
 WHERE t.partition_id = s.partition_id AND t.base_offset = s.base_offset;
DELETE FROM queen.log_txns t
 USING queen.log_segments s
 WHERE t.partition_id = s.partition_id AND t.base_offset = s.base_offset;

ALTER TABLE queen.log_segments ADD CONSTRAINT log_segments_stride_check
	CHECK (octet_length(hashes) = 16 * (end_offset - base_offset + 1));
