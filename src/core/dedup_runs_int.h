/*-------------------------------------------------------------------------
 *
 * dedup_runs_int.h
 *	  What the probe of dedup runs (dedup_runs.c) and their building by
 *	  queen.dedup_index (dedup_runs_index.c) share: a run's row layout and
 *	  its limits.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_DEDUP_RUNS_INT_H
#define QUEEN_DEDUP_RUNS_INT_H

#include "dedup_runs.h"

#include "port/pg_bswap.h"

/* keys per row: about 1.9 kB, so a row stays in its heap page, uncompressed */
#define QUEEN_RUN_ROW_KEYS		160
/* a merge holds both runs in memory twice, 16 bytes a hash: 64 MB at most */
#define QUEEN_RUN_MAX_HASHES	(INT64CONST(2) * 1024 * 1024)
/* runs merged at once: four of one size class make one of the next */
#define QUEEN_RUN_FANIN			4
/* an entry's offset is kept as a uint32 above its run's start */
#define QUEEN_RUN_MAX_SPAN		((int64) PG_UINT32_MAX)
/* the first row of every run is keyed by the smallest key there is */
#define QUEEN_RUN_FIRST_KEY		PG_INT64_MIN

typedef struct QueenRunEntry
{
	int64		key;
	uint32		delta;			/* offset - run_start */
} QueenRunEntry;

/* A run in a partition's chain, for queen.dedup_index's merges. */
typedef struct QueenRunInfo
{
	int64		start;
	int64		end;
	int64		hashes;
} QueenRunInfo;

/* The first 8 bytes of a hash, as the bigint the rows are ordered by. */
static inline int64
queen_run_key(const uint8 *hash)
{
	uint64		v;

	memcpy(&v, hash, sizeof(v));
	return (int64) pg_ntoh64(v);
}

/* A row's keys: n bigints, then their n offsets above the run's start. */
static inline int64
queen_row_key(const char *data, int i)
{
	int64		key;

	memcpy(&key, data + (Size) i * sizeof(int64), sizeof(int64));
	return key;
}

static inline uint32
queen_row_delta(const char *data, int n, int i)
{
	uint32		delta;

	memcpy(&delta, data + (Size) n * sizeof(int64) + (Size) i * sizeof(uint32),
		   sizeof(uint32));
	return delta;
}

#endif							/* QUEEN_DEDUP_RUNS_INT_H */
