/*-------------------------------------------------------------------------
 *
 * listener.h
 *	  What the listener's files share: the table of requests waiting for a
 *	  shard, the push request between its arrival and its answer, and the
 *	  listener's own state.  Private to the listener's files (listener.c:
 *	  the event loop, the pending table, verdict collection; the handlers
 *	  in handle_push.c, handle_consume.c, handle_admin.c; longpoll.c);
 *	  nothing outside the listener process sees it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_LISTENER_H
#define QUEEN_LISTENER_H

#include "broker.h"
#include "http/http.h"
#include "push_body.h"

#include "datatype/timestamp.h"

typedef enum QueenPendingKind
{
	QUEEN_PENDING_PUSH,
	QUEEN_PENDING_CONTROL,
	QUEEN_PENDING_POP			/* a control request whose 204 may park */
} QueenPendingKind;

typedef struct QueenPopWait QueenPopWait;	/* longpoll.c */

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
	const char *subject;		/* the token's sub, stamped as producerSub */
	pg_uuid_t	tenant;			/* the request's (routes.c) */
} QueenPushRequest;

typedef struct QueenPending
{
	uint64		id;				/* hash key */
	QueenPendingKind kind;
	QueenHttpRequest *http;
	QueenPushRequest *push;		/* kind PUSH */
	int			shard;			/* kinds CONTROL and POP */
	uint8		op;				/* QueenControlOp, kinds CONTROL and POP */
	QueenPopWait *wait;			/* kind POP */
} QueenPending;

/* listener.c: the listener's state */
extern int	queen_listener_index;
extern QueenHttpServer *queen_listener_http;
extern bool queen_listener_closing;
extern pg_uuid_t queen_listener_tenant;

/* The tenant a request was placed in (routes.c). */
static inline const pg_uuid_t *
queen_req_tenant(const QueenHttpRequest *req)
{
	return (const pg_uuid_t *) req->tenant;
}

/* listener.c: shards and the pending table */
extern bool queen_listener_shard_ready(int shard);
extern const char *queen_listener_unavailable(int shard);
extern StringInfo queen_listener_message_new(void);
extern void queen_listener_send(int shard, StringInfo msg);
extern QueenPending *queen_listener_register(QueenPendingKind kind, QueenHttpRequest *http,
											 QueenPushRequest *push);
extern QueenPending queen_listener_take(QueenPending *p);
extern long queen_listener_waiting(void);
extern int	queen_listener_pick_shard(void);
extern QueenPending *queen_control_submit(QueenHttpRequest *req, QueenPendingKind kind,
										  uint8 op, int shard, const char *arg, Size arglen);
extern void queen_control_send(QueenPending *p, const char *arg, Size arglen);
extern void queen_control_call(QueenHttpRequest *req, uint8 op, int shard, const void *args);

/* longpoll.c: pops, parked while nothing can be delivered */
extern QueenPopWait *queen_pop_wait_new(QueenHttpRequest *req, const char *arg, Size arglen,
										int shard, int slot, bool wait, int timeout_ms);
/*
 * The extra headers of a shard's answer: its 503 (a row lock held too long,
 * queen.consume_lock_timeout) is worth trying again soon.
 */
static inline const char *
queen_reply_headers(int status)
{
	return status == 503 ? "Retry-After: 1\r\n" : NULL;
}

extern void queen_pop_submit(QueenPopWait *w);
extern void queen_pop_reply(QueenPending *p, int status, const char *body, Size len);
extern void queen_pop_abandoned(QueenPopWait *w);
extern long queen_longpoll_tick(TimestampTz now);
extern void queen_longpoll_close(void);

/* handle_push.c: what the verdicts and the spooling of unknown fates need */
extern void queen_push_group_answered(QueenPushRequest *r, QueenReqGroup *g);
extern void queen_push_group_frames(StringInfo out, const QueenPushRequest *r,
									const QueenReqGroup *g);
extern void queen_push_render(QueenPending *p);

#endif							/* QUEEN_LISTENER_H */
