/*-------------------------------------------------------------------------
 *
 * log_sql.c
 *	  SQL entry points of the log: queen.log_push_one_v1,
 *	  queen.log_push_multi_v1, queen.log_segment_at_v1 and
 *	  queen.dedup_index.
 *
 * These keep Queen's signatures and JSON results exactly, so tools written
 * against Queen's stored procedures work unchanged.  They only translate
 * arguments to QueenSegment and verdicts to jsonb; all the work is in
 * log_write.c and log_read.c.  The jsonb result is built from JsonbValues
 * directly: nothing on this path parses JSON text.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "queen.h"
#include "dedup_runs.h"
#include "log_read.h"
#include "log_write.h"
#include "wait.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/numeric.h"

PG_FUNCTION_INFO_V1(queen_log_push_one_v1);
PG_FUNCTION_INFO_V1(queen_log_push_multi_v1);
PG_FUNCTION_INFO_V1(queen_log_segment_at_v1);
PG_FUNCTION_INFO_V1(queen_dedup_index);

/* ----------------------------------------------------------------
 *		jsonb rendering
 * ----------------------------------------------------------------
 */

/* A key (WJB_KEY) or a string value (WJB_VALUE). */
static void
queen_jsonb_text(JsonbParseState **state, JsonbIteratorToken token, const char *s)
{
	JsonbValue	v;

	v.type = jbvString;
	v.val.string.val = (char *) s;
	v.val.string.len = strlen(s);
	pushJsonbValue(state, token, &v);
}

static void
queen_jsonb_int(JsonbParseState **state, int64 value)
{
	JsonbValue	v;

	v.type = jbvNumeric;
	v.val.numeric = int64_to_numeric(value);
	pushJsonbValue(state, WJB_VALUE, &v);
}

/* Queen's createdAt: UTC, microseconds, "YYYY-MM-DDTHH:MI:SS.ffffffZ". */
static void
queen_format_created_at(TimestampTz ts, char *out, size_t outlen)
{
	struct pg_tm tm;
	fsec_t		fsec;

	if (timestamp2tm(ts, NULL, &tm, &fsec, NULL, NULL) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp out of range")));
	snprintf(out, outlen, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ",
			 tm.tm_year, tm.tm_mon, tm.tm_mday,
			 tm.tm_hour, tm.tm_min, tm.tm_sec, (int) fsec);
}

/* Push one segment's verdict as a jsonb object (inside an array or alone). */
static JsonbValue *
queen_push_verdict(JsonbParseState **state, const QueenSegment *seg)
{
	pushJsonbValue(state, WJB_BEGIN_OBJECT, NULL);
	queen_jsonb_text(state, WJB_KEY, "status");
	if (seg->status == QUEEN_SEGMENT_QUEUED)
	{
		/* pushJsonbValue keeps the pointer, so the text must outlive this frame */
		char	   *created = palloc(64);

		queen_jsonb_text(state, WJB_VALUE, "queued");
		queen_jsonb_text(state, WJB_KEY, "baseOffset");
		queen_jsonb_int(state, seg->base_offset);
		queen_format_created_at(seg->created_at, created, 64);
		queen_jsonb_text(state, WJB_KEY, "createdAt");
		queen_jsonb_text(state, WJB_VALUE, created);
	}
	else
	{
		int			i;

		Assert(seg->status == QUEEN_SEGMENT_DUPLICATE);
		queen_jsonb_text(state, WJB_VALUE, "duplicate");
		queen_jsonb_text(state, WJB_KEY, "dups");
		pushJsonbValue(state, WJB_BEGIN_ARRAY, NULL);
		for (i = 0; i < seg->ndups; i++)
		{
			pushJsonbValue(state, WJB_BEGIN_OBJECT, NULL);
			queen_jsonb_text(state, WJB_KEY, "i");
			queen_jsonb_int(state, seg->dups[i].index);
			queen_jsonb_text(state, WJB_KEY, "off");
			queen_jsonb_int(state, seg->dups[i].offset);
			pushJsonbValue(state, WJB_END_OBJECT, NULL);
		}
		pushJsonbValue(state, WJB_END_ARRAY, NULL);
	}
	return pushJsonbValue(state, WJB_END_OBJECT, NULL);
}

/*
 * Refuse the call if the allocator found plaintext frames for an encrypted
 * queue (it wrote nothing of that segment; the error undoes the rest).
 */
static void
queen_refuse_unsealed(const QueenSegment *segs, int n)
{
	int			i;

	for (i = 0; i < n; i++)
		if (segs[i].status == QUEEN_SEGMENT_RESEAL)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("segment %d is for a queue with encryptionEnabled, and its frames are not all sealed",
							i + 1),
					 errdetail("Queue \"%s\" stores payloads sealed in Queen's envelope with frame flag 4 (docs/FORMAT.md); queen.push seals them itself.",
							   segs[i].queue != NULL ? segs[i].queue : "(by partition id)")));
}

/* ----------------------------------------------------------------
 *		Argument helpers
 * ----------------------------------------------------------------
 */

/* QUEEN_DEFAULT_TENANT as bytes */
static const pg_uuid_t queen_default_tenant = {{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}};

/* Elements of a one-dimensional array argument; a NULL array has none. */
static int
queen_array_elems(FunctionCallInfo fcinfo, int argno, const char *argname,
				  Datum **elems, bool **nulls)
{
	ArrayType  *arr;
	Oid			elemtype;
	int16		typlen;
	bool		typbyval;
	char		typalign;
	int			n;

	*elems = NULL;
	*nulls = NULL;
	if (PG_ARGISNULL(argno))
		return 0;
	arr = PG_GETARG_ARRAYTYPE_P(argno);
	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("%s must be a one-dimensional array", argname)));
	elemtype = ARR_ELEMTYPE(arr);
	get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
	deconstruct_array(arr, elemtype, typlen, typbyval, typalign,
					  elems, nulls, &n);
	return n;
}

static void
queen_require_element(bool isnull, const char *what, int ordinal)
{
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s of segment %d is NULL", what, ordinal)));
}

/* ----------------------------------------------------------------
 *		queen.log_push_one_v1
 * ----------------------------------------------------------------
 */

/*
 * log_push_one_v1(p_queue, p_partition, p_msg_count, p_hashes, p_verified,
 *				   p_blob, p_pid, p_window, p_tenant) -> jsonb
 *
 * With p_pid the partition is taken as resolved (the caller holds or will
 * take its lock); without it the queue and partition are resolved, and
 * provisioned when missing, by name.
 */
Datum
queen_log_push_one_v1(PG_FUNCTION_ARGS)
{
	QueenSegment seg;
	JsonbParseState *state = NULL;

	memset(&seg, 0, sizeof(seg));
	seg.queue = PG_ARGISNULL(0) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(0));
	seg.partition = PG_ARGISNULL(1) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(1));
	queen_require_element(PG_ARGISNULL(2), "msg_count", 1);
	seg.msg_count = PG_GETARG_INT32(2);
	seg.hashes = PG_ARGISNULL(3) ? NULL : PG_GETARG_BYTEA_PP(3);
	seg.verified = PG_ARGISNULL(4) ? -1 : PG_GETARG_INT64(4);
	seg.blob = PG_ARGISNULL(5) ? NULL : PG_GETARG_BYTEA_PP(5);
	if (!PG_ARGISNULL(7))
	{
		seg.window_set = true;
		seg.window_in = PG_GETARG_INT32(7);
	}
	seg.untrusted = true;
	if (PG_ARGISNULL(8))
		seg.tenant = queen_default_tenant;
	else
		seg.tenant = *PG_GETARG_UUID_P(8);

	if (PG_ARGISNULL(6))
		queen_push_bundle(&seg, 1);
	else
		queen_push_one_resolved(&seg, PG_GETARG_UUID_P(6));
	queen_refuse_unsealed(&seg, 1);
	/* a caller that names the partition only by id wakes nobody (no name to hash) */
	if (seg.queue != NULL)
		queen_wait_mark(&seg.tenant, seg.queue, strlen(seg.queue));

	PG_RETURN_JSONB_P(JsonbValueToJsonb(queen_push_verdict(&state, &seg)));
}

/* ----------------------------------------------------------------
 *		queen.log_push_multi_v1
 * ----------------------------------------------------------------
 */

/*
 * log_push_multi_v1(p_queues, p_partitions, p_msg_counts, p_hashes,
 *					 p_verified, p_blobs, p_tenants) -> jsonb array
 *
 * One transaction for N partitions' segments; verdicts in input order.
 */
Datum
queen_log_push_multi_v1(PG_FUNCTION_ARGS)
{
	static const char *const argnames[] = {
		"p_queues", "p_partitions", "p_msg_counts", "p_hashes",
		"p_verified", "p_blobs", "p_tenants"
	};
	Datum	   *elems[7];
	bool	   *nulls[7];
	int			counts[7];
	int			n;
	int			i;
	QueenSegment *segs;
	JsonbParseState *state = NULL;
	JsonbValue *result;

	for (i = 0; i < 7; i++)
		counts[i] = queen_array_elems(fcinfo, i, argnames[i], &elems[i], &nulls[i]);

	/*
	 * Alignment guard: a silent misalignment would demux wrong verdicts.  No
	 * queues means no segments, and Queen answers [] whatever else came.
	 */
	n = counts[0];
	for (i = 1; i < 6 && n > 0; i++)
	{
		if (PG_ARGISNULL(i))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("%s must not be NULL", argnames[i]),
					 errdetail("Every array holds exactly one element per segment.")));
		if (counts[i] != n)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("log_push_multi_v1 arrays are misaligned: %d queues but %d elements in %s",
							n, counts[i], argnames[i]),
					 errdetail("Every array holds exactly one element per segment.")));
	}
	if (n > 0 && !PG_ARGISNULL(6) && counts[6] != n)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("log_push_multi_v1 arrays are misaligned: %d queues but %d tenants",
						n, counts[6]),
				 errdetail("p_tenants is NULL (every segment in the default tenant) or one tenant per segment.")));

	segs = palloc0(sizeof(QueenSegment) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		QueenSegment *seg = &segs[i];

		seg->queue = nulls[0][i] ? NULL : TextDatumGetCString(elems[0][i]);
		seg->partition = nulls[1][i] ? NULL : TextDatumGetCString(elems[1][i]);
		queen_require_element(nulls[2][i], "msg_count", i + 1);
		seg->msg_count = DatumGetInt32(elems[2][i]);
		seg->hashes = nulls[3][i] ? NULL : DatumGetByteaPP(elems[3][i]);
		seg->verified = nulls[4][i] ? -1 : DatumGetInt64(elems[4][i]);
		seg->blob = nulls[5][i] ? NULL : DatumGetByteaPP(elems[5][i]);
		seg->untrusted = true;
		if (PG_ARGISNULL(6))
			seg->tenant = queen_default_tenant;
		else
		{
			queen_require_element(nulls[6][i], "tenant", i + 1);
			seg->tenant = *DatumGetUUIDP(elems[6][i]);
		}
	}

	queen_push_bundle(segs, n);
	queen_refuse_unsealed(segs, n);
	for (i = 0; i < n; i++)
		if (segs[i].queue != NULL)
			queen_wait_mark(&segs[i].tenant, segs[i].queue, strlen(segs[i].queue));

	result = pushJsonbValue(&state, WJB_BEGIN_ARRAY, NULL);
	for (i = 0; i < n; i++)
		queen_push_verdict(&state, &segs[i]);
	result = pushJsonbValue(&state, WJB_END_ARRAY, NULL);

	PG_RETURN_JSONB_P(JsonbValueToJsonb(result));
}

/* ----------------------------------------------------------------
 *		queen.log_segment_at_v1
 * ----------------------------------------------------------------
 */

/*
 * log_segment_at_v1(p_pid, p_off) -> (r_base, r_end, r_created, r_blob)
 *
 * The segment covering p_off, or no row when none does.
 */
Datum
queen_log_segment_at_v1(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	QueenStoredSegment stored;

	InitMaterializedSRF(fcinfo, 0);
	if (queen_segment_at(PG_GETARG_UUID_P(0), PG_GETARG_INT64(1), &stored))
	{
		Datum		values[4];
		bool		nulls[4] = {false, false, false, false};

		values[0] = Int64GetDatum(stored.base_offset);
		values[1] = Int64GetDatum(stored.end_offset);
		values[2] = TimestampTzGetDatum(stored.created_at);
		values[3] = PointerGetDatum(stored.blob);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * queen.dedup_index(p_min_hashes integer, p_max_partitions integer): sort
 * what was pushed since into dedup runs (dedup_runs.c), for a database that
 * runs no broker (pg_cron, or any scheduler); the broker's maintenance
 * worker calls the same function every second.
 */
Datum
queen_dedup_index(PG_FUNCTION_ARGS)
{
	int32		min_hashes = PG_GETARG_INT32(0);
	int32		max_partitions = PG_GETARG_INT32(1);
	TimestampTz since = DT_NOBEGIN;

	if (min_hashes < 1 || max_partitions < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("p_min_hashes and p_max_partitions must be at least 1")));
	PG_RETURN_INT64(queen_dedup_runs_index(min_hashes, max_partitions, &since));
}
