/*-------------------------------------------------------------------------
 *
 * write_horizon.c
 *	  How far back a partition write this transaction cannot see yet may
 *	  have stamped the partition's last_write_at: what lets a reader that
 *	  looks only at the partitions written since its last look (the dedup
 *	  indexer, the wildcard claim's scan floor) be sure it misses none.
 *
 * A write stamps last_write_at with a time at or after its transaction's
 * start, less up to a quantum (QUEEN_LAST_WRITE_QUANTUM_SECS: the stamp is
 * rewritten only when that old, to keep the update HOT).  A write another
 * transaction has made but not committed has an xid, so the oldest start
 * among this database's backends with an xid, less the quantum, bounds
 * the stamp of every write a statement run after this call cannot see:
 * those made before the call belong to a transaction seen here, those made
 * after it start later than the clock read first.  A reader that records
 * the horizon before its statement and next time reads the partitions
 * stamped at or after it misses no write.
 *
 * It cannot be told while a prepared (two-phase) transaction of this
 * database waits (it has no backend, and its start is not kept), when
 * track_activities is off (no start times), or when this transaction reads
 * through a snapshot older than the call (repeatable read): the answer is
 * then DT_NOBEGIN, and the readers read everything, as they would without
 * a horizon.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "log_write_int.h"

#include "access/transam.h"
#include "access/twophase.h"
#include "access/xact.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/backend_status.h"
#include "utils/timestamp.h"

/* Whether a prepared transaction of this database waits for its COMMIT PREPARED. */
static bool
queen_prepared_here(void)
{
	bool		isnull;

	if (max_prepared_xacts == 0)
		return false;
	if (SPI_execute("SELECT EXISTS (SELECT FROM pg_catalog.pg_prepared_xacts"
					" WHERE database = pg_catalog.current_database())", true, 1) != SPI_OK_SELECT)
		elog(ERROR, "queen: could not read the prepared transactions");
	return DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

/*
 * queen_write_horizon: the earliest last_write_at a write not visible to
 * the next statement's snapshot can have left, or DT_NOBEGIN when that
 * cannot be told.  Must be called between SPI_connect and SPI_finish.
 */
TimestampTz
queen_write_horizon(void)
{
	TimestampTz horizon;
	int			n;
	int			i;

	if (!pgstat_track_activities || IsolationUsesXactSnapshot() || queen_prepared_here())
		return DT_NOBEGIN;

	/* before the backends are read: a transaction they miss started later */
	horizon = GetCurrentTimestamp();

	/* the backends as they are now, not as this transaction first read them */
	pgstat_clear_backend_activity_snapshot();
	n = pgstat_fetch_stat_numbackends();
	for (i = 1; i <= n; i++)
	{
		LocalPgBackendStatus *local = pgstat_fetch_stat_local_beentry(i);
		TimestampTz started;

		if (local == NULL || !TransactionIdIsValid(local->backend_xid) ||
			local->backendStatus.st_databaseid != MyDatabaseId)
			continue;

		/*
		 * No start time with an xid: the transaction began after its entry
		 * was copied (the xid is read just after), so after the clock read.
		 */
		started = local->backendStatus.st_xact_start_timestamp;
		if (started != 0)
			horizon = Min(horizon, started);
	}
	pgstat_clear_backend_activity_snapshot();
	return horizon - QUEEN_LAST_WRITE_QUANTUM_SECS * USECS_PER_SEC;
}
