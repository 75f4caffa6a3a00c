/*-------------------------------------------------------------------------
 *
 * dedup_runs_index.c
 *	  queen.dedup_index: a partition's hashes pushed since its newest run
 *	  sorted into a new run, and the newest runs of one size class merged
 *	  into one of the next (dedup_runs.c has why runs exist and how a probe
 *	  reads them).
 *
 * The maintenance worker calls it (src/broker/maintenance/dedup_index.c),
 * and a DBA may from SQL, in the caller's transaction: one indexer at a
 * time, under the advisory lock a queue's deletion waits for, and from
 * committed rows only.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "queen.h"
#include "dedup_runs_int.h"
#include "log_write.h"
#include "spi.h"
#include "txns_walk.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "port/pg_bitutils.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/memutils.h"

/* ----------------------------------------------------------------
 *		queen.dedup_index: building and merging runs
 * ----------------------------------------------------------------
 */

static SPIPlanPtr queen_runs_behind_plan = NULL;
static SPIPlanPtr queen_runs_chain_plan = NULL;
static SPIPlanPtr queen_runs_read_plan = NULL;
static SPIPlanPtr queen_runs_delete_plan = NULL;
static SPIPlanPtr queen_runs_insert_plan = NULL;

/*
 * Partitions stamped at or after $3 with at least $1 hashes above their
 * newest run (or above txns_start when they have none), most behind first.
 * A queue whose dedup window is 0 is never probed: its partitions are not
 * indexed.  Planned for each call: only with $3's value can the planner
 * see that (queue_id, last_write_at) leaves the few partitions written
 * lately out of a million.
 */
static const char *const queen_sql_runs_behind =
"SELECT p.id, p.last_offset, coalesce(r.run_end, p.txns_start - 1)"
"  FROM queen.queues q"
"  JOIN queen.log_partitions p ON p.queue_id = q.id AND p.last_write_at >= $3"
"  LEFT JOIN LATERAL (SELECT d.run_end FROM queen.log_dedup d"
"                      WHERE d.partition_id = p.id"
"                      ORDER BY d.run_end DESC LIMIT 1) r ON true"
" WHERE q.dedup_window_seconds > 0"
"   AND p.last_offset - coalesce(r.run_end, p.txns_start - 1) >= $1"
" ORDER BY p.last_offset - coalesce(r.run_end, p.txns_start - 1) DESC"
" LIMIT $2";

static const char *const queen_sql_runs_chain =
"SELECT run_start, run_end, run_hashes FROM queen.log_dedup"
" WHERE partition_id = $1 AND key_lo = (-9223372036854775807 - 1)"
" ORDER BY run_end";

static const char *const queen_sql_runs_read =
"SELECT keys FROM queen.log_dedup"
" WHERE partition_id = $1 AND run_end = $2 ORDER BY key_lo";

static const char *const queen_sql_runs_delete =
"DELETE FROM queen.log_dedup WHERE partition_id = $1 AND run_end = ANY ($2)";

static const char *const queen_sql_runs_insert =
"INSERT INTO queen.log_dedup (partition_id, run_end, key_lo, run_start, run_hashes, keys)"
" SELECT $1, $2, u.k, $3, $4, u.b FROM unnest($5::int8[], $6::bytea[]) AS u(k, b)";

/* a new run's entries, sorted with the comparison inlined rather than called by qsort */
#define ST_SORT queen_sort_entries
#define ST_ELEMENT_TYPE QueenRunEntry
#define ST_COMPARE(a, b) \
	((a)->key != (b)->key ? ((a)->key < (b)->key ? -1 : 1) : \
	 ((a)->delta > (b)->delta) - ((a)->delta < (b)->delta))
#define ST_SCOPE static
#define ST_DEFINE
#include "lib/sort_template.h"

/*
 * Write sorted entries as the run (start, end]: rows of about
 * QUEEN_RUN_ROW_KEYS, never splitting equal keys (a lookup reads one row).
 */
static void
queen_runs_write(const pg_uuid_t *pid, int64 start, int64 end,
				 const QueenRunEntry *e, int64 n)
{
	int64		nrows_max = n / QUEEN_RUN_ROW_KEYS + 1;
	Datum	   *key_lo = palloc(sizeof(Datum) * nrows_max);
	Datum	   *rows = palloc(sizeof(Datum) * nrows_max);
	int			nrows = 0;
	int64		i = 0;
	Datum		values[6];
	Oid			types[6] = {UUIDOID, INT8OID, INT8OID, INT8OID, INT8ARRAYOID, BYTEAARRAYOID};

	while (i < n || nrows == 0)
	{
		int64		j = Min(i + QUEEN_RUN_ROW_KEYS, n);
		int64		m;
		int64		x;
		bytea	   *b;
		char	   *p;

		while (j < n && j > i && e[j].key == e[j - 1].key)
			j++;
		m = j - i;
		b = palloc(VARHDRSZ + m * (sizeof(int64) + sizeof(uint32)));
		SET_VARSIZE(b, VARHDRSZ + m * (sizeof(int64) + sizeof(uint32)));
		p = VARDATA(b);
		for (x = 0; x < m; x++)
		{
			memcpy(p + x * sizeof(int64), &e[i + x].key, sizeof(int64));
			memcpy(p + m * sizeof(int64) + x * sizeof(uint32), &e[i + x].delta,
				   sizeof(uint32));
		}
		if (nrows == nrows_max)
		{
			nrows_max *= 2;
			key_lo = repalloc(key_lo, sizeof(Datum) * nrows_max);
			rows = repalloc(rows, sizeof(Datum) * nrows_max);
		}
		key_lo[nrows] = Int64GetDatum(nrows == 0 ? QUEEN_RUN_FIRST_KEY : e[i].key);
		rows[nrows] = PointerGetDatum(b);
		nrows++;
		i = j;
	}

	values[0] = UUIDPGetDatum(pid);
	values[1] = Int64GetDatum(end);
	values[2] = Int64GetDatum(start);
	values[3] = Int64GetDatum(n);
	values[4] = queen_array_datum(key_lo, nrows, INT8OID);
	values[5] = queen_array_datum(rows, nrows, BYTEAOID);
	queen_exec(queen_plan_once(&queen_runs_insert_plan, queen_sql_runs_insert, 6, types, false),
			   values, SPI_OK_INSERT, "writing a dedup run");
}

/*
 * The new run above the newest: every hash stored in (start, last], or in
 * as many whole rows as QUEEN_RUN_MAX_HASHES allows (*capped set then).
 * Returns its hashes.
 */
static int64
queen_runs_build(const pg_uuid_t *pid, int64 start, int64 last, bool *capped)
{
	QueenTxnsWalk *w = queen_txns_walk_begin(pid, start + 1, last, false);
	QueenTxnsRow row;
	int64		cap = 4096;
	int64		n = 0;
	int64		end = start;
	QueenRunEntry *e = palloc_extended(sizeof(QueenRunEntry) * cap, MCXT_ALLOC_HUGE);
	bool		short_of_last = false;

	while (queen_txns_walk_next(w, &row))
	{
		int64		j;

		for (j = Max(start + 1 - row.base, 0); j < row.count && row.base + j <= last; j++)
		{
			if (n == cap)
			{
				cap *= 2;
				e = repalloc_huge(e, sizeof(QueenRunEntry) * cap);
			}
			e[n].key = queen_run_key(row.hashes + j * QUEEN_HASH_LEN);
			e[n].delta = (uint32) (row.base + j - start);
			n++;
		}
		end = Min(row.base + row.count - 1, last);
		if (n >= QUEEN_RUN_MAX_HASHES || end - start >= QUEEN_RUN_MAX_SPAN / 2)
		{
			short_of_last = *capped = true;
			break;
		}
	}
	queen_txns_walk_end(w);

	/* offsets without a row hold no hash: the run covers them all the same */
	if (!short_of_last)
		end = last;
	queen_sort_entries(e, n);
	queen_runs_write(pid, start, end, e, n);
	return n;
}

/* Append run end's entries to e, their offsets moved up by shift. */
static void
queen_runs_read(const pg_uuid_t *pid, int64 end, uint32 shift,
				QueenRunEntry **e, int64 *n, int64 *cap)
{
	Datum		values[2];
	Oid			types[2] = {UUIDOID, INT8OID};
	uint64		r;

	values[0] = UUIDPGetDatum(pid);
	values[1] = Int64GetDatum(end);
	queen_exec(queen_plan_once(&queen_runs_read_plan, queen_sql_runs_read, 2, types, false),
			   values, SPI_OK_SELECT, "reading a dedup run");
	for (r = 0; r < SPI_processed; r++)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1, &isnull);
		bytea	   *b = DatumGetByteaPP(d);
		int			m = (int) (VARSIZE_ANY_EXHDR(b) / (sizeof(int64) + sizeof(uint32)));
		const char *data = VARDATA_ANY(b);
		int			x;

		if (*n + m > *cap)
		{
			*cap = Max(*cap * 2, *n + m);
			*e = repalloc_huge(*e, sizeof(QueenRunEntry) * *cap);
		}
		for (x = 0; x < m; x++)
		{
			(*e)[*n].key = queen_row_key(data, x);
			(*e)[*n].delta = queen_row_delta(data, m, x) + shift;
			(*n)++;
		}
	}
	SPI_freetuptable(SPI_tuptable);
}

/*
 * Merge the m runs from runs[0] (the oldest) up the chain into one: their
 * entries read in chain order, each run already sorted, then merged two
 * sorted stretches at a time.  Returns its hashes.
 */
static int64
queen_runs_merge(const pg_uuid_t *pid, const QueenRunInfo *runs, int m)
{
	int64		cap = 1;
	QueenRunEntry *in;
	QueenRunEntry *out;
	int64	   *bounds = palloc(sizeof(int64) * (m + 1));
	int			nb = m;
	int64		n = 0;
	Datum		values[2];
	Datum	   *ends = palloc(sizeof(Datum) * m);
	Oid			types[2] = {UUIDOID, INT8ARRAYOID};
	int			i;

	for (i = 0; i < m; i++)
		cap += runs[i].hashes;
	in = palloc_extended(sizeof(QueenRunEntry) * cap, MCXT_ALLOC_HUGE);
	for (i = 0; i < m; i++)
	{
		bounds[i] = n;
		queen_runs_read(pid, runs[i].end, (uint32) (runs[i].start - runs[0].start),
						&in, &n, &cap);
		ends[i] = Int64GetDatum(runs[i].end);
	}
	bounds[m] = n;
	out = palloc_extended(sizeof(QueenRunEntry) * Max(n, 1), MCXT_ALLOC_HUGE);

	/* pairs of sorted stretches into one, until one is left */
	while (nb > 1)
	{
		int			k = 0;
		QueenRunEntry *swap;

		for (i = 0; i < nb; i += 2)
		{
			int64		x = bounds[i],
						xe = bounds[i + 1],
						y = i + 1 < nb ? bounds[i + 1] : xe,
						ye = i + 1 < nb ? bounds[i + 2] : xe,
						o = bounds[i];

			while (x < xe || y < ye)
			{
				if (y >= ye || (x < xe && in[x].key <= in[y].key))
					out[o++] = in[x++];
				else
					out[o++] = in[y++];
			}
			bounds[k++] = bounds[i];
		}
		bounds[k] = n;
		nb = k;
		swap = in;
		in = out;
		out = swap;
	}
	pfree(out);

	/* the merged run takes the newest one's end: theirs go first */
	values[0] = UUIDPGetDatum(pid);
	values[1] = queen_array_datum(ends, m, INT8OID);
	queen_exec(queen_plan_once(&queen_runs_delete_plan, queen_sql_runs_delete, 2, types, false),
			   values, SPI_OK_DELETE, "deleting merged dedup runs");
	queen_runs_write(pid, runs[0].start, runs[m - 1].end, in, n);
	pfree(in);
	return n;
}

/* A run's size class: how many times min_hashes quadruples into it. */
static int
queen_runs_class(int64 hashes, int min_hashes)
{
	int64		q = hashes / Max(min_hashes, 1);

	return q <= 1 ? 0 : pg_leftmost_one_pos64((uint64) q) / 2;
}

/*
 * Merge the partition's newest QUEEN_RUN_FANIN runs into one while they are
 * of one size class: a partition keeps fewer than QUEEN_RUN_FANIN runs per
 * class, and each hash is rewritten once per class it climbs (log4 of the
 * window over min_hashes).  Returns the hashes written.
 */
static int64
queen_runs_compact(const pg_uuid_t *pid, int min_hashes)
{
	Datum		values[1];
	Oid			types[1] = {UUIDOID};
	QueenRunInfo *runs;
	int			n;
	uint64		r;
	int64		written = 0;

	values[0] = UUIDPGetDatum(pid);
	queen_exec(queen_plan_once(&queen_runs_chain_plan, queen_sql_runs_chain, 1, types, false),
			   values, SPI_OK_SELECT, "reading the dedup runs");
	n = (int) SPI_processed;
	runs = palloc(sizeof(QueenRunInfo) * Max(n, 1));
	for (r = 0; r < SPI_processed; r++)
	{
		HeapTuple	t = SPI_tuptable->vals[r];

		runs[r].start = queen_get_int64(t, SPI_tuptable->tupdesc, 1);
		runs[r].end = queen_get_int64(t, SPI_tuptable->tupdesc, 2);
		runs[r].hashes = queen_get_int64(t, SPI_tuptable->tupdesc, 3);
	}
	SPI_freetuptable(SPI_tuptable);

	while (n >= QUEEN_RUN_FANIN)
	{
		QueenRunInfo *first = &runs[n - QUEEN_RUN_FANIN];
		int			class = queen_runs_class(runs[n - 1].hashes, min_hashes);
		int64		total = 0;
		int			i;

		for (i = n - QUEEN_RUN_FANIN; i < n; i++)
		{
			if (queen_runs_class(runs[i].hashes, min_hashes) != class ||
				(i > n - QUEEN_RUN_FANIN && runs[i].start != runs[i - 1].end))
				return written;
			total += runs[i].hashes;
		}
		if (total > QUEEN_RUN_MAX_HASHES || runs[n - 1].end - first->start > QUEEN_RUN_MAX_SPAN)
			break;
		CHECK_FOR_INTERRUPTS();
		first->hashes = queen_runs_merge(pid, first, QUEEN_RUN_FANIN);
		first->end = runs[n - 1].end;
		written += first->hashes;
		n -= QUEEN_RUN_FANIN - 1;
	}
	return written;
}

/*
 * queen_dedup_runs_index, queen.dedup_index: give every partition with at
 * least min_hashes hashes above its newest run (at most max_partitions of
 * them, most behind first) a new run, and merge its runs.  Runs in the
 * caller's transaction; returns the hashes written, 0 when another session
 * is indexing.
 *
 * Only partitions stamped at or after *since are read (DT_NOBEGIN: all): a
 * partition falls behind only by being written.  *since is then where the
 * next pass may start (write_horizon.c): unchanged when this one left a
 * partition behind (more than max_partitions, a run capped) or did not
 * run, since that partition may not be written again, and while there is
 * no horizon (a prepared transaction waits: its write is as old as the
 * last horizon at most).
 */
int64
queen_dedup_runs_index(int min_hashes, int max_partitions, TimestampTz *since)
{
	Oid			behind_types[3] = {INT8OID, INT4OID, TIMESTAMPTZOID};
	Datum		values[3];
	TimestampTz horizon;
	bool		capped = false;
	MemoryContext cxt;
	MemoryContext old;
	QueenRunInfo *behind;
	pg_uuid_t  *pids;
	int64		written = 0;
	uint64		n,
				r;

	/* one indexer at a time; a queue's deletion waits for it (configure.c) */
	if (!DatumGetBool(DirectFunctionCall1(pg_try_advisory_xact_lock_int8,
										  Int64GetDatum(QUEEN_DEDUP_INDEX_LOCK))))
		return 0;
	queen_spi_connect();

	horizon = queen_write_horizon();
	values[0] = Int64GetDatum(Max(min_hashes, 1));
	values[1] = Int32GetDatum(max_partitions);
	values[2] = TimestampTzGetDatum(*since);
	if (queen_runs_behind_plan == NULL)
		queen_runs_behind_plan = queen_keep_custom_plan(queen_sql_runs_behind, 3, behind_types);
	queen_exec(queen_runs_behind_plan, values, SPI_OK_SELECT, "finding partitions to index");
	n = SPI_processed;
	behind = palloc(sizeof(QueenRunInfo) * Max(n, 1));
	pids = palloc(sizeof(pg_uuid_t) * Max(n, 1));
	for (r = 0; r < n; r++)
	{
		HeapTuple	t = SPI_tuptable->vals[r];

		queen_get_uuid(t, SPI_tuptable->tupdesc, 1, &pids[r]);
		behind[r].end = queen_get_int64(t, SPI_tuptable->tupdesc, 2);
		behind[r].start = queen_get_int64(t, SPI_tuptable->tupdesc, 3);
	}
	SPI_freetuptable(SPI_tuptable);

	cxt = AllocSetContextCreate(CurrentMemoryContext, "queen dedup index",
								ALLOCSET_DEFAULT_SIZES);
	for (r = 0; r < n; r++)
	{
		CHECK_FOR_INTERRUPTS();
		old = MemoryContextSwitchTo(cxt);
		written += queen_runs_build(&pids[r], behind[r].start, behind[r].end, &capped);
		written += queen_runs_compact(&pids[r], min_hashes);
		MemoryContextSwitchTo(old);
		MemoryContextReset(cxt);
	}
	MemoryContextDelete(cxt);
	SPI_finish();
	if (n < (uint64) max_partitions && !capped && horizon != DT_NOBEGIN)
		*since = horizon;
	return written;
}
