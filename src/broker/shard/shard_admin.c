/*-------------------------------------------------------------------------
 *
 * shard_admin.c
 *	  The operations on queues and on the broker itself that a shard runs
 *	  between bundles: the health check (a round trip to the database),
 *	  configure and delete queue, and the administration requests (the
 *	  core's admin.c, which answers them as JSON).  Each is a row of the
 *	  operation table (ops.c): a run that calls the core and a render of
 *	  what it returned.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "shard.h"
#include "admin.h"
#include "configure.h"
#include "render.h"

/*
 * The extension is dropped while the broker serves: 503 with why, as a
 * push gets, rather than the error of the statement that would fail.
 */
static bool
queen_op_extension_missing(QueenOpCall *call)
{
	if (queen_extension_installed())
		return false;
	call->status = 503;
	call->problem = "extension queen is not installed in the broker's database";
	return true;
}

/* GET /health: a catalog read in a transaction, so the database answers. */
void *
queen_op_health_run(QueenOpCall *call)
{
	(void) call;
	return (void *) (queen_extension_installed() ? "" : "extension queen is not installed");
}

int
queen_op_health_render(QueenOpCall *call, void *result, StringInfo out)
{
	const char *problem = (const char *) result;

	(void) call;
	queen_health_json(out, true, problem[0] != '\0' ? problem : NULL);
	return problem[0] != '\0' ? 503 : 200;
}

/* The database did not answer: unhealthy, and why. */
int
queen_op_health_fail(QueenOpCall *call, const char *message, StringInfo out)
{
	(void) call;
	queen_health_json(out, false, message);
	return 503;
}

/* POST /api/v1/configure: the body is parsed by the core, which says what it refused. */
void *
queen_op_configure_run(QueenOpCall *call)
{
	const QueenArgsText *a = (const QueenArgsText *) call->args;
	QueenCfgResult *res = palloc0(sizeof(QueenCfgResult));
	QueenCfgError err;

	if (queen_op_extension_missing(call))
		return NULL;
	if (!queen_configure(&call->tenant, a->text.data, a->text.len, res, &err))
	{
		call->problem = err.message;
		call->invalid = err.invalid;
		return NULL;
	}
	return res;
}

int
queen_op_configure_render(QueenOpCall *call, void *result, StringInfo out)
{
	(void) call;
	queen_render_configured(out, (const QueenCfgResult *) result);
	return 200;
}

/* DELETE /api/v1/resources/queues/:queue: deleted whether or not it existed. */
void *
queen_op_delete_queue_run(QueenOpCall *call)
{
	const QueenArgsText *a = (const QueenArgsText *) call->args;
	char	   *queue = pnstrdup(a->text.data, a->text.len);
	bool	   *existed = palloc(sizeof(bool));
	QueenCfgError err;

	if (queen_op_extension_missing(call))
		return NULL;
	if (!queen_delete_queue(&call->tenant, queue, existed, &err))
	{
		call->problem = err.message;
		call->invalid = err.invalid;
		return NULL;
	}
	return existed;
}

int
queen_op_delete_queue_render(QueenOpCall *call, void *result, StringInfo out)
{
	const QueenArgsText *a = (const QueenArgsText *) call->args;

	appendStringInfoString(out, "{\"deleted\":true,\"queue\":");
	queen_render_text(out, pnstrdup(a->text.data, a->text.len));
	appendStringInfo(out, ",\"existed\":%s}", *(bool *) result ? "true" : "false");
	return 200;
}

/* A discovery that matched no queue may match this one now. */
void
queen_op_catalog_changed(QueenOpCall *call)
{
	queen_wake_catalog(call->op == QUEEN_CONTROL_DELETE_QUEUE);
}

/* An empty text is none: no administration argument may be empty. */
static const char *
queen_admin_text(QueenWireText t)
{
	return t.len == 0 ? NULL : queen_wire_cstring(t);
}

/*
 * An administration request: the core's answer, or 404 with what was not
 * found.  A write's marks (a seek's queue) wake parked pops after COMMIT.
 */
void *
queen_op_admin_run(QueenOpCall *call)
{
	const QueenArgsAdmin *m = (const QueenArgsAdmin *) call->args;
	QueenAdminArgs a;
	QueenAdminAnswer *ans = palloc0(sizeof(QueenAdminAnswer));

	if (queen_op_extension_missing(call))
		return NULL;
	memset(&a, 0, sizeof(a));
	a.text[0] = queen_admin_text(m->text0);
	a.text[1] = queen_admin_text(m->text1);
	a.text[2] = queen_admin_text(m->text2);
	a.text[3] = queen_admin_text(m->text3);
	a.text[4] = queen_admin_text(m->text4);
	a.limit = m->limit;
	a.offset = m->offset;
	a.number = m->number;
	a.flag = m->flag != 0;
	a.from = (TimestampTz) m->from;
	a.to = (TimestampTz) m->to;
	/* a read from a listener sent as a write, or the reverse, is refused */
	if (queen_admin_writes(m->request) != (call->op == QUEEN_CONTROL_ADMIN_WRITE))
	{
		call->status = 500;
		call->problem = "malformed administration request";
		return NULL;
	}
	queen_admin_run(m->request, &call->tenant, &a, ans);
	if (ans->writes)
		queen_consume_wake_released();
	if (ans->json == NULL)
	{
		call->status = 404;
		call->problem = ans->not_found;
		return NULL;
	}
	return ans;
}

int
queen_op_admin_render(QueenOpCall *call, void *result, StringInfo out)
{
	(void) call;
	appendStringInfoString(out, ((QueenAdminAnswer *) result)->json);
	return 200;
}
