/*-------------------------------------------------------------------------
 *
 * shard_control.c
 *	  A fusion shard's control requests (health, configure, delete queue,
 *	  and the consumption requests of shard_consume.c):
 *	  queued as they arrive, run between bundles (each in a transaction of
 *	  its own, except consumption requests queued together, which share
 *	  one), and answered with a status and a JSON body.
 *
 * The listeners hand control requests to the ready shards in turn; a
 * shard runs them between bundles, so they never hold up a bundle in
 * flight.  A request that fails is answered 500 with the error (503 for
 * health, which then says the database is unreachable); the shard carries
 * on.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "shard.h"
#include "configure.h"
#include "worker.h"

#include "commands/extension.h"
#include "pgstat.h"
#include "utils/backend_status.h"
#include "utils/json.h"
#include "utils/memutils.h"

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

static List *queen_controls = NIL;
static const char *queen_control_who;	/* "shard <index>", for the logs */
static MemoryContext queen_control_keep_cxt;	/* the queue, until run */
static MemoryContext queen_control_run_cxt; /* one request, reset after it */

void
queen_shard_controls_init(const char *who, MemoryContext keep_cxt, MemoryContext run_cxt)
{
	queen_control_who = who;
	queen_control_keep_cxt = keep_cxt;
	queen_control_run_cxt = run_cxt;
}

void
queen_shard_take_control(int listener, StringInfo raw)
{
	QueenMsgReader r;
	QueenWireControl m;
	QueenControl *c;
	MemoryContext old;

	(void) queen_wire_get_head(&r, raw, &m.request);
	if (!queen_wire_get_control(&r, &m))
	{
		elog(LOG, "queen %s: dropped a malformed control request", queen_control_who);
		return;
	}
	old = MemoryContextSwitchTo(queen_control_keep_cxt);
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

/* A control request's statements; its answer goes to out. */
typedef struct QueenControlTx
{
	QueenControl *c;
	int			status;
	StringInfoData out;
} QueenControlTx;

static void
queen_shard_control_body(void *arg)
{
	QueenControlTx *tx = (QueenControlTx *) arg;
	QueenControl *c = tx->c;

	switch (c->op)
	{
		case QUEEN_CONTROL_HEALTH:
			/* a catalog read in a transaction: the database answers */
			pgstat_report_activity(STATE_RUNNING, "queen: health");
			if (OidIsValid(get_extension_oid("queen", true)))
			{
				tx->status = 200;
				queen_health_json(&tx->out, true, NULL);
			}
			else
			{
				tx->status = 503;
				queen_health_json(&tx->out, true, "extension queen is not installed");
			}
			break;
		case QUEEN_CONTROL_CONFIGURE:
			pgstat_report_activity(STATE_RUNNING, "queen: configure");
			tx->status = queen_configure_queue(&c->tenant, c->arg, c->arglen, &tx->out);
			break;
		case QUEEN_CONTROL_DELETE_QUEUE:
			pgstat_report_activity(STATE_RUNNING, "queen: delete queue");
			tx->status = queen_delete_queue(&c->tenant, c->arg, &tx->out);
			break;
		case QUEEN_CONTROL_POP:
		case QUEEN_CONTROL_ACK:
		case QUEEN_CONTROL_RENEW:
		case QUEEN_CONTROL_DLQ:
		case QUEEN_CONTROL_DELETE_GROUP:
			queen_shard_consume_begin();
			tx->status = queen_shard_consume(c->op, &c->tenant, c->arg, c->arglen, &tx->out);
			queen_shard_consume_restamp();
			break;
		default:
			tx->status = 400;
			appendStringInfoString(&tx->out, "{\"error\":\"unknown control request\"}");
			break;
	}
}

/* Run one control request in its own transaction and answer it. */
static void
queen_shard_run_control(QueenControl *c)
{
	QueenControlTx tx;
	QueenTxResult result;
	bool		ok;
	MemoryContext old = MemoryContextSwitchTo(queen_control_run_cxt);

	tx.c = c;
	tx.status = 500;
	initStringInfo(&tx.out);
	ok = queen_worker_transact("control request", queen_control_who, queen_shard_control_body,
							   &tx, &result);
	if (!ok)
	{
		resetStringInfo(&tx.out);
		if (QUEEN_CONTROL_CONSUMES(c->op))
			tx.status = queen_shard_consume_failed(c->op, c->arg, c->arglen, result.sqlerrcode,
												   result.message, &tx.out);
		else if (c->op == QUEEN_CONTROL_HEALTH)
		{
			tx.status = 503;
			queen_health_json(&tx.out, false, result.message);
		}
		else
		{
			tx.status = 500;
			appendStringInfoString(&tx.out, "{\"error\":");
			escape_json(&tx.out, result.message);
			appendStringInfoChar(&tx.out, '}');
		}
	}

	if (ok && c->op == QUEEN_CONTROL_POP && tx.status == 200 &&
		queen_test_fault("shard_error_after_pop_commit"))
		elog(ERROR, "queen.test_fault: a shard fails between a pop's COMMIT and its answer");
	/* counted and woken only once committed, before the client hears of it */
	if (QUEEN_CONTROL_CONSUMES(c->op))
		queen_shard_consume_done(ok);
	/* a discovery that matched no queue may match this one now */
	if (ok && (c->op == QUEEN_CONTROL_CONFIGURE || c->op == QUEEN_CONTROL_DELETE_QUEUE))
		queen_wake_catalog(c->op == QUEEN_CONTROL_DELETE_QUEUE);
	queen_answer_reply(c->listener, c->request, tx.status, tx.out.data, tx.out.len);
	MemoryContextSwitchTo(old);
	MemoryContextReset(queen_control_run_cxt);
}

/*
 * Consumption requests queued one behind another run in one transaction:
 * one commit, one WAL flush for all of them, as a bundle is for pushes.
 * Each op's effects are its own rows (a pop's leases, an ack's cursors), so
 * sharing a commit changes only when they become visible.  If the shared
 * transaction fails (one request's error, a deadlock), it rolled back
 * whole, and each request runs again alone, so one bad request costs the
 * others a second try and never their answer.  Bounded so that pushes
 * waiting behind it are not held up long.
 */
#define QUEEN_CONSUME_BATCH		32

/*
 * Which consumption requests share a transaction: all but a consumer
 * group's deletion, which locks a group's rows across a queue or the whole
 * tenant (and its scan floors and subscription) and runs alone, so that a
 * shared transaction can lock everything it will wait for up front.
 */
#define QUEEN_CONTROL_SHARES(op) \
	(QUEEN_CONTROL_CONSUMES(op) && (op) != QUEEN_CONTROL_DELETE_GROUP)

typedef struct QueenConsumeBatch
{
	QueenControlTx txs[QUEEN_CONSUME_BATCH];
	int			n;
} QueenConsumeBatch;

/*
 * The rows the acks and lease extensions will lock are locked first, in
 * the global order.  Pops run after the other requests, which may wait for
 * a row lock (up to queen.consume_lock_timeout), so a pop's lease starts as
 * late as possible; a lease that aged all the same starts again just before
 * the COMMIT.
 */
static void
queen_shard_consume_batch_body(void *arg)
{
	QueenConsumeBatch *b = (QueenConsumeBatch *) arg;
	uint8		ops[QUEEN_CONSUME_BATCH];
	char	   *args[QUEEN_CONSUME_BATCH];
	uint32		arglens[QUEEN_CONSUME_BATCH];
	int			pass;
	int			i;

	for (i = 0; i < b->n; i++)
	{
		ops[i] = b->txs[i].c->op;
		args[i] = b->txs[i].c->arg;
		arglens[i] = b->txs[i].c->arglen;
	}
	queen_shard_consume_begin();
	queen_shard_consume_lock(b->n, ops, args, arglens);
	for (pass = 0; pass < 2; pass++)
		for (i = 0; i < b->n; i++)
		{
			QueenControl *c = b->txs[i].c;

			if ((c->op == QUEEN_CONTROL_POP) != (pass == 1))
				continue;
			b->txs[i].status = queen_shard_consume(c->op, &c->tenant, c->arg, c->arglen,
												   &b->txs[i].out);
		}
	queen_shard_consume_restamp();
}

static void
queen_shard_control_free(QueenControl *c)
{
	pfree(c->arg);
	pfree(c);
}

/* Run the consumption requests at the head of the queue together. */
static void
queen_shard_run_consume_batch(void)
{
	QueenConsumeBatch *b;
	QueenTxResult result;
	bool		ok;
	int			i;
	MemoryContext old = MemoryContextSwitchTo(queen_control_run_cxt);

	b = palloc(sizeof(QueenConsumeBatch));
	b->n = 0;
	while (queen_controls != NIL && b->n < QUEEN_CONSUME_BATCH &&
		   QUEEN_CONTROL_SHARES(((QueenControl *) linitial(queen_controls))->op))
	{
		QueenControl *c = (QueenControl *) linitial(queen_controls);

		queen_controls = list_delete_first(queen_controls);
		b->txs[b->n].c = c;
		b->txs[b->n].status = 500;
		initStringInfo(&b->txs[b->n].out);
		b->n++;
	}
	pgstat_report_activity(STATE_RUNNING, "queen: consumption requests");
	ok = queen_worker_transact("consumption requests", queen_control_who,
							   queen_shard_consume_batch_body, b, &result);
	if (!ok)
	{
		QueenControl *controls[QUEEN_CONSUME_BATCH];
		int			n = b->n;

		queen_shard_consume_discard();
		pg_atomic_fetch_add_u64(&queen_broker->metrics.consume_shared_failed, 1);
		for (i = 0; i < n; i++)
			controls[i] = b->txs[i].c;
		MemoryContextSwitchTo(old);
		MemoryContextReset(queen_control_run_cxt);
		for (i = 0; i < n; i++)
		{
			queen_shard_run_control(controls[i]);
			queen_shard_control_free(controls[i]);
		}
		return;
	}

	for (i = 0; i < b->n; i++)
		if (b->txs[i].c->op == QUEEN_CONTROL_POP && b->txs[i].status == 200 &&
			queen_test_fault("shard_error_after_pop_commit"))
			elog(ERROR, "queen.test_fault: a shard fails between a pop's COMMIT and its answer");
	/* counted and woken only once committed, before the clients hear of it */
	queen_shard_consume_done(true);
	for (i = 0; i < b->n; i++)
	{
		QueenControlTx *tx = &b->txs[i];

		queen_answer_reply(tx->c->listener, tx->c->request, tx->status, tx->out.data,
						   tx->out.len);
		queen_shard_control_free(tx->c);
	}
	MemoryContextSwitchTo(old);
	MemoryContextReset(queen_control_run_cxt);
}

/* Run every queued control request, oldest first; true if there was one. */
bool
queen_shard_run_controls(void)
{
	bool		ran = false;

	while (queen_controls != NIL)
	{
		QueenControl *c = (QueenControl *) linitial(queen_controls);

		if (QUEEN_CONTROL_SHARES(c->op) && list_length(queen_controls) > 1 &&
			QUEEN_CONTROL_SHARES(((QueenControl *) lsecond(queen_controls))->op))
			queen_shard_run_consume_batch();
		else
		{
			queen_controls = list_delete_first(queen_controls);
			queen_shard_run_control(c);
			queen_shard_control_free(c);
		}
		ran = true;
	}
	return ran;
}
