/*-------------------------------------------------------------------------
 *
 * dedup_index.c
 *	  The maintenance worker's dedup indexing: queen.dedup_index's work
 *	  (src/core/dedup_runs.c) every second, in a transaction of its own.
 *
 * It runs in the maintenance worker, not in the shards: sorting and
 * merging runs reads and writes hashes in bulk, and pushes must not wait
 * behind it.  A partition written faster than one pass indexes stays the
 * most behind and is taken first next time.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "maintenance.h"
#include "dedup_runs.h"
#include "worker.h"

#include "pgstat.h"
#include "utils/backend_status.h"

/* partitions one transaction indexes at most */
#define QUEEN_INDEX_PARTITIONS	256

static void
queen_dedup_index_body(void *arg)
{
	int64	   *written = arg;

	pgstat_report_activity(STATE_RUNNING, "queen: dedup index");
	*written = queen_dedup_runs_index(queen_dedup_index_min_hashes, QUEEN_INDEX_PARTITIONS);
}

/* One pass; true when it wrote anything (so another may follow at once). */
bool
queen_dedup_index_pass(void)
{
	QueenTxResult result;
	int64		written = 0;

	if (queen_dedup_index_min_hashes <= 0)
		return false;
	if (!queen_worker_transact("dedup index", "maintenance", queen_dedup_index_body,
							   &written, &result))
		return false;
	return written > 0;
}
