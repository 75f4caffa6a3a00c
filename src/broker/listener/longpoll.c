/*-------------------------------------------------------------------------
 *
 * longpoll.c
 *	  Pops in the listener: sending one to its shard, answering it, and
 *	  parking one that delivered nothing while its client waits
 *	  (wait=true) until something may have changed.
 *
 * A parked pop holds nothing: no worker, no database connection, no push
 * permit, only this entry (in its request's memory) with its deadline.
 * Parked pops wait in lines: pops that are interchangeable (same tenant,
 * queue, partition or wildcard, consumer group and subscription,
 * namespace and task for discovery, autoAck) share one, a FIFO keyed by
 * the XXH3-128 of those fields.  What one of them would find, any of them
 * would, so only a line's head is sent again (a probe), when:
 *
 *	 - what the line watches moved (wake.c): its queue's wake generation (a
 *	   shard or the drain committed messages to the queue, or an ack
 *	   released a lease on it); for a discovery line every commit, or, if
 *	   its last answer said the discovery matched no queue, only the
 *	   catalog generation (queues created, configured or deleted);
 *	 - the time the last 204 named passed (retry_at: a live lease or a
 *	   deferral held messages back until then);
 *	 - otherwise on a backoff, 100 ms three times, then doubling to 1 s,
 *	   the safety net for what nothing announces (a lease that expires, a
 *	   push or a configure through the SQL door).
 *
 * A probe that delivers sends the next head at once (there may be more);
 * one that answers 204 goes back to the head of its line, and the line
 * rests until what it watches moves again or its due time comes.  So a
 * push costs a line one probe, however many pops wait in it: the work
 * follows the messages, not the parked consumers.  Two refinements keep
 * that one probe cheap and prompt: a line whose probe sent on a wake found
 * nothing lets the next wake wait a few milliseconds (queen_line_woken),
 * so a queue pushed to continuously while nothing can be delivered (its
 * partitions leased) costs a few dozen probes a second, not one per push;
 * and a probe sent because something moved may draw the queue's
 * candidates at once (queen_line_send).
 *
 * The generation is read before each send and compared when a 204 comes
 * back, per line: a commit that lands while the probe is at its shard
 * sends the head again instead of resting the line on a stale view.
 *
 * The listener looks only at what may have moved: the lines that have
 * pops are listed per watched slot, and a slot's lines are walked only
 * when its generation moved (one read per slot with lines, when the total
 * moved).  Deadlines (each pop's own timeout) and due times are pairing
 * heaps, so answering a pop that timed out or probing a line that is due
 * costs O(log n).  A pop whose client closed its side is answered when it
 * would be probed, at its deadline, or by a sweep that looks at a slice of
 * the parked pops every quarter second.  At shutdown every parked pop is
 * answered 204 at once.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "listener.h"
#include "maintenance/spool.h"
#include "codec.h"
#include "routes.h"
#include "ops.h"

#include "lib/ilist.h"
#include "lib/pairingheap.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#define QUEEN_POP_BACKOFF_MS		100
#define QUEEN_POP_BACKOFF_STEPS		3	/* at the first interval before growing */
#define QUEEN_POP_BACKOFF_MAX_MS	1000

/*
 * A line whose probe sent on a wake found nothing waits this long before a
 * wake may send the next, doubling while wakes keep finding nothing, until
 * one delivers (see queen_line_woken).
 */
#define QUEEN_LINE_SPACING_MS		5
#define QUEEN_LINE_SPACING_MAX_MS	40

/* Closed clients: every so often, a slice of the parked pops is looked at. */
#define QUEEN_SWEEP_MS				250
#define QUEEN_SWEEP_SLICE			512

/* What a line watches: a wake slot, the total (-1) or the catalog (-2). */
#define QUEEN_WATCH_INDEX(slot)		((slot) >= 0 ? (slot) : QUEEN_WAKE_SLOTS - 1 - (slot))
#define QUEEN_WATCH_SLOT(index) \
	((index) < QUEEN_WAKE_SLOTS ? (index) : QUEEN_WAKE_SLOTS - 1 - (index))
#define QUEEN_WATCHES				(QUEEN_WAKE_SLOTS + 2)

/* Why a line's head is sent again (queen_long_poll_resends_total). */
typedef enum QueenResend
{
	QUEEN_RESEND_WAKE,			/* what it watches moved */
	QUEEN_RESEND_DUE,			/* its backoff or retry_at came */
	QUEEN_RESEND_NEXT			/* the head before it delivered */
} QueenResend;

typedef struct QueenLineKey
{
	uint8		hash[QUEEN_HASH_LEN];
} QueenLineKey;

typedef struct QueenLine
{
	QueenLineKey key;			/* hash key */
	dlist_head	pops;			/* parked, the head first */
	int			nparked;
	QueenPopWait *probe;		/* the head at its shard, or NULL */
	int			watch;			/* wake slot, QUEEN_WAKE_TOTAL or _CATALOG */
	uint64		seen;			/* its generation when the line last found nothing */
	dlist_node	watch_node;		/* in its watch's lines */
	TimestampTz due;			/* next probe on the backoff or at a retry_at */
	int			waits;			/* backoff steps since the last wake or delivery */
	pairingheap_node due_node;	/* in queen_due while resting */
	bool		in_due;
	bool		ready;			/* in queen_ready: probe at this tick */
	QueenResend reason;			/* why, when ready or at its shard */
	dlist_node	ready_node;
	TimestampTz sent_at;		/* when the probe was sent */
	int			spacing_ms;		/* after the next wake probe that finds nothing */
	TimestampTz wake_after;		/* no probe on a wake before (0: none) */
	bool		woken;			/* woken before wake_after: due then */
} QueenLine;

struct QueenPopWait
{
	QueenHttpRequest *http;
	char	   *arg;			/* the encoded pop (queen_line_send may zero its retry_until) */
	Size		arglen;
	int			shard;			/* -1: any (a queue's partitions), the next ready */
	int			slot;			/* its queue's wake slot; QUEEN_WAKE_TOTAL: discovery */
	uint64		seen;			/* the slot's generation at the last send */
	uint64		seen_catalog;	/* the catalog's then (discovery) */
	bool		wait;
	TimestampTz deadline;
	QueenLineKey key;
	QueenLine  *line;			/* while parked or at its shard as a probe */
	dlist_node	line_node;		/* in line->pops while parked */
	dlist_node	all_node;		/* in queen_parked while parked */
	pairingheap_node deadline_node; /* in queen_deadlines while parked */
};

/* The lines watching one slot, and the slot's generation when last looked at. */
typedef struct QueenWatch
{
	dlist_head	lines;
	uint64		checked;
	dlist_node	active_node;	/* in queen_active while it has lines */
} QueenWatch;

static MemoryContext queen_longpoll_cxt = NULL;
static HTAB *queen_lines = NULL;
static QueenWatch *queen_watches;
static dlist_head queen_active = DLIST_STATIC_INIT(queen_active);
static dlist_head queen_ready = DLIST_STATIC_INIT(queen_ready);
static dlist_head queen_parked = DLIST_STATIC_INIT(queen_parked);	/* oldest first */
static pairingheap *queen_deadlines;
static pairingheap *queen_due;
static int	queen_nparked = 0;
static uint64 queen_total_seen = 0;
static TimestampTz queen_sweep_next = 0;

/* Min-heaps: the earliest deadline, the earliest due line first. */
static int
queen_deadline_cmp(const pairingheap_node *a, const pairingheap_node *b, void *arg)
{
	TimestampTz x = pairingheap_const_container(QueenPopWait, deadline_node, a)->deadline;
	TimestampTz y = pairingheap_const_container(QueenPopWait, deadline_node, b)->deadline;

	(void) arg;
	return (x < y) - (x > y);
}

static int
queen_due_cmp(const pairingheap_node *a, const pairingheap_node *b, void *arg)
{
	TimestampTz x = pairingheap_const_container(QueenLine, due_node, a)->due;
	TimestampTz y = pairingheap_const_container(QueenLine, due_node, b)->due;

	(void) arg;
	return (x < y) - (x > y);
}

/* The listener's lines, heaps and watch table, made at the first pop. */
static void
queen_longpoll_init(void)
{
	MemoryContext old;

	queen_longpoll_cxt = AllocSetContextCreate(TopMemoryContext, "queen long-polls",
											   ALLOCSET_DEFAULT_SIZES);
	queen_lines = queen_hash_create("queen long-poll lines", sizeof(QueenLineKey),
									sizeof(QueenLine), 256, queen_longpoll_cxt);
	old = MemoryContextSwitchTo(queen_longpoll_cxt);
	queen_watches = palloc0(sizeof(QueenWatch) * QUEEN_WATCHES);
	queen_deadlines = pairingheap_allocate(queen_deadline_cmp, NULL);
	queen_due = pairingheap_allocate(queen_due_cmp, NULL);
	MemoryContextSwitchTo(old);
}

/*
 * Published before the listener next compares generations: a committer
 * that finds nothing parked here does not wake it (wake.c), so a pop
 * parked meanwhile must see the bump by looking (queen_line_rest).
 */
static void
queen_longpoll_gauges(void)
{
	queen_metrics_listener_gauges(queen_listener_index, (uint32) queen_nparked,
								  (uint32) hash_get_num_entries(queen_lines));
	pg_memory_barrier();
}

/*
 * What makes pops interchangeable, hashed: the pop's own fields but the
 * budget (batch, partitions), the lease and the moment it gives up, which
 * change what a delivery holds, not whether there is one.
 */
static void
queen_line_key(const pg_uuid_t *tenant, const char *arg, Size arglen, QueenLineKey *key)
{
	QueenMsgReader r;
	QueenArgsPop m;
	StringInfoData buf;

	initStringInfo(&buf);
	appendBinaryStringInfo(&buf, (const char *) tenant->data, UUID_LEN);
	queen_wire_reader(&r, arg, arglen);
	if (queen_control_get_args(&r, QUEEN_CONTROL_POP, &m))
	{
		m.batch = 0;
		m.max_partitions = 0;
		m.lease_seconds = 0;
		m.retry_until = 0;
		queen_control_put_args(&buf, QUEEN_CONTROL_POP, &m);
	}
	else
		appendBinaryStringInfo(&buf, arg, arglen);	/* never: we encoded it */
	queen_txn_hash(buf.data, buf.len, key->hash);
	pfree(buf.data);
}

/* A pop's state, in its request's memory: it goes when the pop is answered. */
QueenPopWait *
queen_pop_wait_new(QueenHttpRequest *req, const char *arg, Size arglen, int shard, int slot,
				   bool wait, int timeout_ms)
{
	QueenPopWait *w = MemoryContextAllocZero(req->mcxt, sizeof(QueenPopWait));

	if (queen_lines == NULL)
		queen_longpoll_init();
	w->http = req;
	w->arg = MemoryContextAlloc(req->mcxt, Max(arglen, 1));
	memcpy(w->arg, arg, arglen);
	w->arglen = arglen;
	w->shard = shard;
	w->slot = slot;
	w->wait = wait;
	w->deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), wait ? timeout_ms : 0);
	if (wait)
		queen_line_key(queen_req_tenant(req), arg, arglen, &w->key);
	return w;
}

/* The generations a pop's answer will be judged against, read before it is sent. */
static void
queen_pop_views(QueenPopWait *w)
{
	w->seen = queen_wake_generation(w->slot);
	if (w->slot < 0)
		w->seen_catalog = queen_wake_generation(QUEEN_WAKE_CATALOG);
}

/* First send: a shard that does not serve answers 503 (queen_control_submit). */
void
queen_pop_submit(QueenPopWait *w)
{
	QueenPending *p;

	queen_pop_views(w);
	p = queen_control_submit(w->http, QUEEN_PENDING_POP, QUEEN_CONTROL_POP, w->shard,
							 w->arg, w->arglen);
	if (p != NULL)
		p->wait = w;
}

static void
queen_pop_answer_empty(QueenPopWait *w)
{
	queen_count(QUEEN_COUNT_POP_EMPTY, 1);
	queen_http_respond(w->http, 204, NULL, "", 0, NULL);
}

/* ----------------------------------------------------------------
 *		Lines
 * ----------------------------------------------------------------
 */

static void
queen_line_watch(QueenLine *line, int watch)
{
	QueenWatch *wt = &queen_watches[QUEEN_WATCH_INDEX(watch)];

	line->watch = watch;
	if (dlist_is_empty(&wt->lines))
	{
		/* new lines compare against their own seen: this one's past is moot */
		wt->checked = queen_wake_generation(watch);
		dlist_push_tail(&queen_active, &wt->active_node);
	}
	dlist_push_tail(&wt->lines, &line->watch_node);
}

static void
queen_line_unwatch(QueenLine *line)
{
	QueenWatch *wt = &queen_watches[QUEEN_WATCH_INDEX(line->watch)];

	dlist_delete(&line->watch_node);
	if (dlist_is_empty(&wt->lines))
		dlist_delete(&wt->active_node);
}

static QueenLine *
queen_line_get(const QueenLineKey *key, int watch, uint64 seen)
{
	bool		found;
	QueenLine  *line = hash_search(queen_lines, key, HASH_ENTER, &found);

	if (!found)
	{
		dlist_init(&line->pops);
		line->nparked = 0;
		line->probe = NULL;
		line->seen = seen;
		line->due = DT_NOEND;
		line->waits = 0;
		line->in_due = false;
		line->ready = false;
		line->spacing_ms = QUEEN_LINE_SPACING_MS;
		line->wake_after = 0;
		line->woken = false;
		queen_line_watch(line, watch);
		queen_longpoll_gauges();
	}
	return line;
}

static void
queen_line_undue(QueenLine *line)
{
	if (line->in_due)
		pairingheap_remove(queen_due, &line->due_node);
	line->in_due = false;
}

/* Into the due heap, at line->due. */
static void
queen_line_due(QueenLine *line)
{
	queen_line_undue(line);
	pairingheap_add(queen_due, &line->due_node);
	line->in_due = true;
}

/* Probe the line's head at this tick. */
static void
queen_line_ready(QueenLine *line, QueenResend reason)
{
	if (line->ready)
		return;
	queen_line_undue(line);
	line->ready = true;
	line->reason = reason;
	line->woken = false;
	dlist_push_tail(&queen_ready, &line->ready_node);
}

/*
 * What the line watches moved: probe its head now, or, if its last probe
 * sent on a wake found nothing a moment ago, when the spacing that left
 * ends.  Pushes to a queue whose pending partitions a live lease holds
 * would otherwise send a probe after each other for nothing, each costing
 * a shard a transaction; the spacing bounds that to a few dozen a second
 * per line, and costs a push that lands right after such a probe at most
 * QUEEN_LINE_SPACING_MAX_MS.  A line that delivers starts over.
 */
static void
queen_line_woken(QueenLine *line, TimestampTz now)
{
	line->waits = 0;
	if (now >= line->wake_after)
	{
		queen_line_ready(line, QUEEN_RESEND_WAKE);
		return;
	}
	line->woken = true;
	if (line->wake_after < line->due)
	{
		line->due = line->wake_after;
		if (line->in_due)
			queen_line_due(line);
	}
}

/* A line with no pop parked and none at its shard goes. */
static void
queen_line_release_if_idle(QueenLine *line)
{
	if (line->nparked > 0 || line->probe != NULL)
		return;
	queen_line_undue(line);
	if (line->ready)
		dlist_delete(&line->ready_node);
	queen_line_unwatch(line);
	hash_search(queen_lines, &line->key, HASH_REMOVE, NULL);
	queen_longpoll_gauges();
}

/*
 * The line has no probe at its shard now: rest it until its due time, or
 * probe at once if what it watches moved past what it last found nothing
 * in (a commit that landed while its pops were at their shards).
 */
static void
queen_line_rest(QueenLine *line, TimestampTz now)
{
	if (line->probe != NULL || line->ready)
		return;
	if (line->nparked == 0)
	{
		queen_line_release_if_idle(line);
		return;
	}
	if (queen_wake_generation(line->watch) != line->seen)
	{
		queen_line_woken(line, now);
		if (line->ready)
			return;
	}
	queen_line_due(line);
}

/* The backoff after the line's waits-th empty answer in a row. */
static TimestampTz
queen_line_backoff(QueenLine *line, TimestampTz now)
{
	int			interval = QUEEN_POP_BACKOFF_MS;
	int			k;

	for (k = QUEEN_POP_BACKOFF_STEPS; k < line->waits && interval < QUEEN_POP_BACKOFF_MAX_MS; k++)
		interval *= 2;
	line->waits++;
	return TimestampTzPlusMilliseconds(now, Min(interval, QUEEN_POP_BACKOFF_MAX_MS));
}

/* ----------------------------------------------------------------
 *		Parking, probing, answering
 * ----------------------------------------------------------------
 */

/* Take a parked pop out of its line, the sweep's list and the deadlines. */
static void
queen_pop_unpark(QueenPopWait *w)
{
	dlist_delete(&w->line_node);
	w->line->nparked--;
	dlist_delete(&w->all_node);
	pairingheap_remove(queen_deadlines, &w->deadline_node);
	queen_nparked--;
	queen_longpoll_gauges();
}

/* Answer a parked pop 204 now (its deadline, its client gone, shutdown). */
static void
queen_pop_drop(QueenPopWait *w)
{
	QueenLine  *line = w->line;

	queen_pop_unpark(w);
	queen_pop_answer_empty(w);
	queen_line_release_if_idle(line);
}

/*
 * Nothing delivered and the client waits: into its line, at the head if it
 * was the line's probe (its place is kept), at the tail if it is new.  A
 * discovery's line watches every commit, or only the catalog when its
 * discovery matched no queue.
 */
static void
queen_pop_park(QueenPopWait *w, TimestampTz now, TimestampTz retry_at, bool no_queue)
{
	int			watch = w->slot >= 0 ? w->slot : no_queue ? QUEEN_WAKE_CATALOG : QUEEN_WAKE_TOTAL;
	uint64		seen = watch == QUEEN_WAKE_CATALOG ? w->seen_catalog : w->seen;
	bool		probe = w->line != NULL;
	QueenLine  *line = probe ? w->line : queen_line_get(&w->key, watch, seen);

	if (line->watch != watch)
	{
		queen_line_unwatch(line);
		queen_line_watch(line, watch);
		line->seen = seen;
	}
	else if (seen > line->seen)
		line->seen = seen;		/* the newer of two views found nothing */
	if (probe || line->due == DT_NOEND)
		line->due = queen_line_backoff(line, now);
	if (retry_at > 0 && retry_at < line->due)
		line->due = Max(retry_at, now);

	w->line = line;
	if (probe)
		dlist_push_head(&line->pops, &w->line_node);
	else
		dlist_push_tail(&line->pops, &w->line_node);
	line->nparked++;
	dlist_push_tail(&queen_parked, &w->all_node);
	pairingheap_add(queen_deadlines, &w->deadline_node);
	queen_nparked++;
	queen_longpoll_gauges();
	queen_line_rest(line, now);
}

/*
 * A probe sent because something moved (a wake, the delivery before it)
 * goes as a pop that is not asked again (retry_until 0), so its shard may
 * draw a queue's candidates at once: their spacing (claim_scan.c) holds
 * back a herd of pops racing for a small backlog, and a line has one probe
 * at its shard at a time, so there is no herd to hold back, only the wake
 * to delay.  A probe on its backoff or retry_at keeps the spacing.
 */
static void
queen_line_send(QueenPending *p, QueenPopWait *w, bool eager)
{
	QueenMsgReader r;
	QueenArgsPop m;
	StringInfoData arg;

	queen_wire_reader(&r, w->arg, w->arglen);
	if (!eager || !queen_control_get_args(&r, QUEEN_CONTROL_POP, &m))
	{
		queen_control_send(p, w->arg, w->arglen);
		return;
	}
	m.retry_until = 0;
	initStringInfo(&arg);
	queen_control_put_args(&arg, QUEEN_CONTROL_POP, &m);
	queen_control_send(p, arg.data, arg.len);
	pfree(arg.data);
}

/*
 * Send the line's head to a shard; false if nothing was sent.  Heads past
 * their deadline or whose client left, and every head in pop maintenance
 * mode, are answered on the way.
 */
static bool
queen_line_probe(QueenLine *line, TimestampTz now)
{
	while (line->nparked > 0)
	{
		QueenPopWait *w = dlist_head_element(QueenPopWait, line_node, &line->pops);
		int			shard;
		QueenPending *p;

		/* pop maintenance mode answers parked pops too, when they would go */
		if (now >= w->deadline || queen_http_client_closed(w->http) ||
			queen_pop_maintenance_on())
		{
			queen_pop_unpark(w);
			queen_pop_answer_empty(w);
			continue;
		}
		shard = w->shard >= 0 ? w->shard : queen_listener_pick_shard();
		if (shard < 0 || !queen_listener_shard_ready(shard))
		{
			/* its shard does not serve now: try again in a while, or on a wake */
			line->due = TimestampTzPlusMilliseconds(now, QUEEN_POP_BACKOFF_MAX_MS);
			queen_line_due(line);
			return false;
		}
		queen_pop_unpark(w);
		line->probe = w;
		line->sent_at = now;
		queen_pop_views(w);
		p = queen_listener_register(QUEEN_PENDING_POP, w->http, NULL);
		p->shard = shard;
		p->op = QUEEN_CONTROL_POP;
		p->wait = w;
		queen_line_send(p, w, line->reason != QUEEN_RESEND_DUE);
		queen_count(line->reason == QUEEN_RESEND_WAKE ? QUEEN_COUNT_RESENDS_WAKE :
					line->reason == QUEEN_RESEND_DUE ? QUEEN_COUNT_RESENDS_DUE :
					QUEEN_COUNT_RESENDS_NEXT, 1);
		return true;
	}
	queen_line_release_if_idle(line);
	return false;
}

/*
 * A shard answered a pop (taken out of the pending table).  A 204's body
 * is the hint for parking and is never sent to the client.  A line's probe
 * that delivered makes way for the next head at once.
 */
void
queen_pop_reply(QueenPending *p, int status, const char *body, Size len)
{
	QueenPopWait *w = p->wait;
	QueenLine  *line = w->line;
	TimestampTz now = GetCurrentTimestamp();

	if (line != NULL)
	{
		line->probe = NULL;
		if (status == 200)
		{
			line->spacing_ms = QUEEN_LINE_SPACING_MS;
			line->wake_after = 0;
		}
		else if (line->reason == QUEEN_RESEND_WAKE)
		{
			/* woken for nothing: the next wake waits a little longer */
			line->wake_after = TimestampTzPlusMilliseconds(line->sent_at, line->spacing_ms);
			line->spacing_ms = Min(line->spacing_ms * 2, QUEEN_LINE_SPACING_MAX_MS);
		}
	}
	if (status == 204)
	{
		int64		retry_at = 0;
		uint8		flags = 0;

		(void) queen_wire_get_pop_hint(body, len, &retry_at, &flags);
		if (w->wait && !queen_listener_closing && now < w->deadline &&
			!queen_http_client_closed(w->http))
		{
			queen_pop_park(w, now, (TimestampTz) retry_at,
						   (flags & QUEEN_POP_HINT_NO_QUEUE) != 0);
			return;
		}
		queen_pop_answer_empty(w);
	}
	else
		queen_http_respond(p->http, status, "application/json", body, len,
						   queen_reply_headers(status));
	if (line == NULL)
		return;
	if (status == 200)
	{
		line->waits = 0;
		if (line->nparked > 0)
			queen_line_ready(line, QUEEN_RESEND_NEXT);
	}
	else
	{
		/*
		 * The probe found nothing but was answered itself (its deadline, its
		 * client gone), or failed (an error is its own client's): the others
		 * try again when something moves or later, not at once.
		 */
		line->seen = Max(line->seen, line->watch == QUEEN_WAKE_CATALOG ? w->seen_catalog : w->seen);
		line->due = queen_line_backoff(line, now);
	}
	queen_line_rest(line, now);
}

/*
 * A pop about to be answered otherwise than by its shard's reply (its
 * shard restarted, its reply was malformed): if it was its line's probe,
 * the line tries its next head on its backoff or at the next wake, not at
 * once at a shard that is coming back.
 */
void
queen_pop_abandoned(QueenPopWait *w)
{
	QueenLine  *line = w->line;
	TimestampTz now = GetCurrentTimestamp();

	if (line == NULL)
		return;
	w->line = NULL;
	line->probe = NULL;
	line->seen = queen_wake_generation(line->watch);
	line->due = queen_line_backoff(line, now);
	queen_line_rest(line, now);
}

/* ----------------------------------------------------------------
 *		The listener's tick
 * ----------------------------------------------------------------
 */

/* The slots that moved since the last look: their resting lines are woken. */
static void
queen_longpoll_woken(TimestampTz now)
{
	dlist_iter	it;

	dlist_foreach(it, &queen_active)
	{
		QueenWatch *wt = dlist_container(QueenWatch, active_node, it.cur);
		uint64		gen = queen_wake_generation(QUEEN_WATCH_SLOT((int) (wt - queen_watches)));
		dlist_iter	li;

		if (gen == wt->checked)
			continue;
		wt->checked = gen;
		dlist_foreach(li, &wt->lines)
		{
			QueenLine  *line = dlist_container(QueenLine, watch_node, li.cur);

			if (line->probe == NULL && !line->ready && line->nparked > 0 && line->seen != gen)
				queen_line_woken(line, now);
		}
	}
}

/*
 * A slice of the parked pops, oldest first and then round the list, is
 * looked at for clients that closed their side: a pop deep in a long line
 * would otherwise wait for its deadline to be freed.
 */
static void
queen_longpoll_sweep(TimestampTz now)
{
	int			n = Min(queen_nparked, QUEEN_SWEEP_SLICE);

	if (now < queen_sweep_next)
		return;
	queen_sweep_next = TimestampTzPlusMilliseconds(now, QUEEN_SWEEP_MS);
	while (n-- > 0)
	{
		QueenPopWait *w = dlist_head_element(QueenPopWait, all_node, &queen_parked);

		if (queen_http_client_closed(w->http))
			queen_pop_drop(w);
		else
			dlist_move_tail(&queen_parked, &w->all_node);
	}
}

/*
 * Look at the lines when a wake was published or something is due: answer
 * the pops past their deadline, probe the lines woken or due.  Returns how
 * long the loop may sleep before the next is due (-1: nothing parked; 0
 * when a pop was sent, so the loop moves it into its ring now).
 */
long
queen_longpoll_tick(TimestampTz now)
{
	uint64		total;
	bool		sent = false;
	TimestampTz next = DT_NOEND;

	if (queen_lines == NULL || hash_get_num_entries(queen_lines) == 0)
		return -1;
	total = queen_wake_generation(QUEEN_WAKE_TOTAL);
	if (total != queen_total_seen)
	{
		queen_total_seen = total;
		queen_longpoll_woken(now);
	}
	while (!pairingheap_is_empty(queen_deadlines))
	{
		QueenPopWait *w = pairingheap_container(QueenPopWait, deadline_node,
												pairingheap_first(queen_deadlines));

		if (w->deadline > now)
			break;
		queen_pop_drop(w);
	}
	queen_longpoll_sweep(now);
	while (!pairingheap_is_empty(queen_due))
	{
		QueenLine  *line = pairingheap_container(QueenLine, due_node, pairingheap_first(queen_due));

		if (line->due > now)
			break;
		queen_line_ready(line, line->woken ? QUEEN_RESEND_WAKE : QUEEN_RESEND_DUE);
	}
	while (!dlist_is_empty(&queen_ready))
	{
		QueenLine  *line = dlist_container(QueenLine, ready_node, dlist_pop_head_node(&queen_ready));

		line->ready = false;
		sent |= queen_line_probe(line, now);
	}
	/* what was sent is queued for its ring: the loop must turn at once */
	if (sent)
		return 0;
	if (queen_nparked == 0)
		return -1;
	if (!pairingheap_is_empty(queen_deadlines))
		next = pairingheap_container(QueenPopWait, deadline_node,
									 pairingheap_first(queen_deadlines))->deadline;
	if (!pairingheap_is_empty(queen_due))
		next = Min(next, pairingheap_container(QueenLine, due_node,
											   pairingheap_first(queen_due))->due);
	next = Min(next, queen_sweep_next);
	return (long) Max((next - now + 999) / 1000, 0);
}

/* Shutting down: every parked pop is answered now, 204. */
void
queen_longpoll_close(void)
{
	while (!dlist_is_empty(&queen_parked))
		queen_pop_drop(dlist_head_element(QueenPopWait, all_node, &queen_parked));
}
