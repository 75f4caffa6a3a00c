/*-------------------------------------------------------------------------
 *
 * admin.c
 *	  The administration requests, one row each: what the broker's
 *	  resources, status, analytics, consumer-group, dead-letter and message
 *	  routes run, in the caller's transaction, answered as JSON in Queen's
 *	  shapes.
 *
 * A read is one call of a SQL function of schema/4_answers.sql (queen._api_*),
 * plain SQL over the stats tables and the log's bookkeeping, so a DBA can
 * call the same function and get the same answer; NULL from it means the
 * thing asked about does not exist.  Every statement takes the same
 * parameters ($1 the tenant, $2 to $6 the texts, $7 limit, $8 offset, $9
 * a number, $10 from, $11 to, $12 a flag) and uses those it needs, so a
 * new read is a row.  A write calls its core function (admin_write.c) and
 * renders what it did here.  Also here: the offset of a message by its
 * transactionId's hash, the deepest queues for /metrics, and the broker's
 * minute of counters (queen.broker_history).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "admin.h"
#include "codec.h"
#include "spi.h"
#include "txns_walk.h"
#include "validate.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/json.h"

#define QUEEN_ADMIN_PARAMS \
	12, {UUIDOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT4OID, INT8OID, INT4OID, \
		 TIMESTAMPTZOID, TIMESTAMPTZOID, BOOLOID}, NULL

typedef struct QueenAdminRow
{
	QueenStmt	stmt;			/* a read's; a write's has no SQL */
	const char *not_found;		/* what a NULL answer means */
} QueenAdminRow;

static QueenAdminRow queen_admin_rows[QUEEN_ADMIN_NREQUESTS] = {
	[QUEEN_ADMIN_QUEUES] = {
		{"SELECT queen._api_queues($1, $3, $4, $7, $8)::text", QUEEN_ADMIN_PARAMS}, NULL
	},
	[QUEEN_ADMIN_QUEUE] = {
		{"SELECT queen._api_queue($1, $2, $7, $8)::text", QUEEN_ADMIN_PARAMS}, "queue not found"
	},
	[QUEEN_ADMIN_OVERVIEW] = {
		{"SELECT queen._api_overview($1)::text", QUEEN_ADMIN_PARAMS}, NULL
	},
	[QUEEN_ADMIN_NAMESPACES] = {
		{"SELECT queen._api_groupings($1, false)::text", QUEEN_ADMIN_PARAMS}, NULL
	},
	[QUEEN_ADMIN_TASKS] = {
		{"SELECT queen._api_groupings($1, true)::text", QUEEN_ADMIN_PARAMS}, NULL
	},
	[QUEEN_ADMIN_GROUPS] = {
		{"SELECT queen._api_consumer_groups($1)::text", QUEEN_ADMIN_PARAMS}, NULL
	},
	[QUEEN_ADMIN_LAGGING] = {
		{"SELECT queen._api_lagging($1, $9, $7)::text", QUEEN_ADMIN_PARAMS}, NULL
	},
	[QUEEN_ADMIN_GROUP] = {
		{"SELECT queen._api_consumer_group($1, $2, $7)::text", QUEEN_ADMIN_PARAMS},
		"consumer group not found"
	},
	[QUEEN_ADMIN_STATUS] = {
		{"SELECT queen._api_status($1, $2, $3, $4, $10, $11)::text", QUEEN_ADMIN_PARAMS}, NULL
	},
	[QUEEN_ADMIN_QUEUE_OPS] = {
		{"SELECT queen._api_queue_ops($1, $2, $10, $11)::text", QUEEN_ADMIN_PARAMS}, NULL
	},
	[QUEEN_ADMIN_QUEUE_LAG] = {
		{"SELECT queen._api_queue_lag($1, $2, $10, $11)::text", QUEEN_ADMIN_PARAMS}, NULL
	},
	[QUEEN_ADMIN_RETENTION] = {
		{"SELECT queen._api_retention($1, $2, $10, $11)::text", QUEEN_ADMIN_PARAMS}, NULL
	},
	[QUEEN_ADMIN_ANALYTICS] = {
		{"SELECT queen._api_analytics($1, $2, $3, $4, $10, $11)::text", QUEEN_ADMIN_PARAMS}, NULL
	},
	[QUEEN_ADMIN_STATS_REFRESH] = {
		{"SELECT json_build_object('success', true, 'queues', r.queues, 'consumerGroups', r.groups,"
		 "                         'refreshedAt', queen._ts(now()))::text"
		 "  FROM queen.stats_refresh() r", QUEEN_ADMIN_PARAMS}, NULL
	},
	[QUEEN_ADMIN_MESSAGE] = {
		{"SELECT queen._api_message($1, $2::uuid, $3)::text", QUEEN_ADMIN_PARAMS},
		"message not found"
	},
	[QUEEN_ADMIN_WORKER_METRICS] = {
		{"SELECT queen._api_worker_metrics($10, $11)::text", QUEEN_ADMIN_PARAMS}, NULL
	},
	[QUEEN_ADMIN_SYSTEM_METRICS] = {
		{"SELECT queen._api_system_metrics($10, $11)::text", QUEEN_ADMIN_PARAMS}, NULL
	},
	[QUEEN_ADMIN_MESSAGES] = {
		{"SELECT queen._api_messages($1, $2, $3, $4, $7, $8)::text", QUEEN_ADMIN_PARAMS},
		"queue not found"
	},
	[QUEEN_ADMIN_SEEK] = {{NULL}, "queue or partition not found"},
	[QUEEN_ADMIN_SUBSCRIPTION] = {{NULL}, NULL},
	[QUEEN_ADMIN_DLQ_PURGE] = {{NULL}, "queue not found"},
	[QUEEN_ADMIN_DLQ_REPLAY] = {{NULL}, "dead letter not found"},
	[QUEEN_ADMIN_MESSAGE_FORGET] = {{NULL}, "no dead letter of this message"},
	[QUEEN_ADMIN_MESSAGE_RETRY] = {{NULL}, "no dead letter of this message"},
};

/* Does the request change anything (and so run as a write)? */
bool
queen_admin_writes(int request)
{
	if (request <= 0 || request >= QUEEN_ADMIN_NREQUESTS)
		return false;
	return request == QUEEN_ADMIN_STATS_REFRESH || queen_admin_rows[request].stmt.sql == NULL;
}

/* A read: its row's statement, one JSON value or NULL. */
static char *
queen_admin_read(QueenAdminRow *row, const pg_uuid_t *tenant, const QueenAdminArgs *a)
{
	Datum		values[12];
	char		nulls[12];
	char	   *json = NULL;
	int			i;

	memset(nulls, ' ', sizeof(nulls));
	values[0] = UUIDPGetDatum(tenant);
	for (i = 0; i < QUEEN_ADMIN_TEXTS; i++)
	{
		values[1 + i] = a->text[i] != NULL ? CStringGetTextDatum(a->text[i]) : (Datum) 0;
		nulls[1 + i] = a->text[i] != NULL ? ' ' : 'n';
	}
	values[6] = Int32GetDatum(a->limit);
	values[7] = Int64GetDatum(a->offset);
	values[8] = Int32GetDatum(a->number);
	values[9] = TimestampTzGetDatum(a->from);
	values[10] = TimestampTzGetDatum(a->to);
	values[11] = BoolGetDatum(a->flag);
	queen_spi_connect();
	if (queen_stmt_run(&row->stmt, values, nulls, false, SPI_OK_SELECT, "administration read") > 0)
	{
		char	   *v = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);

		/* copied out of SPI's memory, into the caller's */
		if (v != NULL)
			json = SPI_palloc(strlen(v) + 1);
		if (v != NULL)
			strcpy(json, v);
	}
	SPI_finish();
	return json;
}

/* A moment as a JSON string, or null. */
static void
queen_admin_moment(StringInfo out, TimestampTz ts)
{
	char		buf[QUEEN_ISO8601_LEN];

	if (queen_format_iso8601(ts, buf))
		appendStringInfo(out, "\"%s\"", buf);
	else
		appendStringInfoString(out, "null");
}

/* {"success":true,...} of a replay. */
static char *
queen_admin_replay_json(const QueenReplay *r)
{
	StringInfoData out;
	char		id[UUID_LEN * 2 + 5];

	initStringInfo(&out);
	queen_uuid_format(&r->dlq_id, id);
	/* a duplicate moved nothing: not a success, and the answer says why */
	appendStringInfo(&out, "{\"success\":%s,\"id\":\"%s\",\"result\":\"%s\",",
					 r->duplicate ? "false" : "true", id, r->duplicate ? "duplicate" : "moved");
	if (r->duplicate)
		appendStringInfoString(&out, "\"error\":\"the replay's transactionId is already stored in the partition: nothing moved and the dead letter stays\",");
	appendStringInfoString(&out, "\"replayedAs\":{");
	queen_uuid_format(&r->message_id, id);
	appendStringInfo(&out, "\"messageId\":\"%s\",\"transactionId\":", id);
	escape_json(&out, r->transaction_id);
	queen_uuid_format(&r->partition_id, id);
	appendStringInfo(&out, ",\"partitionId\":\"%s\",\"queue\":", id);
	escape_json(&out, r->queue);
	appendStringInfoString(&out, ",\"partition\":");
	escape_json(&out, r->partition);
	appendStringInfo(&out, ",\"offset\":" INT64_FORMAT "}}", r->offset);
	return out.data;
}

/* A write: its core call, and what it did as JSON (NULL: not found). */
static char *
queen_admin_write(int request, const pg_uuid_t *tenant, const QueenAdminArgs *a)
{
	StringInfoData out;
	QueenReplay r;
	pg_uuid_t	id;
	bool		found = true;
	int64		n;

	initStringInfo(&out);
	switch (request)
	{
		case QUEEN_ADMIN_SEEK:
			n = queen_seek(tenant, a->text[1], a->text[2], a->text[0], a->flag, a->from, &found);
			if (!found)
				return NULL;
			appendStringInfoString(&out, "{\"success\":true,\"consumerGroup\":");
			escape_json(&out, a->text[0]);
			appendStringInfoString(&out, ",\"queueName\":");
			escape_json(&out, a->text[1]);
			if (a->text[2] != NULL)
			{
				appendStringInfoString(&out, ",\"partitionName\":");
				escape_json(&out, a->text[2]);
			}
			appendStringInfo(&out, ",\"seekToEnd\":%s,\"targetTimestamp\":",
							 a->flag ? "true" : "false");
			queen_admin_moment(&out, a->flag ? DT_NOBEGIN : a->from);
			appendStringInfo(&out, ",\"partitionsUpdated\":" INT64_FORMAT "}", n);
			return out.data;
		case QUEEN_ADMIN_SUBSCRIPTION:
			n = queen_group_subscription(tenant, a->text[0], a->from);
			appendStringInfoString(&out, "{\"success\":true,\"consumerGroup\":");
			escape_json(&out, a->text[0]);
			appendStringInfoString(&out, ",\"newTimestamp\":");
			queen_admin_moment(&out, a->from);
			appendStringInfo(&out, ",\"rowsUpdated\":" INT64_FORMAT "}", n);
			return out.data;
		case QUEEN_ADMIN_DLQ_PURGE:
			n = queen_dlq_purge(tenant, a->text[0], a->text[1], &found);
			if (!found)
				return NULL;
			appendStringInfoString(&out, "{\"success\":true,\"queue\":");
			escape_json(&out, a->text[0]);
			appendStringInfoString(&out, ",\"consumerGroup\":");
			if (a->text[1] != NULL)
				escape_json(&out, a->text[1]);
			else
				appendStringInfoString(&out, "null");
			appendStringInfo(&out, ",\"deleted\":" INT64_FORMAT "}", n);
			return out.data;
		case QUEEN_ADMIN_DLQ_REPLAY:
		case QUEEN_ADMIN_MESSAGE_RETRY:
			if (request == QUEEN_ADMIN_DLQ_REPLAY)
				found = queen_uuid_parse(a->text[0], &id);
			else
			{
				pg_uuid_t	pid;

				found = queen_uuid_parse(a->text[0], &pid) &&
					queen_dlq_newest(tenant, &pid, a->text[1], &id);
			}
			if (!found)
				return NULL;
			queen_dlq_replay(tenant, &id, &r);
			return r.found ? queen_admin_replay_json(&r) : NULL;
		case QUEEN_ADMIN_MESSAGE_FORGET:
			{
				pg_uuid_t	pid;

				if (!queen_uuid_parse(a->text[0], &pid) ||
					(n = queen_dlq_forget(tenant, &pid, a->text[1])) == 0)
					return NULL;
				appendStringInfoString(&out, "{\"success\":true,\"partitionId\":");
				escape_json(&out, a->text[0]);
				appendStringInfoString(&out, ",\"transactionId\":");
				escape_json(&out, a->text[1]);
				appendStringInfo(&out, ",\"deadLettersDeleted\":" INT64_FORMAT ","
								 "\"message\":\"The message's dead letters were deleted; the message stays in the log until retention removes it.\"}",
								 n);
				return out.data;
			}
	}
	elog(ERROR, "queen: administration request %d has no write", request);
	return NULL;
}

/*
 * Run one administration request for tenant, in the caller's transaction
 * and memory; out->json NULL with out->not_found when what it names does
 * not exist.
 */
void
queen_admin_run(int request, const pg_uuid_t *tenant, const QueenAdminArgs *args,
				QueenAdminAnswer *out)
{
	QueenAdminRow *row;

	if (request <= 0 || request >= QUEEN_ADMIN_NREQUESTS)
		elog(ERROR, "queen: unknown administration request %d", request);
	row = &queen_admin_rows[request];
	memset(out, 0, sizeof(*out));
	out->writes = queen_admin_writes(request);
	out->json = row->stmt.sql != NULL ? queen_admin_read(row, tenant, args) :
		queen_admin_write(request, tenant, args);
	if (out->json == NULL)
		out->not_found = row->not_found != NULL ? row->not_found : "not found";
}

/*
 * The offset of the message transactionId txn in partition pid, found
 * through its hash among the rows still kept (newest first, from the
 * log's start at most); -1 when none.
 */
int64
queen_message_offset(const pg_uuid_t *pid, int64 lo, int64 hi, const char *txn)
{
	uint8		hash[QUEEN_HASH_LEN];
	QueenTxnsWalk *w;
	QueenTxnsRow row;
	int64		found = -1;

	if (hi < lo)
		return -1;
	queen_txn_hash(txn, strlen(txn), hash);
	w = queen_txns_walk_begin(pid, lo, hi, true);
	while (found < 0 && queen_txns_walk_next(w, &row))
	{
		int64		j;

		for (j = row.count - 1; j >= 0; j--)
		{
			int64		off = row.base + j;

			if (off < lo || off > hi)
				continue;
			if (memcmp(row.hashes + j * QUEEN_HASH_LEN, hash, QUEEN_HASH_LEN) == 0)
			{
				found = off;
				break;
			}
		}
	}
	queen_txns_walk_end(w);
	return found;
}

static QueenStmt queen_queue_top_stmt = {
	"SELECT o.tenant_id, o.queue, o.messages, o.pending, o.dead_letters, o.max_lag_seconds,"
	"       (SELECT max(refreshed_at) FROM queen.queue_stats)"
	"  FROM queen._queues_overview o"
	" ORDER BY o.pending DESC, o.messages DESC, o.queue LIMIT $1",
	1, {INT4OID}, NULL
};

/*
 * The deepest queues (most pending first), at most limit, as the last
 * queen.stats_refresh() found them, and when that was (0: never); for
 * /metrics.  In the caller's memory.
 */
int
queen_queue_stats_top(int limit, QueenQueueStatRow **rows, TimestampTz *refreshed_at)
{
	MemoryContext out_cxt = CurrentMemoryContext;
	Datum		values[1];
	int			n;
	int			i;

	*refreshed_at = 0;
	queen_spi_connect();
	values[0] = Int32GetDatum(limit);
	n = queen_stmt_run(&queen_queue_top_stmt, values, NULL, true, SPI_OK_SELECT,
					   "sampling the queues");
	*rows = MemoryContextAllocZero(out_cxt, sizeof(QueenQueueStatRow) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		HeapTuple	t = SPI_tuptable->vals[i];
		TupleDesc	d = SPI_tuptable->tupdesc;
		QueenQueueStatRow *r = &(*rows)[i];
		bool		isnull;
		Datum		v;

		queen_get_uuid(t, d, 1, &r->tenant);
		r->queue = MemoryContextStrdup(out_cxt, SPI_getvalue(t, d, 2));
		r->messages = queen_get_int64(t, d, 3);
		r->pending = queen_get_int64(t, d, 4);
		r->dead_letters = queen_get_int64(t, d, 5);
		r->max_lag_seconds = queen_get_int64(t, d, 6);
		v = SPI_getbinval(t, d, 7, &isnull);
		if (!isnull)
			*refreshed_at = DatumGetTimestampTz(v);
	}
	SPI_finish();
	return n;
}

static QueenStmt queen_broker_history_stmt = {
	"INSERT INTO queen.broker_history AS h (bucket, counters)"
	" VALUES (date_trunc('minute', now()), $1::jsonb)"
	" ON CONFLICT (bucket) DO UPDATE SET counters = EXCLUDED.counters",
	1, {TEXTOID}, NULL
};

/*
 * This minute's row of queen.broker_history: the broker's counters as a
 * JSON object (metrics.c says which), the last in the minute winning.
 */
void
queen_broker_history_record(const char *counters_json)
{
	Datum		values[1];

	queen_spi_connect();
	values[0] = CStringGetTextDatum(counters_json);
	queen_stmt_run(&queen_broker_history_stmt, values, NULL, false, SPI_OK_INSERT,
				   "broker history");
	SPI_finish();
}
