/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  The runtime every broker worker uses: which kinds there are and how
 *	  they are registered, how a worker begins, handles its signals and
 *	  connects to queen.database, when it exits with which code, and the
 *	  one way a worker runs a transaction without dying of its errors.
 *
 * The transaction runner follows TimescaleDB's job runner: the callback
 * runs inside PG_TRY; on error the runner copies the error, aborts the
 * transaction and returns the SQLSTATE and message to its caller, which
 * answers the affected requests and carries on.  No callback may leave C
 * library code on the stack when it raises: the longjmp would skip it.
 * An ERROR outside the runner ends the process with exit code 1 and the
 * postmaster starts it again.
 *
 * Exit codes.  A worker exits only 0 or 1.  0 unregisters a background
 * worker for good, so it is kept for a cluster shutdown (every peer is
 * going too) and for a worker that has no shared memory to serve; a
 * worker terminated alone (pg_terminate_backend) exits 1 so the postmaster
 * starts it again 5 s later, and so does one that finds the postmaster
 * gone.  A missing database is no reason to exit: the workers that need it
 * wait for it before they connect (dbwatch.c).
 *
 * This file calls down into shmem.c (the layout and the slots) and hands
 * it each subsystem's size and init (queen_shmem_parts); none of those
 * calls back up, so the call graph has no cycle.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "worker.h"
#include "configure.h"
#include "codec.h"
#include "permits.h"
#include "maintenance/maintenance.h"
#include "maintenance/spool.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/pmsignal.h"
#include "utils/backend_status.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

/*
 * How long a worker that got SIGTERM waits to see its peers going too
 * before it decides it was terminated alone.
 */
#define QUEEN_ALONE_MS	500

/*
 * How often a worker on a standby looks whether its node was promoted:
 * PostgreSQL tells background workers nothing when recovery ends.
 */
#define QUEEN_PROMOTION_POLL_MS	100

/* "shard 3": this process's kind and index, for the log (set at begin) */
static char queen_worker_who[BGW_MAXLEN];

/* Which rings a kind is one end of (reset at every start). */
typedef enum QueenWorkerRings
{
	QUEEN_RINGS_NONE,
	QUEEN_RINGS_LISTENER,		/* submissions it writes, verdicts it reads */
	QUEEN_RINGS_SHARD			/* submissions it reads, verdicts it writes */
} QueenWorkerRings;

typedef struct QueenWorkerKindDef
{
	QueenWorkerKind kind;
	const char *name;			/* "queen <name> <index>" in ps and the logs */
	const char *function;		/* its main function, found by name */
	int			(*count) (void);	/* how many, from the settings, at preload */
	bool		backend;		/* may connect: to queen.database, or (the
								 * database watch) to none */
	QueenWorkerRings rings;
	QueenWorkerSlot *(*slot) (int index);	/* its slot in shared memory, or NULL */
} QueenWorkerKindDef;

static int
queen_count_listeners(void)
{
	return queen_http_workers;
}

static int
queen_count_one(void)
{
	return 1;
}

static QueenWorkerSlot *
queen_slot_shard(int index)
{
	return index < queen_broker->nshards ? &queen_broker->shards[index] : NULL;
}

static QueenWorkerSlot *
queen_slot_listener(int index)
{
	return index < queen_broker->nlisteners ? &queen_broker->listeners[index] : NULL;
}

static QueenWorkerSlot *
queen_slot_maintenance(int index)
{
	return index == 0 ? &queen_broker->maintenance : NULL;
}

static QueenWorkerSlot *
queen_slot_dbwatch(int index)
{
	return index == 0 ? &queen_broker->dbwatch : NULL;
}

/*
 * The kinds, in registration order.  Listeners never touch the database,
 * so they do not ask for a connection.  The database watch comes first:
 * the others that connect wait for its answer, so it must fit in
 * max_worker_processes whenever any of them does.  A new kind is one row
 * here, its slot in shmem.c's layout, and its main function.
 */
static const QueenWorkerKindDef queen_worker_kinds[] = {
	{QUEEN_DBWATCH, "database watch", "queen_dbwatch_main", queen_count_one,
	true, QUEEN_RINGS_NONE, queen_slot_dbwatch},
	{QUEEN_SHARD, "shard", "queen_shard_main", queen_fusion_shards_effective,
	true, QUEEN_RINGS_SHARD, queen_slot_shard},
	{QUEEN_LISTENER, "listener", "queen_listener_main", queen_count_listeners,
	false, QUEEN_RINGS_LISTENER, queen_slot_listener},
	{QUEEN_MAINTENANCE, "maintenance", "queen_maintenance_main", queen_count_one,
	true, QUEEN_RINGS_NONE, queen_slot_maintenance},
};

#define QUEEN_NKINDS	((int) lengthof(queen_worker_kinds))

static const QueenWorkerKindDef *
queen_worker_kind(QueenWorkerKind kind)
{
	int			i;

	for (i = 0; i < QUEEN_NKINDS; i++)
		if (queen_worker_kinds[i].kind == kind)
			return &queen_worker_kinds[i];
	elog(ERROR, "queen: unknown worker kind %d", (int) kind);
	return NULL;
}

/* ----------------------------------------------------------------
 *		Registration
 * ----------------------------------------------------------------
 */

static void
queen_register_worker(const QueenWorkerKindDef *def, int index)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS;
	if (def->backend)
		worker.bgw_flags |= BGWORKER_BACKEND_DATABASE_CONNECTION;
	/* on a hot standby too: the listeners answer there, the rest await promotion */
	worker.bgw_start_time = BgWorkerStart_ConsistentState;
	/* a worker that exits 1 comes back after this; it never crash-loops faster */
	worker.bgw_restart_time = 5;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "queen");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "%s", def->function);
	snprintf(worker.bgw_name, BGW_MAXLEN, "queen %s %d", def->name, index);
	snprintf(worker.bgw_type, BGW_MAXLEN, "queen %s", def->name);
	worker.bgw_main_arg = Int32GetDatum(index);
	RegisterBackgroundWorker(&worker);
}

/* Each subsystem's shared state, sized and laid out by its own functions. */
static const QueenShmemPart queen_shmem_parts[] = {
	{queen_metrics_shmem_size, queen_metrics_shmem_init},
	{queen_permits_shmem_size, queen_permits_shmem_init},
	{queen_spool_shmem_size, queen_spool_shmem_init},
	{queen_wake_shmem_size, queen_wake_shmem_init},
	{queen_lag_shmem_size, queen_lag_shmem_init},
	{queen_dbwatch_shmem_size, queen_dbwatch_shmem_init},
};

/*
 * Called from _PG_init when preloaded: set up the shared memory hooks and
 * register every worker of every kind.  queen.http_workers = 0 turns the
 * broker off.
 */
void
queen_broker_preload(void)
{
	int			counts[lengthof(queen_worker_kinds)];
	int			needed = 0;
	int			i,
				k;

	if (queen_http_workers <= 0)
	{
		ereport(LOG,
				(errmsg("queen: HTTP broker disabled (queen.http_workers = 0)")));
		return;
	}

	for (k = 0; k < QUEEN_NKINDS; k++)
	{
		counts[k] = queen_worker_kinds[k].count();
		needed += counts[k];
	}
	queen_shmem_install(queen_http_workers, queen_fusion_shards_effective(),
						queen_shmem_parts, lengthof(queen_shmem_parts));
	queen_wake_install();

	if (needed > max_worker_processes)
		ereport(WARNING,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("queen: the HTTP broker needs %d background workers (queen.http_workers = %d, queen.fusion_shards = %d, one maintenance worker, one database watch) but max_worker_processes is %d",
						needed, queen_http_workers, queen_fusion_shards_effective(),
						max_worker_processes),
				 errhint("Set max_worker_processes to at least %d plus what other extensions and parallel queries need, and restart.",
						 needed)));

	for (k = 0; k < QUEEN_NKINDS; k++)
		for (i = 0; i < counts[k]; i++)
			queen_register_worker(&queen_worker_kinds[k], i);
}

/* ----------------------------------------------------------------
 *		Lifecycle
 * ----------------------------------------------------------------
 */

static void
queen_worker_detach(int code, Datum arg)
{
	QueenWorkerSlot *slot = (QueenWorkerSlot *) DatumGetPointer(arg);
	int			l;

	(void) code;
	slot->latch = NULL;
	slot->pid = 0;
	pg_atomic_write_u32(&slot->state, QUEEN_WORKER_STOPPED);
	pg_atomic_fetch_add_u32(&slot->incarnation, 1);
	/* the listeners settle what a shard had not answered as soon as it is gone */
	for (l = 0; l < queen_broker->nlisteners; l++)
		if (&queen_broker->listeners[l] != slot)
			queen_worker_wake(&queen_broker->listeners[l]);
}

/* Claim a slot for this process; it is released when the process exits. */
static void
queen_worker_attach(QueenWorkerSlot *slot)
{
	slot->pid = MyProcPid;
	slot->latch = MyLatch;
	pg_atomic_fetch_add_u32(&slot->incarnation, 1);
	pg_write_barrier();
	pg_atomic_write_u32(&slot->state, QUEEN_WORKER_STARTING);
	on_shmem_exit(queen_worker_detach, PointerGetDatum(slot));
}

/* A kind's slot, or NULL when the layout has none for this index. */
static QueenWorkerSlot *
queen_worker_slot(QueenWorkerKind kind, int index)
{
	if (queen_broker == NULL || index < 0)
		return NULL;
	return queen_worker_kind(kind)->slot(index);
}

/*
 * The first steps of every broker worker: signal handlers that let a flush
 * in progress finish (SIGTERM only sets a flag), a check that shared memory
 * is there, clean rings, and the slot.  A restart resets the rings this
 * worker is one end of before it publishes its new incarnation, so a peer
 * that sees the new incarnation knows that anything it sent before went to
 * the previous process.  Returns NULL (after logging) if there is no slot.
 */
QueenWorkerSlot *
queen_worker_begin(QueenWorkerKind kind, int index)
{
	const QueenWorkerKindDef *def = queen_worker_kind(kind);
	QueenWorkerSlot *slot;
	int			i;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	BackgroundWorkerUnblockSignals();
	/* what this worker's commits make pending, it publishes itself (wake.c) */
	queen_wait_commit_publishes = false;

	slot = queen_worker_slot(kind, index);
	if (slot == NULL)
	{
		elog(LOG, "queen %s %d: no broker shared memory for it", def->name, index);
		return NULL;
	}
	if (def->rings != QUEEN_RINGS_NONE)
	{
		bool		shard = def->rings == QUEEN_RINGS_SHARD;

		for (i = 0; i < (shard ? queen_broker->nlisteners : queen_broker->nshards); i++)
		{
			int			l = shard ? i : index;
			int			s = shard ? index : i;

			queen_ring_reset(queen_submit_ring(l, s));
			queen_ring_reset(queen_verdict_ring(s, l));
		}
	}
	queen_worker_attach(slot);
	snprintf(queen_worker_who, sizeof(queen_worker_who), "%s %d", def->name, index);
	return slot;
}

/*
 * A SIGHUP between a worker's steps: re-read the settings.  An emptied
 * queen.test_fault clears its fired mark here, so the next value fires
 * once again.  Returns whether the settings were re-read.
 */
bool
queen_worker_reload(void)
{
	if (!ConfigReloadPending)
		return false;
	ConfigReloadPending = false;
	ProcessConfigFile(PGC_SIGHUP);
	if ((queen_test_fault_setting == NULL || queen_test_fault_setting[0] == '\0') &&
		queen_broker != NULL)
		pg_atomic_write_u32(&queen_broker->test_fault_fired, 0);
	return true;
}

/*
 * Between the waits of a worker that holds no work yet (waiting for its
 * database, its port): SIGTERM ends it with nothing to finish, SIGHUP
 * re-reads the settings.
 */
void
queen_worker_poll_signals(void)
{
	CHECK_FOR_INTERRUPTS();
	if (ShutdownRequestPending)
		proc_exit(0);
	(void) queen_worker_reload();
}

/*
 * A node in recovery (a standby, or a restore short of its end) takes no
 * writes, so a worker that would write has nothing to do there: it waits,
 * unconnected, until the node is promoted, with one line in the log and
 * neither errors nor restarts (it used not to start at all, and a client
 * met a closed port).  The listeners, which need no connection, run and
 * answer 503 with this state's reason (listener.c).  The state is set
 * first, so a listener never finds the shard merely "not running".
 */
static void
queen_worker_await_promotion(QueenWorkerSlot *slot)
{
	if (!RecoveryInProgress())
		return;
	queen_worker_set_state(slot, QUEEN_WORKER_STANDBY);
	ereport(LOG,
			(errmsg("queen %s: this node is a standby (in recovery); waiting for its promotion before serving",
					queen_worker_who)));
	while (RecoveryInProgress())
	{
		queen_worker_poll_signals();
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 QUEEN_PROMOTION_POLL_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
	ereport(LOG,
			(errmsg("queen %s: this node was promoted; starting to serve", queen_worker_who)));
	queen_worker_set_state(slot, QUEEN_WORKER_STARTING);
}

/*
 * Connect to queen.database once the node takes writes and the database
 * watch says the database exists (dbwatch.c says why a worker cannot look
 * for itself); until then the worker waits, unconnected.
 */
void
queen_worker_connect(QueenWorkerSlot *slot)
{
	queen_worker_await_promotion(slot);
	queen_dbwatch_await(slot);
	BackgroundWorkerInitializeConnection(queen_database, NULL, 0);

	/*
	 * Every statement of the broker is short; JIT's compilation is not
	 * (a few hundred milliseconds once a table's size makes a plan look
	 * expensive, measured on a retention work list over 1,000,000
	 * partitions), and a reload does not undo this.
	 */
	SetConfigOption("jit", "off", PGC_SUSET, PGC_S_OVERRIDE);

	/*
	 * The workers are superusers running the answers' SQL functions and the
	 * core's statements, which resolve operators by search_path: a schema
	 * another role may create objects in ("$user", public) must not be on
	 * it, or its operators would run with the broker's rights.
	 */
	SetConfigOption("search_path", "pg_catalog, queen, pg_temp", PGC_SUSET, PGC_S_OVERRIDE);
}

/*
 * Is the extension installed in the database this worker is connected
 * to?  Asked in a transaction of its own; the caller's memory context is
 * kept.
 */
bool
queen_worker_extension_present(void)
{
	MemoryContext cxt = CurrentMemoryContext;
	bool		present;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	present = queen_extension_installed();
	CommitTransactionCommand();
	MemoryContextSwitchTo(cxt);
	return present;
}

/*
 * How long a stopping worker waits for what it has outstanding: a listener
 * for its shards' verdicts, a shard (shard = true) for the listeners.  A
 * bundle in its statements is cancelled by queen.push_statement_timeout,
 * rolled back and spooled by its shard, which then answers; the listener
 * waits that long and a margin more, so it hears that answer, and a shard
 * waits longer than its listeners.  What a listener still lacks after its
 * wait has an unknown fate, and it spools it itself (listener.c): the
 * grace bounds a shutdown, it never decides what a client is told.
 */
int
queen_shutdown_grace_ms(bool shard)
{
	int			grace = 25000;

	if (queen_push_statement_timeout_ms > 0)
		grace = Min(queen_push_statement_timeout_ms, INT_MAX - 20000) + 10000;
	return shard ? grace + 5000 : grace;
}

/*
 * Was this worker terminated alone (pg_terminate_backend) rather than in
 * a cluster shutdown?  Its peers get the same SIGTERM at a shutdown, so
 * they are given a moment to show it before deciding.
 */
bool
queen_worker_alone(QueenWorkerSlot *peers, int npeers, TimestampTz closing_since,
				   TimestampTz now)
{
	return !queen_workers_all_in(peers, npeers, QUEEN_WORKERS_GOING) &&
		TimestampDifferenceExceeds(closing_since, now, QUEEN_ALONE_MS);
}

/*
 * A worker terminated alone: exit 1 so the postmaster starts it again,
 * where exit 0 would unregister it for good.  The caller has finished or
 * handed on what it held.
 */
void
queen_worker_restart(const char *who)
{
	ereport(LOG,
			(errmsg("queen %s: terminated while the broker runs; restarting", who)));
	proc_exit(1);
}

/*
 * Exit (1, as after any crash of the postmaster's children) once the
 * postmaster is gone.  For loops that may not wait on their latch for a
 * long time under load, where WL_EXIT_ON_PM_DEATH would have noticed.
 */
void
queen_worker_check_postmaster(void)
{
	if (!PostmasterIsAlive())
		proc_exit(1);
}

/* ----------------------------------------------------------------
 *		The transaction runner
 * ----------------------------------------------------------------
 */

/*
 * queen.push_statement_timeout around a broker transaction.  Background
 * workers get no statement_timeout from PostgreSQL (only a client's
 * statements do), so the worker arms the same timer itself: when it fires,
 * the process cancels its own query, and the lock wait or statement in
 * progress ends with an ERROR that rolls the transaction back.
 */
static void
queen_statement_timeout_start(void)
{
	if (queen_push_statement_timeout_ms > 0)
		enable_timeout_after(STATEMENT_TIMEOUT, queen_push_statement_timeout_ms);
}

/*
 * Disarm it.  With check, a cancel that arrived before this point raises
 * its ERROR now, before COMMIT, so a transaction is never reported failed
 * after it committed.
 */
static void
queen_statement_timeout_stop(bool check)
{
	disable_timeout(STATEMENT_TIMEOUT, false);
	if (check)
		CHECK_FOR_INTERRUPTS();
	else
		QueryCancelPending = false;
}

/*
 * Run body(arg) in a transaction of its own, under a snapshot and
 * queen.push_statement_timeout, and commit.  On error: log it as
 * "queen <log_as>: <what> failed" (unless log_as is NULL: the caller logs
 * it with its own context), count a statement timeout, abort the
 * transaction and return false with the SQLSTATE, its class and the
 * message in result, allocated in the caller's memory context, which is
 * current again on return either way.  On success the timings say how
 * long the statements and the COMMIT took.
 */
bool
queen_worker_transact(const char *what, const char *log_as, QueenTxBody body, void *arg,
					  QueenTxResult *result)
{
	MemoryContext cxt = CurrentMemoryContext;
	volatile TimestampTz before_commit = 0;
	volatile bool ok = false;
	TimestampTz start = GetCurrentTimestamp();
	TimestampTz end;
	char		activity[64];

	memset(result, 0, sizeof(QueenTxResult));
	snprintf(activity, sizeof(activity), "queen: %s", what);
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PG_TRY();
	{
		PushActiveSnapshot(GetTransactionSnapshot());
		pgstat_report_activity(STATE_RUNNING, activity);
		queen_statement_timeout_start();
		body(arg);
		queen_statement_timeout_stop(true);
		PopActiveSnapshot();
		before_commit = GetCurrentTimestamp();
		CommitTransactionCommand();
		ok = true;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		queen_statement_timeout_stop(false);
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		AbortCurrentTransaction();
		result->sqlerrcode = edata->sqlerrcode;
		result->sqlclass = ERRCODE_TO_CATEGORY(edata->sqlerrcode);
		if (edata->sqlerrcode == ERRCODE_QUERY_CANCELED)
			queen_count(QUEEN_COUNT_STATEMENT_TIMEOUTS, 1);
		if (log_as != NULL)
			ereport(LOG,
					(errmsg("queen %s: %s failed: %s", log_as, what, edata->message),
					 edata->detail ? errdetail_internal("%s", edata->detail) : 0));
		result->message = pstrdup(edata->message);
		FreeErrorData(edata);
	}
	PG_END_TRY();
	end = GetCurrentTimestamp();
	MemoryContextSwitchTo(cxt);
	pgstat_report_activity(STATE_IDLE, NULL);
	pgstat_report_stat(false);

	result->ok = ok;
	result->exec_us = ok ? before_commit - start : 0;
	result->commit_us = ok ? end - before_commit : 0;
	return ok;
}

/* ----------------------------------------------------------------
 *		Shared by the kinds
 * ----------------------------------------------------------------
 */

/*
 * Which shard owns (tenant, queue, partition): FNV-1a 64 over the
 * partition's identity bytes, as Queen's fusion keys shards (tenant
 * included, so tenants never share segments).
 */
int
queen_shard_of(const pg_uuid_t *tenant, const char *queue, Size qlen,
			   const char *partition, Size plen, int nshards)
{
	char		ident[QUEEN_IDENT_MAX];
	Size		len = queen_partition_ident(ident, tenant, queue, qlen, partition, plen);
	uint64		h = UINT64CONST(0xcbf29ce484222325);
	Size		i;

	for (i = 0; i < len; i++)
		h = (h ^ (unsigned char) ident[i]) * UINT64CONST(0x100000001b3);
	return (int) (h % (uint64) nshards);
}

/* The effective configuration, once per worker start. */
void
queen_broker_log_config(const char *who)
{
	ereport(LOG,
			(errmsg("queen %s: config: database=%s http=%s:%d http_workers=%d fusion_shards=%d%s "
					"bundle_max=%d fusion_hold_ms=%d fusion_min_frames=%d fusion_frames=%d (inert) "
					"zstd_level=%d max_body_bytes=%d max_push_items=%d max_ack_items=%d "
					"pop_max_bytes=%d max_lease_seconds=%d consume_lock_timeout_ms=%d "
					"http_idle_timeout_ms=%d "
					"http_header_timeout_ms=%d http_body_timeout_ms=%d http_max_connections=%d "
					"push_permits=%d/%d/%d (min/initial/max) dedup_cache_mb=%d "
					"spool_directory=%s push_statement_timeout_ms=%d maintenance_mode=%s",
					who, queen_database, queen_http_listen_address, queen_http_port,
					queen_http_workers, queen_broker->nshards,
					queen_fusion_shards == 0 ? " (auto)" : "", queen_bundle_max,
					queen_fusion_hold_ms, queen_fusion_min_frames, queen_fusion_frames,
					queen_zstd_level, queen_max_body_bytes, queen_max_push_items,
					queen_max_ack_items, queen_pop_max_bytes, queen_max_lease_seconds,
					queen_consume_lock_timeout_ms,
					queen_http_idle_timeout_ms, queen_http_header_timeout_ms,
					queen_http_body_timeout_ms, queen_http_max_connections,
					queen_push_permits_min, queen_push_permits_initial,
					queen_push_permits_max, queen_dedup_cache_mb,
					queen_spool_directory, queen_push_statement_timeout_ms,
					queen_maintenance_mode_setting ? "on" : "off")));
}

/*
 * queen.test_fault, for the TAP tests only: true once when the setting
 * names this fault, then not again until the setting is emptied (any
 * reload clears the mark, queen_worker_reload), so a restarted worker does
 * not fail again.  Empty, the default, costs one comparison.
 */
bool
queen_test_fault(const char *name)
{
	uint32		expected = 0;

	if (queen_test_fault_setting == NULL || queen_test_fault_setting[0] == '\0' ||
		strcmp(queen_test_fault_setting, name) != 0 || queen_broker == NULL)
		return false;
	if (!pg_atomic_compare_exchange_u32(&queen_broker->test_fault_fired, &expected, 1))
		return false;
	ereport(LOG, (errmsg("queen: queen.test_fault \"%s\" fires", name)));
	return true;
}
