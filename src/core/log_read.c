/*-------------------------------------------------------------------------
 *
 * log_read.c
 *	  Reading the log: a partition's id, the segment covering an offset,
 *	  and the decoding and checking of stored segments, for queen.read, the
 *	  duplicate's original-id lookup and the claim.
 *
 * Reads walk the primary key: one backward step to the segment covering
 * the first offset, then forward.  Segments are fetched through a cursor
 * so a large partition is never materialised, and every segment is checked
 * while it is decoded: a blob that does not decompress, does not end on a
 * frame boundary, or holds a different number of frames than its offsets
 * say, is reported as damaged rather than skipped.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "queen.h"
#include "codec.h"
#include "log_read.h"
#include "spi.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

static const char *const sql_partition_id =
"SELECT p.id FROM queen.log_partitions p"
"  JOIN queen.queues q ON q.id = p.queue_id"
" WHERE q.tenant_id = $1 AND q.name = $2 AND p.name = $3";

static const char *const sql_segments_from =
"SELECT s.base_offset, s.end_offset, s.created_at, s.blob"
"  FROM queen.log_segments s"
" WHERE s.partition_id = $1"
"   AND s.base_offset >= COALESCE("
"         (SELECT c.base_offset FROM queen.log_segments c"
"           WHERE c.partition_id = $1 AND c.base_offset <= $2"
"           ORDER BY c.base_offset DESC LIMIT 1), $2)"
" ORDER BY s.base_offset";

/* Backward step to the greatest base <= off, kept only if it covers off. */
static const char *const sql_segment_at =
"SELECT c.base_offset, c.end_offset, c.created_at, c.blob FROM ("
"        SELECT base_offset, end_offset, created_at, blob FROM queen.log_segments"
"         WHERE partition_id = $1 AND base_offset <= $2"
"         ORDER BY base_offset DESC LIMIT 1) c"
" WHERE c.end_offset >= $2";

static SPIPlanPtr queen_partition_id_plan = NULL;
static SPIPlanPtr queen_segments_from_plan = NULL;
static SPIPlanPtr queen_segment_at_plan = NULL;

/*
 * The id of a partition by name, in the caller's snapshot; false when it
 * does not exist (queues and partitions appear with their first push).
 * Between SPI_connect and SPI_finish.
 */
bool
queen_log_partition(const pg_uuid_t *tenant, const char *queue,
					const char *partition, pg_uuid_t *pid)
{
	Oid			types[3] = {UUIDOID, TEXTOID, TEXTOID};
	Datum		values[3];
	SPIPlanPtr	plan = queen_plan_once(&queen_partition_id_plan, sql_partition_id,
									   3, types, false);

	values[0] = UUIDPGetDatum(tenant);
	values[1] = CStringGetTextDatum(queue);
	values[2] = CStringGetTextDatum(partition);
	if (SPI_execute_plan(plan, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "queen: partition lookup failed");
	if (SPI_processed == 0)
		return false;
	queen_get_uuid(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, pid);
	SPI_freetuptable(SPI_tuptable);
	return true;
}

/*
 * Fetch the segment covering offset of partition pid.  Returns false when
 * no segment covers it (retained away, a gap, or past the tail).  The blob
 * is copied into the caller's memory context.
 */
bool
queen_segment_at(const pg_uuid_t *pid, int64 offset, QueenStoredSegment *out)
{
	MemoryContext out_cxt = CurrentMemoryContext;
	Oid			types[2] = {UUIDOID, INT8OID};
	Datum		values[2];
	bool		found = false;
	SPIPlanPtr	plan;

	queen_spi_connect();
	plan = queen_plan_once(&queen_segment_at_plan, sql_segment_at, 2, types, false);
	values[0] = UUIDPGetDatum(pid);
	values[1] = Int64GetDatum(offset);
	/* A fresh snapshot: the original may have been committed after our caller's began. */
	if (SPI_execute_plan(plan, values, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "queen: covering-segment lookup failed");
	if (SPI_processed == 1)
	{
		HeapTuple	tuple = SPI_tuptable->vals[0];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		Datum		blob;
		MemoryContext old;

		out->base_offset = queen_get_int64(tuple, desc, 1);
		out->end_offset = queen_get_int64(tuple, desc, 2);
		out->created_at = DatumGetTimestampTz(SPI_getbinval(tuple, desc, 3, &isnull));
		blob = SPI_getbinval(tuple, desc, 4, &isnull);
		old = MemoryContextSwitchTo(out_cxt);
		out->blob = DatumGetByteaPCopy(blob);
		MemoryContextSwitchTo(old);
		found = true;
	}
	SPI_finish();
	return found;
}

/* ----------------------------------------------------------------
 *		The frames of one segment
 * ----------------------------------------------------------------
 */

/* Inflate a stored segment; the problem if it does not decompress. */
const char *
queen_segment_frames_open(QueenSegmentFrames *sf, int64 base, int64 end,
						  TimestampTz created_at, bytea *blob)
{
	sf->base = base;
	sf->end = end;
	sf->created_at = created_at;
	sf->pos = 0;
	sf->next = base;
	initStringInfo(&sf->raw);
	return queen_decompress(VARDATA_ANY(blob), VARSIZE_ANY_EXHDR(blob), &sf->raw);
}

/* Decode the frame at sf->next and step past it; the problem if it cannot. */
const char *
queen_segment_frames_next(QueenSegmentFrames *sf, QueenFrame *frame)
{
	const char *problem = queen_frame_decode(sf->raw.data, sf->raw.len, &sf->pos, frame);

	if (problem == NULL)
		sf->next++;
	return problem;
}

/* Once every offset is decoded: the frames must end exactly there. */
static const char *
queen_segment_frames_rest(const QueenSegmentFrames *sf)
{
	if (sf->pos != (size_t) sf->raw.len)
		return "more frames than the segment's offsets cover";
	return NULL;
}

/* ----------------------------------------------------------------
 *		The reader over a range
 * ----------------------------------------------------------------
 */

void
queen_log_open(QueenLogReader *r, const pg_uuid_t *pid, int64 from, int64 upto,
			   int64 limit, bool fresh_snapshot)
{
	Oid			types[2] = {UUIDOID, INT8OID};
	Datum		values[2];
	SPIPlanPtr	plan = queen_plan_once(&queen_segments_from_plan, sql_segments_from,
									   2, types, true);

	memset(r, 0, sizeof(*r));
	r->position = from;
	r->from = from;
	r->upto = upto;
	r->left = limit;
	/* Decoded buffers live per segment, not per read. */
	r->seg_cxt = AllocSetContextCreate(CurrentMemoryContext, "queen log segment",
									   ALLOCSET_DEFAULT_SIZES);
	values[0] = UUIDPGetDatum(pid);
	values[1] = Int64GetDatum(from);
	r->portal = SPI_cursor_open(NULL, plan, values, NULL, !fresh_snapshot);
}

/* End the read on a damaged segment. */
static bool
queen_log_damaged(QueenLogReader *r, const char *problem)
{
	r->problem = problem;
	r->problem_base = r->seg.base;
	r->left = 0;
	return false;
}

/*
 * Inflate the next segment that reaches from (true), or say the range is
 * over (false, problem set if that segment is damaged).
 */
static bool
queen_log_next_segment(QueenLogReader *r)
{
	for (;;)
	{
		HeapTuple	tuple;
		TupleDesc	desc;
		bool		isnull;
		int64		base;
		int64		end;
		MemoryContext old;
		const char *problem;

		if (r->row >= r->nbatch)
		{
			if (r->batch != NULL)
				SPI_freetuptable(r->batch);
			r->batch = NULL;
			/* Fetch few rows at a time: each carries a whole segment blob. */
			SPI_cursor_fetch(r->portal, true, 8);
			r->batch = SPI_tuptable;
			r->nbatch = SPI_processed;
			r->row = 0;
			if (r->nbatch == 0)
				return false;
		}
		tuple = r->batch->vals[r->row];
		desc = r->batch->tupdesc;
		r->row++;
		base = DatumGetInt64(SPI_getbinval(tuple, desc, 1, &isnull));
		end = DatumGetInt64(SPI_getbinval(tuple, desc, 2, &isnull));
		if (end < r->from)
			continue;			/* a segment before the range */
		if (base > r->upto)
			return false;
		r->position = Max(base, r->from);
		MemoryContextReset(r->seg_cxt);
		old = MemoryContextSwitchTo(r->seg_cxt);
		problem = queen_segment_frames_open(&r->seg, base, end,
											DatumGetTimestampTz(SPI_getbinval(tuple, desc, 3, &isnull)),
											DatumGetByteaPP(SPI_getbinval(tuple, desc, 4, &isnull)));
		MemoryContextSwitchTo(old);
		if (problem != NULL)
			return queen_log_damaged(r, problem);
		r->in_segment = true;
		return true;
	}
}

/*
 * The next message of the range: true with msg filled, or false at the end
 * (r->problem says whether a damaged segment ended it).  A segment walked
 * to its end is checked for trailing frames on the call after its last
 * message, even when the limit was reached with that message.
 */
bool
queen_log_next(QueenLogReader *r, QueenLogMessage *msg)
{
	for (;;)
	{
		const char *problem;

		if (r->in_segment && r->seg.next > r->seg.end)
		{
			problem = queen_segment_frames_rest(&r->seg);
			if (problem != NULL)
				return queen_log_damaged(r, problem);
			r->in_segment = false;
		}
		if (r->left <= 0)
			return false;
		if (!r->in_segment)
		{
			if (!queen_log_next_segment(r))
				return false;
			continue;
		}
		if (r->seg.next > r->upto)
			return false;
		msg->offset = r->seg.next;
		problem = queen_segment_frames_next(&r->seg, &msg->frame);
		if (problem != NULL)
			return queen_log_damaged(r, r->seg.pos == (size_t) r->seg.raw.len ?
									 "fewer frames than the segment's offsets cover" :
									 problem);
		if (msg->offset < r->from)
			continue;
		msg->created_at = r->seg.created_at;
		msg->segment_base = r->seg.base;
		r->position = msg->offset;
		r->left--;
		return true;
	}
}

void
queen_log_close(QueenLogReader *r)
{
	if (r->batch != NULL)
		SPI_freetuptable(r->batch);
	r->batch = NULL;
	SPI_cursor_close(r->portal);
	MemoryContextDelete(r->seg_cxt);
}

/* ----------------------------------------------------------------
 *		The duplicate's original
 * ----------------------------------------------------------------
 */

/* Originals this process could not read (damaged segments), for the metric. */
uint64		queen_damaged_originals = 0;

/*
 * The message id of the frame at offset of partition pid, and its segment's
 * created_at.  False when the covering segment is gone; an ERROR when it is
 * there but damaged, since a stored segment that cannot be read is not a
 * condition to paper over.
 */
bool
queen_resolve_message(const pg_uuid_t *pid, int64 offset,
					  pg_uuid_t *message_id, TimestampTz *created_at)
{
	QueenStoredSegment stored;
	QueenSegmentFrames sf;
	QueenFrame	frame;
	const char *problem;

	if (!queen_segment_at(pid, offset, &stored))
		return false;

	problem = queen_segment_frames_open(&sf, stored.base_offset, stored.end_offset,
										stored.created_at, stored.blob);
	while (problem == NULL && sf.next <= offset)
		problem = queen_segment_frames_next(&sf, &frame);
	if (problem != NULL)
	{
		/*
		 * One damaged segment must not fail the push that merely names it
		 * as an original (and every partition sharing that transaction):
		 * the duplicate is reported with the zero id, as for an original
		 * retained away, and the damage is said loudly.
		 */
		char		pidtext[UUID_LEN * 2 + 5];

		queen_uuid_format(pid, pidtext);
		ereport(WARNING,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("queen: the segment at offset " INT64_FORMAT " of partition %s cannot be read: %s",
						stored.base_offset, pidtext, problem),
				 errdetail("A duplicate of offset " INT64_FORMAT " is reported with the zero message id.",
						   offset)));
		queen_damaged_originals++;
		return false;
	}

	*message_id = frame.message_id;
	if (created_at)
		*created_at = stored.created_at;
	pfree(sf.raw.data);
	pfree(stored.blob);
	return true;
}
