/*-------------------------------------------------------------------------
 *
 * listener.c
 *	  The HTTP listener: the broker's front door, one background worker
 *	  (or several sharing the port) that never touches the database.
 *
 * One event loop.  The client sockets live in http.c's inner epoll fd,
 * which sits in this process's WaitEventSet beside the latch and
 * postmaster death; the latch is how the shards say "verdicts are waiting
 * for you" or "there is room in my ring again".  No threads.
 *
 * A push is handled as the seed describes: parse the body without building
 * a tree (push_body.c), mint a UUIDv7 per item, default the transactionId
 * to the id's text, layer-1 dedup on queue 0x1F partition 0x1F
 * transactionId inside the request, group by (tenant, queue, partition),
 * send each group's frames, packed exactly as they will be stored, to the
 * shard that owns the partition, and answer 201 once every group has its
 * verdict.  Followers of a layer-1 leader report the leader's final id.
 *
 * Requests that need the database for something other than a push
 * (/health, /api/v1/configure, DELETE of a queue) are handed to a shard as
 * control requests, so this process never blocks on SQL.  Maintenance
 * mode and the spool's state are in shared memory (maintenance.c) and are
 * answered here; switching the mode writes its small state file, the one
 * synchronous write this loop makes, and only on that admin request.
 *
 * If a shard ends before answering, the fate of what it had taken is
 * unknown: it may have committed it.  The listener sees the shard's new
 * incarnation (or its ring's new epoch), writes those groups' frames to the
 * disk spool itself and answers them "buffered"; the drain's dedup probe
 * on the transactionIds drops whatever had been committed.  A stopping
 * listener does the same with what is still unanswered when its wait runs
 * out.  "failed" is left for items that were neither stored nor spooled.
 * A push with a group whose shard is not serving is refused whole, 503,
 * before anything is sent.
 *
 *-------------------------------------------------------------------------
 */
#include "broker.h"
#include "wire.h"
#include "http.h"
#include "push_body.h"

#include <http_parser.h>

#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/json.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

/* How often the bundle summary is logged. */
#define QUEEN_SUMMARY_INTERVAL_MS			10000

typedef enum QueenPendingKind
{
	QUEEN_PENDING_PUSH,
	QUEEN_PENDING_CONTROL
} QueenPendingKind;

/* One group of a push request. */
typedef struct QueenReqGroup
{
	int		   *items;			/* leader item indexes, item order */
	int			nitems;
	int			shard;
	bool		answered;
} QueenReqGroup;

/* A push request between its arrival and its answer. */
typedef struct QueenPushRequest
{
	QueenHttpItem *items;
	int			nitems;
	pg_uuid_t  *ids;			/* minted; duplicates get the original's */
	char	  **txns;			/* the transactionId of each item */
	int		   *leader;			/* layer-1 leader, or -1 */
	uint8	   *status;			/* QueenFrameVerdict, 0 = not yet */
	QueenReqGroup *groups;
	int			ngroups;
	int			waiting;		/* groups without a verdict */
	int			unavailable;	/* groups answered "database not there" */
	bool		spool_failed;	/* maintenance mode, and the spool failed */
} QueenPushRequest;

typedef struct QueenPending
{
	uint64		id;				/* hash key */
	QueenPendingKind kind;
	QueenHttpRequest *http;
	QueenPushRequest *push;		/* kind PUSH */
	int			shard;			/* kind CONTROL */
} QueenPending;

static int	queen_listener_index;
static QueenWorkerSlot *queen_listener_slot;
static QueenHttpServer *queen_http;
static HTAB *queen_pending;
static uint64 queen_next_request;
static QueenRingWriter queen_submit[QUEEN_MAX_SHARDS];
static QueenRingReader queen_verdicts[QUEEN_MAX_SHARDS];
static uint32 queen_known_incarnation[QUEEN_MAX_SHARDS];
static bool queen_listener_closing = false;
static int	queen_control_next_shard = 0;
static MemoryContext queen_listener_cxt;
static pg_uuid_t queen_listener_tenant;	/* the default tenant: no tenancy header yet */

/* ----------------------------------------------------------------
 *		Responses
 * ----------------------------------------------------------------
 */

static void
queen_respond_json(QueenHttpRequest *req, int status, const char *json)
{
	queen_http_respond(req, status, "application/json", json, strlen(json), NULL);
}

/* {"error": message}, message escaped. */
static void
queen_respond_error(QueenHttpRequest *req, int status, const char *message)
{
	StringInfoData buf;
	MemoryContext old = MemoryContextSwitchTo(req->mcxt);

	initStringInfo(&buf);
	appendStringInfoString(&buf, "{\"error\":");
	escape_json(&buf, message);
	appendStringInfoChar(&buf, '}');
	MemoryContextSwitchTo(old);
	queen_http_respond(req, status, "application/json", buf.data, buf.len, NULL);
}

static const char *
queen_shard_unavailable_message(int shard)
{
	switch (queen_worker_state(&queen_broker->shards[shard]))
	{
		case QUEEN_WORKER_WAITING:
			return psprintf("the broker is waiting for database \"%s\" and CREATE EXTENSION queen there",
							queen_database);
		case QUEEN_WORKER_CLOSING:
			return "the broker is shutting down";
		default:
			return psprintf("the broker's shard %d is not running (database \"%s\")",
							shard, queen_database);
	}
}

/* ----------------------------------------------------------------
 *		Sending to shards
 * ----------------------------------------------------------------
 */

static bool
queen_shard_ready(int shard)
{
	return queen_worker_state(&queen_broker->shards[shard]) == QUEEN_WORKER_READY;
}

static StringInfo
queen_message_new(void)
{
	MemoryContext old = MemoryContextSwitchTo(queen_listener_cxt);
	StringInfo	msg = makeStringInfo();

	MemoryContextSwitchTo(old);
	return msg;
}

static void
queen_send_to_shard(int shard, StringInfo msg)
{
	queen_ring_send(&queen_submit[shard], msg);
}

static uint64
queen_register(QueenPendingKind kind, QueenHttpRequest *http, QueenPushRequest *push)
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
	return id;
}

/*
 * Take a request out of the pending table to answer it.  The entry's memory
 * goes back to the table, so the caller gets a copy.
 */
static QueenPending
queen_pending_take(QueenPending *p)
{
	QueenPending copy = *p;

	hash_search(queen_pending, &copy.id, HASH_REMOVE, NULL);
	return copy;
}

/* ----------------------------------------------------------------
 *		POST /api/v1/push
 * ----------------------------------------------------------------
 */

/*
 * A group of a push is answered.  Items with no verdict of their own render
 * as failed, so a group answered without one needs nothing more.
 */
static void
queen_group_answered(QueenPushRequest *r, QueenReqGroup *g)
{
	g->answered = true;
	r->waiting--;
}

static void
queen_push_render(QueenPending *p)
{
	QueenPushRequest *r = p->push;
	QueenHttpRequest *http = p->http;
	StringInfoData buf;
	MemoryContext old;
	int			i;

	if (r->unavailable == r->ngroups)
	{
		queen_respond_error(http, 503, queen_shard_unavailable_message(r->groups[0].shard));
		return;
	}

	old = MemoryContextSwitchTo(http->mcxt);
	initStringInfo(&buf);
	appendStringInfoChar(&buf, '[');
	for (i = 0; i < r->nitems; i++)
	{
		uint8		status;
		pg_uuid_t  *id;
		char		idtext[UUID_LEN * 2 + 5];
		const char *word;

		if (r->leader[i] >= 0)
		{
			/* a follower copies its leader's final id, as a duplicate */
			status = r->status[r->leader[i]] ? QUEEN_VERDICT_DUPLICATE : QUEEN_VERDICT_FAILED;
			id = &r->ids[r->leader[i]];
		}
		else
		{
			/* no verdict: the group failed or its shard was not there */
			status = r->status[i] ? r->status[i] : QUEEN_VERDICT_FAILED;
			id = &r->ids[i];
		}
		word = status == QUEEN_VERDICT_QUEUED ? "queued" :
			status == QUEEN_VERDICT_DUPLICATE ? "duplicate" :
			status == QUEEN_VERDICT_BUFFERED ? "buffered" : "failed";
		queen_uuid_format(id, idtext);
		if (i > 0)
			appendStringInfoChar(&buf, ',');
		appendStringInfo(&buf, "{\"index\":%d,\"message_id\":\"%s\",\"transaction_id\":", i, idtext);
		escape_json(&buf, r->txns[i]);
		appendStringInfoString(&buf, ",\"queueName\":");
		escape_json(&buf, r->items[i].queue);
		appendStringInfo(&buf, ",\"status\":\"%s\"}", word);
	}
	appendStringInfoChar(&buf, ']');
	MemoryContextSwitchTo(old);
	/* as Queen: in maintenance mode a spool failure fails the request */
	queen_http_respond(http, r->spool_failed ? 500 : 201, "application/json",
					   buf.data, buf.len, NULL);
}

/* The frames of one group, as its shard stores them (and the spool keeps them). */
static void
queen_group_frames(StringInfo out, const QueenPushRequest *r, const QueenReqGroup *g)
{
	int			k;

	for (k = 0; k < g->nitems; k++)
	{
		int			it = g->items[k];
		QueenFrame	frame;

		memset(&frame, 0, sizeof(frame));
		frame.message_id = r->ids[it];
		frame.txn = r->txns[it];
		frame.txn_len = (uint16) strlen(r->txns[it]);
		frame.payload = r->items[it].payload;
		frame.payload_len = (uint32) r->items[it].payload_len;
		queen_frame_append(out, &frame);
	}
}

static void
queen_handle_push(QueenHttpRequest *req)
{
	QueenPushRequest *r;
	const char *problem;
	QueenItemKey *keys;
	int		  **members;
	int		   *nmembers;
	int			i;
	uint64		id;
	QueenPending *p;
	MemoryContext old;
	bool		too_many;

	if (queen_listener_closing)
	{
		queen_respond_error(req, 503, "the broker is shutting down");
		return;
	}

	/*
	 * What a request costs here grows with its items (their ids, groups,
	 * frames and results: about 1 kB each beyond the payloads), so their
	 * number is capped: with the body, its frames and their copies in the
	 * rings, a push stays within about four times its body plus 1 kB per
	 * item (docs/HTTP.md).
	 */
	old = MemoryContextSwitchTo(req->mcxt);
	r = palloc0(sizeof(QueenPushRequest));
	problem = queen_parse_push_body(req->body, req->body_len, queen_max_push_items,
									&r->items, &r->nitems, &too_many);
	if (problem != NULL)
	{
		MemoryContextSwitchTo(old);
		pg_atomic_fetch_add_u64(&queen_broker->metrics.push_rejected, 1);
		if (too_many)
			queen_respond_error(req, 413,
								psprintf("bad body: %s (queen.max_push_items)", problem));
		else
			queen_respond_error(req, 400, psprintf("bad body: %s", problem));
		return;
	}
	pg_atomic_fetch_add_u64(&queen_broker->metrics.push_requests, 1);
	pg_atomic_fetch_add_u64(&queen_broker->metrics.push_messages, r->nitems);
	if (r->nitems == 0)
	{
		MemoryContextSwitchTo(old);
		queen_respond_json(req, 201, "[]");
		return;
	}

	r->ids = palloc(sizeof(pg_uuid_t) * r->nitems);
	r->txns = palloc(sizeof(char *) * r->nitems);
	r->leader = palloc(sizeof(int) * r->nitems);
	r->status = palloc0(sizeof(uint8) * r->nitems);
	for (i = 0; i < r->nitems; i++)
	{
		queen_uuid_v7(&r->ids[i]);
		if (r->items[i].txn != NULL)
			r->txns[i] = r->items[i].txn;
		else
		{
			r->txns[i] = palloc(UUID_LEN * 2 + 5);
			queen_uuid_format(&r->ids[i], r->txns[i]);
		}
	}

	/* Layer 1 and groups, as the SQL door does them (bundle.c). */
	keys = palloc(sizeof(QueenItemKey) * r->nitems);
	for (i = 0; i < r->nitems; i++)
	{
		keys[i].queue = r->items[i].queue;
		keys[i].partition = r->items[i].partition;
		keys[i].txn = r->txns[i];
	}
	r->ngroups = queen_group_items(keys, r->nitems, r->leader, &members, &nmembers);
	r->groups = palloc0(sizeof(QueenReqGroup) * r->ngroups);
	r->waiting = r->ngroups;
	for (i = 0; i < r->ngroups; i++)
	{
		r->groups[i].items = members[i];
		r->groups[i].nitems = nmembers[i];
	}
	MemoryContextSwitchTo(old);

	/* a shard that is not serving (restarting, waiting): nothing is sent */
	for (i = 0; i < r->ngroups; i++)
	{
		const QueenHttpItem *first = &r->items[r->groups[i].items[0]];
		int			shard = queen_shard_of(&queen_listener_tenant, first->queue, first->queue_len,
										   first->partition, first->partition_len,
										   queen_broker->nshards);

		if (!queen_shard_ready(shard))
		{
			queen_respond_error(req, 503, queen_shard_unavailable_message(shard));
			return;
		}
	}

	id = queen_register(QUEEN_PENDING_PUSH, req, r);
	p = (QueenPending *) hash_search(queen_pending, &id, HASH_FIND, NULL);

	for (i = 0; i < r->ngroups; i++)
	{
		QueenReqGroup *g = &r->groups[i];
		const QueenHttpItem *first = &r->items[g->items[0]];
		StringInfo	msg;
		int			k;

		g->shard = queen_shard_of(&queen_listener_tenant, first->queue, first->queue_len,
								  first->partition, first->partition_len,
								  queen_broker->nshards);
		if (!queen_shard_ready(g->shard))
		{
			r->unavailable++;
			queen_group_answered(r, g);
			continue;
		}

		msg = queen_message_new();
		/* one allocation of the right size, not a doubling that leaves half unused */
		{
			Size		need = 64 + first->queue_len + first->partition_len;

			for (k = 0; k < g->nitems; k++)
				need += 64 + strlen(r->txns[g->items[k]]) + r->items[g->items[k]].payload_len;
			if (need < MaxAllocSize)
				enlargeStringInfo(msg, (int) need);
		}
		{
			QueenWirePush m = {id, (uint32) i, (const char *) queen_listener_tenant.data,
				first->queue, (uint16) first->queue_len,
				first->partition, (uint16) first->partition_len,
			(uint32) g->nitems};

			queen_wire_put_push(msg, &m);
		}
		queen_group_frames(msg, r, g);
		queen_send_to_shard(g->shard, msg);
	}

	if (r->waiting == 0)
	{
		QueenPending done = queen_pending_take(p);

		queen_push_render(&done);
	}
}

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

	if (!queen_wire_get_verdict(m, &v) || v.group >= (uint32) r->ngroups)
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
						status == QUEEN_VERDICT_BUFFERED))
		{
			r->status[it] = status;
			memcpy(r->ids[it].data, idp, UUID_LEN);
		}
	}
	if (outcome == QUEEN_GROUP_UNAVAILABLE)
		r->unavailable++;
	if (outcome == QUEEN_GROUP_SPOOL_FAILED)
		r->spool_failed = true;
	queen_group_answered(r, g);
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
		pg_atomic_fetch_add_u64(&queen_broker->spool.unknown_fate, items);
		ereport(LOG,
				(errmsg("queen listener %d: spooled %d items whose shard ended before answering; they are answered buffered, and the drain drops any that were committed",
						queen_listener_index, items)));
	}
	else
	{
		pg_atomic_fetch_add_u64(&queen_broker->metrics.failed, items);
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
			queen_group_answered(r, g);
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
			queen_group_frames(&frames, r, g);
			rec.tenant = queen_listener_tenant;
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
		QueenPending d = queen_pending_take((QueenPending *) lfirst(lc));

		if (d.kind == QUEEN_PENDING_PUSH)
			queen_push_render(&d);
		else
			queen_respond_error(d.http, 503, why);
	}
	list_free(entries);
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
		if (p->kind == QUEEN_PENDING_CONTROL)
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
 *		Control requests
 * ----------------------------------------------------------------
 */

static int
queen_pick_shard(void)
{
	int			n = queen_broker->nshards;
	int			i;

	for (i = 0; i < n; i++)
	{
		int			s = (queen_control_next_shard + i) % n;

		if (queen_shard_ready(s))
		{
			queen_control_next_shard = (s + 1) % n;
			return s;
		}
	}
	return -1;
}

/* The first shard that is not serving, or -1 when all are. */
static int
queen_unready_shard(void)
{
	int			s;

	for (s = 0; s < queen_broker->nshards; s++)
		if (!queen_shard_ready(s))
			return s;
	return -1;
}

static void
queen_handle_control(QueenHttpRequest *req, QueenControlOp op, const char *arg, Size arglen)
{
	int			shard = -1;
	const char *why = NULL;
	StringInfo	msg;
	uint64		id;
	QueenPending *p;

	if (queen_listener_closing)
		why = "the broker is shutting down";
	else
	{
		int			unready = queen_unready_shard();

		shard = queen_pick_shard();
		/* healthy means every partition can be pushed to, so every shard serves */
		if (shard < 0 || (op == QUEEN_CONTROL_HEALTH && unready >= 0))
			why = queen_shard_unavailable_message(unready >= 0 ? unready : 0);
	}
	if (why != NULL)
	{
		if (op == QUEEN_CONTROL_HEALTH)
		{
			StringInfoData buf;
			MemoryContext old = MemoryContextSwitchTo(req->mcxt);

			initStringInfo(&buf);
			queen_health_json(&buf, false, why);
			MemoryContextSwitchTo(old);
			queen_respond_json(req, 503, buf.data);
		}
		else
			queen_respond_error(req, 503, why);
		return;
	}

	id = queen_register(QUEEN_PENDING_CONTROL, req, NULL);
	p = (QueenPending *) hash_search(queen_pending, &id, HASH_FIND, NULL);
	p->shard = shard;

	msg = queen_message_new();
	{
		QueenWireControl m = {id, (uint8) op, (const char *) queen_listener_tenant.data,
		arg, (uint32) arglen};

		queen_wire_put_control(msg, &m);
	}
	queen_send_to_shard(shard, msg);
}

/* %XX decoding of one path segment; NULL if malformed. */
static char *
queen_percent_decode(const char *s, Size *len)
{
	Size		n = strlen(s);
	char	   *out = palloc(n + 1);
	Size		o = 0;
	Size		i;

	for (i = 0; i < n; i++)
	{
		if (s[i] == '%')
		{
			int			hi,
						lo;

			if (i + 2 >= n)
				return NULL;
			hi = queen_hex_value(s[i + 1]);
			lo = queen_hex_value(s[i + 2]);
			if (hi < 0 || lo < 0)
				return NULL;
			out[o++] = (char) (hi * 16 + lo);
			i += 2;
		}
		else
			out[o++] = s[i];
	}
	out[o] = '\0';
	*len = o;
	return out;
}

/* ----------------------------------------------------------------
 *		Routing
 * ----------------------------------------------------------------
 */

#define QUEEN_QUEUES_PREFIX "/api/v1/resources/queues/"

static void
queen_method_not_allowed(QueenHttpRequest *req, const char *allow)
{
	const char *body = "{\"error\":\"method not allowed\"}";
	char		header[64];

	snprintf(header, sizeof(header), "Allow: %s\r\n", allow);
	queen_http_respond(req, 405, "application/json", body, strlen(body), header);
}

static void
queen_handle_metrics(QueenHttpRequest *req)
{
	StringInfoData buf;
	MemoryContext old = MemoryContextSwitchTo(req->mcxt);
	QueenHttpStats stats;

	initStringInfo(&buf);
	queen_metrics_render(&buf);
	queen_http_stats(queen_http, &stats);
	/* this listener's own state, labelled with its index */
	queen_metric(&buf, "queen_http_connections_open", "gauge",
				 "HTTP connections open on this listener.");
	appendStringInfo(&buf, "queen_http_connections_open{listener=\"%d\"} " UINT64_FORMAT "\n",
					 queen_listener_index, stats.open);
	queen_metric(&buf, "queen_http_rejected_total", "counter",
				 "Requests refused by the HTTP layer (malformed, too large, too slow).");
	appendStringInfo(&buf, "queen_http_rejected_total{listener=\"%d\"} " UINT64_FORMAT "\n",
					 queen_listener_index, stats.rejected);
	queen_metric(&buf, "queen_http_connections_refused_total", "counter",
				 "Connections answered 503 at once: over queen.http_max_connections or out of descriptors.");
	appendStringInfo(&buf, "queen_http_connections_refused_total{listener=\"%d\"} " UINT64_FORMAT "\n",
					 queen_listener_index, stats.refused);
	queen_metric(&buf, "queen_http_requests_waiting", "gauge",
				 "Requests waiting for the shards' verdicts on this listener.");
	appendStringInfo(&buf, "queen_http_requests_waiting{listener=\"%d\"} %ld\n",
					 queen_listener_index, hash_get_num_entries(queen_pending));
	queen_metric(&buf, "queen_http_requests_busy", "gauge",
				 "Requests handed to the handler and not yet answered, or with output unsent.");
	appendStringInfo(&buf, "queen_http_requests_busy{listener=\"%d\"} %d\n",
					 queen_listener_index, queen_http_busy(queen_http));
	MemoryContextSwitchTo(old);
	queen_http_respond(req, 200, "text/plain; version=0.0.4", buf.data, buf.len, NULL);
}

/* The spool's state, in one of the shapes of queen_buffers_json. */
static void
queen_handle_buffers(QueenHttpRequest *req, int shape)
{
	StringInfoData buf;
	MemoryContext old = MemoryContextSwitchTo(req->mcxt);

	initStringInfo(&buf);
	queen_buffers_json(&buf, shape);
	MemoryContextSwitchTo(old);
	queen_respond_json(req, 200, buf.data);
}

/* POST /api/v1/system/maintenance {"enabled": bool} */
static void
queen_handle_maintenance(QueenHttpRequest *req)
{
	bool		enabled;
	MemoryContext old = MemoryContextSwitchTo(req->mcxt);
	bool		valid = queen_parse_enabled_body(req->body, req->body_len, &enabled);

	MemoryContextSwitchTo(old);
	if (!valid)
	{
		queen_respond_error(req, 400, "enabled (boolean) is required");
		return;
	}
	queen_maintenance_set(enabled, false);
	queen_handle_buffers(req, 2);
}

static void
queen_listener_handle(QueenHttpRequest *req, void *arg)
{
	const char *path = req->path;

	(void) arg;
	pg_atomic_fetch_add_u64(&queen_broker->metrics.http_requests, 1);

	if (strcmp(path, "/api/v1/push") == 0)
	{
		if (req->method != HTTP_POST)
			queen_method_not_allowed(req, "POST");
		else
			queen_handle_push(req);
	}
	else if (strcmp(path, "/api/v1/configure") == 0)
	{
		if (req->method != HTTP_POST)
			queen_method_not_allowed(req, "POST");
		else
			queen_handle_control(req, QUEEN_CONTROL_CONFIGURE, req->body, req->body_len);
	}
	else if (strncmp(path, QUEEN_QUEUES_PREFIX, strlen(QUEEN_QUEUES_PREFIX)) == 0 &&
			 path[strlen(QUEEN_QUEUES_PREFIX)] != '\0' &&
			 strchr(path + strlen(QUEEN_QUEUES_PREFIX), '/') == NULL)
	{
		MemoryContext old;
		char	   *queue;
		Size		len = 0;
		const char *problem;

		if (req->method != HTTP_DELETE)
		{
			queen_method_not_allowed(req, "DELETE");
			return;
		}
		old = MemoryContextSwitchTo(req->mcxt);
		queue = queen_percent_decode(path + strlen(QUEEN_QUEUES_PREFIX), &len);
		MemoryContextSwitchTo(old);
		if (queue == NULL)
		{
			queen_respond_error(req, 400, "queue name in the path is not valid percent-encoding");
			return;
		}
		/* a decoded %00 is a control character like any other */
		problem = queen_name_problem(queue, len, QUEEN_MAX_NAME_BYTES);
		if (problem != NULL)
		{
			queen_respond_error(req, 400, psprintf("queue name %s", problem));
			return;
		}
		queen_handle_control(req, QUEEN_CONTROL_DELETE_QUEUE, queue, len);
	}
	else if (strcmp(path, "/health") == 0)
	{
		if (req->method != HTTP_GET && req->method != HTTP_HEAD)
			queen_method_not_allowed(req, "GET, HEAD");
		else
			queen_handle_control(req, QUEEN_CONTROL_HEALTH, "", 0);
	}
	else if (strcmp(path, "/metrics/prometheus") == 0)
	{
		/* HEAD answers as GET; http.c leaves the body out */
		if (req->method != HTTP_GET && req->method != HTTP_HEAD)
			queen_method_not_allowed(req, "GET, HEAD");
		else
			queen_handle_metrics(req);
	}
	else if (strcmp(path, "/api/v1/system/maintenance") == 0)
	{
		if (req->method == HTTP_GET)
			queen_handle_buffers(req, 1);
		else if (req->method == HTTP_POST)
			queen_handle_maintenance(req);
		else
			queen_method_not_allowed(req, "GET, POST");
	}
	else if (strcmp(path, "/api/v1/status/buffers") == 0)
	{
		if (req->method != HTTP_GET)
			queen_method_not_allowed(req, "GET");
		else
			queen_handle_buffers(req, 0);
	}
	else if (strcmp(path, "/status") == 0)
	{
		if (req->method != HTTP_GET)
			queen_method_not_allowed(req, "GET");
		else
			queen_respond_json(req, 200, "{\"status\":\"ok\",\"engine\":\"queen-postgres\"}");
	}
	else
		queen_respond_error(req, 404, "not found");
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

	if (!queen_wire_get_reply(m, &reply) || reply.status < 100 || reply.status > 599)
	{
		queen_respond_error(p->http, 500, "malformed reply from the broker's shard");
		return;
	}
	queen_http_respond(p->http, reply.status, "application/json", reply.body, reply.len, NULL);
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
					QueenPending done = queen_pending_take(p);

					queen_push_render(&done);
				}
			}
			else if (type == QUEEN_MSG_REPLY && p->kind == QUEEN_PENDING_CONTROL)
			{
				QueenPending done = queen_pending_take(p);

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
		queen_http = queen_http_create(&cfg, queen_listener_handle, NULL, &error);
		if (queen_http != NULL)
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

		queen_http_stats(queen_http, &stats);
		ereport(LOG,
				(errmsg("queen listener %d: listening on %s:%d",
						queen_listener_index, queen_http_listen_address,
						queen_http_bound_port(queen_http)),
				 errdetail("Up to " UINT64_FORMAT " connections; open-file limit " UINT64_FORMAT ".",
						   stats.max_open, stats.fd_limit)));
	}
}

void
queen_listener_main(Datum arg)
{
	WaitEventSet *set;
	HASHCTL		ctl;
	MemoryContext scratch;
	TimestampTz closing_since = 0;
	TimestampTz last_summary;
	int			s;

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

	queen_listener_cxt = AllocSetContextCreate(TopMemoryContext, "queen listener",
											   ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(queen_listener_cxt);

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(uint64);
	ctl.entrysize = sizeof(QueenPending);
	ctl.hcxt = queen_listener_cxt;
	queen_pending = hash_create("queen pending requests", 1024, &ctl,
								HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
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

	if (queen_listener_index == 0)
		queen_broker_log_config("listener");
	queen_listener_bind();
	queen_worker_set_state(queen_listener_slot, QUEEN_WORKER_READY);

	set = CreateWaitEventSet(TopMemoryContext, 3);
	AddWaitEventToSet(set, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	AddWaitEventToSet(set, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
	AddWaitEventToSet(set, WL_SOCKET_READABLE, queen_http_epoll_fd(queen_http), NULL, NULL);

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

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			QueenHttpConfig cfg;

			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			queen_listener_config(&cfg);
			queen_http_reconfigure(queen_http, &cfg);
			if (queen_listener_index == 0)
				queen_broker_log_config("listener (reloaded)");
		}
		if (ShutdownRequestPending && !queen_listener_closing)
		{
			queen_listener_closing = true;
			closing_since = GetCurrentTimestamp();
			queen_worker_set_state(queen_listener_slot, QUEEN_WORKER_CLOSING);
			queen_http_stop_accepting(queen_http);
			ereport(LOG,
					(errmsg("queen listener %d: stopping; answering %ld outstanding requests",
							queen_listener_index, hash_get_num_entries(queen_pending))));
		}

		/* verdicts a shard wrote before it ended first: they need no spooling */
		queen_drain_verdicts();
		queen_check_shards();
		queen_http_poll(queen_http);
		backlog = queen_flush_submissions();
		queen_drain_verdicts();

		now = GetCurrentTimestamp();
		if (queen_listener_index == 0 &&
			TimestampDifferenceExceeds(last_summary, now, QUEEN_SUMMARY_INTERVAL_MS))
		{
			queen_metrics_bundle_summary();
			last_summary = now;
		}

		if (queen_listener_closing)
		{
			if (hash_get_num_entries(queen_pending) == 0 && queen_http_busy(queen_http) == 0 &&
				TimestampDifferenceExceeds(closing_since, now, 500))
			{
				/*
				 * SIGTERM to this listener alone (the shards still serve):
				 * exit 1 so the postmaster starts it again, where exit 0
				 * would unregister it for good.  At a cluster shutdown the
				 * shards got the signal too and show it within the moment
				 * waited above.
				 */
				if (!queen_workers_all_in(queen_broker->shards, queen_broker->nshards,
										  QUEEN_WORKERS_GOING))
				{
					ereport(LOG,
							(errmsg("queen listener %d: terminated while the broker runs; restarting",
									queen_listener_index)));
					queen_http_destroy(queen_http);
					proc_exit(1);
				}
				break;
			}
			if (TimestampDifferenceExceeds(closing_since, now, queen_shutdown_grace_ms(false)))
			{
				ereport(LOG,
						(errmsg("queen listener %d: %ld requests still outstanding after %d ms; spooling their pushes",
								queen_listener_index, hash_get_num_entries(queen_pending),
								queen_shutdown_grace_ms(false))));
				queen_abandon_pending();
				queen_http_poll(queen_http);
				break;
			}
		}

		timeout = QUEEN_SUMMARY_INTERVAL_MS;
		http_timeout = queen_http_next_timeout_ms(queen_http);
		if (http_timeout >= 0)
			timeout = Min(timeout, http_timeout);
		if (backlog || queen_listener_closing)
			timeout = Min(timeout, 10);

		MemoryContextReset(scratch);
		(void) WaitEventSetWait(set, timeout, events, lengthof(events), PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}

	queen_http_destroy(queen_http);
	proc_exit(0);
}
