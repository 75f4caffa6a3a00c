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

#include "configure_parse.h"
#include "validate.h"

#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"
#include "utils/uuid.h"

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

/* The jsonb the SQL functions answer: keys pushed in order, then values. */
static void
queen_jb_key(JsonbParseState **st, const char *key)
{
	JsonbValue	v;

	v.type = jbvString;
	v.val.string.val = (char *) key;
	v.val.string.len = strlen(key);
	(void) pushJsonbValue(st, WJB_KEY, &v);
}

static void
queen_jb_text(JsonbParseState **st, const char *key, const char *text)
{
	JsonbValue	v;

	queen_jb_key(st, key);
	if (text == NULL)
		v.type = jbvNull;
	else
	{
		v.type = jbvString;
		v.val.string.val = (char *) text;
		v.val.string.len = strlen(text);
	}
	(void) pushJsonbValue(st, WJB_VALUE, &v);
}

static void
queen_jb_scalar(JsonbParseState **st, const char *key, QueenOptionType type, int32 n)
{
	JsonbValue	v;

	queen_jb_key(st, key);
	if (type == QUEEN_OPT_BOOL)
	{
		v.type = jbvBool;
		v.val.boolean = n != 0;
	}
	else
	{
		v.type = jbvNumeric;
		v.val.numeric = int64_to_numeric(n);
	}
	(void) pushJsonbValue(st, WJB_VALUE, &v);
}

/* What the configure route answers, as jsonb: the effective row. */
static Jsonb *
queen_cfg_jsonb(const QueenCfgResult *res)
{
	JsonbParseState *st = NULL;
	JsonbValue *top;
	int			i;

	(void) pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
	queen_jb_scalar(&st, "configured", QUEEN_OPT_BOOL, 1);
	queen_jb_text(&st, "queueId", DatumGetCString(DirectFunctionCall1(uuid_out,
																	 UUIDPGetDatum(&res->id))));
	queen_jb_text(&st, "partitionId", NULL);
	queen_jb_text(&st, "queue", res->queue);
	queen_jb_text(&st, "namespace", res->label[0]);
	queen_jb_text(&st, "task", res->label[1]);
	queen_jb_text(&st, "storage", "segments");
	queen_jb_key(&st, "options");
	(void) pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
	for (i = 0; i < QUEEN_NOPTIONS; i++)
	{
		if (queen_options[i].type == QUEEN_OPT_TEXT)
			queen_jb_text(&st, queen_options[i].json, res->sval[i]);
		else
			queen_jb_scalar(&st, queen_options[i].json, queen_options[i].type, res->ival[i]);
	}
	(void) pushJsonbValue(&st, WJB_END_OBJECT, NULL);
	top = pushJsonbValue(&st, WJB_END_OBJECT, NULL);
	return JsonbValueToJsonb(top);
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
	QueenCfgResult res;
	QueenCfgError err;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("configure body must not be NULL")));
	body = PG_GETARG_JSONB_P(0);
	tenant = queen_cfg_tenant_arg(fcinfo, 1);

	initStringInfo(&text);
	JsonbToCString(&text, &body->root, VARSIZE(body));
	if (!queen_configure(tenant, text.data, text.len, &res, &err))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s", err.message),
				 err.invalid != NULL ? errdetail("invalid: %s", err.invalid) : 0));
	PG_RETURN_JSONB_P(queen_cfg_jsonb(&res));
}

/* queen.delete_queue_v1(p_queue text, p_tenant uuid) */
Datum
queen_delete_queue_v1(PG_FUNCTION_ARGS)
{
	const pg_uuid_t *tenant;
	char	   *queue;
	bool		existed;
	QueenCfgError err;
	JsonbParseState *st = NULL;
	JsonbValue *top;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("queue name must not be NULL")));
	queue = text_to_cstring(PG_GETARG_TEXT_PP(0));
	/* the names a push accepts, and the same errors (22023) for the others */
	queen_check_queue_name(queue, strlen(queue));
	tenant = queen_cfg_tenant_arg(fcinfo, 1);

	if (!queen_delete_queue(tenant, queue, &existed, &err))
		ereport(ERROR,
				(errcode(ERRCODE_CHARACTER_NOT_IN_REPERTOIRE),
				 errmsg("%s", err.message)));
	(void) pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
	queen_jb_scalar(&st, "deleted", QUEEN_OPT_BOOL, 1);
	queen_jb_text(&st, "queue", queue);
	queen_jb_scalar(&st, "existed", QUEEN_OPT_BOOL, existed);
	top = pushJsonbValue(&st, WJB_END_OBJECT, NULL);
	PG_RETURN_JSONB_P(JsonbValueToJsonb(top));
}

/*
 * queen.current_tenant() -> uuid: the tenant the session's SQL door acts
 * for (queen.tenant), for the SQL-language readers of queen--1.2.sql.
 */
Datum
queen_current_tenant_sql(PG_FUNCTION_ARGS)
{
	pg_uuid_t  *tenant = palloc(sizeof(pg_uuid_t));

	(void) fcinfo;
	queen_session_tenant(tenant);
	PG_RETURN_UUID_P(tenant);
}
