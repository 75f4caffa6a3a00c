/*-------------------------------------------------------------------------
 *
 * hash_refs.c
 *	  A sorted index over transactionId hashes, for the dedup probe
 *	  (dedup_probe.c) and the ack's resolution (ack.c).
 *
 * Both walk a partition's stored hashes frame by frame and must find, for
 * each stored hash, every looked-for hash equal to it.  Sorting the few
 * looked-for hashes once and binary-searching per stored frame costs
 * O(n log k) for n stored frames, instead of O(n k).
 *
 *-------------------------------------------------------------------------
 */
#include "hash_refs.h"

static int
queen_hash_ref_cmp(const void *a, const void *b)
{
	const QueenHashRef *x = (const QueenHashRef *) a;
	const QueenHashRef *y = (const QueenHashRef *) b;
	int			c = memcmp(x->hash, y->hash, QUEEN_HASH_LEN);

	if (c != 0)
		return c;
	return (x->index > y->index) - (x->index < y->index);
}

/*
 * The k hashes of a packed blob (16 bytes each), sorted by hash and then by
 * position, in the current memory context.  The entries point into hashes,
 * which must outlive them.
 */
QueenHashRef *
queen_hash_refs(const uint8 *hashes, int k)
{
	QueenHashRef *sorted = palloc(sizeof(QueenHashRef) * Max(k, 1));
	int			i;

	for (i = 0; i < k; i++)
	{
		sorted[i].hash = hashes + (Size) i * QUEEN_HASH_LEN;
		sorted[i].index = i;
	}
	qsort(sorted, k, sizeof(QueenHashRef), queen_hash_ref_cmp);
	return sorted;
}

/*
 * The first entry of sorted equal to hash, or where it would be: callers
 * walk on while queen_hash_refs_match() says the entry is still that hash,
 * so a hash looked for twice is found twice.
 */
int
queen_hash_refs_find(const QueenHashRef *sorted, int k, const uint8 *hash)
{
	QueenHashRef key = {hash, -1};
	int			lo = 0,
				hi = k;

	/* lower bound: index -1 sorts before every real entry with that hash */
	while (lo < hi)
	{
		int			mid = lo + (hi - lo) / 2;

		if (queen_hash_ref_cmp(&sorted[mid], &key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}
