/*-------------------------------------------------------------------------
 *
 * dedup_probe.c
 *	  The dedup probe: does an incoming segment repeat a transactionId the
 *	  partition stored within its window?
 *
 * It runs under the partition row lock, so nobody can commit into the
 * probed range before our allocation, and a clean probe is final.  What
 * this process already read comes from the dedup cache (dedup_cache.c),
 * what this transaction wrote itself is matched in memory, and only the
 * rest is read from the stored hashes.  Both memories keep part of each hash, so
 * what they match is confirmed against its stored row.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "queen.h"
#include "dedup_cache.h"
#include "dedup_runs.h"
#include "hash_refs.h"
#include "log_write_int.h"
#include "txns_walk.h"

/*
 * A walk over more offsets than this fills a cache entry only while the
 * table the entry grows into fits the budget without evicting anyone:
 * filling one partition by evicting others would only make their next
 * probes read their windows in turn.  A shorter walk fills it regardless.
 */
#define QUEEN_PROBE_FILL_ALWAYS 1024

/*
 * Lower first_off[i] to the offset of every stored frame of one hash row
 * above from whose hash equals incoming frame i.
 */
static void
queen_probe_row(const QueenHashRefs *refs, const uint8 *stored,
				Size nstored, int64 base, int64 from, int64 *first_off)
{
	Size		j;

	/* frames at or below from are vouched for: a straddling row starts below it */
	for (j = (Size) Max(from + 1 - base, 0); j < nstored; j++)
	{
		const uint8 *hash = stored + j * QUEEN_HASH_LEN;
		QueenHashRefIter it;
		int32		idx;

		for (idx = queen_hash_refs_first(refs, hash, &it); idx >= 0;
			 idx = queen_hash_refs_next(refs, hash, &it))
		{
			int64		off = base + (int64) j;

			if (first_off[idx] < 0 || off < first_off[idx])
				first_off[idx] = off;
		}
	}
}

/*
 * Read the partition's hash rows in (read_from, read_upto] written since
 * cutoff and lower first_off for every incoming hash they hold; add them to
 * *fill, if given, or drop it when the window does not fit the cache.
 * Newest first: created_at is monotone in offset order (stamped under the
 * row lock), so the walk stops at the first row older than the window.
 */
static void
queen_probe_read(const QueenTarget *t, const uint8 *incoming, int k, int64 from,
				 int64 read_from, int64 read_upto, TimestampTz cutoff,
				 QueenDedupEntry **fill, int64 *first_off)
{
	QueenHashRefs *refs = queen_hash_refs(incoming, k);
	QueenTxnsWalk *w = queen_txns_walk_begin(&t->pid, read_from + 1, read_upto, true);
	QueenTxnsRow row;
	bool		may_evict = read_upto - read_from <= QUEEN_PROBE_FILL_ALWAYS;

	while (queen_txns_walk_next(w, &row))
	{
		if (row.created_at < cutoff)
			break;				/* every row below is older still */
		queen_probe_row(refs, row.hashes, row.count, row.base, from, first_off);
		if (*fill == NULL)
			continue;
		if (!may_evict && !queen_dedup_cache_fits(*fill, row.count))
		{
			/* the window does not fit what is free: probe without it */
			queen_dedup_cache_fill_failed(*fill);
			*fill = NULL;
		}
		else if (!queen_dedup_cache_add(*fill, row.hashes, (int) row.count, row.base,
										row.created_at, cutoff))
		{
			/* the window does not fit the cache: probe without it */
			queen_dedup_cache_drop(*fill);
			*fill = NULL;
		}
	}
	queen_txns_walk_end(w);
	queen_hash_refs_free(refs);
}

static int
queen_hit_cmp(const void *a, const void *b)
{
	const QueenDedupHit *x = a;
	const QueenDedupHit *y = b;

	return (x->offset > y->offset) - (x->offset < y->offset);
}

/*
 * Confirm the caches' hits against the stored rows.  A slot keeps part of
 * its hash and a rounded time, so each hit's row is read and every one of
 * its frames compared in full, exactly as a walk would; a hit whose row is
 * gone or differs is nothing.  Rows are read once however many hits they
 * hold: a retried batch is one row.
 */
static void
queen_probe_confirm(const QueenTarget *t, const uint8 *incoming, int k, int64 from,
					TimestampTz cutoff, QueenDedupHits *hits, int64 *first_off)
{
	QueenHashRefs *refs;
	QueenTxnsWalk *w;
	int64		row_end = -1;
	int			h;

	if (hits->n == 0)
		return;
	refs = queen_hash_refs(incoming, k);
	qsort(hits->hits, hits->n, sizeof(QueenDedupHit), queen_hit_cmp);
	/* one walk, sought to each hit's row in turn */
	w = queen_txns_walk_begin(&t->pid, 0, -1, true);
	for (h = 0; h < hits->n; h++)
	{
		int64		offset = hits->hits[h].offset;
		QueenTxnsRow row;

		if (offset <= row_end)
			continue;			/* in the row just compared */
		row_end = offset;
		queen_txns_walk_seek(w, offset, offset);
		if (queen_txns_walk_next(w, &row))
		{
			row_end = Max(row.base + row.count - 1, offset);
			if (row.created_at >= cutoff)
				queen_probe_row(refs, row.hashes, row.count, row.base, from, first_off);
		}
	}
	queen_txns_walk_end(w);
	queen_hash_refs_free(refs);
}

/* The duplicates first_off found, as seg->dups (in out_cxt); how many. */
static int
queen_probe_verdict(QueenSegment *seg, const int64 *first_off, MemoryContext out_cxt)
{
	int			ndups = 0;
	int			n = 0;
	int			i;

	for (i = 0; i < seg->msg_count; i++)
		if (first_off[i] >= 0)
			ndups++;
	if (ndups == 0)
		return 0;
	seg->dups = MemoryContextAlloc(out_cxt, sizeof(QueenDup) * ndups);
	for (i = 0; i < seg->msg_count; i++)
	{
		if (first_off[i] < 0)
			continue;
		seg->dups[n].index = i;
		seg->dups[n].offset = first_off[i];
		n++;
	}
	seg->ndups = ndups;
	return ndups;
}

/*
 * Compare the segment's hashes with the partition's stored hashes at
 * offsets above from, written within the window.  Runs under the partition
 * row lock.  Returns true and fills seg->dups (in out_cxt) when anything
 * matched, in which case nothing is written for this segment.
 *
 * What this process has already read of the partition comes from the dedup
 * cache (dedup_cache.c); only rows above what it verified are read from the
 * table, and they are added to it, unless this transaction wrote to the
 * partition before (those rows may be its own, not yet committed).
 */
bool
queen_probe(QueenSegment *seg, const QueenTarget *t, int64 from,
			TimestampTz now, MemoryContext out_cxt)
{
	int			k = seg->msg_count;
	const uint8 *incoming = (const uint8 *) VARDATA_ANY(seg->hashes);
	TimestampTz cutoff = now - (TimestampTz) t->window * USECS_PER_SEC;
	int64	   *first_off = palloc(sizeof(int64) * k);
	QueenOwnPartition *own = queen_dedup_own(&t->pid);
	bool		own_writes = own != NULL;
	QueenDedupEntry *cached;
	QueenDedupEntry *fill = NULL;
	QueenDedupHits hits = {0, 0, NULL};
	int64		floor = from;	/* what the runs did not cover starts above it */
	int64		read_from;
	int64		read_upto;
	int			i,
				ndups;

	for (i = 0; i < k; i++)
		first_off[i] = -1;

	cached = queen_dedup_cache_get(&t->pid, t->generation, from, cutoff, t->last_offset);
	if (cached == NULL)
	{
		/*
		 * The dedup runs (dedup_runs.c) answer for what they cover, and the
		 * cache and the walk take over above them, as for a caller that
		 * vouched for it: a window the cache cannot hold costs index
		 * lookups, not a read of every hash in it.
		 */
		int64		need = queen_dedup_cache_floor(&t->pid, t->generation, cutoff,
													   t->last_offset);

		floor = queen_dedup_runs_probe(&t->pid, t->generation, incoming, k, from,
									   t->last_offset, need, &hits);
		if (floor > from)
			cached = queen_dedup_cache_get(&t->pid, t->generation, floor, cutoff,
										   t->last_offset);
	}
	read_from = floor;
	if (cached != NULL)
	{
		queen_dedup_cache_match(cached, incoming, k, floor, cutoff, &hits);
		read_from = Max(floor, queen_dedup_cache_verified_upto(cached));

		/*
		 * Only a walk that starts where the entry ends may extend it: above
		 * a vouched-for from, (verified_upto, from] is not read, and an
		 * entry claiming it would fail a later probe that vouches less.
		 */
		if (!own_writes && floor <= queen_dedup_cache_verified_upto(cached))
			fill = cached;
	}
	else if (!own_writes && (floor > from || from == t->txns_start - 1) &&
			 (t->last_offset - floor <= QUEEN_PROBE_FILL_ALWAYS || queen_dedup_cache_may_fill()))
		fill = queen_dedup_cache_create(&t->pid, t->generation, floor, cutoff);

	/* what this transaction wrote itself is matched in memory, not reread */
	read_upto = queen_dedup_own_match(own, t->last_offset, incoming, k, floor, cutoff,
									  &hits);

	if (read_upto > read_from)
		queen_probe_read(t, incoming, k, floor, read_from, read_upto, cutoff,
						 &fill, first_off);
	if (fill != NULL)
		queen_dedup_cache_verified(fill, t->last_offset, cutoff);
	queen_probe_confirm(t, incoming, k, from, cutoff, &hits, first_off);
	if (hits.hits != NULL)
		pfree(hits.hits);

	ndups = queen_probe_verdict(seg, first_off, out_cxt);
	pfree(first_off);
	return ndups > 0;
}
