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
 * rest is read from log_txns.  Both memories keep part of each hash, so
 * what they match is confirmed against its stored row.
 *
 *-------------------------------------------------------------------------
 */
#include "queen.h"
#include "dedup_cache.h"
#include "hash_refs.h"
#include "log_write_int.h"
#include "spi.h"

#include "catalog/pg_type.h"

/*
 * Candidate hash rows for a probe above $2: from the row that may straddle
 * it (the greatest base_offset <= $2) upwards, newest first along the
 * primary key.  created_at is monotone in offset order (stamped under the
 * row lock), so the reader stops at the first row older than the window:
 * it visits the window's rows above $2 and no others.  One range on the
 * primary key, not a UNION of two, so the plan is one backward index scan
 * the cursor can stop early (the UNION was planned as a bitmap scan and a
 * sort of the whole partition).
 */
static const char *const sql_probe =
"SELECT base_offset, end_offset, created_at, hashes FROM queen.log_txns"
" WHERE partition_id = $1"
"   AND base_offset >= COALESCE((SELECT max(base_offset) FROM queen.log_txns"
"                                 WHERE partition_id = $1 AND base_offset <= $2), $2 + 1)"
"   AND base_offset <= $3"
" ORDER BY base_offset DESC";

static SPIPlanPtr queen_probe_plan = NULL;

/* The hash row holding offset $2, if any: the one that may straddle it. */
static const char *const sql_covering =
"SELECT base_offset, created_at, hashes FROM queen.log_txns"
" WHERE partition_id = $1 AND base_offset <= $2"
" ORDER BY base_offset DESC LIMIT 1";

static SPIPlanPtr queen_covering_plan = NULL;

/*
 * A range longer than this many offsets is walked without keeping what it
 * reads unless the cache has room for it: filling one partition by evicting
 * others would only make their next probes read their windows in turn.
 */
#define QUEEN_PROBE_FILL_ALWAYS 1024

/*
 * Lower first_off[i] to the offset of every stored frame of one log_txns row
 * above from whose hash equals incoming frame i.
 */
static void
queen_probe_row(const QueenHashRefs *refs, const uint8 *stored,
				Size nstored, int64 base, int64 from, int64 *first_off)
{
	Size		j;

	/* frames at or below from are vouched for: a straddling row starts above it */
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
 */
static void
queen_probe_read(const QueenTarget *t, const uint8 *incoming, int k, int64 from,
				 int64 read_from, int64 read_upto, TimestampTz cutoff,
				 QueenDedupEntry **fill, int64 *first_off)
{
	QueenHashRefs *refs = queen_hash_refs(incoming, k);
	Oid			types[3] = {UUIDOID, INT8OID, INT8OID};
	Datum		values[3];
	Portal		portal;
	bool		done = false;

	/*
	 * A cursor, because a busy partition's window can hold more hashes
	 * than fit in memory at once; and a fresh snapshot (read_only =
	 * false), because rows committed by the pusher whose lock we waited
	 * for are not in the snapshot our caller started with.
	 */
	values[0] = UUIDPGetDatum(&t->pid);
	values[1] = Int64GetDatum(read_from);
	values[2] = Int64GetDatum(read_upto);
	portal = SPI_cursor_open(NULL, queen_plan_once(&queen_probe_plan, sql_probe, 3, types, true),
							 values, NULL, false);
	while (!done)
	{
		uint64		r;

		SPI_cursor_fetch(portal, true, 64);
		if (SPI_processed == 0)
			break;
		for (r = 0; r < SPI_processed; r++)
		{
			HeapTuple	tuple = SPI_tuptable->vals[r];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			int64		base = queen_get_int64(tuple, desc, 1);
			bool		isnull;
			TimestampTz created;
			Datum		d;
			bytea	   *stored;
			Size		nstored;

			if (queen_get_int64(tuple, desc, 2) <= read_from)
				continue;		/* the row below read_from, not straddling it */
			created = DatumGetTimestampTz(SPI_getbinval(tuple, desc, 3, &isnull));
			if (created < cutoff)
			{
				done = true;	/* every row below is older still */
				break;
			}
			d = SPI_getbinval(tuple, desc, 4, &isnull);
			if (isnull)
				continue;
			stored = DatumGetByteaPP(d);
			nstored = VARSIZE_ANY_EXHDR(stored) / QUEEN_HASH_LEN;
			queen_probe_row(refs, (const uint8 *) VARDATA_ANY(stored),
							nstored, base, from, first_off);
			if (*fill != NULL &&
				!queen_dedup_cache_add(*fill, (const uint8 *) VARDATA_ANY(stored),
									   (int) nstored, base, created, cutoff))
			{
				/* the window does not fit the cache: probe without it */
				queen_dedup_cache_drop(*fill);
				*fill = NULL;
			}
			if ((Pointer) stored != DatumGetPointer(d))
				pfree(stored);	/* detoasted copy: do not let a long window pile up */
		}
		SPI_freetuptable(SPI_tuptable);
	}
	SPI_cursor_close(portal);
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
	Oid			types[2] = {UUIDOID, INT8OID};
	int64		row_end = -1;
	int			h;

	if (hits->n == 0)
		return;
	refs = queen_hash_refs(incoming, k);
	qsort(hits->hits, hits->n, sizeof(QueenDedupHit), queen_hit_cmp);
	for (h = 0; h < hits->n; h++)
	{
		Datum		values[2];
		HeapTuple	tuple;
		TupleDesc	desc;
		bytea	   *stored;
		bool		isnull;
		int64		base;
		Size		nstored;
		int			rc;

		if (hits->hits[h].offset <= row_end)
			continue;			/* in the row just compared */
		values[0] = UUIDPGetDatum(&t->pid);
		values[1] = Int64GetDatum(hits->hits[h].offset);
		/* a fresh snapshot, as the walk's: see queen_probe_read */
		rc = SPI_execute_plan(queen_plan_once(&queen_covering_plan, sql_covering, 2, types, true),
							  values, NULL, false, 1);
		if (rc != SPI_OK_SELECT)
			elog(ERROR, "queen: dedup confirmation failed: %s", SPI_result_code_string(rc));
		if (SPI_processed == 0)
		{
			SPI_freetuptable(SPI_tuptable);
			continue;
		}
		tuple = SPI_tuptable->vals[0];
		desc = SPI_tuptable->tupdesc;
		base = queen_get_int64(tuple, desc, 1);
		stored = DatumGetByteaPP(SPI_getbinval(tuple, desc, 3, &isnull));
		nstored = VARSIZE_ANY_EXHDR(stored) / QUEEN_HASH_LEN;
		row_end = Max(base + (int64) nstored - 1, hits->hits[h].offset);
		if (queen_get_timestamptz(tuple, desc, 2) >= cutoff)
			queen_probe_row(refs, (const uint8 *) VARDATA_ANY(stored), nstored,
							base, from, first_off);
		SPI_freetuptable(SPI_tuptable);
	}
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
	int64		read_from = from;
	int64		read_upto;
	int			i,
				ndups;

	for (i = 0; i < k; i++)
		first_off[i] = -1;

	cached = queen_dedup_cache_get(&t->pid, t->generation, from, cutoff, t->last_offset);
	if (cached != NULL)
	{
		queen_dedup_cache_match(cached, incoming, k, from, cutoff, &hits);
		read_from = Max(from, queen_dedup_cache_verified_upto(cached));
		if (!own_writes)
			fill = cached;
	}
	else if (!own_writes && from == t->txns_start - 1)
		fill = queen_dedup_cache_create(&t->pid, t->generation, from, cutoff);

	/* what this transaction wrote itself is matched in memory, not reread */
	read_upto = queen_dedup_own_match(own, t->last_offset, incoming, k, from, cutoff,
									  &hits);

	if (fill != NULL && read_upto - read_from > QUEEN_PROBE_FILL_ALWAYS &&
		!queen_dedup_cache_room((uint64) (read_upto - read_from)))
	{
		queen_dedup_cache_drop(fill);
		fill = NULL;
	}
	if (read_upto > read_from)
		queen_probe_read(t, incoming, k, from, read_from, read_upto, cutoff,
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
