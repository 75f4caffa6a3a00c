/*-------------------------------------------------------------------------
 *
 * answers.c
 *	  The shape of each listing's elements in Queen's answers, as data:
 *	  for every key, the kind of its value and where it sits in the core's
 *	  result (render.c renders any of them with one walker).  A listing's
 *	  new key is a row here; the keys stay in Queen's order.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "render.h"
#include "streams.h"
#include "traces.h"

/* GET /api/v1/dlq: one dead letter */
static const QueenRenderField queen_dlq_fields[] = {
	QUEEN_RENDER_FIELD(QueenDlqEntry, id, "id", QUEEN_RENDER_UUID),
	QUEEN_RENDER_FIELD(QueenDlqEntry, message_id, "messageId", QUEEN_RENDER_UUID),
	QUEEN_RENDER_FIELD(QueenDlqEntry, partition_id, "partitionId", QUEEN_RENDER_UUID),
	QUEEN_RENDER_FIELD(QueenDlqEntry, transaction_id, "transactionId", QUEEN_RENDER_TEXT),
	QUEEN_RENDER_FIELD(QueenDlqEntry, consumer_group, "consumerGroup", QUEEN_RENDER_TEXT),
	QUEEN_RENDER_FIELD(QueenDlqEntry, error, "errorMessage", QUEEN_RENDER_TEXT),
	QUEEN_RENDER_FIELD(QueenDlqEntry, retry_count, "retryCount", QUEEN_RENDER_I32),
	QUEEN_RENDER_FIELD(QueenDlqEntry, created_at, "originalCreatedAt", QUEEN_RENDER_TIME),
	QUEEN_RENDER_FIELD(QueenDlqEntry, failed_at, "movedToDlqAt", QUEEN_RENDER_TIME),
	QUEEN_RENDER_FIELD(QueenDlqEntry, queue, "queueName", QUEEN_RENDER_TEXT),
	QUEEN_RENDER_FIELD(QueenDlqEntry, namespace_name, "namespace", QUEEN_RENDER_TEXT),
	QUEEN_RENDER_FIELD(QueenDlqEntry, task, "task", QUEEN_RENDER_TEXT),
	QUEEN_RENDER_FIELD(QueenDlqEntry, partition, "partitionName", QUEEN_RENDER_TEXT),
	/* the snapshot is JSON text already */
	QUEEN_RENDER_FIELD(QueenDlqEntry, payload, "data", QUEEN_RENDER_JSON),
};

/* GET /api/v1/traces/:partitionId/:transactionId: one trace of the message */
static const QueenRenderField queen_trace_fields[] = {
	QUEEN_RENDER_FIELD(QueenTrace, id, "id", QUEEN_RENDER_UUID),
	QUEEN_RENDER_FIELD(QueenTrace, event_type, "event_type", QUEEN_RENDER_TEXT),
	QUEEN_RENDER_FIELD(QueenTrace, data, "data", QUEEN_RENDER_JSON),
	QUEEN_RENDER_FIELD(QueenTrace, consumer_group, "consumer_group", QUEEN_RENDER_TEXT),
	QUEEN_RENDER_FIELD(QueenTrace, worker_id, "worker_id", QUEEN_RENDER_TEXT),
	QUEEN_RENDER_FIELD(QueenTrace, created_at, "created_at", QUEEN_RENDER_TIME),
	QUEEN_RENDER_FIELD(QueenTrace, names, "trace_names", QUEEN_RENDER_TEXTS),
};

/*
 * GET /api/v1/traces/by-name/:traceName: one trace, with its message's
 * address (the payload is not read: always null).
 */
static const QueenRenderField queen_trace_by_name_fields[] = {
	QUEEN_RENDER_FIELD(QueenTrace, id, "id", QUEEN_RENDER_UUID),
	QUEEN_RENDER_FIELD(QueenTrace, transaction_id, "transaction_id", QUEEN_RENDER_TEXT),
	QUEEN_RENDER_FIELD(QueenTrace, partition_id, "partition_id", QUEEN_RENDER_UUID),
	QUEEN_RENDER_FIELD(QueenTrace, event_type, "event_type", QUEEN_RENDER_TEXT),
	QUEEN_RENDER_FIELD(QueenTrace, data, "data", QUEEN_RENDER_JSON),
	QUEEN_RENDER_FIELD(QueenTrace, consumer_group, "consumer_group", QUEEN_RENDER_TEXT),
	QUEEN_RENDER_FIELD(QueenTrace, worker_id, "worker_id", QUEEN_RENDER_TEXT),
	QUEEN_RENDER_FIELD(QueenTrace, created_at, "created_at", QUEEN_RENDER_TIME),
	QUEEN_RENDER_FIELD(QueenTrace, queue, "queue_name", QUEEN_RENDER_TEXT),
	QUEEN_RENDER_FIELD(QueenTrace, partition, "partition_name", QUEEN_RENDER_TEXT),
	QUEEN_RENDER_FIELD(QueenTrace, id, "message_payload", QUEEN_RENDER_NULL),
	QUEEN_RENDER_FIELD(QueenTrace, names, "trace_names", QUEEN_RENDER_TEXTS),
};

/* GET /api/v1/traces/names: one name */
static const QueenRenderField queen_trace_name_fields[] = {
	QUEEN_RENDER_FIELD(QueenTraceName, name, "trace_name", QUEEN_RENDER_TEXT),
	QUEEN_RENDER_FIELD(QueenTraceName, traces, "trace_count", QUEEN_RENDER_I64),
	QUEEN_RENDER_FIELD(QueenTraceName, messages, "message_count", QUEEN_RENDER_I64),
	QUEEN_RENDER_FIELD(QueenTraceName, last_seen, "last_seen", QUEEN_RENDER_TIME),
};

/* POST /streams/v1/state/get: one state row */
static const QueenRenderField queen_state_row_fields[] = {
	QUEEN_RENDER_FIELD(QueenStateRow, key, "key", QUEEN_RENDER_TEXT),
	QUEEN_RENDER_FIELD(QueenStateRow, value, "value", QUEEN_RENDER_JSON),
	QUEEN_RENDER_FIELD(QueenStateRow, updated_at, "updated_at", QUEEN_RENDER_TIME),
};

const QueenRenderShape queen_answer_dlq_entry = QUEEN_RENDER_SHAPE(queen_dlq_fields);
const QueenRenderShape queen_answer_trace = QUEEN_RENDER_SHAPE(queen_trace_fields);
const QueenRenderShape queen_answer_trace_by_name = QUEEN_RENDER_SHAPE(queen_trace_by_name_fields);
const QueenRenderShape queen_answer_trace_name = QUEEN_RENDER_SHAPE(queen_trace_name_fields);
const QueenRenderShape queen_answer_state_row = QUEEN_RENDER_SHAPE(queen_state_row_fields);
