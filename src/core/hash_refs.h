/*-------------------------------------------------------------------------
 *
 * hash_refs.h
 *	  A hash set over a few transactionId hashes (hash_refs.c), so that a
 *	  walk over a partition's stored hashes (txns_walk.c) can ask, frame by
 *	  frame, which of the hashes it is looking for a frame matches.
 *
 * The dedup probe looks up a segment's incoming hashes this way, and the
 * ack the hashes of the transactionIds it acknowledges: one lookup rule for
 * both.  A walk asks once per stored frame, and nearly every answer is "none",
 * so that answer must cost a few nanoseconds: a load and a compare, most
 * often against an empty slot.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_HASH_REFS_H
#define QUEEN_HASH_REFS_H

#include "queen.h"

typedef struct QueenHashRefSlot
{
	uint64		head;			/* the hash's first 8 bytes */
	int32		index;			/* its position in the caller's list; -1: empty */
} QueenHashRefSlot;

typedef struct QueenHashRefs
{
	uint32		mask;			/* slots - 1; at most half of them used */
	const uint8 *hashes;		/* the caller's, 16 bytes each */
	QueenHashRefSlot *slots;
} QueenHashRefs;

/* Where a lookup stands: callers loop first/next until -1. */
typedef struct QueenHashRefIter
{
	uint64		head;
	uint32		pos;
} QueenHashRefIter;

extern QueenHashRefs *queen_hash_refs(const uint8 *hashes, int k);
extern void queen_hash_refs_free(QueenHashRefs *r);

/*
 * The first slot of a key in an open-addressing table of mask + 1 slots,
 * this set's and the dedup cache's (dedup_cache.c).  XXH3 is not keyed and
 * transactionIds are the client's: ids chosen to share their hashes' low
 * bits must not pile up in one run of slots, so the key is multiplied by an
 * odd number drawn at random once per process, and the product's high half
 * taken.
 */
extern uint64 queen_slot_mult;
extern void queen_slot_mult_init(void);

static inline uint32
queen_slot_of(uint64 key, uint32 mask)
{
	if (unlikely(queen_slot_mult == 0))
		queen_slot_mult_init();
	return (uint32) ((key * queen_slot_mult) >> 32) & mask;
}

/*
 * The next position in the caller's list whose hash equals hash, or -1.  A
 * hash looked for twice is found twice.
 */
static inline int32
queen_hash_refs_next(const QueenHashRefs *r, const uint8 *hash, QueenHashRefIter *it)
{
	for (;;)
	{
		const QueenHashRefSlot *s = &r->slots[it->pos];

		if (s->index < 0)
			return -1;
		it->pos = (it->pos + 1) & r->mask;
		if (s->head == it->head &&
			memcmp(r->hashes + (Size) s->index * QUEEN_HASH_LEN + 8, hash + 8,
				   QUEEN_HASH_LEN - 8) == 0)
			return s->index;
	}
}

static inline int32
queen_hash_refs_first(const QueenHashRefs *r, const uint8 *hash, QueenHashRefIter *it)
{
	memcpy(&it->head, hash, sizeof(it->head));
	it->pos = queen_slot_of(it->head, r->mask);
	return queen_hash_refs_next(r, hash, it);
}

#endif							/* QUEEN_HASH_REFS_H */
