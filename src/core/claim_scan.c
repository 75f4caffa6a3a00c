/*-------------------------------------------------------------------------
 *
 * claim_scan.c
 *	  Which partitions a pop tries: the wildcard over one
 *	  queue, the namespace/task route over every matching queue, the scan
 *	  floor that keeps idle partitions out of both, and a consumer group's
 *	  first contact with a queue (its remembered subscription and the seed
 *	  of its cursors).
 *
 * Candidates are the partitions with something pending for the group and
 * no live lease, in random order, so concurrent consumers of one group
 * spread over different partitions instead of queueing on the same rows.
 * A process keeps what one such query drew and hands it out over its next
 * pops (QueenCandidates below), so a busy queue is not read whole per pop.
 * A queue's idle partitions are kept out of that query by a floor per
 * (queue, group) in queen.consumer_watermarks: every partition last written
 * before it had nothing pending and no lease for the group when the floor
 * was computed, and a partition only becomes pending again by a write (a
 * nack or a lease expiry needs a lease, and leased partitions hold the
 * floor down), which stamps its last_write_at at its own time or up to a
 * quantum earlier, not before the floor's computation.  So a pop reads the
 * partitions written since, with a slack (idx_log_partitions_queue_write),
 * not the queue.  The floor is recomputed at most every 30 seconds per
 * group, by one pop at a time (a try-advisory lock), from the partitions
 * stamped since the floor it replaces, and never later than the write
 * horizon (write_horizon.c): a push whose transaction commits long after
 * it wrote holds the floor below its stamp until it commits, so neither
 * the pops nor the next recompute miss it.
 *
 * First contact never waits: the subscription row is inserted under a
 * try-advisory lock per (queue, group), and the transaction that created
 * it seeds every partition's cursor in one statement; a partition seen
 * later gets its cursor from the remembered subscription under a
 * try-advisory lock per (partition, group).  Both skip partition rows a
 * push holds (FOR KEY SHARE SKIP LOCKED) rather than wait for it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "admin.h"
#include "claim_int.h"
#include "log_write.h"
#include "spi.h"

#include "catalog/pg_type.h"
#include "utils/backend_status.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/memutils.h"

/* How often a group's floor is recomputed, and the slack it is used with. */
#define QUEEN_FLOOR_RECHECK_USECS	(30 * USECS_PER_SEC)
#define QUEEN_FLOOR_SLACK_USECS		(120 * USECS_PER_SEC)

/*
 * Where a missing cursor starts, for partition p and subscription moment
 * $3: everything retained (-infinity), else just before the first segment
 * created at or after $3.  Created_at is monotone per partition, so when
 * the newest segment is older (a "new" group at its first contact, always)
 * that is the tail, found by one backward step instead of a walk.
 */
#define QUEEN_SEED_EXPR \
	"CASE WHEN $3 = '-infinity'::timestamptz THEN GREATEST(p.log_start - 1, -1)" \
	"     WHEN COALESCE((SELECT n.created_at FROM queen.log_segments n" \
	"                     WHERE n.partition_id = p.id ORDER BY n.base_offset DESC LIMIT 1)," \
	"                   '-infinity') < $3 THEN p.last_offset" \
	"     ELSE COALESCE((SELECT s.base_offset - 1 FROM queen.log_segments s" \
	"                     WHERE s.partition_id = p.id AND s.base_offset >= p.log_start" \
	"                       AND s.created_at >= $3 ORDER BY s.base_offset LIMIT 1)," \
	"                   p.last_offset) END"

/* Pending for group $2: something retained past its cursor (or no cursor yet). */
#define QUEEN_PENDING_EXPR \
	"CASE WHEN c.partition_id IS NULL THEN p.last_offset >= p.log_start" \
	"     ELSE p.last_offset > c.committed END"

typedef enum QueenScanPlanId
{
	SCAN_SUBSCRIPTION,
	SCAN_REGISTER,
	SCAN_SEED_QUEUE,
	SCAN_SEED_PARTITION,
	SCAN_QUEUE_UPSERT,
	SCAN_FLOOR,
	SCAN_FLOOR_LOCK,
	SCAN_FLOOR_RECOMPUTE,
	SCAN_FLOOR_COMPUTE,
	SCAN_CANDIDATES,
	SCAN_DISCOVER,
	SCAN_NPLANS
} QueenScanPlanId;

static const QueenClaimStatement queen_scan_statements[SCAN_NPLANS] =
{
	[SCAN_SUBSCRIPTION] = {
		"SELECT subscription_timestamp FROM queen.consumer_groups_metadata"
		" WHERE tenant_id = $1 AND consumer_group = $2 AND queue_id = $3"
		"   AND partition_name = '' AND namespace IS NULL AND task IS NULL",
	3, {UUIDOID, TEXTOID, UUIDOID}},
	/* the creator of the row is the one that seeds: RETURNING says who */
	[SCAN_REGISTER] = {
		"INSERT INTO queen.consumer_groups_metadata"
		"       (tenant_id, consumer_group, queue_id, subscription_mode, subscription_timestamp)"
		" SELECT $1, $2, $3, $4, $5"
		"  WHERE pg_try_advisory_xact_lock(hashtextextended($3::text || '/' || $2, 43))"
		" ON CONFLICT DO NOTHING RETURNING 1",
	5, {UUIDOID, TEXTOID, UUIDOID, TEXTOID, TIMESTAMPTZOID}},
	/* ascending id: ON CONFLICT takes its speculative locks in row order */
	[SCAN_SEED_QUEUE] = {
		"INSERT INTO queen.log_consumers (partition_id, consumer_group, committed)"
		" SELECT p.id, $2, " QUEEN_SEED_EXPR
		"   FROM queen.log_partitions p WHERE p.queue_id = $1"
		"  ORDER BY p.id FOR KEY SHARE OF p SKIP LOCKED"
		" ON CONFLICT DO NOTHING",
	3, {UUIDOID, TEXTOID, TIMESTAMPTZOID}},
	[SCAN_SEED_PARTITION] = {
		"INSERT INTO queen.log_consumers (partition_id, consumer_group, committed)"
		" SELECT p.id, $2, " QUEEN_SEED_EXPR
		"   FROM queen.log_partitions p"
		"  WHERE p.id = $1"
		"    AND pg_try_advisory_xact_lock(hashtextextended(p.id::text || '/' || $2, 42))"
		"    FOR KEY SHARE OF p SKIP LOCKED"
		" ON CONFLICT DO NOTHING",
	3, {UUIDOID, TEXTOID, TIMESTAMPTZOID}},
	/* namespace and task from the dotted name, as a push derives them */
	[SCAN_QUEUE_UPSERT] = {
		"INSERT INTO queen.queues (tenant_id, name, namespace, task)"
		" VALUES ($1, $2, split_part($2, '.', 1), split_part($2, '.', 2))"
		" ON CONFLICT (tenant_id, name) DO NOTHING RETURNING id",
	2, {UUIDOID, TEXTOID}},
	[SCAN_FLOOR] = {
		"SELECT last_empty_scan_at, updated_at FROM queen.consumer_watermarks"
		" WHERE queue_id = $1 AND consumer_group = $2",
	2, {UUIDOID, TEXTOID}},
	[SCAN_FLOOR_LOCK] = {
		"SELECT pg_try_advisory_xact_lock(hashtextextended($1::text || '/' || $2, 44))",
	2, {UUIDOID, TEXTOID}},

	/*
	 * The floor: the oldest last write among partitions stamped at or after
	 * $4 with something pending or a lease (live or expired) for the group;
	 * no later than $5, the write horizon (now if none).  Planned for each
	 * call, so a small queue beside a big one, or the partitions written
	 * since the last floor, are read through the index rather than by a
	 * scan of every partition.
	 */
#define QUEEN_FLOOR_SELECT \
		" SELECT LEAST(COALESCE(min(p.last_write_at), $3), $3, $5)" \
		"   FROM queen.log_partitions p" \
		"   LEFT JOIN queen.log_consumers c ON c.partition_id = p.id AND c.consumer_group = $2" \
		"  WHERE p.queue_id = $1 AND p.last_write_at >= $4" \
		"    AND (" QUEEN_PENDING_EXPR " OR c.batch_end IS NOT NULL)"
	[SCAN_FLOOR_RECOMPUTE] = {
		"INSERT INTO queen.consumer_watermarks AS w"
		"       (queue_id, consumer_group, last_empty_scan_at, updated_at)"
		" SELECT $1, $2, f.floor, $3 FROM (" QUEEN_FLOOR_SELECT ") f(floor)"
		" ON CONFLICT (queue_id, consumer_group) DO UPDATE"
		"   SET last_empty_scan_at = EXCLUDED.last_empty_scan_at, updated_at = EXCLUDED.updated_at"
		" RETURNING w.last_empty_scan_at",
	5, {UUIDOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID}, true},
	/* the same floor for a waiting pop's try, which must not write (wait.c) */
	[SCAN_FLOOR_COMPUTE] = {
		QUEEN_FLOOR_SELECT,
	5, {UUIDOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID}, true},

	/*
	 * Pending partitions written since the floor (the oldest of the
	 * queues'), lease-free first in random order; the earliest live lease
	 * among the pending ones comes along, for when nothing can be claimed
	 * now.  Planned for each call: only with the floor's value can the
	 * planner see that the index on (queue_id, last_write_at) leaves a few
	 * rows of a big queue, or that it does not.
	 */
	[SCAN_CANDIDATES] = {
		"SELECT * FROM ("
		" SELECT p.id, p.name, q.id, q.name, p.last_offset, q.delayed_processing,"
		"        q.window_buffer, q.lease_time,"
		"        COALESCE(c.worker_id IS NOT NULL AND c.lease_expires_at >= $3, false) AS leased,"
		"        min(CASE WHEN c.worker_id IS NOT NULL AND c.lease_expires_at >= $3"
		"                 THEN c.lease_expires_at END) OVER ()"
		"   FROM queen.log_partitions p"
		"   JOIN queen.queues q ON q.id = p.queue_id"
		"   LEFT JOIN queen.log_consumers c ON c.partition_id = p.id AND c.consumer_group = $2"
		"  WHERE p.queue_id = ANY ($1) AND p.last_write_at >= $4 AND " QUEEN_PENDING_EXPR
		") x ORDER BY leased, random() LIMIT $5",
	5, {UUIDARRAYOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT4OID}, true},
	[SCAN_DISCOVER] = {
		"SELECT id FROM queen.queues"
		" WHERE tenant_id = $1 AND ($2::text IS NULL OR namespace = $2)"
		"   AND ($3::text IS NULL OR task = $3)"
		" ORDER BY id",
	3, {UUIDOID, TEXTOID, TEXTOID}},
};

static SPIPlanPtr queen_scan_plans[SCAN_NPLANS];

static uint64
queen_scan_run(QueenScanPlanId id, Datum *values, const char *nulls, int expected)
{
	return queen_claim_exec(&queen_scan_plans[id], &queen_scan_statements[id],
							values, nulls, expected);
}

/* ----------------------------------------------------------------
 *		First contact
 * ----------------------------------------------------------------
 */

/* The subscription the pop asks for, as stored: mode and moment. */
static const char *
queen_sub_intent(const QueenClaim *c, TimestampTz *from)
{
	switch (c->req->sub_mode)
	{
		case QUEEN_SUB_NEW:
			*from = c->now;
			return "new";
		case QUEEN_SUB_TIMESTAMP:
			*from = c->req->sub_from;
			return "timestamp";
		case QUEEN_SUB_ALL:
			break;
	}
	*from = DT_NOBEGIN;
	return "all";
}

/*
 * Where the group's cursors on a queue start at first contact: queue mode
 * never skips backlog; a named group's remembered subscription, registered
 * now (with every partition's cursor seeded) if this is its first pop on
 * the queue.  False when another transaction is registering the same group
 * on the queue right now: this pop leaves the queue alone rather than wait.
 */
bool
queen_claim_subscription(QueenClaim *c, const pg_uuid_t *queue_id,
						 TimestampTz *sub_from)
{
	Datum		values[5];
	const char *mode;
	int			attempt;

	*sub_from = DT_NOBEGIN;
	if (queen_claim_is_queue_mode(c))
		return true;
	values[0] = UUIDPGetDatum(&c->req->tenant);
	values[1] = CStringGetTextDatum(c->req->group);
	values[2] = UUIDPGetDatum(queue_id);
	for (attempt = 0; attempt < 2; attempt++)
	{
		if (queen_scan_run(SCAN_SUBSCRIPTION, values, NULL, SPI_OK_SELECT) == 1)
		{
			*sub_from = queen_get_timestamptz(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
			return true;
		}
		if (attempt > 0)
			break;
		mode = queen_sub_intent(c, sub_from);
		values[3] = CStringGetTextDatum(mode);
		values[4] = TimestampTzGetDatum(*sub_from);
		if (queen_scan_run(SCAN_REGISTER, values, NULL, SPI_OK_INSERT_RETURNING) == 1)
		{
			Datum		seed[3];

			seed[0] = UUIDPGetDatum(queue_id);
			seed[1] = values[1];
			seed[2] = values[4];
			if (queen_scan_run(SCAN_SEED_QUEUE, seed, NULL, SPI_OK_INSERT) > 0)
				queen_stats_mark(queue_id, NULL);
			return true;
		}
	}
	return false;
}

/* Create a missing cursor row, unless another pop is creating it. */
void
queen_claim_first_contact(const pg_uuid_t *pid, const char *group,
						  TimestampTz sub_from)
{
	Datum		values[3];

	values[0] = UUIDPGetDatum(pid);
	values[1] = CStringGetTextDatum(group);
	values[2] = TimestampTzGetDatum(sub_from);
	/* a cursor counts in its group's figures, and no push stamped the partition */
	if (queen_scan_run(SCAN_SEED_PARTITION, values, NULL, SPI_OK_INSERT) > 0)
		queen_stats_mark(NULL, pid);
}

/* Create the queue a named group pops before its first push. */
bool
queen_claim_queue_upsert(QueenClaim *c, pg_uuid_t *queue_id)
{
	Datum		values[2];

	values[0] = UUIDPGetDatum(&c->req->tenant);
	values[1] = CStringGetTextDatum(c->req->queue);
	if (queen_scan_run(SCAN_QUEUE_UPSERT, values, NULL, SPI_OK_INSERT_RETURNING) == 0)
		return false;			/* another transaction just created it */
	queen_get_uuid(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, queue_id);
	return true;
}

/* ----------------------------------------------------------------
 *		The floor
 * ----------------------------------------------------------------
 */

/*
 * The floor a waiting pop's tries use when the stored one is stale: computed
 * by this process and kept for QUEEN_FLOOR_RECHECK_USECS, for the one
 * (queue, group) a waiting session usually watches.  Storing it would be a
 * write the try's rollback takes back.
 */
static pg_uuid_t queen_here_queue;
static char *queen_here_group = NULL;
static TimestampTz queen_here_floor;
static TimestampTz queen_here_at = 0;

static TimestampTz
queen_claim_floor_here(const pg_uuid_t *queue_id, const char *group, TimestampTz now,
					   Datum *values)
{
	if (queen_here_group != NULL && strcmp(queen_here_group, group) == 0 &&
		memcmp(&queen_here_queue, queue_id, sizeof(pg_uuid_t)) == 0 &&
		queen_here_at >= now - QUEEN_FLOOR_RECHECK_USECS)
		return queen_here_floor;
	queen_scan_run(SCAN_FLOOR_COMPUTE, values, NULL, SPI_OK_SELECT);
	queen_here_floor = queen_get_timestamptz(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	queen_here_at = now;
	queen_here_queue = *queue_id;
	if (queen_here_group != NULL)
		pfree(queen_here_group);
	queen_here_group = MemoryContextStrdup(TopMemoryContext, group);
	return queen_here_floor;
}

/*
 * A recompute's bounds ($4, $5 of the floor's statements): it reads the
 * partitions stamped since the stored floor, less the slack (every pending
 * one is: see the file's header), and caps the new floor at the write
 * horizon (write_horizon.c), so that a write not yet committed is never
 * left below it.  It reads the whole queue when there is no stored floor
 * (a first contact, a seek) or no horizon.  Without a horizon for a while
 * (a prepared transaction waits) the floor does not rise above the stored
 * one, which was capped; without one ever (track_activities off) every
 * recompute reads the whole queue and rises to what it sees, so a write
 * committed long after it was made waits for the next.
 */
static void
queen_claim_floor_bounds(TimestampTz stored, TimestampTz now, Datum *values)
{
	TimestampTz horizon = queen_write_horizon();
	TimestampTz cap = now;

	if (horizon != DT_NOBEGIN)
		cap = Min(horizon, now);
	else if (pgstat_track_activities && stored != DT_NOBEGIN)
		cap = Min(stored, now);
	values[3] = TimestampTzGetDatum(stored == DT_NOBEGIN || horizon == DT_NOBEGIN ?
									DT_NOBEGIN : stored - QUEEN_FLOOR_SLACK_USECS);
	values[4] = TimestampTzGetDatum(cap);
}

/*
 * The last write a partition of the queue needs for the group's wildcard
 * pop to consider it, slack included; recomputed if it is stale and no
 * other pop is recomputing it.
 */
static TimestampTz
queen_claim_floor(QueenClaim *c, const pg_uuid_t *queue_id)
{
	Datum		values[5];
	TimestampTz floor = DT_NOBEGIN;
	bool		fresh = false;
	bool		isnull;

	values[0] = UUIDPGetDatum(queue_id);
	values[1] = CStringGetTextDatum(c->req->group);
	values[2] = TimestampTzGetDatum(c->now);
	if (queen_scan_run(SCAN_FLOOR, values, NULL, SPI_OK_SELECT) == 1)
	{
		floor = queen_get_timestamptz(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
		fresh = queen_get_timestamptz(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2) >=
			c->now - QUEEN_FLOOR_RECHECK_USECS;
	}
	if (!fresh)
		queen_claim_floor_bounds(floor, c->now, values);
	if (!fresh && c->req->waiting)
		floor = queen_claim_floor_here(queue_id, c->req->group, c->now, values);
	else if (!fresh)
	{
		queen_scan_run(SCAN_FLOOR_LOCK, values, NULL, SPI_OK_SELECT);
		if (DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)))
		{
			queen_scan_run(SCAN_FLOOR_RECOMPUTE, values, NULL, SPI_OK_INSERT_RETURNING);
			floor = queen_get_timestamptz(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
		}
	}
	return floor == DT_NOBEGIN ? floor : floor - QUEEN_FLOOR_SLACK_USECS;
}

/* ----------------------------------------------------------------
 *		Candidates
 * ----------------------------------------------------------------
 */

/*
 * How many cached candidates one pop tries before it draws afresh: enough
 * that it finds its partitions among those a concurrent consumer just
 * took, few enough that a list gone stale costs little.
 */
static int32
queen_claim_cap(int32 max_partitions)
{
	if (max_partitions >= 128)
		return Max(512, max_partitions);
	return Max(64, Min(max_partitions * 4, 512));
}

/*
 * A process's candidates for one (group, queues): the pending, lease-free
 * partitions one scan found, in random order, handed out over the pops
 * that follow, so a busy queue's pops do not each read every pending
 * partition (on 1,000 pending partitions that scan was most of a pop's
 * cost).  Only a hint: the claim locks and reads each partition as if it
 * had just been found, so an entry another consumer took or emptied costs
 * one skipped try.  Drawn again when used up, when older than
 * QUEEN_CAND_TTL_USECS, and when a pop found nothing in it, so a partition
 * written since is found by the next pop that has nothing else to deliver.
 *
 * But not sooner than QUEEN_CAND_DRAW_SPACING times what its last draw
 * took.  A draw reads every partition written since the floor, all of a
 * queue whose partitions are all being written; with many consumers racing
 * for a small backlog, most pops found the list used up by the others and
 * drew afresh, and the application's shape with 64 consumers spent half of
 * all CPU in draws and delivered a third of what 16 consumers did.  A pop
 * refused a draw takes what the list still holds, possibly nothing, and
 * its hint names the moment the list may be drawn again, so a parked pop
 * comes back then.  Only a pop that will be asked again by then is
 * refused (a long-poll, QueenPopRequest.retry_until): a pop that does not
 * wait, from SQL or HTTP, always sees what was pushed before it.  A draw on
 * a quiet queue (the floor leaves a few rows) takes a fraction of a
 * millisecond, so a long-poll woken by a push is hardly held back.
 */
#define QUEEN_CAND_SLOTS		32
#define QUEEN_CAND_DRAW			1024
#define QUEEN_CAND_TTL_USECS	(USECS_PER_SEC)
#define QUEEN_CAND_DRAW_SPACING	20

typedef struct QueenCandidates
{
	MemoryContext cxt;			/* holds what follows; NULL: slot unused */
	MemoryContext draw_cxt;		/* the targets, reset at each draw */
	char	   *group;
	pg_uuid_t  *qids;
	int			nqueues;
	TimestampTz drawn_at;
	TimestampTz next_draw_at;	/* not drawn again before, see above */
	QueenClaimTarget *targets;
	int			n;
	int			next;			/* the first not yet handed out */
} QueenCandidates;

static QueenCandidates queen_candidates[QUEEN_CAND_SLOTS];

/* The slot of (group, queues): theirs, else a free one, else the oldest. */
static QueenCandidates *
queen_candidates_slot(const char *group, Datum *qids, int nqueues)
{
	QueenCandidates *oldest = NULL;
	int			i;
	int			q;

	for (i = 0; i < QUEEN_CAND_SLOTS; i++)
	{
		QueenCandidates *e = &queen_candidates[i];

		if (e->cxt == NULL || e->nqueues != nqueues || strcmp(e->group, group) != 0)
		{
			if (oldest == NULL || e->cxt == NULL ||
				(oldest->cxt != NULL && e->drawn_at < oldest->drawn_at))
				oldest = e;
			continue;
		}
		for (q = 0; q < nqueues; q++)
			if (memcmp(&e->qids[q], DatumGetUUIDP(qids[q]), sizeof(pg_uuid_t)) != 0)
				break;
		if (q == nqueues)
			return e;
		if (oldest == NULL || (oldest->cxt != NULL && e->drawn_at < oldest->drawn_at))
			oldest = e;
	}

	/* matches nothing until filled: an error on the way leaves no dangling key */
	oldest->nqueues = -1;
	oldest->targets = NULL;
	oldest->n = oldest->next = 0;
	oldest->drawn_at = DT_NOBEGIN;
	oldest->next_draw_at = DT_NOBEGIN;
	if (oldest->cxt == NULL)
		oldest->cxt = AllocSetContextCreate(TopMemoryContext, "queen claim candidates",
											ALLOCSET_SMALL_SIZES);
	else
		MemoryContextReset(oldest->cxt);
	oldest->group = MemoryContextStrdup(oldest->cxt, group);
	oldest->qids = MemoryContextAlloc(oldest->cxt, sizeof(pg_uuid_t) * nqueues);
	for (q = 0; q < nqueues; q++)
		oldest->qids[q] = *DatumGetUUIDP(qids[q]);
	oldest->draw_cxt = AllocSetContextCreate(oldest->cxt, "queen claim candidates draw",
											 ALLOCSET_DEFAULT_SIZES);
	oldest->nqueues = nqueues;
	return oldest;
}

/*
 * Draw the candidates of the given queues written since the oldest of their
 * floors, lease-free ones in random order; the earliest live lease among the
 * pending ones is the retry hint, for when nothing can be claimed now.
 */
static void
queen_candidates_draw(QueenClaim *c, QueenCandidates *e, Datum *qids, int nqueues)
{
	TimestampTz floor = DT_NOEND;
	TimestampTz started = GetCurrentTimestamp();
	Datum		values[5];
	bool		isnull;
	uint64		ncands;
	uint64		i;
	int			q;
	MemoryContext old;

	for (q = 0; q < nqueues; q++)
		floor = Min(floor, queen_claim_floor(c, DatumGetUUIDP(qids[q])));
	values[0] = queen_array_datum(qids, nqueues, UUIDOID);
	values[1] = CStringGetTextDatum(c->req->group);
	values[2] = TimestampTzGetDatum(c->now);
	values[3] = TimestampTzGetDatum(floor);
	values[4] = Int32GetDatum(QUEEN_CAND_DRAW);
	ncands = queen_scan_run(SCAN_CANDIDATES, values, NULL, SPI_OK_SELECT);

	/* emptied before its memory goes, so an error below leaves a valid list */
	e->targets = NULL;
	e->n = e->next = 0;
	MemoryContextReset(e->draw_cxt);
	old = MemoryContextSwitchTo(e->draw_cxt);
	e->targets = palloc(sizeof(QueenClaimTarget) * Max(ncands, 1));
	e->drawn_at = c->now;
	for (i = 0; i < ncands; i++)
	{
		HeapTuple	tuple = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		QueenClaimTarget *t = &e->targets[e->n];

		if (i == 0)
		{
			Datum		lease_min = SPI_getbinval(tuple, desc, 10, &isnull);

			if (!isnull)
				queen_claim_retry_hint(c, DatumGetTimestampTz(lease_min));
		}
		if (DatumGetBool(SPI_getbinval(tuple, desc, 9, &isnull)))
			break;				/* leased ones sort last */
		memset(t, 0, sizeof(*t));
		queen_get_uuid(tuple, desc, 1, &t->pid);
		t->partition = TextDatumGetCString(SPI_getbinval(tuple, desc, 2, &isnull));
		queen_get_uuid(tuple, desc, 3, &t->queue_id);
		t->queue = TextDatumGetCString(SPI_getbinval(tuple, desc, 4, &isnull));
		t->last_offset = queen_get_int64(tuple, desc, 5);
		t->delayed = queen_get_int32(tuple, desc, 6);
		t->window = queen_get_int32(tuple, desc, 7);
		t->lease_time = queen_get_int32(tuple, desc, 8);
		e->n++;
	}
	MemoryContextSwitchTo(old);
	e->next_draw_at = c->now + (GetCurrentTimestamp() - started) * QUEEN_CAND_DRAW_SPACING;
}

/*
 * Whether the list may be drawn again now: yes when its spacing has passed,
 * and for a pop that is not asked again before the spacing ends (a pop
 * that does not wait sees what was pushed before it).  If not, the pop's
 * hint asks to come back when it may.
 */
static bool
queen_candidates_may_draw(QueenClaim *c, const QueenCandidates *e)
{
	if (c->now >= e->next_draw_at || c->req->retry_until < e->next_draw_at)
		return true;
	queen_claim_retry_hint(c, e->next_draw_at);
	return false;
}

/* The pop has all it may take: the budget spent or max_partitions claimed. */
static inline bool
queen_claim_full(const QueenClaim *c, int claimed)
{
	return c->budget <= 0 ||
		(c->req->max_partitions > 0 && claimed >= c->req->max_partitions);
}

/*
 * Claim candidates of the given queues (their first-contact moments beside
 * them) until the budget is spent or max_partitions partitions delivered:
 * from the process's list while it lasts, drawing afresh at most once.
 * Without a limit on partitions (max_partitions <= 0) the whole list is
 * tried, and drawn again for as long as a draw delivers, so the pop stops
 * only when its budget is spent or nothing is left: each draw that goes on
 * took at least one message, so the budget bounds the draws.
 */
static void
queen_claim_candidates(QueenClaim *c, Datum *qids, TimestampTz *subs, int nqueues)
{
	QueenCandidates *e = queen_candidates_slot(c->req->group, qids, nqueues);
	bool		unlimited = c->req->max_partitions <= 0;
	int32		cap = unlimited ? PG_INT32_MAX : queen_claim_cap(c->req->max_partitions);
	int32		tried = 0;
	int			claimed = 0;
	int			claimed_before = 0;
	bool		drawn = false;

	if ((e->next >= e->n || e->drawn_at < c->now - QUEEN_CAND_TTL_USECS) &&
		queen_candidates_may_draw(c, e))
	{
		queen_candidates_draw(c, e, qids, nqueues);
		drawn = true;
	}
	for (;;)
	{
		while (e->next < e->n && tried < cap && !queen_claim_full(c, claimed))
		{
			/* a copy: the claim notes the subscription in it */
			QueenClaimTarget t = e->targets[e->next++];
			int			q;

			tried++;
			for (q = 0; q < nqueues; q++)
			{
				if (memcmp(DatumGetUUIDP(qids[q]), &t.queue_id, sizeof(pg_uuid_t)) == 0)
				{
					t.sub_known = true;
					t.sub_from = subs[q];
					break;
				}
			}
			if (queen_claim_partition(c, &t) > 0)
				claimed++;
		}
		if ((unlimited ? drawn && claimed == claimed_before : drawn) ||
			queen_claim_full(c, claimed) || (claimed > 0 && tried >= cap) ||
			!queen_candidates_may_draw(c, e))
			break;
		claimed_before = claimed;
		/* the list ran out, or none of it had anything: draw afresh, once */
		queen_candidates_draw(c, e, qids, nqueues);
		drawn = true;
		tried = 0;
	}
}

/*
 * The wildcard (4.3) over the given queues: a named group's first contact
 * with each, then the candidates of all of them.
 */
void
queen_claim_wildcard(QueenClaim *c, const pg_uuid_t *queue_ids, int nqueues)
{
	Datum	   *qids = palloc(sizeof(Datum) * nqueues);
	TimestampTz *subs = palloc(sizeof(TimestampTz) * nqueues);
	int			n = 0;
	int			i;

	for (i = 0; i < nqueues; i++)
	{
		/* a queue another pop is registering this group on is skipped */
		if (!queen_claim_subscription(c, &queue_ids[i], &subs[n]))
			continue;
		qids[n] = UUIDPGetDatum(&queue_ids[i]);
		n++;
	}
	if (n > 0)
		queen_claim_candidates(c, qids, subs, n);
}

/* The namespace/task route: the wildcard over every matching queue. */
void
queen_claim_discover(QueenClaim *c)
{
	Datum		values[3];
	char		nulls[3] = {' ', ' ', ' '};
	pg_uuid_t  *ids;
	uint64		n;
	uint64		i;

	values[0] = UUIDPGetDatum(&c->req->tenant);
	values[1] = (Datum) 0;
	values[2] = (Datum) 0;
	if (c->req->namespace_name != NULL)
		values[1] = CStringGetTextDatum(c->req->namespace_name);
	else
		nulls[1] = 'n';
	if (c->req->task != NULL)
		values[2] = CStringGetTextDatum(c->req->task);
	else
		nulls[2] = 'n';
	n = queen_scan_run(SCAN_DISCOVER, values, nulls, SPI_OK_SELECT);
	c->res->no_queue = n == 0;
	if (n == 0)
		return;
	ids = palloc(sizeof(pg_uuid_t) * n);
	for (i = 0; i < n; i++)
		queen_get_uuid(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &ids[i]);
	queen_claim_wildcard(c, ids, (int) n);
}
