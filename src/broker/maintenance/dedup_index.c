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
 * A pass reads only the partitions written since the last complete one
 * (queen_dedup_runs_index's since), so a million idle partitions cost
 * nothing each second.  Every QUEEN_INDEX_FULL_USECS a pass reads them all
 * anyway: indexing late never changes an answer, only slows probes, and
 * the full pass bounds how late anything the horizon missed is indexed.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "maintenance.h"
#include "dedup_runs.h"
#include "worker.h"

#include "pgstat.h"
#include "utils/backend_status.h"
#include "utils/timestamp.h"

/* partitions one transaction indexes at most */
#define QUEEN_INDEX_PARTITIONS	256

/* how often a pass reads every partition */
#define QUEEN_INDEX_FULL_USECS	(600 * USECS_PER_SEC)

typedef struct QueenIndexPass
{
	TimestampTz since;			/* in: partitions stamped from; out: the next's */
	int64		written;
} QueenIndexPass;

/* where the next pass starts; DT_NOBEGIN (all) at first */
static TimestampTz queen_index_since = DT_NOBEGIN;
static TimestampTz queen_index_full_at = 0;

static void
queen_dedup_index_body(void *arg)
{
	QueenIndexPass *pass = arg;

	pgstat_report_activity(STATE_RUNNING, "queen: dedup index");
	pass->written = queen_dedup_runs_index(queen_dedup_index_min_hashes, QUEEN_INDEX_PARTITIONS,
										   &pass->since);
}

/* One pass; true when it wrote anything (so another may follow at once). */
bool
queen_dedup_index_pass(void)
{
	QueenTxResult result;
	QueenIndexPass pass;
	TimestampTz now = GetCurrentTimestamp();
	bool		full = now - queen_index_full_at >= QUEEN_INDEX_FULL_USECS;
	TimestampTz from = full ? DT_NOBEGIN : queen_index_since;

	if (queen_dedup_index_min_hashes <= 0)
		return false;
	pass.since = from;
	pass.written = 0;
	if (!queen_worker_transact("dedup index", "maintenance", queen_dedup_index_body,
							   &pass, &result))
		return false;
	if (full)
		queen_index_full_at = now;
	/* moved only by a pass that left nothing behind (queen_dedup_runs_index) */
	if (pass.since != from)
		queen_index_since = pass.since;
	return pass.written > 0;
}
