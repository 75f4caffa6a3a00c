/*-------------------------------------------------------------------------
 *
 * handle_resources.c
 *	  The administration routes (docs/HTTP.md "Administration"): resources,
 *	  status, analytics, consumer groups, dead letters and messages.  Each
 *	  is a row of the route table whose arg is its spec below: which core
 *	  request it is (core/admin.h), where each argument comes from and how
 *	  it is checked, its page and time range.  One handler reads a spec,
 *	  answers 400 for what it refuses, and sends the request to any shard
 *	  (a read) or to a shard alone (a write); the shard's core call answers
 *	  the JSON, or 404.  Seek and subscription read a body, so they have
 *	  their own handlers over the same sending; pop maintenance mode is the
 *	  listener's own (maintenance_mode.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "listener.h"
#include "admin.h"
#include "codec.h"
#include "consume_body.h"
#include "json_walk.h"
#include "ops.h"
#include "routes.h"
#include "validate.h"
#include "maintenance/spool.h"

#include "utils/json.h"

/* Where an argument comes from, and what it must be. */
#define QUEEN_AT_PATH		1
#define QUEEN_AT_QUERY		2

#define QUEEN_IS_NAME		0	/* a queue, partition, group, namespace or task name */
#define QUEEN_IS_UUID		1
#define QUEEN_IS_TXN		2	/* a transactionId */
#define QUEEN_IS_STATUS		3	/* a message status */

typedef struct QueenAdminText
{
	const char *key;			/* NULL: unused */
	uint8		at;
	uint8		is;
	bool		required;
} QueenAdminText;

/* QueenAdminRoute.flags */
#define QUEEN_AR_PAGE		0x01	/* limit and offset */
#define QUEEN_AR_RANGE		0x02	/* from and to */
#define QUEEN_AR_PUSHES		0x04	/* a write that pushes: 503 in maintenance mode */

typedef struct QueenAdminRoute
{
	uint8		request;		/* QueenAdminRequest */
	uint8		flags;
	const char *const *query;	/* the query parameters it takes */
	QueenAdminText text[QUEEN_ADMIN_TEXTS];
	int32		default_limit;
	int32		max_limit;
	int64		max_offset;		/* 0: any; a browse reads limit + offset of each partition */
	int32		range_seconds;	/* the default range: this long before now */
	const char *number;			/* an integer parameter, or NULL */
	int32		number_default;
} QueenAdminRoute;

#define PATH(k, is)		{k, QUEEN_AT_PATH, is, true}
#define NONE			{NULL, 0, 0, false}
#define QUERY(k, is)	{k, QUEEN_AT_QUERY, is, false}
#define NEEDED(k, is)	{k, QUEEN_AT_QUERY, is, true}

static const char *const q_none[] = {NULL};
static const char *const q_range[] = {"from", "to", "hostname", "workerId", NULL};
static const char *const q_page[] = {"limit", "offset", NULL};
static const char *const q_queues[] = {"namespace", "task", "limit", "offset", "from", "to", NULL};
static const char *const q_lagging[] = {"minLagSeconds", "limit", NULL};
static const char *const q_group[] = {"limit", NULL};
static const char *const q_status[] = {"queue", "namespace", "task", "from", "to", NULL};
static const char *const q_series[] = {"queue", "from", "to", NULL};
static const char *const q_analytics[] = {"queue", "namespace", "task", "from", "to", "interval", NULL};
static const char *const q_messages[] = {"queue", "partition", "status", "limit", "offset", NULL};
static const char *const q_queue_messages[] = {"partition", "status", "limit", "offset", NULL};
static const char *const q_dlq_purge[] = {"queue", "consumerGroup", NULL};

/* from and to are Queen's clients' (/status/queues): checked, no effect */
const QueenAdminRoute queen_ar_queues = {
	.request = QUEEN_ADMIN_QUEUES, .flags = QUEEN_AR_PAGE | QUEEN_AR_RANGE, .query = q_queues,
	.text = {NONE, QUERY("namespace", QUEEN_IS_NAME), QUERY("task", QUEEN_IS_NAME)},
	.default_limit = 100, .max_limit = 1000
};
const QueenAdminRoute queen_ar_queue = {
	.request = QUEEN_ADMIN_QUEUE, .flags = QUEEN_AR_PAGE, .query = q_page,
	.text = {PATH("queue", QUEEN_IS_NAME)}, .default_limit = 100, .max_limit = 1000
};
const QueenAdminRoute queen_ar_overview = {.request = QUEEN_ADMIN_OVERVIEW, .query = q_none};
const QueenAdminRoute queen_ar_namespaces = {.request = QUEEN_ADMIN_NAMESPACES, .query = q_none};
const QueenAdminRoute queen_ar_tasks = {.request = QUEEN_ADMIN_TASKS, .query = q_none};
const QueenAdminRoute queen_ar_groups = {.request = QUEEN_ADMIN_GROUPS, .query = q_none};
const QueenAdminRoute queen_ar_lagging = {
	.request = QUEEN_ADMIN_LAGGING, .flags = QUEEN_AR_PAGE, .query = q_lagging,
	.default_limit = 100, .max_limit = 1000, .number = "minLagSeconds", .number_default = 3600
};
const QueenAdminRoute queen_ar_group = {
	.request = QUEEN_ADMIN_GROUP, .flags = QUEEN_AR_PAGE, .query = q_group,
	.text = {PATH("group", QUEEN_IS_NAME)}, .default_limit = 1000, .max_limit = 10000
};
const QueenAdminRoute queen_ar_status = {
	.request = QUEEN_ADMIN_STATUS, .flags = QUEEN_AR_RANGE, .query = q_status,
	.text = {QUERY("queue", QUEEN_IS_NAME), QUERY("namespace", QUEEN_IS_NAME),
	QUERY("task", QUEEN_IS_NAME)}, .range_seconds = 3600
};
const QueenAdminRoute queen_ar_queue_ops = {
	.request = QUEEN_ADMIN_QUEUE_OPS, .flags = QUEEN_AR_RANGE, .query = q_series,
	.text = {QUERY("queue", QUEEN_IS_NAME)}, .range_seconds = 3600
};
const QueenAdminRoute queen_ar_queue_lag = {
	.request = QUEEN_ADMIN_QUEUE_LAG, .flags = QUEEN_AR_RANGE, .query = q_series,
	.text = {QUERY("queue", QUEEN_IS_NAME)}, .range_seconds = 3600
};
const QueenAdminRoute queen_ar_retention = {
	.request = QUEEN_ADMIN_RETENTION, .flags = QUEEN_AR_RANGE, .query = q_series,
	.text = {QUERY("queue", QUEEN_IS_NAME)}, .range_seconds = 3600
};
const QueenAdminRoute queen_ar_analytics = {
	.request = QUEEN_ADMIN_ANALYTICS, .flags = QUEEN_AR_RANGE, .query = q_analytics,
	.text = {QUERY("queue", QUEEN_IS_NAME), QUERY("namespace", QUEEN_IS_NAME),
	QUERY("task", QUEEN_IS_NAME)}, .range_seconds = 86400
};
const QueenAdminRoute queen_ar_worker_metrics = {
	.request = QUEEN_ADMIN_WORKER_METRICS, .flags = QUEEN_AR_RANGE, .query = q_range,
	.range_seconds = 3600
};
const QueenAdminRoute queen_ar_system_metrics = {
	.request = QUEEN_ADMIN_SYSTEM_METRICS, .flags = QUEEN_AR_RANGE, .query = q_range,
	.range_seconds = 3600
};
const QueenAdminRoute queen_ar_stats_refresh = {.request = QUEEN_ADMIN_STATS_REFRESH, .query = q_none};
const QueenAdminRoute queen_ar_message = {
	.request = QUEEN_ADMIN_MESSAGE, .query = q_none,
	.text = {PATH("partitionId", QUEEN_IS_UUID), PATH("transactionId", QUEEN_IS_TXN)}
};
const QueenAdminRoute queen_ar_messages = {
	.request = QUEEN_ADMIN_MESSAGES, .flags = QUEEN_AR_PAGE, .query = q_messages,
	.text = {NEEDED("queue", QUEEN_IS_NAME), QUERY("partition", QUEEN_IS_NAME),
	QUERY("status", QUEEN_IS_STATUS)}, .default_limit = 50, .max_limit = 1000, .max_offset = 9000
};
const QueenAdminRoute queen_ar_queue_messages = {
	.request = QUEEN_ADMIN_MESSAGES, .flags = QUEEN_AR_PAGE, .query = q_queue_messages,
	.text = {PATH("queue", QUEEN_IS_NAME), QUERY("partition", QUEEN_IS_NAME),
	QUERY("status", QUEEN_IS_STATUS)}, .default_limit = 50, .max_limit = 1000, .max_offset = 9000
};
const QueenAdminRoute queen_ar_message_forget = {
	.request = QUEEN_ADMIN_MESSAGE_FORGET, .query = q_none,
	.text = {PATH("partitionId", QUEEN_IS_UUID), PATH("transactionId", QUEEN_IS_TXN)}
};
const QueenAdminRoute queen_ar_message_retry = {
	.request = QUEEN_ADMIN_MESSAGE_RETRY, .flags = QUEEN_AR_PUSHES, .query = q_none,
	.text = {PATH("partitionId", QUEEN_IS_UUID), PATH("transactionId", QUEEN_IS_TXN)}
};
const QueenAdminRoute queen_ar_dlq_purge = {
	.request = QUEEN_ADMIN_DLQ_PURGE, .query = q_dlq_purge,
	.text = {NEEDED("queue", QUEEN_IS_NAME), QUERY("consumerGroup", QUEEN_IS_NAME)}
};
const QueenAdminRoute queen_ar_dlq_replay = {
	.request = QUEEN_ADMIN_DLQ_REPLAY, .flags = QUEEN_AR_PUSHES, .query = q_none,
	.text = {PATH("id", QUEEN_IS_UUID)}
};
const QueenAdminRoute queen_ar_seek = {
	.request = QUEEN_ADMIN_SEEK, .query = q_none,
	.text = {PATH("group", QUEEN_IS_NAME), PATH("queue", QUEEN_IS_NAME),
	{"partition", QUEEN_AT_PATH, QUEEN_IS_NAME, false}}
};
const QueenAdminRoute queen_ar_subscription = {
	.request = QUEEN_ADMIN_SUBSCRIPTION, .query = q_none, .text = {PATH("group", QUEEN_IS_NAME)}
};

static const char *const queen_message_statuses[] = {
	"pending", "processing", "completed", "dead_letter", NULL
};

/* One argument as the spec says, checked; false after a 400. */
static bool
queen_admin_text(QueenHttpRequest *req, const QueenQuery *q, const QueenRouteParams *params,
				 const QueenAdminText *t, QueenWireText *out)
{
	Size		len = 0;
	const char *v = t->at == QUEEN_AT_PATH ? queen_route_param(params, t->key, &len) :
		queen_query_get(q, t->key, &len);
	const char *problem = NULL;
	pg_uuid_t	id;
	int			i;

	*out = queen_wire_text(NULL, 0);
	if (v == NULL || len == 0)
	{
		if (!t->required)
			return true;
		queen_respond_error(req, 400, psprintf("%s is required", t->key));
		return false;
	}
	switch (t->is)
	{
		case QUEEN_IS_NAME:
			if ((problem = queen_name_problem(v, len, QUEEN_MAX_NAME_BYTES)) != NULL)
				problem = psprintf("%s %s", t->key, problem);
			break;
		case QUEEN_IS_UUID:
			if (strlen(v) != len || !queen_uuid_parse(v, &id))
				problem = psprintf("%s must be a UUID", t->key);
			break;
		case QUEEN_IS_TXN:
			if ((problem = queen_name_problem(v, len, QUEEN_MAX_TXN_BYTES)) != NULL)
				problem = psprintf("%s %s", t->key, problem);
			break;
		case QUEEN_IS_STATUS:
			for (i = 0; queen_message_statuses[i] != NULL; i++)
				if (strcmp(v, queen_message_statuses[i]) == 0)
					break;
			if (queen_message_statuses[i] == NULL)
				problem = psprintf("%s must be pending, processing, completed or dead_letter",
								   t->key);
			break;
	}
	if (problem != NULL)
	{
		queen_respond_error(req, 400, problem);
		return false;
	}
	*out = queen_wire_text(v, len);
	return true;
}

/* A time bound: absent is dflt, "now" is now, else ISO-8601 (checked before). */
static TimestampTz
queen_admin_bound(const char *value, TimestampTz dflt, TimestampTz now)
{
	TimestampTz t;

	if (value == NULL || value[0] == '\0')
		return dflt;
	if (strcmp(value, "now") == 0)
		return now;
	(void) queen_parse_iso8601(value, &t);
	return t;
}

/* Page, range and number of a spec into m; false after a 400. */
static bool
queen_admin_numbers(QueenHttpRequest *req, const QueenQuery *q, const QueenAdminRoute *r,
					QueenArgsAdmin *m)
{
	const char *problem = NULL;
	int64		limit = 0,
				offset = 0,
				number = 0;

	if (r->flags & QUEEN_AR_PAGE)
	{
		if ((problem = queen_query_int(q, "limit", r->default_limit, 1, r->max_limit,
									   &limit)) == NULL &&
			queen_query_get(q, "offset", NULL) != NULL)
			problem = queen_query_int(q, "offset", 0, 0,
									  r->max_offset > 0 ? r->max_offset : PG_INT64_MAX, &offset);
	}
	if (problem == NULL && r->number != NULL)
		problem = queen_query_int(q, r->number, r->number_default, 0, PG_INT32_MAX, &number);
	if (problem == NULL && (r->flags & QUEEN_AR_RANGE))
	{
		const char *from = queen_query_get(q, "from", NULL);
		const char *to = queen_query_get(q, "to", NULL);
		const char *interval = queen_query_get(q, "interval", NULL);
		TimestampTz now = GetCurrentTimestamp();

		if ((problem = queen_bound_problem("from", from)) == NULL &&
			(problem = queen_bound_problem("to", to)) == NULL)
		{
			m->to = queen_admin_bound(to, now, now);
			m->from = queen_admin_bound(from, m->to - (int64) r->range_seconds * USECS_PER_SEC,
										now);
			if (m->from > m->to)
				problem = "from must not be after to";
		}
		/* Queen's interval only names its buckets' width; ours follow the range */
		if (problem == NULL && interval != NULL && strcmp(interval, "minute") != 0 &&
			strcmp(interval, "hour") != 0 && strcmp(interval, "day") != 0)
			problem = "interval must be minute, hour or day";
	}
	if (problem != NULL)
	{
		queen_respond_error(req, 400, problem);
		return false;
	}
	m->limit = (int32) limit;
	m->offset = offset;
	m->number = (int32) number;
	return true;
}

/*
 * The spec's query string and arguments into m; false after a 400.  The
 * arguments are checked here so that the shard sees only what it may run.
 */
static bool
queen_admin_prepare(QueenHttpRequest *req, const QueenRouteParams *params,
					const QueenAdminRoute *r, QueenArgsAdmin *m)
{
	QueenQuery	q;
	QueenWireText *texts[QUEEN_ADMIN_TEXTS];
	int			i;

	memset(m, 0, sizeof(*m));
	m->request = r->request;
	texts[0] = &m->text0;
	texts[1] = &m->text1;
	texts[2] = &m->text2;
	texts[3] = &m->text3;
	texts[4] = &m->text4;
	if (!queen_read_query(req, r->query, &q))
		return false;
	for (i = 0; i < QUEEN_ADMIN_TEXTS; i++)
		if (r->text[i].key != NULL &&
			!queen_admin_text(req, &q, params, &r->text[i], texts[i]))
			return false;
	return queen_admin_numbers(req, &q, r, m);
}

/* To a shard: a read to any, a write alone under the consumption rules. */
static void
queen_admin_send(QueenHttpRequest *req, const QueenAdminRoute *r, const QueenArgsAdmin *m)
{
	if ((r->flags & QUEEN_AR_PUSHES) && queen_maintenance_on())
	{
		queen_respond_error(req, 503,
							"maintenance mode is on: a replay pushes, and pushes wait for it to end");
		return;
	}
	queen_control_call(req, queen_admin_writes(r->request) ? QUEEN_CONTROL_ADMIN_WRITE :
					   QUEEN_CONTROL_ADMIN, -1, m);
}

/* Every administration route without a body: its row's spec says the rest. */
void
queen_handle_admin(QueenHttpRequest *req, const QueenRouteParams *params)
{
	const QueenAdminRoute *r = (const QueenAdminRoute *) params->arg;
	QueenArgsAdmin m;

	if (queen_admin_prepare(req, params, r, &m))
		queen_admin_send(req, r, &m);
}

enum
{
	QUEEN_SEEK_KEY_TO_END,
	QUEEN_SEEK_KEY_TIMESTAMP,
	QUEEN_SEEK_NKEYS
};

static const char *const queen_seek_keys[QUEEN_SEEK_NKEYS] = {"toEnd", "timestamp"};

/* A body's ISO-8601 string into *out; or why not. */
static const char *
queen_body_moment(const QueenJsonValue *v, const char *key, TimestampTz *out)
{
	if (v->type != JSON_TOKEN_STRING || !queen_parse_iso8601(v->str, out))
		return psprintf("%s must be an ISO-8601 timestamp such as 2026-01-31T08:00:00Z", key);
	return NULL;
}

/*
 * POST /api/v1/consumer-groups/:group/queues/:queue[/partitions/:partition]/seek
 * with {"toEnd": true} or {"timestamp": "..."} (toEnd wins, as in Queen).
 */
void
queen_handle_seek(QueenHttpRequest *req, const QueenRouteParams *params)
{
	const QueenAdminRoute *r = (const QueenAdminRoute *) params->arg;
	QueenJsonValue v[QUEEN_SEEK_NKEYS];
	QueenJsonShape shape;
	QueenArgsAdmin m;
	const char *problem;
	TimestampTz at = 0;
	bool		to_end = false;

	if (!queen_admin_prepare(req, params, r, &m))
		return;
	queen_json_shape_keys(&shape, queen_seek_keys, QUEEN_SEEK_NKEYS, v);
	problem = queen_body_walk(req->body, req->body_len, &shape);
	if (problem == NULL)
	{
		const QueenJsonValue *e = &v[QUEEN_SEEK_KEY_TO_END];
		const QueenJsonValue *t = &v[QUEEN_SEEK_KEY_TIMESTAMP];

		if (e->type != JSON_TOKEN_INVALID && e->type != JSON_TOKEN_NULL &&
			e->type != JSON_TOKEN_TRUE && e->type != JSON_TOKEN_FALSE)
			problem = "toEnd must be a boolean";
		else if (e->type == JSON_TOKEN_TRUE)
			to_end = true;
		else if (t->type == JSON_TOKEN_INVALID || t->type == JSON_TOKEN_NULL)
			problem = "Must specify either 'toEnd': true or 'timestamp'";
		else
			problem = queen_body_moment(t, "timestamp", &at);
	}
	if (problem != NULL)
	{
		queen_respond_error(req, 400, problem);
		return;
	}
	m.flag = to_end;
	m.from = at;
	queen_admin_send(req, r, &m);
}

enum
{
	QUEEN_SUB_KEY_TIMESTAMP,
	QUEEN_SUB_NKEYS
};

static const char *const queen_sub_keys[QUEEN_SUB_NKEYS] = {"subscriptionTimestamp"};

/* POST /api/v1/consumer-groups/:group/subscription {"subscriptionTimestamp": "..."} */
void
queen_handle_subscription(QueenHttpRequest *req, const QueenRouteParams *params)
{
	const QueenAdminRoute *r = (const QueenAdminRoute *) params->arg;
	QueenJsonValue v[QUEEN_SUB_NKEYS];
	QueenJsonShape shape;
	QueenArgsAdmin m;
	const char *problem;
	TimestampTz at = 0;

	if (!queen_admin_prepare(req, params, r, &m))
		return;
	queen_json_shape_keys(&shape, queen_sub_keys, QUEEN_SUB_NKEYS, v);
	problem = queen_body_walk(req->body, req->body_len, &shape);
	if (problem == NULL)
	{
		const QueenJsonValue *t = &v[QUEEN_SUB_KEY_TIMESTAMP];

		if (t->type == JSON_TOKEN_INVALID || t->type == JSON_TOKEN_NULL)
			problem = "Missing subscriptionTimestamp in request body";
		else
			problem = queen_body_moment(t, "subscriptionTimestamp", &at);
	}
	if (problem != NULL)
	{
		queen_respond_error(req, 400, problem);
		return;
	}
	m.from = at;
	queen_admin_send(req, r, &m);
}
