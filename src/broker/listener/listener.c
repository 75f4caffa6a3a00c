/*-------------------------------------------------------------------------
 *
 * listener.c
 *	  The HTTP listener: the broker's front door, one background worker
 *	  (or several sharing the port) that never touches the database.  This
 *	  file is its event loop, the table of requests waiting for a shard,
 *	  and the collection of the shards' verdicts and replies; the routes
 *	  are in routes.c, their handlers in handle_push.c, handle_consume.c
 *	  and handle_admin.c, and parked pops in longpoll.c.
 *
 * One event loop.  The client sockets live in http.c's inner epoll fd,
 * which sits in this process's WaitEventSet beside the latch and
 * postmaster death; the latch is how the shards say "verdicts are waiting
 * for you" or "there is room in my ring again".  No threads.
 *
 * If a shard ends before answering, the fate of what it had taken is
 * unknown: it may have committed it.  The listener sees the shard's new
 * incarnation (or its ring's new epoch), writes those groups' frames to the
 * disk spool itself and answers them "buffered"; the drain's dedup probe
 * on the transactionIds drops whatever had been committed.  A stopping
 * listener does the same with what is still unanswered when its wait runs
 * out.  "failed" is left for items that were neither stored nor spooled.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "listener.h"
#include "codec.h"
#include "routes.h"
#include "maintenance/spool.h"
#include "ops.h"
#include "worker.h"

#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

static void queen_answer_unknown(QueenPending *p, const char *why);

/* How often the bundle summary is logged. */
#define QUEEN_SUMMARY_INTERVAL_MS			10000

int			queen_listener_index;
QueenHttpServer *queen_listener_http;
bool		queen_listener_closing = false;
pg_uuid_t	queen_listener_tenant;	/* the default tenant: no tenancy header yet */

static QueenWorkerSlot *queen_listener_slot;
static HTAB *queen_pending;
static uint64 queen_next_request;
static QueenRingWriter queen_submit[QUEEN_MAX_SHARDS];
static QueenRingReader queen_verdicts[QUEEN_MAX_SHARDS];
static uint32 queen_known_incarnation[QUEEN_MAX_SHARDS];
static MemoryContext queen_listener_cxt;

/* ----------------------------------------------------------------
 *		Sending to shards, and the pending table
 * ----------------------------------------------------------------
 */

/* Why a shard cannot take a request now, for a 503. */
const char *
queen_listener_unavailable(int shard)
{
	switch (queen_worker_state(&queen_broker->shards[shard]))
	{
		case QUEEN_WORKER_WAITING:
			return psprintf("the broker is waiting for database \"%s\" and CREATE EXTENSION queen there",
							queen_database);
		case QUEEN_WORKER_CLOSING:
			return "the broker is shutting down";
		case QUEEN_WORKER_STANDBY:
			return "this node is a standby (in recovery) and takes no writes: send requests to the primary; the broker here serves once this node is promoted";
		default:
			return psprintf("the broker's shard %d is not running (database \"%s\")",
							shard, queen_database);
	}
}

/*
 * Is the shard serving?  Not one that restarted since the loop last looked
 * (queen_check_shards, at the top of the loop, fails its predecessor's
 * requests): a request sent to it now would be failed with them, answered
 * that its shard restarted before answering, when the new one would have
 * answered it.  Until the next turn it counts as not serving yet.
 */
bool
queen_listener_shard_ready(int shard)
{
	return queen_worker_state(&queen_broker->shards[shard]) == QUEEN_WORKER_READY &&
		pg_atomic_read_u32(&queen_broker->shards[shard].incarnation) ==
		queen_known_incarnation[shard];
}

/* A message for a shard's ring: it lives until the ring has taken it. */
StringInfo
queen_listener_message_new(void)
{
	return queen_wire_new(queen_listener_cxt);
}

void
queen_listener_send(int shard, StringInfo msg)
{
	queen_ring_send(&queen_submit[shard], msg);
}

/*
 * Enter a request into the pending table until its shard answers.  The id
 * carries our incarnation, so answers to a previous process's requests are
 * recognised and dropped.
 */
QueenPending *
queen_listener_register(QueenPendingKind kind, QueenHttpRequest *http, QueenPushRequest *push)
{
	uint64		id = ((uint64) pg_atomic_read_u32(&queen_listener_slot->incarnation) << 40) |
		(++queen_next_request & ((UINT64CONST(1) << 40) - 1));
	QueenPending *p;
	bool		found;

	p = (QueenPending *) hash_search(queen_pending, &id, HASH_ENTER, &found);
	p->kind = kind;
	p->http = http;
	p->push = push;
	p->shard = -1;
	p->op = 0;
	p->wait = NULL;
	return p;
}

/*
 * Take a request out of the pending table to answer it.  The entry's memory
 * goes back to the table, so the caller gets a copy.
 */
QueenPending
queen_listener_take(QueenPending *p)
{
	QueenPending copy = *p;

	hash_search(queen_pending, &copy.id, HASH_REMOVE, NULL);
	return copy;
}

/* Requests waiting for a shard's answer. */
long
queen_listener_waiting(void)
{
	return hash_get_num_entries(queen_pending);
}

/* ----------------------------------------------------------------
 *		Verdicts, and groups whose fate is unknown
 * ----------------------------------------------------------------
 */

/* A shard's verdict for one group of a push. */
static void
queen_apply_verdict(QueenPending *p, QueenMsgReader *m)
{
	QueenPushRequest *r = p->push;
	QueenWireVerdict v;
	uint32		group;
	uint8		outcome;
	uint32		nframes;
	QueenReqGroup *g;
	uint32		k;

	if (!queen_wire_get(m, QUEEN_MSG_VERDICT, &v) || v.group >= (uint32) r->ngroups)
	{
		elog(LOG, "queen listener %d: dropped a malformed verdict", queen_listener_index);
		return;
	}
	group = v.group;
	outcome = v.outcome;
	nframes = v.nframes;
	g = &r->groups[group];
	if (g->answered)
		return;
	if (outcome == QUEEN_GROUP_DONE && nframes != (uint32) g->nitems)
	{
		elog(LOG, "queen listener %d: verdict for %u frames, group has %d",
			 queen_listener_index, nframes, g->nitems);
		outcome = QUEEN_GROUP_FAILED;
	}
	for (k = 0; outcome == QUEEN_GROUP_DONE && k < (uint32) g->nitems; k++)
	{
		int			it = g->items[k];
		uint8		status;
		const char *idp;

		/* anything else stays without a verdict and renders failed */
		if (queen_wire_get_verdict_frame(m, &status, &idp) &&
			(status == QUEEN_VERDICT_QUEUED || status == QUEEN_VERDICT_DUPLICATE ||
			 status == QUEEN_VERDICT_BUFFERED || status == QUEEN_VERDICT_REFUSED))
		{
			r->status[it] = status;
			memcpy(r->ids[it].data, idp, UUID_LEN);
		}
	}
	if (outcome == QUEEN_GROUP_UNAVAILABLE)
		r->unavailable++;
	if (outcome == QUEEN_GROUP_SPOOL_FAILED)
		r->spool_failed = true;
	queen_push_group_answered(r, g);
}

/* Spool files a listener writes stay far below the 1 GB allocation limit. */
#define QUEEN_LISTENER_SPOOL_FLUSH_BYTES	(64 * 1024 * 1024)

/* Does this group of a pending push have an unknown fate (see below)? */
static bool
queen_group_unsettled(QueenReqGroup *g, int shard)
{
	return !g->answered && (shard < 0 || g->shard == shard);
}

/*
 * Write the records of a batch of pending pushes as one spool file, then
 * settle their unsettled groups: "buffered" if the file is durable,
 * answered without a verdict (rendered failed) if not.
 */
static void
queen_spool_unknown_flush(StringInfo records, int items, List *batch, int shard)
{
	char	   *why = NULL;
	bool		ok;
	ListCell   *lc;

	ok = queen_spool_write_file(records, items, QUEEN_MAX_SHARDS + queen_listener_index, &why);
	if (ok)
	{
		queen_count(QUEEN_COUNT_SPOOL_UNKNOWN_FATE, items);
		ereport(LOG,
				(errmsg("queen listener %d: spooled %d items whose shard ended before answering; they are answered buffered, and the drain drops any that were committed",
						queen_listener_index, items)));
	}
	else
	{
		queen_count(QUEEN_COUNT_FAILED, items);
		ereport(WARNING,
				(errcode_for_file_access(),
				 errmsg("queen listener %d: could not spool %d items whose shard ended before answering; they are answered failed, though some may have been committed: %s",
						queen_listener_index, items, why)));
	}
	foreach(lc, batch)
	{
		QueenPushRequest *r = ((QueenPending *) lfirst(lc))->push;
		int			i,
					k;

		for (i = 0; i < r->ngroups; i++)
		{
			QueenReqGroup *g = &r->groups[i];

			if (!queen_group_unsettled(g, shard))
				continue;
			for (k = 0; ok && k < g->nitems; k++)
				r->status[g->items[k]] = QUEEN_VERDICT_BUFFERED;
			queen_push_group_answered(r, g);
		}
	}
	resetStringInfo(records);
}

/*
 * The unanswered groups of these pending pushes (of one shard, or of any
 * with shard < 0) have an unknown fate: their shard ended, or we stop
 * waiting for it, and it may have committed them.  Write their frames to
 * the spool, durably, and mark their items "buffered"; the drain replays
 * them and drops what is stored already (the dedup probe on the
 * transactionIds).  The groups count as answered either way; if the spool
 * cannot take them they keep no verdict and render failed.
 */
static void
queen_spool_unknown(List *entries, int shard)
{
	StringInfoData records;
	StringInfoData frames;
	List	   *batch = NIL;
	int			items = 0;
	ListCell   *lc;

	initStringInfo(&records);
	initStringInfo(&frames);
	foreach(lc, entries)
	{
		QueenPending *p = (QueenPending *) lfirst(lc);
		QueenPushRequest *r = p->push;
		int			i;

		if (p->kind != QUEEN_PENDING_PUSH)
			continue;
		for (i = 0; i < r->ngroups; i++)
		{
			QueenReqGroup *g = &r->groups[i];
			const QueenHttpItem *first = &r->items[g->items[0]];
			QueenSpoolRecord rec;

			if (!queen_group_unsettled(g, shard))
				continue;
			resetStringInfo(&frames);
			queen_push_group_frames(&frames, r, g);
			rec.tenant = r->tenant;
			rec.queue = first->queue;
			rec.qlen = (uint16) first->queue_len;
			rec.partition = first->partition;
			rec.plen = (uint16) first->partition_len;
			rec.nframes = (uint32) g->nitems;
			rec.frames = frames.data;
			rec.frames_len = frames.len;
			queen_spool_append_record(&records, &rec);
			items += g->nitems;
		}
		batch = lappend(batch, p);
		if (records.len >= QUEEN_LISTENER_SPOOL_FLUSH_BYTES)
		{
			queen_spool_unknown_flush(&records, items, batch, shard);
			list_free(batch);
			batch = NIL;
			items = 0;
		}
	}
	if (items > 0)
		queen_spool_unknown_flush(&records, items, batch, shard);
	list_free(batch);
	pfree(records.data);
	pfree(frames.data);
}

/*
 * Answer pending entries that will get nothing more from a shard: a push
 * renders what it has (items without a verdict render failed), a control
 * request gets 503 with why.  Frees the list.
 */
static void
queen_answer_abandoned(List *entries, const char *why)
{
	ListCell   *lc;

	foreach(lc, entries)
	{
		QueenPending d = queen_listener_take((QueenPending *) lfirst(lc));

		if (d.kind == QUEEN_PENDING_PUSH)
			queen_push_render(&d);
		else if (queen_control_op(d.op)->flags & QUEEN_OP_CONSUMES)
		{
			if (d.kind == QUEEN_PENDING_POP)
				queen_pop_abandoned(d.wait);
			queen_answer_unknown(&d, why);
		}
		else
			queen_respond_error(d.http, 503, why);
	}
	list_free(entries);
}

/*
 * A consumption request whose shard will not answer: its outcome is
 * unknown (the shard may have committed it), and the answer says so, 500.
 * A pop that committed holds a lease that expires and redelivers its
 * messages; an ack sent again is answered noop where it was applied.
 */
static void
queen_answer_unknown(QueenPending *p, const char *why)
{
	queen_respond_error(p->http, 500,
						psprintf("%s; the request's outcome is unknown: a pop's lease, if taken, expires and redelivers, and an ack may be sent again",
								 why));
}

/*
 * A shard restarted: spool every push group still waiting on it (their
 * fate is unknown) and answer control requests it had 503.
 */
static void
queen_fail_shard(int shard)
{
	HASH_SEQ_STATUS seq;
	QueenPending *p;
	List	   *pushes = NIL;
	List	   *done = NIL;
	ListCell   *lc;

	hash_seq_init(&seq, queen_pending);
	while ((p = (QueenPending *) hash_seq_search(&seq)) != NULL)
	{
		if (p->kind != QUEEN_PENDING_PUSH)
		{
			if (p->shard == shard)
				done = lappend(done, p);
			continue;
		}
		pushes = lappend(pushes, p);
	}
	queen_spool_unknown(pushes, shard);
	foreach(lc, pushes)
	{
		p = (QueenPending *) lfirst(lc);
		if (p->push->waiting == 0)
			done = lappend(done, p);
	}
	list_free(pushes);

	queen_answer_abandoned(done, psprintf("the broker's shard %d restarted before answering", shard));
}

/* ----------------------------------------------------------------
 *		Shard traffic
 * ----------------------------------------------------------------
 */

/* Notice shards that restarted since we last looked. */
static void
queen_check_shards(void)
{
	int			s;

	for (s = 0; s < queen_broker->nshards; s++)
	{
		uint32		inc = pg_atomic_read_u32(&queen_broker->shards[s].incarnation);

		if (inc == queen_known_incarnation[s])
			continue;
		queen_known_incarnation[s] = inc;
		/* anything queued for the old process is void */
		queen_ring_writer_discard(&queen_submit[s]);
		queen_fail_shard(s);
	}
}

static void
queen_take_reply(QueenPending *p, QueenMsgReader *m)
{
	QueenWireReply reply;

	if (!queen_wire_get(m, QUEEN_MSG_REPLY, &reply) || reply.status < 100 || reply.status > 599)
	{
		if (p->kind == QUEEN_PENDING_POP)
			queen_pop_abandoned(p->wait);
		queen_respond_error(p->http, 500, "malformed reply from the broker's shard");
		return;
	}
	if (p->kind == QUEEN_PENDING_POP)
	{
		queen_pop_reply(p, reply.status, reply.body.data, reply.body.len);
		return;
	}
	queen_http_respond(p->http, reply.status, "application/json", reply.body.data, reply.body.len,
					   queen_reply_headers(reply.status));
}

/* Take every verdict and reply the shards have for us. */
static void
queen_drain_verdicts(void)
{
	int			s;

	for (s = 0; s < queen_broker->nshards; s++)
	{
		bool		was_reset = false;

		for (;;)
		{
			StringInfo	msg;
			bool		reset;
			QueenMsgReader m;
			uint8		type;
			uint64		id;
			QueenPending *p;

			msg = queen_ring_receive(&queen_verdicts[s], &reset);
			if (msg == NULL && reset)
			{
				/* what the shard wrote in the new epoch is there to read now */
				was_reset = true;
				msg = queen_ring_receive(&queen_verdicts[s], &reset);
			}
			if (msg == NULL)
				break;

			type = queen_wire_get_head(&m, msg, &id);
			if (type == 0)
				continue;
			p = (QueenPending *) hash_search(queen_pending, &id, HASH_FIND, NULL);
			if (p == NULL)
				continue;		/* a request from before our restart */

			if (type == QUEEN_MSG_VERDICT && p->kind == QUEEN_PENDING_PUSH)
			{
				queen_apply_verdict(p, &m);
				if (p->push->waiting == 0)
				{
					QueenPending done = queen_listener_take(p);

					queen_push_render(&done);
				}
			}
			else if (type == QUEEN_MSG_REPLY && p->kind != QUEEN_PENDING_PUSH)
			{
				QueenPending done = queen_listener_take(p);

				queen_take_reply(&done, &m);
			}
			else
				elog(LOG, "queen listener %d: dropped an unexpected message of type %d",
					 queen_listener_index, type);
		}
		if (was_reset)
		{
			/* the shard restarted: what it had not answered is lost */
			queen_check_shards();
		}
		if (queen_verdicts[s].wake_writer)
		{
			queen_verdicts[s].wake_writer = false;
			queen_worker_wake(&queen_broker->shards[s]);
		}
	}
}

/* Move queued submissions into the shards' rings and wake those that got some. */
static bool
queen_flush_submissions(void)
{
	bool		backlog = false;
	int			s;

	for (s = 0; s < queen_broker->nshards; s++)
	{
		bool		reset;

		if (queen_submit[s].queue == NIL)
			continue;
		if (queen_ring_flush(&queen_submit[s], &reset))
			queen_worker_wake(&queen_broker->shards[s]);
		if (reset)
		{
			queen_known_incarnation[s] = pg_atomic_read_u32(&queen_broker->shards[s].incarnation);
			queen_fail_shard(s);
		}
		if (queen_submit[s].queue != NIL)
			backlog = true;
	}
	return backlog;
}

/*
 * Answer everything still outstanding (the shutdown wait ran out): pushes
 * are spooled (their fate is unknown), control requests get 503.
 */
static void
queen_abandon_pending(void)
{
	HASH_SEQ_STATUS seq;
	QueenPending *p;
	List	   *all = NIL;

	hash_seq_init(&seq, queen_pending);
	while ((p = (QueenPending *) hash_seq_search(&seq)) != NULL)
		all = lappend(all, p);
	queen_spool_unknown(all, -1);
	queen_answer_abandoned(all, "the broker is shutting down");
}

/* ----------------------------------------------------------------
 *		Main loop
 * ----------------------------------------------------------------
 */

static void
queen_listener_config(QueenHttpConfig *cfg)
{
	cfg->listen_address = queen_http_listen_address;
	cfg->port = queen_http_port;
	cfg->reuse_port = true;
	cfg->max_body_bytes = (size_t) queen_max_body_bytes;
	cfg->idle_timeout_ms = queen_http_idle_timeout_ms;
	cfg->header_timeout_ms = queen_http_header_timeout_ms;
	cfg->body_timeout_ms = queen_http_body_timeout_ms;
	cfg->max_connections = queen_http_max_connections;
}

/* Bind the port, retrying while it is taken (a previous listener may still be closing). */
static void
queen_listener_bind(void)
{
	QueenHttpConfig cfg;
	bool		logged = false;

	for (;;)
	{
		char	   *error = NULL;

		queen_listener_config(&cfg);
		queen_listener_http = queen_http_create(&cfg, queen_route_request, NULL, &error);
		if (queen_listener_http != NULL)
			break;
		if (!logged)
			ereport(LOG,
					(errmsg("queen listener %d: %s; retrying every 5 seconds",
							queen_listener_index, error ? error : "could not listen")));
		logged = true;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 5000L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		queen_worker_poll_signals();
	}
	{
		QueenHttpStats stats;

		queen_http_stats(queen_listener_http, &stats);
		ereport(LOG,
				(errmsg("queen listener %d: listening on %s:%d",
						queen_listener_index, queen_http_listen_address,
						queen_http_bound_port(queen_listener_http)),
				 errdetail("Up to " UINT64_FORMAT " connections; open-file limit " UINT64_FORMAT ".",
						   stats.max_open, stats.fd_limit)));
	}
}

/*
 * The listener's memory, its pending table and its rings to and from every
 * shard.
 */
static void
queen_listener_setup(void)
{
	int			s;

	queen_listener_cxt = AllocSetContextCreate(TopMemoryContext, "queen listener",
											   ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(queen_listener_cxt);

	queen_pending = queen_hash_create("queen pending requests", sizeof(uint64),
									  sizeof(QueenPending), 1024, queen_listener_cxt);
	for (s = 0; s < queen_broker->nshards; s++)
	{
		/*
		 * Incarnation before epoch: a shard resets its rings before it
		 * publishes a new incarnation, so either we see the new epoch, or
		 * we see the incarnation change later and adopt it then.
		 */
		queen_known_incarnation[s] = pg_atomic_read_u32(&queen_broker->shards[s].incarnation);
		pg_read_barrier();
		queen_ring_writer_init(&queen_submit[s], queen_submit_ring(queen_listener_index, s),
							   queen_listener_cxt, false);
		queen_ring_reader_init(&queen_verdicts[s], queen_verdict_ring(s, queen_listener_index),
							   queen_listener_cxt);
	}
}

/* A reload applies the new settings; a shutdown request starts closing. */
static void
queen_listener_signals(TimestampTz *closing_since)
{
	CHECK_FOR_INTERRUPTS();
	if (ConfigReloadPending)
	{
		QueenHttpConfig cfg;

		ConfigReloadPending = false;
		ProcessConfigFile(PGC_SIGHUP);
		queen_listener_config(&cfg);
		queen_http_reconfigure(queen_listener_http, &cfg);
		if (queen_listener_index == 0)
			queen_broker_log_config("listener (reloaded)");
	}
	if (ShutdownRequestPending && !queen_listener_closing)
	{
		queen_listener_closing = true;
		*closing_since = GetCurrentTimestamp();
		queen_worker_set_state(queen_listener_slot, QUEEN_WORKER_CLOSING);
		queen_http_stop_accepting(queen_listener_http);
		/* nothing will be delivered to a parked pop now */
		queen_longpoll_close();
		ereport(LOG,
				(errmsg("queen listener %d: stopping; answering %ld outstanding requests",
						queen_listener_index, hash_get_num_entries(queen_pending))));
	}
}

/*
 * While closing: may the loop end?  Yes once nothing is outstanding, or
 * once the wait ran out (what is left is spooled and answered).
 */
static bool
queen_listener_closed(TimestampTz closing_since, TimestampTz now)
{
	if (hash_get_num_entries(queen_pending) == 0 && queen_http_busy(queen_listener_http) == 0 &&
		TimestampDifferenceExceeds(closing_since, now, 500))
	{
		/*
		 * SIGTERM to this listener alone (the shards still serve) restarts
		 * it.  At a cluster shutdown the shards got the signal too and
		 * show it within the moment waited above.
		 */
		if (queen_worker_alone(queen_broker->shards, queen_broker->nshards,
							   closing_since, now))
		{
			queen_http_destroy(queen_listener_http);
			queen_worker_restart(psprintf("listener %d", queen_listener_index));
		}
		return true;
	}
	if (TimestampDifferenceExceeds(closing_since, now, queen_shutdown_grace_ms(false)))
	{
		ereport(LOG,
				(errmsg("queen listener %d: %ld requests still outstanding after %d ms; spooling their pushes",
						queen_listener_index, hash_get_num_entries(queen_pending),
						queen_shutdown_grace_ms(false))));
		queen_abandon_pending();
		queen_http_poll(queen_listener_http);
		return true;
	}
	return false;
}

void
queen_listener_main(Datum arg)
{
	WaitEventSet *set;
	MemoryContext scratch;
	TimestampTz closing_since = 0;
	TimestampTz last_summary;

	queen_listener_index = DatumGetInt32(arg);
	queen_listener_slot = queen_worker_begin(QUEEN_LISTENER, queen_listener_index);
	if (queen_listener_slot == NULL)
		proc_exit(0);

	/*
	 * No database connection here, so no database encoding either.  Bodies
	 * are UTF-8 and JSON escapes must decode to UTF-8, exactly as in the
	 * UTF8 database the shards store into (CREATE EXTENSION insists on it).
	 */
	SetDatabaseEncoding(PG_UTF8);
	(void) queen_uuid_parse(QUEEN_DEFAULT_TENANT, &queen_listener_tenant);
	queen_listener_setup();
	/* a predecessor's parked pops died with its connections */
	queen_metrics_listener_gauges(queen_listener_index, 0, 0);

	if (queen_listener_index == 0)
		queen_broker_log_config("listener");
	queen_listener_bind();
	queen_worker_set_state(queen_listener_slot, QUEEN_WORKER_READY);

	set = CreateWaitEventSet(TopMemoryContext, 3);
	AddWaitEventToSet(set, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	AddWaitEventToSet(set, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
	AddWaitEventToSet(set, WL_SOCKET_READABLE, queen_http_epoll_fd(queen_listener_http), NULL, NULL);

	/*
	 * Whatever must outlive a request lives in an explicit context (the
	 * request's, the rings', the pending table's); everything else made
	 * during one turn of the loop (error texts, lists) goes here and is
	 * freed at the end of the turn.
	 */
	scratch = AllocSetContextCreate(queen_listener_cxt, "queen listener scratch",
									ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(scratch);

	last_summary = GetCurrentTimestamp();
	for (;;)
	{
		WaitEvent	events[3];
		long		timeout;
		long		http_timeout;
		TimestampTz now;
		bool		backlog;

		queen_listener_signals(&closing_since);

		/* verdicts a shard wrote before it ended first: they need no spooling */
		queen_drain_verdicts();
		queen_check_shards();
		queen_http_poll(queen_listener_http);
		backlog = queen_flush_submissions();
		queen_drain_verdicts();

		now = GetCurrentTimestamp();
		if (queen_listener_index == 0 &&
			TimestampDifferenceExceeds(last_summary, now, QUEEN_SUMMARY_INTERVAL_MS))
		{
			queen_metrics_bundle_summary();
			last_summary = now;
		}
		if (queen_listener_closing && queen_listener_closed(closing_since, now))
			break;

		timeout = QUEEN_SUMMARY_INTERVAL_MS;
		http_timeout = queen_http_next_timeout_ms(queen_listener_http);
		if (http_timeout >= 0)
			timeout = Min(timeout, http_timeout);
		if (backlog || queen_listener_closing)
			timeout = Min(timeout, 10);
		{
			long		pop_due = queen_longpoll_tick(GetCurrentTimestamp());

			if (pop_due >= 0)
				timeout = Min(timeout, pop_due);
		}

		MemoryContextReset(scratch);
		(void) WaitEventSetWait(set, timeout, events, lengthof(events), PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}

	queen_http_destroy(queen_listener_http);
	proc_exit(0);
}
