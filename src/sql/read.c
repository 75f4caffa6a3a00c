/*-------------------------------------------------------------------------
 *
 * read.c
 *	  queen.read: the plain ordered read of one partition, a thin SQL
 *	  function over the log reader (log_read.c).
 *
 * This is not consumption (no cursor, no lease): it proves what was stored,
 * offset by offset, and is what an operator uses to look inside a
 * partition.  The reader finds, decodes and checks the segments; this file
 * names the partition, turns each message into a row, and reports damage
 * with the queue and partition it was found in.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "queen.h"
#include "validate.h"
#include "crypto.h"
#include "json_walk.h"
#include "log_read.h"
#include "payload.h"
#include "spi.h"

#include "common/jsonapi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/uuid.h"

PG_FUNCTION_INFO_V1(queen_read);
PG_FUNCTION_INFO_V1(queen_read_partition);

/* What the error context says while a message is being decoded. */
typedef struct QueenReadPosition
{
	const char *queue;
	const char *partition;
	QueenLogReader *reader;
} QueenReadPosition;

static void
queen_read_error_context(void *arg)
{
	QueenReadPosition *pos = (QueenReadPosition *) arg;

	errcontext("reading offset " INT64_FORMAT " of queue \"%s\" partition \"%s\"",
			   pos->reader->position, pos->queue, pos->partition);
}

static void
pg_attribute_noreturn()
queen_read_corrupted(const QueenReadPosition *pos, int64 base, const char *problem)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("segment at offset " INT64_FORMAT " of queue \"%s\" partition \"%s\" is malformed: %s",
					base, pos->queue, pos->partition, problem)));
}

/* ----------------------------------------------------------------
 *		A stored payload as jsonb, in one parse
 * ----------------------------------------------------------------
 */

/*
 * jsonb_in's semantic actions, so that the one lexer pass that checks a
 * stored payload also builds its value: the result is jsonb_in's, bit for
 * bit.  Used only for text that cannot reach a limit of numeric or jsonb
 * (see queen_payload_jsonb), so nothing here raises: a syntax error is
 * returned by the parser, and the caller reports it as damage.
 */
typedef struct QueenJsonbBuild
{
	JsonbParseState *state;
	JsonbValue *res;
} QueenJsonbBuild;

static void
queen_jsonb_push(QueenJsonbBuild *b, JsonbIteratorToken token, JsonbValue *v)
{
	b->res = pushJsonbValue(&b->state, token, v);
}

/* A container opens (queen_json_opens_object says which) or closes. */
static void
queen_jsonb_open(void *arg)
{
	queen_jsonb_push(arg, queen_json_opens_object() ? WJB_BEGIN_OBJECT : WJB_BEGIN_ARRAY, NULL);
}

static void
queen_jsonb_close(void *arg)
{
	QueenJsonbBuild *b = (QueenJsonbBuild *) arg;

	queen_jsonb_push(b, b->state->contVal.type == jbvArray ? WJB_END_ARRAY : WJB_END_OBJECT, NULL);
}

static void
queen_jsonb_field(void *arg, char *fname, bool isnull)
{
	JsonbValue	v;

	(void) isnull;
	v.type = jbvString;
	v.val.string.len = strlen(fname);
	v.val.string.val = fname;
	queen_jsonb_push(arg, WJB_KEY, &v);
}

static void
queen_jsonb_scalar(void *arg, char *token, JsonTokenType tokentype)
{
	QueenJsonbBuild *b = (QueenJsonbBuild *) arg;
	JsonbValue	v;

	switch (tokentype)
	{
		case JSON_TOKEN_STRING:
			v.type = jbvString;
			v.val.string.len = strlen(token);
			v.val.string.val = token;
			break;
		case JSON_TOKEN_NUMBER:
			v.type = jbvNumeric;
			v.val.numeric = DatumGetNumeric(DirectFunctionCall3(numeric_in,
																CStringGetDatum(token),
																ObjectIdGetDatum(InvalidOid),
																Int32GetDatum(-1)));
			break;
		case JSON_TOKEN_TRUE:
		case JSON_TOKEN_FALSE:
			v.type = jbvBool;
			v.val.boolean = tokentype == JSON_TOKEN_TRUE;
			break;
		case JSON_TOKEN_NULL:
			v.type = jbvNull;
			break;
		default:
			elog(ERROR, "queen: unexpected JSON token type %d", (int) tokentype);
	}

	if (b->state == NULL)
	{
		/* a scalar document is stored as a one-element raw-scalar array */
		JsonbValue	va;

		va.type = jbvArray;
		va.val.array.rawScalar = true;
		va.val.array.nElems = 1;
		queen_jsonb_push(b, WJB_BEGIN_ARRAY, &va);
		queen_jsonb_push(b, WJB_ELEM, &v);
		queen_jsonb_push(b, WJB_END_ARRAY, NULL);
	}
	else
		queen_jsonb_push(b, b->state->contVal.type == jbvArray ? WJB_ELEM : WJB_VALUE, &v);
}

/*
 * The jsonb of a stored payload, or NULL with *problem set when it is not
 * JSON (not UTF-8, or a syntax error): one lexer pass that checks and builds.
 *
 * Where one pass could raise a different error than the check-then-build
 * it replaces (a number numeric cannot hold, text long enough to reach a
 * jsonb limit, a database encoding other than UTF-8, whose lexer treats
 * escapes differently), the payload takes the old two passes instead, so
 * the outcome is the same for every payload.
 */
Datum
queen_payload_jsonb(const char *payload, size_t len, char **problem)
{
	JsonSemAction sem;
	QueenJsonbBuild build;

	if (GetDatabaseEncoding() != PG_UTF8 || len >= QUEEN_JSONB_SAFE_TEXT ||
		queen_json_numbers_need_check(payload, len))
	{
		*problem = queen_json_syntax_problem(payload, len);
		if (*problem != NULL)
			return (Datum) 0;
		return DirectFunctionCall1(jsonb_in, CStringGetDatum(pnstrdup(payload, len)));
	}

	*problem = NULL;
	if (!pg_verify_mbstr(PG_UTF8, payload, (int) len, true))
	{
		*problem = pstrdup("payload is not valid UTF-8");
		return (Datum) 0;
	}
	memset(&build, 0, sizeof(build));
	queen_json_sem(&sem, &build, queen_jsonb_open, queen_jsonb_close, queen_jsonb_field,
				   NULL, NULL, queen_jsonb_scalar);
	*problem = queen_json_walk(payload, len, &sem);
	if (*problem != NULL)
		return (Datum) 0;
	return JsonbPGetDatum(JsonbValueToJsonb(build.res));
}

/* ----------------------------------------------------------------
 *		queen.read
 * ----------------------------------------------------------------
 */

/* One message as a row of the result. */
static void
queen_read_row(ReturnSetInfo *rsinfo, const QueenReadPosition *pos,
			   const QueenLogMessage *msg)
{
	Datum		values[5];
	bool		nulls[5] = {false, false, false, false, false};
	pg_uuid_t  *mid = palloc(sizeof(pg_uuid_t));
	char	   *problem;
	QueenFrame	frame = msg->frame;

	/* an encrypted queue's payload, opened (in the row's memory) */
	queen_frame_open(&frame);
	*mid = msg->frame.message_id;
	values[0] = Int64GetDatum(msg->offset);
	values[1] = UUIDPGetDatum(mid);
	if (!pg_verifymbstr(msg->frame.txn, msg->frame.txn_len, true))
		queen_read_corrupted(pos, msg->segment_base, "transactionId is not valid UTF-8");
	values[2] = PointerGetDatum(cstring_to_text_with_len(msg->frame.txn, msg->frame.txn_len));
	values[3] = queen_payload_jsonb(frame.payload, frame.payload_len, &problem);
	if (problem != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("message at offset " INT64_FORMAT " of queue \"%s\" partition \"%s\" has a payload that is not JSON: %s",
						msg->offset, pos->queue, pos->partition, problem)));
	values[4] = TimestampTzGetDatum(msg->created_at);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/*
 * The rows of up to left messages of partition pid from offset from, into
 * the result; inside SPI.
 */
static void
queen_read_rows(ReturnSetInfo *rsinfo, QueenReadPosition *pos, const pg_uuid_t *pid,
				int64 from, int64 left)
{
	QueenLogReader reader;
	QueenLogMessage msg;
	ErrorContextCallback errcb;
	MemoryContext row_cxt;
	MemoryContext old;

	/* from here on, an error says where the read was, the cursor's open included */
	reader.position = from;
	pos->reader = &reader;
	errcb.callback = queen_read_error_context;
	errcb.arg = pos;
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;
	queen_log_open(&reader, pid, from, PG_INT64_MAX, left, false);

	/* A row's payload and values live until it is in the tuplestore. */
	row_cxt = AllocSetContextCreate(CurrentMemoryContext, "queen.read row",
									ALLOCSET_DEFAULT_SIZES);
	while (queen_log_next(&reader, &msg))
	{
		old = MemoryContextSwitchTo(row_cxt);
		queen_read_row(rsinfo, pos, &msg);
		MemoryContextSwitchTo(old);
		MemoryContextReset(row_cxt);
	}
	if (reader.problem != NULL)
		queen_read_corrupted(pos, reader.problem_base, reader.problem);

	error_context_stack = errcb.previous;
	queen_log_close(&reader);
	queen_crypto_report_unopened();
}

/*
 * queen.read(queue, partition, from_offset, max_messages)
 *	  -> (log_offset, message_id, transaction_id, payload, created_at)
 */
Datum
queen_read(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	QueenReadPosition pos;
	pg_uuid_t	tenant;
	pg_uuid_t	pid;
	int64		from;
	int64		left;

	InitMaterializedSRF(fcinfo, 0);

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("queue must not be NULL")));
	pos.queue = text_to_cstring(PG_GETARG_TEXT_PP(0));
	pos.partition = PG_ARGISNULL(1) ? "Default" : text_to_cstring(PG_GETARG_TEXT_PP(1));
	from = PG_ARGISNULL(2) ? 0 : PG_GETARG_INT64(2);
	left = PG_ARGISNULL(3) ? 100 : PG_GETARG_INT32(3);
	queen_check_queue_name(pos.queue, strlen(pos.queue));
	queen_check_partition_name(pos.partition, strlen(pos.partition));
	if (from < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("from_offset must not be negative")));
	if (left < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_messages must not be negative")));
	if (left == 0)
		return (Datum) 0;

	queen_session_tenant(&tenant);
	queen_spi_connect();
	if (!queen_log_partition(&tenant, pos.queue, pos.partition, &pid))
	{
		/* Queues and partitions appear with their first push: nothing yet. */
		SPI_finish();
		return (Datum) 0;
	}
	queen_read_rows(rsinfo, &pos, &pid, from, left);
	SPI_finish();
	return (Datum) 0;
}

/*
 * queen._read_partition(partition_id, from_offset, max_messages): the same
 * read by the partition's id, whatever its tenant (the broker's message
 * routes, which checked the tenant).  A partition that does not exist has
 * no messages.
 */
Datum
queen_read_partition(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	QueenReadPosition pos;
	pg_uuid_t	pid;
	int64		from = PG_GETARG_INT64(1);
	int64		left = PG_GETARG_INT32(2);

	InitMaterializedSRF(fcinfo, 0);
	memcpy(pid.data, PG_GETARG_UUID_P(0)->data, UUID_LEN);
	if (from < 0 || left <= 0)
		return (Datum) 0;
	pos.queue = psprintf("(partition %s)", DatumGetCString(DirectFunctionCall1(uuid_out,
																				 PG_GETARG_DATUM(0))));
	pos.partition = "";
	queen_spi_connect();
	queen_read_rows(rsinfo, &pos, &pid, from, left);
	SPI_finish();
	return (Datum) 0;
}
