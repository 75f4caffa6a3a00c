/*-------------------------------------------------------------------------
 *
 * admin_write.c
 *	  What an operator changes: a consumer group's cursors moved (seek), its
 *	  subscriptions' moment, dead letters purged, replayed or forgotten.
 *	  Each in the caller's transaction, for both doors (admin_sql.c, the
 *	  broker's administration operation).
 *
 * A seek locks the queue's partitions (FOR SHARE) and then the group's
 * consumer rows on them, each in ascending partition id (the global order,
 * as an ack or a group's deletion keeps it), then writes every partition's
 * cursor, creating the rows it lacks: the
 * end is the partition's last offset, a moment is the offset before the
 * first segment created at or after it (never below the log's start).
 * Leases go with the old cursor, so an ack under one finds no lease; the
 * group's wildcard scan floor goes too, or its pops would skip what the
 * seek made pending.  The queue is marked so parked pops try again.
 *
 * A replay pushes a dead letter's payload to its partition's tail through
 * the same items path as queen.push (push_items.c), with the transactionId
 * "dlq:<id>", and removes the dead letter in the same transaction: so a
 * second replay finds nothing (404), a crash between the two leaves one
 * of them, and a replay whose transactionId is already stored moves
 * nothing and keeps the dead letter.  The partition row is locked first
 * (FOR NO KEY UPDATE, as the push will), then the dead letter, a leaf:
 * the global order.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "admin.h"
#include "codec.h"
#include "crypto.h"
#include "push_items.h"
#include "spi.h"
#include "validate.h"
#include "wait.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"

enum
{
	QUEEN_AW_QUEUE,
	QUEEN_AW_PARTITION,
	QUEEN_AW_SEEK_PARTITIONS,
	QUEEN_AW_SEEK_LOCK,
	QUEEN_AW_SEEK,
	QUEEN_AW_SEEK_FLOOR,
	QUEEN_AW_SUBSCRIPTION,
	QUEEN_AW_SUBSCRIPTION_FLOOR,
	QUEEN_AW_PURGE,
	QUEEN_AW_REPLAY_FIND,
	QUEEN_AW_REPLAY_LOCK,
	QUEEN_AW_REPLAY_DELETE,
	QUEEN_AW_NEWEST,
	QUEEN_AW_FORGET,
	QUEEN_AW_N
};

static QueenStmt queen_admin_write_stmts[QUEEN_AW_N] = {
	[QUEEN_AW_QUEUE] = {
		"SELECT id FROM queen.queues WHERE tenant_id = $1 AND name = $2",
		2, {UUIDOID, TEXTOID}, NULL
	},
	[QUEEN_AW_PARTITION] = {
		"SELECT id FROM queen.log_partitions WHERE queue_id = $1 AND name = $2",
		2, {UUIDOID, TEXTOID}, NULL
	},
	/*
	 * The partitions first (FOR SHARE: a push or a retention step waits for
	 * the seek, and the seek for them), then the group's cursors, both in
	 * ascending partition id: the global order.  Retention, which reads the
	 * lowest cursor under the partition row, cannot then remove what a
	 * rewind makes pending again.
	 */
	[QUEEN_AW_SEEK_PARTITIONS] = {
		"SELECT 1 FROM queen.log_partitions p"
		" WHERE p.queue_id = $1 AND ($2::text IS NULL OR p.name = $2)"
		" ORDER BY p.id FOR SHARE OF p",
		2, {UUIDOID, TEXTOID}, NULL
	},
	[QUEEN_AW_SEEK_LOCK] = {
		"SELECT 1 FROM queen.log_consumers c JOIN queen.log_partitions p ON p.id = c.partition_id"
		" WHERE p.queue_id = $1 AND ($2::text IS NULL OR p.name = $2) AND c.consumer_group = $3"
		" ORDER BY c.partition_id FOR UPDATE OF c",
		3, {UUIDOID, TEXTOID, TEXTOID}, NULL
	},

	/*
	 * $4: to the end; else $5, the moment.  created_at rises with the offset,
	 * so the first segment at or after it is found along the primary key.
	 */
	[QUEEN_AW_SEEK] = {
		"INSERT INTO queen.log_consumers AS c (partition_id, consumer_group, committed)"
		" SELECT p.id, $3, CASE WHEN $4 THEN p.last_offset ELSE"
		"          GREATEST(coalesce((SELECT s.base_offset - 1 FROM queen.log_segments s"
		"                              WHERE s.partition_id = p.id AND s.created_at >= $5"
		"                              ORDER BY s.base_offset LIMIT 1), p.last_offset),"
		"                   p.log_start - 1) END"
		"   FROM queen.log_partitions p"
		"  WHERE p.queue_id = $1 AND ($2::text IS NULL OR p.name = $2)"
		"  ORDER BY p.id"
		" ON CONFLICT (partition_id, consumer_group) DO UPDATE"
		"    SET committed = EXCLUDED.committed, batch_end = NULL, worker_id = NULL,"
		"        lease_expires_at = NULL, lease_acquired_at = NULL, batch_digest = NULL,"
		"        batch_retry_count = 0, attempt_offset = NULL, attempt_end = NULL,"
		"        attempt_count = 0",
		5, {UUIDOID, TEXTOID, TEXTOID, BOOLOID, TIMESTAMPTZOID}, NULL
	},
	[QUEEN_AW_SEEK_FLOOR] = {
		"DELETE FROM queen.consumer_watermarks WHERE queue_id = $1 AND consumer_group = $2",
		2, {UUIDOID, TEXTOID}, NULL
	},
	[QUEEN_AW_SUBSCRIPTION] = {
		"UPDATE queen.consumer_groups_metadata SET subscription_mode = 'timestamp',"
		"       subscription_timestamp = $3"
		" WHERE tenant_id = $1 AND consumer_group = $2",
		3, {UUIDOID, TEXTOID, TIMESTAMPTZOID}, NULL
	},
	[QUEEN_AW_SUBSCRIPTION_FLOOR] = {
		"DELETE FROM queen.consumer_watermarks w USING queen.queues q"
		" WHERE w.queue_id = q.id AND q.tenant_id = $1 AND w.consumer_group = $2",
		2, {UUIDOID, TEXTOID}, NULL
	},
	/* rows locked in id order, as the dead letters' expiry locks them */
	[QUEEN_AW_PURGE] = {
		"DELETE FROM queen.log_dlq WHERE id IN"
		" (SELECT d.id FROM queen.log_dlq d JOIN queen.log_partitions p ON p.id = d.partition_id"
		"   WHERE p.queue_id = $1 AND ($2::text IS NULL OR d.consumer_group = $2)"
		"   ORDER BY d.id FOR UPDATE OF d)",
		2, {UUIDOID, TEXTOID}, NULL
	},
	/* the dead letter's partition, locked as a push locks it */
	[QUEEN_AW_REPLAY_FIND] = {
		"SELECT p.id, q.name, p.name FROM queen.log_dlq d"
		"  JOIN queen.log_partitions p ON p.id = d.partition_id"
		"  JOIN queen.queues q ON q.id = p.queue_id"
		" WHERE d.id = $2 AND q.tenant_id = $1"
		"   FOR NO KEY UPDATE OF p",
		2, {UUIDOID, UUIDOID}, NULL
	},
	[QUEEN_AW_REPLAY_LOCK] = {
		"SELECT coalesce(d.payload::text, 'null') FROM queen.log_dlq d"
		" WHERE d.id = $1 FOR UPDATE",
		1, {UUIDOID}, NULL
	},
	[QUEEN_AW_REPLAY_DELETE] = {
		"DELETE FROM queen.log_dlq WHERE id = $1",
		1, {UUIDOID}, NULL
	},
	[QUEEN_AW_NEWEST] = {
		"SELECT d.id FROM queen.log_dlq d"
		"  JOIN queen.log_partitions p ON p.id = d.partition_id"
		"  JOIN queen.queues q ON q.id = p.queue_id"
		" WHERE d.partition_id = $2 AND d.transaction_id = $3 AND q.tenant_id = $1"
		" ORDER BY d.failed_at DESC, d.id DESC LIMIT 1",
		3, {UUIDOID, UUIDOID, TEXTOID}, NULL
	},
	[QUEEN_AW_FORGET] = {
		"DELETE FROM queen.log_dlq d USING queen.log_partitions p, queen.queues q"
		" WHERE p.id = d.partition_id AND q.id = p.queue_id AND q.tenant_id = $1"
		"   AND d.partition_id = $2 AND d.transaction_id = $3",
		3, {UUIDOID, UUIDOID, TEXTOID}, NULL
	},
};

/* The queue's id by name; false when the tenant has no such queue. */
static bool
queen_admin_queue_id(const pg_uuid_t *tenant, const char *queue, pg_uuid_t *id)
{
	Datum		values[2];

	values[0] = UUIDPGetDatum(tenant);
	values[1] = CStringGetTextDatum(queue);
	if (queen_stmt_run(&queen_admin_write_stmts[QUEEN_AW_QUEUE], values, NULL, false,
					   SPI_OK_SELECT, "queue lookup") == 0)
		return false;
	queen_get_uuid(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, id);
	return true;
}

/*
 * Move the group's cursors on the queue (one partition if named) to the
 * end or to the moment at; how many partitions.  found: false when the
 * queue or the partition does not exist, and then nothing changed.
 */
int64
queen_seek(const pg_uuid_t *tenant, const char *queue, const char *partition,
		   const char *group, bool to_end, TimestampTz at, bool *found)
{
	Datum		values[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};
	pg_uuid_t	queue_id;
	int64		moved;

	queen_check_queue_name(queue, strlen(queue));
	if (partition != NULL)
		queen_check_name("partition name", partition, strlen(partition), QUEEN_MAX_NAME_BYTES);
	queen_check_name("consumer group", group, strlen(group), QUEEN_MAX_NAME_BYTES);
	*found = false;
	queen_spi_connect();
	if (!queen_admin_queue_id(tenant, queue, &queue_id))
	{
		SPI_finish();
		return 0;
	}
	values[0] = UUIDPGetDatum(&queue_id);
	if (partition != NULL)
	{
		values[1] = CStringGetTextDatum(partition);
		if (queen_stmt_run(&queen_admin_write_stmts[QUEEN_AW_PARTITION], values, NULL, false,
						   SPI_OK_SELECT, "partition lookup") == 0)
		{
			SPI_finish();
			return 0;
		}
	}
	else
		nulls[1] = 'n';
	*found = true;
	queen_stmt_run(&queen_admin_write_stmts[QUEEN_AW_SEEK_PARTITIONS], values, nulls, false,
				   SPI_OK_SELECT, "seek partitions");
	values[2] = CStringGetTextDatum(group);
	queen_stmt_run(&queen_admin_write_stmts[QUEEN_AW_SEEK_LOCK], values, nulls, false,
				   SPI_OK_SELECT, "seek lock");
	values[3] = BoolGetDatum(to_end);
	values[4] = TimestampTzGetDatum(to_end ? DT_NOBEGIN : at);
	moved = queen_stmt_run(&queen_admin_write_stmts[QUEEN_AW_SEEK], values, nulls, false,
						   SPI_OK_INSERT, "seek");
	values[1] = values[2];
	queen_stmt_run(&queen_admin_write_stmts[QUEEN_AW_SEEK_FLOOR], values, NULL, false,
				   SPI_OK_DELETE, "seek floor");
	/* the group's cursors moved, nothing stamped: its figures counted again */
	queen_stats_mark(&queue_id, NULL);
	SPI_finish();
	/* parked pops of the group try again (a rewind made messages pending) */
	queen_wait_mark(tenant, queue, strlen(queue));
	return moved;
}

/*
 * Every subscription the group remembered (queues, namespaces, tasks)
 * starts at the moment at from now on, for the partitions it has no cursor
 * on yet; how many subscriptions.
 */
int64
queen_group_subscription(const pg_uuid_t *tenant, const char *group, TimestampTz at)
{
	Datum		values[3];
	int64		n;

	queen_check_name("consumer group", group, strlen(group), QUEEN_MAX_NAME_BYTES);
	queen_spi_connect();
	values[0] = UUIDPGetDatum(tenant);
	values[1] = CStringGetTextDatum(group);
	values[2] = TimestampTzGetDatum(at);
	n = queen_stmt_run(&queen_admin_write_stmts[QUEEN_AW_SUBSCRIPTION], values, NULL, false,
					   SPI_OK_UPDATE, "subscription update");
	queen_stmt_run(&queen_admin_write_stmts[QUEEN_AW_SUBSCRIPTION_FLOOR], values, NULL, false,
				   SPI_OK_DELETE, "subscription floor");
	queen_stats_mark_group(tenant, group, NULL);
	SPI_finish();
	return n;
}

/* The queue's dead letters (of one group if named) removed; how many. */
int64
queen_dlq_purge(const pg_uuid_t *tenant, const char *queue, const char *group, bool *found)
{
	Datum		values[2];
	char		nulls[2] = {' ', ' '};
	pg_uuid_t	queue_id;
	int64		n;

	queen_check_queue_name(queue, strlen(queue));
	if (group != NULL)
		queen_check_name("consumer group", group, strlen(group), QUEEN_MAX_NAME_BYTES);
	queen_spi_connect();
	*found = queen_admin_queue_id(tenant, queue, &queue_id);
	if (!*found)
	{
		SPI_finish();
		return 0;
	}
	values[0] = UUIDPGetDatum(&queue_id);
	values[1] = group != NULL ? CStringGetTextDatum(group) : (Datum) 0;
	nulls[1] = group != NULL ? ' ' : 'n';
	n = queen_stmt_run(&queen_admin_write_stmts[QUEEN_AW_PURGE], values, nulls, false,
					   SPI_OK_DELETE, "dead-letter purge");
	SPI_finish();
	return n;
}

/*
 * Replay the dead letter id to its partition's tail (see the header); out
 * says what happened, out->found false when there is no such dead letter.
 */
void
queen_dlq_replay(const pg_uuid_t *tenant, const pg_uuid_t *id, QueenReplay *out)
{
	MemoryContext out_cxt = CurrentMemoryContext;
	Datum		values[2];
	QueenPushItem item;
	char		idtext[UUID_LEN * 2 + 5];
	char	   *payload;

	memset(out, 0, sizeof(*out));
	out->dlq_id = *id;
	queen_spi_connect();
	values[0] = UUIDPGetDatum(tenant);
	values[1] = UUIDPGetDatum(id);
	if (queen_stmt_run(&queen_admin_write_stmts[QUEEN_AW_REPLAY_FIND], values, NULL, false,
					   SPI_OK_SELECT, "dead-letter lookup") == 0)
	{
		SPI_finish();
		return;
	}
	queen_get_uuid(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &out->partition_id);
	out->queue = MemoryContextStrdup(out_cxt, SPI_getvalue(SPI_tuptable->vals[0],
														   SPI_tuptable->tupdesc, 2));
	out->partition = MemoryContextStrdup(out_cxt, SPI_getvalue(SPI_tuptable->vals[0],
															   SPI_tuptable->tupdesc, 3));
	values[0] = UUIDPGetDatum(id);
	if (queen_stmt_run(&queen_admin_write_stmts[QUEEN_AW_REPLAY_LOCK], values, NULL, false,
					   SPI_OK_SELECT, "dead-letter lock") == 0)
	{
		/* replayed or removed while we waited for its partition */
		SPI_finish();
		return;
	}
	payload = MemoryContextStrdup(out_cxt, SPI_getvalue(SPI_tuptable->vals[0],
														SPI_tuptable->tupdesc, 1));
	SPI_finish();
	/* an encrypted queue's dead letter goes back opened: the push seals it again */
	payload = queen_crypto_open_text(payload);

	queen_uuid_format(id, idtext);
	memset(&item, 0, sizeof(item));
	item.queue = out->queue;
	item.partition = out->partition;
	item.txn = psprintf("dlq:%s", idtext);
	item.payload = payload;
	item.payload_len = strlen(payload);
	queen_push_items_run(&item, 1, tenant, false);

	out->found = true;
	out->duplicate = item.status == QUEEN_SEGMENT_DUPLICATE;
	out->message_id = item.message_id;
	out->transaction_id = (char *) item.txn;
	out->offset = item.log_offset;
	if (!out->duplicate)
	{
		queen_spi_connect();
		queen_stmt_run(&queen_admin_write_stmts[QUEEN_AW_REPLAY_DELETE], values, NULL, false,
					   SPI_OK_DELETE, "dead-letter removal");
		SPI_finish();
	}
}

/* The newest dead letter of a message (partition, transactionId); false if none. */
bool
queen_dlq_newest(const pg_uuid_t *tenant, const pg_uuid_t *partition, const char *txn,
				 pg_uuid_t *id)
{
	Datum		values[3];
	bool		found;

	queen_spi_connect();
	values[0] = UUIDPGetDatum(tenant);
	values[1] = UUIDPGetDatum(partition);
	values[2] = CStringGetTextDatum(txn);
	found = queen_stmt_run(&queen_admin_write_stmts[QUEEN_AW_NEWEST], values, NULL, false,
						   SPI_OK_SELECT, "dead-letter lookup") > 0;
	if (found)
		queen_get_uuid(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, id);
	SPI_finish();
	return found;
}

/*
 * A message's dead letters removed (every group's); how many.  The message
 * itself stays in the log until retention: the log is append-only.
 */
int64
queen_dlq_forget(const pg_uuid_t *tenant, const pg_uuid_t *partition, const char *txn)
{
	Datum		values[3];
	int64		n;

	queen_spi_connect();
	values[0] = UUIDPGetDatum(tenant);
	values[1] = UUIDPGetDatum(partition);
	values[2] = CStringGetTextDatum(txn);
	n = queen_stmt_run(&queen_admin_write_stmts[QUEEN_AW_FORGET], values, NULL, false,
					   SPI_OK_DELETE, "dead-letter removal");
	SPI_finish();
	return n;
}
