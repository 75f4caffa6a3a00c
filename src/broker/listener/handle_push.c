/*-------------------------------------------------------------------------
 *
 * handle_push.c
 *	  POST /api/v1/push: the listener's push handler, and the rendering of
 *	  its answer once every group has a verdict.
 *
 * A push is handled in the order the write path sets: parse the body without building
 * a tree (push_body.c), mint a UUIDv7 per item, default the transactionId
 * to the id's text, layer-1 dedup on queue 0x1F partition 0x1F
 * transactionId inside the request, group by (tenant, queue, partition),
 * send each group's frames, packed exactly as they will be stored, to the
 * shard that owns the partition, and answer 201 once every group has its
 * verdict.  Followers of a layer-1 leader report the leader's final id.
 * A push with a group whose shard is not serving is refused whole, 503,
 * before anything is sent.  The verdicts come back through listener.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "listener.h"
#include "codec.h"
#include "crypto.h"
#include "bundle.h"
#include "routes.h"
#include "wire.h"
#include "worker.h"

#include "utils/json.h"
#include "utils/memutils.h"

/*
 * A group of a push is answered.  Items with no verdict of their own render
 * as failed, so a group answered without one needs nothing more.
 */
void
queen_push_group_answered(QueenPushRequest *r, QueenReqGroup *g)
{
	g->answered = true;
	r->waiting--;
}

/*
 * Answer a push whose groups all have a verdict (or never will): one result
 * per item, in request order.
 */
void
queen_push_render(QueenPending *p)
{
	QueenPushRequest *r = p->push;
	QueenHttpRequest *http = p->http;
	StringInfoData buf;
	MemoryContext old;
	int			i;

	if (r->unavailable == r->ngroups)
	{
		queen_respond_error(http, 503, queen_listener_unavailable(r->groups[0].shard));
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
			status = r->status[r->leader[i]];
			status = (status == QUEEN_VERDICT_QUEUED || status == QUEEN_VERDICT_DUPLICATE ||
					  status == QUEEN_VERDICT_BUFFERED) ?
				QUEEN_VERDICT_DUPLICATE : status ? status : QUEEN_VERDICT_FAILED;
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
		appendStringInfo(&buf, ",\"status\":\"%s\"", word);
		if (status == QUEEN_VERDICT_REFUSED)
		{
			const char *problem = queen_crypto_problem();

			appendStringInfoString(&buf, ",\"error\":");
			escape_json(&buf, psprintf("queue is encrypted and its messages cannot be sealed: %s",
									   problem ? problem : "the key was not usable when the push was stored"));
		}
		appendStringInfoChar(&buf, '}');
	}
	appendStringInfoChar(&buf, ']');
	MemoryContextSwitchTo(old);
	/* as Queen: in maintenance mode a spool failure fails the request */
	queen_http_respond(http, r->spool_failed ? 500 : 201, "application/json",
					   buf.data, buf.len, NULL);
}

/* The frames of one group, as its shard stores them (and the spool keeps them). */
void
queen_push_group_frames(StringInfo out, const QueenPushRequest *r, const QueenReqGroup *g)
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
		/* the token's subject, never what the client wrote (auth.c) */
		queen_frame_set_producer(&frame, r->subject);
		frame.payload = r->items[it].payload;
		frame.payload_len = (uint32) r->items[it].payload_len;
		queen_frame_append(out, &frame);
	}
}

/*
 * Split the body into items, or answer why not (400, 413) or at once (no
 * items: 201 []).  NULL when answered.
 *
 * What a request costs here grows with its items (their ids, groups,
 * frames and results: about 1 kB each beyond the payloads), so their
 * number is capped: with the body, its frames and their copies in the
 * rings, a push stays within about four times its body plus 1 kB per
 * item (docs/HTTP.md).
 */
static QueenPushRequest *
queen_push_parse(QueenHttpRequest *req)
{
	QueenPushRequest *r;
	const char *problem;
	bool		too_many;
	MemoryContext old = MemoryContextSwitchTo(req->mcxt);

	r = palloc0(sizeof(QueenPushRequest));
	r->subject = req->subject;
	r->tenant = *queen_req_tenant(req);
	problem = queen_parse_push_body(req->body, req->body_len, queen_max_push_items,
									&r->items, &r->nitems, &too_many);
	MemoryContextSwitchTo(old);
	if (problem != NULL)
	{
		queen_count(QUEEN_COUNT_PUSH_REJECTED, 1);
		if (too_many)
			queen_respond_error(req, 413,
								psprintf("bad body: %s (queen.max_push_items)", problem));
		else
			queen_respond_error(req, 400, psprintf("bad body: %s", problem));
		return NULL;
	}
	queen_count(QUEEN_COUNT_PUSH_REQUESTS, 1);
	queen_count(QUEEN_COUNT_PUSH_MESSAGES, r->nitems);
	if (r->nitems == 0)
	{
		queen_respond_json(req, 201, "[]");
		return NULL;
	}
	return r;
}

/*
 * Mint the ids, default the transactionIds, and find the layer-1 leaders
 * and the groups, as the SQL door does them (bundle.c).  In the request's
 * context, the caller's.
 */
static void
queen_push_prepare(QueenPushRequest *r)
{
	QueenItemKey *keys;
	int		  **members;
	int		   *nmembers;
	int			i;

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
}

/* The shard that owns a group's partition. */
static int
queen_push_group_shard(const QueenPushRequest *r, const QueenReqGroup *g)
{
	const QueenHttpItem *first = &r->items[g->items[0]];

	return queen_shard_of(&r->tenant, first->queue, first->queue_len,
						  first->partition, first->partition_len,
						  queen_broker->nshards);
}

/* One group's PUSH message, to the shard that owns it. */
static void
queen_push_send_group(QueenPushRequest *r, uint64 id, int group)
{
	QueenReqGroup *g = &r->groups[group];
	const QueenHttpItem *first = &r->items[g->items[0]];
	StringInfo	msg = queen_listener_message_new();
	Size		need = 64 + first->queue_len + first->partition_len;
	int			k;

	/* one allocation of the right size, not a doubling that leaves half unused */
	for (k = 0; k < g->nitems; k++)
		need += 64 + strlen(r->txns[g->items[k]]) + r->items[g->items[k]].payload_len;
	if (need < MaxAllocSize)
		enlargeStringInfo(msg, (int) need);
	{
		QueenWirePush m = {id, (uint32) group, (const char *) r->tenant.data,
			{first->queue, (uint32) first->queue_len},
			{first->partition, (uint32) first->partition_len},
		(uint32) g->nitems};

		queen_wire_put(msg, QUEEN_MSG_PUSH, &m);
	}
	queen_push_group_frames(msg, r, g);
	queen_listener_send(g->shard, msg);
}

void
queen_handle_push(QueenHttpRequest *req, const QueenRouteParams *params)
{
	QueenPushRequest *r;
	QueenPending *p;
	MemoryContext old;
	int			i;

	(void) params;
	if (queen_listener_closing)
	{
		queen_respond_error(req, 503, "the broker is shutting down");
		return;
	}
	r = queen_push_parse(req);
	if (r == NULL)
		return;
	old = MemoryContextSwitchTo(req->mcxt);
	queen_push_prepare(r);
	MemoryContextSwitchTo(old);

	/* a shard that is not serving (restarting, waiting): nothing is sent */
	for (i = 0; i < r->ngroups; i++)
	{
		int			shard = queen_push_group_shard(r, &r->groups[i]);

		if (!queen_listener_shard_ready(shard))
		{
			queen_respond_error(req, 503, queen_listener_unavailable(shard));
			return;
		}
	}

	p = queen_listener_register(QUEEN_PENDING_PUSH, req, r);
	for (i = 0; i < r->ngroups; i++)
	{
		QueenReqGroup *g = &r->groups[i];

		g->shard = queen_push_group_shard(r, g);
		if (!queen_listener_shard_ready(g->shard))
		{
			r->unavailable++;
			queen_push_group_answered(r, g);
			continue;
		}
		queen_push_send_group(r, p->id, i);
	}

	if (r->waiting == 0)
	{
		QueenPending done = queen_listener_take(p);

		queen_push_render(&done);
	}
}
