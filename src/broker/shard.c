/*-------------------------------------------------------------------------
 *
 * shard.c
 *	  A fusion shard: the background worker that turns the frames of many
 *	  concurrent requests into few commits.
 *
 * A shard owns the partitions that hash to it (shmem.c, queen_shard_of),
 * so all of its state is private to this process and needs no locks.
 * Frames arrive from the listeners' submission rings and accumulate in one
 * group per (tenant, queue, partition).  The three rules of the seed:
 *
 *	 Fire on idle.  Whenever there is a ready group and a push permit is
 *	 free right now, a bundle goes at once; there is no hold timer, so a
 *	 lone push commits in about one round trip.  No permit means the lane
 *	 is contended: the groups keep accumulating and the shard waits for a
 *	 release (or the queen.fusion_hold_ms backstop tick).
 *
 *	 One flush in flight per partition.  A shard runs one transaction at a
 *	 time, and a partition belongs to one shard, so a partition's next
 *	 segment can only be dispatched after the previous one has committed;
 *	 what arrives meanwhile waits in the ring and becomes the next segment.
 *	 Per-partition offset order is therefore commit order.
 *
 *	 Cross-partition bundling.  A bundle takes up to queen.bundle_max ready
 *	 groups, oldest first, and stores them through the bundle engine
 *	 (bundle.c, the core under log_push_multi_v1) in one transaction: one
 *	 commit and one WAL flush for all of them.
 *
 * Verdicts go back, after the commit, to every request that fed a group.
 * A bundle whose transaction fails (queen.push_statement_timeout included)
 * is rolled back and its frames go to the disk spool (spool.c), answered
 * "buffered"; only if the spool cannot take them are they "failed".  In
 * maintenance mode every ready group goes to the spool instead of the
 * database, all of them in one durable write.
 *
 * Error recovery follows TimescaleDB's job runner: each transaction runs
 * inside PG_TRY; on error the shard copies and logs the error, aborts the
 * transaction, answers the affected requests and carries on.  An ERROR
 * outside those blocks ends the process with exit code 1 and the
 * postmaster starts it again; the listeners notice the new incarnation and
 * spool what it had not answered (listener.c).  The push permit it held
 * goes back to the pool from its exit callback (permits.c).
 *
 * The database may not exist when the cluster starts: see
 * queen_worker_connect (shmem.c).
 *
 *-------------------------------------------------------------------------
 */
#include "broker.h"
#include "bundle.h"
#include "configure.h"
#include "wire.h"

#include "access/xact.h"
#include "commands/extension.h"
#include "common/hashfn.h"
#include "lib/ilist.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/pmsignal.h"
#include "tcop/tcopprot.h"
#include "utils/backend_status.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/json.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

/* Groups nobody pushed to for this long are forgotten. */
#define QUEEN_GROUP_IDLE_SECS			60

/* The experiment floor never holds a segment longer than this. */
#define QUEEN_MIN_FRAMES_WAIT_US		2000

/* One request's share of a group: which frames are its. */
typedef struct QueenContributor
{
	int			listener;
	uint64		request;
	uint32		group;			/* the request's group index */
	int			first;			/* first frame in the group's packed buffer */
	int			count;
} QueenContributor;

/* Hash key: tenant (16 bytes) + queue + 0x1F + partition. */
typedef struct QueenGroupKey
{
	const char *bytes;
	uint32		len;
} QueenGroupKey;

typedef struct QueenShardGroup
{
	QueenGroupKey key;			/* first: dynahash compares it */
	pg_uuid_t	tenant;
	char	   *queue;
	char	   *partition;
	StringInfoData packed;		/* frames accumulated since the last flush */
	QueenFrameMark *marks;		/* each one's bounds, hash and id, from arrival */
	int			maxmarks;
	int			nframes;
	QueenContributor *contrib;
	int			ncontrib;
	int			maxcontrib;
	TimestampTz first_arrival;
	TimestampTz last_arrival;
	bool		ready;
	dlist_node	ready_node;
} QueenShardGroup;

/* A control request waiting for its turn between bundles. */
typedef struct QueenControl
{
	int			listener;
	uint64		request;
	uint8		op;
	pg_uuid_t	tenant;
	char	   *arg;
	uint32		arglen;
} QueenControl;

static int	queen_shard_index;
static QueenWorkerSlot *queen_shard_slot;
static HTAB *queen_groups;
static dlist_head queen_ready = DLIST_STATIC_INIT(queen_ready);
static List *queen_controls = NIL;
static MemoryContext queen_shard_cxt;	/* groups and their buffers */
static MemoryContext queen_bundle_cxt;	/* one bundle, reset after it */
static QueenRingReader queen_readers[QUEEN_MAX_LISTENERS];
static QueenRingWriter queen_writers[QUEEN_MAX_LISTENERS];
static bool queen_extension_ready = false;
static bool queen_extension_known = false;
static TimestampTz queen_extension_checked = 0;
static bool queen_shard_closing = false;
static Size queen_backlog_bytes = 0;	/* frames accumulated, not yet flushed */

/* ----------------------------------------------------------------
 *		Group table
 * ----------------------------------------------------------------
 */

static uint32
queen_group_hash(const void *key, Size keysize)
{
	const QueenGroupKey *k = (const QueenGroupKey *) key;

	(void) keysize;
	return hash_bytes((const unsigned char *) k->bytes, (int) k->len);
}

static int
queen_group_match(const void *key1, const void *key2, Size keysize)
{
	const QueenGroupKey *a = (const QueenGroupKey *) key1;
	const QueenGroupKey *b = (const QueenGroupKey *) key2;

	(void) keysize;
	if (a->len != b->len)
		return 1;
	return memcmp(a->bytes, b->bytes, a->len);
}

static void
queen_groups_create(void)
{
	HASHCTL		ctl;

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(QueenGroupKey);
	ctl.entrysize = sizeof(QueenShardGroup);
	ctl.hash = queen_group_hash;
	ctl.match = queen_group_match;
	ctl.hcxt = queen_shard_cxt;
	queen_groups = hash_create("queen shard groups", 1024, &ctl,
							   HASH_ELEM | HASH_FUNCTION | HASH_COMPARE | HASH_CONTEXT);
}

static QueenShardGroup *
queen_group_lookup(const pg_uuid_t *tenant, const char *queue, uint16 qlen,
				   const char *partition, uint16 plen)
{
	char		stack[QUEEN_IDENT_MAX];
	QueenGroupKey key;
	QueenShardGroup *g;
	bool		found;

	key.bytes = stack;
	key.len = queen_partition_ident(stack, tenant, queue, qlen, partition, plen);

	g = (QueenShardGroup *) hash_search(queen_groups, &key, HASH_ENTER, &found);
	if (!found)
	{
		MemoryContext old = MemoryContextSwitchTo(queen_shard_cxt);
		char	   *owned = palloc(key.len);

		memcpy(owned, stack, key.len);
		g->key.bytes = owned;
		g->key.len = key.len;
		g->tenant = *tenant;
		g->queue = pnstrdup(queue, qlen);
		g->partition = pnstrdup(partition, plen);
		initStringInfo(&g->packed);
		g->maxmarks = 64;
		g->marks = palloc(sizeof(QueenFrameMark) * g->maxmarks);
		g->nframes = 0;
		g->maxcontrib = 8;
		g->contrib = palloc(sizeof(QueenContributor) * g->maxcontrib);
		g->ncontrib = 0;
		g->ready = false;
		MemoryContextSwitchTo(old);
	}
	return g;
}

/* Empty a group after its flush; a buffer that grew huge is given back. */
static void
queen_group_reset(QueenShardGroup *g)
{
	queen_backlog_bytes -= Min(queen_backlog_bytes, (Size) g->packed.len);
	if (g->packed.maxlen > 1024 * 1024)
	{
		MemoryContext old = MemoryContextSwitchTo(queen_shard_cxt);

		pfree(g->packed.data);
		initStringInfo(&g->packed);
		MemoryContextSwitchTo(old);
	}
	else
		resetStringInfo(&g->packed);
	if (g->maxmarks > 16384)
	{
		g->maxmarks = 64;
		g->marks = repalloc(g->marks, sizeof(QueenFrameMark) * g->maxmarks);
	}
	g->nframes = 0;
	g->ncontrib = 0;
}

/*
 * Append one request's checked frames and their marks to a group, note
 * the request as a contributor, and put the group on the ready list.
 */
static void
queen_group_add(QueenShardGroup *g, int listener, const QueenWirePush *m,
				const char *frames, Size frames_len, const QueenFrameMark *marks)
{
	QueenContributor *ct;

	if (g->ncontrib == g->maxcontrib)
	{
		g->maxcontrib *= 2;
		g->contrib = repalloc(g->contrib, sizeof(QueenContributor) * g->maxcontrib);
	}
	ct = &g->contrib[g->ncontrib++];
	ct->listener = listener;
	ct->request = m->request;
	ct->group = m->group;
	ct->first = g->nframes;
	ct->count = (int) m->nframes;
	if (g->nframes + (int) m->nframes > g->maxmarks)
	{
		while (g->nframes + (int) m->nframes > g->maxmarks)
			g->maxmarks *= 2;
		g->marks = repalloc(g->marks, sizeof(QueenFrameMark) * g->maxmarks);
	}
	memcpy(g->marks + g->nframes, marks, sizeof(QueenFrameMark) * m->nframes);
	appendBinaryStringInfo(&g->packed, frames, (int) frames_len);
	queen_backlog_bytes += frames_len;
	g->last_arrival = GetCurrentTimestamp();
	if (g->nframes == 0)
		g->first_arrival = g->last_arrival;
	g->nframes += (int) m->nframes;
	if (!g->ready)
	{
		g->ready = true;
		dlist_push_tail(&queen_ready, &g->ready_node);
	}
}

/* Forget groups nobody has pushed to for a while, so memory follows load. */
static void
queen_groups_sweep(TimestampTz now)
{
	HASH_SEQ_STATUS seq;
	QueenShardGroup *g;

	hash_seq_init(&seq, queen_groups);
	while ((g = (QueenShardGroup *) hash_seq_search(&seq)) != NULL)
	{
		QueenGroupKey key;

		if (g->nframes > 0 || g->ready ||
			!TimestampDifferenceExceeds(g->last_arrival, now, QUEEN_GROUP_IDLE_SECS * 1000))
			continue;
		key = g->key;
		pfree(g->queue);
		pfree(g->partition);
		pfree(g->packed.data);
		pfree(g->marks);
		pfree(g->contrib);
		hash_search(queen_groups, &key, HASH_REMOVE, NULL);
		pfree((void *) key.bytes);
	}
}

/* ----------------------------------------------------------------
 *		Answers to listeners
 * ----------------------------------------------------------------
 */

/* Push queued answers into the verdict rings; wake listeners that got some. */
static void
queen_shard_flush_answers(void)
{
	int			l;

	for (l = 0; l < queen_broker->nlisteners; l++)
	{
		bool		reset;

		if (queen_writers[l].queue == NIL)
			continue;
		if (queen_worker_state(&queen_broker->listeners[l]) == QUEEN_WORKER_STOPPED)
		{
			/* nobody to answer: its clients' connections died with it */
			queen_ring_writer_discard(&queen_writers[l]);
			continue;
		}
		if (queen_ring_flush(&queen_writers[l], &reset))
			queen_worker_wake(&queen_broker->listeners[l]);
	}
}

static bool
queen_shard_answers_pending(void)
{
	int			l;

	for (l = 0; l < queen_broker->nlisteners; l++)
		if (queen_writers[l].queue != NIL)
			return true;
	return false;
}

static StringInfo
queen_answer_new(void)
{
	MemoryContext old = MemoryContextSwitchTo(queen_shard_cxt);
	StringInfo	msg = makeStringInfo();

	MemoryContextSwitchTo(old);
	return msg;
}

static void
queen_answer_send(int listener, StringInfo msg)
{
	queen_ring_send(&queen_writers[listener], msg);
}

/* A verdict for one group of a request; nframes per-frame verdicts follow. */
static StringInfo
queen_verdict_new(uint64 request, uint32 group, QueenGroupOutcome outcome, uint32 nframes)
{
	StringInfo	msg = queen_answer_new();
	QueenWireVerdict v = {request, group, (uint8) outcome, nframes};

	queen_wire_put_verdict(msg, &v);
	return msg;
}

/* A whole group answered without per-frame verdicts. */
static void
queen_answer_group(int listener, uint64 request, uint32 group, QueenGroupOutcome outcome)
{
	queen_answer_send(listener, queen_verdict_new(request, group, outcome, 0));
}

static void
queen_answer_reply(int listener, uint64 request, int status, const char *body, Size len)
{
	StringInfo	msg = queen_answer_new();
	QueenWireReply m = {request, (uint16) status, body, (uint32) len};

	queen_wire_put_reply(msg, &m);
	queen_answer_send(listener, msg);
}

/* ----------------------------------------------------------------
 *		Receiving
 * ----------------------------------------------------------------
 */

/*
 * Add the frames of one request's group to the partition's accumulating
 * group.  They are decoded here, once: the frames must decode to exactly
 * the count announced, and what the bundle needs of each (its bounds, its
 * transactionId's hash, its id) is kept in the group's marks, so the
 * bundle neither decodes nor hashes them again.
 */
static void
queen_shard_take_push(int listener, StringInfo raw)
{
	QueenMsgReader r;
	QueenWirePush m;
	const char *frames;
	Size		frames_len;
	Size		used = 0;
	QueenFrameMark *marks;
	QueenShardGroup *g;

	(void) queen_wire_get_head(&r, raw, &m.request);
	if (!queen_wire_get_push(&r, &m) || m.queue_len == 0 || m.partition_len == 0 ||
		m.queue_len > QUEEN_MAX_NAME_BYTES || m.partition_len > QUEEN_MAX_NAME_BYTES ||
		m.nframes == 0)
	{
		elog(LOG, "queen shard %d: dropped a malformed submission", queen_shard_index);
		if (!r.bad)
			queen_answer_group(listener, m.request, m.group, QUEEN_GROUP_FAILED);
		return;
	}
	frames = r.data + r.pos;
	frames_len = r.len - r.pos;

	/* a count more frames than the bytes could hold is refused unallocated */
	marks = m.nframes <= frames_len / (4 + QUEEN_FRAME_MIN_BODY) ?
		palloc(sizeof(QueenFrameMark) * m.nframes) : NULL;
	if (marks == NULL ||
		queen_frames_mark(frames, frames_len, (int) m.nframes, marks, &used) != NULL ||
		used != frames_len)
	{
		elog(LOG, "queen shard %d: dropped a submission whose frames do not decode",
			 queen_shard_index);
		queen_answer_group(listener, m.request, m.group, QUEEN_GROUP_FAILED);
		if (marks != NULL)
			pfree(marks);
		return;
	}

	if (!queen_extension_ready && !queen_maintenance_on())
	{
		queen_answer_group(listener, m.request, m.group, QUEEN_GROUP_UNAVAILABLE);
		pfree(marks);
		return;
	}

	g = queen_group_lookup((const pg_uuid_t *) m.tenant, m.queue, m.queue_len,
						   m.partition, m.partition_len);
	queen_group_add(g, listener, &m, frames, frames_len, marks);
	pfree(marks);
}

static void
queen_shard_take_control(int listener, StringInfo raw)
{
	QueenMsgReader r;
	QueenWireControl m;
	QueenControl *c;
	MemoryContext old;

	(void) queen_wire_get_head(&r, raw, &m.request);
	if (!queen_wire_get_control(&r, &m))
	{
		elog(LOG, "queen shard %d: dropped a malformed control request", queen_shard_index);
		return;
	}
	old = MemoryContextSwitchTo(queen_shard_cxt);
	c = palloc0(sizeof(QueenControl));
	c->listener = listener;
	c->request = m.request;
	c->op = m.op;
	c->arglen = m.arglen;
	memcpy(c->tenant.data, m.tenant, UUID_LEN);
	c->arg = palloc(c->arglen + 1);
	memcpy(c->arg, m.arg, c->arglen);
	c->arg[c->arglen] = '\0';
	queen_controls = lappend(queen_controls, c);
	MemoryContextSwitchTo(old);
}

/* Take every complete message the listeners have left for us. */
static void
queen_shard_receive(void)
{
	int			l;

	for (l = 0; l < queen_broker->nlisteners; l++)
	{
		StringInfo	msg;
		bool		reset;

		/*
		 * Past the backlog bound the rings are left to fill: the listeners
		 * hold what does not fit, and no buffer here nears the 1 GB limit.
		 */
		while (queen_backlog_bytes < QUEEN_SHARD_BACKLOG_BYTES)
		{
			uint8		type;

			msg = queen_ring_receive(&queen_readers[l], &reset);
			/* a restarted listener's first messages are already in the new epoch */
			if (msg == NULL && reset)
				msg = queen_ring_receive(&queen_readers[l], &reset);
			if (msg == NULL)
				break;
			type = msg->len > 0 ? (uint8) msg->data[0] : 0;

			if (type == QUEEN_MSG_PUSH)
				queen_shard_take_push(l, msg);
			else if (type == QUEEN_MSG_CONTROL)
				queen_shard_take_control(l, msg);
			else
				elog(LOG, "queen shard %d: dropped a message of unknown type %d",
					 queen_shard_index, type);
		}
		if (queen_readers[l].wake_writer)
		{
			queen_readers[l].wake_writer = false;
			queen_worker_wake(&queen_broker->listeners[l]);
		}
	}
}

/* ----------------------------------------------------------------
 *		Transactions
 * ----------------------------------------------------------------
 */

/* Is the extension there?  Asked in its own transaction, at most once a second when not. */
static bool
queen_shard_check_extension(bool force)
{
	TimestampTz now = GetCurrentTimestamp();
	bool		ready;

	if (queen_extension_ready && !force)
		return true;
	if (!force && !TimestampDifferenceExceeds(queen_extension_checked, now, 1000))
		return false;
	queen_extension_checked = now;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	ready = OidIsValid(get_extension_oid("queen", true));
	CommitTransactionCommand();

	if (ready != queen_extension_ready || !queen_extension_known)
	{
		if (ready)
			ereport(LOG,
					(errmsg("queen shard %d: extension found in database \"%s\"; serving",
							queen_shard_index, queen_database)));
		else
			ereport(LOG,
					(errmsg("queen shard %d: extension queen is not installed in database \"%s\"; waiting for CREATE EXTENSION queen",
							queen_shard_index, queen_database)));
	}
	queen_extension_ready = ready;
	queen_extension_known = true;
	if (!queen_shard_closing)
		queen_worker_set_state(queen_shard_slot,
							   ready ? QUEEN_WORKER_READY : QUEEN_WORKER_WAITING);
	return ready;
}

/*
 * Log an error caught in a transaction block and clean up after it.  Must
 * be called in PG_CATCH with a memory context that outlives the
 * transaction current; returns the error's message, copied there.
 */
static char *
queen_shard_recover(const char *what, int *sqlerrcode)
{
	ErrorData  *edata;
	char	   *message;

	queen_statement_timeout_stop(false);
	edata = CopyErrorData();
	FlushErrorState();
	AbortCurrentTransaction();
	if (sqlerrcode)
		*sqlerrcode = edata->sqlerrcode;
	if (edata->sqlerrcode == ERRCODE_QUERY_CANCELED)
		pg_atomic_fetch_add_u64(&queen_broker->spool.statement_timeouts, 1);
	ereport(LOG,
			(errmsg("queen shard %d: %s failed: %s", queen_shard_index, what, edata->message),
			 edata->detail ? errdetail_internal("%s", edata->detail) : 0));
	message = pstrdup(edata->message);
	FreeErrorData(edata);
	return message;
}

/* Route a group's verdicts to every request that fed it. */
static void
queen_shard_route(QueenShardGroup *g, QueenBundleGroup *bg, QueenGroupOutcome outcome)
{
	int			c;

	for (c = 0; c < g->ncontrib; c++)
	{
		QueenContributor *ct = &g->contrib[c];
		StringInfo	msg;
		int			k;

		if (outcome != QUEEN_GROUP_DONE)
		{
			queen_answer_group(ct->listener, ct->request, ct->group, outcome);
			continue;
		}
		msg = queen_verdict_new(ct->request, ct->group, QUEEN_GROUP_DONE, (uint32) ct->count);
		for (k = ct->first; k < ct->first + ct->count; k++)
		{
			QueenBundleFrame *f = &bg->frames[k];

			queen_wire_put_verdict_frame(msg, f->status == QUEEN_SEGMENT_QUEUED ?
										 QUEEN_VERDICT_QUEUED : QUEEN_VERDICT_DUPLICATE,
										 &f->message_id);
		}
		queen_answer_send(ct->listener, msg);
	}
}

/*
 * The bundle's transaction.  Returns false if it failed (logged, rolled
 * back); the timings say how long the statements and the COMMIT took.
 */
static bool
queen_shard_transact(QueenBundleGroup *bgs, int n, int64 *exec_us, int64 *commit_us)
{
	volatile TimestampTz before_commit = 0;
	volatile bool ok = false;
	TimestampTz start = GetCurrentTimestamp();
	TimestampTz end;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PG_TRY();
	{
		PushActiveSnapshot(GetTransactionSnapshot());
		pgstat_report_activity(STATE_RUNNING, "queen: push bundle");
		/* the engine's working memory is the transaction's; verdicts land in bgs */
		queen_statement_timeout_start();
		queen_bundle_push(bgs, n);
		queen_statement_timeout_stop(true);
		PopActiveSnapshot();
		before_commit = GetCurrentTimestamp();
		CommitTransactionCommand();
		ok = true;
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(queen_bundle_cxt);
		(void) queen_shard_recover("push bundle", NULL);
	}
	PG_END_TRY();
	end = GetCurrentTimestamp();
	pgstat_report_activity(STATE_IDLE, NULL);
	pgstat_report_stat(false);
	MemoryContextSwitchTo(queen_bundle_cxt);

	*exec_us = ok ? before_commit - start : 0;
	*commit_us = ok ? end - before_commit : 0;
	return ok;
}

/*
 * Answer every frame of a group with one status; the ids come from the
 * group's own frames, which are in contributor order.
 */
static void
queen_shard_route_all(QueenShardGroup *g, QueenFrameVerdict status)
{
	Size		pos = 0;
	int			c;

	for (c = 0; c < g->ncontrib; c++)
	{
		QueenContributor *ct = &g->contrib[c];
		StringInfo	msg = queen_verdict_new(ct->request, ct->group, QUEEN_GROUP_DONE,
											(uint32) ct->count);
		int			k;

		for (k = 0; k < ct->count; k++)
		{
			QueenFrame	frame;

			/* decoded once already on arrival, so this cannot fail */
			if (queen_frame_decode(g->packed.data, g->packed.len, &pos, &frame) != NULL)
				elog(ERROR, "queen: accumulated frames do not decode");
			queen_wire_put_verdict_frame(msg, (uint8) status, &frame.message_id);
		}
		queen_answer_send(ct->listener, msg);
	}
}

/*
 * Write the groups to the spool in one durable write and answer them:
 * "buffered", or the failure outcome if the spool could not take them.
 * The groups are reset.  Called in the bundle context.
 */
static void
queen_shard_spool(QueenShardGroup **groups, int n, QueenGroupOutcome on_failure)
{
	StringInfoData buf;
	int			items = 0;
	char	   *why = NULL;
	bool		ok;
	int			i;

	initStringInfo(&buf);
	for (i = 0; i < n; i++)
	{
		QueenShardGroup *g = groups[i];
		QueenSpoolRecord rec;

		rec.tenant = g->tenant;
		rec.queue = g->queue;
		rec.qlen = (uint16) strlen(g->queue);
		rec.partition = g->partition;
		rec.plen = (uint16) strlen(g->partition);
		rec.nframes = (uint32) g->nframes;
		rec.frames = g->packed.data;
		rec.frames_len = g->packed.len;
		queen_spool_append_record(&buf, &rec);
		items += g->nframes;
	}
	ok = queen_spool_write(&buf, items, queen_shard_index, &why);
	if (!ok)
	{
		ereport(WARNING,
				(errcode_for_file_access(),
				 errmsg("queen shard %d: could not spool %d items; they are answered failed: %s",
						queen_shard_index, items, why)));
		pg_atomic_fetch_add_u64(&queen_broker->metrics.failed, items);
	}
	for (i = 0; i < n; i++)
	{
		if (ok)
			queen_shard_route_all(groups[i], QUEEN_VERDICT_BUFFERED);
		else
			queen_shard_route(groups[i], NULL, on_failure);
		queen_group_reset(groups[i]);
	}
	pfree(buf.data);
}

/* Maintenance mode: every ready group goes to the spool, in one write. */
static void
queen_shard_spool_ready(void)
{
	QueenShardGroup **chosen;
	int			n = 0;
	MemoryContext old = MemoryContextSwitchTo(queen_bundle_cxt);

	chosen = palloc(sizeof(QueenShardGroup *) * Max(hash_get_num_entries(queen_groups), 1));
	while (!dlist_is_empty(&queen_ready))
	{
		QueenShardGroup *g = dlist_container(QueenShardGroup, ready_node,
											 dlist_pop_head_node(&queen_ready));

		g->ready = false;
		chosen[n++] = g;
	}
	queen_shard_spool(chosen, n, QUEEN_GROUP_SPOOL_FAILED);
	MemoryContextSwitchTo(old);
	MemoryContextReset(queen_bundle_cxt);
	queen_shard_flush_answers();
}

/*
 * Store up to queen.bundle_max ready groups in one transaction and answer
 * every request that fed them.  The caller holds a push permit; it is
 * released here with the bundle's timings.
 */
static void
queen_shard_run_bundle(void)
{
	QueenShardGroup **chosen;
	QueenBundleGroup *bgs;
	int			n = 0;
	int			i;
	int64		exec_us,
				commit_us;
	bool		ok;
	int			segments = 0;
	uint64		queued = 0,
				dups = 0;
	MemoryContext old;

	old = MemoryContextSwitchTo(queen_bundle_cxt);
	if (queen_test_fault("shard_error_holding_permit"))
		elog(ERROR, "queen.test_fault: shard %d fails holding a push permit", queen_shard_index);
	chosen = palloc(sizeof(QueenShardGroup *) * queen_bundle_max);
	while (n < queen_bundle_max && !dlist_is_empty(&queen_ready))
	{
		QueenShardGroup *g = dlist_container(QueenShardGroup, ready_node,
											 dlist_pop_head_node(&queen_ready));

		g->ready = false;
		chosen[n++] = g;
	}
	bgs = palloc0(sizeof(QueenBundleGroup) * Max(n, 1));
	for (i = 0; i < n; i++)
		queen_bundle_group_marked(&bgs[i], &chosen[i]->tenant, chosen[i]->queue,
								  chosen[i]->partition, chosen[i]->packed.data,
								  chosen[i]->marks, chosen[i]->nframes);

	ok = queen_shard_transact(bgs, n, &exec_us, &commit_us);
	if (ok && queen_test_fault("shard_error_after_commit"))
		elog(ERROR, "queen.test_fault: shard %d fails between COMMIT and its answers",
			 queen_shard_index);

	if (ok)
	{
		for (i = 0; i < n; i++)
		{
			int			k;

			segments += bgs[i].nsegments;
			for (k = 0; k < bgs[i].nframes; k++)
			{
				if (bgs[i].frames[k].status == QUEEN_SEGMENT_QUEUED)
					queued++;
				else
					dups++;
			}
		}
		queen_permit_release(queen_shard_index, n, exec_us, commit_us);
		pg_atomic_fetch_add_u64(&queen_broker->metrics.commits, 1);
		pg_atomic_fetch_add_u64(&queen_broker->metrics.segments, segments);
		pg_atomic_fetch_add_u64(&queen_broker->metrics.items, queued);
		pg_atomic_fetch_add_u64(&queen_broker->metrics.queued, queued);
		pg_atomic_fetch_add_u64(&queen_broker->metrics.duplicates, dups);
		pg_atomic_fetch_add_u64(&queen_broker->metrics.exec_us, exec_us);
		pg_atomic_fetch_add_u64(&queen_broker->metrics.commit_us, commit_us);
	}
	else
	{
		queen_permit_release(queen_shard_index, 0, 0, 0);
		pg_atomic_fetch_add_u64(&queen_broker->metrics.bundle_failures, 1);
		/* the extension may have been dropped under us */
		(void) queen_shard_check_extension(true);
		/* rolled back: the items exist nowhere, so the spool takes them */
		queen_shard_spool(chosen, n, QUEEN_GROUP_FAILED);
	}
	queen_metrics_publish_core();

	for (i = 0; ok && i < n; i++)
	{
		queen_shard_route(chosen[i], &bgs[i], QUEEN_GROUP_DONE);
		queen_group_reset(chosen[i]);
	}

	MemoryContextSwitchTo(old);
	MemoryContextReset(queen_bundle_cxt);
	queen_shard_flush_answers();
}

/* Run one control request in its own transaction and answer it. */
static void
queen_shard_run_control(QueenControl *c)
{
	StringInfoData out;
	volatile int status = 500;
	MemoryContext old = MemoryContextSwitchTo(queen_bundle_cxt);

	initStringInfo(&out);
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PG_TRY();
	{
		PushActiveSnapshot(GetTransactionSnapshot());
		queen_statement_timeout_start();
		switch (c->op)
		{
			case QUEEN_CONTROL_HEALTH:
				/* a catalog read in a transaction: the database answers */
				pgstat_report_activity(STATE_RUNNING, "queen: health");
				if (OidIsValid(get_extension_oid("queen", true)))
				{
					status = 200;
					queen_health_json(&out, true, NULL);
				}
				else
				{
					status = 503;
					queen_health_json(&out, true, "extension queen is not installed");
				}
				break;
			case QUEEN_CONTROL_CONFIGURE:
				pgstat_report_activity(STATE_RUNNING, "queen: configure");
				status = queen_configure_queue(&c->tenant, c->arg, c->arglen, &out);
				break;
			case QUEEN_CONTROL_DELETE_QUEUE:
				pgstat_report_activity(STATE_RUNNING, "queen: delete queue");
				status = queen_delete_queue(&c->tenant, c->arg, &out);
				break;
			default:
				status = 400;
				appendStringInfoString(&out, "{\"error\":\"unknown control request\"}");
				break;
		}
		queen_statement_timeout_stop(true);
		PopActiveSnapshot();
		CommitTransactionCommand();
	}
	PG_CATCH();
	{
		char	   *message;

		MemoryContextSwitchTo(queen_bundle_cxt);
		message = queen_shard_recover("control request", NULL);
		resetStringInfo(&out);
		if (c->op == QUEEN_CONTROL_HEALTH)
		{
			status = 503;
			queen_health_json(&out, false, message);
		}
		else
		{
			status = 500;
			appendStringInfoString(&out, "{\"error\":");
			escape_json(&out, message);
			appendStringInfoChar(&out, '}');
		}
	}
	PG_END_TRY();
	pgstat_report_activity(STATE_IDLE, NULL);
	pgstat_report_stat(false);

	queen_answer_reply(c->listener, c->request, status, out.data, out.len);
	MemoryContextSwitchTo(old);
	MemoryContextReset(queen_bundle_cxt);
}

/* ----------------------------------------------------------------
 *		Main loop
 * ----------------------------------------------------------------
 */

/* Is some group ready to go (the experiment floor may hold small ones)? */
static bool
queen_shard_has_ready(TimestampTz now, long *hold_ms)
{
	dlist_iter	it;

	*hold_ms = -1;
	if (dlist_is_empty(&queen_ready))
		return false;
	if (queen_fusion_min_frames <= 0)
		return true;
	dlist_foreach(it, &queen_ready)
	{
		QueenShardGroup *g = dlist_container(QueenShardGroup, ready_node, it.cur);

		if (g->nframes >= queen_fusion_min_frames ||
			now - g->first_arrival >= QUEEN_MIN_FRAMES_WAIT_US || queen_shard_closing)
			return true;
	}
	*hold_ms = 1;
	return false;
}

/* At exit, whatever the way (proc_exit after an ERROR included): permits back. */
static void
queen_shard_exit(int code, Datum arg)
{
	(void) code;
	queen_permits_reclaim(DatumGetInt32(arg), "at exit");
}

/*
 * queen.test_fault = 'shard_start_wait': a starting shard stays in
 * STARTING (not serving) while the setting says so, which gives the TAP
 * tests a restart window that does not depend on timing.
 */
static void
queen_shard_test_start_wait(void)
{
	while (queen_test_fault_setting != NULL &&
		   strcmp(queen_test_fault_setting, "shard_start_wait") == 0)
	{
		if (ShutdownRequestPending)
			proc_exit(0);
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 100L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
	}
}

void
queen_shard_main(Datum arg)
{
	TimestampTz closing_since = 0;
	TimestampTz last_sweep;
	int			l;

	queen_shard_index = DatumGetInt32(arg);
	queen_shard_slot = queen_worker_begin(QUEEN_SHARD, queen_shard_index);
	if (queen_shard_slot == NULL)
		proc_exit(0);
	/* what a predecessor that could not run its exit callback still held */
	queen_permits_reclaim(queen_shard_index, "at start (left by the previous process)");
	on_shmem_exit(queen_shard_exit, Int32GetDatum(queen_shard_index));
	queen_shard_test_start_wait();
	queen_worker_connect(queen_shard_slot, psprintf("shard %d", queen_shard_index));
	pgstat_report_appname("queen shard");
	/* what an earlier process of this shard left half-written */
	queen_spool_recover(queen_shard_index, queen_broker->nshards);

	queen_shard_cxt = AllocSetContextCreate(TopMemoryContext, "queen shard",
											ALLOCSET_DEFAULT_SIZES);
	queen_bundle_cxt = AllocSetContextCreate(TopMemoryContext, "queen bundle",
											 ALLOCSET_DEFAULT_SIZES);
	queen_groups_create();
	for (l = 0; l < queen_broker->nlisteners; l++)
	{
		queen_ring_reader_init(&queen_readers[l], queen_submit_ring(l, queen_shard_index),
							   queen_shard_cxt);
		queen_ring_writer_init(&queen_writers[l], queen_verdict_ring(queen_shard_index, l),
							   queen_shard_cxt, true);
	}

	if (queen_shard_index == 0)
		queen_broker_log_config("shard");
	(void) queen_shard_check_extension(true);
	/* listeners may have been waiting for us */
	for (l = 0; l < queen_broker->nlisteners; l++)
		queen_worker_wake(&queen_broker->listeners[l]);

	last_sweep = GetCurrentTimestamp();
	for (;;)
	{
		TimestampTz now;
		long		timeout = 1000;
		long		hold_ms;
		bool		worked = false;

		/* a cancel between transactions has nothing to cancel */
		QueryCancelPending = false;
		CHECK_FOR_INTERRUPTS();
		/* under steady load the loop never waits on the latch, which would notice */
		if (!PostmasterIsAlive())
			proc_exit(1);
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			if (queen_test_fault_setting == NULL || queen_test_fault_setting[0] == '\0')
				pg_atomic_write_u32(&queen_broker->test_fault_fired, 0);
			if (queen_shard_index == 0)
			{
				queen_permits_reconfigure();
				queen_broker_log_config("shard (reloaded)");
			}
		}
		if (ShutdownRequestPending && !queen_shard_closing)
		{
			queen_shard_closing = true;
			closing_since = GetCurrentTimestamp();
			queen_worker_set_state(queen_shard_slot, QUEEN_WORKER_CLOSING);
		}

		if (!queen_extension_ready)
			(void) queen_shard_check_extension(false);

		queen_shard_receive();

		while (queen_controls != NIL)
		{
			QueenControl *c = (QueenControl *) linitial(queen_controls);

			queen_controls = list_delete_first(queen_controls);
			queen_shard_run_control(c);
			pfree(c->arg);
			pfree(c);
			worked = true;
		}

		now = GetCurrentTimestamp();
		if (queen_shard_has_ready(now, &hold_ms))
		{
			if (queen_maintenance_on())
			{
				queen_shard_spool_ready();
				worked = true;
			}
			else if (queen_permit_try_acquire(queen_shard_index))
			{
				queen_shard_run_bundle();
				worked = true;
			}
			else
				timeout = queen_fusion_hold_ms;
		}
		else if (hold_ms >= 0)
			timeout = hold_ms;

		queen_shard_flush_answers();
		if (queen_shard_answers_pending())
			timeout = Min(timeout, 10);
		{
			long		spool_due = queen_spool_idle(queen_shard_index, now);

			if (spool_due >= 0)
				timeout = Min(timeout, spool_due);
		}

		/* under steady load too, or memory would follow every partition ever seen */
		if (TimestampDifferenceExceeds(last_sweep, now, 10000))
		{
			queen_groups_sweep(now);
			last_sweep = now;
		}

		if (worked)
			continue;

		if (queen_shard_closing)
		{
			bool		idle = dlist_is_empty(&queen_ready) && !queen_shard_answers_pending();

			/* every listener gone (or never started): nothing more can arrive */
			if (idle && queen_workers_all_in(queen_broker->listeners, queen_broker->nlisteners,
											 1U << QUEEN_WORKER_STOPPED))
				break;

			/*
			 * SIGTERM for this shard alone (pg_terminate_backend): what it
			 * held is answered; exit 1 so the postmaster starts it again,
			 * where exit 0 would unregister it for good.  The listeners
			 * get the same signal at a cluster shutdown, so give them a
			 * moment to show it before deciding.
			 */
			if (idle && !queen_workers_all_in(queen_broker->listeners, queen_broker->nlisteners,
											  QUEEN_WORKERS_GOING) &&
				TimestampDifferenceExceeds(closing_since, now, 500))
			{
				ereport(LOG,
						(errmsg("queen shard %d: terminated while the broker runs; restarting",
								queen_shard_index)));
				queen_spool_finish(queen_shard_index);
				proc_exit(1);
			}
			if (TimestampDifferenceExceeds(closing_since, now, queen_shutdown_grace_ms(true)))
			{
				ereport(LOG,
						(errmsg("queen shard %d: listeners did not finish within %d ms; exiting",
								queen_shard_index, queen_shutdown_grace_ms(true))));
				break;
			}
			timeout = Min(timeout, 100);
		}

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 timeout, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}

	queen_permit_cancel_wait(queen_shard_index);
	queen_spool_finish(queen_shard_index);
	proc_exit(0);
}
