/*-------------------------------------------------------------------------
 *
 * hash_refs.h
 *	  A sorted index over a set of transactionId hashes (hash_refs.c), so
 *	  that a walk over a partition's stored hashes (log_txns) can ask, frame
 *	  by frame, which of the hashes it is looking for a frame matches.
 *
 * The dedup probe looks up a segment's incoming hashes this way, and the
 * ack the hashes of the transactionIds it acknowledges: one lookup rule for
 * both, binary search over 16-byte keys.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_HASH_REFS_H
#define QUEEN_HASH_REFS_H

#include "queen.h"

/* One hash looked for, and its position in the caller's list. */
typedef struct QueenHashRef
{
	const uint8 *hash;
	int32		index;
} QueenHashRef;

extern QueenHashRef *queen_hash_refs(const uint8 *hashes, int k);
extern int	queen_hash_refs_find(const QueenHashRef *sorted, int k,
								 const uint8 *hash);

/* Is sorted[i] (i < k, as queen_hash_refs_find returns) still that hash? */
static inline bool
queen_hash_refs_match(const QueenHashRef *sorted, int k, int i,
					  const uint8 *hash)
{
	return i < k && memcmp(sorted[i].hash, hash, QUEEN_HASH_LEN) == 0;
}

#endif							/* QUEEN_HASH_REFS_H */
