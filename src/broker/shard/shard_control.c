/*-------------------------------------------------------------------------
 *
 * shard_control.c
 *	  The one runner of a fusion shard's control operations (ops.h):
 *	  queued as they arrive, run between bundles (each in a transaction of
 *	  its own, except operations that may share one queued together), and
 *	  answered with a status and a JSON body.  What each operation does is
 *	  its row's (ops.c); this file knows no operation by name.
 *
 * The listeners hand control requests to the ready shards in turn; a
 * shard runs them between bundles, so they never hold up a bundle in
 * flight.  An operation whose transaction fails is answered by its row's
 * fail function (by default 500 with the error); the shard carries on.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "shard.h"
#include "render.h"
#include "worker.h"

#include "pgstat.h"
#include "utils/backend_status.h"
#include "utils/json.h"
#include "utils/memutils.h"

/* A control request waiting for its turn between bundles. */
typedef struct QueenControl
{
	int			listener;
	uint64		request;
	const QueenControlOpDef *def;	/* NULL: malformed */
	QueenOpCall call;			/* its fields point into arg */
	char	   *arg;
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

/* Queue a control request, its arguments decoded by its row's layout. */
void
queen_shard_take_control(int listener, StringInfo raw)
{
	QueenMsgReader r;
	QueenWireControl m;
	QueenControl *c;
	MemoryContext old;

	(void) queen_wire_get_head(&r, raw, &m.request);
	if (!queen_wire_get(&r, QUEEN_MSG_CONTROL, &m))
	{
		elog(LOG, "queen %s: dropped a malformed control request", queen_control_who);
		return;
	}
	old = MemoryContextSwitchTo(queen_control_keep_cxt);
	c = palloc0(sizeof(QueenControl));
	c->listener = listener;
	c->request = m.request;
	c->arg = palloc(m.arg.len + 1);
	memcpy(c->arg, m.arg.data, m.arg.len);
	c->arg[m.arg.len] = '\0';
	c->call.op = m.op;
	memcpy(c->call.tenant.data, m.tenant, UUID_LEN);
	c->def = queen_control_op(m.op);
	if (c->def != NULL)
	{
		void	   *args = palloc0(c->def->args != NULL ? c->def->args->size : 1);

		queen_wire_reader(&c->call.items, c->arg, m.arg.len);
		if (queen_control_get_args(&c->call.items, m.op, args))
			c->call.args = args;
		else
			c->def = NULL;
	}
	queen_controls = lappend(queen_controls, c);
	MemoryContextSwitchTo(old);
}

static void
queen_shard_control_free(QueenControl *c)
{
	pfree(c->arg);
	if (c->call.args != NULL)
		pfree((void *) c->call.args);
	pfree(c);
}

/* A control request's run; its answer goes to out. */
typedef struct QueenControlTx
{
	QueenControl *c;
	int			status;
	StringInfoData out;
} QueenControlTx;

/* Run the operation and render its answer, or the refusal run chose. */
static void
queen_shard_control_call(QueenControlTx *tx)
{
	QueenControl *c = tx->c;
	void	   *result;

	c->call.problem = NULL;
	c->call.invalid = NULL;
	c->call.status = 0;
	pgstat_report_activity(STATE_RUNNING, c->def->activity);
	result = c->def->run(&c->call);
	if (result != NULL)
		tx->status = c->def->render(&c->call, result, &tx->out);
	else
	{
		tx->status = c->call.status != 0 ? c->call.status : 400;
		queen_render_error(&tx->out, c->call.problem, c->call.invalid);
	}
}

static void
queen_shard_control_body(void *arg)
{
	QueenControlTx *tx = (QueenControlTx *) arg;
	bool		consumes = (tx->c->def->flags & QUEEN_OP_CONSUMES) != 0;

	if (consumes)
		queen_shard_consume_begin();
	queen_shard_control_call(tx);
	if (consumes)
		queen_shard_consume_restamp();
}

/* The operation's transaction rolled back: nothing of it exists. */
static int
queen_shard_control_failed(QueenControl *c, int sqlerrcode, const char *message,
						   StringInfo out)
{
	if (c->def->flags & QUEEN_OP_CONSUMES)
	{
		/* what the body counted before it failed did not happen */
		queen_shard_consume_reset();

		/*
		 * A row another transaction held past queen.consume_lock_timeout:
		 * nothing was applied, and trying again soon will do (Queen's clients
		 * retry a 5xx by themselves; an ack sent again answers noop for what
		 * was applied).
		 */
		if (sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE)
		{
			queen_count(QUEEN_COUNT_CONSUME_LOCK_TIMEOUTS, 1);
			queen_render_error(out, psprintf("%s not applied: a row it needs is locked by another transaction (held longer than queen.consume_lock_timeout, %d ms); nothing was changed, retry",
											 c->def->name, queen_consume_lock_timeout_ms),
							   NULL);
			return 503;
		}
	}
	if (c->def->fail != NULL)
		return c->def->fail(&c->call, message, out);
	queen_render_error(out, psprintf("%s failed: %s", c->def->name, message), NULL);
	return 500;
}

/* After its transaction, before its answer leaves. */
static void
queen_shard_control_after(QueenControl *c, bool committed, int status)
{
	if (committed && c->call.op == QUEEN_CONTROL_POP && status == 200 &&
		queen_test_fault("shard_error_after_pop_commit"))
		elog(ERROR, "queen.test_fault: a shard fails between a pop's COMMIT and its answer");
	if (committed && c->def->committed != NULL)
		c->def->committed(&c->call);
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
	if (c->def == NULL)
	{
		elog(LOG, "queen %s: refused a malformed control request", queen_control_who);
		queen_render_error(&tx.out, "malformed control request", NULL);
		ok = false;
	}
	else
	{
		ok = queen_worker_transact(c->def->name, queen_control_who,
								   queen_shard_control_body, &tx, &result);
		if (!ok)
		{
			resetStringInfo(&tx.out);
			tx.status = queen_shard_control_failed(c, result.sqlerrcode, result.message,
												   &tx.out);
		}
		queen_shard_control_after(c, ok, tx.status);
		/* counted and woken only once committed, before the client hears of it */
		if (c->def->flags & QUEEN_OP_CONSUMES)
			queen_shard_consume_done(ok);
	}
	queen_answer_reply(c->listener, c->request, tx.status, tx.out.data, tx.out.len);
	MemoryContextSwitchTo(old);
	MemoryContextReset(queen_control_run_cxt);
}

/*
 * Operations queued one behind another that may share a transaction run
 * in one: one commit, one WAL flush for all of them, as a bundle is for
 * pushes.  Each op's effects are its own rows (a pop's leases, an ack's
 * cursors), so sharing a commit changes only when they become visible.  If
 * the shared transaction fails (one request's error, a deadlock), it rolled
 * back whole, and each request runs again alone, so one bad request costs
 * the others a second try and never their answer.  Bounded so that pushes
 * waiting behind it are not held up long.
 */
#define QUEEN_CONSUME_BATCH		32

typedef struct QueenConsumeBatch
{
	QueenControlTx txs[QUEEN_CONSUME_BATCH];
	int			n;
} QueenConsumeBatch;

static bool
queen_control_shares(QueenControl *c)
{
	return c->def != NULL && (c->def->flags & QUEEN_OP_SHARES) != 0;
}

/*
 * Before a shared transaction's operations run: the consumer rows they
 * will lock (an ack's, a lease extension's), locked now, all at once, in
 * the global order (queen_lock_consumers).  Each operation alone locks its
 * own rows in that order, but one after another they would lock in
 * request order, and two shards (or a shard and a caller's own
 * transaction) could then each hold a row the other waits for.  Pops need
 * nothing here: they skip locked rows, never wait for one, and run last.
 */
static void
queen_shard_control_lock(QueenConsumeBatch *b)
{
	QueenOpLocks locks;
	int			nlocking = 0;
	int			i;

	for (i = 0; i < b->n; i++)
		nlocking += b->txs[i].c->def->lock != NULL;
	if (nlocking < 2)
		return;					/* one operation locks in order by itself */
	memset(&locks, 0, sizeof(locks));
	for (i = 0; i < b->n; i++)
	{
		QueenControl *c = b->txs[i].c;

		if (c->def->lock != NULL)
			c->def->lock(&c->call, &locks);
	}
	pgstat_report_activity(STATE_RUNNING, "queen: locking consumer rows");
	queen_lock_consumers(locks.keys, locks.nkeys, locks.leases, locks.nleases);
}

/*
 * The operations that run last (pops) run after the others, which may
 * wait for a row lock (up to queen.consume_lock_timeout), so a pop's lease
 * starts as late as possible; a lease that aged all the same starts again
 * just before the COMMIT.
 */
static void
queen_shard_consume_batch_body(void *arg)
{
	QueenConsumeBatch *b = (QueenConsumeBatch *) arg;
	int			pass;
	int			i;

	queen_shard_consume_begin();
	queen_shard_control_lock(b);
	for (pass = 0; pass < 2; pass++)
		for (i = 0; i < b->n; i++)
		{
			bool		last = (b->txs[i].c->def->flags & QUEEN_OP_RUNS_LAST) != 0;

			if (last == (pass == 1))
				queen_shard_control_call(&b->txs[i]);
		}
	queen_shard_consume_restamp();
}

/* Run the operations at the head of the queue that may share a transaction. */
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
		   queen_control_shares((QueenControl *) linitial(queen_controls)))
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
		queen_count(QUEEN_COUNT_CONSUME_SHARED_FAILED, 1);
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
		queen_shard_control_after(b->txs[i].c, true, b->txs[i].status);
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

		if (queen_control_shares(c) && list_length(queen_controls) > 1 &&
			queen_control_shares((QueenControl *) lsecond(queen_controls)))
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
