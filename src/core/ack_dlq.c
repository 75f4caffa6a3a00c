/*-------------------------------------------------------------------------
 *
 * ack_dlq.c
 *	  Dead-letter filing: the message an ack's decision files (ack.c) goes
 *	  to log_dlq with a snapshot read from its segment, in the same
 *	  transaction as the cursor's move past it, so there is no moment in
 *	  which the message is neither in the log's reach nor in the DLQ.  And
 *	  the question an ack sent again asks: was its message filed already?
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "ack_int.h"
#include "validate.h"
#include "codec.h"
#include "log_read.h"
#include "spi.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

#define QUEEN_DLQ_DEFAULT_ERROR "Retries exhausted"

static const char *const sql_dlq_insert =
"INSERT INTO queen.log_dlq (partition_id, consumer_group, \"offset\", message_id,"
"                           transaction_id, payload, error, retry_count, created_at)"
" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, COALESCE($9, now()))";

static const char *const sql_ack_filed =
"SELECT 1 FROM queen.log_dlq WHERE partition_id = $1 AND consumer_group = $2 AND \"offset\" = $3"
" LIMIT 1";

static SPIPlanPtr queen_dlq_insert_plan = NULL;
static SPIPlanPtr queen_ack_filed_plan = NULL;

/* A stored payload as the snapshot's jsonb; an empty payload has none. */
static Datum
queen_dlq_payload(const QueenFrame *frame, int64 off, bool *isnull)
{
	char	   *problem;

	*isnull = frame->payload_len == 0;
	if (*isnull)
		return (Datum) 0;
	problem = queen_json_syntax_problem(frame->payload, frame->payload_len);
	if (problem != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("queen: the message at offset " INT64_FORMAT " cannot be dead-lettered: its payload is not JSON: %s",
						off, problem)));
	return DirectFunctionCall1(jsonb_in,
							   CStringGetDatum(pnstrdup(frame->payload, frame->payload_len)));
}

/*
 * The item whose message is the head signal's, for its transactionId and,
 * when it says one, the error text.
 */
static const QueenAckItem *
queen_ack_head_item(const QueenAckGroup *g)
{
	const QueenAckItem *head = NULL;
	int			i;

	for (i = 0; i < g->n; i++)
		if (g->eff[i] == g->sig_off &&
			(head == NULL || (head->error == NULL && g->items[i]->error != NULL)))
			head = g->items[i];
	return head;
}

/*
 * The error a dead letter records: the head's own, else the first nack's of
 * the group, else Queen's default.
 */
static const char *
queen_dlq_error(const QueenAckGroup *g, const QueenAckItem *head)
{
	int			i;

	if (head->error != NULL)
		return head->error;
	for (i = 0; i < g->n; i++)
		if (g->items[i]->status != QUEEN_ACK_COMPLETED && g->items[i]->error != NULL)
			return g->items[i]->error;
	return QUEEN_DLQ_DEFAULT_ERROR;
}

/*
 * File the head signal's message in log_dlq with a snapshot read from its
 * segment.  A segment retained away since the delivery leaves only what the
 * ack knows (the transactionId), and the item is told so.  A damaged
 * segment is an error: filing a message we cannot read would lose it.
 */
void
queen_dlq_file(QueenAckGroup *g)
{
	const QueenAckItem *head = queen_ack_head_item(g);
	const char *error = queen_dlq_error(g, head);
	QueenStoredSegment stored;
	pg_uuid_t	message_id;
	Datum		values[9];
	bool		isnull;
	char		nulls[9] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	Oid			types[9] = {UUIDOID, TEXTOID, INT8OID, UUIDOID, TEXTOID, JSONBOID,
		TEXTOID, INT4OID, TIMESTAMPTZOID};

	values[0] = UUIDPGetDatum(g->pid);
	values[1] = CStringGetTextDatum(g->group);
	values[2] = Int64GetDatum(g->filed);
	if (queen_segment_at(g->pid, g->filed, &stored))
	{
		QueenSegmentFrames sf;
		QueenFrame	frame;
		const char *problem;

		problem = queen_segment_frames_open(&sf, stored.base_offset, stored.end_offset,
											stored.created_at, stored.blob);
		while (problem == NULL && sf.next <= g->filed)
			problem = queen_segment_frames_next(&sf, &frame);
		if (problem != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("queen: the segment at offset " INT64_FORMAT " cannot be read to dead-letter offset " INT64_FORMAT ": %s",
							stored.base_offset, g->filed, problem)));
		message_id = frame.message_id;
		values[4] = PointerGetDatum(cstring_to_text_with_len(frame.txn, frame.txn_len));
		values[5] = queen_dlq_payload(&frame, g->filed, &isnull);
		nulls[5] = isnull ? 'n' : ' ';
		values[8] = TimestampTzGetDatum(stored.created_at);
	}
	else
	{
		memset(&message_id, 0, sizeof(message_id));
		values[4] = PointerGetDatum(cstring_to_text_with_len(head->transaction_id,
															 head->txn_len));
		nulls[5] = 'n';
		nulls[8] = 'n';
		g->filing_note = "dead-lettered without a snapshot: the message's segment is no longer stored";
	}
	values[3] = UUIDPGetDatum(&message_id);
	values[6] = CStringGetTextDatum(error);
	values[7] = Int32GetDatum(g->retry_count);
	if (SPI_execute_plan(queen_plan_once(&queen_dlq_insert_plan, sql_dlq_insert, 9, types, false),
						 values, nulls, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "queen: dead-letter insert failed");
}

/* Was the message at offset filed as this group's dead letter? */
bool
queen_ack_filed(const QueenAckGroup *g, int64 offset)
{
	Oid			types[3] = {UUIDOID, TEXTOID, INT8OID};
	Datum		values[3];

	values[0] = UUIDPGetDatum(g->pid);
	values[1] = CStringGetTextDatum(g->group);
	values[2] = Int64GetDatum(offset);
	queen_exec(queen_plan_once(&queen_ack_filed_plan, sql_ack_filed, 3, types, false),
			   values, SPI_OK_SELECT, "dead-letter lookup");
	return SPI_processed > 0;
}
