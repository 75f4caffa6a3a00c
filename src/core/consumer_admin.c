/*-------------------------------------------------------------------------
 *
 * consumer_admin.c
 *	  Consumer groups as an operator sees them: forgetting a group
 *	  (DELETE /api/v1/consumer-groups/:group, queen.delete_consumer_group),
 *	  listing a queue's dead letters (GET /api/v1/dlq), and the groups that
 *	  lag most (the broker's /metrics samples them).
 *
 * A group's deletion removes its cursors, leases and wildcard scan floors,
 * so its next pop starts again as a first contact.  The consumer rows are
 * locked in the global order (ascending partition id) before they are
 * removed, so a deletion waits for an ack in flight on the same rows
 * instead of deadlocking with it; the floors and subscriptions go after
 * them, and a pop never waits for a consumer row, so it cannot hold one of
 * those while waiting for the deletion.  Nothing here locks a partition or
 * queue row.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "queen.h"
#include "admin.h"
#include "validate.h"
#include "codec.h"
#include "crypto.h"
#include "consume.h"
#include "spi.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"

static const char *const sql_delete_cursors =
"WITH v AS (SELECT c.partition_id, c.consumer_group FROM queen.log_consumers c"
"             JOIN queen.log_partitions p ON p.id = c.partition_id"
"             JOIN queen.queues q ON q.id = p.queue_id"
"            WHERE q.tenant_id = $1 AND c.consumer_group = $2"
"              AND ($3::text IS NULL OR q.name = $3)"
"            ORDER BY c.partition_id, c.consumer_group FOR UPDATE OF c)"
"DELETE FROM queen.log_consumers c USING v"
" WHERE c.partition_id = v.partition_id AND c.consumer_group = v.consumer_group";

/*
 * The group's wildcard scan floor (claim_scan.c) goes with its cursors: a
 * first contact may start behind the floor, which would hide the
 * partitions written before it from the group's wildcard pops.
 */
static const char *const sql_delete_watermarks =
"DELETE FROM queen.consumer_watermarks w USING queen.queues q"
" WHERE w.queue_id = q.id AND q.tenant_id = $1 AND w.consumer_group = $2"
"   AND ($3::text IS NULL OR q.name = $3)";

/*
 * A group's remembered subscriptions: on one queue, or (no queue named)
 * every one of the tenant's, the namespace and task ones included.
 */
static const char *const sql_delete_metadata =
"DELETE FROM queen.consumer_groups_metadata m"
" WHERE m.tenant_id = $1 AND m.consumer_group = $2"
"   AND ($3::text IS NULL OR m.queue_id IN"
"         (SELECT q.id FROM queen.queues q WHERE q.tenant_id = $1 AND q.name = $3))";

/*
 * The filter of GET /api/v1/dlq.  Dead letters are found through their
 * partition, which holds the queue: a partition is never removed while its
 * queue lives, and a queue's deletion removes its dead letters.
 */
#define QUEEN_DLQ_FROM \
"  FROM queen.log_dlq d" \
"  JOIN queen.log_partitions p ON p.id = d.partition_id" \
"  JOIN queen.queues q ON q.id = p.queue_id" \
" WHERE q.tenant_id = $1 AND q.name = $2" \
"   AND ($3::text IS NULL OR d.consumer_group = $3)" \
"   AND ($4::text IS NULL OR p.name = $4)" \
"   AND d.failed_at >= $5 AND d.failed_at <= $6"

static const char *const sql_dlq_count =
"SELECT count(*)" QUEEN_DLQ_FROM;

static const char *const sql_dlq_page =
"SELECT d.id, d.message_id, d.partition_id, p.name, q.name, q.namespace, q.task,"
"       d.consumer_group, d.transaction_id, d.error, d.payload::text,"
"       d.retry_count, d.\"offset\", d.created_at, d.failed_at"
QUEEN_DLQ_FROM
" ORDER BY d.failed_at DESC, d.id DESC"
" LIMIT $7 OFFSET $8";

static SPIPlanPtr queen_delete_cursors_plan = NULL;
static SPIPlanPtr queen_delete_watermarks_plan = NULL;
static SPIPlanPtr queen_delete_metadata_plan = NULL;
static SPIPlanPtr queen_dlq_count_plan = NULL;
static SPIPlanPtr queen_dlq_page_plan = NULL;

int64
queen_delete_consumer_group(const pg_uuid_t *tenant, const char *group,
							const char *queue, bool delete_metadata)
{
	Oid			types[3] = {UUIDOID, TEXTOID, TEXTOID};
	Datum		values[3];
	char		nulls[3] = {' ', ' ', ' '};
	int64		removed;

	queen_check_name("consumer group", group, strlen(group), QUEEN_MAX_NAME_BYTES);
	if (queue != NULL)
		queen_check_queue_name(queue, strlen(queue));

	queen_spi_connect();
	/* the queues whose figures keep the group count theirs again */
	queen_stats_mark_group(tenant, group, queue);
	values[0] = UUIDPGetDatum(tenant);
	values[1] = CStringGetTextDatum(group);
	values[2] = queue != NULL ? CStringGetTextDatum(queue) : (Datum) 0;
	nulls[2] = queue != NULL ? ' ' : 'n';
	if (SPI_execute_plan(queen_plan_once(&queen_delete_cursors_plan, sql_delete_cursors,
										 3, types, false),
						 values, nulls, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "queen: consumer group deletion failed");
	removed = (int64) SPI_processed;
	if (SPI_execute_plan(queen_plan_once(&queen_delete_watermarks_plan, sql_delete_watermarks,
										 3, types, false),
						 values, nulls, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "queen: consumer group watermark deletion failed");
	if (delete_metadata &&
		SPI_execute_plan(queen_plan_once(&queen_delete_metadata_plan, sql_delete_metadata,
										 3, types, false),
						 values, nulls, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "queen: consumer group metadata deletion failed");
	SPI_finish();
	return removed;
}

/* sql_dlq_page's SELECT list, member by member. */
static const uint16 queen_dlq_offsets[] = {
	offsetof(QueenDlqEntry, id), offsetof(QueenDlqEntry, message_id),
	offsetof(QueenDlqEntry, partition_id), offsetof(QueenDlqEntry, partition),
	offsetof(QueenDlqEntry, queue), offsetof(QueenDlqEntry, namespace_name),
	offsetof(QueenDlqEntry, task), offsetof(QueenDlqEntry, consumer_group),
	offsetof(QueenDlqEntry, transaction_id), offsetof(QueenDlqEntry, error),
	offsetof(QueenDlqEntry, payload), offsetof(QueenDlqEntry, retry_count),
	offsetof(QueenDlqEntry, offset), offsetof(QueenDlqEntry, created_at),
	offsetof(QueenDlqEntry, failed_at)
};

int64
queen_dlq_list(const QueenDlqFilter *filter, QueenDlqEntry **entries, int *nentries)
{
	MemoryContext out_cxt = CurrentMemoryContext;
	Oid			types[8] = {UUIDOID, TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID,
		TIMESTAMPTZOID, INT8OID, INT8OID};
	Datum		values[8];
	char		nulls[8] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	int64		total;
	int			i;

	if (filter->queue == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("queue is required to list dead letters")));
	if (filter->limit < 0 || filter->offset < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("limit and offset must not be negative")));
	*entries = NULL;
	*nentries = 0;

	queen_spi_connect();
	values[0] = UUIDPGetDatum(&filter->tenant);
	values[1] = CStringGetTextDatum(filter->queue);
	values[2] = filter->group ? CStringGetTextDatum(filter->group) : (Datum) 0;
	nulls[2] = filter->group ? ' ' : 'n';
	values[3] = filter->partition ? CStringGetTextDatum(filter->partition) : (Datum) 0;
	nulls[3] = filter->partition ? ' ' : 'n';
	values[4] = TimestampTzGetDatum(filter->from);
	values[5] = TimestampTzGetDatum(filter->to);
	values[6] = Int64GetDatum((int64) filter->limit);
	values[7] = Int64GetDatum(filter->offset);

	if (queen_spi_listing(queen_plan_once(&queen_dlq_count_plan, sql_dlq_count, 6, types, false),
						  queen_plan_once(&queen_dlq_page_plan, sql_dlq_page, 8, types, false),
						  values, nulls, filter->limit, &total))
		*entries = queen_spi_copy_rows(queen_dlq_offsets, lengthof(queen_dlq_offsets),
									   sizeof(QueenDlqEntry), out_cxt, nentries);
	SPI_finish();
	/* dead letters of an encrypted queue are kept sealed, and listed opened */
	for (i = 0; i < *nentries; i++)
		(*entries)[i].payload = queen_crypto_open_text((*entries)[i].payload);
	return total;
}

static SPIPlanPtr queen_lag_plan = NULL;

/*
 * The (queue, consumer group) pairs that lag most, as queen.consumer_lag
 * counts them, most messages pending first: up to limit + 1 rows, so the
 * caller can tell that there were more.  Read from queen.group_stats after
 * a refresh of the figures (stats_refresh.c), which reads only what
 * changed: the view itself reads every partition and cursor.  In the
 * caller's transaction and memory.
 */
int
queen_consumer_lag_top(int limit, QueenLagRow **rows)
{
	MemoryContext out_cxt = CurrentMemoryContext;
	Oid			types[1] = {INT8OID};
	Datum		values[1];
	uint64		r;
	int64		queues;
	int64		groups;
	int			n;

	queen_stats_refresh_run(false, &queues, &groups);
	queen_spi_connect();
	values[0] = Int64GetDatum((int64) limit + 1);
	queen_exec(queen_plan_once(&queen_lag_plan,
							   "SELECT q.tenant_id, q.name, g.consumer_group, g.partitions_pending, g.pending"
							   "  FROM queen.group_stats g JOIN queen.queues q ON q.id = g.queue_id"
							   " ORDER BY g.pending DESC, q.name, g.consumer_group"
							   " LIMIT $1",
							   1, types, false),
			   values, SPI_OK_SELECT, "sampling the consumer lag");
	n = (int) SPI_processed;
	*rows = MemoryContextAllocZero(out_cxt, sizeof(QueenLagRow) * Max(n, 1));
	for (r = 0; r < SPI_processed; r++)
	{
		HeapTuple	t = SPI_tuptable->vals[r];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		QueenLagRow *row = &(*rows)[r];

		queen_get_uuid(t, desc, 1, &row->tenant);
		row->queue = MemoryContextStrdup(out_cxt, SPI_getvalue(t, desc, 2));
		row->group = MemoryContextStrdup(out_cxt, SPI_getvalue(t, desc, 3));
		row->partitions = queen_get_int64(t, desc, 4);
		row->messages = queen_get_int64(t, desc, 5);
	}
	SPI_finish();
	return n;
}
