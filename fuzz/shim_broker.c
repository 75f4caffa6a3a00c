/*-------------------------------------------------------------------------
 *
 * shim_broker.c
 *	  The listener's other half for the fuzz targets: what a handler hands
 *	  its parsed request to (the pending table, the shards' rings, the
 *	  long-poll queue) and the process state it reads, without shared
 *	  memory or other processes.
 *
 * The handlers, the router and every parser are the real ones; a request
 * ends here where in the broker it would leave for a shard.  Each message
 * a handler sends is checked for the shard it names, and every request a
 * handler takes on (registered, or parked as a pop) is answered 200 or 204
 * once the handler returns, as a shard would, so that the HTTP target goes
 * on to the next pipelined request.  fuzz_settle() then checks that every
 * request was answered exactly once.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <stdio.h>
#include <stdlib.h>

#include "fuzz.h"
#include "fuzz_broker.h"

#include "broker.h"
#include "listener.h"
#include "metrics.h"
#include "routes.h"
#include "maintenance/spool.h"

#include "common/jsonapi.h"
#include "mb/pg_wchar.h"
#include "storage/latch.h"

/* ----------------------------------------------------------------
 *		Process state the handlers read
 * ----------------------------------------------------------------
 */

static QueenBrokerShared fuzz_shared = {.nlisteners = 1, .nshards = 2};

QueenBrokerShared *queen_broker = &fuzz_shared;
int			queen_listener_index = 0;
QueenHttpServer *queen_listener_http = NULL;
bool		queen_listener_closing = false;
pg_uuid_t	queen_listener_tenant;
const pg_uuid_t *queen_metrics_tenant = NULL;
struct Latch *MyLatch = NULL;

void
SetLatch(Latch *latch)
{
	(void) latch;
}

void
queen_count(QueenCounter c, uint64 n)
{
	(void) c;
	(void) n;
}

void
queen_metric(StringInfo out, const char *name, const char *type, const char *help)
{
	appendStringInfo(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void
queen_metrics_render(StringInfo out)
{
	appendStringInfoString(out, "# metrics are the shards' (shared memory)\n");
}

void
queen_health_json(StringInfo out, bool connected, const char *error)
{
	appendStringInfo(out, "{\"status\":\"%s\"}", connected ? "healthy" : "unhealthy");
	(void) error;
}

bool
queen_maintenance_on(void)
{
	return false;
}

bool
queen_pop_maintenance_on(void)
{
	return false;
}

void
queen_maintenance_set(bool on, bool setting)
{
	(void) on;
	(void) setting;
}

void
queen_pop_maintenance_set(bool on)
{
	(void) on;
}

void
queen_buffers_json(StringInfo out, int shape)
{
	(void) shape;
	appendStringInfoString(out, "[]");
}

int
queen_http_busy(QueenHttpServer *srv)
{
	(void) srv;
	return 0;
}

void
queen_http_stats(QueenHttpServer *srv, QueenHttpStats *out)
{
	(void) srv;
	memset(out, 0, sizeof(*out));
}

/* Serving files from the share directory is no parser's business. */
void
queen_handle_dashboard(QueenHttpRequest *req, const QueenRouteParams *params)
{
	(void) params;
	queen_respond_error(req, 404, "not found");
}

/* ----------------------------------------------------------------
 *		Where a request leaves for a shard
 * ----------------------------------------------------------------
 */

#define FUZZ_MAX_TAKEN 64

/* Requests a handler took on and a shard would answer. */
static QueenHttpRequest *fuzz_taken[FUZZ_MAX_TAKEN];
static int	fuzz_status[FUZZ_MAX_TAKEN];
static int	fuzz_ntaken;

static void
fuzz_take(QueenHttpRequest *req, int status)
{
	int			i;

	for (i = 0; i < fuzz_ntaken; i++)
		if (fuzz_taken[i] == req)
			return;
	if (fuzz_ntaken == FUZZ_MAX_TAKEN)
		abort();
	fuzz_taken[fuzz_ntaken] = req;
	fuzz_status[fuzz_ntaken++] = status;
}

bool
queen_listener_shard_ready(int shard)
{
	if (shard < 0 || shard >= queen_broker->nshards)
	{
		fprintf(stderr, "shard %d asked for; there are %d\n", shard, queen_broker->nshards);
		abort();
	}
	return true;
}

const char *
queen_listener_unavailable(int shard)
{
	(void) queen_listener_shard_ready(shard);
	return NULL;
}

long
queen_listener_waiting(void)
{
	return 0;
}

StringInfo
queen_listener_message_new(void)
{
	return makeStringInfo();
}

void
queen_listener_send(int shard, StringInfo msg)
{
	(void) queen_listener_shard_ready(shard);
	if (msg->len <= 0)
		abort();				/* a message carries at least its header */
	pfree(msg->data);
	pfree(msg);
}

QueenPending *
queen_listener_register(QueenPendingKind kind, QueenHttpRequest *http, QueenPushRequest *push)
{
	QueenPending *p = MemoryContextAllocZero(http->mcxt, sizeof(QueenPending));

	p->kind = kind;
	p->http = http;
	p->push = push;
	fuzz_take(http, 200);
	return p;
}

QueenPending
queen_listener_take(QueenPending *p)
{
	return *p;
}

/* A pop parks, or goes to its shard: either way the shard answers it. */
QueenPopWait *
queen_pop_wait_new(QueenHttpRequest *req, const char *arg, Size arglen, int shard, int slot,
				   bool wait, int timeout_ms)
{
	(void) arg;
	(void) wait;
	/* -1: any shard (a queue's partitions); slot -1: no queue to wake for */
	if (shard != -1)
		(void) queen_listener_shard_ready(shard);
	if (arglen == 0 || slot < -1 || timeout_ms < 0)
		abort();
	fuzz_take(req, 204);
	return (QueenPopWait *) MemoryContextAllocZero(req->mcxt, 64);
}

void
queen_pop_submit(QueenPopWait *w)
{
	(void) w;
}

/*
 * After a handler: answer what it took on, as its shard would.  Returns
 * how many; answered[] is where fuzz_bodies counts each request's answers.
 */
int
fuzz_settle(void)
{
	int			n = fuzz_ntaken;
	int			i;

	fuzz_ntaken = 0;
	for (i = 0; i < n; i++)
		queen_http_respond(fuzz_taken[i], fuzz_status[i], "application/json",
						   fuzz_status[i] == 204 ? "" : "{}", fuzz_status[i] == 204 ? 0 : 2, NULL);
	return n;
}

/*
 * What the broker says is well-formed: a status it means to send (a 500
 * would be an internal failure, which no request body may cause), and a
 * JSON body that PostgreSQL's own parser accepts.
 */
void
fuzz_check_answer(int status, const char *content_type, const char *body, size_t len)
{
	JsonLexContext *lex;

	if (getenv("QUEEN_FUZZ_SHOW") != NULL)
		fprintf(stderr, "answered %d: %.*s\n", status, (int) Min(len, 300), body);
	if (status < 200 || status > 599 || status == 500)
	{
		fprintf(stderr, "answered %d: %.*s\n", status, (int) Min(len, 2000), body);
		abort();
	}
	/* 204 carries no body, whatever its headers say */
	if (status == 204 || content_type == NULL || strcmp(content_type, "application/json") != 0)
		return;
	lex = makeJsonLexContextCstringLen(unconstify(char *, body), (int) len, PG_UTF8, true);
	if (pg_parse_json(lex, &nullSemAction) != JSON_SUCCESS)
	{
		fprintf(stderr, "answered %d with a body that is not JSON: %.*s\n", status,
				(int) Min(len, 2000), body);
		abort();
	}
}
