/*-------------------------------------------------------------------------
 *
 * configure_sql.c
 *	  queen.configure_queue_v1 and queen.delete_queue_v1: queue
 *	  configuration and deletion (configure.c) as SQL functions; and
 *	  queen.current_tenant, the tenant they and every SQL reader act for.
 *
 * They answer what the HTTP routes answer, as jsonb, in the caller's
 * transaction; what the routes answer 400 raises here, with an SQLSTATE.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "configure.h"

#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

PG_FUNCTION_INFO_V1(queen_configure_queue_v1);
PG_FUNCTION_INFO_V1(queen_delete_queue_v1);
PG_FUNCTION_INFO_V1(queen_current_tenant_sql);

static const pg_uuid_t *
queen_cfg_tenant_arg(FunctionCallInfo fcinfo, int argno)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("tenant must not be NULL")));
	return PG_GETARG_UUID_P(argno);
}

/*
 * queen.configure_queue_v1(p_body jsonb, p_tenant uuid): the HTTP contract
 * from SQL.  A refused body raises 22023 with the response's error as the
 * message and its invalid key in the detail; otherwise the echo as jsonb.
 */
Datum
queen_configure_queue_v1(PG_FUNCTION_ARGS)
{
	Jsonb	   *body;
	const pg_uuid_t *tenant;
	StringInfoData text;
	StringInfoData out;
	QueenCfgError err;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("configure body must not be NULL")));
	body = PG_GETARG_JSONB_P(0);
	tenant = queen_cfg_tenant_arg(fcinfo, 1);

	initStringInfo(&text);
	JsonbToCString(&text, &body->root, VARSIZE(body));
	initStringInfo(&out);
	if (queen_configure_body(tenant, text.data, text.len, &out, &err) != 200)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s", err.message),
				 err.invalid != NULL ? errdetail("invalid: %s", err.invalid) : 0));
	PG_RETURN_DATUM(DirectFunctionCall1(jsonb_in, CStringGetDatum(out.data)));
}

/* queen.delete_queue_v1(p_queue text, p_tenant uuid) */
Datum
queen_delete_queue_v1(PG_FUNCTION_ARGS)
{
	const pg_uuid_t *tenant;
	char	   *queue;
	StringInfoData out;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("queue name must not be NULL")));
	queue = text_to_cstring(PG_GETARG_TEXT_PP(0));
	/* the names a push accepts, and the same errors (22023) for the others */
	queen_check_queue_name(queue, strlen(queue));
	tenant = queen_cfg_tenant_arg(fcinfo, 1);

	initStringInfo(&out);
	(void) queen_delete_queue(tenant, queue, &out);
	PG_RETURN_DATUM(DirectFunctionCall1(jsonb_in, CStringGetDatum(out.data)));
}

/*
 * queen.current_tenant() -> uuid: the tenant the session's SQL door acts
 * for (queen.tenant), for the SQL-language readers of queen--1.0.sql.
 */
Datum
queen_current_tenant_sql(PG_FUNCTION_ARGS)
{
	pg_uuid_t  *tenant = palloc(sizeof(pg_uuid_t));

	(void) fcinfo;
	queen_session_tenant(tenant);
	PG_RETURN_UUID_P(tenant);
}
