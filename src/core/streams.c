/*-------------------------------------------------------------------------
 *
 * streams.c
 *	  Stream processing's state: registering a query (idempotent, refused
 *	  for a changed operator shape unless reset), applying a cycle's state
 *	  changes, reading a partition's state, and forgetting the queries of a
 *	  deleted queue.
 *
 * Locks, in the global order after partitions and consumers (a cycle's
 * pushes and ack come first): a cycle takes its query row FOR SHARE, then
 * its state rows in ascending key; a registration takes the query row FOR
 * NO KEY UPDATE before it removes state on reset.  So a reset waits for
 * the cycles in flight and a cycle for a reset, never the other way round
 * with rows held; a deleted queue's queries go last in its transaction.
 * Two cycles of one (query, partition) serialise on their state rows in
 * key order; the source partition's lease normally keeps them apart.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "queen.h"
#include "codec.h"
#include "spi.h"
#include "streams.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"

/* The statements, one row each; their plans are kept for the process. */
enum
{
	QUEEN_ST_INSERT,			/* a new query */
	QUEEN_ST_LOCK,				/* a registered one, locked against cycles */
	QUEEN_ST_UPDATE,
	QUEEN_ST_CLEAR,				/* a reset: its state removed */
	QUEEN_ST_SHARE,				/* a cycle's query row */
	QUEEN_ST_UPSERT,
	QUEEN_ST_DELETE,
	QUEEN_ST_GET,
	QUEEN_ST_FORGET,			/* the queries of a deleted queue */
	QUEEN_ST_N
};

static QueenStmt queen_stream_stmts[QUEEN_ST_N] = {
	[QUEEN_ST_INSERT] = {
		"INSERT INTO queen.stream_queries (id, tenant_id, name, source_queue, sink_queue, config_hash)"
		" VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (tenant_id, name) DO NOTHING RETURNING id",
		6, {UUIDOID, UUIDOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID}
	},
	[QUEEN_ST_LOCK] = {
		"SELECT id, config_hash FROM queen.stream_queries WHERE tenant_id = $1 AND name = $2"
		"   FOR NO KEY UPDATE",
		2, {UUIDOID, TEXTOID}
	},
	[QUEEN_ST_UPDATE] = {
		"UPDATE queen.stream_queries SET source_queue = $2, sink_queue = $3, config_hash = $4,"
		"       updated_at = now() WHERE id = $1",
		4, {UUIDOID, TEXTOID, TEXTOID, TEXTOID}
	},
	[QUEEN_ST_CLEAR] = {
		"DELETE FROM queen.stream_state WHERE query_id = $1",
		1, {UUIDOID}
	},
	[QUEEN_ST_SHARE] = {
		"SELECT 1 FROM queen.stream_queries WHERE id = $1 AND tenant_id = $2 FOR SHARE",
		2, {UUIDOID, UUIDOID}
	},
	[QUEEN_ST_UPSERT] = {
		"INSERT INTO queen.stream_state (query_id, partition_id, key, value)"
		" VALUES ($1, $2, $3, $4::jsonb)"
		" ON CONFLICT (query_id, partition_id, key)"
		" DO UPDATE SET value = EXCLUDED.value, updated_at = now()",
		4, {UUIDOID, UUIDOID, TEXTOID, TEXTOID}
	},
	[QUEEN_ST_DELETE] = {
		"DELETE FROM queen.stream_state WHERE query_id = $1 AND partition_id = $2 AND key = $3",
		3, {UUIDOID, UUIDOID, TEXTOID}
	},
	/* windowEnd compared as numeric: any JSON number, never a cast error */
	[QUEEN_ST_GET] = {
		"SELECT s.key, s.value::text, s.updated_at FROM queen.stream_state s"
		"  JOIN queen.stream_queries q ON q.id = s.query_id AND q.tenant_id = $3"
		" WHERE s.query_id = $1 AND s.partition_id = $2"
		"   AND ($4::text[] IS NULL OR s.key = ANY ($4))"
		"   AND ($5::text IS NULL OR starts_with(s.key, $5))"
		"   AND ($6::numeric IS NULL OR (jsonb_typeof(s.value -> 'windowEnd') = 'number'"
		"        AND (s.value ->> 'windowEnd')::numeric <= $6::numeric))"
		" ORDER BY s.key",
		6, {UUIDOID, UUIDOID, UUIDOID, TEXTARRAYOID, TEXTOID, TEXTOID}
	},
	[QUEEN_ST_FORGET] = {
		"DELETE FROM queen.stream_queries WHERE tenant_id = $1 AND source_queue = $2",
		2, {UUIDOID, TEXTOID}
	},
};

static int
queen_stream_run(int stmt, Datum *values, const char *nulls, int expected)
{
	static const char *const what[QUEEN_ST_N] = {
		"stream query insert", "stream query lock", "stream query update", "stream state reset",
		"stream query lock", "stream state upsert", "stream state delete", "stream state read",
		"stream queries of a deleted queue"
	};

	return queen_stmt_run(&queen_stream_stmts[stmt], values, nulls, stmt == QUEEN_ST_GET,
						  expected, what[stmt]);
}

const char *
queen_stream_key_problem(size_t len)
{
	if (len == 0)
		return "must not be empty";
	if (len > QUEEN_STREAM_KEY_MAX)
		return psprintf("is longer than %d bytes", QUEEN_STREAM_KEY_MAX);
	return NULL;
}

/*
 * Register a query, or find it registered: the same config_hash keeps its
 * state (the queues may change); another one is a conflict, unless reset,
 * which removes the query's state and takes the new hash.
 */
void
queen_stream_register(const pg_uuid_t *tenant, const char *name, const char *source_queue,
					  const char *sink_queue, const char *config_hash, bool reset,
					  QueenStreamQuery *out)
{
	Datum		values[6];
	char		nulls[6] = "      ";
	Datum		sink = sink_queue != NULL ? CStringGetTextDatum(sink_queue) : (Datum) 0;
	char		sink_null = sink_queue != NULL ? ' ' : 'n';
	int			attempt;

	memset(out, 0, sizeof(*out));
	queen_spi_connect();
	for (attempt = 0;; attempt++)
	{
		queen_uuid_v7(&out->id);
		values[0] = UUIDPGetDatum(&out->id);
		values[1] = UUIDPGetDatum(tenant);
		values[2] = CStringGetTextDatum(name);
		values[3] = CStringGetTextDatum(source_queue);
		values[4] = sink;
		nulls[4] = sink_null;
		values[5] = CStringGetTextDatum(config_hash);
		if (queen_stream_run(QUEEN_ST_INSERT, values, nulls, SPI_OK_INSERT_RETURNING) == 1)
		{
			out->fresh = true;
			break;
		}

		values[0] = UUIDPGetDatum(tenant);
		values[1] = CStringGetTextDatum(name);
		/* removed since the insert saw it (its queue was deleted): insert again */
		if (queen_stream_run(QUEEN_ST_LOCK, values, NULL, SPI_OK_SELECT) == 0)
		{
			if (attempt < 3)
				continue;
			elog(ERROR, "queen: stream query \"%s\" keeps disappearing", name);
		}
		queen_get_uuid(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &out->id);
		if (strcmp(SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2),
				   config_hash) != 0)
		{
			if (!reset)
			{
				out->conflict = true;
				break;
			}
			values[0] = UUIDPGetDatum(&out->id);
			queen_stream_run(QUEEN_ST_CLEAR, values, NULL, SPI_OK_DELETE);
			out->reset = true;
		}
		values[0] = UUIDPGetDatum(&out->id);
		values[1] = CStringGetTextDatum(source_queue);
		values[2] = sink;
		values[3] = CStringGetTextDatum(config_hash);
		nulls[2] = sink_null;
		queen_stream_run(QUEEN_ST_UPDATE, values, nulls, SPI_OK_UPDATE);
		break;
	}
	SPI_finish();
}

/* Ops in ascending key, ties in the caller's order (a stable sort). */
typedef struct QueenStateOrder
{
	const QueenStateOp *op;
	int			index;
} QueenStateOrder;

static int
queen_state_cmp(const void *pa, const void *pb)
{
	const QueenStateOrder *a = (const QueenStateOrder *) pa;
	const QueenStateOrder *b = (const QueenStateOrder *) pb;
	int			c = strcmp(a->op->key, b->op->key);

	return c != 0 ? c : (a->index > b->index) - (a->index < b->index);
}

bool
queen_stream_state_apply(const pg_uuid_t *tenant, const pg_uuid_t *query,
						 const pg_uuid_t *partition, QueenStateOp *ops, int nops)
{
	Datum		values[4];
	QueenStateOrder *order;
	int			i;

	queen_spi_connect();
	values[0] = UUIDPGetDatum(query);
	values[1] = UUIDPGetDatum(tenant);
	if (queen_stream_run(QUEEN_ST_SHARE, values, NULL, SPI_OK_SELECT) == 0)
	{
		SPI_finish();
		return false;
	}

	order = palloc(sizeof(QueenStateOrder) * Max(nops, 1));
	for (i = 0; i < nops; i++)
	{
		order[i].op = &ops[i];
		order[i].index = i;
	}
	qsort(order, nops, sizeof(QueenStateOrder), queen_state_cmp);
	values[1] = UUIDPGetDatum(partition);
	for (i = 0; i < nops; i++)
	{
		const QueenStateOp *op = order[i].op;

		values[2] = CStringGetTextDatum(op->key);
		values[3] = op->value != NULL ? CStringGetTextDatum(op->value) : (Datum) 0;
		if (op->value != NULL)
			queen_stream_run(QUEEN_ST_UPSERT, values, NULL, SPI_OK_INSERT);
		else
			queen_stream_run(QUEEN_ST_DELETE, values, NULL, SPI_OK_DELETE);
	}
	SPI_finish();
	return true;
}

static const uint16 queen_state_offsets[] = {
	offsetof(QueenStateRow, key), offsetof(QueenStateRow, value),
	offsetof(QueenStateRow, updated_at)
};

int
queen_stream_state_get(const pg_uuid_t *tenant, const pg_uuid_t *query,
					   const pg_uuid_t *partition, const QueenStateFilter *filter,
					   QueenStateRow **rows)
{
	MemoryContext out_cxt = CurrentMemoryContext;
	Datum		values[6];
	char		nulls[6] = "      ";
	int			n;
	int			i;

	values[0] = UUIDPGetDatum(query);
	values[1] = UUIDPGetDatum(partition);
	values[2] = UUIDPGetDatum(tenant);
	if (filter->nkeys > 0)
	{
		Datum	   *keys = palloc(sizeof(Datum) * filter->nkeys);

		for (i = 0; i < filter->nkeys; i++)
			keys[i] = CStringGetTextDatum(filter->keys[i]);
		values[3] = queen_array_datum(keys, filter->nkeys, TEXTOID);
	}
	else
		nulls[3] = 'n';
	values[4] = filter->key_prefix != NULL ? CStringGetTextDatum(filter->key_prefix) : (Datum) 0;
	nulls[4] = filter->key_prefix != NULL ? ' ' : 'n';
	values[5] = filter->ripe != NULL ? CStringGetTextDatum(filter->ripe) : (Datum) 0;
	nulls[5] = filter->ripe != NULL ? ' ' : 'n';

	queen_spi_connect();
	queen_stream_run(QUEEN_ST_GET, values, nulls, SPI_OK_SELECT);
	*rows = queen_spi_copy_rows(queen_state_offsets, lengthof(queen_state_offsets),
								sizeof(QueenStateRow), out_cxt, &n);
	SPI_finish();
	return n;
}

void
queen_stream_forget_source(const pg_uuid_t *tenant, const char *queue)
{
	Datum		values[2];

	queen_spi_connect();
	values[0] = UUIDPGetDatum(tenant);
	values[1] = CStringGetTextDatum(queue);
	queen_stream_run(QUEEN_ST_FORGET, values, NULL, SPI_OK_DELETE);
	SPI_finish();
}
