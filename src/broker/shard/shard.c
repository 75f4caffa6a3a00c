/*-------------------------------------------------------------------------
 *
 * shard.c
 *	  A fusion shard: the background worker that turns the frames of many
 *	  concurrent requests into few commits.
 *
 * A shard owns the partitions that hash to it (worker.c, queen_shard_of),
 * so all of its state is private to this process and needs no locks.
 * Frames arrive from the listeners' submission rings and accumulate in one
 * group per (tenant, queue, partition).  Three rules:
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
 * Every transaction goes through the worker runtime's runner (worker.c,
 * queen_worker_transact), which returns an error instead of raising it:
 * the shard answers the affected requests and carries on.  An ERROR
 * outside it ends the process with exit code 1 and the postmaster starts
 * it again; the listeners notice the new incarnation and spool what it
 * had not answered (listener.c).  The push permit it held goes back to
 * the pool from its exit callback (permits.c).  Its answers to the
 * listeners are shard_answer.c's, its control requests shard_control.c's,
 * its accumulating groups shard_groups.c's.
 *
 * The database may not exist when the cluster starts: see
 * queen_worker_connect (worker.c) and the database watch (dbwatch.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "shard.h"
#include "codec.h"
#include "shard_groups.h"
#include "bundle.h"
#include "permits.h"
#include "maintenance/spool.h"
#include "worker.h"

#include "lib/ilist.h"
#include "miscadmin.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "utils/backend_status.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

/* The experiment floor never holds a segment longer than this. */
#define QUEEN_MIN_FRAMES_WAIT_US		2000

static int	queen_shard_index;
static QueenWorkerSlot *queen_shard_slot;
static MemoryContext queen_shard_cxt;	/* groups and their buffers */
static MemoryContext queen_bundle_cxt;	/* one bundle, reset after it */
static MemoryContext queen_turn_cxt;	/* one turn of the main loop, reset after it */
static QueenRingReader queen_readers[QUEEN_MAX_LISTENERS];
static bool queen_extension_ready = false;
static bool queen_extension_known = false;
static TimestampTz queen_extension_checked = 0;
static bool queen_shard_closing = false;
static char *queen_shard_who;	/* "shard <index>", for the logs */

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
	QueenShardGroup *g = NULL;

	(void) queen_wire_get_head(&r, raw, &m.request);
	if (!queen_wire_get(&r, QUEEN_MSG_PUSH, &m) || m.queue.len == 0 || m.partition.len == 0 ||
		m.queue.len > QUEEN_MAX_NAME_BYTES || m.partition.len > QUEEN_MAX_NAME_BYTES ||
		m.nframes == 0)
	{
		elog(LOG, "queen shard %d: dropped a malformed submission", queen_shard_index);
		if (!r.bad)
			queen_answer_group(listener, m.request, m.group, QUEEN_GROUP_FAILED);
		return;
	}
	frames = r.data + r.pos;
	frames_len = r.len - r.pos;

	/*
	 * A count of more frames than the bytes could hold is refused before
	 * anything is allocated.  The frames are marked where the group keeps
	 * its marks; a refused submission leaves the group as it was.
	 */
	if (m.nframes > frames_len / (4 + QUEEN_FRAME_MIN_BODY))
		marks = NULL;
	else
	{
		g = queen_group_lookup((const pg_uuid_t *) m.tenant, m.queue.data,
							   (uint16) m.queue.len, m.partition.data,
							   (uint16) m.partition.len);
		marks = queen_group_marks_room(g, (int) m.nframes);
	}
	if (marks == NULL ||
		queen_frames_mark(frames, frames_len, (int) m.nframes, marks, &used) != NULL ||
		used != frames_len)
	{
		elog(LOG, "queen shard %d: dropped a submission whose frames do not decode",
			 queen_shard_index);
		queen_answer_group(listener, m.request, m.group, QUEEN_GROUP_FAILED);
		return;
	}

	if (!queen_extension_ready && !queen_maintenance_on())
	{
		queen_answer_group(listener, m.request, m.group, QUEEN_GROUP_UNAVAILABLE);
		return;
	}
	queen_group_add(g, listener, &m, frames, frames_len);
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
	ready = queen_worker_extension_present();

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
										 QUEEN_VERDICT_QUEUED :
										 f->status == QUEEN_SEGMENT_REFUSED ?
										 QUEEN_VERDICT_REFUSED : QUEEN_VERDICT_DUPLICATE,
										 &f->message_id);
		}
		queen_answer_send(ct->listener, msg);
	}
}

/* The bundle's statements: the engine's working memory is the transaction's, verdicts land in bgs. */
typedef struct QueenBundleTx
{
	QueenBundleGroup *bgs;
	int			n;
} QueenBundleTx;

static void
queen_shard_bundle_body(void *arg)
{
	QueenBundleTx *tx = (QueenBundleTx *) arg;
	int			i;

	queen_bundle_push(tx->bgs, tx->n);
	if (!queen_notify)
		return;
	for (i = 0; i < tx->n; i++)
	{
		int			k;

		/* a group of duplicates made nothing pending */
		for (k = 0; k < tx->bgs[i].nframes; k++)
		{
			if (tx->bgs[i].frames[k].status == QUEEN_SEGMENT_QUEUED)
			{
				queen_wait_notify(&tx->bgs[i].tenant, tx->bgs[i].queue,
								  strlen(tx->bgs[i].queue));
				break;
			}
		}
	}
}

/*
 * Answer every frame of a group with one status; the ids come from the
 * group's own frames, which are in contributor order.
 */
static void
queen_shard_route_all(QueenShardGroup *g, QueenFrameVerdict status)
{
	int			c;

	for (c = 0; c < g->ncontrib; c++)
	{
		QueenContributor *ct = &g->contrib[c];
		StringInfo	msg = queen_verdict_new(ct->request, ct->group, QUEEN_GROUP_DONE,
											(uint32) ct->count);
		int			k;

		/* the ids were read from the frames once, on arrival */
		for (k = ct->first; k < ct->first + ct->count; k++)
			queen_wire_put_verdict_frame(msg, (uint8) status, &g->marks[k].message_id);
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
		queen_count(QUEEN_COUNT_FAILED, items);
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

	chosen = palloc(sizeof(QueenShardGroup *) * Max(queen_groups_count(), 1));
	while (!dlist_is_empty(&queen_groups_ready))
	{
		QueenShardGroup *g = dlist_container(QueenShardGroup, ready_node,
											 dlist_pop_head_node(&queen_groups_ready));

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
	QueenBundleTx bundle;
	QueenTxResult result;
	MemoryContext old;

	old = MemoryContextSwitchTo(queen_bundle_cxt);
	if (queen_test_fault("shard_error_holding_permit"))
		elog(ERROR, "queen.test_fault: shard %d fails holding a push permit", queen_shard_index);
	chosen = palloc(sizeof(QueenShardGroup *) * queen_bundle_max);
	while (n < queen_bundle_max && !dlist_is_empty(&queen_groups_ready))
	{
		QueenShardGroup *g = dlist_container(QueenShardGroup, ready_node,
											 dlist_pop_head_node(&queen_groups_ready));

		g->ready = false;
		chosen[n++] = g;
	}
	bgs = palloc0(sizeof(QueenBundleGroup) * Max(n, 1));
	for (i = 0; i < n; i++)
		queen_bundle_group_marked(&bgs[i], &chosen[i]->tenant, chosen[i]->queue,
								  chosen[i]->partition, chosen[i]->packed.data,
								  chosen[i]->marks, chosen[i]->nframes);

	bundle.bgs = bgs;
	bundle.n = n;
	ok = queen_worker_transact("push bundle", queen_shard_who, queen_shard_bundle_body,
							   &bundle, &result);
	exec_us = result.exec_us;
	commit_us = result.commit_us;
	if (ok && queen_test_fault("shard_error_after_commit"))
		elog(ERROR, "queen.test_fault: shard %d fails between COMMIT and its answers",
			 queen_shard_index);

	if (ok)
	{
		for (i = 0; i < n; i++)
		{
			int			k;

			uint64		before = queued;

			segments += bgs[i].nsegments;
			for (k = 0; k < bgs[i].nframes; k++)
			{
				if (bgs[i].frames[k].status == QUEEN_SEGMENT_QUEUED)
					queued++;
				else
					dups++;
			}
			/* the queue has something new: parked pops on it may try again */
			if (queued > before)
				queen_wake_mark(&chosen[i]->tenant, chosen[i]->queue,
								strlen(chosen[i]->queue));
		}
		queen_count(QUEEN_COUNT_WAKES_PUSH, queen_wake_publish());
		queen_permit_release(queen_shard_index, n, exec_us, commit_us);
		queen_count(QUEEN_COUNT_COMMITS, 1);
		queen_count(QUEEN_COUNT_SEGMENTS, segments);
		queen_count(QUEEN_COUNT_ITEMS, queued);
		queen_count(QUEEN_COUNT_QUEUED, queued);
		queen_count(QUEEN_COUNT_DUPLICATES, dups);
		queen_count(QUEEN_COUNT_EXEC_US, exec_us);
		queen_count(QUEEN_COUNT_COMMIT_US, commit_us);
	}
	else
	{
		queen_permit_release(queen_shard_index, 0, 0, 0);
		queen_count(QUEEN_COUNT_BUNDLE_FAILURES, 1);
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
	if (dlist_is_empty(&queen_groups_ready))
		return false;
	if (queen_fusion_min_frames <= 0)
		return true;
	dlist_foreach(it, &queen_groups_ready)
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
		queen_worker_poll_signals();
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 100L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		queen_worker_poll_signals();
	}
}

/*
 * Everything before the loop: the slot, the permits and spool files a
 * predecessor left, the connection, the memory and the rings.
 */
static void
queen_shard_start(int index)
{
	int			l;

	queen_shard_index = index;
	queen_shard_who = psprintf("shard %d", index);
	queen_shard_slot = queen_worker_begin(QUEEN_SHARD, queen_shard_index);
	if (queen_shard_slot == NULL)
		proc_exit(0);
	/* what a predecessor that could not run its exit callback still held */
	queen_permits_reclaim(queen_shard_index, "at start (left by the previous process)");
	on_shmem_exit(queen_shard_exit, Int32GetDatum(queen_shard_index));
	queen_shard_test_start_wait();
	queen_worker_connect(queen_shard_slot);
	pgstat_report_appname("queen shard");
	/* what an earlier process of this shard left half-written */
	queen_spool_recover(queen_shard_index, queen_broker->nshards);

	queen_shard_cxt = AllocSetContextCreate(TopMemoryContext, "queen shard",
											ALLOCSET_DEFAULT_SIZES);
	queen_bundle_cxt = AllocSetContextCreate(TopMemoryContext, "queen bundle",
											 ALLOCSET_DEFAULT_SIZES);
	queen_turn_cxt = AllocSetContextCreate(TopMemoryContext, "queen shard turn",
										   ALLOCSET_DEFAULT_SIZES);
	queen_groups_create(queen_shard_cxt);
	for (l = 0; l < queen_broker->nlisteners; l++)
		queen_ring_reader_init(&queen_readers[l], queen_submit_ring(l, queen_shard_index),
							   queen_shard_cxt);
	queen_shard_answers_init(queen_shard_index, queen_shard_cxt);
	queen_shard_controls_init(queen_shard_who, queen_shard_cxt, queen_bundle_cxt);

	if (queen_shard_index == 0)
		queen_broker_log_config("shard");
	(void) queen_shard_check_extension(true);
	/* listeners may have been waiting for us */
	for (l = 0; l < queen_broker->nlisteners; l++)
		queen_worker_wake(&queen_broker->listeners[l]);
}

/*
 * One turn's work: control requests, then a bundle (or, in maintenance
 * mode, the spool) if a group is ready and a permit free.  Returns whether
 * anything was done; *now is when the groups were looked at, and *timeout
 * is lowered to when the next turn is due.
 */
static bool
queen_shard_work(TimestampTz *now, long *timeout)
{
	bool		worked = queen_shard_run_controls();
	long		hold_ms;

	*now = GetCurrentTimestamp();

	if (queen_shard_has_ready(*now, &hold_ms))
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
			*timeout = queen_fusion_hold_ms;
	}
	else if (hold_ms >= 0)
		*timeout = hold_ms;
	return worked;
}

/*
 * A closing shard with nothing more to do: true to exit 0 (every listener
 * gone, or the grace spent).  Terminated alone, it exits 1 from here.
 */
static bool
queen_shard_close(TimestampTz closing_since, TimestampTz now, long *timeout)
{
	bool		idle = dlist_is_empty(&queen_groups_ready) && !queen_shard_answers_pending();

	/* every listener gone (or never started): nothing more can arrive */
	if (idle && queen_workers_all_in(queen_broker->listeners, queen_broker->nlisteners,
									 1U << QUEEN_WORKER_STOPPED))
		return true;

	/*
	 * SIGTERM for this shard alone (pg_terminate_backend): what it held is
	 * answered; exit 1 so the postmaster starts it again, where exit 0
	 * would unregister it for good.  The listeners get the same signal at
	 * a cluster shutdown, so give them a moment to show it before deciding.
	 */
	if (idle && queen_worker_alone(queen_broker->listeners, queen_broker->nlisteners,
								   closing_since, now))
	{
		queen_spool_finish(queen_shard_index);
		queen_worker_restart(queen_shard_who);
	}
	if (TimestampDifferenceExceeds(closing_since, now, queen_shutdown_grace_ms(true)))
	{
		ereport(LOG,
				(errmsg("queen shard %d: listeners did not finish within %d ms; exiting",
						queen_shard_index, queen_shutdown_grace_ms(true))));
		return true;
	}
	*timeout = Min(*timeout, 100);
	return false;
}

void
queen_shard_main(Datum arg)
{
	TimestampTz closing_since = 0;
	TimestampTz last_sweep;

	queen_shard_start(DatumGetInt32(arg));
	last_sweep = GetCurrentTimestamp();
	for (;;)
	{
		TimestampTz now;
		long		timeout = 1000;
		long		spool_due;
		bool		worked;

		/*
		 * What a turn allocates and keeps nowhere (a log line's text, a
		 * reload's) goes with the turn: what must last has a context of its
		 * own (groups, the control queue, answers, one bundle).
		 */
		MemoryContextSwitchTo(queen_turn_cxt);
		MemoryContextReset(queen_turn_cxt);

		/* a cancel between transactions has nothing to cancel */
		QueryCancelPending = false;
		CHECK_FOR_INTERRUPTS();
		/* under steady load the loop never waits on the latch */
		queen_worker_check_postmaster();
		if (queen_worker_reload() && queen_shard_index == 0)
		{
			queen_permits_reconfigure();
			queen_broker_log_config("shard (reloaded)");
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
		worked = queen_shard_work(&now, &timeout);

		queen_shard_flush_answers();
		if (queen_shard_answers_pending())
			timeout = Min(timeout, 10);
		spool_due = queen_spool_idle(queen_shard_index, now);
		if (spool_due >= 0)
			timeout = Min(timeout, spool_due);

		/* under steady load too, or memory would follow every partition ever seen */
		if (TimestampDifferenceExceeds(last_sweep, now, 10000))
		{
			queen_groups_sweep(now);
			last_sweep = now;
		}

		if (worked)
			continue;
		if (queen_shard_closing && queen_shard_close(closing_since, now, &timeout))
			break;

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 timeout, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}

	MemoryContextSwitchTo(TopMemoryContext);
	queen_permit_cancel_wait(queen_shard_index);
	queen_spool_finish(queen_shard_index);
	proc_exit(0);
}
