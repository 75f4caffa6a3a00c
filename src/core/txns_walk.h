/*-------------------------------------------------------------------------
 *
 * txns_walk.h
 *	  A walk over a partition's stored hashes (log_segments, log_txns below) in offset order
 *	  (txns_walk.c): the dedup probe's and the ack's resolution.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_TXNS_WALK_H
#define QUEEN_TXNS_WALK_H

#include "queen.h"

/* One hash row: count hashes, frame j's at base + j.  Valid until the next call. */
typedef struct QueenTxnsRow
{
	int64		base;
	int64		count;
	TimestampTz created_at;
	const uint8 *hashes;
} QueenTxnsRow;

typedef struct QueenTxnsWalk QueenTxnsWalk;

extern QueenTxnsWalk *queen_txns_walk_begin(const pg_uuid_t *pid, int64 lo, int64 hi,
											bool descending);
extern void queen_txns_walk_seek(QueenTxnsWalk *w, int64 lo, int64 hi);
extern bool queen_txns_walk_next(QueenTxnsWalk *w, QueenTxnsRow *row);
extern void queen_txns_walk_end(QueenTxnsWalk *w);

#endif							/* QUEEN_TXNS_WALK_H */
