/*-------------------------------------------------------------------------
 *
 * shard_consume.c
 *	  A fusion shard's consumption operations: pop, ack, lease extension,
 *	  the dead-letter listing and consumer-group deletion.  Each is a row
 *	  of the operation table (ops.c) whose functions are here: a run that
 *	  calls the consumption core (consume.h) inside the shard's control
 *	  transaction, and a render of what it returned.
 *
 * Why the shards: they already hold one connection each, run one
 * transaction at a time between bundles, and own the partitions a pop of
 * one partition reads, so consumption needs no processes, connections or
 * rings of its own (docs/ARCHITECTURE.md, "Consumption in the broker").
 *
 * What a request counted (messages delivered, items acknowledged, dead
 * letters filed) and what it made pending (a lease an ack released) is
 * kept aside and published only once its transaction has committed
 * (queen_shard_consume_done): a rolled back pop delivered nothing, and a
 * lease whose transaction never committed never existed.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "shard.h"
#include "validate.h"
#include "render.h"
#include "worker.h"

#include "access/xact.h"
#include "pgstat.h"
#include "utils/backend_status.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/timestamp.h"

/* What the running request counted; added to the shared counters after COMMIT. */
typedef struct QueenConsumeCounts
{
	uint64		pop_messages;
	uint64		leases_expired;
	uint64		acked;
	uint64		failed;
	uint64		dlq;
	uint64		extensions;
	uint64		restamped;
} QueenConsumeCounts;

static QueenConsumeCounts queen_consume_counts;

/*
 * The pops of the running transaction that granted leases, so that those
 * which aged before the COMMIT start again then (queen_shard_consume_restamp).
 * In the transaction's memory: the list goes with it.
 */
typedef struct QueenLeasedPop
{
	QueenPopRequest *req;
	QueenPopResult *res;
	Size		answer_bytes;	/* its rendered answer */
} QueenLeasedPop;

static List *queen_consume_leased = NIL;

/* A lease that falls short by less than this (or a hundredth of it) is kept. */
#define QUEEN_RESTAMP_MIN_USECS	(10 * 1000)

/*
 * Bytes a second an answer surely streams through the verdict ring (1 MB):
 * a fifth of what it does on an idle 2-core machine (135 MB in 0.9 s).
 */
#define QUEEN_ANSWER_RATE_FLOOR	(32.0 * 1024 * 1024)

void
queen_shard_consume_reset(void)
{
	memset(&queen_consume_counts, 0, sizeof(queen_consume_counts));
	queen_consume_leased = NIL;
}

/* A text of the argument as a C string, or NULL when absent. */
static char *
queen_text_or_null(QueenWireText t)
{
	return t.len > 0 ? pnstrdup(t.data, t.len) : NULL;
}

/* ----------------------------------------------------------------
 *		Pop
 * ----------------------------------------------------------------
 */

/* A pop as run: what was asked and what was delivered. */
typedef struct QueenPopRun
{
	QueenPopRequest req;
	QueenPopResult res;
} QueenPopRun;

void *
queen_op_pop_run(QueenOpCall *call)
{
	const QueenArgsPop *m = (const QueenArgsPop *) call->args;
	QueenPopRun *p = palloc0(sizeof(QueenPopRun));
	QueenPopRequest *req = &p->req;

	req->tenant = call->tenant;
	req->queue = queen_text_or_null(m->queue);
	req->partition = queen_text_or_null(m->partition);
	req->namespace_name = queen_text_or_null(m->namespace_name);
	req->task = queen_text_or_null(m->task);
	req->group = m->group.len > 0 ? pnstrdup(m->group.data, m->group.len) : QUEEN_QUEUE_MODE;
	req->batch = m->batch;
	req->max_partitions = m->max_partitions;
	req->lease_seconds = m->lease_seconds;
	req->auto_ack = m->auto_ack != 0;
	req->retry_until = (TimestampTz) m->retry_until;
	/* the listener refused what this refuses; a listener of another build may not have */
	call->problem = queen_sub_mode_parse(queen_text_or_null(m->sub_mode),
										 queen_text_or_null(m->sub_from),
										 "subscriptionMode", "subscriptionFrom",
										 &req->sub_mode, &req->sub_from);
	if (call->problem != NULL)
		return NULL;
	req->lease_id[0] = '\0';

	queen_pop(req, &p->res);
	if (p->res.nmessages > 0 && queen_test_fault("pop_error_before_commit"))
		elog(ERROR, "queen.test_fault: a pop fails after its claim, before its COMMIT");
	queen_consume_counts.pop_messages += p->res.nmessages;
	queen_consume_counts.leases_expired += p->res.leases_expired;
	return p;
}

/*
 * Nothing delivered is 204, and the body, which the listener keeps to
 * itself, is the hint for a parked long-poll (wire.c).  A lease granted is
 * remembered, to start again before the COMMIT if it aged.
 */
int
queen_op_pop_render(QueenOpCall *call, void *result, StringInfo out)
{
	QueenPopRun *p = (QueenPopRun *) result;

	(void) call;
	if (p->res.nmessages == 0)
	{
		queen_wire_put_pop_hint(out, p->res.retry_at,
								p->res.no_queue ? QUEEN_POP_HINT_NO_QUEUE : 0);
		return 204;
	}
	queen_render_pop(out, &p->req, &p->res);
	if (!p->req.auto_ack)
	{
		QueenLeasedPop *lp = palloc(sizeof(QueenLeasedPop));

		lp->req = &p->req;
		lp->res = &p->res;
		lp->answer_bytes = out->len;
		queen_consume_leased = lappend(queen_consume_leased, lp);
	}
	return 200;
}

/* ----------------------------------------------------------------
 *		Ack
 * ----------------------------------------------------------------
 */

/* One element of Queen's ack answer, in request order. */
static void
queen_render_ack_item(StringInfo out, int index, QueenWireText txn, bool success,
					  const char *error, bool released, bool dlq, bool noop)
{
	if (index > 0)
		appendStringInfoChar(out, ',');
	appendStringInfo(out, "{\"index\":%d,\"transactionId\":", index);
	if (txn.data != NULL && (txn.len > 0 || success))
		queen_render_text(out, pnstrdup(txn.data, txn.len));
	else
		appendStringInfoString(out, "null");
	appendStringInfo(out, ",\"success\":%s,\"error\":", success ? "true" : "false");
	queen_render_text(out, error);
	appendStringInfo(out, ",\"leaseReleased\":%s,\"dlq\":%s,\"noop\":%s}",
					 released ? "true" : "false", dlq ? "true" : "false",
					 noop ? "true" : "false");
}

/*
 * The queues of the partitions whose lease the ack released: parked pops
 * on them may now get a redelivery or the next batch.  The core's ack
 * marked them (wait.c) from the consumer rows it locked; they are marked
 * here too, in the ack's transaction, and published after its COMMIT.
 */
void
queen_consume_wake_released(void)
{
	const int  *slots;
	int			n = queen_wait_marked_slots(&slots);
	int			i;

	for (i = 0; i < n; i++)
		queen_wake_mark_slot(slots[i]);
}

/* One ack request, decoded. */
typedef struct QueenAckRequest
{
	const QueenArgsAck *head;
	QueenArgsAckItem *wire;		/* every item as sent */
	QueenAckItem *items;		/* the valid ones, in request order */
	int		   *slot;			/* where item i went in items, -1: invalid */
	int			nvalid;
	const char *group;			/* QUEEN_QUEUE_MODE when the request names none */
} QueenAckRequest;

/* The items that follow the ack's arguments; false when they are malformed. */
static bool
queen_consume_ack_items(QueenOpCall *call, QueenAckRequest *a)
{
	QueenMsgReader r = call->items;
	const QueenArgsAck *head = (const QueenArgsAck *) call->args;
	int			n = Max(head->nitems, 1);
	int			i;

	a->head = head;
	/* an item takes at least its flags, its id and five lengths */
	if (head->nitems < 0 ||
		(Size) head->nitems > (r.len - r.pos) / (1 + UUID_LEN + 5 * sizeof(uint32)))
		return false;
	a->group = head->group.len > 0 ?
		pnstrdup(head->group.data, head->group.len) : QUEEN_QUEUE_MODE;
	a->wire = palloc0(sizeof(QueenArgsAckItem) * n);
	a->items = palloc0(sizeof(QueenAckItem) * n);
	a->slot = palloc(sizeof(int) * n);
	a->nvalid = 0;
	for (i = 0; i < head->nitems; i++)
	{
		QueenArgsAckItem *w = &a->wire[i];
		QueenAckItem *it;

		if (!queen_wire_get_fields(&r, queen_control_op(call->op)->items, w))
			return false;
		a->slot[i] = -1;
		if (!(w->flags & QUEEN_ACK_ITEM_VALID))
			continue;
		it = &a->items[a->nvalid];
		a->slot[i] = a->nvalid++;
		queen_ack_item_from_wire(w, it);
	}
	return r.pos == r.len;
}

/* An acknowledgement as the core takes it, from the item that carried it. */
void
queen_ack_item_from_wire(const QueenArgsAckItem *w, QueenAckItem *it)
{
	memset(it, 0, sizeof(*it));
	memcpy(it->partition_id.data, w->partition_id, UUID_LEN);
	it->transaction_id = pnstrdup(w->txn.data, w->txn.len);
	it->txn_len = w->txn.len;
	it->status = queen_ack_status((w->flags & QUEEN_ACK_ITEM_STATUS) ? w->status.data : NULL,
								  w->status.len);
	it->lease_id = queen_text_or_null(w->lease);
	it->error = (w->flags & QUEEN_ACK_ITEM_ERROR) ? pnstrdup(w->error.data, w->error.len) : NULL;
	it->offset = -1;
}

void *
queen_op_ack_run(QueenOpCall *call)
{
	QueenAckRequest *a = palloc(sizeof(QueenAckRequest));

	if (!queen_consume_ack_items(call, a))
	{
		call->status = 500;
		call->problem = "malformed ack items";
		return NULL;
	}
	if (a->nvalid > 0 && queen_ack(a->group, a->items, a->nvalid) > 0)
		queen_consume_wake_released();
	return a;
}

int
queen_op_ack_render(QueenOpCall *call, void *result, StringInfo out)
{
	QueenAckRequest *a = (QueenAckRequest *) result;
	int			i;

	(void) call;
	appendStringInfoChar(out, '[');
	for (i = 0; i < a->head->nitems; i++)
	{
		QueenArgsAckItem *w = &a->wire[i];

		if (a->slot[i] < 0)
		{
			char	   *problem = pnstrdup(w->problem.data, w->problem.len);

			queen_render_ack_item(out, i, w->txn, false, problem, false, false, false);
			queen_consume_counts.failed++;
		}
		else
		{
			QueenAckItem *it = &a->items[a->slot[i]];

			queen_render_ack_item(out, i, w->txn, it->success, it->problem,
								  it->lease_released, it->dlq, it->noop);
			if (it->success)
				queen_consume_counts.acked++;
			else
				queen_consume_counts.failed++;
			if (it->dlq)
				queen_consume_counts.dlq++;
		}
	}
	appendStringInfoChar(out, ']');
	return 200;
}

/*
 * The ack's transaction failed: nothing of it was applied, and every item
 * says so (a client trusts success; 500 would hide which items the body
 * named).
 */
int
queen_op_ack_fail(QueenOpCall *call, const char *message, StringInfo out)
{
	QueenAckRequest a;
	char	   *error = psprintf("ack failed, nothing was applied: %s", message);
	int			i;

	if (!queen_consume_ack_items(call, &a))
	{
		queen_render_error(out, "malformed ack items", NULL);
		return 500;
	}
	appendStringInfoChar(out, '[');
	for (i = 0; i < a.head->nitems; i++)
		queen_render_ack_item(out, i, a.wire[i].txn, false,
							  a.slot[i] < 0 ?
							  pnstrdup(a.wire[i].problem.data, a.wire[i].problem.len) : error,
							  false, false, false);
	appendStringInfoChar(out, ']');
	queen_consume_counts.failed += a.head->nitems;
	return 200;
}

/* The consumer rows of the ack's valid items, for a shared transaction to lock first. */
void
queen_op_ack_lock(QueenOpCall *call, QueenOpLocks *locks)
{
	QueenAckRequest a;
	int			j;

	if (!queen_consume_ack_items(call, &a))
		return;					/* left to its own run to refuse */
	if (locks->nkeys + a.nvalid > locks->maxkeys)
	{
		locks->maxkeys = Max(locks->maxkeys * 2, locks->nkeys + a.nvalid);
		locks->keys = locks->keys == NULL ?
			palloc(sizeof(QueenConsumerKey) * locks->maxkeys) :
			repalloc(locks->keys, sizeof(QueenConsumerKey) * locks->maxkeys);
	}
	for (j = 0; j < a.nvalid; j++)
	{
		locks->keys[locks->nkeys].partition_id = a.items[j].partition_id;
		locks->keys[locks->nkeys].group = a.group;
		locks->nkeys++;
	}
}

/* ----------------------------------------------------------------
 *		Leases, dead letters, consumer groups
 * ----------------------------------------------------------------
 */

/* A lease extension as run. */
typedef struct QueenRenewRun
{
	char	   *lease;
	int			renewed;
	TimestampTz earliest;
} QueenRenewRun;

/* POST /api/v1/lease/:leaseId/extend */
void *
queen_op_renew_run(QueenOpCall *call)
{
	const QueenArgsRenew *m = (const QueenArgsRenew *) call->args;
	QueenRenewRun *r = palloc0(sizeof(QueenRenewRun));

	r->lease = pnstrdup(m->lease.data, m->lease.len);
	r->renewed = queen_renew_lease(r->lease, m->seconds, &r->earliest);
	queen_consume_counts.extensions += r->renewed;
	return r;
}

/* Always 200, with Queen's three expiry keys. */
int
queen_op_renew_render(QueenOpCall *call, void *result, StringInfo out)
{
	QueenRenewRun *r = (QueenRenewRun *) result;
	StringInfoData at;

	(void) call;
	initStringInfo(&at);
	if (r->renewed > 0)
		queen_render_timestamp(&at, r->earliest);
	else
		appendStringInfoString(&at, "null");
	appendStringInfoString(out, "{\"leaseId\":");
	escape_json(out, r->lease);
	appendStringInfo(out, ",\"success\":%s,\"renewed\":%d,\"newExpiresAt\":%s,\"expiresAt\":%s,\"lease_expires_at\":%s}",
					 r->renewed > 0 ? "true" : "false", r->renewed, at.data, at.data, at.data);
	return 200;
}

/* The rows held under the lease, for a shared transaction to lock first. */
void
queen_op_renew_lock(QueenOpCall *call, QueenOpLocks *locks)
{
	const QueenArgsRenew *m = (const QueenArgsRenew *) call->args;

	if (m->lease.len == 0)
		return;
	if (locks->nleases == locks->maxleases)
	{
		locks->maxleases = Max(locks->maxleases * 2, 8);
		locks->leases = locks->leases == NULL ?
			palloc(sizeof(char *) * locks->maxleases) :
			repalloc(locks->leases, sizeof(char *) * locks->maxleases);
	}
	locks->leases[locks->nleases++] = pnstrdup(m->lease.data, m->lease.len);
}

/*
 * A from or to bound of the listing: ISO-8601 (or "now") as
 * subscriptionFrom reads it.  False for text that is neither.
 */
static bool
queen_consume_bound(QueenWireText t, TimestampTz absent, TimestampTz *out)
{
	char	   *text = pnstrdup(t.data, t.len);

	*out = absent;
	if (t.len == 0)
		return true;
	if (strcmp(text, "now") == 0)
	{
		*out = GetCurrentTransactionStartTimestamp();
		return true;
	}
	return queen_parse_iso8601(text, out);
}

/* A dead-letter listing as run. */
typedef struct QueenDlqRun
{
	QueenDlqFilter f;
	QueenDlqEntry *entries;
	int			n;
	int64		total;
} QueenDlqRun;

/* GET /api/v1/dlq */
void *
queen_op_dlq_run(QueenOpCall *call)
{
	const QueenArgsDlq *m = (const QueenArgsDlq *) call->args;
	QueenDlqRun *d = palloc0(sizeof(QueenDlqRun));
	QueenDlqFilter *f = &d->f;

	f->tenant = call->tenant;
	f->queue = pnstrdup(m->queue.data, m->queue.len);
	f->group = queen_text_or_null(m->group);
	f->partition = queen_text_or_null(m->partition);
	f->limit = m->limit;
	f->offset = m->offset;
	if (!queen_consume_bound(m->from, DT_NOBEGIN, &f->from) ||
		!queen_consume_bound(m->to, DT_NOEND, &f->to))
	{
		call->problem = "from and to must be ISO-8601 timestamps";
		return NULL;
	}
	d->total = queen_dlq_list(f, &d->entries, &d->n);
	return d;
}

int
queen_op_dlq_render(QueenOpCall *call, void *result, StringInfo out)
{
	QueenDlqRun *d = (QueenDlqRun *) result;

	(void) call;
	appendStringInfoString(out, "{\"messages\":");
	queen_render_objects(out, &queen_answer_dlq_entry, d->entries, sizeof(QueenDlqEntry), d->n);
	appendStringInfo(out, ",\"total\":" INT64_FORMAT ",\"limit\":%d,\"offset\":" INT64_FORMAT "}",
					 d->total, d->f.limit, d->f.offset);
	return 200;
}

/* A consumer group's deletion as run. */
typedef struct QueenGroupDeleteRun
{
	char	   *group;
	char	   *queue;
	int64		removed;
} QueenGroupDeleteRun;

/* DELETE /api/v1/consumer-groups/:group[/queues/:queue] */
void *
queen_op_group_delete_run(QueenOpCall *call)
{
	const QueenArgsGroupDelete *m = (const QueenArgsGroupDelete *) call->args;
	QueenGroupDeleteRun *g = palloc0(sizeof(QueenGroupDeleteRun));

	g->group = pnstrdup(m->group.data, m->group.len);
	g->queue = queen_text_or_null(m->queue);
	g->removed = queen_delete_consumer_group(&call->tenant, g->group, g->queue,
											 m->delete_metadata != 0);
	return g;
}

int
queen_op_group_delete_render(QueenOpCall *call, void *result, StringInfo out)
{
	const QueenArgsGroupDelete *m = (const QueenArgsGroupDelete *) call->args;
	QueenGroupDeleteRun *g = (QueenGroupDeleteRun *) result;

	appendStringInfoString(out, "{\"success\":true,\"consumerGroup\":");
	escape_json(out, g->group);
	appendStringInfoString(out, ",\"queueName\":");
	queen_render_text(out, g->queue);
	appendStringInfo(out, ",\"deletedCursors\":" INT64_FORMAT ",\"metadataDeleted\":%s}",
					 g->removed, m->delete_metadata ? "true" : "false");
	return 200;
}

/* ----------------------------------------------------------------
 *		The consumption transaction (shard_control.c)
 * ----------------------------------------------------------------
 */

/*
 * Before a consumption transaction's COMMIT: a lease its pops granted that
 * would not last its whole length from the moment the answer reaches the
 * listener starts again now.  It aged since the claim (a long read, the
 * rendering of a big answer, requests that ran after it in a shared
 * transaction), and a big answer takes a while to stream through the
 * verdict ring after the COMMIT: its lease also gets that while, reckoned
 * at QUEEN_ANSWER_RATE_FLOOR, a rate the ring keeps even on a busy machine.
 * So the consumer gets its whole lease from the moment it is answered, and
 * a big answer's consumer at most that while more.  A shortfall under a
 * hundredth of the lease (at least 10 ms) is let go: most pops are answered
 * within it, and restamping every lease would cost an UPDATE per partition
 * per pop.
 */
void
queen_shard_consume_restamp(void)
{
	TimestampTz now = GetCurrentTimestamp();
	ListCell   *lc;

	foreach(lc, queen_consume_leased)
	{
		QueenLeasedPop *lp = (QueenLeasedPop *) lfirst(lc);
		int64		transit = (int64) ((double) lp->answer_bytes * USECS_PER_SEC /
									   QUEEN_ANSWER_RATE_FLOOR);
		int64		shortfall = 0;
		int64		shortest = PG_INT64_MAX;
		int			i;

		for (i = 0; i < lp->res->npartitions; i++)
		{
			QueenPopPartition *part = &lp->res->partitions[i];
			int64		length = part->lease_expires_at - part->lease_acquired_at;

			shortest = Min(shortest, length);
			shortfall = Max(shortfall, now + transit + length - part->lease_expires_at);
		}
		if (shortfall > Max(shortest / 100, QUEEN_RESTAMP_MIN_USECS))
		{
			pgstat_report_activity(STATE_RUNNING, "queen: restamping aged leases");
			queen_pop_restamp(lp->req, lp->res, transit);
			queen_consume_counts.restamped++;
		}
	}
}

/*
 * Every consumption transaction begins here: a row lock held outside the
 * broker (an application's open transaction that popped or acknowledged
 * from SQL) is waited for at most queen.consume_lock_timeout, so one such
 * transaction cannot stall the shard and every push queued behind it.  SET
 * LOCAL: it ends with the transaction, and push bundles keep their own.
 */
void
queen_shard_consume_begin(void)
{
	char		ms[32];

	snprintf(ms, sizeof(ms), "%d", queen_consume_lock_timeout_ms);
	(void) set_config_option("lock_timeout", ms, PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_LOCAL, true, 0, false);
}

/*
 * A shared transaction failed and its requests will run again one by one:
 * nothing they counted or marked happened.
 */
void
queen_shard_consume_discard(void)
{
	queen_shard_consume_reset();
	queen_wake_forget();
}

/*
 * After the op's transaction: what it counted and made pending is real
 * only if it committed.
 */
void
queen_shard_consume_done(bool committed)
{
	QueenConsumeCounts *c = &queen_consume_counts;

	if (committed)
	{
		queen_count(QUEEN_COUNT_POP_MESSAGES, c->pop_messages);
		queen_count(QUEEN_COUNT_LEASES_EXPIRED, c->leases_expired);
		queen_count(QUEEN_COUNT_ACK_ACKED, c->acked);
		queen_count(QUEEN_COUNT_DLQ_FILED, c->dlq);
		queen_count(QUEEN_COUNT_LEASE_EXTENSIONS, c->extensions);
		queen_count(QUEEN_COUNT_LEASES_RESTAMPED, c->restamped);
		queen_count(QUEEN_COUNT_WAKES_ACK, queen_wake_publish());
	}
	else
		queen_wake_forget();
	/* a failed ack's items were counted failed by its answer */
	queen_count(QUEEN_COUNT_ACK_FAILED, c->failed);
	queen_shard_consume_reset();
}
