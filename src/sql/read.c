/*-------------------------------------------------------------------------
 *
 * read.c
 *	  queen.read: the plain ordered read of one partition, decoding segments
 *	  in C.
 *
 * This is not consumption (no cursor, no lease): it proves what was stored,
 * offset by offset, and is what an operator uses to look inside a
 * partition.  Reads walk the primary key: one backward step to the segment
 * covering from_offset, then forward.  Segments are fetched through a cursor
 * so a large partition is never materialised, and every segment is checked
 * while it is decoded: a blob that does not decompress, does not end on a
 * frame boundary, or holds a different number of frames than its offsets
 * say, is reported as corrupted rather than skipped.
 *
 *-------------------------------------------------------------------------
 */
#include "queen.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"

PG_FUNCTION_INFO_V1(queen_read);

static SPIPlanPtr queen_read_pid_plan = NULL;
static SPIPlanPtr queen_read_segments_plan = NULL;

static const char *const sql_read_pid =
"SELECT p.id FROM queen.log_partitions p"
"  JOIN queen.queues q ON q.id = p.queue_id"
" WHERE q.tenant_id = $1 AND q.name = $2 AND p.name = $3";

static const char *const sql_read_segments =
"SELECT s.base_offset, s.end_offset, s.created_at, s.blob"
"  FROM queen.log_segments s"
" WHERE s.partition_id = $1"
"   AND s.base_offset >= COALESCE("
"         (SELECT c.base_offset FROM queen.log_segments c"
"           WHERE c.partition_id = $1 AND c.base_offset <= $2"
"           ORDER BY c.base_offset DESC LIMIT 1), $2)"
" ORDER BY s.base_offset";

/* What the error context says while a message is being decoded. */
typedef struct QueenReadPosition
{
	const char *queue;
	const char *partition;
	int64		offset;
} QueenReadPosition;

static void
queen_read_error_context(void *arg)
{
	QueenReadPosition *pos = (QueenReadPosition *) arg;

	errcontext("reading offset " INT64_FORMAT " of queue \"%s\" partition \"%s\"",
			   pos->offset, pos->queue, pos->partition);
}

static void
queen_read_corrupted(const QueenReadPosition *pos, int64 base, const char *problem)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("segment at offset " INT64_FORMAT " of queue \"%s\" partition \"%s\" is malformed: %s",
					base, pos->queue, pos->partition, problem)));
}

/*
 * Decode one stored segment and emit its frames at offsets >= from, at
 * most *left of them.
 */
static void
queen_read_segment(ReturnSetInfo *rsinfo, QueenReadPosition *pos,
				   int64 base, int64 end, TimestampTz created_at,
				   bytea *blob, int64 from, int64 *left)
{
	StringInfoData raw;
	const char *problem;
	size_t		at = 0;
	int64		offset;

	initStringInfo(&raw);
	problem = queen_decompress(VARDATA_ANY(blob), VARSIZE_ANY_EXHDR(blob), &raw);
	if (problem != NULL)
		queen_read_corrupted(pos, base, problem);

	for (offset = base; offset <= end && *left > 0; offset++)
	{
		QueenFrame	frame;

		problem = queen_frame_decode(raw.data, raw.len, &at, &frame);
		if (problem != NULL)
			queen_read_corrupted(pos, base, at == (size_t) raw.len ?
								 "fewer frames than the segment's offsets cover" : problem);
		if (offset < from)
			continue;

		{
			Datum		values[5];
			bool		nulls[5] = {false, false, false, false, false};
			pg_uuid_t  *mid = palloc(sizeof(pg_uuid_t));
			char	   *payload = pnstrdup(frame.payload, frame.payload_len);

			pos->offset = offset;
			*mid = frame.message_id;
			values[0] = Int64GetDatum(offset);
			values[1] = UUIDPGetDatum(mid);
			if (!pg_verifymbstr(frame.txn, frame.txn_len, true))
				queen_read_corrupted(pos, base, "transactionId is not valid UTF-8");
			values[2] = PointerGetDatum(cstring_to_text_with_len(frame.txn, frame.txn_len));
			problem = queen_json_syntax_problem(frame.payload, frame.payload_len);
			if (problem != NULL)
				ereport(ERROR,
						(errcode(ERRCODE_DATA_CORRUPTED),
						 errmsg("message at offset " INT64_FORMAT " of queue \"%s\" partition \"%s\" has a payload that is not JSON: %s",
								offset, pos->queue, pos->partition, problem)));
			values[3] = DirectFunctionCall1(jsonb_in, CStringGetDatum(payload));
			values[4] = TimestampTzGetDatum(created_at);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
			pfree(payload);
		}
		(*left)--;
	}

	/* A full walk must end exactly at the end of the buffer. */
	if (offset > end && at != (size_t) raw.len)
		queen_read_corrupted(pos, base, "more frames than the segment's offsets cover");
	pfree(raw.data);
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
	ErrorContextCallback errcb;
	pg_uuid_t	tenant;
	int64		from;
	int64		left;
	Datum		values[3];
	pg_uuid_t	pid;
	Portal		portal;
	MemoryContext segment_cxt;
	MemoryContext old;

	InitMaterializedSRF(fcinfo, 0);

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("queue must not be NULL")));
	pos.queue = text_to_cstring(PG_GETARG_TEXT_PP(0));
	pos.partition = PG_ARGISNULL(1) ? "Default" : text_to_cstring(PG_GETARG_TEXT_PP(1));
	from = PG_ARGISNULL(2) ? 0 : PG_GETARG_INT64(2);
	left = PG_ARGISNULL(3) ? 100 : PG_GETARG_INT32(3);
	pos.offset = from;
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
	if (queen_read_pid_plan == NULL)
	{
		Oid			types[3] = {UUIDOID, TEXTOID, TEXTOID};

		queen_read_pid_plan = queen_keep_plan(sql_read_pid, 3, types, false);
	}
	if (queen_read_segments_plan == NULL)
	{
		Oid			types[2] = {UUIDOID, INT8OID};

		queen_read_segments_plan = queen_keep_plan(sql_read_segments, 2, types, true);
	}

	values[0] = UUIDPGetDatum(&tenant);
	values[1] = CStringGetTextDatum(pos.queue);
	values[2] = CStringGetTextDatum(pos.partition);
	if (SPI_execute_plan(queen_read_pid_plan, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "queen: partition lookup failed");
	if (SPI_processed == 0)
	{
		/* Queues and partitions appear with their first push: nothing yet. */
		SPI_finish();
		return (Datum) 0;
	}
	{
		bool		isnull;

		pid = *DatumGetUUIDP(SPI_getbinval(SPI_tuptable->vals[0],
										   SPI_tuptable->tupdesc, 1, &isnull));
	}

	errcb.callback = queen_read_error_context;
	errcb.arg = &pos;
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;

	/* Decoded buffers and payloads live per segment, not per call. */
	segment_cxt = AllocSetContextCreate(CurrentMemoryContext, "queen.read segment",
										ALLOCSET_DEFAULT_SIZES);

	values[0] = UUIDPGetDatum(&pid);
	values[1] = Int64GetDatum(from);
	portal = SPI_cursor_open(NULL, queen_read_segments_plan, values, NULL, true);
	while (left > 0)
	{
		uint64		r;

		/* Fetch few rows at a time: each carries a whole segment blob. */
		SPI_cursor_fetch(portal, true, 8);
		if (SPI_processed == 0)
			break;
		for (r = 0; r < SPI_processed && left > 0; r++)
		{
			HeapTuple	tuple = SPI_tuptable->vals[r];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			bool		isnull;
			int64		base = DatumGetInt64(SPI_getbinval(tuple, desc, 1, &isnull));
			int64		end = DatumGetInt64(SPI_getbinval(tuple, desc, 2, &isnull));
			TimestampTz created = DatumGetTimestampTz(SPI_getbinval(tuple, desc, 3, &isnull));
			Datum		blobd = SPI_getbinval(tuple, desc, 4, &isnull);
			bytea	   *blob = DatumGetByteaPP(blobd);

			if (end < from)
				continue;		/* a segment before from_offset */
			pos.offset = Max(base, from);
			old = MemoryContextSwitchTo(segment_cxt);
			queen_read_segment(rsinfo, &pos, base, end, created, blob, from, &left);
			MemoryContextSwitchTo(old);
			MemoryContextReset(segment_cxt);
			if ((Pointer) blob != DatumGetPointer(blobd))
				pfree(blob);
		}
		SPI_freetuptable(SPI_tuptable);
	}
	SPI_cursor_close(portal);

	error_context_stack = errcb.previous;
	SPI_finish();
	return (Datum) 0;
}
