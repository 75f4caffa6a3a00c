/*-------------------------------------------------------------------------
 *
 * dedup_runs.c
 *	  Dedup runs: a partition's stored transactionId hashes sorted into runs
 *	  (queen.log_dedup), so that what a dedup probe costs does not grow with
 *	  its window.
 *
 * Without them a probe that its process's cache cannot answer reads every
 * hash row of the window from the stored hashes: with an hour's window under load
 * that is millions of hashes per push, and throughput fell to a fifth
 * within ten minutes (docs/BENCHMARKS.md).  An index maintained per hash
 * costs more than the whole rest of a push (a GIN index over the blobs was
 * tried: 3 to 5 us per hash).  Runs amortise the sorting instead:
 * queen.dedup_index sorts what was pushed since its last call into a new
 * run, and merges the newest four runs into one while they are of one size
 * class, so a partition holds fewer than four runs per class and every hash
 * is rewritten about log4(window / min_hashes) times, in bulk.
 *
 * A probe asks each run above its floor about each incoming hash: the
 * run's Bloom filter (kept per process, as is the partition's chain of
 * runs) first, then, for the keys it may hold, one index descent to the
 * row that may hold them.  What matches goes to the probe's confirmation
 * as a cache hit would: runs keep 8 of the 16 bytes and no time, so every
 * match is compared in full against its stored hash row.  Runs are an
 * accelerator, never the record: a probe uses them only when they form an
 * unbroken chain from below its floor up to offsets it knows are
 * committed, and reads the rest from the stored hashes.
 *
 * Runs are built only from committed rows: a partition's committed
 * last_offset is moved under its row lock in the transaction that wrote
 * every row up to it, so every row at or below it is visible to whoever
 * sees it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "queen.h"
#include "dedup_runs_int.h"
#include "spi.h"
#include "txns_walk.h"

#include "access/genam.h"
#include "access/relscan.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/tuptable.h"
#include "lib/ilist.h"
#include "miscadmin.h"
#include "port/pg_bitutils.h"
#include "utils/acl.h"
#include "utils/fmgroids.h"
#include "utils/fmgrprotos.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

/* log_dedup's columns, as queen--1.2.sql creates them */
#define RUNS_ATT_END		2
#define RUNS_ATT_KEY_LO		3
#define RUNS_ATT_START		4
#define RUNS_ATT_HASHES		5
#define RUNS_ATT_KEYS		6
#define RUNS_NATTS			6

/* The first of the row's n keys that is not below key. */
static int
queen_row_lower_bound(const char *data, int n, int64 key)
{
	int			lo = 0,
				hi = n;

	while (lo < hi)
	{
		int			mid = lo + (hi - lo) / 2;

		if (queen_row_key(data, mid) < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static inline int64
queen_runs_int64(TupleTableSlot *slot, int att)
{
	return queen_slot_int64(slot, att, "log_dedup");
}

/* ----------------------------------------------------------------
 *		Filters: which keys a run cannot hold, in memory
 * ----------------------------------------------------------------
 */

/*
 * A blocked Bloom filter per run, kept per process under
 * queen.dedup_filter_mb (least recently used first out): without one,
 * every incoming hash costs an index descent in every run, 15% of all CPU
 * in bench/sustained once the runs held the window.  A run's content
 * never changes (it holds what the stored hashes hold at its offsets; merging
 * makes a new run), so a filter stays true for as long as it is kept.
 * Ten bits a key and six bits probed in one 64-byte block: about 1% of
 * the keys a run does not hold still cost their descent.
 */
#define QUEEN_FILTER_BITS_PER_KEY	10
#define QUEEN_FILTER_BLOCK_WORDS	8	/* 512 bits, one cache line */
#define QUEEN_FILTER_PROBES			6

typedef struct QueenRunFilterKey
{
	pg_uuid_t	pid;
	TimestampTz generation;		/* a recreated partition's runs are other runs */
	int64		run_end;
	int64		run_start;
} QueenRunFilterKey;

typedef struct QueenRunFilter
{
	QueenRunFilterKey key;		/* hash key: must be first */
	dlist_node	lru;			/* most recently used at the tail */
	uint32		nblocks;
	uint64	   *words;			/* nblocks * QUEEN_FILTER_BLOCK_WORDS */
} QueenRunFilter;

static HTAB *queen_filters = NULL;
static dlist_head queen_filters_lru = DLIST_STATIC_INIT(queen_filters_lru);
static MemoryContext queen_filters_cxt = NULL;
static Size queen_filters_bytes = 0;

static inline uint32
queen_filter_block(const QueenRunFilter *f, int64 key)
{
	return (uint32) (((uint64) ((uint64) key >> 32) * f->nblocks) >> 32);
}

/* the bits within the block come from the key remixed: the block took its high half */
static inline uint64
queen_filter_bits(int64 key)
{
	return (uint64) key * UINT64CONST(0x9E3779B97F4A7C15);
}

static void
queen_filter_add(QueenRunFilter *f, int64 key)
{
	uint64	   *block = f->words + (Size) queen_filter_block(f, key) * QUEEN_FILTER_BLOCK_WORDS;
	uint64		h = queen_filter_bits(key);
	int			i;

	for (i = 0; i < QUEEN_FILTER_PROBES; i++, h >>= 9)
		block[(h & 511) >> 6] |= UINT64CONST(1) << (h & 63);
}

static bool
queen_filter_may_hold(const QueenRunFilter *f, int64 key)
{
	const uint64 *block = f->words + (Size) queen_filter_block(f, key) * QUEEN_FILTER_BLOCK_WORDS;
	uint64		h = queen_filter_bits(key);
	int			i;

	for (i = 0; i < QUEEN_FILTER_PROBES; i++, h >>= 9)
		if ((block[(h & 511) >> 6] & (UINT64CONST(1) << (h & 63))) == 0)
			return false;
	return true;
}

static void
queen_filter_evict(QueenRunFilter *f)
{
	queen_filters_bytes -= (Size) f->nblocks * QUEEN_FILTER_BLOCK_WORDS * sizeof(uint64);
	pfree(f->words);
	dlist_delete(&f->lru);
	hash_search(queen_filters, &f->key, HASH_REMOVE, NULL);
}

/* The hash key of run (run_start, run_end], padding zeroed. */
static void
queen_filter_key(QueenRunFilterKey *key, const pg_uuid_t *pid, TimestampTz generation,
				 int64 run_end, int64 run_start)
{
	memset(key, 0, sizeof(*key));
	key->pid = *pid;
	key->generation = generation;
	key->run_end = run_end;
	key->run_start = run_start;
}

/* The filter this process keeps of run (run_start, run_end], or NULL. */
static QueenRunFilter *
queen_filter_find(const pg_uuid_t *pid, TimestampTz generation, int64 run_end, int64 run_start)
{
	QueenRunFilterKey key;
	QueenRunFilter *f;

	if (queen_filters == NULL || queen_dedup_filter_mb == 0)
		return NULL;
	queen_filter_key(&key, pid, generation, run_end, run_start);
	f = hash_search(queen_filters, &key, HASH_FIND, NULL);
	if (f != NULL)
		dlist_move_tail(&queen_filters_lru, &f->lru);
	return f;
}

/*
 * The filter of run (run_start, run_end] of the partition, made from its
 * rows if this process has none, or NULL when it cannot fit.  slot holds
 * the run's first row, where scan (over the run's rows in key order)
 * stands.
 */
static QueenRunFilter *
queen_filter_get(const pg_uuid_t *pid, TimestampTz generation, int64 run_end, int64 run_start,
				 int64 nkeys, IndexScanDesc scan, TupleTableSlot *slot)
{
	QueenRunFilterKey key;
	QueenRunFilter *f;
	QueenRunFilter build;
	Size		budget = (Size) queen_dedup_filter_mb * 1024 * 1024;
	uint32		nblocks;
	Size		bytes;
	bool		found;
	bool		isnull;

	if (budget == 0)
	{
		/* turned off: what it held goes */
		while (!dlist_is_empty(&queen_filters_lru))
			queen_filter_evict(dlist_container(QueenRunFilter, lru,
											   dlist_head_node(&queen_filters_lru)));
		return NULL;
	}
	if (queen_filters == NULL)
		queen_filters = queen_process_hash("queen dedup filters", sizeof(QueenRunFilterKey),
										   sizeof(QueenRunFilter), 256, &queen_filters_cxt);
	f = queen_filter_find(pid, generation, run_end, run_start);
	if (f != NULL)
		return f;
	/* a run this transaction wrote may yet roll back: nothing of it is kept */
	if (TransactionIdIsCurrentTransactionId(DatumGetTransactionId(
			slot_getsysattr(slot, MinTransactionIdAttributeNumber, &isnull))))
		return NULL;
	queen_filter_key(&key, pid, generation, run_end, run_start);

	nblocks = (uint32) Min((Max(nkeys, 1) * QUEEN_FILTER_BITS_PER_KEY + 511) / 512, PG_INT32_MAX);
	bytes = (Size) nblocks * QUEEN_FILTER_BLOCK_WORDS * sizeof(uint64);
	if (bytes > budget)
		return NULL;
	while (queen_filters_bytes + bytes > budget && !dlist_is_empty(&queen_filters_lru))
		queen_filter_evict(dlist_container(QueenRunFilter, lru,
										   dlist_head_node(&queen_filters_lru)));

	/*
	 * Made in the caller's memory and kept only once complete: a filter cut
	 * short by an error would deny keys the run holds.
	 */
	build.nblocks = nblocks;
	build.words = palloc_extended(bytes, MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	do
	{
		Datum		d;
		bytea	   *b;
		int			n,
					i;
		const char *data;

		if (queen_runs_int64(slot, RUNS_ATT_END) != run_end ||
			queen_runs_int64(slot, RUNS_ATT_START) != run_start)
			break;
		d = slot_getattr(slot, RUNS_ATT_KEYS, &isnull);
		if (isnull)
			elog(ERROR, "queen: unexpected NULL in queen.log_dedup column %d", RUNS_ATT_KEYS);
		b = DatumGetByteaPP(d);
		n = (int) (VARSIZE_ANY_EXHDR(b) / (sizeof(int64) + sizeof(uint32)));
		data = VARDATA_ANY(b);
		for (i = 0; i < n; i++)
			queen_filter_add(&build, queen_row_key(data, i));
		if ((Pointer) b != DatumGetPointer(d))
			pfree(b);
	} while (index_getnext_slot(scan, ForwardScanDirection, slot));

	f = hash_search(queen_filters, &key, HASH_ENTER, &found);
	f->nblocks = nblocks;
	f->words = MemoryContextAllocExtended(queen_filters_cxt, bytes, MCXT_ALLOC_HUGE);
	memcpy(f->words, build.words, bytes);
	pfree(build.words);
	dlist_push_tail(&queen_filters_lru, &f->lru);
	queen_filters_bytes += bytes;
	return f;
}

/* ----------------------------------------------------------------
 *		Chains: which runs a partition has, in memory
 * ----------------------------------------------------------------
 */

/*
 * A partition's runs as this process last read them, newest first, so
 * that a probe need not read every run's first row again to learn where
 * it starts: with a run's filter kept too, a probe whose keys the filters
 * deny costs one index descent in all (the newest row), where it cost one
 * per run, a fifth of a one-client log_push_multi_v1's CPU once its
 * partitions held a dozen runs.
 *
 * The chain is told apart by the newest run's last row, its end, place
 * and inserting transaction: the indexer changes a chain only by adding a
 * run above it or by merging the newest runs, which rewrites that row, so
 * a chain whose newest row is still the one it was read under is still
 * the chain.  (A lookup into a run that is not there after all, say
 * deleted by hand, fails as it did before, and the probe reads the stored hashes.)
 * An older chain still tells the truth about the offsets it covers (see
 * queen_runs_probe_known), so a probe that needs nothing above it does
 * not read the newest row at all.
 * At most QUEEN_CHAINS_MAX partitions are remembered; beyond that the
 * memory is given back and they are read again.
 */
#define QUEEN_CHAINS_MAX	16384

typedef struct QueenRunChain
{
	pg_uuid_t	pid;			/* hash key: must be first */
	TimestampTz generation;		/* the partition's, when read */
	bool		settled;		/* its newest run committed: not this transaction's */
	int64		top_end;
	ItemPointerData top_tid;
	TransactionId top_xmin;
	int			nlinks;
	int			maxlinks;
	int64	   *starts;			/* newest run first; each ends where the one before starts */
} QueenRunChain;

static HTAB *queen_chains = NULL;
static MemoryContext queen_chains_cxt = NULL;

/* The chain of pid whose newest row is the one in slot, as far as it is known. */
static QueenRunChain *
queen_chain_get(const pg_uuid_t *pid, TimestampTz generation, TupleTableSlot *slot)
{
	QueenRunChain *c;
	bool		found;
	bool		isnull;
	int64		top_end = queen_runs_int64(slot, RUNS_ATT_END);
	TransactionId xmin = DatumGetTransactionId(slot_getsysattr(slot, MinTransactionIdAttributeNumber,
															   &isnull));

	if (queen_chains == NULL || hash_get_num_entries(queen_chains) >= QUEEN_CHAINS_MAX)
		queen_chains = queen_process_hash("queen dedup run chains", sizeof(pg_uuid_t),
										  sizeof(QueenRunChain), 256, &queen_chains_cxt);
	c = hash_search(queen_chains, pid, HASH_ENTER, &found);
	if (!found)
	{
		c->maxlinks = 8;
		c->starts = MemoryContextAlloc(queen_chains_cxt, sizeof(int64) * c->maxlinks);
	}
	if (!found || c->generation != generation || c->top_end != top_end ||
		c->top_xmin != xmin || !ItemPointerEquals(&c->top_tid, &slot->tts_tid))
	{
		c->generation = generation;
		c->settled = !TransactionIdIsCurrentTransactionId(xmin);
		c->top_end = top_end;
		c->top_tid = slot->tts_tid;
		c->top_xmin = xmin;
		c->nlinks = 0;
	}
	return c;
}

static void
queen_chain_append(QueenRunChain *c, int64 start)
{
	if (c->nlinks == c->maxlinks)
	{
		c->maxlinks *= 2;
		c->starts = repalloc(c->starts, sizeof(int64) * c->maxlinks);
	}
	c->starts[c->nlinks++] = start;
}

/* ----------------------------------------------------------------
 *		The probe
 * ----------------------------------------------------------------
 */

typedef struct QueenKeyRef
{
	int64		key;
	int32		index;
} QueenKeyRef;

static int
queen_keyref_cmp(const void *a, const void *b)
{
	const QueenKeyRef *x = a;
	const QueenKeyRef *y = b;

	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return (x->index > y->index) - (x->index < y->index);
}

/*
 * Add to hits every entry of run (run_start, run_end] with one of the
 * incoming keys, at an offset above from: one descent to the row that may
 * hold each key the filter (if any) lets through.  False when the run has
 * no row where one must be.
 */
static bool
queen_run_lookup(IndexScanDesc scan, TupleTableSlot *slot, ScanKeyData *keys,
				 const QueenRunFilter *filter, const QueenKeyRef *refs, int k,
				 int64 run_end, int64 run_start, int64 from, QueenDedupHits *hits)
{
	const char *data = NULL;
	int			n = 0;
	int64		row_lo = 0;
	bytea	   *copy = NULL;
	int			i;

	for (i = 0; i < k; i++)
	{
		int64		key = refs[i].key;
		int			j;

		if (i > 0 && key == refs[i - 1].key)
			continue;			/* its matches were added for every index below */
		if (filter != NULL && !queen_filter_may_hold(filter, key))
			continue;

		/* the row that may hold key: the last one keyed at or below it */
		if (data == NULL || key < row_lo || (n > 0 && key > queen_row_key(data, n - 1)))
		{
			bool		isnull;
			Datum		d;
			bytea	   *b;

			ScanKeyInit(&keys[1], 2, BTEqualStrategyNumber, F_INT8EQ, Int64GetDatum(run_end));
			ScanKeyInit(&keys[2], 3, BTLessEqualStrategyNumber, F_INT8LE, Int64GetDatum(key));
			index_rescan(scan, keys, 3, NULL, 0);
			if (copy != NULL)
				pfree(copy);
			copy = NULL;
			if (!index_getnext_slot(scan, BackwardScanDirection, slot) ||
				queen_runs_int64(slot, RUNS_ATT_START) != run_start)
				return false;
			row_lo = queen_runs_int64(slot, RUNS_ATT_KEY_LO);
			d = slot_getattr(slot, RUNS_ATT_KEYS, &isnull);
			if (isnull)
				elog(ERROR, "queen: unexpected NULL in queen.log_dedup column %d", RUNS_ATT_KEYS);
			b = DatumGetByteaPP(d);
			if ((Pointer) b != DatumGetPointer(d))
				copy = b;		/* stored out of line */
			n = (int) (VARSIZE_ANY_EXHDR(b) / (sizeof(int64) + sizeof(uint32)));
			data = VARDATA_ANY(b);
		}
		for (j = queen_row_lower_bound(data, n, key);
			 j < n && queen_row_key(data, j) == key; j++)
		{
			int64		offset = run_start + (int64) queen_row_delta(data, n, j);
			int			m;

			if (offset <= from)
				continue;		/* vouched for by the caller */
			for (m = i; m < k && refs[m].key == key; m++)
				queen_dedup_hits_add(hits, refs[m].index, offset);
		}
	}
	if (copy != NULL)
		pfree(copy);
	return true;
}

/* log_dedup and its primary key, open for a probe under a fresh snapshot */
typedef struct QueenRunsRel
{
	Relation	heap;
	Relation	index;
	TupleTableSlot *slot;
	ScanKeyData keys[3];		/* the first, the partition's, set by the opening */
} QueenRunsRel;

/* Same snapshot rules as the hash walk (txns_walk.c). */
static void
queen_runs_open(QueenRunsRel *r, Oid relid, const pg_uuid_t *pid)
{
	Oid			indexid;

	r->heap = table_open(relid, AccessShareLock);
	indexid = RelationGetPrimaryKeyIndex(r->heap);
	if (!OidIsValid(indexid) || RelationGetDescr(r->heap)->natts != RUNS_NATTS)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table \"queen.log_dedup\" is not as this version of queen created it"),
				 errhint("Drop and create the extension again.")));
	r->index = index_open(indexid, AccessShareLock);
	r->slot = table_slot_create(r->heap, NULL);
	ScanKeyInit(&r->keys[0], 1, BTEqualStrategyNumber, F_UUID_EQ, UUIDPGetDatum(pid));

	CommandCounterIncrement();
	PushActiveSnapshot(GetTransactionSnapshot());
	UpdateActiveSnapshotCommandId();
}

static void
queen_runs_close(QueenRunsRel *r)
{
	ExecDropSingleTupleTableSlot(r->slot);
	index_close(r->index, NoLock);
	table_close(r->heap, NoLock);
	PopActiveSnapshot();
}

/* The incoming hashes' run keys, sorted, each with its index. */
static QueenKeyRef *
queen_runs_refs(const uint8 *incoming, int k)
{
	QueenKeyRef *refs = palloc(sizeof(QueenKeyRef) * k);
	int			i;

	for (i = 0; i < k; i++)
	{
		refs[i].key = queen_run_key(incoming + (Size) i * QUEEN_HASH_LEN);
		refs[i].index = i;
	}
	qsort(refs, k, sizeof(QueenKeyRef), queen_keyref_cmp);
	return refs;
}

/* more runs than this below a cache's floor are left to the full probe */
#define QUEEN_KNOWN_RUNS	64

/*
 * The probe from what this process remembers, for a caller whose cache
 * holds everything above need: when the partition's chain, read under
 * this generation, reaches from below from up to need, with a filter for
 * every run in between, the newest row need not be read (it was most of
 * what a probe of 16 x 10 pushes cost).  An old chain answers as a new one
 * would: a run's entries are the stored hashes at its offsets, which never
 * change, and a merge writes a new run instead of changing one, so a
 * filter stays true even of a run merged away since.  Only keys a filter
 * lets through cost a lookup, and a run merged away is noticed there (its
 * row is gone), which sends the probe the whole way down.  A chain whose
 * newest run this transaction wrote, or that reaches above what the caller
 * knows is committed, is not used: it may roll back.  True when it
 * answered for (from, need].
 */
static bool
queen_runs_probe_known(QueenRunChain *c, Oid relid, const pg_uuid_t *pid,
					   TimestampTz generation, const QueenKeyRef *refs, int k, int64 from,
					   int64 need, int64 upto, QueenDedupHits *hits)
{
	QueenRunFilter *filters[QUEEN_KNOWN_RUNS];
	int64		ends[QUEEN_KNOWN_RUNS];
	int64		starts[QUEEN_KNOWN_RUNS];
	int			nruns = 0;
	bool		any = false;
	int64		run_end;
	QueenRunsRel r;
	IndexScanDesc keyscan;
	bool		answered = true;
	int			i,
				j;

	if (need <= from)
		return false;
	if (!c->settled || c->generation != generation ||
		c->top_end < need || c->top_end > upto)
		return false;
	for (i = 0, run_end = c->top_end; run_end > from; run_end = c->starts[i++])
	{
		if (i == c->nlinks)
			return false;		/* not known this far down */
		if (c->starts[i] >= need)
			continue;			/* wholly in the caller's cache */
		if (nruns == QUEEN_KNOWN_RUNS)
			return false;
		filters[nruns] = queen_filter_find(pid, generation, run_end, c->starts[i]);
		if (filters[nruns] == NULL)
			return false;
		for (j = 0; j < k && !any; j++)
			any = queen_filter_may_hold(filters[nruns], refs[j].key);
		ends[nruns] = run_end;
		starts[nruns] = c->starts[i];
		nruns++;
	}
	if (!any)
		return true;

	queen_runs_open(&r, relid, pid);
	keyscan = index_beginscan(r.heap, r.index, GetActiveSnapshot(), 3, 0);
	for (i = 0; i < nruns && answered; i++)
		answered = queen_run_lookup(keyscan, r.slot, r.keys, filters[i], refs, k, ends[i],
									starts[i], from, hits);
	index_endscan(keyscan);
	queen_runs_close(&r);
	if (!answered)
		c->nlinks = 0;			/* read again by the full probe */
	return answered;
}

/*
 * Look the incoming hashes up in the partition's runs that hold offsets
 * above from, up to upto (what the caller knows is committed), adding every
 * match above from to hits.  need is where the caller's cache of the
 * partition starts (upto without one): what lies above it need not come
 * from the runs.  Returns the offset up to which the runs covered the
 * partition (everything in (from, result] was looked up), or from when
 * there are no runs to use.  A caller not allowed to read log_dedup probes
 * without it: the runs only save work.
 */
int64
queen_dedup_runs_probe(const pg_uuid_t *pid, TimestampTz generation, const uint8 *incoming,
					   int k, int64 from, int64 upto, int64 need, QueenDedupHits *hits)
{
	Oid			relid = queen_table_oid("log_dedup");
	QueenRunsRel r;
	IndexScanDesc scan;
	IndexScanDesc keyscan = NULL;
	QueenKeyRef *refs = NULL;
	QueenRunChain *known;
	int64		covered = from;
	int64		top;
	int64		run_end;
	QueenRunChain *chain;
	bool		found;
	int			i;

	if (k <= 0 || pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
		return from;

	/* keys are sorted only for a partition whose runs this process knows or finds */
	known = queen_chains != NULL ? hash_search(queen_chains, pid, HASH_FIND, NULL) : NULL;
	if (known != NULL)
	{
		refs = queen_runs_refs(incoming, k);
		if (queen_runs_probe_known(known, relid, pid, generation, refs, k, from, need, upto,
								   hits))
		{
			pfree(refs);
			return need;
		}
	}

	queen_runs_open(&r, relid, pid);

	/* the newest run: the partition's last index entry */
	scan = index_beginscan(r.heap, r.index, GetActiveSnapshot(), 1, 0);
	index_rescan(scan, r.keys, 1, NULL, 0);
	found = index_getnext_slot(scan, BackwardScanDirection, r.slot);
	top = found ? queen_runs_int64(r.slot, RUNS_ATT_END) : from;
	index_endscan(scan);
	scan = NULL;
	if (top <= from || top > upto)
		goto done;
	if (refs == NULL)
		refs = queen_runs_refs(incoming, k);

	/* down the chain: each run starts where the one below it ends */
	chain = queen_chain_get(pid, generation, r.slot);
	scan = index_beginscan(r.heap, r.index, GetActiveSnapshot(), 2, 0);
	keyscan = index_beginscan(r.heap, r.index, GetActiveSnapshot(), 3, 0);
	for (i = 0, run_end = top; run_end > from; i++)
	{
		int64		run_start;
		QueenRunFilter *filter = NULL;

		if (i < chain->nlinks)
		{
			run_start = chain->starts[i];
			filter = queen_filter_find(pid, generation, run_end, run_start);
		}
		if (filter == NULL)
		{
			/* the run's first row says where it starts, and makes its filter */
			ScanKeyInit(&r.keys[1], 2, BTEqualStrategyNumber, F_INT8EQ, Int64GetDatum(run_end));
			index_rescan(scan, r.keys, 2, NULL, 0);
			if (!index_getnext_slot(scan, ForwardScanDirection, r.slot))
				goto broken;	/* no run ends here: the chain is broken */
			run_start = queen_runs_int64(r.slot, RUNS_ATT_START);
			if (run_start >= run_end ||
				(i < chain->nlinks && run_start != chain->starts[i]))
				goto broken;	/* not a run as dedup_index writes them */
			if (i == chain->nlinks)
				queen_chain_append(chain, run_start);
			filter = queen_filter_get(pid, generation, run_end, run_start,
									  queen_runs_int64(r.slot, RUNS_ATT_HASHES), scan, r.slot);
		}
		if (!queen_run_lookup(keyscan, r.slot, r.keys, filter, refs, k, run_end, run_start,
							  from, hits))
			goto broken;
		run_end = run_start;
	}
	covered = top;
	goto done;

broken:
	/* read again next time; this probe reads the stored hashes above from */
	chain->nlinks = 0;

done:
	if (refs != NULL)
		pfree(refs);
	if (keyscan != NULL)
		index_endscan(keyscan);
	if (scan != NULL)
		index_endscan(scan);
	queen_runs_close(&r);
	return covered;
}
