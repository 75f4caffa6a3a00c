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

static const char *const sql_register_insert =
"INSERT INTO queen.stream_queries (id, tenant_id, name, source_queue, sink_queue, config_hash)"
" VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (tenant_id, name) DO NOTHING RETURNING id";

static const char *const sql_register_lock =
"SELECT id, config_hash FROM queen.stream_queries WHERE tenant_id = $1 AND name = $2"
"   FOR NO KEY UPDATE";

static const char *const sql_register_update =
"UPDATE queen.stream_queries SET source_queue = $2, sink_queue = $3, config_hash = $4,"
"       updated_at = now() WHERE id = $1";

static const char *const sql_state_clear =
"DELETE FROM queen.stream_state WHERE query_id = $1";

static const char *const sql_query_share =
"SELECT 1 FROM queen.stream_queries WHERE id = $1 AND tenant_id = $2 FOR SHARE";

static const char *const sql_state_upsert =
"INSERT INTO queen.stream_state (query_id, partition_id, key, value)"
" VALUES ($1, $2, $3, $4::jsonb)"
" ON CONFLICT (query_id, partition_id, key)"
" DO UPDATE SET value = EXCLUDED.value, updated_at = now()";

static const char *const sql_state_delete =
"DELETE FROM queen.stream_state WHERE query_id = $1 AND partition_id = $2 AND key = $3";

/* windowEnd compared as numeric: any JSON number, never a cast error */
static const char *const sql_state_get =
"SELECT s.key, s.value::text, s.updated_at FROM queen.stream_state s"
"  JOIN queen.stream_queries q ON q.id = s.query_id AND q.tenant_id = $3"
" WHERE s.query_id = $1 AND s.partition_id = $2"
"   AND ($4::text[] IS NULL OR s.key = ANY ($4))"
"   AND ($5::text IS NULL OR starts_with(s.key, $5))"
"   AND ($6::bigint IS NULL OR (jsonb_typeof(s.value -> 'windowEnd') = 'number'"
"        AND (s.value ->> 'windowEnd')::numeric <= $6))"
" ORDER BY s.key";

static const char *const sql_forget_source =
"DELETE FROM queen.stream_queries WHERE tenant_id = $1 AND source_queue = $2";

static SPIPlanPtr queen_register_insert_plan = NULL;
static SPIPlanPtr queen_register_lock_plan = NULL;
static SPIPlanPtr queen_register_update_plan = NULL;
static SPIPlanPtr queen_state_clear_plan = NULL;
static SPIPlanPtr queen_query_share_plan = NULL;
static SPIPlanPtr queen_state_upsert_plan = NULL;
static SPIPlanPtr queen_state_delete_plan = NULL;
static SPIPlanPtr queen_state_get_plan = NULL;
static SPIPlanPtr queen_forget_source_plan = NULL;

static void
queen_stream_exec(SPIPlanPtr plan, Datum *values, const char *nulls, int expected,
				  const char *what)
{
	int			rc = SPI_execute_plan(plan, values, nulls, false, 0);

	if (rc != expected)
		elog(ERROR, "queen: %s failed: %s", what, SPI_result_code_string(rc));
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
	Oid			types[6] = {UUIDOID, UUIDOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID};
	Datum		values[6];
	char		nulls[6] = "      ";
	Oid			upd_types[4] = {UUIDOID, TEXTOID, TEXTOID, TEXTOID};
	Datum		upd[4];
	char		upd_nulls[4] = "    ";
	Datum		sink = sink_queue != NULL ? CStringGetTextDatum(sink_queue) : (Datum) 0;
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
		nulls[4] = sink_queue != NULL ? ' ' : 'n';
		values[5] = CStringGetTextDatum(config_hash);
		queen_stream_exec(queen_plan_once(&queen_register_insert_plan, sql_register_insert, 6,
										  types, false),
						  values, nulls, SPI_OK_INSERT_RETURNING, "stream query insert");
		if (SPI_processed == 1)
		{
			out->fresh = true;
			break;
		}

		values[0] = UUIDPGetDatum(tenant);
		values[1] = CStringGetTextDatum(name);
		queen_stream_exec(queen_plan_once(&queen_register_lock_plan, sql_register_lock, 2,
										  types + 1, false),
						  values, NULL, SPI_OK_SELECT, "stream query lock");
		/* removed since the insert saw it (its queue was deleted): insert again */
		if (SPI_processed == 0)
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
			queen_stream_exec(queen_plan_once(&queen_state_clear_plan, sql_state_clear, 1,
											  types, false),
							  values, NULL, SPI_OK_DELETE, "stream state reset");
			out->reset = true;
		}
		upd[0] = UUIDPGetDatum(&out->id);
		upd[1] = CStringGetTextDatum(source_queue);
		upd[2] = sink;
		upd[3] = CStringGetTextDatum(config_hash);
		upd_nulls[2] = nulls[4];
		queen_stream_exec(queen_plan_once(&queen_register_update_plan, sql_register_update, 4,
										  upd_types, false),
						  upd, upd_nulls, SPI_OK_UPDATE, "stream query update");
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
	Oid			types[4] = {UUIDOID, UUIDOID, TEXTOID, TEXTOID};
	Datum		values[4];
	QueenStateOrder *order;
	int			i;

	queen_spi_connect();
	values[0] = UUIDPGetDatum(query);
	values[1] = UUIDPGetDatum(tenant);
	queen_stream_exec(queen_plan_once(&queen_query_share_plan, sql_query_share, 2, types, false),
					  values, NULL, SPI_OK_SELECT, "stream query lock");
	if (SPI_processed == 0)
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
		if (op->value != NULL)
		{
			values[3] = CStringGetTextDatum(op->value);
			queen_stream_exec(queen_plan_once(&queen_state_upsert_plan, sql_state_upsert, 4,
											  types, false),
							  values, NULL, SPI_OK_INSERT, "stream state upsert");
		}
		else
			queen_stream_exec(queen_plan_once(&queen_state_delete_plan, sql_state_delete, 3,
											  types, false),
							  values, NULL, SPI_OK_DELETE, "stream state delete");
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
	Oid			types[6] = {UUIDOID, UUIDOID, UUIDOID, TEXTARRAYOID, TEXTOID, INT8OID};
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
	values[5] = Int64GetDatum(filter->ripe);
	nulls[5] = filter->has_ripe ? ' ' : 'n';

	queen_spi_connect();
	if (SPI_execute_plan(queen_plan_once(&queen_state_get_plan, sql_state_get, 6, types, false),
						 values, nulls, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "queen: stream state read failed");
	*rows = queen_spi_copy_rows(queen_state_offsets, lengthof(queen_state_offsets),
								sizeof(QueenStateRow), out_cxt, &n);
	SPI_finish();
	return n;
}

void
queen_stream_forget_source(const pg_uuid_t *tenant, const char *queue)
{
	Oid			types[2] = {UUIDOID, TEXTOID};
	Datum		values[2];

	queen_spi_connect();
	values[0] = UUIDPGetDatum(tenant);
	values[1] = CStringGetTextDatum(queue);
	queen_stream_exec(queen_plan_once(&queen_forget_source_plan, sql_forget_source, 2, types,
									  false),
					  values, NULL, SPI_OK_DELETE, "stream queries of a deleted queue");
	SPI_finish();
}
