/*-------------------------------------------------------------------------
 *
 * shard_txn.c
 *	  POST /api/v1/transaction in the shard: pushes and acks in one
 *	  PostgreSQL transaction, all or nothing, through the same cores as a
 *	  push (bundle.c) and an ack (ack.c); and POST /streams/v1/cycle, a
 *	  transaction that also changes its stream query's state (streams.c).
 *
 * The listener has parsed the request, minted every pushed item's id and
 * packed its frame; the items arrive here in request order.  The run
 * pushes first: the items grouped by (queue, partition), layer-1
 * duplicates inside the request first-wins as in a push, every group in
 * one bundle, which locks its partition rows in ascending id.  Then the
 * acks: their consumer rows locked at once in ascending (partition, group)
 * (queen_lock_consumers), then each group's acks.  So a transaction takes
 * its locks in the global order, after its partitions its consumers, as
 * every other writer does.  A cycle's state changes come last, after
 * its query row (streams.c).
 *
 * Anything that would make the answer less than "everything happened"
 * raises instead: a pushed transactionId already stored, an ack that was
 * not carried out (unknown message, a lease that is not the live one, a
 * message already acknowledged).  The transaction rolls back whole, and
 * the answer says why with nothing written (queen_op_txn_fail).  It runs
 * alone, never in a shared consumption transaction, whose locks are taken
 * up front and would come before its partition rows.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "shard.h"
#include "bundle.h"
#include "codec.h"
#include "consume.h"
#include "metrics.h"
#include "render.h"
#include "streams.h"
#include "wake.h"
#include "worker.h"

#include "miscadmin.h"
#include "utils/json.h"

#include <signal.h>

/* Why a transaction was refused, for its answer ("reason") and the metrics. */
typedef enum QueenTxnRefusal
{
	QUEEN_TXN_OK = 0,
	QUEEN_TXN_DUPLICATE,		/* a pushed transactionId is already stored */
	QUEEN_TXN_ACK_FAILED,		/* an ack was not carried out */
	QUEEN_TXN_NO_QUERY,			/* a cycle's query is not registered */
	QUEEN_TXN_ERROR				/* an error of the server */
} QueenTxnRefusal;

/* Each outcome's counter: a transaction's, a cycle's. */
static const QueenCounter queen_txn_counters[2][QUEEN_TXN_ERROR + 1] = {
	{QUEEN_COUNT_TXN_COMMITTED, QUEEN_COUNT_TXN_DUPLICATE, QUEEN_COUNT_TXN_ACK_FAILED,
	QUEEN_COUNT_TXN_FAILED, QUEEN_COUNT_TXN_FAILED},
	{QUEEN_COUNT_CYCLE_COMMITTED, QUEEN_COUNT_CYCLE_DUPLICATE, QUEEN_COUNT_CYCLE_ACK_FAILED,
	QUEEN_COUNT_CYCLE_NO_QUERY, QUEEN_COUNT_CYCLE_FAILED}
};

static const char *const queen_txn_reasons[] = {
	"", "duplicate", "ack_failed", "no_query", "error"
};

static QueenTxnRefusal queen_txn_refusal = QUEEN_TXN_OK;

/* What the refusals say was rolled back: "transaction" or "cycle". */
static const char *queen_txn_what = "transaction";

/* One item of the request, decoded, and its outcome. */
typedef struct QueenTxnItem
{
	QueenArgsTxnItem w;
	QueenArgsAckItem ackw;		/* an ack: the ack item that followed */
	pg_uuid_t	message_id;		/* a push: its final id (a follower's: its leader's) */
	bool		duplicate;		/* a push: a layer-1 follower inside the request */
	QueenAckItem *ack;			/* an ack: its verdict */
} QueenTxnItem;

typedef struct QueenTxnRun
{
	const QueenArgsTxn *head;
	pg_uuid_t	id;				/* the transaction's own id, minted here */
	QueenTxnItem *items;
	int			nitems;
	const char **leases;		/* requiredLeases, in canonical form */
	int			nleases;
	int			nstate;			/* a cycle's state changes */
} QueenTxnRun;

/* The items after the arguments; false when they are malformed. */
static bool
queen_txn_decode(QueenOpCall *call, QueenTxnRun *run)
{
	QueenMsgReader r = call->items;
	const QueenArgsTxn *head = (const QueenArgsTxn *) call->args;
	int			i;

	/* an item takes at least its kind and eight lengths */
	if (head->nitems < 0 ||
		(Size) head->nitems > (r.len - r.pos) / (1 + 8 * sizeof(uint32)))
		return false;
	run->head = head;
	queen_txn_what = head->cycle ? "cycle" : "transaction";
	run->items = palloc0(sizeof(QueenTxnItem) * Max(head->nitems, 1));
	run->nitems = head->nitems;
	run->leases = palloc(sizeof(char *) * Max(head->nitems, 1));
	for (i = 0; i < head->nitems; i++)
	{
		QueenArgsTxnItem *w = &run->items[i].w;

		if (!queen_wire_get_fields(&r, queen_control_op(call->op)->items, w) ||
			(w->kind == QUEEN_TXN_ACK &&
			 !queen_wire_get_fields(&r, &queen_args_ack_item, &run->items[i].ackw)))
			return false;
		if (w->kind == QUEEN_TXN_LEASE)
			run->leases[run->nleases++] = queen_lease_id_normal(queen_wire_cstring(w->lease));
	}
	return r.pos == r.len;
}

/*
 * The pushes: one bundle of the request's (queue, partition) groups.  A
 * transactionId already stored raises, so nothing of the request stays.
 */
static void
queen_txn_push(QueenOpCall *call, QueenTxnRun *run)
{
	QueenItemKey *keys = palloc(sizeof(QueenItemKey) * Max(run->nitems, 1));
	int		   *index = palloc(sizeof(int) * Max(run->nitems, 1));
	int		   *leader = palloc(sizeof(int) * Max(run->nitems, 1));
	int		  **members;
	int		   *nmembers;
	QueenBundleGroup *groups;
	int			npush = 0;
	int			ngroups;
	int			g,
				i;

	for (i = 0; i < run->nitems; i++)
	{
		QueenArgsTxnItem *w = &run->items[i].w;

		if (w->kind != QUEEN_TXN_PUSH)
			continue;
		keys[npush].queue = queen_wire_cstring(w->queue);
		keys[npush].partition = queen_wire_cstring(w->partition);
		keys[npush].txn = queen_wire_cstring(w->txn);
		index[npush++] = i;
	}
	if (npush == 0)
		return;
	ngroups = queen_group_items(keys, npush, leader, &members, &nmembers);
	groups = palloc0(sizeof(QueenBundleGroup) * ngroups);
	for (g = 0; g < ngroups; g++)
	{
		StringInfoData frames;
		int			k;

		initStringInfo(&frames);
		for (k = 0; k < nmembers[g]; k++)
		{
			QueenArgsTxnItem *w = &run->items[index[members[g][k]]].w;

			appendBinaryStringInfo(&frames, w->frame.data, w->frame.len);
		}
		queen_bundle_group_init(&groups[g], &call->tenant, keys[members[g][0]].queue,
								keys[members[g][0]].partition, frames.data, frames.len,
								nmembers[g]);
	}
	queen_bundle_push(groups, ngroups);
	queen_bundle_raise_refused(groups, ngroups);

	for (g = 0; g < ngroups; g++)
	{
		int			k;

		for (k = 0; k < nmembers[g]; k++)
		{
			QueenBundleFrame *f = &groups[g].frames[k];
			const QueenItemKey *key = &keys[members[g][k]];

			if (f->status != QUEEN_SEGMENT_QUEUED)
			{
				queen_txn_refusal = QUEEN_TXN_DUPLICATE;
				ereport(ERROR,
						(errcode(ERRCODE_UNIQUE_VIOLATION),
						 errmsg("transactionId \"%s\" is already stored in queue \"%s\" partition \"%s\" (offset " INT64_FORMAT "); the %s was rolled back",
								key->txn, key->queue, key->partition, f->offset,
								queen_txn_what)));
			}
			run->items[index[members[g][k]]].message_id = f->message_id;
		}
		queen_wake_mark(&call->tenant, keys[members[g][0]].queue,
						strlen(keys[members[g][0]].queue));
	}
	/* a follower inside the request is its leader's message */
	for (i = 0; i < npush; i++)
		if (leader[i] >= 0)
		{
			run->items[index[i]].message_id = run->items[index[leader[i]]].message_id;
			run->items[index[i]].duplicate = true;
		}
}

/* One ack as the core takes it. */
static QueenAckItem *
queen_txn_ack_item(const QueenTxnRun *run, const QueenArgsAckItem *w)
{
	QueenAckItem *it = palloc(sizeof(QueenAckItem));

	queen_ack_item_from_wire(w, it);
	it->release_lease = run->head->cycle && run->head->release_lease;
	return it;
}

/* Ack items by group, then request order: each group is one core call. */
static const QueenConsumerKey *queen_txn_sort_keys;

static int
queen_txn_cmp_group(const void *pa, const void *pb)
{
	int			a = *(const int *) pa;
	int			b = *(const int *) pb;
	int			c = strcmp(queen_txn_sort_keys[a].group, queen_txn_sort_keys[b].group);

	return c != 0 ? c : (a > b) - (a < b);
}

/* An ack the core did not carry out: the whole transaction goes. */
static void
queen_txn_ack_refused(const QueenAckItem *it)
{
	char		pid[UUID_LEN * 2 + 5];

	queen_uuid_format(&it->partition_id, pid);
	queen_txn_refusal = QUEEN_TXN_ACK_FAILED;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("ack of transactionId \"%s\" in partition %s was not applied: %s; the %s was rolled back",
					it->transaction_id, pid,
					it->noop ? "it was already acknowledged" :
					it->problem != NULL ? it->problem : "not carried out",
					queen_txn_what)));
}

/*
 * An ack without a lease of its own acts under the request's
 * requiredLeases (Queen's clients name them there, not on each ack): under
 * the only one, or, with several, the one its consumer row holds, if that
 * is one of them.  A row held under none of them is refused: its message
 * is another consumer's now.  Without requiredLeases it goes without a
 * lease, as an ack without a leaseId does.  Called with the row locked.
 */
static void
queen_txn_ack_lease(const QueenTxnRun *run, QueenAckItem *it, const char *group)
{
	char	   *held;
	int			i;

	if (it->lease_id != NULL || run->nleases == 0)
		return;
	if (run->nleases == 1)
	{
		it->lease_id = run->leases[0];
		return;
	}
	held = queen_consumer_lease(&it->partition_id, group);
	for (i = 0; held != NULL && i < run->nleases; i++)
		if (strcmp(held, run->leases[i]) == 0)
		{
			it->lease_id = held;
			return;
		}
	it->problem = "invalid lease: the partition is not leased under any of requiredLeases (its lease expired and it went to another consumer, or it was never leased)";
	queen_txn_ack_refused(it);
}

/*
 * The acks, after the pushes: every consumer row locked first in the
 * global order, then each group's acks through the core.  One that was
 * not carried out raises.
 */
static void
queen_txn_ack(QueenTxnRun *run)
{
	QueenConsumerKey *keys = palloc(sizeof(QueenConsumerKey) * Max(run->nitems, 1));
	QueenTxnItem **acks = palloc(sizeof(QueenTxnItem *) * Max(run->nitems, 1));
	int		   *order = palloc(sizeof(int) * Max(run->nitems, 1));
	QueenAckItem *batch = palloc(sizeof(QueenAckItem) * Max(run->nitems, 1));
	int			nacks = 0;
	int			released = 0;
	int			i,
				start;

	for (i = 0; i < run->nitems; i++)
	{
		QueenTxnItem *t = &run->items[i];

		if (t->w.kind != QUEEN_TXN_ACK)
			continue;
		t->ack = queen_txn_ack_item(run, &t->ackw);
		keys[nacks].partition_id = t->ack->partition_id;
		keys[nacks].group = t->w.group.len > 0 ? queen_wire_cstring(t->w.group) : QUEEN_QUEUE_MODE;
		order[nacks] = nacks;
		acks[nacks++] = t;
	}
	if (nacks == 0)
		return;
	queen_lock_consumers(keys, nacks, NULL, 0);
	for (i = 0; i < nacks; i++)
		queen_txn_ack_lease(run, acks[i]->ack, keys[i].group);

	queen_txn_sort_keys = keys;
	qsort(order, nacks, sizeof(int), queen_txn_cmp_group);
	for (start = 0; start < nacks;)
	{
		int			end = start + 1;
		int			k;

		while (end < nacks && strcmp(keys[order[end]].group, keys[order[start]].group) == 0)
			end++;
		for (k = start; k < end; k++)
			batch[k - start] = *acks[order[k]]->ack;
		released += queen_ack(keys[order[start]].group, batch, end - start);
		for (k = start; k < end; k++)
		{
			*acks[order[k]]->ack = batch[k - start];
			if (!batch[k - start].success || batch[k - start].noop)
				queen_txn_ack_refused(&batch[k - start]);
		}
		start = end;
	}
	if (released > 0)
		queen_consume_wake_released();
}

/* A cycle's state changes, after its ack; its query must exist. */
static void
queen_txn_state(QueenOpCall *call, QueenTxnRun *run)
{
	QueenStateOp *ops = palloc(sizeof(QueenStateOp) * Max(run->nitems, 1));
	pg_uuid_t	query;
	pg_uuid_t	partition;
	int			i;

	for (i = 0; i < run->nitems; i++)
	{
		QueenArgsTxnItem *w = &run->items[i].w;

		if (w->kind != QUEEN_TXN_STATE)
			continue;
		ops[run->nstate].key = queen_wire_cstring(w->key);
		ops[run->nstate++].value = w->value.len > 0 ? queen_wire_cstring(w->value) : NULL;
	}
	memcpy(query.data, run->head->query_id, UUID_LEN);
	memcpy(partition.data, run->head->partition_id, UUID_LEN);
	if (!queen_stream_state_apply(&call->tenant, &query, &partition, ops, run->nstate))
	{
		char		qid[UUID_LEN * 2 + 5];

		queen_uuid_format(&query, qid);
		queen_txn_refusal = QUEEN_TXN_NO_QUERY;
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("no stream query with query_id %s (register it with POST /streams/v1/queries); the cycle was rolled back",
						qid)));
	}
}

void *
queen_op_txn_run(QueenOpCall *call)
{
	QueenTxnRun *run = palloc0(sizeof(QueenTxnRun));

	queen_txn_refusal = QUEEN_TXN_OK;
	if (!queen_txn_decode(call, run))
	{
		call->status = 500;
		call->problem = "malformed transaction items";
		return NULL;
	}
	queen_uuid_v7(&run->id);
	queen_txn_push(call, run);
	/* a shard killed with the pushes written and the acks not: the tests' */
	if (queen_test_fault("shard_kill_in_transaction"))
		(void) kill(MyProcPid, SIGKILL);
	queen_txn_ack(run);
	if (run->head->cycle)
		queen_txn_state(call, run);
	return run;
}

/* A pushed item's result: its id, its queue, whether it was a follower. */
static void
queen_txn_render_push(StringInfo out, const QueenTxnItem *t)
{
	appendStringInfoString(out, ",\"messageId\":");
	queen_render_uuid(out, &t->message_id);
	appendStringInfoString(out, ",\"queueName\":");
	queen_render_text(out, queen_wire_cstring(t->w.queue));
	if (t->duplicate)
		appendStringInfoString(out, ",\"duplicate\":true");
}

/*
 * A cycle's answer, Queen's: the state changes applied, the sink pushes'
 * results, the source ack's (null without one).
 */
static int
queen_txn_render_cycle(QueenTxnRun *run, StringInfo out)
{
	const QueenTxnItem *ack = NULL;
	pg_uuid_t	id;
	int			n = 0;
	int			i;

	appendStringInfoString(out, "{\"success\":true,\"query_id\":");
	memcpy(id.data, run->head->query_id, UUID_LEN);
	queen_render_uuid(out, &id);
	appendStringInfoString(out, ",\"partition_id\":");
	memcpy(id.data, run->head->partition_id, UUID_LEN);
	queen_render_uuid(out, &id);
	appendStringInfo(out, ",\"state_ops_applied\":%d,\"push_results\":[", run->nstate);
	for (i = 0; i < run->nitems; i++)
	{
		const QueenTxnItem *t = &run->items[i];

		if (t->w.kind == QUEEN_TXN_ACK)
			ack = t;
		if (t->w.kind != QUEEN_TXN_PUSH)
			continue;
		appendStringInfo(out, "%s{\"index\":%d,\"status\":\"%s\",\"transactionId\":",
						 n > 0 ? "," : "", n, t->duplicate ? "duplicate" : "queued");
		n++;
		queen_render_text(out, queen_wire_cstring(t->w.txn));
		queen_txn_render_push(out, t);
		appendStringInfoChar(out, '}');
	}
	appendStringInfoString(out, "],\"ack_result\":");
	if (ack == NULL)
		appendStringInfoString(out, "null}");
	else
		appendStringInfo(out, "{\"success\":true,\"lease_released\":%s,\"dlq\":%s}}",
						 ack->ack->lease_released ? "true" : "false",
						 ack->ack->dlq ? "true" : "false");
	return 200;
}

/* Queen's answer: the transaction's id and one result per operation, in order. */
int
queen_op_txn_render(QueenOpCall *call, void *result, StringInfo out)
{
	QueenTxnRun *run = (QueenTxnRun *) result;
	int			n = 0;
	int			i;

	(void) call;
	if (run->head->cycle)
		return queen_txn_render_cycle(run, out);
	appendStringInfoString(out, "{\"transactionId\":");
	queen_render_uuid(out, &run->id);
	appendStringInfoString(out, ",\"success\":true,\"results\":[");
	for (i = 0; i < run->nitems; i++)
	{
		QueenTxnItem *t = &run->items[i];

		if (t->w.kind == QUEEN_TXN_LEASE)
			continue;
		if (n > 0)
			appendStringInfoChar(out, ',');
		appendStringInfo(out, "{\"index\":%d,\"type\":\"%s\",\"success\":true,\"transactionId\":",
						 n++, t->w.kind == QUEEN_TXN_PUSH ? "push" : "ack");
		queen_render_text(out, queen_wire_cstring(t->w.kind == QUEEN_TXN_PUSH ? t->w.txn : t->ackw.txn));
		if (t->w.kind == QUEEN_TXN_PUSH)
			queen_txn_render_push(out, t);
		else
			appendStringInfo(out, ",\"error\":null,\"dlq\":%s",
							 t->ack->dlq ? "true" : "false");
		appendStringInfoChar(out, '}');
	}
	appendStringInfoString(out, "]}");
	return 200;
}

/* Is the call a stream cycle?  (Its arguments were decoded before it ran.) */
static bool
queen_txn_is_cycle(QueenOpCall *call)
{
	return call->args != NULL && ((const QueenArgsTxn *) call->args)->cycle;
}

/*
 * The transaction rolled back: nothing of it was written.  A refusal the
 * run raised is Queen's answer, 200 with success false and why; any other
 * error is the server's, 500.  A cycle's answer keeps a cycle's keys.
 */
int
queen_op_txn_fail(QueenOpCall *call, const char *message, StringInfo out)
{
	QueenTxnRefusal refusal = queen_txn_refusal;
	bool		cycle = queen_txn_is_cycle(call);

	queen_txn_refusal = QUEEN_TXN_OK;
	if (refusal == QUEEN_TXN_OK)
	{
		refusal = QUEEN_TXN_ERROR;
		message = psprintf("%s failed, nothing was written: %s",
						   cycle ? "cycle" : "transaction", message);
	}
	queen_count(queen_txn_counters[cycle][refusal], 1);
	appendStringInfoString(out, "{\"success\":false,\"error\":");
	queen_render_text(out, message);
	appendStringInfo(out, ",\"reason\":\"%s\"", queen_txn_reasons[refusal]);
	if (cycle)
	{
		const QueenArgsTxn *head = (const QueenArgsTxn *) call->args;
		pg_uuid_t	id;

		appendStringInfoString(out, ",\"query_id\":");
		memcpy(id.data, head->query_id, UUID_LEN);
		queen_render_uuid(out, &id);
		appendStringInfoString(out, ",\"partition_id\":");
		memcpy(id.data, head->partition_id, UUID_LEN);
		queen_render_uuid(out, &id);
		appendStringInfoString(out, ",\"state_ops_applied\":0,\"push_results\":[],\"ack_result\":null}");
	}
	else
		appendStringInfoString(out, ",\"results\":[]}");
	return refusal == QUEEN_TXN_ERROR ? 500 : 200;
}

void
queen_op_txn_committed(QueenOpCall *call)
{
	queen_count(queen_txn_counters[queen_txn_is_cycle(call)][QUEEN_TXN_OK], 1);
}
