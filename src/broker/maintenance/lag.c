/*-------------------------------------------------------------------------
 *
 * lag.c
 *	  Consumer lag for /metrics: the maintenance worker reads the view
 *	  queen.consumer_lag every queen.consumer_lag_interval seconds and
 *	  writes the most lagging (queue, group) pairs to shared memory, where
 *	  metrics.c renders them without a database round trip.
 *
 * The view reads every partition of the queues consumers have touched, so
 * it runs in the maintenance worker, never in a shard, whose pushes, pops
 * and acks would wait behind it.  The table in shared memory is guarded by
 * a sequence count (QueenLagShared, broker.h): odd while written, and
 * nothing between its two increments can fail.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "broker.h"
#include "spi.h"
#include "worker.h"

#include "pgstat.h"
#include "utils/backend_status.h"
#include "utils/timestamp.h"

static SPIPlanPtr queen_lag_plan = NULL;

static void
queen_lag_body(void *arg)
{
	QueenLagShared *lag = &queen_broker->lag;
	QueenLagEntry *rows = palloc0(sizeof(QueenLagEntry) * QUEEN_LAG_ENTRIES);
	SPIPlanPtr	plan;
	uint64		found;
	int			n;
	int			i;

	(void) arg;
	pgstat_report_activity(STATE_RUNNING, "queen: consumer lag");
	queen_spi_connect();
	plan = queen_plan_once(&queen_lag_plan,
						   "SELECT tenant_id, queue, consumer_group, partitions_pending, messages_pending"
						   "  FROM queen.consumer_lag"
						   " ORDER BY messages_pending DESC, queue, consumer_group"
						   " LIMIT " CppAsString2(QUEEN_LAG_ENTRIES) " + 1",
						   0, NULL, false);
	queen_exec(plan, NULL, SPI_OK_SELECT, "sampling the consumer lag");
	found = SPI_processed;
	n = (int) Min(found, QUEEN_LAG_ENTRIES);
	for (i = 0; i < n; i++)
	{
		HeapTuple	tuple = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;

		queen_get_uuid(tuple, desc, 1, &rows[i].tenant);
		strlcpy(rows[i].queue, SPI_getvalue(tuple, desc, 2), sizeof(rows[i].queue));
		strlcpy(rows[i].group, SPI_getvalue(tuple, desc, 3), sizeof(rows[i].group));
		rows[i].partitions = queen_get_int64(tuple, desc, 4);
		rows[i].messages = queen_get_int64(tuple, desc, 5);
	}
	SPI_finish();

	/* nothing below can fail: a reader never sees seq stay odd */
	pg_atomic_fetch_add_u64(&lag->seq, 1);
	pg_write_barrier();
	memcpy(lag->entries, rows, sizeof(QueenLagEntry) * n);
	lag->n = n;
	lag->truncated = found > (uint64) n;
	lag->sampled_at = GetCurrentTimestamp();
	pg_write_barrier();
	pg_atomic_fetch_add_u64(&lag->seq, 1);
}

/* One sample, in a transaction of its own; a failure is logged and skipped. */
void
queen_lag_sample(void)
{
	QueenTxResult result;

	(void) queen_worker_transact("consumer lag", "maintenance", queen_lag_body, NULL, &result);
}
