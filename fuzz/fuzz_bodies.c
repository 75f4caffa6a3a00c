/*-------------------------------------------------------------------------
 *
 * fuzz_bodies.c
 *	  libFuzzer target for what the listener reads out of a request: the
 *	  body of every route that takes one (push, ack, ack batch, lease
 *	  extension, configure, transaction, trace, stream registration, state
 *	  and cycle, seek, subscription, maintenance) and the query string of
 *	  every route that reads one (pop, DLQ, group deletion, the admin
 *	  listings), through the real router and handlers.
 *
 * The first byte of an input picks a route; for a route with a :param,
 * the text up to the first newline is the param as it would appear in the
 * path; the rest is the body, or the query string of a GET or DELETE.
 * The request then goes through queen_route_request() as the HTTP layer
 * would hand it over, so the parsers run with what the handlers build
 * from them (the arguments on the wire to a shard); shim_broker.c stands
 * where the shards would answer.
 *
 * Checked for every input: the request is answered exactly once, never
 * 500, and a JSON answer is JSON (fuzz_check_answer).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <stdio.h>
#include <stdlib.h>

#include <http_parser.h>

#include "fuzz.h"
#include "fuzz_broker.h"

#include "listener.h"
#include "routes.h"

#include "utils/memutils.h"

typedef struct FuzzRoute
{
	int			method;
	const char *path;			/* "%s" is where a :param goes */
	bool		query;			/* the input is a query string, not a body */
} FuzzRoute;

static const FuzzRoute fuzz_routes[] = {
	{HTTP_POST, "/api/v1/push", false},
	{HTTP_POST, "/api/v1/configure", false},
	{HTTP_GET, "/api/v1/pop/queue/%s", true},
	{HTTP_GET, "/api/v1/pop/queue/orders/partition/%s", true},
	{HTTP_GET, "/api/v1/pop", true},
	{HTTP_POST, "/api/v1/transaction", false},
	{HTTP_POST, "/api/v1/traces", false},
	{HTTP_POST, "/api/v1/ack", false},
	{HTTP_POST, "/api/v1/ack/batch", false},
	{HTTP_POST, "/api/v1/lease/%s/extend", false},
	{HTTP_GET, "/api/v1/dlq", true},
	{HTTP_DELETE, "/api/v1/consumer-groups/%s", true},
	{HTTP_DELETE, "/api/v1/resources/queues/%s", true},
	{HTTP_POST, "/streams/v1/queries", false},
	{HTTP_POST, "/streams/v1/state/get", false},
	{HTTP_POST, "/streams/v1/cycle", false},
	{HTTP_POST, "/api/v1/consumer-groups/g/queues/%s/seek", false},
	{HTTP_POST, "/api/v1/consumer-groups/%s/subscription", false},
	{HTTP_POST, "/api/v1/system/maintenance", false},
	{HTTP_POST, "/api/v1/system/maintenance/pop", false},
	{HTTP_GET, "/api/v1/traces/by-name/%s", true},
	{HTTP_GET, "/api/v1/traces/%s/txn-1", true},
	{HTTP_GET, "/api/v1/resources/queues", true},
	{HTTP_GET, "/api/v1/status/queues/%s/messages", true},
	{HTTP_GET, "/api/v1/analytics/queue-ops", true},
	{HTTP_GET, "/api/v1/analytics/retention", true},
	{HTTP_GET, "/api/v1/consumer-groups/lagging", true},
	{HTTP_GET, "/api/v1/messages", true},
	{HTTP_GET, "/api/v1/messages/%s/txn-1", true},
	{HTTP_DELETE, "/api/v1/dlq", true},
	{HTTP_POST, "/api/v1/dlq/%s/replay", false},
	{HTTP_POST, "/api/v1/messages/%s/txn-1/retry", false},
	{HTTP_POST, "/api/v1/stats/refresh", false},
	{HTTP_GET, "/api/v1/status", true},
};

/* ----------------------------------------------------------------
 *		The HTTP layer's face, for a request that came from no socket
 * ----------------------------------------------------------------
 */

static QueenHttpRequest *fuzz_req;
static int	fuzz_answers;

void
queen_http_respond(QueenHttpRequest *req, int status, const char *content_type,
				   const char *body, size_t body_len, const char *extra_headers)
{
	(void) extra_headers;
	if (req != fuzz_req || ++fuzz_answers > 1)
	{
		fprintf(stderr, "a request was answered twice (status %d)\n", status);
		abort();
	}
	fuzz_check_answer(status, content_type, body, body_len);
}

bool
queen_http_client_closed(QueenHttpRequest *req)
{
	(void) req;
	return false;
}

const char *
queen_http_header(QueenHttpRequest *req, const char *name)
{
	(void) req;
	(void) name;
	return NULL;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	MemoryContext cxt = fuzz_iteration_context();
	MemoryContext old = MemoryContextSwitchTo(cxt);
	FuzzInput	in = {data, size};
	const FuzzRoute *route = &fuzz_routes[fuzz_byte(&in) % lengthof(fuzz_routes)];
	QueenHttpRequest *req = palloc0(sizeof(QueenHttpRequest));
	char	   *rest = fuzz_rest(&in);
	const char *param = "orders";

	if (strstr(route->path, "%s") != NULL)
	{
		char	   *nl = memchr(rest, '\n', in.len);

		if (nl != NULL)
		{
			*nl = '\0';
			param = rest;
			in.len -= nl + 1 - rest;
			rest = nl + 1;
		}
	}
	req->method = route->method;
	req->path = psprintf(route->path, param);
	req->mcxt = cxt;
	req->body = "";
	if (route->query)
		req->query = rest;
	else
	{
		req->body = rest;
		req->body_len = in.len;
	}
	fuzz_req = req;
	fuzz_answers = 0;
	queen_route_request(req, NULL);
	fuzz_settle();
	if (fuzz_answers != 1)
	{
		fprintf(stderr, "%s %s was answered %d times\n", http_method_str(route->method),
				req->path, fuzz_answers);
		abort();
	}
	MemoryContextSwitchTo(old);
	return 0;
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void) argc;
	(void) argv;
	(void) queen_uuid_parse(QUEEN_DEFAULT_TENANT, &queen_listener_tenant);
	return 0;
}
