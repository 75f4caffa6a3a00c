/*-------------------------------------------------------------------------
 *
 * longpoll.c
 *	  Pops in the listener: sending one to its shard, answering it, and
 *	  parking one that delivered nothing while its client waits
 *	  (wait=true) until something may have changed.
 *
 * A parked pop holds nothing: no worker, no database connection, no push
 * permit, only this entry (in its request's memory) with its deadline.  It
 * is sent again when:
 *
 *	 - its queue's wake generation moved (wake.c: a shard or the drain
 *	   committed messages to the queue, or an ack released a lease on it); a
 *	   discovery pop watches every commit;
 *	 - the time its last attempt named passed (retry_at: a live lease or a
 *	   deferral held messages back until then);
 *	 - otherwise on a backoff, 100 ms three times, then doubling to 1 s,
 *	   the safety net for what nothing announces (a lease that expires).
 *
 * At its deadline it is answered 204; at shutdown every parked pop is
 * answered 204 at once, and so is, at the next look, a pop whose client
 * closed its side of the connection.  The generation is read before each send, so a commit
 * that lands while the pop is at its shard moves it and the pop is sent
 * again rather than parked on a stale view.
 *
 *-------------------------------------------------------------------------
 */
#include "listener.h"
#include "routes.h"
#include "wire.h"

#include "lib/ilist.h"
#include "utils/timestamp.h"

#define QUEEN_POP_BACKOFF_MS		100
#define QUEEN_POP_BACKOFF_STEPS		3	/* at the first interval before growing */
#define QUEEN_POP_BACKOFF_MAX_MS	1000

struct QueenPopWait
{
	dlist_node	node;			/* in queen_parked while parked */
	QueenHttpRequest *http;
	char	   *arg;			/* the encoded pop, sent as is every time */
	Size		arglen;
	int			shard;			/* -1: any (a queue's partitions), the next ready */
	int			slot;			/* wake slot; -1: every commit (discovery) */
	uint64		seen;			/* the slot's generation at the last send */
	bool		wait;
	TimestampTz deadline;
	TimestampTz due;			/* next try while parked */
	int			waits;			/* backoff steps since the last wake */
};

static dlist_head queen_parked = DLIST_STATIC_INIT(queen_parked);
static int	queen_nparked = 0;
static uint64 queen_parked_total_seen = 0;
static TimestampTz queen_parked_next = DT_NOEND;

static void
queen_parked_gauge(void)
{
	pg_atomic_write_u32(&queen_broker->metrics.parked[queen_listener_index],
						(uint32) queen_nparked);
}

/* A pop's state, in its request's memory: it goes when the pop is answered. */
QueenPopWait *
queen_pop_wait_new(QueenHttpRequest *req, const char *arg, Size arglen, int shard, int slot,
				   bool wait, int timeout_ms)
{
	QueenPopWait *w = MemoryContextAllocZero(req->mcxt, sizeof(QueenPopWait));

	w->http = req;
	w->arg = MemoryContextAlloc(req->mcxt, Max(arglen, 1));
	memcpy(w->arg, arg, arglen);
	w->arglen = arglen;
	w->shard = shard;
	w->slot = slot;
	w->wait = wait;
	w->deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), wait ? timeout_ms : 0);
	return w;
}

/* First send: a shard that does not serve answers 503 (queen_control_submit). */
void
queen_pop_submit(QueenPopWait *w)
{
	QueenPending *p;

	w->seen = queen_wake_generation(w->slot);
	p = queen_control_submit(w->http, QUEEN_PENDING_POP, QUEEN_CONTROL_POP, w->shard,
							 w->arg, w->arglen);
	if (p != NULL)
		p->wait = w;
}

static void
queen_pop_answer_empty(QueenPopWait *w)
{
	pg_atomic_fetch_add_u64(&queen_broker->metrics.pop_empty, 1);
	queen_http_respond(w->http, 204, NULL, "", 0, NULL);
}

static void
queen_pop_unpark(QueenPopWait *w)
{
	dlist_delete(&w->node);
	queen_nparked--;
	queen_parked_gauge();
}

/* Send a parked pop again; false if its shard does not serve now. */
static bool
queen_pop_resend(QueenPopWait *w)
{
	QueenPending *p;
	int			shard = w->shard >= 0 ? w->shard : queen_listener_pick_shard();

	if (shard < 0 || !queen_listener_shard_ready(shard))
		return false;
	queen_pop_unpark(w);
	w->seen = queen_wake_generation(w->slot);
	p = queen_listener_register(QUEEN_PENDING_POP, w->http, NULL);
	p->shard = shard;
	p->op = QUEEN_CONTROL_POP;
	p->wait = w;
	queen_control_send(p, w->arg, w->arglen);
	return true;
}

/* Nothing delivered and the client waits: park until a wake or the next try. */
static void
queen_pop_park(QueenPopWait *w, TimestampTz now, TimestampTz retry_at)
{
	int			interval = QUEEN_POP_BACKOFF_MS;
	int			k;

	for (k = QUEEN_POP_BACKOFF_STEPS; k < w->waits && interval < QUEEN_POP_BACKOFF_MAX_MS; k++)
		interval *= 2;
	interval = Min(interval, QUEEN_POP_BACKOFF_MAX_MS);
	w->waits++;
	w->due = TimestampTzPlusMilliseconds(now, interval);
	if (retry_at > 0 && retry_at < w->due)
		w->due = Max(retry_at, now);
	/* woken while it was at its shard: what woke it may not have been seen */
	if (queen_wake_generation(w->slot) != w->seen)
		w->due = now;
	dlist_push_tail(&queen_parked, &w->node);
	queen_nparked++;
	queen_parked_gauge();
	queen_parked_next = Min(queen_parked_next, Min(w->due, w->deadline));
}

/*
 * A shard answered a pop (taken out of the pending table).  A 204's body
 * is the hint for parking and is never sent to the client.
 */
void
queen_pop_reply(QueenPending *p, int status, const char *body, Size len)
{
	QueenPopWait *w = p->wait;

	if (status == 204)
	{
		int64		retry_at = 0;
		uint8		flags = 0;
		TimestampTz now = GetCurrentTimestamp();

		(void) queen_wire_get_pop_hint(body, len, &retry_at, &flags);
		if (w->wait && !queen_listener_closing && now < w->deadline &&
			!queen_http_client_closed(w->http))
			queen_pop_park(w, now, (TimestampTz) retry_at);
		else
			queen_pop_answer_empty(w);
		return;
	}
	queen_http_respond(p->http, status, "application/json", body, len, NULL);
}

/*
 * Look at the parked pops when a wake was published or one is due: answer
 * those past their deadline, send again those woken or due.  Returns how
 * long the loop may sleep before the next is due (-1: none parked; 0 when
 * a pop was sent again, so the loop moves it into its ring now).
 */
long
queen_longpoll_tick(TimestampTz now)
{
	uint64		total;
	bool		sent = false;
	dlist_mutable_iter it;

	if (queen_nparked == 0)
		return -1;
	total = queen_wake_generation(-1);
	if (total == queen_parked_total_seen && now < queen_parked_next)
		return (long) ((queen_parked_next - now + 999) / 1000);
	queen_parked_total_seen = total;
	queen_parked_next = DT_NOEND;
	dlist_foreach_modify(it, &queen_parked)
	{
		QueenPopWait *w = dlist_container(QueenPopWait, node, it.cur);
		bool		woken = queen_wake_generation(w->slot) != w->seen;

		if (now >= w->deadline || queen_http_client_closed(w->http))
		{
			queen_pop_unpark(w);
			queen_pop_answer_empty(w);
			continue;
		}
		if (woken)
			w->waits = 0;
		if ((woken || now >= w->due) && queen_pop_resend(w))
		{
			pg_atomic_fetch_add_u64(woken ? &queen_broker->metrics.resends_wake :
									&queen_broker->metrics.resends_due, 1);
			sent = true;
			continue;
		}
		if (now >= w->due)
			w->due = TimestampTzPlusMilliseconds(now, QUEEN_POP_BACKOFF_MAX_MS);
		queen_parked_next = Min(queen_parked_next, Min(w->due, w->deadline));
	}
	/* what was sent again is queued for its ring: the loop must turn at once */
	if (sent)
		return 0;
	if (queen_nparked == 0)
		return -1;
	return (long) Max((queen_parked_next - now + 999) / 1000, 0);
}

/* Shutting down: every parked pop is answered now, 204. */
void
queen_longpoll_close(void)
{
	dlist_mutable_iter it;

	dlist_foreach_modify(it, &queen_parked)
	{
		QueenPopWait *w = dlist_container(QueenPopWait, node, it.cur);

		queen_pop_unpark(w);
		queen_pop_answer_empty(w);
	}
}
