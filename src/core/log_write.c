/*-------------------------------------------------------------------------
 *
 * log_write.c
 *	  The write path of the log (the allocator): the one place where offsets
 *	  are assigned, segments are written and duplicates are detected.
 *
 * Everything that pushes (log_push_one_v1, log_push_multi_v1, queen.push,
 * the broker's shards) ends up in queen_push_bundle() or
 * queen_push_one_resolved().  The steps (docs/ARCHITECTURE.md, "The
 * allocator"):
 *
 *	1. validate every segment (names, msg_count, 16-byte stride, blob);
 *	2. when every partition's id is cached in this process, the pre-lock
 *	   from C by primary key (log_lock.c), which finds every row before it
 *	   locks any (and then 3 is done);
 *	   otherwise one existence count and, only when something is missing,
 *	   the two provisioning INSERTs, each ordered on its unique key;
 *	3. one set-based pre-lock of every partition row, ascending id;
 *	4. one bundle timestamp, taken after the locks;
 *	5. per segment in ascending partition id order: the dedup probe under the
 *	   row lock when the queue's window is > 0; a duplicate writes nothing;
 *	6. the allocator's update of every partition row that survived, made
 *	   from C (queen_update_partitions; one set-based statement where a
 *	   trigger or row security must see it), then their segment and hash
 *	   rows inserted from C (as COPY does: constraints and index entries,
 *	   no statement per row);
 *	7. completeness: every segment gets exactly one verdict or all raise.
 *
 * Locking rules: partition rows are locked only in ascending id order, and
 * only here.  Because the probe runs while the row lock is held, nobody can
 * commit into the probed range before our allocation, so a clean probe is
 * final.  created_at is stamped after the locks are taken, which makes it
 * monotone per partition in commit order.
 *
 * The steps live in files of their own, private to the write path
 * (log_write_int.h): the pre-lock by id (log_lock.c), the dedup probe
 * (dedup_probe.c), the row inserts (log_rows.c), the offsets of partitions
 * this transaction already holds (log_deferred.c); the partition id cache
 * is pid_cache.c.  This file resolves and locks the partitions and drives
 * the steps in order.
 *
 * Statements are prepared once per process and kept (SPI_keepplan); the
 * plan cache replans them by itself if the tables are recreated.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "queen.h"
#include "validate.h"
#include "codec.h"
#include "dedup_cache.h"
#include "log_write_int.h"
#include "pid_cache.h"
#include "spi.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"

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

/*
 * LockRows sits above the Sort, so rows are locked in ORDER BY order.  The
 * lock is NO KEY UPDATE, the one the allocator's UPDATE takes anyway: it
 * serializes pushes and excludes a deletion, but leaves alone the KEY SHARE
 * that inserting a consumer row takes on its partition (the foreign key),
 * so a pop's first contact and a push never wait for each other.
 */
static const char *const sql_prelock =
"SELECT u.ord::int4, p.id, q.dedup_window_seconds, p.last_offset, p.txns_start, p.created_at, p.ctid,"
"       q.encryption_enabled"
"  FROM unnest($1::text[], $2::text[], $3::uuid[])"
"       WITH ORDINALITY AS u(qname, pname, tenant, ord)"
"  JOIN queen.queues q ON q.tenant_id = u.tenant AND q.name = u.qname"
"  JOIN queen.log_partitions p ON p.queue_id = q.id AND p.name = u.pname"
" ORDER BY p.id"
"   FOR NO KEY UPDATE OF p";

/*
 * One row by id, with the pre-lock's columns: log_push_one_v1's lock where
 * row-level security applies to the tables, which the lock from C
 * (log_lock.c) leaves to a statement.
 */
static const char *const sql_lock_one =
"SELECT 1::int4, p.id, q.dedup_window_seconds, p.last_offset, p.txns_start, p.created_at, p.ctid,"
"       q.encryption_enabled"
"  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id"
" WHERE p.id = $1"
"   FOR NO KEY UPDATE OF p";

/*
 * The allocator as a statement.  Pre-locked rows are updated from C the
 * same way (queen_update_partitions in log_rows.c, which must stay in step
 * with this); the statement serves a push without a pre-lock, and a table
 * with a user trigger or row-level security.  last_write_at is indexed, so
 * it is rewritten at most once in 10 seconds to keep the update HOT (the
 * wildcard claim reads it with two minutes of slack); the oldest_* columns
 * only change on the empty -> non-empty transition for the same reason.
 * clock_timestamp() in
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
"       last_write_at = CASE WHEN clock_timestamp() - p.last_write_at > " QUEEN_LAST_WRITE_QUANTUM_SQL
"                            THEN clock_timestamp() ELSE p.last_write_at END"
"  FROM unnest($1::uuid[], $2::int8[]) AS u(pid, n)"
" WHERE p.id = u.pid"
" RETURNING p.id, p.last_offset - u.n + 1, COALESCE($3, clock_timestamp())";

/* What a partition id names, to hold a caller's p_pid to its names. */
static const char *const sql_pid_names =
"SELECT q.tenant_id, q.name, p.name"
"  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id"
" WHERE p.id = $1";

typedef enum QueenPlanId
{
	PLAN_COUNT_MISSING,
	PLAN_PROVISION_QUEUES,
	PLAN_PROVISION_PARTITIONS,
	PLAN_PRELOCK,
	PLAN_LOCK_ONE,
	PLAN_WRITE,
	PLAN_PID_NAMES,
	PLAN_COUNT
} QueenPlanId;

/* A statement of this file: its text, its arguments, what an error calls it. */
typedef struct QueenStatement
{
	const char *const *sql;
	int			nargs;
	Oid			argtypes[NAME_ARGS];
	const char *what;
} QueenStatement;

static const QueenStatement queen_statements[PLAN_COUNT] =
{
	[PLAN_COUNT_MISSING] = {&sql_count_missing, NAME_ARGS,
	{TEXTARRAYOID, TEXTARRAYOID, UUIDARRAYOID}, "existence count"},
	[PLAN_PROVISION_QUEUES] = {&sql_provision_queues, NAME_ARGS,
	{TEXTARRAYOID, TEXTARRAYOID, UUIDARRAYOID}, "queue provisioning"},
	[PLAN_PROVISION_PARTITIONS] = {&sql_provision_partitions, NAME_ARGS,
	{TEXTARRAYOID, TEXTARRAYOID, UUIDARRAYOID}, "partition provisioning"},
	[PLAN_PRELOCK] = {&sql_prelock, NAME_ARGS,
	{TEXTARRAYOID, TEXTARRAYOID, UUIDARRAYOID}, "pre-lock"},
	[PLAN_LOCK_ONE] = {&sql_lock_one, 1, {UUIDOID}, "lock of one partition"},
	[PLAN_WRITE] = {&sql_write, 3, {UUIDARRAYOID, INT8ARRAYOID, TIMESTAMPTZOID},
	"allocator statement"},
	[PLAN_PID_NAMES] = {&sql_pid_names, 1, {UUIDOID}, "partition name lookup"},
};

static SPIPlanPtr queen_plans[PLAN_COUNT];

/* Must be called between SPI_connect and SPI_finish. */
static SPIPlanPtr
queen_plan(QueenPlanId id)
{
	const QueenStatement *st = &queen_statements[id];

	return queen_plan_once(&queen_plans[id], *st->sql, st->nargs,
						   (Oid *) st->argtypes, false);
}

static void
queen_run(QueenPlanId id, Datum *values, int expected)
{
	queen_exec(queen_plan(id), values, expected, queen_statements[id].what);
}

/* ----------------------------------------------------------------
 *		Helpers
 * ----------------------------------------------------------------
 */

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
 *		Validation
 * ----------------------------------------------------------------
 */

/* Refuse what no reader could give back; note whether raw frames are sealed. */
static void
queen_validate_segment(QueenSegment *seg, int ordinal)
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
		bool		all_sealed;
		const char *problem = queen_segment_problem(VARDATA_ANY(seg->blob),
													VARSIZE_ANY_EXHDR(seg->blob),
													(const uint8 *) VARDATA_ANY(seg->hashes),
													seg->msg_count, &sqlstate, &all_sealed);

		if (problem != NULL)
			ereport(ERROR,
					(errcode(sqlstate),
					 errmsg("segment %d is not one queen can store: %s", ordinal, problem),
					 errdetail("A segment is the zstd of exactly msg_count frames (docs/FORMAT.md), with the XXH3-128 of each frame's transactionId in p_hashes; queen.pack_frames() and queen.hash_blob() build them.")));

		/*
		 * A caller's plaintext must not land in an encrypted queue: a frame
		 * not sealed makes the allocator refuse it there (RESEAL), while
		 * sealed frames are readable in any queue.
		 */
		seg->seal = all_sealed ? QUEEN_SEAL_ANY : QUEEN_SEAL_PLAIN;
	}

	if (seg->window_set && seg->window_in < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("dedup window of segment %d is %d seconds", ordinal,
						seg->window_in),
				 errdetail("A dedup window is 0 (off) or a number of seconds.")));
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
 * The allocator UPDATE statement for targets (ascending id) the update from
 * C left: offsets and created_at into each segment.  With
 * stamp_after_update the rows are not pre-locked and created_at is the
 * clock read once the statement holds the lock; otherwise it is now.
 */
static void
queen_write_statement(QueenTarget **targets, int n, TimestampTz now,
					  bool stamp_after_update)
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
	}
	SPI_freetuptable(SPI_tuptable);
}

/*
 * Allocate offsets for targets (distinct partitions, ascending id) and write
 * their segment and hash rows.  With stamp_after_update the rows are not
 * pre-locked and created_at is the clock read once the allocator holds the
 * lock; otherwise every segment gets now.
 */
static void
queen_write(QueenTarget **targets, int n, TimestampTz now, bool stamp_after_update)
{
	QueenTarget **rest = palloc(sizeof(QueenTarget *) * n);
	int			nrest = 0;
	int			i;

	for (i = 0; i < n; i++)
		targets[i]->seg->status = QUEEN_SEGMENT_PENDING;
	/* pre-locked rows are updated from C; what that leaves, by the statement */
	if (!stamp_after_update)
		queen_update_partitions(targets, n, now);
	for (i = 0; i < n; i++)
		if (targets[i]->seg->status == QUEEN_SEGMENT_PENDING)
			rest[nrest++] = targets[i];
	if (nrest > 0)
		queen_write_statement(rest, nrest, now, stamp_after_update);
	pfree(rest);

	for (i = 0; i < n; i++)
	{
		QueenSegment *seg = targets[i]->seg;

		/*
		 * Completeness: a partition that did not come back was deleted under
		 * us (only possible without a pre-lock); the whole push fails rather
		 * than report a verdict for it.
		 */
		if (seg->status != QUEEN_SEGMENT_QUEUED)
			queen_partition_missing(&targets[i]->pid);
		/* whatever the window: a later probe in this transaction must know */
		queen_dedup_cache_remember(&targets[i]->pid, seg->base_offset, seg->msg_count,
								   seg->created_at, (const uint8 *) VARDATA_ANY(seg->hashes));
		queen_own_locked(targets[i], !stamp_after_update);
	}

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
		seg->queue_encrypted = t->queue_encrypted;

		/*
		 * Frames sealed or not as the queue now says, or nothing written:
		 * the bundle engine seals or opens them and comes again.  Read
		 * under the row lock's snapshot, so a configure that committed
		 * before it is obeyed.
		 */
		if (seg->seal != QUEEN_SEAL_ANY &&
			(seg->seal == QUEEN_SEAL_SEALED) != t->queue_encrypted)
		{
			seg->status = QUEEN_SEGMENT_RESEAL;
			continue;
		}
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
			segs[i].status != QUEEN_SEGMENT_DUPLICATE &&
			segs[i].status != QUEEN_SEGMENT_RESEAL)
			elog(ERROR, "queen: segment %d got no verdict", i + 1);
}

/* What the id cache knows of a bundle's partitions. */
typedef struct QueenBundleIds
{
	char	  **idents;
	Size	   *ident_lens;
	QueenPidKey *keys;
	Datum	   *pids;			/* valid when all_cached */
	bool		all_cached;
} QueenBundleIds;

static void
queen_bundle_ids(const QueenSegment *segs, int nsegs, QueenBundleIds *ids)
{
	int			i;

	ids->idents = palloc(sizeof(char *) * nsegs);
	ids->ident_lens = palloc(sizeof(Size) * nsegs);
	ids->keys = palloc(sizeof(QueenPidKey) * nsegs);
	ids->pids = palloc(sizeof(Datum) * nsegs);
	ids->all_cached = true;
	for (i = 0; i < nsegs; i++)
	{
		pg_uuid_t  *pid = palloc(sizeof(pg_uuid_t));

		ids->idents[i] = queen_pid_ident(&segs[i], &ids->ident_lens[i]);
		queen_pid_key(ids->idents[i], ids->ident_lens[i], &ids->keys[i]);
		if (ids->all_cached &&
			queen_pid_cache_get(ids->idents[i], ids->ident_lens[i], &ids->keys[i], pid))
			ids->pids[i] = UUIDPGetDatum(pid);
		else
			ids->all_cached = false;
	}
}

/*
 * Every partition already written by this transaction, its row locked
 * and its state known: no statement touches the rows at all.  False when
 * some partition is not so; then nothing was done.
 */
static bool
queen_bundle_own(QueenSegment *segs, int nsegs, const Datum *pids, MemoryContext out_cxt)
{
	QueenTarget *targets = palloc(sizeof(QueenTarget) * nsegs);
	QueenTarget **ordered = palloc(sizeof(QueenTarget *) * nsegs);
	int			i;

	for (i = 0; i < nsegs; i++)
	{
		if (!queen_own_target(&targets[i], &segs[i], DatumGetUUIDP(pids[i])))
			return false;
		ordered[i] = &targets[i];
	}
	qsort(ordered, nsegs, sizeof(QueenTarget *), queen_target_pid_cmp);
	for (i = 1; i < nsegs; i++)
		if (queen_uuid_cmp(&ordered[i - 1]->pid, &ordered[i]->pid) == 0)
			queen_same_partition_twice(ordered[i]->seg);
	queen_allocate_locked(ordered, nsegs, GetCurrentTimestamp(), out_cxt, true);
	return true;
}

/*
 * The pre-lock of a bundle whose ids are all cached, from C (log_lock.c):
 * its targets in ascending partition id, every row locked; or NULL when the
 * name path must resolve them (a stale id, the same id twice, row-level
 * security).  A row deleted while the others were locked leaves those
 * locked, and the ids that led there are forgotten.
 */
static QueenTarget **
queen_prelock_by_id(QueenSegment *segs, int nsegs, const QueenBundleIds *ids)
{
	QueenTarget *targets = palloc(sizeof(QueenTarget) * nsegs);
	QueenTarget **ordered = palloc(sizeof(QueenTarget *) * nsegs);
	int			i;

	for (i = 0; i < nsegs; i++)
	{
		targets[i].seg = &segs[i];
		targets[i].pid = *DatumGetUUIDP(ids->pids[i]);
		targets[i].tid_valid = false;
		ordered[i] = &targets[i];
	}
	qsort(ordered, nsegs, sizeof(QueenTarget *), queen_target_pid_cmp);
	for (i = 1; i < nsegs; i++)
		if (queen_uuid_cmp(&ordered[i - 1]->pid, &ordered[i]->pid) == 0)
			return NULL;		/* the name path names the segment */

	switch (queen_lock_partitions(ordered, nsegs))
	{
		case QUEEN_LOCK_ALL:
			return ordered;
		case QUEEN_LOCK_SOME:
			for (i = 0; i < nsegs; i++)
				queen_pid_cache_forget(&ids->keys[i]);
			break;
		case QUEEN_LOCK_NONE:
		case QUEEN_LOCK_STATEMENT:
			break;
	}
	return NULL;
}

/*
 * The name path: provision what is missing, then pre-lock every row by
 * name.  Its rows are left in SPI_tuptable.
 */
static void
queen_prelock_by_name(const QueenSegment *segs, int nsegs)
{
	Datum	   *qnames = palloc(sizeof(Datum) * nsegs);
	Datum	   *pnames = palloc(sizeof(Datum) * nsegs);
	Datum	   *tenants = palloc(sizeof(Datum) * nsegs);
	Datum		values[NAME_ARGS];
	int			attempt;
	int			i;

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
	queen_run(PLAN_COUNT_MISSING, values, SPI_OK_SELECT);
	if (queen_get_int32(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1) > 0)
	{
		queen_run(PLAN_PROVISION_QUEUES, values, SPI_OK_INSERT);
		queen_run(PLAN_PROVISION_PARTITIONS, values, SPI_OK_INSERT);
	}

	for (attempt = 1;; attempt++)
	{
		queen_run(PLAN_PRELOCK, values, SPI_OK_SELECT);
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
		queen_run(PLAN_PROVISION_QUEUES, values, SPI_OK_INSERT);
		queen_run(PLAN_PROVISION_PARTITIONS, values, SPI_OK_INSERT);
	}
	if (SPI_processed != (uint64) nsegs)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("resolved %llu of %d segments to partitions",
						(unsigned long long) SPI_processed, nsegs),
				 errdetail("Every segment must name a queue and partition that exist or can be created.")));
}

/*
 * The targets of the name pre-lock's rows (in SPI_tuptable, ascending
 * partition id), which it frees; they refresh the id cache.
 */
static QueenTarget **
queen_prelocked_targets(QueenSegment *segs, int nsegs, const QueenBundleIds *ids)
{
	QueenTarget *targets = palloc(sizeof(QueenTarget) * nsegs);
	QueenTarget **ordered = palloc(sizeof(QueenTarget *) * nsegs);
	bool	   *resolved = palloc0(sizeof(bool) * nsegs);
	uint64		r;

	/* The statement already returned rows in ascending partition id. */
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
		queen_target_from_row(t, tuple, desc);
		ordered[r] = t;
		queen_pid_cache_put(ids->idents[ord - 1], ids->ident_lens[ord - 1],
							&ids->keys[ord - 1], &t->pid);

		if (r > 0 && queen_uuid_cmp(&ordered[r - 1]->pid, &t->pid) == 0)
			queen_same_partition_twice(t->seg);
	}
	SPI_freetuptable(SPI_tuptable);
	return ordered;
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
	QueenBundleIds ids;
	QueenTarget **ordered = NULL;
	TimestampTz now;
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
	queen_bundle_ids(segs, nsegs, &ids);
	if (ids.all_cached && queen_bundle_own(segs, nsegs, ids.pids, out_cxt))
	{
		queen_check_verdicts(segs, nsegs);
		SPI_finish();
		return;
	}

	/* the statements below read and update rows this transaction may be ahead of */
	queen_alloc_flush_connected();

	if (ids.all_cached)
		ordered = queen_prelock_by_id(segs, nsegs, &ids);
	if (ordered == NULL)
	{
		queen_prelock_by_name(segs, nsegs);
		ordered = queen_prelocked_targets(segs, nsegs, &ids);
	}

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
	queen_run(PLAN_PID_NAMES, &value, SPI_OK_SELECT);
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

/* Lock t's row by the statement, which honours row-level security. */
static void
queen_lock_one_statement(QueenTarget *t)
{
	Datum		value = UUIDPGetDatum(&t->pid);

	queen_run(PLAN_LOCK_ONE, &value, SPI_OK_SELECT);
	if (SPI_processed != 1)
		queen_partition_missing(&t->pid);
	queen_target_from_row(t, SPI_tuptable->vals[0], SPI_tuptable->tupdesc);
	SPI_freetuptable(SPI_tuptable);
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
	target.tid_valid = false;
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
		switch (queen_lock_partitions(&tp, 1))
		{
			case QUEEN_LOCK_ALL:
				break;
			case QUEEN_LOCK_STATEMENT:
				queen_lock_one_statement(&target);
				break;
			case QUEEN_LOCK_NONE:
			case QUEEN_LOCK_SOME:
				queen_partition_missing(pid);
		}
		queen_allocate_locked(&tp, 1, GetCurrentTimestamp(), out_cxt, false);
	}

	SPI_finish();
}

