/*
 * queen--1.0--1.1.sql: ALTER EXTENSION queen UPDATE TO '1.1'.
 *
 * Leaves a 1.0 database as queen--1.1.sql makes one (t/095_upgrade.pl
 * compares the two and reads, pops, acks and deduplicates rows 1.0 wrote).
 */

\echo Use "ALTER EXTENSION queen UPDATE TO '1.1'" to load this file. \quit

-- Segments up to a page stay in their row (schema/1_tables.sql says why).
-- Rows already stored keep their TOAST chunks; readers detoast either.
ALTER TABLE queen.log_segments SET (toast_tuple_target = 8160);
