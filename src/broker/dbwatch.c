/*-------------------------------------------------------------------------
 *
 * dbwatch.c
 *	  The database watch: the one broker worker connected to no database,
 *	  which tells the workers that connect to queen.database whether it
 *	  exists before they try, and the waiting those workers do until it
 *	  does.
 *
 * Why a worker of its own.  PostgreSQL ends a connection to a database
 * that does not exist with FATAL, which no PG_TRY can catch, and a process
 * connects at most once.  So a shard cannot try and fall back, and it
 * cannot look first either: reading pg_database needs a connection, and a
 * connection to no database cannot become one to queen.database.  Before
 * this worker, a broker started ahead of its database (scripts/setup's
 * first start: initdb, start, then CREATE DATABASE) logged one FATAL per
 * shard and for the maintenance worker, and each of them exited twice (the
 * failed connection, then a start connected to no database that exited to
 * reconnect once the database appeared).  The workers that need the
 * database now ask this one and wait, unconnected, on their latch; it
 * reads pg_database with a heap scan (a process connected to no database
 * can read the shared catalogs, as the autovacuum launcher does), answers,
 * and says in one log line for all of them that they wait.
 *
 * The protocol, in shared memory (QueenDatabaseWatch): a worker takes a
 * ticket (asked + 1) and wakes the watch; the watch notes how many were
 * asked, scans, publishes the answer, then marks the tickets it covers
 * (answered) and wakes the waiters.  A ticket is answered only by a scan
 * that began after it was taken, so a worker restarted after a
 * DROP DATABASE never connects on an answer from before it.  While the
 * answer is "no" the watch scans once a second; otherwise it sleeps until
 * asked.  What remains is the moment between an answer and the connection
 * it allows: a database dropped in that moment still costs that worker one
 * FATAL and a restart, after which it asks again.
 *
 * The watch is registered first of the broker's workers, so whenever any
 * of them fits in max_worker_processes, it does too.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "worker.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

/*
 * Does queen.database exist?  Asked by a worker before it connects, answered
 * by the database watch: a ticket is covered once answered
 * reaches it, and exists is the answer then or later.
 */
typedef struct QueenDatabaseWatch
{
	pg_atomic_uint64 asked;		/* tickets taken */
	pg_atomic_uint64 answered;	/* tickets the last answer covers */
	pg_atomic_uint32 exists;	/* that answer: 1 yes, 0 no */
} QueenDatabaseWatch;

static QueenDatabaseWatch *queen_dbwatch = NULL;

Size
queen_dbwatch_shmem_size(void)
{
	return MAXALIGN(sizeof(QueenDatabaseWatch));
}

void
queen_dbwatch_shmem_init(void)
{
	bool		found;

	queen_dbwatch = ShmemInitStruct("queen database watch", queen_dbwatch_shmem_size(), &found);
	if (found)
		return;
	pg_atomic_init_u64(&queen_dbwatch->asked, 0);
	pg_atomic_init_u64(&queen_dbwatch->answered, 0);
	pg_atomic_init_u32(&queen_dbwatch->exists, 0);
}

/* How often the watch looks again while the database is missing. */
#define QUEEN_DBWATCH_RETRY_MS	1000

/*
 * Does queen.database exist?  A plain heap scan of pg_database, in a
 * transaction of its own: a process connected to no database can read that
 * shared catalog but not the relcache entries an index scan needs.
 */
static bool
queen_database_exists(void)
{
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tuple;
	bool		found = false;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	while (!found && (tuple = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		Form_pg_database db = (Form_pg_database) GETSTRUCT(tuple);

		found = strcmp(NameStr(db->datname), queen_database) == 0;
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	CommitTransactionCommand();
	return found;
}

/* Wake every worker that may be waiting for an answer. */
static void
queen_dbwatch_wake_waiters(void)
{
	int			s;

	for (s = 0; s < queen_broker->nshards; s++)
		queen_worker_wake(&queen_broker->shards[s]);
	queen_worker_wake(&queen_broker->maintenance);
}

/*
 * Publish an answer for the tickets up to covered: the answer first, then
 * the tickets, so a waiter that sees its ticket covered reads this answer
 * or a later one.
 */
static void
queen_dbwatch_publish(bool exists, uint64 covered)
{
	QueenDatabaseWatch *w = queen_dbwatch;

	pg_atomic_write_u32(&w->exists, exists ? 1 : 0);
	pg_write_barrier();
	pg_atomic_write_u64(&w->answered, covered);
	queen_dbwatch_wake_waiters();
}

/*
 * SIGTERM: at a cluster shutdown the listeners go too, exit 0; terminated
 * alone (pg_terminate_backend), exit 1 to be started again (worker.c).
 */
static void
queen_dbwatch_stop(void)
{
	TimestampTz closing_since = GetCurrentTimestamp();

	for (;;)
	{
		TimestampTz now = GetCurrentTimestamp();

		if (queen_workers_all_in(queen_broker->listeners, queen_broker->nlisteners,
								 QUEEN_WORKERS_GOING))
			proc_exit(0);
		if (queen_worker_alone(queen_broker->listeners, queen_broker->nlisteners,
							   closing_since, now))
			queen_worker_restart("database watch");
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 50L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

void
queen_dbwatch_main(Datum arg)
{
	QueenWorkerSlot *slot;
	QueenDatabaseWatch *w;
	int			known = -1;		/* the last answer: -1 none, 0 no, 1 yes */
	TimestampTz checked = 0;

	slot = queen_worker_begin(QUEEN_DBWATCH, DatumGetInt32(arg));
	if (slot == NULL)
		proc_exit(0);
	w = queen_dbwatch;
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname("queen database watch");
	queen_worker_set_state(slot, QUEEN_WORKER_READY);

	for (;;)
	{
		uint64		asked = pg_atomic_read_u64(&w->asked);
		TimestampTz now = GetCurrentTimestamp();
		int			events = WL_LATCH_SET | WL_EXIT_ON_PM_DEATH;

		CHECK_FOR_INTERRUPTS();
		if (ShutdownRequestPending)
			queen_dbwatch_stop();
		(void) queen_worker_reload();

		if (asked != pg_atomic_read_u64(&w->answered) ||
			(known == 0 && TimestampDifferenceExceeds(checked, now, QUEEN_DBWATCH_RETRY_MS)))
		{
			bool		exists = queen_database_exists();

			checked = now;
			if (!exists && known != 0)
				ereport(LOG,
						(errmsg("queen: database \"%s\" (queen.database) does not exist; the broker's shards and maintenance worker wait for it",
								queen_database),
						 errhint("Create it, then CREATE EXTENSION queen in it; no restart is needed.")));
			else if (exists && known == 0)
				ereport(LOG,
						(errmsg("queen: database \"%s\" exists now; the broker's workers connect to it",
								queen_database)));
			known = exists ? 1 : 0;
			queen_dbwatch_publish(exists, asked);
		}

		/* while it is missing, look again; otherwise sleep until asked */
		if (known == 0)
			events |= WL_TIMEOUT;
		(void) WaitLatch(MyLatch, events, QUEEN_DBWATCH_RETRY_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

/*
 * Before a worker connects to queen.database: ask the watch whether it
 * exists, and wait, unconnected and in state WAITING (so /health and
 * pushes answer 503 with why), for as long as it does not.  The watch
 * logs the wait once for every worker; this logs nothing.  SIGTERM while
 * waiting ends the worker (exit 0: it holds nothing).
 */
void
queen_dbwatch_await(QueenWorkerSlot *slot)
{
	QueenDatabaseWatch *w = queen_dbwatch;
	uint64		ticket = pg_atomic_add_fetch_u64(&w->asked, 1);

	for (;;)
	{
		queen_worker_poll_signals();
		if (pg_atomic_read_u64(&w->answered) >= ticket)
		{
			pg_read_barrier();
			if (pg_atomic_read_u32(&w->exists) != 0)
				return;
			queen_worker_set_state(slot, QUEEN_WORKER_WAITING);
		}
		else
		{
			/*
			 * Ask again at every turn while unanswered: a wake-up sent
			 * before the watch published its latch, or one consumed by a
			 * wait inside its catalog read, would otherwise leave it
			 * asleep with this ticket unseen.
			 */
			queen_worker_wake(&queen_broker->dbwatch);
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 QUEEN_DBWATCH_RETRY_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}
