/*-------------------------------------------------------------------------
 *
 * handle_admin.c
 *	  The listener's control and admin handlers: configure, delete a queue
 *	  and /health (answered by a shard), metrics, the spool's state,
 *	  maintenance mode and /status (answered here).
 *
 * Requests that need the database for something other than a push
 * (/health, /api/v1/configure, DELETE of a queue) are handed to a shard as
 * control requests, so this process never blocks on SQL; the shard's reply
 * comes back through listener.c.  Maintenance mode and the spool's state
 * are in shared memory (maintenance_mode.c) and are answered here; switching the
 * mode writes its small state file, the one synchronous write the
 * listener's loop makes, and only on that admin request.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "listener.h"
#include "validate.h"
#include "codec.h"
#include "maintenance/spool.h"
#include "routes.h"
#include "ops.h"

#include "utils/memutils.h"

/* Where the round robin of control requests over the shards goes next. */
static int	queen_control_next_shard = 0;

/* ----------------------------------------------------------------
 *		Control requests: answered by a shard
 * ----------------------------------------------------------------
 */

/* The next ready shard in turn, or -1 when none serves. */
int
queen_listener_pick_shard(void)
{
	int			n = queen_broker->nshards;
	int			i;

	for (i = 0; i < n; i++)
	{
		int			s = (queen_control_next_shard + i) % n;

		if (queen_listener_shard_ready(s))
		{
			queen_control_next_shard = (s + 1) % n;
			return s;
		}
	}
	return -1;
}

/* The first shard that is not serving, or -1 when all are. */
static int
queen_unready_shard(void)
{
	int			s;

	for (s = 0; s < queen_broker->nshards; s++)
		if (!queen_listener_shard_ready(s))
			return s;
	return -1;
}

/* Send a registered control request (again, for a parked pop) to its shard. */
void
queen_control_send(QueenPending *p, const char *arg, Size arglen)
{
	StringInfo	msg = queen_listener_message_new();
	QueenWireControl m = {p->id, p->op, (const char *) p->http->tenant,
	{arg, (uint32) arglen}};

	queen_wire_put(msg, QUEEN_MSG_CONTROL, &m);
	queen_listener_send(p->shard, msg);
}

/*
 * Hand a request to a shard (shard < 0: the next ready one in turn) and
 * register it until the answer comes.  NULL when it was answered 503 here
 * instead: the broker is closing or the shard does not serve.
 */
QueenPending *
queen_control_submit(QueenHttpRequest *req, QueenPendingKind kind, uint8 op, int shard,
					 const char *arg, Size arglen)
{
	const char *why = NULL;
	QueenPending *p;

	if (queen_listener_closing)
		why = "the broker is shutting down";
	else
	{
		int			unready = queen_unready_shard();

		if (shard < 0)
			shard = queen_listener_pick_shard();
		else if (!queen_listener_shard_ready(shard))
		{
			unready = shard;
			shard = -1;
		}
		/* healthy means every partition can be pushed to, so every shard serves */
		if (shard < 0 || (op == QUEEN_CONTROL_HEALTH && unready >= 0))
			why = queen_listener_unavailable(unready >= 0 ? unready : 0);
	}
	if (why != NULL)
	{
		if (op == QUEEN_CONTROL_HEALTH)
		{
			StringInfoData buf;
			MemoryContext old = MemoryContextSwitchTo(req->mcxt);

			initStringInfo(&buf);
			queen_health_json(&buf, false, why);
			MemoryContextSwitchTo(old);
			queen_respond_json(req, 503, buf.data);
		}
		else
			queen_respond_error(req, 503, why);
		return NULL;
	}

	p = queen_listener_register(kind, req, NULL);
	p->shard = shard;
	p->op = op;
	queen_control_send(p, arg, arglen);
	return p;
}

/*
 * An operation whose arguments are all it sends (no trailing items), to a
 * shard (shard < 0: the next ready one in turn).
 */
void
queen_control_call(QueenHttpRequest *req, uint8 op, int shard, const void *args)
{
	StringInfoData arg;

	initStringInfo(&arg);
	queen_control_put_args(&arg, op, args);
	(void) queen_control_submit(req, QUEEN_PENDING_CONTROL, op, shard, arg.data, arg.len);
	pfree(arg.data);
}

/* Hand an operation whose argument is one text (or none) to the next shard. */
static void
queen_handle_control(QueenHttpRequest *req, QueenControlOp op, const char *text, Size len)
{
	QueenArgsText a = {{text, (uint32) len}};

	queen_control_call(req, (uint8) op, -1, &a);
}


/* POST /api/v1/configure: the body is the shard's to read. */
void
queen_handle_configure(QueenHttpRequest *req, const QueenRouteParams *params)
{
	(void) params;
	queen_handle_control(req, QUEEN_CONTROL_CONFIGURE, req->body, req->body_len);
}

/* DELETE /api/v1/resources/queues/:queue */
void
queen_handle_delete_queue(QueenHttpRequest *req, const QueenRouteParams *params)
{
	Size		len = 0;
	const char *queue = queen_route_param(params, "queue", &len);
	const char *problem;

	/* a decoded %00 is a control character like any other */
	problem = queen_name_problem(queue, len, QUEEN_MAX_NAME_BYTES);
	if (problem != NULL)
	{
		queen_respond_error(req, 400, psprintf("queue name %s", problem));
		return;
	}
	queen_handle_control(req, QUEEN_CONTROL_DELETE_QUEUE, queue, len);
}

/* GET or HEAD /health: a real round trip to the database. */
void
queen_handle_health(QueenHttpRequest *req, const QueenRouteParams *params)
{
	(void) params;
	queen_handle_control(req, QUEEN_CONTROL_HEALTH, "", 0);
}

/* ----------------------------------------------------------------
 *		Admin requests: answered here
 * ----------------------------------------------------------------
 */

/* One sample of this listener's own state, labelled with its index. */
static void
queen_listener_metric(StringInfo buf, const char *name, const char *type, const char *help,
					  uint64 value)
{
	queen_metric(buf, name, type, help);
	appendStringInfo(buf, "%s{listener=\"%d\"} " UINT64_FORMAT "\n",
					 name, queen_listener_index, value);
}

/* GET or HEAD /metrics/prometheus */
void
queen_handle_metrics(QueenHttpRequest *req, const QueenRouteParams *params)
{
	StringInfoData buf;
	MemoryContext old = MemoryContextSwitchTo(req->mcxt);
	QueenHttpStats stats;

	(void) params;
	initStringInfo(&buf);
	/* with tenants, a tenant sees its own queues' series only */
	if (queen_tenant_header != NULL && queen_tenant_header[0] != '\0')
		queen_metrics_tenant = queen_req_tenant(req);
	queen_metrics_render(&buf);
	queen_metrics_tenant = NULL;
	queen_http_stats(queen_listener_http, &stats);
	queen_listener_metric(&buf, "queen_http_connections_open", "gauge",
						  "HTTP connections open on this listener.", stats.open);
	queen_listener_metric(&buf, "queen_http_rejected_total", "counter",
						  "Requests refused by the HTTP layer (malformed, too large, too slow).",
						  stats.rejected);
	queen_listener_metric(&buf, "queen_http_connections_refused_total", "counter",
						  "Connections answered 503 at once: over queen.http_max_connections or out of descriptors.",
						  stats.refused);
	queen_listener_metric(&buf, "queen_http_requests_waiting", "gauge",
						  "Requests waiting for the shards' verdicts on this listener.",
						  (uint64) queen_listener_waiting());
	queen_listener_metric(&buf, "queen_http_requests_busy", "gauge",
						  "Requests handed to the handler and not yet answered, or with output unsent.",
						  (uint64) queen_http_busy(queen_listener_http));
	MemoryContextSwitchTo(old);
	queen_http_respond(req, 200, "text/plain; version=0.0.4", buf.data, buf.len, NULL);
}

/* The spool's state, in one of the shapes of queen_buffers_json. */
static void
queen_respond_buffers(QueenHttpRequest *req, int shape)
{
	StringInfoData buf;
	MemoryContext old = MemoryContextSwitchTo(req->mcxt);

	initStringInfo(&buf);
	queen_buffers_json(&buf, shape);
	MemoryContextSwitchTo(old);
	queen_respond_json(req, 200, buf.data);
}

/* GET /api/v1/status/buffers */
void
queen_handle_buffers(QueenHttpRequest *req, const QueenRouteParams *params)
{
	(void) params;
	queen_respond_buffers(req, 0);
}

/* GET /api/v1/system/maintenance */
void
queen_handle_maintenance_get(QueenHttpRequest *req, const QueenRouteParams *params)
{
	(void) params;
	queen_respond_buffers(req, 1);
}

/* POST /api/v1/system/maintenance {"enabled": bool} */
void
queen_handle_maintenance_set(QueenHttpRequest *req, const QueenRouteParams *params)
{
	bool		enabled;
	MemoryContext old = MemoryContextSwitchTo(req->mcxt);
	bool		valid = queen_parse_enabled_body(req->body, req->body_len, &enabled);

	(void) params;
	MemoryContextSwitchTo(old);
	if (!valid)
	{
		queen_respond_error(req, 400, "enabled (boolean) is required");
		return;
	}
	queen_maintenance_set(enabled, false);
	queen_respond_buffers(req, 2);
}

/* Pop maintenance mode's answer: the flag and what it means. */
static void
queen_respond_pop_maintenance(QueenHttpRequest *req, bool changed)
{
	bool		on = queen_pop_maintenance_on();
	const char *message;

	if (changed)
		message = on ? "Pop maintenance mode ENABLED. All POP operations will return empty arrays." :
			"Pop maintenance mode DISABLED. Normal operation resumed.";
	else
		message = on ? "Pop maintenance mode is ON. All POP operations return empty arrays." :
			"Pop maintenance mode is OFF. Normal operation.";
	queen_respond_json(req, 200, psprintf("{\"popMaintenanceMode\":%s,\"message\":\"%s\"}",
										  on ? "true" : "false", message));
}

/* GET /api/v1/system/maintenance/pop */
void
queen_handle_pop_maintenance_get(QueenHttpRequest *req, const QueenRouteParams *params)
{
	(void) params;
	queen_respond_pop_maintenance(req, false);
}

/* POST /api/v1/system/maintenance/pop {"enabled": bool}: pops answer 204 at once while on. */
void
queen_handle_pop_maintenance_set(QueenHttpRequest *req, const QueenRouteParams *params)
{
	bool		enabled;
	MemoryContext old = MemoryContextSwitchTo(req->mcxt);
	bool		valid = queen_parse_enabled_body(req->body, req->body_len, &enabled);

	(void) params;
	MemoryContextSwitchTo(old);
	if (!valid)
	{
		queen_respond_error(req, 400, "enabled (boolean) is required");
		return;
	}
	queen_pop_maintenance_set(enabled);
	queen_respond_pop_maintenance(req, true);
}

/* GET /status: liveness, without touching the database. */
void
queen_handle_status(QueenHttpRequest *req, const QueenRouteParams *params)
{
	(void) params;
	queen_respond_json(req, 200, "{\"status\":\"ok\",\"engine\":\"queen-postgres\"}");
}
