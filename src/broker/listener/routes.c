/*-------------------------------------------------------------------------
 *
 * routes.c
 *	  The listener's route table and its matcher: which handler answers a
 *	  request, 404 and 405 when none does, and the :params of the path,
 *	  percent-decoded once.
 *
 * Each route is one row here plus its handler (handle_push.c,
 * handle_consume.c, handle_admin.c), so adding one touches neither the
 * event loop nor the other handlers.  A pattern's literal parts match
 * byte for byte (paths arrive without their query string and still
 * percent-encoded); a :param matches one non-empty segment, and is decoded
 * only once the method is known to be allowed, so a wrong method is 405
 * whatever the segment holds.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <http_parser.h>

#include "broker.h"
#include "codec.h"
#include "listener.h"
#include "render.h"
#include "routes.h"

#include "utils/json.h"
#include "utils/memutils.h"

/* The administration routes' specs (handle_resources.c). */
extern const struct QueenAdminRoute queen_ar_queues, queen_ar_queue, queen_ar_overview,
			queen_ar_namespaces, queen_ar_tasks, queen_ar_groups, queen_ar_lagging,
			queen_ar_group, queen_ar_status, queen_ar_queue_ops, queen_ar_queue_lag,
			queen_ar_retention, queen_ar_analytics, queen_ar_stats_refresh, queen_ar_message,
			queen_ar_messages, queen_ar_queue_messages, queen_ar_message_forget,
			queen_ar_message_retry, queen_ar_dlq_purge, queen_ar_dlq_replay, queen_ar_seek,
			queen_ar_subscription, queen_ar_worker_metrics, queen_ar_system_metrics;

#define ADMIN(method, pattern, spec, access) \
	{QUEEN_METHOD(method), pattern, queen_handle_admin, QUEEN_ROUTE_SHARD, &(spec), access}

static const QueenRoute queen_routes[] = {
	{QUEEN_METHOD(HTTP_POST), "/api/v1/push",
	queen_handle_push, QUEEN_ROUTE_SHARD, NULL, QUEEN_ACCESS_WRITE},
	{QUEEN_METHOD(HTTP_POST), "/api/v1/configure",
	queen_handle_configure, QUEEN_ROUTE_SHARD, NULL, QUEEN_ACCESS_READ_WRITE},
	{QUEEN_METHOD(HTTP_DELETE), "/api/v1/resources/queues/:queue",
	queen_handle_delete_queue, QUEEN_ROUTE_SHARD, NULL, QUEEN_ACCESS_ADMIN},
	{QUEEN_METHOD(HTTP_GET), "/api/v1/pop/queue/:queue",
	queen_handle_pop, QUEEN_ROUTE_SHARD, NULL, QUEEN_ACCESS_READ_WRITE},
	{QUEEN_METHOD(HTTP_GET), "/api/v1/pop/queue/:queue/partition/:partition",
	queen_handle_pop, QUEEN_ROUTE_SHARD, NULL, QUEEN_ACCESS_READ_WRITE},
	{QUEEN_METHOD(HTTP_GET), "/api/v1/pop",
	queen_handle_pop, QUEEN_ROUTE_SHARD, NULL, QUEEN_ACCESS_READ_WRITE},
	{QUEEN_METHOD(HTTP_POST), "/api/v1/transaction",
	queen_handle_transaction, QUEEN_ROUTE_SHARD, NULL, QUEEN_ACCESS_READ_WRITE},
	{QUEEN_METHOD(HTTP_POST), "/api/v1/traces",
	queen_handle_trace, QUEEN_ROUTE_SHARD, NULL, QUEEN_ACCESS_READ_WRITE},
	{QUEEN_METHOD(HTTP_GET), "/api/v1/traces/names",
	queen_handle_trace_names, QUEEN_ROUTE_SHARD, NULL, QUEEN_ACCESS_READ},
	{QUEEN_METHOD(HTTP_GET), "/api/v1/traces/by-name/:traceName",
	queen_handle_traces_by_name, QUEEN_ROUTE_SHARD, NULL, QUEEN_ACCESS_READ},
	{QUEEN_METHOD(HTTP_GET), "/api/v1/traces/:partitionId/:transactionId",
	queen_handle_traces_message, QUEEN_ROUTE_SHARD, NULL, QUEEN_ACCESS_READ},
	{QUEEN_METHOD(HTTP_POST), "/streams/v1/queries",
	queen_handle_stream_register, QUEEN_ROUTE_SHARD, NULL, QUEEN_ACCESS_READ_WRITE},
	{QUEEN_METHOD(HTTP_POST), "/streams/v1/state/get",
	queen_handle_stream_state, QUEEN_ROUTE_SHARD, NULL, QUEEN_ACCESS_READ_WRITE},
	{QUEEN_METHOD(HTTP_POST), "/streams/v1/cycle",
	queen_handle_stream_cycle, QUEEN_ROUTE_SHARD, NULL, QUEEN_ACCESS_READ_WRITE},
	{QUEEN_METHOD(HTTP_POST), "/api/v1/ack",
	queen_handle_ack, QUEEN_ROUTE_SHARD, NULL, QUEEN_ACCESS_READ_WRITE},
	{QUEEN_METHOD(HTTP_POST), "/api/v1/ack/batch",
	queen_handle_ack_batch, QUEEN_ROUTE_SHARD, NULL, QUEEN_ACCESS_READ_WRITE},
	{QUEEN_METHOD(HTTP_POST), "/api/v1/lease/:leaseId/extend",
	queen_handle_lease_extend, QUEEN_ROUTE_SHARD, NULL, QUEEN_ACCESS_READ_WRITE},
	{QUEEN_METHOD(HTTP_GET), "/api/v1/dlq",
	queen_handle_dlq, QUEEN_ROUTE_SHARD, NULL, QUEEN_ACCESS_READ},
	{QUEEN_METHOD(HTTP_DELETE), "/api/v1/consumer-groups/:group",
	queen_handle_delete_group, QUEEN_ROUTE_SHARD, NULL, QUEEN_ACCESS_ADMIN},
	{QUEEN_METHOD(HTTP_DELETE), "/api/v1/consumer-groups/:group/queues/:queue",
	queen_handle_delete_group, QUEEN_ROUTE_SHARD, NULL, QUEEN_ACCESS_ADMIN},

	/*
	 * Administration (handle_resources.c): each row's arg is its spec.  A
	 * literal segment wins over a :param only by coming first, so
	 * /consumer-groups/lagging precedes /consumer-groups/:group.
	 */
	ADMIN(HTTP_GET, "/api/v1/resources/queues", queen_ar_queues, QUEEN_ACCESS_READ),
	ADMIN(HTTP_GET, "/api/v1/resources/queues/:queue", queen_ar_queue, QUEEN_ACCESS_READ),
	ADMIN(HTTP_GET, "/api/v1/resources/overview", queen_ar_overview, QUEEN_ACCESS_READ),
	ADMIN(HTTP_GET, "/api/v1/resources/namespaces", queen_ar_namespaces, QUEEN_ACCESS_READ),
	ADMIN(HTTP_GET, "/api/v1/resources/tasks", queen_ar_tasks, QUEEN_ACCESS_READ),
	ADMIN(HTTP_GET, "/api/v1/status", queen_ar_status, QUEEN_ACCESS_READ),
	ADMIN(HTTP_GET, "/api/v1/status/queues", queen_ar_queues, QUEEN_ACCESS_READ),
	ADMIN(HTTP_GET, "/api/v1/status/queues/:queue", queen_ar_queue, QUEEN_ACCESS_READ),
	ADMIN(HTTP_GET, "/api/v1/status/queues/:queue/messages", queen_ar_queue_messages, QUEEN_ACCESS_READ),
	ADMIN(HTTP_GET, "/api/v1/status/analytics", queen_ar_analytics, QUEEN_ACCESS_READ),
	ADMIN(HTTP_GET, "/api/v1/analytics/queue-ops", queen_ar_queue_ops, QUEEN_ACCESS_READ),
	ADMIN(HTTP_GET, "/api/v1/analytics/queue-lag", queen_ar_queue_lag, QUEEN_ACCESS_READ),
	ADMIN(HTTP_GET, "/api/v1/analytics/retention", queen_ar_retention, QUEEN_ACCESS_READ),
	ADMIN(HTTP_GET, "/api/v1/analytics/worker-metrics", queen_ar_worker_metrics, QUEEN_ACCESS_READ),
	ADMIN(HTTP_GET, "/api/v1/analytics/system-metrics", queen_ar_system_metrics, QUEEN_ACCESS_READ),
	ADMIN(HTTP_POST, "/api/v1/stats/refresh", queen_ar_stats_refresh, QUEEN_ACCESS_ADMIN),
	ADMIN(HTTP_GET, "/api/v1/consumer-groups", queen_ar_groups, QUEEN_ACCESS_READ),
	ADMIN(HTTP_GET, "/api/v1/consumer-groups/lagging", queen_ar_lagging, QUEEN_ACCESS_READ),
	ADMIN(HTTP_GET, "/api/v1/consumer-groups/:group", queen_ar_group, QUEEN_ACCESS_READ),
	{QUEEN_METHOD(HTTP_POST), "/api/v1/consumer-groups/:group/queues/:queue/seek",
	queen_handle_seek, QUEEN_ROUTE_SHARD, &queen_ar_seek, QUEEN_ACCESS_READ_WRITE},
	{QUEEN_METHOD(HTTP_POST), "/api/v1/consumer-groups/:group/queues/:queue/partitions/:partition/seek",
	queen_handle_seek, QUEEN_ROUTE_SHARD, &queen_ar_seek, QUEEN_ACCESS_READ_WRITE},
	{QUEEN_METHOD(HTTP_POST), "/api/v1/consumer-groups/:group/subscription",
	queen_handle_subscription, QUEEN_ROUTE_SHARD, &queen_ar_subscription, QUEEN_ACCESS_READ_WRITE},
	ADMIN(HTTP_DELETE, "/api/v1/dlq", queen_ar_dlq_purge, QUEEN_ACCESS_ADMIN),
	ADMIN(HTTP_POST, "/api/v1/dlq/:id/replay", queen_ar_dlq_replay, QUEEN_ACCESS_READ_WRITE),
	ADMIN(HTTP_GET, "/api/v1/messages", queen_ar_messages, QUEEN_ACCESS_READ),
	ADMIN(HTTP_GET, "/api/v1/messages/:partitionId/:transactionId", queen_ar_message, QUEEN_ACCESS_READ),
	ADMIN(HTTP_DELETE, "/api/v1/messages/:partitionId/:transactionId", queen_ar_message_forget, QUEEN_ACCESS_READ_WRITE),
	ADMIN(HTTP_POST, "/api/v1/messages/:partitionId/:transactionId/retry", queen_ar_message_retry, QUEEN_ACCESS_READ_WRITE),
	/* HEAD answers as GET; http_conn.c leaves the body out */
	{QUEEN_METHOD(HTTP_GET) | QUEEN_METHOD(HTTP_HEAD), "/health",
	queen_handle_health, QUEEN_ROUTE_SHARD, NULL, QUEEN_ACCESS_PUBLIC},
	{QUEEN_METHOD(HTTP_GET) | QUEEN_METHOD(HTTP_HEAD), "/metrics/prometheus",
	queen_handle_metrics, QUEEN_ROUTE_LISTENER, NULL, QUEEN_ACCESS_PUBLIC},
	{QUEEN_METHOD(HTTP_GET), "/api/v1/system/maintenance",
	queen_handle_maintenance_get, QUEEN_ROUTE_LISTENER, NULL, QUEEN_ACCESS_ADMIN},
	{QUEEN_METHOD(HTTP_POST), "/api/v1/system/maintenance",
	queen_handle_maintenance_set, QUEEN_ROUTE_LISTENER, NULL, QUEEN_ACCESS_ADMIN},
	{QUEEN_METHOD(HTTP_GET), "/api/v1/system/maintenance/pop",
	queen_handle_pop_maintenance_get, QUEEN_ROUTE_LISTENER, NULL, QUEEN_ACCESS_ADMIN},
	{QUEEN_METHOD(HTTP_POST), "/api/v1/system/maintenance/pop",
	queen_handle_pop_maintenance_set, QUEEN_ROUTE_LISTENER, NULL, QUEEN_ACCESS_ADMIN},
	{QUEEN_METHOD(HTTP_GET), "/api/v1/status/buffers",
	queen_handle_buffers, QUEEN_ROUTE_LISTENER, NULL, QUEEN_ACCESS_READ},
	{QUEEN_METHOD(HTTP_GET), "/status",
	queen_handle_status, QUEEN_ROUTE_LISTENER, NULL, QUEEN_ACCESS_READ},
	/* the dashboard's files (dashboard.c): the page is public, its API calls are not */
	{QUEEN_METHOD(HTTP_GET) | QUEEN_METHOD(HTTP_HEAD), "/",
	queen_handle_dashboard, QUEEN_ROUTE_LISTENER, NULL, QUEEN_ACCESS_PUBLIC},
	{QUEEN_METHOD(HTTP_GET) | QUEEN_METHOD(HTTP_HEAD), "/ui/:file",
	queen_handle_dashboard, QUEEN_ROUTE_LISTENER, NULL, QUEEN_ACCESS_PUBLIC},
};

/* The order methods are listed in an Allow header. */
static const int queen_allow_order[] = {
	HTTP_GET, HTTP_HEAD, HTTP_POST, HTTP_PUT, HTTP_PATCH, HTTP_DELETE, HTTP_OPTIONS
};

/* A :param's place in the path: path[start, end). */
typedef struct QueenRouteSpan
{
	const char *name;
	Size		name_len;
	const char *start;
	Size		len;
} QueenRouteSpan;

/* ----------------------------------------------------------------
 *		Answers every handler shares
 * ----------------------------------------------------------------
 */

void
queen_respond_json(QueenHttpRequest *req, int status, const char *json)
{
	queen_http_respond(req, status, "application/json", json, strlen(json), NULL);
}

/* {"error": message}, message escaped. */
void
queen_respond_error(QueenHttpRequest *req, int status, const char *message)
{
	StringInfoData buf;
	MemoryContext old = MemoryContextSwitchTo(req->mcxt);

	initStringInfo(&buf);
	queen_render_error(&buf, message, NULL);
	MemoryContextSwitchTo(old);
	queen_http_respond(req, status, "application/json", buf.data, buf.len, NULL);
}

/* ----------------------------------------------------------------
 *		Matching
 * ----------------------------------------------------------------
 */

/*
 * Does the path fit the pattern?  Fills the spans of its :params (at most
 * QUEEN_ROUTE_MAX_PARAMS, which the table respects).
 */
static bool
queen_route_match(const char *pattern, const char *path, QueenRouteSpan *spans, int *nspans)
{
	const char *p = pattern;
	const char *s = path;

	*nspans = 0;
	while (*p != '\0')
	{
		if (*p == ':')
		{
			QueenRouteSpan *span = &spans[(*nspans)++];

			span->name = ++p;
			while (*p != '\0' && *p != '/')
				p++;
			span->name_len = p - span->name;
			span->start = s;
			while (*s != '\0' && *s != '/')
				s++;
			span->len = s - span->start;
			if (span->len == 0)
				return false;
			continue;
		}
		if (*p++ != *s++)
			return false;
	}
	return *s == '\0';
}

/*
 * %XX decoding of one path segment or query parameter (where plus_space
 * also makes '+' a space); NULL if malformed.
 */
char *
queen_percent_decode(const char *s, Size n, bool plus_space, Size *len)
{
	char	   *out = palloc(n + 1);
	Size		o = 0;
	Size		i;

	for (i = 0; i < n; i++)
	{
		if (s[i] == '%')
		{
			int			hi,
						lo;

			if (i + 2 >= n)
				return NULL;
			hi = queen_hex_value(s[i + 1]);
			lo = queen_hex_value(s[i + 2]);
			if (hi < 0 || lo < 0)
				return NULL;
			out[o++] = (char) (hi * 16 + lo);
			i += 2;
		}
		else
			out[o++] = (plus_space && s[i] == '+') ? ' ' : s[i];
	}
	out[o] = '\0';
	*len = o;
	return out;
}

/*
 * Decode the :params of the chosen row into params, in the request's
 * context.  Names arrive as clients write them: percent-encoded, or raw
 * (Queen's clients do not encode them, and a URL parser leaves a '%' that
 * starts no escape as it is), so a segment that is not valid
 * percent-encoding is taken literally: "50%off" is the queue 50%off.
 */
static void
queen_route_decode(QueenHttpRequest *req, const QueenRouteSpan *spans, int nspans,
				   QueenRouteParams *params)
{
	MemoryContext old = MemoryContextSwitchTo(req->mcxt);
	int			i;

	params->n = 0;
	for (i = 0; i < nspans; i++)
	{
		char	   *value = queen_percent_decode(spans[i].start, spans[i].len, false,
												 &params->len[i]);

		if (value == NULL)
		{
			value = pnstrdup(spans[i].start, spans[i].len);
			params->len[i] = spans[i].len;
		}
		params->name[i] = pnstrdup(spans[i].name, spans[i].name_len);
		params->value[i] = value;
		params->n++;
	}
	MemoryContextSwitchTo(old);
}

/* 405, with the methods the path takes. */
static void
queen_route_not_allowed(QueenHttpRequest *req, uint64 allowed)
{
	char		header[128];
	StringInfoData body;
	MemoryContext old = MemoryContextSwitchTo(req->mcxt);
	Size		n;
	int			i;

	initStringInfo(&body);
	queen_render_error(&body, "method not allowed", NULL);
	MemoryContextSwitchTo(old);
	n = strlcpy(header, "Allow: ", sizeof(header));
	for (i = 0; i < (int) lengthof(queen_allow_order); i++)
	{
		int			m = queen_allow_order[i];

		if (!(allowed & QUEEN_METHOD(m)))
			continue;
		n += snprintf(header + n, sizeof(header) - n, "%s%s",
					  n > strlen("Allow: ") ? ", " : "", http_method_str(m));
	}
	snprintf(header + n, sizeof(header) - n, "\r\n");
	queen_http_respond(req, 405, "application/json", body.data, body.len, header);
}

/* The value of a :param by name, or NULL. */
const char *
queen_route_param(const QueenRouteParams *params, const char *name, Size *len)
{
	int			i;

	for (i = 0; i < params->n; i++)
	{
		if (strcmp(params->name[i], name) == 0)
		{
			if (len)
				*len = params->len[i];
			return params->value[i];
		}
	}
	return NULL;
}

/*
 * The request's tenant: the default one, or with queen.tenant_header set
 * (by an operator whose proxy sets that header and strips what clients
 * send) the UUID it carries.  False once answered 400.
 */
static bool
queen_route_tenant(QueenHttpRequest *req)
{
	const char *value = NULL;
	pg_uuid_t	tenant;

	if (queen_tenant_header != NULL && queen_tenant_header[0] != '\0')
		value = queen_http_header(req, queen_tenant_header);
	if (value == NULL)
	{
		memcpy(req->tenant, queen_listener_tenant.data, UUID_LEN);
		return true;
	}
	if (!queen_uuid_parse(value, &tenant))
	{
		queen_respond_error(req, 400, psprintf("the %s header must be a tenant's UUID",
											   queen_tenant_header));
		return false;
	}
	memcpy(req->tenant, tenant.data, UUID_LEN);
	return true;
}

/* The HTTP layer's handler: every request of the listener comes here. */
void
queen_route_request(QueenHttpRequest *req, void *arg)
{
	QueenRouteSpan spans[QUEEN_ROUTE_MAX_PARAMS];
	const QueenRoute *chosen = NULL;
	int			nspans = 0;
	uint64		allowed = 0;
	QueenRouteParams params;
	int			i;

	(void) arg;
	queen_count(QUEEN_COUNT_HTTP_REQUESTS, 1);

	for (i = 0; i < (int) lengthof(queen_routes); i++)
	{
		const QueenRoute *route = &queen_routes[i];

		if (!queen_route_match(route->pattern, req->path, spans, &nspans))
			continue;
		allowed |= route->methods;
		if (req->method >= 0 && req->method < 64 &&
			(route->methods & QUEEN_METHOD(req->method)))
		{
			chosen = route;
			break;
		}
	}
	if (chosen == NULL)
	{
		/* a path some row matches, with a method none of them takes */
		if (allowed != 0)
			queen_route_not_allowed(req, allowed);
		else
			queen_respond_error(req, 404, "not found");
		return;
	}
	/* who may: answered 401 or 403 here, before the route reads anything */
	if (!queen_auth_request(req, chosen->access) || !queen_route_tenant(req))
		return;
	queen_route_decode(req, spans, nspans, &params);
	params.arg = chosen->arg;
	chosen->handler(req, &params);
}
