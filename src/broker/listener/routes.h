/*-------------------------------------------------------------------------
 *
 * routes.h
 *	  The listener's routes: one table row per route (methods, a path
 *	  pattern with :params, its handler and which worker answers it), the
 *	  handlers the rows name, and the answers every handler shares.
 *
 * A new route is one row in routes.c plus its handler; one that reaches
 * the database is also an operation (ops.h, ops.c) whose run and render
 * the shard calls, over a core function.  The matcher answers
 * 404 (no pattern matches the path) and 405 (a pattern matches, no row of
 * it takes the method; Allow lists those that do) itself, and percent-
 * decodes each :param once, before the handler sees the request.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_ROUTES_H
#define QUEEN_ROUTES_H

#include "http/http.h"
#include "auth.h"

/* Most :params in one pattern. */
#define QUEEN_ROUTE_MAX_PARAMS	4

/* Who answers a route: the listener itself, or a shard over the ring. */
typedef enum QueenRouteWorker
{
	QUEEN_ROUTE_LISTENER,
	QUEEN_ROUTE_SHARD
} QueenRouteWorker;

/*
 * The :params of the matched pattern, percent-decoded, or as sent when not
 * valid percent-encoding (NUL-terminated).
 */
typedef struct QueenRouteParams
{
	int			n;
	const char *name[QUEEN_ROUTE_MAX_PARAMS];	/* as in the pattern, no ':' */
	char	   *value[QUEEN_ROUTE_MAX_PARAMS];	/* in the request's context */
	Size		len[QUEEN_ROUTE_MAX_PARAMS];	/* a decoded %00 counts */
	const void *arg;			/* the route row's arg */
} QueenRouteParams;

typedef void (*QueenRouteHandler) (QueenHttpRequest *req, const QueenRouteParams *params);

typedef struct QueenRoute
{
	uint64		methods;		/* QUEEN_METHOD(HTTP_GET) | ... */
	const char *pattern;		/* "/a/b/:name": a :param is one non-empty segment */
	QueenRouteHandler handler;
	QueenRouteWorker worker;
	const void *arg;			/* what the handler needs to know of the row (params->arg) */
	QueenAccess access;			/* who may call it when auth is on (auth.c) */
} QueenRoute;

#define QUEEN_METHOD(m)		(UINT64CONST(1) << (m))

/* routes.c */
extern void queen_route_request(QueenHttpRequest *req, void *arg);
extern const char *queen_route_param(const QueenRouteParams *params, const char *name,
									 Size *len);
extern char *queen_percent_decode(const char *s, Size n, bool plus_space, Size *len);
extern void queen_respond_json(QueenHttpRequest *req, int status, const char *json);
extern void queen_respond_error(QueenHttpRequest *req, int status, const char *message);

/* handle_resources.c: every administration route, each row's arg its spec */
extern void queen_handle_admin(QueenHttpRequest *req, const QueenRouteParams *params);
extern void queen_handle_seek(QueenHttpRequest *req, const QueenRouteParams *params);
extern void queen_handle_subscription(QueenHttpRequest *req, const QueenRouteParams *params);

/* handle_push.c */
extern void queen_handle_push(QueenHttpRequest *req, const QueenRouteParams *params);

/* handle_consume.c */
extern void queen_handle_pop(QueenHttpRequest *req, const QueenRouteParams *params);
extern void queen_handle_transaction(QueenHttpRequest *req, const QueenRouteParams *params);
extern void queen_handle_trace(QueenHttpRequest *req, const QueenRouteParams *params);
extern void queen_handle_stream_register(QueenHttpRequest *req, const QueenRouteParams *params);
extern void queen_handle_stream_state(QueenHttpRequest *req, const QueenRouteParams *params);
extern void queen_handle_stream_cycle(QueenHttpRequest *req, const QueenRouteParams *params);
extern void queen_handle_traces_message(QueenHttpRequest *req, const QueenRouteParams *params);
extern void queen_handle_traces_by_name(QueenHttpRequest *req, const QueenRouteParams *params);
extern void queen_handle_trace_names(QueenHttpRequest *req, const QueenRouteParams *params);
extern void queen_handle_ack(QueenHttpRequest *req, const QueenRouteParams *params);
extern void queen_handle_ack_batch(QueenHttpRequest *req, const QueenRouteParams *params);
extern void queen_handle_lease_extend(QueenHttpRequest *req, const QueenRouteParams *params);
extern void queen_handle_dlq(QueenHttpRequest *req, const QueenRouteParams *params);
extern void queen_handle_delete_group(QueenHttpRequest *req, const QueenRouteParams *params);

/* handle_admin.c */
extern void queen_handle_configure(QueenHttpRequest *req, const QueenRouteParams *params);
extern void queen_handle_delete_queue(QueenHttpRequest *req, const QueenRouteParams *params);
extern void queen_handle_health(QueenHttpRequest *req, const QueenRouteParams *params);
extern void queen_handle_metrics(QueenHttpRequest *req, const QueenRouteParams *params);
extern void queen_handle_maintenance_get(QueenHttpRequest *req, const QueenRouteParams *params);
extern void queen_handle_maintenance_set(QueenHttpRequest *req, const QueenRouteParams *params);
extern void queen_handle_pop_maintenance_get(QueenHttpRequest *req, const QueenRouteParams *params);
extern void queen_handle_pop_maintenance_set(QueenHttpRequest *req, const QueenRouteParams *params);
extern void queen_handle_buffers(QueenHttpRequest *req, const QueenRouteParams *params);
extern void queen_handle_status(QueenHttpRequest *req, const QueenRouteParams *params);

/* dashboard.c */
extern void queen_handle_dashboard(QueenHttpRequest *req, const QueenRouteParams *params);

#endif							/* QUEEN_ROUTES_H */
