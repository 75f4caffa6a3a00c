/*-------------------------------------------------------------------------
 *
 * log_read.h
 *	  Reading the log (log_read.c): a partition's id by name, the segment
 *	  covering an offset, the frames of a stored segment decoded and checked
 *	  one at a time, and a reader over a range of offsets.
 *
 * queen.read, the duplicate's original-id lookup and the claim all read
 * stored segments; this is the one place that decodes them, so a damaged
 * segment is recognised the same way whoever reads it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_LOG_READ_H
#define QUEEN_LOG_READ_H

#include "queen.h"
#include "codec.h"

#include "executor/spi.h"

/* The covering segment of an offset, as log_segment_at_v1 returns it. */
typedef struct QueenStoredSegment
{
	int64		base_offset;
	int64		end_offset;
	TimestampTz created_at;
	bytea	   *blob;
} QueenStoredSegment;

extern bool queen_segment_at(const pg_uuid_t *pid, int64 offset,
							 QueenStoredSegment *out);
extern bool queen_log_partition(const pg_uuid_t *tenant, const char *queue,
								const char *partition, pg_uuid_t *pid);

/*
 * The frames of one stored segment, inflated once and decoded in order.
 * Frames borrow from raw.
 */
typedef struct QueenSegmentFrames
{
	int64		base;
	int64		end;
	TimestampTz created_at;
	StringInfoData raw;			/* the inflated frames */
	size_t		pos;			/* where the frame at next starts in raw */
	int64		next;			/* the offset the next call decodes */
} QueenSegmentFrames;

extern const char *queen_segment_frames_open(QueenSegmentFrames *sf, int64 base,
											 int64 end, TimestampTz created_at,
											 bytea *blob);
extern const char *queen_segment_frames_next(QueenSegmentFrames *sf,
											 QueenFrame *frame);

/* One message of the log, as a reader yields it. */
typedef struct QueenLogMessage
{
	int64		offset;
	QueenFrame	frame;			/* borrows from the reader until its next call */
	TimestampTz created_at;		/* its segment's */
	int64		segment_base;	/* base offset of its segment */
} QueenLogMessage;

/*
 * A reader over the messages of one partition at offsets from..upto, at
 * most limit of them.  Between SPI_connect and SPI_finish.  Each segment is
 * inflated once and checked while its frames are decoded: a segment that
 * does not decompress, ends inside a frame, or holds a different number of
 * frames than its offsets say ends the read with problem set.
 */
typedef struct QueenLogReader
{
	/* where it is: the offset being read, for an error context */
	int64		position;
	/* why queen_log_next returned false, or NULL at the end of the range */
	const char *problem;
	int64		problem_base;	/* the damaged segment's base offset */

	/* private to log_read.c */
	int64		from;
	int64		upto;
	int64		left;
	Portal		portal;
	SPITupleTable *batch;
	uint64		nbatch;
	uint64		row;
	bool		in_segment;
	QueenSegmentFrames seg;
	MemoryContext seg_cxt;
} QueenLogReader;

extern void queen_log_open(QueenLogReader *r, const pg_uuid_t *pid, int64 from,
						   int64 upto, int64 limit, bool fresh_snapshot);
extern bool queen_log_next(QueenLogReader *r, QueenLogMessage *msg);
extern void queen_log_close(QueenLogReader *r);

/* The duplicate's original (bundle.c), and what could not be read of it. */
extern uint64 queen_damaged_originals;
extern bool queen_resolve_message(const pg_uuid_t *pid, int64 offset,
								  pg_uuid_t *message_id,
								  TimestampTz *created_at);

#endif							/* QUEEN_LOG_READ_H */
