/*-------------------------------------------------------------------------
 *
 * handle_traces.c
 *	  The traces routes: POST /api/v1/traces (a consumer records a named
 *	  event against a message), GET /api/v1/traces/:partitionId/:transactionId,
 *	  GET /api/v1/traces/by-name/:traceName and GET /api/v1/traces/names.
 *	  Each is checked here and run by any shard (shard/shard_traces.c).
 *
 * A trace's body is Queen's: transactionId and partitionId (required),
 * consumerGroup, eventType (default "info"), traceNames (a string or an
 * array of strings) and data (required, any JSON that jsonb can hold).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "listener.h"
#include "codec.h"
#include "consume_body.h"
#include "json_walk.h"
#include "ops.h"
#include "routes.h"
#include "validate.h"

#include "utils/json.h"

/* The most names one trace may carry. */
#define QUEEN_TRACE_MAX_NAMES		64
#define QUEEN_TRACE_DEFAULT_LIMIT	100
#define QUEEN_TRACE_NAMES_DEFAULT_LIMIT	50
#define QUEEN_TRACE_MAX_LIMIT		1000

enum
{
	QUEEN_TRACE_KEY_TXN,
	QUEEN_TRACE_KEY_PARTITION,
	QUEEN_TRACE_KEY_GROUP,
	QUEEN_TRACE_KEY_EVENT,
	QUEEN_TRACE_KEY_NAMES,
	QUEEN_TRACE_KEY_DATA,
	QUEEN_TRACE_NKEYS
};

static const char *const queen_trace_keys[QUEEN_TRACE_NKEYS] = {
	"transactionId", "partitionId", "consumerGroup", "eventType", "traceNames", "data"
};

/* Each name of traceNames, checked, into the 0x1F-joined list. */
static char *
queen_trace_take_name(void *arg, int index, char *str, size_t len)
{
	StringInfo	names = (StringInfo) arg;
	const char *problem = queen_name_problem(str, len, QUEEN_MAX_NAME_BYTES);

	if (problem != NULL)
		return psprintf("traceNames[%d] %s", index, problem);
	if (index >= QUEEN_TRACE_MAX_NAMES)
		return psprintf("traceNames has more than %d names", QUEEN_TRACE_MAX_NAMES);
	if (names->len > 0)
		appendStringInfoChar(names, '\x1f');
	appendBinaryStringInfo(names, str, (int) len);
	return NULL;
}

/* traceNames: a string or an array of them, joined by 0x1F; or why not. */
static const char *
queen_trace_names(const QueenJsonValue *v, StringInfo names)
{
	char	   *problem;

	if (v->type == JSON_TOKEN_INVALID || v->type == JSON_TOKEN_NULL)
		return NULL;
	if (v->type == JSON_TOKEN_STRING)
		return queen_trace_take_name(names, 0, v->str, v->len);
	if (v->type != JSON_TOKEN_ARRAY_START)
		return "traceNames must be a string or an array of strings";
	problem = queen_json_strings(v->span, v->span_len, queen_trace_take_name, names);
	if (problem != NULL && strncmp(problem, "element ", 8) == 0)
		return psprintf("traceNames: %s", problem);
	return problem;
}

/* POST /api/v1/traces: the body checked, then to any shard. */
void
queen_handle_trace(QueenHttpRequest *req, const QueenRouteParams *params)
{
	QueenJsonValue v[QUEEN_TRACE_NKEYS];
	QueenJsonShape shape;
	QueenArgsTrace a;
	StringInfoData names;
	pg_uuid_t	pid;
	char	   *txn;
	char	   *group;
	char	   *event;
	char	   *data;
	const char *problem;

	(void) params;
	queen_json_shape_keys(&shape, queen_trace_keys, QUEEN_TRACE_NKEYS, v);
	initStringInfo(&names);
	problem = queen_body_walk(req->body, req->body_len, &shape);
	if (problem == NULL &&
		(v[QUEEN_TRACE_KEY_TXN].type == JSON_TOKEN_INVALID ||
		 v[QUEEN_TRACE_KEY_PARTITION].type == JSON_TOKEN_INVALID))
		problem = "transactionId and partitionId are required";
	else if (problem == NULL && v[QUEEN_TRACE_KEY_DATA].type == JSON_TOKEN_INVALID)
		problem = "data is required";
	if (problem == NULL &&
		(problem = queen_body_name(&v[QUEEN_TRACE_KEY_TXN], "transactionId",
								   QUEEN_MAX_TXN_BYTES, &txn)) == NULL &&
		(problem = queen_body_name(&v[QUEEN_TRACE_KEY_GROUP], "consumerGroup",
								   QUEEN_MAX_NAME_BYTES, &group)) == NULL &&
		(problem = queen_body_name(&v[QUEEN_TRACE_KEY_EVENT], "eventType",
								   QUEEN_MAX_NAME_BYTES, &event)) == NULL)
		problem = queen_trace_names(&v[QUEEN_TRACE_KEY_NAMES], &names);
	if (problem == NULL && (txn == NULL ||
							v[QUEEN_TRACE_KEY_PARTITION].type != JSON_TOKEN_STRING ||
							!queen_uuid_parse(v[QUEEN_TRACE_KEY_PARTITION].str, &pid)))
		problem = txn == NULL ? "transactionId is required" : "partitionId must be a UUID";
	if (problem == NULL)
	{
		data = queen_body_json(&v[QUEEN_TRACE_KEY_DATA]);
		if (v[QUEEN_TRACE_KEY_DATA].type != JSON_TOKEN_STRING)
			problem = queen_json_problem(data, strlen(data));
	}
	if (problem != NULL)
	{
		queen_respond_error(req, 400, problem);
		return;
	}
	memset(&a, 0, sizeof(a));
	a.partition_id = (const char *) pid.data;
	a.txn = queen_wire_text(txn, strlen(txn));
	a.group = queen_wire_text(group, group ? strlen(group) : 0);
	a.event_type = event != NULL ? queen_wire_text(event, strlen(event)) :
		queen_wire_text("info", 4);
	a.data = queen_wire_text(data, strlen(data));
	a.names = queen_wire_text(names.data, names.len);
	queen_control_call(req, QUEEN_CONTROL_TRACE, -1, &a);
}

static const char *const queen_trace_page_params[] = {"limit", "offset", "from", "to", NULL};
static const char *const queen_trace_no_params[] = {NULL};

/* GET /api/v1/traces/:partitionId/:transactionId */
void
queen_handle_traces_message(QueenHttpRequest *req, const QueenRouteParams *params)
{
	QueenQuery	q;
	QueenArgsTraces a;
	pg_uuid_t	pid;
	Size		len = 0;
	const char *partition = queen_route_param(params, "partitionId", NULL);
	const char *txn = queen_route_param(params, "transactionId", &len);
	const char *problem;

	memset(&a, 0, sizeof(a));
	if (!queen_read_query(req, queen_trace_no_params, &q))
		return;
	if (partition == NULL || !queen_uuid_parse(partition, &pid))
	{
		queen_respond_error(req, 400, "partitionId must be a UUID");
		return;
	}
	/* a transactionId, not a name: as long as a push allows */
	if ((problem = queen_name_problem(txn, len, QUEEN_MAX_TXN_BYTES)) != NULL)
	{
		queen_respond_error(req, 400, psprintf("transactionId %s", problem));
		return;
	}
	a.txn = queen_wire_text(txn, len);
	a.partition_id = (const char *) pid.data;
	a.listing = QUEEN_TRACES_OF_MESSAGE;
	queen_control_call(req, QUEEN_CONTROL_TRACES, -1, &a);
}

/* limit and offset of a reader's page; or a 400. */
static bool
queen_traces_page(QueenHttpRequest *req, const QueenQuery *q, int dflt, QueenArgsTraces *a)
{
	int64		limit,
				offset;
	const char *problem;

	if ((problem = queen_query_int(q, "limit", dflt, 1, QUEEN_TRACE_MAX_LIMIT, &limit)) != NULL ||
		(problem = queen_query_int(q, "offset", 0, 0, PG_INT64_MAX, &offset)) != NULL)
	{
		queen_respond_error(req, 400, problem);
		return false;
	}
	a->limit = (int32) limit;
	a->offset = offset;
	return true;
}

/* A bound: absent is open, "now" is now, else ISO-8601. */
static TimestampTz
queen_traces_bound(const char *value, TimestampTz open)
{
	TimestampTz t;

	if (value == NULL || value[0] == '\0')
		return open;
	if (strcmp(value, "now") == 0)
		return GetCurrentTimestamp();
	(void) queen_parse_iso8601(value, &t);
	return t;
}

/* GET /api/v1/traces/by-name/:traceName?limit=&offset=&from=&to= */
void
queen_handle_traces_by_name(QueenHttpRequest *req, const QueenRouteParams *params)
{
	QueenQuery	q;
	QueenArgsTraces a;
	const char *from;
	const char *to;
	const char *problem;
	pg_uuid_t	zero;

	memset(&a, 0, sizeof(a));
	memset(&zero, 0, sizeof(zero));
	a.partition_id = (const char *) zero.data;
	if (!queen_read_query(req, queen_trace_page_params, &q) ||
		!queen_take_name(req, NULL, params, "traceName", "traceName", &a.name) ||
		!queen_traces_page(req, &q, QUEEN_TRACE_DEFAULT_LIMIT, &a))
		return;
	from = queen_query_get(&q, "from", NULL);
	to = queen_query_get(&q, "to", NULL);
	if ((problem = queen_bound_problem("from", from)) != NULL ||
		(problem = queen_bound_problem("to", to)) != NULL)
	{
		queen_respond_error(req, 400, problem);
		return;
	}
	a.from = queen_traces_bound(from, DT_NOBEGIN);
	a.to = queen_traces_bound(to, DT_NOEND);
	a.listing = QUEEN_TRACES_BY_NAME;
	queen_control_call(req, QUEEN_CONTROL_TRACES, -1, &a);
}

/* GET /api/v1/traces/names?limit=&offset= */
void
queen_handle_trace_names(QueenHttpRequest *req, const QueenRouteParams *params)
{
	QueenQuery	q;
	QueenArgsTraces a;
	pg_uuid_t	zero;

	(void) params;
	memset(&a, 0, sizeof(a));
	memset(&zero, 0, sizeof(zero));
	a.partition_id = (const char *) zero.data;
	if (!queen_read_query(req, queen_trace_page_params, &q) ||
		!queen_traces_page(req, &q, QUEEN_TRACE_NAMES_DEFAULT_LIMIT, &a))
		return;
	a.listing = QUEEN_TRACES_NAMES;
	queen_control_call(req, QUEEN_CONTROL_TRACES, -1, &a);
}
