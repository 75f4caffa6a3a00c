/*-------------------------------------------------------------------------
 *
 * alloc.c
 *	  The allocator: the one place where offsets are assigned, segments are
 *	  written and duplicates are detected.
 *
 * Everything that pushes (log_push_one_v1, log_push_multi_v1, queen.push,
 * the broker's shards) ends up in queen_push_bundle() or
 * queen_push_one_resolved().  The steps follow the seed's write path
 * (docs/ARCHITECTURE.md, "The allocator"):
 *
 *	1. validate every segment (names, msg_count, 16-byte stride, blob);
 *	2. when every partition's id is cached in this process, one pre-lock
 *	   by primary key that locks all rows or none (and then 3 is done; a
 *	   one-segment bundle locks its one row directly);
 *	   otherwise one existence count and, only when something is missing,
 *	   the two provisioning INSERTs, each ordered on its unique key;
 *	3. one set-based pre-lock of every partition row, ascending id;
 *	4. one bundle timestamp, taken after the locks;
 *	5. per segment in ascending partition id order: the dedup probe under the
 *	   row lock when the queue's window is > 0; a duplicate writes nothing;
 *	6. the allocator UPDATE for every segment that survived, one set-based
 *	   statement, then their segment and hash rows inserted from C (as COPY
 *	   does: constraints and index entries, no statement per row);
 *	7. completeness: every segment gets exactly one verdict or all raise.
 *
 * Locking rules: partition rows are locked only in ascending id order, and
 * only here.  Because the probe runs while the row lock is held, nobody can
 * commit into the probed range before our allocation, so a clean probe is
 * final.  created_at is stamped after the locks are taken, which makes it
 * monotone per partition in commit order.
 *
 * Statements are prepared once per process and kept (SPI_keepplan); the
 * plan cache replans them by itself if the tables are recreated.
 *
 *-------------------------------------------------------------------------
 */
#include "queen.h"

#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"

#include <xxhash.h>

/* First four bytes of every zstd frame (little-endian 0xFD2FB528). */
static const uint8 queen_zstd_magic[4] = {0x28, 0xb5, 0x2f, 0xfd};

/* ----------------------------------------------------------------
 *		Prepared statements
 * ----------------------------------------------------------------
 */

/* Which of the three name arrays carries what, for every name-keyed plan. */
#define NAME_ARGS	3

static const char *const sql_count_missing =
"SELECT count(*)::int4"
"  FROM unnest($1::text[], $2::text[], $3::uuid[]) AS u(qname, pname, tenant)"
" WHERE NOT EXISTS ("
"        SELECT 1 FROM queen.queues q"
"          JOIN queen.log_partitions p ON p.queue_id = q.id"
"         WHERE q.tenant_id = u.tenant AND q.name = u.qname AND p.name = u.pname)";

/*
 * ON CONFLICT DO NOTHING takes speculative locks in row order: two bundles
 * creating overlapping sets in different orders would convoy exactly like
 * unordered row locks, hence ORDER BY on the unique key.  Namespace and task
 * come from the dotted name, as Queen derives them.
 */
static const char *const sql_provision_queues =
"INSERT INTO queen.queues (tenant_id, name, namespace, task)"
" SELECT DISTINCT u.tenant, u.qname,"
"        split_part(u.qname, '.', 1), split_part(u.qname, '.', 2)"
"   FROM unnest($1::text[], $2::text[], $3::uuid[]) AS u(qname, pname, tenant)"
"  ORDER BY 1, 2"
" ON CONFLICT (tenant_id, name) DO NOTHING";

static const char *const sql_provision_partitions =
"INSERT INTO queen.log_partitions (queue_id, name)"
" SELECT DISTINCT q.id, u.pname"
"   FROM unnest($1::text[], $2::text[], $3::uuid[]) AS u(qname, pname, tenant)"
"   JOIN queen.queues q ON q.tenant_id = u.tenant AND q.name = u.qname"
"  ORDER BY 1, 2"
" ON CONFLICT (queue_id, name) DO NOTHING";

/* LockRows sits above the Sort, so rows are locked in ORDER BY order. */
static const char *const sql_prelock =
"SELECT u.ord::int4, p.id, q.dedup_window_seconds, p.last_offset, p.txns_start, p.created_at"
"  FROM unnest($1::text[], $2::text[], $3::uuid[])"
"       WITH ORDINALITY AS u(qname, pname, tenant, ord)"
"  JOIN queen.queues q ON q.tenant_id = u.tenant AND q.name = u.qname"
"  JOIN queen.log_partitions p ON p.queue_id = q.id AND p.name = u.pname"
" ORDER BY p.id"
"   FOR UPDATE OF p";

/*
 * The pre-lock of a bundle whose partition ids are all known (the pid cache
 * below): primary key lookups instead of the name joins, and no existence
 * count.  The one-time filter locks nothing unless every id is visible: a
 * stale id (a partition deleted since it was cached) then returns no rows
 * and holds no row lock, so the caller can fall back to the name path and
 * provision without holding any lock.  The same id twice also fails the
 * filter (count(*) counts rows, not ids), and the name path reports it.
 */
static const char *const sql_prelock_ids =
"SELECT u.ord::int4, p.id, q.dedup_window_seconds, p.last_offset, p.txns_start, p.created_at"
"  FROM unnest($1::uuid[]) WITH ORDINALITY AS u(pid, ord)"
"  JOIN queen.log_partitions p ON p.id = u.pid"
"  JOIN queen.queues q ON q.id = p.queue_id"
" WHERE (SELECT count(*) FROM queen.log_partitions x WHERE x.id = ANY ($1))"
"       = cardinality($1)"
" ORDER BY p.id"
"   FOR UPDATE OF p";

/*
 * One row by id, with the pre-lock's columns: log_push_one_v1's lock, and
 * the pre-lock of a one-segment bundle whose id is cached.  One row locks
 * all or none by itself, so it needs neither the pre-lock's filter (half
 * the CPU of a one-message push's pre-lock) nor its sort.
 */
static const char *const sql_lock_one =
"SELECT 1::int4, p.id, q.dedup_window_seconds, p.last_offset, p.txns_start, p.created_at"
"  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id"
" WHERE p.id = $1"
"   FOR UPDATE OF p";

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

/*
 * The allocator.  last_write_at is indexed, so it is rewritten at most once
 * a second to keep the update HOT; the oldest_* columns only change on the
 * empty -> non-empty transition for the same reason.  clock_timestamp() in
 * RETURNING is read after the row lock is held: the path without a
 * pre-lock ($3 NULL) stamps created_at with it.  A row the UPDATE does not
 * find (deleted under an un-prelocked push) is reported missing by the
 * caller, which then raises.  The segment and hash rows are inserted from
 * C (queen_insert_rows), not by this statement.
 */
static const char *const sql_write =
"UPDATE queen.log_partitions p SET"
"       last_offset = p.last_offset + u.n,"
"       oldest_live_at = COALESCE(p.oldest_live_at, clock_timestamp()),"
"       oldest_txn_at = COALESCE(p.oldest_txn_at, clock_timestamp()),"
"       last_write_at = CASE WHEN clock_timestamp() - p.last_write_at > interval '1 second'"
"                            THEN clock_timestamp() ELSE p.last_write_at END"
"  FROM unnest($1::uuid[], $2::int8[]) AS u(pid, n)"
" WHERE p.id = u.pid"
" RETURNING p.id, p.last_offset - u.n + 1, COALESCE($3, clock_timestamp())";

/* Backward step to the greatest base <= off, kept only if it covers off. */
static const char *const sql_segment_at =
"SELECT c.base_offset, c.end_offset, c.created_at, c.blob FROM ("
"        SELECT base_offset, end_offset, created_at, blob FROM queen.log_segments"
"         WHERE partition_id = $1 AND base_offset <= $2"
"         ORDER BY base_offset DESC LIMIT 1) c"
" WHERE c.end_offset >= $2";

/* What a partition id names, to hold a caller's p_pid to its names. */
static const char *const sql_pid_names =
"SELECT q.tenant_id, q.name, p.name"
"  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id"
" WHERE p.id = $1";

/* Deferred offsets reach their rows (see queen_write_deferred). */
static const char *const sql_flush =
"UPDATE queen.log_partitions p SET"
"       last_offset = u.last,"
"       last_write_at = CASE WHEN clock_timestamp() - p.last_write_at > interval '1 second'"
"                            THEN clock_timestamp() ELSE p.last_write_at END"
"  FROM unnest($1::uuid[], $2::int8[]) AS u(pid, last)"
" WHERE p.id = u.pid";

typedef enum QueenPlanId
{
	PLAN_COUNT_MISSING,
	PLAN_PROVISION_QUEUES,
	PLAN_PROVISION_PARTITIONS,
	PLAN_PRELOCK,
	PLAN_PRELOCK_IDS,
	PLAN_LOCK_ONE,
	PLAN_PROBE,
	PLAN_WRITE,
	PLAN_SEGMENT_AT,
	PLAN_FLUSH,
	PLAN_PID_NAMES,
	PLAN_COUNT
} QueenPlanId;

static SPIPlanPtr queen_plans[PLAN_COUNT];

/* Must be called between SPI_connect and SPI_finish. */
static SPIPlanPtr
queen_plan(QueenPlanId id)
{
	const char *sql = NULL;
	Oid			argtypes[5];
	int			nargs = 0;
	SPIPlanPtr	plan;

	if (queen_plans[id] != NULL)
		return queen_plans[id];

	switch (id)
	{
		case PLAN_COUNT_MISSING:
		case PLAN_PROVISION_QUEUES:
		case PLAN_PROVISION_PARTITIONS:
		case PLAN_PRELOCK:
			sql = id == PLAN_COUNT_MISSING ? sql_count_missing :
				id == PLAN_PROVISION_QUEUES ? sql_provision_queues :
				id == PLAN_PROVISION_PARTITIONS ? sql_provision_partitions :
				sql_prelock;
			argtypes[0] = TEXTARRAYOID;
			argtypes[1] = TEXTARRAYOID;
			argtypes[2] = UUIDARRAYOID;
			nargs = NAME_ARGS;
			break;
		case PLAN_PRELOCK_IDS:
			sql = sql_prelock_ids;
			argtypes[0] = UUIDARRAYOID;
			nargs = 1;
			break;
		case PLAN_LOCK_ONE:
			sql = sql_lock_one;
			argtypes[0] = UUIDOID;
			nargs = 1;
			break;
		case PLAN_PROBE:
			sql = sql_probe;
			argtypes[0] = UUIDOID;
			argtypes[1] = INT8OID;
			argtypes[2] = INT8OID;
			nargs = 3;
			break;
		case PLAN_WRITE:
			sql = sql_write;
			argtypes[0] = UUIDARRAYOID;
			argtypes[1] = INT8ARRAYOID;
			argtypes[2] = TIMESTAMPTZOID;
			nargs = 3;
			break;
		case PLAN_SEGMENT_AT:
			sql = sql_segment_at;
			argtypes[0] = UUIDOID;
			argtypes[1] = INT8OID;
			nargs = 2;
			break;
		case PLAN_PID_NAMES:
			sql = sql_pid_names;
			argtypes[0] = UUIDOID;
			nargs = 1;
			break;
		case PLAN_FLUSH:
			sql = sql_flush;
			argtypes[0] = UUIDARRAYOID;
			argtypes[1] = INT8ARRAYOID;
			nargs = 2;
			break;
		case PLAN_COUNT:
			break;
	}
	Assert(sql != NULL);

	plan = queen_keep_plan(sql, nargs, argtypes, id == PLAN_PROBE);
	queen_plans[id] = plan;
	return plan;
}

/*
 * Prepare a statement for the life of the process.  Must be called between
 * SPI_connect and SPI_finish.
 *
 * Plans are generic: planned once, not again for every call with new
 * arguments (which dominated the CPU of a small push), and replanned by the
 * plan cache when the tables' statistics change.  A statement read through
 * a cursor that usually stops early is planned for its first rows, so it
 * walks the primary key in order instead of sorting everything up front.
 */
SPIPlanPtr
queen_keep_plan(const char *sql, int nargs, Oid *argtypes, bool first_rows)
{
	int			options = CURSOR_OPT_GENERIC_PLAN;
	SPIPlanPtr	plan;

	if (first_rows)
		options |= CURSOR_OPT_FAST_PLAN;
	plan = SPI_prepare_cursor(sql, nargs, argtypes, options);

	if (plan == NULL)
		elog(ERROR, "queen: could not prepare statement: %s",
			 SPI_result_code_string(SPI_result));
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "queen: could not keep a prepared statement");
	return plan;
}

void
queen_spi_connect(void)
{
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "queen: SPI_connect failed");
}

static void
queen_exec(QueenPlanId id, Datum *values, int expected)
{
	int			rc = SPI_execute_plan(queen_plan(id), values, NULL, false, 0);

	if (rc != expected)
		elog(ERROR, "queen: statement %d failed: %s", (int) id,
			 SPI_result_code_string(rc));
}

/* ----------------------------------------------------------------
 *		Helpers
 * ----------------------------------------------------------------
 */

static Datum
queen_array_datum(Datum *elems, int n, Oid elemtype)
{
	int16		typlen;
	bool		typbyval;
	char		typalign;

	get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
	return PointerGetDatum(construct_array(elems, n, elemtype,
										   typlen, typbyval, typalign));
}

static int64
queen_get_int64(HeapTuple tuple, TupleDesc desc, int col)
{
	bool		isnull;
	Datum		d = SPI_getbinval(tuple, desc, col, &isnull);

	if (isnull)
		elog(ERROR, "queen: unexpected NULL in column %d", col);
	return DatumGetInt64(d);
}

static int32
queen_get_int32(HeapTuple tuple, TupleDesc desc, int col)
{
	bool		isnull;
	Datum		d = SPI_getbinval(tuple, desc, col, &isnull);

	if (isnull)
		elog(ERROR, "queen: unexpected NULL in column %d", col);
	return DatumGetInt32(d);
}

static TimestampTz
queen_get_timestamptz(HeapTuple tuple, TupleDesc desc, int col)
{
	return (TimestampTz) queen_get_int64(tuple, desc, col);	/* same representation */
}

static void
queen_get_uuid(HeapTuple tuple, TupleDesc desc, int col, pg_uuid_t *out)
{
	bool		isnull;
	Datum		d = SPI_getbinval(tuple, desc, col, &isnull);

	if (isnull)
		elog(ERROR, "queen: unexpected NULL in column %d", col);
	memcpy(out, DatumGetUUIDP(d), sizeof(pg_uuid_t));
}

static int
queen_uuid_cmp(const pg_uuid_t *a, const pg_uuid_t *b)
{
	return memcmp(a->data, b->data, UUID_LEN);
}

/* A partition id the caller named (or that was deleted under us) is gone. */
static void
pg_attribute_noreturn()
queen_partition_missing(const pg_uuid_t *pid)
{
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 errmsg("partition %s does not exist",
					DatumGetCString(DirectFunctionCall1(uuid_out, UUIDPGetDatum(pid))))));
}

/* ----------------------------------------------------------------
 *		The partition id cache
 *
 * Resolving (tenant, queue, partition) names costs an existence count and
 * a pre-lock that joins on the names, with text comparisons in
 * log_partitions' unique index; in the steady state every partition of a
 * bundle exists and its id never changes.  So each process remembers the
 * ids its name pre-locks returned and, when every segment of a bundle has
 * one, pre-locks by primary key instead (sql_prelock_ids).
 *
 * An entry is only a hint: the pre-lock by id proves that the row exists
 * while it takes the lock, and ids are never reused (gen_random_uuid) nor
 * moved to another name (nothing updates log_partitions.name, queue_id or
 * queues.name/tenant_id).  A stale entry (the partition was deleted, or its
 * creating transaction rolled back) makes the pre-lock return no rows and
 * the bundle takes the name path, which provisions and refreshes the entry.
 * ----------------------------------------------------------------
 */

/* Past this many entries the cache starts over (about 100 bytes each). */
#define QUEEN_PID_CACHE_MAX		65536

typedef struct QueenPidKey
{
	uint8		digest[16];		/* XXH3-128 of tenant, queue, 0x1F, partition */
} QueenPidKey;

typedef struct QueenPidEntry
{
	QueenPidKey key;			/* first: dynahash compares it */
	pg_uuid_t	pid;
	char	   *ident;			/* the hashed bytes, so a collision is a miss */
	Size		ident_len;
} QueenPidEntry;

static MemoryContext queen_pid_cxt = NULL;
static HTAB *queen_pid_cache = NULL;

/* The identity bytes of a segment's partition (validated names). */
static char *
queen_pid_ident(const QueenSegment *seg, Size *len)
{
	char	   *buf = palloc(QUEEN_IDENT_MAX);

	*len = queen_partition_ident(buf, &seg->tenant, seg->queue, strlen(seg->queue),
								 seg->partition, strlen(seg->partition));
	return buf;
}

static void
queen_pid_key(const char *ident, Size len, QueenPidKey *key)
{
	XXH128_canonical_t c;

	XXH128_canonicalFromHash(&c, XXH3_128bits(ident, len));
	memcpy(key->digest, c.digest, sizeof(key->digest));
}

static void
queen_pid_cache_reset(void)
{
	HASHCTL		ctl;

	if (queen_pid_cxt == NULL)
		queen_pid_cxt = AllocSetContextCreate(TopMemoryContext, "queen pid cache",
											  ALLOCSET_DEFAULT_SIZES);
	else
		MemoryContextReset(queen_pid_cxt);
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(QueenPidKey);
	ctl.entrysize = sizeof(QueenPidEntry);
	ctl.hcxt = queen_pid_cxt;
	queen_pid_cache = hash_create("queen pid cache", 1024, &ctl,
								  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
}

/* The cached id of a segment's partition, or false. */
static bool
queen_pid_cache_get(const char *ident, Size len, const QueenPidKey *key,
					pg_uuid_t *pid)
{
	QueenPidEntry *e;

	if (queen_pid_cache == NULL)
		return false;
	e = hash_search(queen_pid_cache, key, HASH_FIND, NULL);
	if (e == NULL || e->ident_len != len || memcmp(e->ident, ident, len) != 0)
		return false;
	*pid = e->pid;
	return true;
}

static void
queen_pid_cache_put(const char *ident, Size len, const QueenPidKey *key,
					const pg_uuid_t *pid)
{
	QueenPidEntry *e;
	bool		found;

	if (queen_pid_cache == NULL ||
		hash_get_num_entries(queen_pid_cache) >= QUEEN_PID_CACHE_MAX)
		queen_pid_cache_reset();
	e = hash_search(queen_pid_cache, key, HASH_ENTER, &found);
	if (found && e->ident_len == len && memcmp(e->ident, ident, len) == 0)
	{
		e->pid = *pid;
		return;
	}
	if (found)
		pfree(e->ident);
	/* fill the entry before it can be seen half-made (palloc may raise) */
	e->ident = NULL;
	e->ident_len = 0;
	e->pid = *pid;
	e->ident = MemoryContextAlloc(queen_pid_cxt, len);
	memcpy(e->ident, ident, len);
	e->ident_len = len;
}

static void
queen_pid_cache_forget(const QueenPidKey *key)
{
	QueenPidEntry *e;

	if (queen_pid_cache == NULL)
		return;
	e = hash_search(queen_pid_cache, key, HASH_FIND, NULL);
	if (e == NULL)
		return;
	if (e->ident != NULL)
		pfree(e->ident);
	hash_search(queen_pid_cache, key, HASH_REMOVE, NULL);
}

/* ----------------------------------------------------------------
 *		Validation
 * ----------------------------------------------------------------
 */

static void
queen_validate_segment(const QueenSegment *seg, int ordinal)
{
	Size		hashes_len;

	if (seg->queue == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("queue name of segment %d is NULL", ordinal)));
	queen_check_queue_name(seg->queue, strlen(seg->queue));
	if (seg->partition == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("partition name of segment %d is NULL", ordinal)));
	queen_check_partition_name(seg->partition, strlen(seg->partition));

	if (seg->msg_count < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("segment %d of queue \"%s\" partition \"%s\" has msg_count %d",
						ordinal, seg->queue, seg->partition, seg->msg_count),
				 errdetail("A segment carries at least one message.")));

	if (seg->hashes == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("hash blob of segment %d is NULL", ordinal)));
	hashes_len = VARSIZE_ANY_EXHDR(seg->hashes);
	if (hashes_len != (Size) seg->msg_count * QUEEN_HASH_LEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("hash blob of segment %d is %zu bytes for %d messages",
						ordinal, (size_t) hashes_len, seg->msg_count),
				 errdetail("The hash blob holds exactly 16 bytes per message, in frame order; a different stride would misaddress every later message.")));

	if (seg->blob == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("payload blob of segment %d is NULL", ordinal)));
	if (VARSIZE_ANY_EXHDR(seg->blob) < sizeof(queen_zstd_magic) ||
		memcmp(VARDATA_ANY(seg->blob), queen_zstd_magic, sizeof(queen_zstd_magic)) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
				 errmsg("payload blob of segment %d is not zstd-compressed", ordinal),
				 errdetail("A segment blob is one zstd frame of packed frames; see queen.pack_frames().")));

	if (seg->untrusted)
	{
		int			sqlstate;
		const char *problem = queen_segment_problem(VARDATA_ANY(seg->blob),
													VARSIZE_ANY_EXHDR(seg->blob),
													(const uint8 *) VARDATA_ANY(seg->hashes),
													seg->msg_count, &sqlstate);

		if (problem != NULL)
			ereport(ERROR,
					(errcode(sqlstate),
					 errmsg("segment %d is not one queen can store: %s", ordinal, problem),
					 errdetail("A segment is the zstd of exactly msg_count frames (docs/FORMAT.md), with the XXH3-128 of each frame's transactionId in p_hashes; queen.pack_frames() and queen.hash_blob() build them.")));
	}

	if (seg->window_set && seg->window_in < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("dedup window of segment %d is %d seconds", ordinal,
						seg->window_in),
				 errdetail("A dedup window is 0 (off) or a number of seconds.")));
}

/* ----------------------------------------------------------------
 *		The dedup probe
 * ----------------------------------------------------------------
 */

/* A segment whose partition is resolved, as the write steps see it. */
typedef struct QueenTarget
{
	QueenSegment *seg;
	pg_uuid_t	pid;
	int32		window;
	int32		queue_window;	/* the queue's, whatever the segment asked for */
	int64		last_offset;	/* as locked */
	int64		txns_start;
	TimestampTz generation;		/* the row's created_at: tells a recreated partition */
} QueenTarget;

typedef struct QueenHashRef
{
	const uint8 *hash;
	int32		index;
} QueenHashRef;

static int
queen_hashref_cmp(const void *a, const void *b)
{
	const QueenHashRef *x = (const QueenHashRef *) a;
	const QueenHashRef *y = (const QueenHashRef *) b;
	int			c = memcmp(x->hash, y->hash, QUEEN_HASH_LEN);

	if (c != 0)
		return c;
	return (x->index > y->index) - (x->index < y->index);
}

/*
 * Lower first_off[i] to the offset of every stored frame of one log_txns row
 * above from whose hash equals incoming frame i.
 */
static void
queen_probe_row(const QueenHashRef *sorted, int k, const uint8 *stored,
				Size nstored, int64 base, int64 from, int64 *first_off)
{
	Size		j;

	/* frames at or below from are vouched for: a straddling row starts above it */
	for (j = (Size) Max(from + 1 - base, 0); j < nstored; j++)
	{
		QueenHashRef key = {stored + j * QUEEN_HASH_LEN, -1};
		int			lo = 0,
					hi = k;

		/* lower bound: index -1 sorts before every real entry with that hash */
		while (lo < hi)
		{
			int			mid = lo + (hi - lo) / 2;

			if (queen_hashref_cmp(&sorted[mid], &key) < 0)
				lo = mid + 1;
			else
				hi = mid;
		}
		for (; lo < k && memcmp(sorted[lo].hash, key.hash, QUEEN_HASH_LEN) == 0; lo++)
		{
			int64		off = base + (int64) j;
			int32		idx = sorted[lo].index;

			if (first_off[idx] < 0 || off < first_off[idx])
				first_off[idx] = off;
		}
	}
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
static bool
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
	int64		read_from = from;
	int64		read_upto;
	int			i,
				ndups = 0;

	for (i = 0; i < k; i++)
		first_off[i] = -1;

	cached = queen_dedup_cache_get(&t->pid, t->generation, from, cutoff, t->last_offset);
	if (cached != NULL)
	{
		queen_dedup_cache_match(cached, incoming, k, from, cutoff, first_off);
		read_from = Max(from, queen_dedup_cache_verified_upto(cached));
		if (!own_writes)
			fill = cached;
	}
	else if (!own_writes && from == t->txns_start - 1)
		fill = queen_dedup_cache_create(&t->pid, t->generation, from, cutoff);

	/* what this transaction wrote itself is matched in memory, not reread */
	read_upto = queen_dedup_own_match(own, t->last_offset, incoming, k, from, cutoff,
									  first_off);

	if (read_upto > read_from)
	{
		QueenHashRef *sorted = palloc(sizeof(QueenHashRef) * k);
		Datum		values[3];
		Portal		portal;
		bool		done = false;

		for (i = 0; i < k; i++)
		{
			sorted[i].hash = incoming + (Size) i * QUEEN_HASH_LEN;
			sorted[i].index = i;
		}
		qsort(sorted, k, sizeof(QueenHashRef), queen_hashref_cmp);

		/*
		 * A cursor, because a busy partition's window can hold more hashes
		 * than fit in memory at once; and a fresh snapshot (read_only =
		 * false), because rows committed by the pusher whose lock we waited
		 * for are not in the snapshot our caller started with.
		 */
		values[0] = UUIDPGetDatum(&t->pid);
		values[1] = Int64GetDatum(read_from);
		values[2] = Int64GetDatum(read_upto);
		portal = SPI_cursor_open(NULL, queen_plan(PLAN_PROBE), values, NULL, false);
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
					continue;	/* the row below read_from, not straddling it */
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
				queen_probe_row(sorted, k, (const uint8 *) VARDATA_ANY(stored),
								nstored, base, from, first_off);
				if (fill != NULL &&
					!queen_dedup_cache_add(fill, (const uint8 *) VARDATA_ANY(stored),
										   (int) nstored, base, created, cutoff))
				{
					/* the window does not fit the cache: probe without it */
					queen_dedup_cache_drop(fill);
					fill = NULL;
				}
				if ((Pointer) stored != DatumGetPointer(d))
					pfree(stored);	/* detoasted copy: do not let a long window pile up */
			}
			SPI_freetuptable(SPI_tuptable);
		}
		SPI_cursor_close(portal);
		pfree(sorted);
	}
	if (fill != NULL)
		queen_dedup_cache_verified(fill, t->last_offset, cutoff);

	for (i = 0; i < k; i++)
		if (first_off[i] >= 0)
			ndups++;

	if (ndups > 0)
	{
		int			n = 0;

		seg->dups = MemoryContextAlloc(out_cxt, sizeof(QueenDup) * ndups);
		for (i = 0; i < k; i++)
		{
			if (first_off[i] < 0)
				continue;
			seg->dups[n].index = i;
			seg->dups[n].offset = first_off[i];
			n++;
		}
		seg->ndups = ndups;
	}
	pfree(first_off);
	return ndups > 0;
}

/* ----------------------------------------------------------------
 *		Writing
 * ----------------------------------------------------------------
 */

static int
queen_target_pid_cmp(const void *a, const void *b)
{
	const QueenTarget *x = *(const QueenTarget *const *) a;
	const QueenTarget *y = *(const QueenTarget *const *) b;

	return queen_uuid_cmp(&x->pid, &y->pid);
}

/*
 * The segment and hash rows, inserted the way COPY FROM inserts them:
 * table_tuple_insert, the table's CHECK and NOT NULL constraints, and its
 * index entries, without a statement, a plan or the executor's per-row
 * machinery.  That was a third of a shard's CPU per segment.
 *
 * Row triggers are not fired.  The only one these tables have is the
 * foreign key check of log_segments.partition_id, and it has nothing to
 * check: every row written here belongs to a partition row this
 * transaction holds FOR UPDATE (the pre-lock, or the allocator UPDATE just
 * before), so the partition exists and cannot be deleted before we commit.
 * Its ON DELETE CASCADE is unaffected.
 */
typedef struct QueenRowTable
{
	Relation	rel;
	ResultRelInfo *rri;
	TupleTableSlot *slot;
} QueenRowTable;

/* the first four columns of both tables; the fifth is the table's data */
static const char *const queen_row_columns[4] =
{"partition_id", "base_offset", "end_offset", "created_at"};

/*
 * The rows are inserted the way COPY does, but without firing triggers or
 * applying row-level security, which a statement would.  Rather than
 * silently bypass either, a push refuses to write when the table has one
 * that would apply: a trigger someone created (the foreign key's own are
 * internal), or row-level security that applies to the current user.
 */
static void
queen_rows_refuse_bypass(Relation rel)
{
	TriggerDesc *trigdesc = rel->trigdesc;
	int			i;

	for (i = 0; trigdesc != NULL && i < trigdesc->numtriggers; i++)
	{
		if (trigdesc->triggers[i].tgisinternal)
			continue;
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("table \"queen.%s\" has trigger \"%s\", which pushes would not fire",
						RelationGetRelationName(rel), trigdesc->triggers[i].tgname),
				 errdetail("Queen writes its log tables directly; a trigger on them would be silently skipped, so no push is written while one exists."),
				 errhint("Drop the trigger; consume the queue instead of reacting to inserts.")));
	}
	if (rel->rd_rel->relrowsecurity &&
		check_enable_rls(RelationGetRelid(rel), InvalidOid, false) == RLS_ENABLED)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("row-level security on table \"queen.%s\" applies to role \"%s\", and pushes cannot apply it",
						RelationGetRelationName(rel), GetUserNameFromId(GetUserId(), false)),
				 errdetail("Queen writes its log tables directly, so policies would be bypassed; no push is written while they apply."),
				 errhint("Control who may push with GRANT and REVOKE on the queen functions and tables, and disable row-level security on queen's tables.")));
}

static void
queen_rows_open(QueenRowTable *t, Oid relid, Index rti, const char *last_column)
{
	TupleDesc	desc;
	int			i;

	t->rel = table_open(relid, RowExclusiveLock);
	desc = RelationGetDescr(t->rel);
	/* the columns as queen--1.0.sql creates them, in its order */
	for (i = 0; i < 5; i++)
	{
		const char *want = i < 4 ? queen_row_columns[i] : last_column;

		if (desc->natts != 5 || TupleDescAttr(desc, i)->attisdropped ||
			strcmp(NameStr(TupleDescAttr(desc, i)->attname), want) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("table \"queen.%s\" does not have the columns this version of queen writes",
							RelationGetRelationName(t->rel)),
					 errhint("Drop and create the extension again.")));
	}
	queen_rows_refuse_bypass(t->rel);
	t->rri = makeNode(ResultRelInfo);
	InitResultRelInfo(t->rri, t->rel, rti, NULL, 0);
	ExecOpenIndices(t->rri, false);
	t->slot = MakeSingleTupleTableSlot(desc, &TTSOpsVirtual);
}

static void
queen_rows_put(QueenRowTable *t, EState *estate, CommandId cid, const pg_uuid_t *pid,
			   int64 base, int64 last, TimestampTz stamp, bytea *data)
{
	TupleTableSlot *slot = t->slot;

	ExecClearTuple(slot);
	slot->tts_values[0] = UUIDPGetDatum(pid);
	slot->tts_values[1] = Int64GetDatum(base);
	slot->tts_values[2] = Int64GetDatum(last);
	slot->tts_values[3] = TimestampTzGetDatum(stamp);
	slot->tts_values[4] = PointerGetDatum(data);
	memset(slot->tts_isnull, false, sizeof(bool) * 5);
	ExecStoreVirtualTuple(slot);

	ExecConstraints(t->rri, slot, estate);
	table_tuple_insert(t->rel, slot, cid, 0, NULL);
	ExecInsertIndexTuples(t->rri, slot, estate, false, false, NULL, NIL);
	ResetPerTupleExprContext(estate);
}

static void
queen_rows_close(QueenRowTable *t)
{
	ExecDropSingleTupleTableSlot(t->slot);
	ExecCloseIndices(t->rri);
	table_close(t->rel, NoLock);
}

static Oid
queen_table_oid(const char *name)
{
	Oid			relid = get_relname_relid(name, get_namespace_oid("queen", false));

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation \"queen.%s\" does not exist", name)));
	return relid;
}

/* Insert the segment and hash rows of targets, which the allocator placed. */
static void
queen_insert_rows(QueenTarget **targets, int n)
{
	EState	   *estate;
	Oid			relids[2] = {queen_table_oid("log_segments"), queen_table_oid("log_txns")};
	List	   *rtable = NIL;
	QueenRowTable segments;
	QueenRowTable txns;
	CommandId	cid;
	int			i;

	/* what a statement checks first: these are writes */
	PreventCommandIfReadOnly("queen.push");
	PreventCommandIfParallelMode("queen.push");
	estate = CreateExecutorState();
	cid = GetCurrentCommandId(true);

	/* the same INSERT privilege check a statement makes */
	for (i = 0; i < 2; i++)
	{
		RangeTblEntry *rte = makeNode(RangeTblEntry);

		rte->rtekind = RTE_RELATION;
		rte->relid = relids[i];
		rte->relkind = RELKIND_RELATION;
		rte->rellockmode = RowExclusiveLock;
		rte->requiredPerms = ACL_INSERT;
		rtable = lappend(rtable, rte);
	}
	ExecCheckRTPerms(rtable, true);
	ExecInitRangeTable(estate, rtable);

	queen_rows_open(&segments, relids[0], 1, "blob");
	queen_rows_open(&txns, relids[1], 2, "hashes");
	for (i = 0; i < n; i++)
	{
		QueenSegment *seg = targets[i]->seg;
		int64		last = seg->base_offset + seg->msg_count - 1;

		queen_rows_put(&segments, estate, cid, &targets[i]->pid, seg->base_offset, last,
					   seg->created_at, seg->blob);
		queen_rows_put(&txns, estate, cid, &targets[i]->pid, seg->base_offset, last,
					   seg->created_at, seg->hashes);
	}
	queen_rows_close(&segments);
	queen_rows_close(&txns);
	FreeExecutorState(estate);

	/* what comes next in this transaction (a probe, a resolve) sees the rows */
	CommandCounterIncrement();
}

/* ----------------------------------------------------------------
 *		Partitions this transaction already holds
 * ----------------------------------------------------------------
 */

/* The allocator UPDATE of t's row just ran in this transaction: remember what it locked. */
static void
queen_own_locked(const QueenTarget *t, bool described)
{
	QueenOwnPartition *o = queen_dedup_own(&t->pid);
	QueenOwnAlloc *a;

	if (o == NULL)
		return;
	a = queen_dedup_own_alloc(o);
	a->locked = true;
	if (described)
	{
		a->described = true;
		a->window = t->queue_window;
		a->txns_start = t->txns_start;
		a->generation = t->generation;
	}
}

/*
 * Fill t from what this transaction knows of its partition, if it holds the
 * row and knows enough for this segment: then no statement needs to lock or
 * update the row again.
 */
static bool
queen_own_target(QueenTarget *t, QueenSegment *seg, const pg_uuid_t *pid)
{
	QueenOwnPartition *o = queen_dedup_own(pid);
	QueenOwnAlloc *a;

	if (o == NULL)
		return false;
	a = queen_dedup_own_alloc(o);
	if (!a->locked ||
		!(a->described || (seg->window_set && seg->window_in == 0)))
		return false;
	t->seg = seg;
	t->pid = *pid;
	t->queue_window = a->window;
	t->window = seg->window_set ? seg->window_in : a->window;
	t->last_offset = a->last;
	t->txns_start = a->txns_start;
	t->generation = a->generation;
	return true;
}

/*
 * Write targets whose rows this transaction already holds: offsets come from
 * memory, and the rows' last_offset is written once, by queen_alloc_flush
 * before the next statement that reads it or before commit.
 */
static void
queen_write_deferred(QueenTarget **targets, int n, TimestampTz now)
{
	int			i;

	for (i = 0; i < n; i++)
	{
		QueenSegment *seg = targets[i]->seg;
		QueenOwnPartition *o = queen_dedup_own(&targets[i]->pid);

		seg->base_offset = targets[i]->last_offset + 1;
		seg->created_at = now;
		seg->status = QUEEN_SEGMENT_QUEUED;
		queen_dedup_cache_remember(&targets[i]->pid, seg->base_offset, seg->msg_count,
								   seg->created_at, (const uint8 *) VARDATA_ANY(seg->hashes));
		queen_dedup_own_defer(o);
	}
	queen_insert_rows(targets, n);
}

/*
 * Bring the rows of partitions written with deferred offsets up to date.
 * Must be called between SPI_connect and SPI_finish.  A row that is gone
 * was deleted by this transaction after it pushed there without a queue
 * deletion's notice (a hand-written DELETE): committing would leave
 * segments of no partition, so the transaction fails instead.
 */
static void
queen_alloc_flush_connected(void)
{
	QueenOwnAlloc **dirty;
	int			n = queen_dedup_own_dirty(&dirty);
	Datum	   *dp;
	Datum	   *dl;
	bool	   *done;
	uint64		updated = 0;
	Oid			save_userid;
	int			save_sec_context;
	int			i;

	if (n == 0)
		return;
	dp = palloc(sizeof(Datum) * n);
	dl = palloc(sizeof(Datum) * n);
	done = palloc0(sizeof(bool) * n);
	GetUserIdAndSecContext(&save_userid, &save_sec_context);

	/*
	 * One statement per user who deferred writes (almost always one), run
	 * as that user: the row is theirs to update, whoever commits.  An
	 * error leaves the user to the (sub)transaction abort to restore.
	 */
	for (i = 0; i < n; i++)
	{
		QueenOwnAlloc *who = dirty[i];
		Datum		values[2];
		int			m = 0;
		int			j;

		if (done[i])
			continue;
		for (j = i; j < n; j++)
		{
			if (done[j] || dirty[j]->userid != who->userid ||
				dirty[j]->sec_context != who->sec_context)
				continue;
			dp[m] = UUIDPGetDatum(queen_dedup_own_pid(dirty[j]));
			dl[m] = Int64GetDatum(dirty[j]->last);
			done[j] = true;
			m++;
		}
		values[0] = queen_array_datum(dp, m, UUIDOID);
		values[1] = queen_array_datum(dl, m, INT8OID);
		SetUserIdAndSecContext(who->userid, who->sec_context | SECURITY_LOCAL_USERID_CHANGE);
		queen_exec(PLAN_FLUSH, values, SPI_OK_UPDATE);
		SetUserIdAndSecContext(save_userid, save_sec_context);
		updated += SPI_processed;
	}
	if (updated != (uint64) n)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("a partition this transaction pushed to was deleted in the same transaction"),
				 errdetail("Delete a queue with queen.delete_queue_v1, or push again after deleting it.")));
}

/* The same, for callers outside SPI (a queue deletion, the commit). */
void
queen_alloc_flush(void)
{
	/* the common case, nothing deferred, costs no connection */
	if (!queen_dedup_own_any_dirty())
		return;
	queen_spi_connect();
	queen_alloc_flush_connected();
	SPI_finish();
}

static void
queen_alloc_xact_callback(XactEvent event, void *arg)
{
	(void) arg;
	if ((event == XACT_EVENT_PRE_COMMIT || event == XACT_EVENT_PRE_PREPARE) &&
		queen_dedup_own_any_dirty())
	{
		bool		read_only = XactReadOnly;

		/*
		 * The statement that ran last is over: the flush needs a snapshot
		 * of its own.  It completes writes made while the transaction could
		 * write, so a SET transaction_read_only since then does not stop
		 * it (a transaction that wrote cannot be in recovery).
		 */
		PushActiveSnapshot(GetTransactionSnapshot());
		XactReadOnly = false;
		queen_alloc_flush();
		XactReadOnly = read_only;
		PopActiveSnapshot();
	}
}

void
queen_alloc_init(void)
{
	RegisterXactCallback(queen_alloc_xact_callback, NULL);
}

/*
 * Allocate offsets for targets (distinct partitions, ascending id) and write
 * their segment and hash rows.  With stamp_after_update the rows are not
 * pre-locked and created_at is the clock read once the allocator UPDATE
 * holds the lock; otherwise every segment gets now.
 */
static void
queen_write(QueenTarget **targets, int n, TimestampTz now, bool stamp_after_update)
{
	Datum	   *pids = palloc(sizeof(Datum) * n);
	Datum	   *counts = palloc(sizeof(Datum) * n);
	Datum		values[3];
	char		nulls[3] = {' ', ' ', ' '};
	uint64		r;
	int			i;
	int			rc;

	for (i = 0; i < n; i++)
	{
		pids[i] = UUIDPGetDatum(&targets[i]->pid);
		counts[i] = Int64GetDatum((int64) targets[i]->seg->msg_count);
		targets[i]->seg->status = QUEEN_SEGMENT_PENDING;
	}
	values[0] = queen_array_datum(pids, n, UUIDOID);
	values[1] = queen_array_datum(counts, n, INT8OID);
	values[2] = TimestampTzGetDatum(now);
	if (stamp_after_update)
		nulls[2] = 'n';

	rc = SPI_execute_plan(queen_plan(PLAN_WRITE), values, nulls, false, 0);
	if (rc != SPI_OK_UPDATE_RETURNING)
		elog(ERROR, "queen: allocator statement failed: %s", SPI_result_code_string(rc));

	for (r = 0; r < SPI_processed; r++)
	{
		HeapTuple	tuple = SPI_tuptable->vals[r];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		QueenTarget key;
		QueenTarget *keyp = &key;
		QueenTarget **found;
		QueenSegment *seg;
		bool		isnull;

		queen_get_uuid(tuple, desc, 1, &key.pid);
		found = bsearch(&keyp, targets, n, sizeof(QueenTarget *), queen_target_pid_cmp);
		if (found == NULL || (*found)->seg->status != QUEEN_SEGMENT_PENDING)
			elog(ERROR, "queen: allocator returned an unexpected partition");
		seg = (*found)->seg;
		seg->base_offset = queen_get_int64(tuple, desc, 2);
		seg->created_at = DatumGetTimestampTz(SPI_getbinval(tuple, desc, 3, &isnull));
		seg->status = QUEEN_SEGMENT_QUEUED;
		/* whatever the window: a later probe in this transaction must know */
		queen_dedup_cache_remember(&key.pid, seg->base_offset, seg->msg_count,
								   seg->created_at, (const uint8 *) VARDATA_ANY(seg->hashes));
		queen_own_locked(*found, !stamp_after_update);
	}
	SPI_freetuptable(SPI_tuptable);

	/*
	 * Completeness: a partition that did not come back was deleted under us
	 * (only possible without a pre-lock); the whole push fails rather than
	 * report a verdict for it.
	 */
	for (i = 0; i < n; i++)
		if (targets[i]->seg->status != QUEEN_SEGMENT_QUEUED)
			queen_partition_missing(&targets[i]->pid);

	queen_insert_rows(targets, n);
}

/*
 * Probe every dedup-enabled target (all locked, ascending id) and write the
 * ones that came back clean.
 */
static void
queen_allocate_locked(QueenTarget **targets, int n, TimestampTz now,
					  MemoryContext out_cxt, bool deferred)
{
	QueenTarget **survivors = palloc(sizeof(QueenTarget *) * n);
	int			nsurvivors = 0;
	int			i;

	for (i = 0; i < n; i++)
	{
		QueenTarget *t = targets[i];
		QueenSegment *seg = t->seg;

		seg->partition_id = t->pid;
		seg->window = t->window;
		seg->ndups = 0;
		seg->dups = NULL;
		if (t->window > 0)
		{
			int64		from = Max(seg->verified, t->txns_start - 1);

			if (queen_probe(seg, t, from, now, out_cxt))
			{
				seg->status = QUEEN_SEGMENT_DUPLICATE;
				seg->probed_upto = t->last_offset;
				continue;
			}
		}
		survivors[nsurvivors++] = t;
	}
	if (nsurvivors > 0 && deferred)
		queen_write_deferred(survivors, nsurvivors, now);
	else if (nsurvivors > 0)
		queen_write(survivors, nsurvivors, now, false);
	pfree(survivors);
}

/* ----------------------------------------------------------------
 *		Entry points
 * ----------------------------------------------------------------
 */

static void
queen_same_partition_twice(const QueenSegment *seg)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("queue \"%s\" partition \"%s\" appears twice in one bundle",
					seg->queue, seg->partition),
			 errdetail("A bundle carries at most one segment per partition; merge them into one segment.")));
}

static void
queen_check_verdicts(const QueenSegment *segs, int nsegs)
{
	int			i;

	for (i = 0; i < nsegs; i++)
		if (segs[i].status != QUEEN_SEGMENT_QUEUED &&
			segs[i].status != QUEEN_SEGMENT_DUPLICATE)
			elog(ERROR, "queen: segment %d got no verdict", i + 1);
}

/*
 * Push a bundle of segments for distinct partitions in the current
 * transaction.  Writes each segment's verdict into it; allocations for the
 * verdicts (dups) are made in the caller's memory context.
 */
void
queen_push_bundle(QueenSegment *segs, int nsegs)
{
	MemoryContext out_cxt = CurrentMemoryContext;
	char	  **idents;
	Size	   *ident_lens;
	QueenPidKey *keys;
	Datum	   *pids;
	bool		all_cached;
	bool		by_id = false;
	QueenTarget *targets;
	QueenTarget **ordered;
	bool	   *resolved;
	TimestampTz now;
	uint64		r;
	int			i;

	if (nsegs <= 0)
		return;

	for (i = 0; i < nsegs; i++)
	{
		queen_validate_segment(&segs[i], i + 1);
		segs[i].status = QUEEN_SEGMENT_PENDING;
	}

	queen_spi_connect();

	/*
	 * Steady state: every partition's id is cached, one pre-lock by primary
	 * key.  Its one-time filter either locks every row or none, so a bundle
	 * that comes back empty holds no lock of that statement and the name
	 * path below may still provision before locking, as it always does.
	 */
	idents = palloc(sizeof(char *) * nsegs);
	ident_lens = palloc(sizeof(Size) * nsegs);
	keys = palloc(sizeof(QueenPidKey) * nsegs);
	pids = palloc(sizeof(Datum) * nsegs);
	all_cached = true;
	for (i = 0; i < nsegs; i++)
	{
		pg_uuid_t  *pid = palloc(sizeof(pg_uuid_t));

		idents[i] = queen_pid_ident(&segs[i], &ident_lens[i]);
		queen_pid_key(idents[i], ident_lens[i], &keys[i]);
		if (all_cached && queen_pid_cache_get(idents[i], ident_lens[i], &keys[i], pid))
			pids[i] = UUIDPGetDatum(pid);
		else
			all_cached = false;
	}
	/*
	 * Every partition already written by this transaction, its row locked
	 * and its state known: no statement touches the rows at all.
	 */
	if (all_cached)
	{
		targets = palloc(sizeof(QueenTarget) * nsegs);
		ordered = palloc(sizeof(QueenTarget *) * nsegs);
		for (i = 0; i < nsegs; i++)
		{
			if (!queen_own_target(&targets[i], &segs[i], DatumGetUUIDP(pids[i])))
				break;
			ordered[i] = &targets[i];
		}
		if (i == nsegs)
		{
			qsort(ordered, nsegs, sizeof(QueenTarget *), queen_target_pid_cmp);
			for (i = 1; i < nsegs; i++)
				if (queen_uuid_cmp(&ordered[i - 1]->pid, &ordered[i]->pid) == 0)
					queen_same_partition_twice(ordered[i]->seg);
			queen_allocate_locked(ordered, nsegs, GetCurrentTimestamp(), out_cxt, true);
			queen_check_verdicts(segs, nsegs);
			SPI_finish();
			return;
		}
	}

	/* the statements below read and update rows this transaction may be ahead of */
	queen_alloc_flush_connected();

	if (all_cached && nsegs == 1)
	{
		queen_exec(PLAN_LOCK_ONE, &pids[0], SPI_OK_SELECT);
		by_id = SPI_processed == 1;
		if (!by_id)
			SPI_freetuptable(SPI_tuptable);	/* a stale id: nothing locked */
	}
	else if (all_cached)
	{
		Datum		idarray = queen_array_datum(pids, nsegs, UUIDOID);

		queen_exec(PLAN_PRELOCK_IDS, &idarray, SPI_OK_SELECT);
		by_id = SPI_processed == (uint64) nsegs;
		if (!by_id)
		{
			/*
			 * A stale id (none locked), or a row deleted between the
			 * filter and the lock (some locked): the name path resolves
			 * and, if needed, creates them again.
			 */
			if (SPI_processed > 0)
				for (i = 0; i < nsegs; i++)
					queen_pid_cache_forget(&keys[i]);
			SPI_freetuptable(SPI_tuptable);
		}
	}

	if (!by_id)
	{
		Datum	   *qnames = palloc(sizeof(Datum) * nsegs);
		Datum	   *pnames = palloc(sizeof(Datum) * nsegs);
		Datum	   *tenants = palloc(sizeof(Datum) * nsegs);
		Datum		values[NAME_ARGS];
		int			attempt;

		for (i = 0; i < nsegs; i++)
		{
			qnames[i] = CStringGetTextDatum(segs[i].queue);
			pnames[i] = CStringGetTextDatum(segs[i].partition);
			tenants[i] = UUIDPGetDatum(&segs[i].tenant);
		}
		values[0] = queen_array_datum(qnames, nsegs, TEXTOID);
		values[1] = queen_array_datum(pnames, nsegs, TEXTOID);
		values[2] = queen_array_datum(tenants, nsegs, UUIDOID);

		/* Provisioning skip: one index probe per segment when all exist. */
		queen_exec(PLAN_COUNT_MISSING, values, SPI_OK_SELECT);
		if (queen_get_int32(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1) > 0)
		{
			queen_exec(PLAN_PROVISION_QUEUES, values, SPI_OK_INSERT);
			queen_exec(PLAN_PROVISION_PARTITIONS, values, SPI_OK_INSERT);
		}

		for (attempt = 1;; attempt++)
		{
			queen_exec(PLAN_PRELOCK, values, SPI_OK_SELECT);
			if (SPI_processed == (uint64) nsegs || attempt == 3)
				break;

			/*
			 * A queue or partition was deleted while we waited for its row
			 * lock (queue deletion locks the same rows first).  Create it
			 * again, as a push to a deleted queue does.  We now hold some
			 * locks while inserting, but only rows of our own: what we
			 * insert stays invisible to every other transaction until we
			 * commit, so locking it after the others cannot close a cycle
			 * with anyone who follows the ascending-id order.
			 */
			SPI_freetuptable(SPI_tuptable);
			queen_exec(PLAN_PROVISION_QUEUES, values, SPI_OK_INSERT);
			queen_exec(PLAN_PROVISION_PARTITIONS, values, SPI_OK_INSERT);
		}
		if (SPI_processed != (uint64) nsegs)
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("resolved %llu of %d segments to partitions",
							(unsigned long long) SPI_processed, nsegs),
					 errdetail("Every segment must name a queue and partition that exist or can be created.")));
	}

	/* The statement already returned rows in ascending partition id. */
	targets = palloc(sizeof(QueenTarget) * nsegs);
	ordered = palloc(sizeof(QueenTarget *) * nsegs);
	resolved = palloc0(sizeof(bool) * nsegs);
	for (r = 0; r < SPI_processed; r++)
	{
		HeapTuple	tuple = SPI_tuptable->vals[r];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		int32		ord = queen_get_int32(tuple, desc, 1);
		QueenTarget *t = &targets[r];

		if (ord < 1 || ord > nsegs || resolved[ord - 1])
			elog(ERROR, "queen: pre-lock returned segment %d twice or out of range", ord);
		resolved[ord - 1] = true;
		t->seg = &segs[ord - 1];
		queen_get_uuid(tuple, desc, 2, &t->pid);
		t->queue_window = queen_get_int32(tuple, desc, 3);
		t->window = t->seg->window_set ? t->seg->window_in : t->queue_window;
		t->last_offset = queen_get_int64(tuple, desc, 4);
		t->txns_start = queen_get_int64(tuple, desc, 5);
		t->generation = queen_get_timestamptz(tuple, desc, 6);
		ordered[r] = t;
		if (!by_id)
			queen_pid_cache_put(idents[ord - 1], ident_lens[ord - 1],
								&keys[ord - 1], &t->pid);

		if (r > 0 && queen_uuid_cmp(&ordered[r - 1]->pid, &t->pid) == 0)
			queen_same_partition_twice(t->seg);
	}
	SPI_freetuptable(SPI_tuptable);

	/* One stamp for the bundle, after every lock is held. */
	now = GetCurrentTimestamp();

	queen_allocate_locked(ordered, nsegs, now, out_cxt, false);

	queen_check_verdicts(segs, nsegs);
	SPI_finish();
}

/*
 * A caller's partition id must be the partition its names name: otherwise
 * the push would land in another queue than the one the verdict reports.
 * The id cache answers in the steady state; a miss reads the names once.
 */
static void
queen_check_resolved(const QueenSegment *seg, const pg_uuid_t *pid)
{
	Size		len;
	char	   *ident = queen_pid_ident(seg, &len);
	QueenPidKey key;
	pg_uuid_t	cached;
	Datum		value = UUIDPGetDatum(pid);
	HeapTuple	tuple;
	TupleDesc	desc;
	pg_uuid_t	tenant;
	char	   *qname;
	char	   *pname;

	queen_pid_key(ident, len, &key);
	if (queen_pid_cache_get(ident, len, &key, &cached) &&
		memcmp(cached.data, pid->data, UUID_LEN) == 0)
		return;
	queen_exec(PLAN_PID_NAMES, &value, SPI_OK_SELECT);
	if (SPI_processed != 1)
		queen_partition_missing(pid);
	tuple = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	queen_get_uuid(tuple, desc, 1, &tenant);
	qname = SPI_getvalue(tuple, desc, 2);
	pname = SPI_getvalue(tuple, desc, 3);
	if (memcmp(tenant.data, seg->tenant.data, UUID_LEN) != 0 ||
		strcmp(qname, seg->queue) != 0 || strcmp(pname, seg->partition) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("p_pid is partition \"%s\" of queue \"%s\", not partition \"%s\" of queue \"%s\"",
						pname, qname, seg->partition, seg->queue),
				 memcmp(tenant.data, seg->tenant.data, UUID_LEN) != 0 ?
				 errdetail("The partition belongs to another tenant.") : 0,
				 errhint("Pass the id the names resolve to, or NULL to resolve them.")));
	SPI_freetuptable(SPI_tuptable);
	queen_pid_cache_put(ident, len, &key, pid);
}

/*
 * Push one segment whose partition id is already known, as log_push_one_v1
 * does when its caller resolved it.  With the window given as 0 the
 * allocator UPDATE alone takes the row lock (Queen's fast path); otherwise
 * the row is locked first, which also reads the queue's window.
 */
void
queen_push_one_resolved(QueenSegment *seg, const pg_uuid_t *pid)
{
	MemoryContext out_cxt = CurrentMemoryContext;
	QueenTarget target;
	QueenTarget *tp = &target;
	Datum		value = UUIDPGetDatum(pid);

	queen_validate_segment(seg, 1);
	seg->status = QUEEN_SEGMENT_PENDING;
	seg->ndups = 0;
	seg->dups = NULL;

	queen_spi_connect();
	queen_check_resolved(seg, pid);

	if (queen_own_target(&target, seg, pid))
	{
		seg->partition_id = *pid;
		queen_allocate_locked(&tp, 1, GetCurrentTimestamp(), out_cxt, true);
		SPI_finish();
		return;
	}
	queen_alloc_flush_connected();

	target.seg = seg;
	target.pid = *pid;
	target.queue_window = 0;
	if (seg->window_set && seg->window_in == 0)
	{
		target.window = 0;
		target.last_offset = -1;
		target.txns_start = 0;
		target.generation = 0;
		seg->partition_id = *pid;
		seg->window = 0;
		queen_write(&tp, 1, 0, true);
	}
	else
	{
		HeapTuple	tuple;
		TupleDesc	desc;

		queen_exec(PLAN_LOCK_ONE, &value, SPI_OK_SELECT);
		if (SPI_processed != 1)
			queen_partition_missing(pid);
		tuple = SPI_tuptable->vals[0];
		desc = SPI_tuptable->tupdesc;
		target.last_offset = queen_get_int64(tuple, desc, 4);
		target.txns_start = queen_get_int64(tuple, desc, 5);
		target.queue_window = queen_get_int32(tuple, desc, 3);
		target.window = seg->window_set ? seg->window_in : target.queue_window;
		target.generation = queen_get_timestamptz(tuple, desc, 6);
		SPI_freetuptable(SPI_tuptable);
		queen_allocate_locked(&tp, 1, GetCurrentTimestamp(), out_cxt, false);
	}

	SPI_finish();
}

/*
 * Fetch the segment covering offset of partition pid.  Returns false when
 * no segment covers it (retained away, a gap, or past the tail).  The blob
 * is copied into the caller's memory context.
 */
bool
queen_segment_at(const pg_uuid_t *pid, int64 offset, QueenStoredSegment *out)
{
	MemoryContext out_cxt = CurrentMemoryContext;
	Datum		values[2];
	bool		found = false;

	queen_spi_connect();
	values[0] = UUIDPGetDatum(pid);
	values[1] = Int64GetDatum(offset);
	/* A fresh snapshot: the original may have been committed after our caller's began. */
	if (SPI_execute_plan(queen_plan(PLAN_SEGMENT_AT), values, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "queen: covering-segment lookup failed");
	if (SPI_processed == 1)
	{
		HeapTuple	tuple = SPI_tuptable->vals[0];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		Datum		blob;
		MemoryContext old;

		out->base_offset = queen_get_int64(tuple, desc, 1);
		out->end_offset = queen_get_int64(tuple, desc, 2);
		out->created_at = DatumGetTimestampTz(SPI_getbinval(tuple, desc, 3, &isnull));
		blob = SPI_getbinval(tuple, desc, 4, &isnull);
		old = MemoryContextSwitchTo(out_cxt);
		out->blob = DatumGetByteaPCopy(blob);
		MemoryContextSwitchTo(old);
		found = true;
	}
	SPI_finish();
	return found;
}

/* Originals this process could not read (damaged segments), for the metric. */
uint64		queen_damaged_originals = 0;

/*
 * The message id of the frame at offset of partition pid, and its segment's
 * created_at.  False when the covering segment is gone; an ERROR when it is
 * there but damaged, since a stored segment that cannot be read is not a
 * condition to paper over.
 */
bool
queen_resolve_message(const pg_uuid_t *pid, int64 offset,
					  pg_uuid_t *message_id, TimestampTz *created_at)
{
	QueenStoredSegment stored;
	StringInfoData raw;
	QueenFrame	frame;
	const char *problem;
	size_t		pos = 0;
	int64		o;

	if (!queen_segment_at(pid, offset, &stored))
		return false;

	initStringInfo(&raw);
	problem = queen_decompress(VARDATA_ANY(stored.blob),
							   VARSIZE_ANY_EXHDR(stored.blob), &raw);
	for (o = stored.base_offset; problem == NULL && o <= offset; o++)
		problem = queen_frame_decode(raw.data, raw.len, &pos, &frame);
	if (problem != NULL)
	{
		/*
		 * One damaged segment must not fail the push that merely names it
		 * as an original (and every partition sharing that transaction):
		 * the duplicate is reported with the zero id, as for an original
		 * retained away, and the damage is said loudly.
		 */
		char		pidtext[UUID_LEN * 2 + 5];

		queen_uuid_format(pid, pidtext);
		ereport(WARNING,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("queen: the segment at offset " INT64_FORMAT " of partition %s cannot be read: %s",
						stored.base_offset, pidtext, problem),
				 errdetail("A duplicate of offset " INT64_FORMAT " is reported with the zero message id.",
						   offset)));
		queen_damaged_originals++;
		return false;
	}

	*message_id = frame.message_id;
	if (created_at)
		*created_at = stored.created_at;
	pfree(raw.data);
	pfree(stored.blob);
	return true;
}
