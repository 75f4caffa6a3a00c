/*-------------------------------------------------------------------------
 *
 * dedup_runs.h
 *	  Dedup runs (dedup_runs.c): a partition's stored transactionId hashes
 *	  sorted into runs in queen.log_dedup, probed by index, written by
 *	  queen.dedup_index.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_DEDUP_RUNS_H
#define QUEEN_DEDUP_RUNS_H

#include "queen.h"
#include "dedup_cache.h"

/*
 * The transaction-level advisory lock queen.dedup_index holds, and a
 * queue's deletion waits for, so that no run is written for a partition
 * being deleted ("QDDX").
 */
#define QUEEN_DEDUP_INDEX_LOCK	INT64CONST(0x5144445800000001)

extern int64 queen_dedup_runs_probe(const pg_uuid_t *pid, TimestampTz generation,
									const uint8 *incoming, int k, int64 from, int64 upto,
									int64 need, QueenDedupHits *hits);
extern int64 queen_dedup_runs_index(int min_hashes, int max_partitions,
									 TimestampTz *since);

#endif							/* QUEEN_DEDUP_RUNS_H */
