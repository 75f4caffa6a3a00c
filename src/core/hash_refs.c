/*-------------------------------------------------------------------------
 *
 * hash_refs.c
 *	  A hash set over transactionId hashes, for the dedup probe
 *	  (dedup_probe.c) and the ack's resolution (ack.c).
 *
 * Both walk a partition's stored hashes frame by frame and must find, for
 * each stored hash, every looked-for hash equal to it.  When the dedup
 * cache cannot hold a partition's window, the probe's walk visits every
 * stored hash of that window on every push, so this lookup is the inner
 * loop of the write path's worst case: a binary search over sorted 16-byte
 * keys was a third of all CPU there (docs/BENCHMARKS.md).  Open addressing
 * on the first 8 bytes, at most half full, answers "none" with one or two
 * slot loads.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "hash_refs.h"

#include "common/pg_prng.h"

uint64		queen_slot_mult = 0;

void
queen_slot_mult_init(void)
{
	queen_slot_mult = pg_prng_uint64(&pg_global_prng_state) | 1;
}

/*
 * A set over the k hashes of a packed blob (16 bytes each), in the current
 * memory context.  It points into hashes, which must outlive it.
 */
QueenHashRefs *
queen_hash_refs(const uint8 *hashes, int k)
{
	QueenHashRefs *r = palloc(sizeof(QueenHashRefs));
	uint32		nslots = 16;
	uint32		i;
	int			n;

	while (nslots < (uint64) Max(k, 1) * 2)
		nslots <<= 1;
	r->mask = nslots - 1;
	r->hashes = hashes;
	r->slots = palloc_extended(sizeof(QueenHashRefSlot) * (Size) nslots, MCXT_ALLOC_HUGE);
	for (i = 0; i < nslots; i++)
		r->slots[i].index = -1;
	for (n = 0; n < k; n++)
	{
		uint64		head;

		memcpy(&head, hashes + (Size) n * QUEEN_HASH_LEN, sizeof(head));
		for (i = queen_slot_of(head, r->mask); r->slots[i].index >= 0; i = (i + 1) & r->mask)
			;
		r->slots[i].head = head;
		r->slots[i].index = n;
	}
	return r;
}

void
queen_hash_refs_free(QueenHashRefs *r)
{
	pfree(r->slots);
	pfree(r);
}
