/*-------------------------------------------------------------------------
 *
 * shard_consume.c
 *	  A fusion shard's consumption requests: pop, ack, lease extension,
 *	  the dead-letter listing and consumer-group deletion.  Each arrives as
 *	  a control request (wire.c has its argument), runs in the shard's
 *	  control transaction between bundles, calls the consumption core
 *	  (consume.h) and renders the answer's body.
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
#include "render.h"
#include "spi.h"
#include "worker.h"

#include "catalog/pg_type_d.h"
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

static void
queen_consume_reset(void)
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

static int
queen_consume_malformed(StringInfo out)
{
	appendStringInfoString(out, "{\"error\":\"malformed consumption request\"}");
	return 500;
}

/* ----------------------------------------------------------------
 *		Pop
 * ----------------------------------------------------------------
 */

/*
 * One pop.  Nothing delivered is 204, and the body, which the listener
 * keeps to itself, is the hint for a parked long-poll (wire.c).
 */
static int
queen_consume_pop(const pg_uuid_t *tenant, QueenMsgReader *r, StringInfo out)
{
	QueenWirePop m;
	QueenPopRequest req;
	QueenPopResult *res = palloc0(sizeof(QueenPopResult));
	const char *problem;

	if (!queen_wire_get_pop(r, &m))
		return queen_consume_malformed(out);
	memset(&req, 0, sizeof(req));
	req.tenant = *tenant;
	req.queue = queen_text_or_null(m.queue);
	req.partition = queen_text_or_null(m.partition);
	req.namespace_name = queen_text_or_null(m.namespace_name);
	req.task = queen_text_or_null(m.task);
	req.group = m.group.len > 0 ? pnstrdup(m.group.data, m.group.len) : QUEEN_QUEUE_MODE;
	req.batch = m.batch;
	req.max_partitions = m.max_partitions;
	req.lease_seconds = m.lease_seconds;
	req.auto_ack = m.auto_ack != 0;
	req.retry_until = (TimestampTz) m.retry_until;
	/* the listener refused what this refuses; a listener of another build may not have */
	problem = queen_sub_mode_parse(queen_text_or_null(m.sub_mode), queen_text_or_null(m.sub_from),
								   "subscriptionMode", "subscriptionFrom",
								   &req.sub_mode, &req.sub_from);
	if (problem != NULL)
	{
		appendStringInfoString(out, "{\"error\":");
		escape_json(out, problem);
		appendStringInfoChar(out, '}');
		return 400;
	}
	req.lease_id[0] = '\0';

	pgstat_report_activity(STATE_RUNNING, "queen: pop");
	queen_pop(&req, res);
	if (res->nmessages > 0 && queen_test_fault("pop_error_before_commit"))
		elog(ERROR, "queen.test_fault: a pop fails after its claim, before its COMMIT");
	queen_consume_counts.pop_messages += res->nmessages;
	queen_consume_counts.leases_expired += res->leases_expired;
	if (res->nmessages == 0)
	{
		queen_wire_put_pop_hint(out, res->retry_at, res->no_queue ? QUEEN_POP_HINT_NO_QUEUE : 0);
		return 204;
	}
	if (!req.auto_ack)
	{
		QueenLeasedPop *lp = palloc(sizeof(QueenLeasedPop));

		lp->req = palloc(sizeof(QueenPopRequest));
		*lp->req = req;
		lp->res = res;
		queen_consume_leased = lappend(queen_consume_leased, lp);
		queen_render_pop(out, &req, res);
		lp->answer_bytes = out->len;
		return 200;
	}
	queen_render_pop(out, &req, res);
	return 200;
}

/* ----------------------------------------------------------------
 *		Ack
 * ----------------------------------------------------------------
 */

/* One element of the ack answer (reference 5.1), in request order. */
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
static void
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
	QueenWireAck head;
	QueenWireAckItem *wire;		/* every item as sent */
	QueenAckItem *items;		/* the valid ones, in request order */
	int		   *slot;			/* where item i went in items, -1: invalid */
	int			nvalid;
	const char *group;			/* QUEEN_QUEUE_MODE when the request names none */
} QueenAckRequest;

static bool
queen_consume_ack_items(QueenMsgReader *r, QueenAckRequest *a)
{
	QueenWireAck *head = &a->head;
	uint32		i;

	/* an item takes at least its flags, its id and five lengths */
	if (!queen_wire_get_ack(r, head) ||
		head->nitems > (r->len - r->pos) / (1 + UUID_LEN + 5 * sizeof(uint32)))
		return false;
	a->group = head->group.len > 0 ?
		pnstrdup(head->group.data, head->group.len) : QUEEN_QUEUE_MODE;
	a->wire = palloc0(sizeof(QueenWireAckItem) * Max(head->nitems, 1));
	a->items = palloc0(sizeof(QueenAckItem) * Max(head->nitems, 1));
	a->slot = palloc(sizeof(int) * Max(head->nitems, 1));
	a->nvalid = 0;
	for (i = 0; i < head->nitems; i++)
	{
		QueenWireAckItem *w = &a->wire[i];
		QueenAckItem *it;

		if (!queen_wire_get_ack_item(r, w))
			return false;
		a->slot[i] = -1;
		if (!(w->flags & QUEEN_ACK_ITEM_VALID))
			continue;
		it = &a->items[a->nvalid];
		a->slot[i] = a->nvalid++;
		memcpy(it->partition_id.data, w->partition_id, UUID_LEN);
		it->transaction_id = pnstrdup(w->txn.data, w->txn.len);
		it->txn_len = w->txn.len;
		it->status = queen_ack_status((w->flags & QUEEN_ACK_ITEM_STATUS) ? w->status.data : NULL,
									  w->status.len);
		it->lease_id = queen_text_or_null(w->lease);
		it->error = (w->flags & QUEEN_ACK_ITEM_ERROR) ? pnstrdup(w->error.data, w->error.len) : NULL;
		it->offset = -1;
	}
	return r->pos == r->len;
}

static int
queen_consume_ack(QueenMsgReader *r, StringInfo out)
{
	QueenAckRequest a;
	uint32		i;

	if (!queen_consume_ack_items(r, &a))
		return queen_consume_malformed(out);

	pgstat_report_activity(STATE_RUNNING, "queen: ack");
	if (a.nvalid > 0 && queen_ack(a.group, a.items, a.nvalid) > 0)
		queen_consume_wake_released();

	appendStringInfoChar(out, '[');
	for (i = 0; i < a.head.nitems; i++)
	{
		QueenWireAckItem *w = &a.wire[i];

		if (a.slot[i] < 0)
		{
			char	   *problem = pnstrdup(w->problem.data, w->problem.len);

			queen_render_ack_item(out, (int) i, w->txn, false, problem, false, false, false);
			queen_consume_counts.failed++;
		}
		else
		{
			QueenAckItem *it = &a.items[a.slot[i]];

			queen_render_ack_item(out, (int) i, w->txn, it->success, it->problem,
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
static int
queen_consume_ack_failed(QueenMsgReader *r, const char *message, StringInfo out)
{
	QueenAckRequest a;
	char	   *error = psprintf("ack failed, nothing was applied: %s", message);
	uint32		i;

	if (!queen_consume_ack_items(r, &a))
		return queen_consume_malformed(out);
	appendStringInfoChar(out, '[');
	for (i = 0; i < a.head.nitems; i++)
		queen_render_ack_item(out, (int) i, a.wire[i].txn, false,
							  a.slot[i] < 0 ?
							  pnstrdup(a.wire[i].problem.data, a.wire[i].problem.len) : error,
							  false, false, false);
	appendStringInfoChar(out, ']');
	queen_consume_counts.failed += a.head.nitems;
	return 200;
}

/* ----------------------------------------------------------------
 *		Leases, dead letters, consumer groups
 * ----------------------------------------------------------------
 */

/* POST /api/v1/lease/:leaseId/extend: always 200, Queen's three expiry keys. */
static int
queen_consume_renew(QueenMsgReader *r, StringInfo out)
{
	QueenWireRenew m;
	char	   *lease;
	TimestampTz earliest = 0;
	int			renewed;
	StringInfoData at;

	if (!queen_wire_get_renew(r, &m))
		return queen_consume_malformed(out);
	lease = pnstrdup(m.lease.data, m.lease.len);
	pgstat_report_activity(STATE_RUNNING, "queen: lease extension");
	renewed = queen_renew_lease(lease, m.seconds, &earliest);
	queen_consume_counts.extensions += renewed;

	initStringInfo(&at);
	if (renewed > 0)
		queen_render_timestamp(&at, earliest);
	else
		appendStringInfoString(&at, "null");
	appendStringInfoString(out, "{\"leaseId\":");
	escape_json(out, lease);
	appendStringInfo(out, ",\"success\":%s,\"renewed\":%d,\"newExpiresAt\":%s,\"expiresAt\":%s,\"lease_expires_at\":%s}",
					 renewed > 0 ? "true" : "false", renewed, at.data, at.data, at.data);
	return 200;
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

static void
queen_render_dlq_entry(StringInfo out, const QueenDlqEntry *e)
{
	appendStringInfoString(out, "{\"id\":");
	queen_render_uuid(out, &e->id);
	appendStringInfoString(out, ",\"messageId\":");
	queen_render_uuid(out, &e->message_id);
	appendStringInfoString(out, ",\"partitionId\":");
	queen_render_uuid(out, &e->partition_id);
	appendStringInfoString(out, ",\"transactionId\":");
	queen_render_text(out, e->transaction_id);
	appendStringInfoString(out, ",\"consumerGroup\":");
	queen_render_text(out, e->consumer_group);
	appendStringInfoString(out, ",\"errorMessage\":");
	queen_render_text(out, e->error);
	appendStringInfo(out, ",\"retryCount\":%d,\"originalCreatedAt\":", e->retry_count);
	queen_render_timestamp(out, e->created_at);
	appendStringInfoString(out, ",\"movedToDlqAt\":");
	queen_render_timestamp(out, e->failed_at);
	appendStringInfoString(out, ",\"queueName\":");
	queen_render_text(out, e->queue);
	appendStringInfoString(out, ",\"namespace\":");
	queen_render_text(out, e->namespace_name);
	appendStringInfoString(out, ",\"task\":");
	queen_render_text(out, e->task);
	appendStringInfoString(out, ",\"partitionName\":");
	queen_render_text(out, e->partition);
	appendStringInfoString(out, ",\"data\":");
	/* the snapshot is JSON text already */
	appendStringInfoString(out, e->payload ? e->payload : "null");
	appendStringInfoChar(out, '}');
}

/* GET /api/v1/dlq */
static int
queen_consume_dlq(const pg_uuid_t *tenant, QueenMsgReader *r, StringInfo out)
{
	QueenWireDlq m;
	QueenDlqFilter f;
	QueenDlqEntry *entries = NULL;
	int			n = 0;
	int64		total;
	int			i;

	if (!queen_wire_get_dlq(r, &m))
		return queen_consume_malformed(out);
	memset(&f, 0, sizeof(f));
	f.tenant = *tenant;
	f.queue = pnstrdup(m.queue.data, m.queue.len);
	f.group = queen_text_or_null(m.group);
	f.partition = queen_text_or_null(m.partition);
	f.limit = m.limit;
	f.offset = m.offset;
	if (!queen_consume_bound(m.from, DT_NOBEGIN, &f.from) ||
		!queen_consume_bound(m.to, DT_NOEND, &f.to))
	{
		appendStringInfoString(out, "{\"error\":\"from and to must be ISO-8601 timestamps\"}");
		return 400;
	}
	pgstat_report_activity(STATE_RUNNING, "queen: dead letters");
	total = queen_dlq_list(&f, &entries, &n);

	appendStringInfoString(out, "{\"messages\":[");
	for (i = 0; i < n; i++)
	{
		if (i > 0)
			appendStringInfoChar(out, ',');
		queen_render_dlq_entry(out, &entries[i]);
	}
	appendStringInfo(out, "],\"total\":" INT64_FORMAT ",\"limit\":%d,\"offset\":" INT64_FORMAT "}",
					 total, f.limit, f.offset);
	return 200;
}

/* DELETE /api/v1/consumer-groups/:group[/queues/:queue] */
static int
queen_consume_delete_group(const pg_uuid_t *tenant, QueenMsgReader *r, StringInfo out)
{
	QueenWireGroupDelete m;
	char	   *group;
	char	   *queue;
	int64		removed;

	if (!queen_wire_get_group_delete(r, &m))
		return queen_consume_malformed(out);
	group = pnstrdup(m.group.data, m.group.len);
	queue = queen_text_or_null(m.queue);
	pgstat_report_activity(STATE_RUNNING, "queen: delete consumer group");
	removed = queen_delete_consumer_group(tenant, group, queue, m.delete_metadata != 0);

	appendStringInfoString(out, "{\"success\":true,\"consumerGroup\":");
	escape_json(out, group);
	appendStringInfoString(out, ",\"queueName\":");
	queen_render_text(out, queue);
	appendStringInfo(out, ",\"deletedCursors\":" INT64_FORMAT ",\"metadataDeleted\":%s}",
					 removed, m.delete_metadata ? "true" : "false");
	return 200;
}

/* ----------------------------------------------------------------
 *		Entry points (shard_control.c)
 * ----------------------------------------------------------------
 */

/* Run one consumption op inside the control transaction; its HTTP status. */
int
queen_shard_consume(uint8 op, const pg_uuid_t *tenant, const char *arg, uint32 arglen,
					StringInfo out)
{
	QueenMsgReader r;

	queen_wire_reader(&r, arg, arglen);
	switch (op)
	{
		case QUEEN_CONTROL_POP:
			return queen_consume_pop(tenant, &r, out);
		case QUEEN_CONTROL_ACK:
			return queen_consume_ack(&r, out);
		case QUEEN_CONTROL_RENEW:
			return queen_consume_renew(&r, out);
		case QUEEN_CONTROL_DLQ:
			return queen_consume_dlq(tenant, &r, out);
		case QUEEN_CONTROL_DELETE_GROUP:
			return queen_consume_delete_group(tenant, &r, out);
	}
	return queen_consume_malformed(out);
}

/*
 * Before a shared transaction's requests run: the consumer rows its acks
 * and lease extensions will lock, locked now, all at once, in the global
 * order (queen_lock_consumers).  Each request alone locks its own rows in
 * that order, but one after another they would lock in request order, and
 * two shards (or a shard and a caller's own transaction) could then each
 * hold a row the other waits for.  Pops need nothing here: they skip
 * locked rows, never wait for one, and run last.  A malformed request is
 * left to its own run to refuse.
 */
void
queen_shard_consume_lock(int n, const uint8 *ops, char *const *args, const uint32 *arglens)
{
	QueenConsumerKey *keys = NULL;
	const char **leases;
	int			nkeys = 0;
	int			maxkeys = 0;
	int			nleases = 0;
	int			nlocking = 0;
	int			i;

	for (i = 0; i < n; i++)
		nlocking += ops[i] == QUEEN_CONTROL_ACK || ops[i] == QUEEN_CONTROL_RENEW;
	if (nlocking < 2)
		return;					/* one request locks in order by itself */
	leases = palloc(sizeof(char *) * n);
	for (i = 0; i < n; i++)
	{
		QueenMsgReader r;

		queen_wire_reader(&r, args[i], arglens[i]);
		if (ops[i] == QUEEN_CONTROL_ACK)
		{
			QueenAckRequest a;
			int			j;

			if (!queen_consume_ack_items(&r, &a))
				continue;
			if (nkeys + a.nvalid > maxkeys)
			{
				maxkeys = Max(maxkeys * 2, nkeys + a.nvalid);
				keys = keys == NULL ? palloc(sizeof(QueenConsumerKey) * maxkeys) :
					repalloc(keys, sizeof(QueenConsumerKey) * maxkeys);
			}
			for (j = 0; j < a.nvalid; j++)
			{
				keys[nkeys].partition_id = a.items[j].partition_id;
				keys[nkeys].group = a.group;
				nkeys++;
			}
		}
		else if (ops[i] == QUEEN_CONTROL_RENEW)
		{
			QueenWireRenew m;

			if (queen_wire_get_renew(&r, &m) && m.lease.len > 0)
				leases[nleases++] = pnstrdup(m.lease.data, m.lease.len);
		}
	}
	pgstat_report_activity(STATE_RUNNING, "queen: locking consumer rows");
	queen_lock_consumers(keys, nkeys, leases, nleases);
}

/*
 * The op's transaction failed (rolled back, nothing of it exists): its
 * answer.  A pop's lease was never taken; an ack's items were not applied.
 */
int
queen_shard_consume_failed(uint8 op, const char *arg, uint32 arglen, int sqlerrcode,
						   const char *message, StringInfo out)
{
	QueenMsgReader r;
	static const char *const what[] = {"pop", "ack", "lease extension", "dead-letter listing",
	"consumer group deletion"};
	const char *name = op >= QUEEN_CONTROL_POP && op <= QUEEN_CONTROL_DELETE_GROUP ?
		what[op - QUEEN_CONTROL_POP] : "request";

	/* what the body counted before it failed did not happen */
	queen_consume_reset();
	queen_wire_reader(&r, arg, arglen);

	/*
	 * A row another transaction held past queen.consume_lock_timeout: nothing
	 * was applied, and trying again soon will do (Queen's clients retry a
	 * 5xx by themselves; an ack sent again answers noop for what was applied).
	 */
	if (sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE)
	{
		pg_atomic_fetch_add_u64(&queen_broker->metrics.consume_lock_timeouts, 1);
		appendStringInfoString(out, "{\"error\":");
		escape_json(out, psprintf("%s not applied: a row it needs is locked by another transaction (held longer than queen.consume_lock_timeout, %d ms); nothing was changed, retry",
								  name, queen_consume_lock_timeout_ms));
		appendStringInfoChar(out, '}');
		return 503;
	}
	if (op == QUEEN_CONTROL_ACK)
		return queen_consume_ack_failed(&r, message, out);
	appendStringInfoString(out, "{\"error\":");
	escape_json(out, psprintf("%s failed: %s", name, message));
	appendStringInfoChar(out, '}');
	return 500;
}

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
	queen_consume_reset();
	queen_wake_forget();
}

/*
 * After the op's transaction: what it counted and made pending is real
 * only if it committed.
 */
void
queen_shard_consume_done(bool committed)
{
	QueenMetrics *m = &queen_broker->metrics;
	QueenConsumeCounts *c = &queen_consume_counts;

	if (committed)
	{
		pg_atomic_fetch_add_u64(&m->pop_messages, c->pop_messages);
		pg_atomic_fetch_add_u64(&m->leases_expired, c->leases_expired);
		pg_atomic_fetch_add_u64(&m->ack_acked, c->acked);
		pg_atomic_fetch_add_u64(&m->dlq_filed, c->dlq);
		pg_atomic_fetch_add_u64(&m->lease_extensions, c->extensions);
		pg_atomic_fetch_add_u64(&m->leases_restamped, c->restamped);
		pg_atomic_fetch_add_u64(&m->wakes_ack, queen_wake_publish());
	}
	else
		queen_wake_forget();
	/* a failed ack's items were counted failed by its answer */
	pg_atomic_fetch_add_u64(&m->ack_failed, c->failed);
	queen_consume_reset();
}
