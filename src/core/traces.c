/*-------------------------------------------------------------------------
 *
 * traces.c
 *	  Traces: the named events a consumer records against a message while
 *	  it works on it (POST /api/v1/traces), and the three ways to read them
 *	  back: a message's, a name's (paged, time-bounded), and the names.
 *
 * A trace is advisory.  It names its message by partition and
 * transactionId and is stored whether or not that message exists: looking
 * the message up would cost every trace a read of the log, and a trace of
 * a message retention already removed is still worth keeping.  Traces do
 * not live for ever: the maintenance worker removes those older than
 * queen.trace_retention (queen_traces_expire), in bounded
 * batches.  None of this is on a push's or a pop's path.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "queen.h"
#include "codec.h"
#include "spi.h"
#include "traces.h"

#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

/* The columns every reader returns, and its names (an array). */
#define QUEEN_TRACE_COLUMNS \
"t.id, t.partition_id, t.transaction_id, t.consumer_group, t.event_type, t.data::text," \
" t.worker_id, t.created_at," \
" ARRAY(SELECT n2.trace_name FROM queen.message_trace_names n2" \
"        WHERE n2.trace_id = t.id ORDER BY 1)"

#define QUEEN_BY_NAME_FROM \
"  FROM queen.message_trace_names n" \
" WHERE n.tenant_id = $1 AND n.trace_name = $2 AND n.created_at >= $3 AND n.created_at <= $4"

/* The statements, one row each; their plans are kept for the process. */
enum
{
	QUEEN_TR_INSERT,
	QUEEN_TR_INSERT_NAMES,
	QUEEN_TR_OF_MESSAGE,
	QUEEN_TR_BY_NAME_COUNT,
	QUEEN_TR_BY_NAME_PAGE,
	QUEEN_TR_NAMES_COUNT,
	QUEEN_TR_NAMES_PAGE,
	QUEEN_TR_EXPIRE,
	QUEEN_TR_N
};

static QueenStmt queen_trace_stmts[QUEEN_TR_N] = {
	[QUEEN_TR_INSERT] = {
		"INSERT INTO queen.message_traces (id, tenant_id, partition_id, transaction_id,"
		"                                  consumer_group, event_type, data)"
		" VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb)",
		7, {UUIDOID, UUIDOID, UUIDOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID}
	},
	[QUEEN_TR_INSERT_NAMES] = {
		"INSERT INTO queen.message_trace_names (trace_id, tenant_id, trace_name, created_at)"
		" SELECT $1, $2, n, now() FROM unnest($3::text[]) n ON CONFLICT DO NOTHING",
		3, {UUIDOID, UUIDOID, TEXTARRAYOID}
	},
	[QUEEN_TR_OF_MESSAGE] = {
		"SELECT " QUEEN_TRACE_COLUMNS ", NULL::text, NULL::text"
		"  FROM queen.message_traces t"
		" WHERE t.tenant_id = $1 AND t.partition_id = $2 AND t.transaction_id = $3"
		" ORDER BY t.created_at, t.id LIMIT " CppAsString2(QUEEN_TRACES_OF_MESSAGE_MAX),
		3, {UUIDOID, UUIDOID, TEXTOID}
	},
	[QUEEN_TR_BY_NAME_COUNT] = {
		"SELECT count(*)" QUEEN_BY_NAME_FROM,
		4, {UUIDOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID}
	},
	[QUEEN_TR_BY_NAME_PAGE] = {
		"SELECT " QUEEN_TRACE_COLUMNS ", q.name, CASE WHEN q.id IS NOT NULL THEN p.name END"
		"  FROM (SELECT n.trace_id, n.created_at" QUEEN_BY_NAME_FROM
		"         ORDER BY n.created_at, n.trace_id LIMIT $5 OFFSET $6) n"
		"  JOIN queen.message_traces t ON t.id = n.trace_id"
		"  LEFT JOIN queen.log_partitions p ON p.id = t.partition_id"
		"  LEFT JOIN queen.queues q ON q.id = p.queue_id AND q.tenant_id = t.tenant_id"
		" ORDER BY n.created_at, n.trace_id",
		6, {UUIDOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID, INT8OID}
	},
	[QUEEN_TR_NAMES_COUNT] = {
		"SELECT count(DISTINCT trace_name) FROM queen.message_trace_names WHERE tenant_id = $1",
		1, {UUIDOID}
	},
	[QUEEN_TR_NAMES_PAGE] = {
		"SELECT n.trace_name, count(*), count(DISTINCT t.transaction_id), max(n.created_at)"
		"  FROM queen.message_trace_names n JOIN queen.message_traces t ON t.id = n.trace_id"
		" WHERE n.tenant_id = $1"
		" GROUP BY n.trace_name ORDER BY max(n.created_at) DESC, n.trace_name LIMIT $2 OFFSET $3",
		3, {UUIDOID, INT8OID, INT8OID}
	},
	/* the oldest first, so a batch always takes what is most due */
	[QUEEN_TR_EXPIRE] = {
		"DELETE FROM queen.message_traces WHERE id IN"
		" (SELECT id FROM queen.message_traces WHERE created_at < $1 ORDER BY created_at LIMIT $2)",
		2, {TIMESTAMPTZOID, INT8OID}
	},
};

/* A listing through its count and page statements (queen_spi_listing). */
static bool
queen_trace_listing(int count, int page, Datum *values, int limit, int64 *total)
{
	QueenStmt  *c = &queen_trace_stmts[count];
	QueenStmt  *p = &queen_trace_stmts[page];

	return queen_spi_listing(queen_plan_once(&c->plan, c->sql, c->nargs, c->types, false),
							 queen_plan_once(&p->plan, p->sql, p->nargs, p->types, false),
							 values, NULL, limit, total);
}

/* Record one trace in the caller's transaction; its id (a UUIDv7) in *id. */
void
queen_trace_record(const QueenTraceInput *in, pg_uuid_t *id)
{
	Datum		values[7];
	int			i;

	queen_uuid_v7(id);
	queen_spi_connect();
	values[0] = UUIDPGetDatum(id);
	values[1] = UUIDPGetDatum(&in->tenant);
	values[2] = UUIDPGetDatum(&in->partition_id);
	values[3] = CStringGetTextDatum(in->transaction_id);
	values[4] = CStringGetTextDatum(in->consumer_group);
	values[5] = CStringGetTextDatum(in->event_type);
	values[6] = CStringGetTextDatum(in->data);
	queen_stmt_run(&queen_trace_stmts[QUEEN_TR_INSERT], values, NULL, false, SPI_OK_INSERT,
				   "trace insert");
	if (in->nnames > 0)
	{
		Datum	   *names = palloc(sizeof(Datum) * in->nnames);

		for (i = 0; i < in->nnames; i++)
			names[i] = CStringGetTextDatum(in->names[i]);
		values[2] = queen_array_datum(names, in->nnames, TEXTOID);
		queen_stmt_run(&queen_trace_stmts[QUEEN_TR_INSERT_NAMES], values, NULL, false,
					   SPI_OK_INSERT, "trace names insert");
	}
	SPI_finish();
}

/* The readers' SELECT list (QUEEN_TRACE_COLUMNS, then queue and partition), member by member. */
static const uint16 queen_trace_offsets[] = {
	offsetof(QueenTrace, id), offsetof(QueenTrace, partition_id),
	offsetof(QueenTrace, transaction_id), offsetof(QueenTrace, consumer_group),
	offsetof(QueenTrace, event_type), offsetof(QueenTrace, data), offsetof(QueenTrace, worker_id),
	offsetof(QueenTrace, created_at), offsetof(QueenTrace, names), offsetof(QueenTrace, queue),
	offsetof(QueenTrace, partition)
};

static const uint16 queen_trace_name_offsets[] = {
	offsetof(QueenTraceName, name), offsetof(QueenTraceName, traces),
	offsetof(QueenTraceName, messages), offsetof(QueenTraceName, last_seen)
};

/* A message's traces, oldest first, in the caller's memory. */
int
queen_traces_of_message(const pg_uuid_t *tenant, const pg_uuid_t *partition_id,
						const char *transaction_id, QueenTrace **traces)
{
	MemoryContext out_cxt = CurrentMemoryContext;
	Datum		values[3];
	int			n;

	queen_spi_connect();
	values[0] = UUIDPGetDatum(tenant);
	values[1] = UUIDPGetDatum(partition_id);
	values[2] = CStringGetTextDatum(transaction_id);
	queen_stmt_run(&queen_trace_stmts[QUEEN_TR_OF_MESSAGE], values, NULL, true, SPI_OK_SELECT,
				   "trace listing");
	*traces = queen_spi_copy_rows(queen_trace_offsets, lengthof(queen_trace_offsets),
								  sizeof(QueenTrace), out_cxt, &n);
	SPI_finish();
	return n;
}

/*
 * A name's traces recorded between from and to, oldest first, one page of
 * them; returns how many there are in all.
 */
int64
queen_traces_by_name(const pg_uuid_t *tenant, const char *name, TimestampTz from,
					 TimestampTz to, int limit, int64 offset, QueenTrace **traces, int *ntraces)
{
	MemoryContext out_cxt = CurrentMemoryContext;
	Datum		values[6];
	int64		total;

	*traces = NULL;
	*ntraces = 0;
	queen_spi_connect();
	values[0] = UUIDPGetDatum(tenant);
	values[1] = CStringGetTextDatum(name);
	values[2] = TimestampTzGetDatum(from);
	values[3] = TimestampTzGetDatum(to);
	values[4] = Int64GetDatum((int64) limit);
	values[5] = Int64GetDatum(offset);
	if (queen_trace_listing(QUEEN_TR_BY_NAME_COUNT, QUEEN_TR_BY_NAME_PAGE, values, limit, &total))
		*traces = queen_spi_copy_rows(queen_trace_offsets, lengthof(queen_trace_offsets),
									  sizeof(QueenTrace), out_cxt, ntraces);
	SPI_finish();
	return total;
}

/* The names traces carry, most recently seen first, one page; how many in all. */
int64
queen_trace_names(const pg_uuid_t *tenant, int limit, int64 offset, QueenTraceName **names,
				  int *nnames)
{
	MemoryContext out_cxt = CurrentMemoryContext;
	Datum		values[3];
	int64		total;

	*names = NULL;
	*nnames = 0;
	queen_spi_connect();
	values[0] = UUIDPGetDatum(tenant);
	values[1] = Int64GetDatum((int64) limit);
	values[2] = Int64GetDatum(offset);
	if (queen_trace_listing(QUEEN_TR_NAMES_COUNT, QUEEN_TR_NAMES_PAGE, values, limit, &total))
		*names = queen_spi_copy_rows(queen_trace_name_offsets, lengthof(queen_trace_name_offsets),
									 sizeof(QueenTraceName), out_cxt, nnames);
	SPI_finish();
	return total;
}

/* Remove at most limit traces recorded before before, the oldest first; how many went. */
int64
queen_traces_expire(TimestampTz before, int limit)
{
	return queen_stmt_expire(&queen_trace_stmts[QUEEN_TR_EXPIRE], before, limit, "trace expiry");
}
