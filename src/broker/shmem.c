/*-------------------------------------------------------------------------
 *
 * shmem.c
 *	  The broker's shared memory, worker registration, and what every
 *	  broker worker does the same way: start, connect to queen.database,
 *	  and bound its transactions with queen.push_statement_timeout.
 *
 * Everything here happens only when the library is in
 * shared_preload_libraries: the SQL door never needs shared memory.  The
 * size is fixed at postmaster start from queen.http_workers and
 * queen.fusion_shards (both PGC_POSTMASTER), requested in
 * shmem_request_hook (PostgreSQL 15 refuses it anywhere else) and laid out
 * once in shmem_startup_hook under AddinShmemInitLock.  After a crash the
 * postmaster reinitialises shared memory, so every ring and counter starts
 * clean together with the restarted workers; only maintenance mode is
 * carried over, from its state file (maintenance.c).
 *
 * Locking: worker slots are written by their own worker (state and
 * incarnation are atomics others read); rings have their own spinlocks;
 * the permit pool's controller state has a spinlock; counters, gauges and
 * the maintenance flag are atomics.
 *
 *-------------------------------------------------------------------------
 */
#include "broker.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/guc.h"
#include "utils/timeout.h"
#include "utils/wait_event.h"

QueenBrokerShared *queen_broker = NULL;

static shmem_request_hook_type queen_prev_shmem_request_hook = NULL;
static shmem_startup_hook_type queen_prev_shmem_startup_hook = NULL;

/* Fixed at preload, since both settings are PGC_POSTMASTER. */
static int	queen_layout_listeners = 0;
static int	queen_layout_shards = 0;

static Size
queen_broker_shmem_size(void)
{
	Size		size = MAXALIGN(sizeof(QueenBrokerShared));
	int			pairs = queen_layout_listeners * queen_layout_shards;

	size = add_size(size, mul_size(pairs, queen_ring_shmem_size(QUEEN_SUBMIT_RING_BYTES)));
	size = add_size(size, mul_size(pairs, queen_ring_shmem_size(QUEEN_VERDICT_RING_BYTES)));
	return size;
}

static void
queen_shmem_request(void)
{
	if (queen_prev_shmem_request_hook)
		queen_prev_shmem_request_hook();
	RequestAddinShmemSpace(queen_broker_shmem_size());
}

static void
queen_shmem_startup(void)
{
	bool		found;
	int			l,
				s;

	if (queen_prev_shmem_startup_hook)
		queen_prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	queen_broker = ShmemInitStruct("queen broker", queen_broker_shmem_size(), &found);
	if (!found)
	{
		char	   *base = (char *) queen_broker;
		Size		off = MAXALIGN(sizeof(QueenBrokerShared));

		memset(queen_broker, 0, sizeof(QueenBrokerShared));
		queen_broker->nlisteners = queen_layout_listeners;
		queen_broker->nshards = queen_layout_shards;
		for (l = 0; l < QUEEN_MAX_LISTENERS; l++)
		{
			pg_atomic_init_u32(&queen_broker->listeners[l].state, QUEEN_WORKER_STOPPED);
			pg_atomic_init_u32(&queen_broker->listeners[l].incarnation, 0);
		}
		pg_atomic_init_u32(&queen_broker->maintenance.state, QUEEN_WORKER_STOPPED);
		pg_atomic_init_u32(&queen_broker->maintenance.incarnation, 0);
		for (s = 0; s < QUEEN_MAX_SHARDS; s++)
		{
			pg_atomic_init_u32(&queen_broker->shards[s].state, QUEEN_WORKER_STOPPED);
			pg_atomic_init_u32(&queen_broker->shards[s].incarnation, 0);
		}
		for (l = 0; l < queen_layout_listeners; l++)
			for (s = 0; s < queen_layout_shards; s++)
			{
				queen_broker->submit_off[l][s] = off;
				queen_ring_init((QueenRing *) (base + off), QUEEN_SUBMIT_RING_BYTES);
				off += queen_ring_shmem_size(QUEEN_SUBMIT_RING_BYTES);
				queen_broker->verdict_off[s][l] = off;
				queen_ring_init((QueenRing *) (base + off), QUEEN_VERDICT_RING_BYTES);
				off += queen_ring_shmem_size(QUEEN_VERDICT_RING_BYTES);
			}

		pg_atomic_init_u64(&queen_broker->metrics.push_requests, 0);
		pg_atomic_init_u64(&queen_broker->metrics.push_messages, 0);
		pg_atomic_init_u64(&queen_broker->metrics.push_rejected, 0);
		pg_atomic_init_u64(&queen_broker->metrics.http_requests, 0);
		pg_atomic_init_u64(&queen_broker->metrics.commits, 0);
		pg_atomic_init_u64(&queen_broker->metrics.bundle_failures, 0);
		pg_atomic_init_u64(&queen_broker->metrics.segments, 0);
		pg_atomic_init_u64(&queen_broker->metrics.items, 0);
		pg_atomic_init_u64(&queen_broker->metrics.queued, 0);
		pg_atomic_init_u64(&queen_broker->metrics.duplicates, 0);
		pg_atomic_init_u64(&queen_broker->metrics.failed, 0);
		pg_atomic_init_u64(&queen_broker->metrics.exec_us, 0);
		pg_atomic_init_u64(&queen_broker->metrics.commit_us, 0);
		pg_atomic_init_u64(&queen_broker->metrics.started_at, (uint64) GetCurrentTimestamp());
		queen_permits_init(&queen_broker->permits);
		/* the zeroed struct is a valid start for the spool's atomics */
		pg_atomic_init_u32(&queen_broker->spool.db_healthy, 1);
		queen_maintenance_load();
	}
	LWLockRelease(AddinShmemInitLock);
}

QueenRing *
queen_submit_ring(int listener, int shard)
{
	return (QueenRing *) ((char *) queen_broker + queen_broker->submit_off[listener][shard]);
}

QueenRing *
queen_verdict_ring(int shard, int listener)
{
	return (QueenRing *) ((char *) queen_broker + queen_broker->verdict_off[shard][listener]);
}

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

/*
 * The first steps of every broker worker: signal handlers that let a flush
 * in progress finish (SIGTERM only sets a flag), a check that shared memory
 * is there, clean rings, and the slot.  A restart resets the rings this
 * worker is one end of before it publishes its new incarnation, so a peer
 * that sees the new incarnation knows that anything it sent before went to
 * the previous process.  Returns NULL (after logging) if there is no slot.
 */
static void queen_worker_attach(QueenWorkerSlot *slot);

QueenWorkerSlot *
queen_worker_begin(QueenWorkerKind kind, int index)
{
	static const char *const names[] = {"listener", "shard", "maintenance"};
	QueenWorkerSlot *slot;
	int			count;
	int			i;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	BackgroundWorkerUnblockSignals();

	count = queen_broker == NULL ? 0 :
		kind == QUEEN_LISTENER ? queen_broker->nlisteners :
		kind == QUEEN_SHARD ? queen_broker->nshards : 1;
	if (index < 0 || index >= count)
	{
		elog(LOG, "queen %s %d: no broker shared memory for it", names[kind], index);
		return NULL;
	}
	if (kind == QUEEN_MAINTENANCE)
	{
		queen_worker_attach(&queen_broker->maintenance);
		return &queen_broker->maintenance;
	}
	slot = kind == QUEEN_SHARD ? &queen_broker->shards[index] : &queen_broker->listeners[index];
	for (i = 0; i < (kind == QUEEN_SHARD ? queen_broker->nlisteners : queen_broker->nshards); i++)
	{
		int			l = kind == QUEEN_SHARD ? i : index;
		int			s = kind == QUEEN_SHARD ? index : i;

		queen_ring_reset(queen_submit_ring(l, s));
		queen_ring_reset(queen_verdict_ring(s, l));
	}
	queen_worker_attach(slot);
	return slot;
}

/*
 * Does queen.database exist?  Read with a plain heap scan of pg_database,
 * as the autovacuum launcher does: a process connected to no database can
 * read that shared catalog but not the relcache entries an index scan needs.
 */
static bool
queen_database_exists(void)
{
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tuple;
	bool		found = false;

	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	while (!found && (tuple = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		Form_pg_database db = (Form_pg_database) GETSTRUCT(tuple);

		found = strcmp(NameStr(db->datname), queen_database) == 0;
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	return found;
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
	if (ConfigReloadPending)
	{
		ConfigReloadPending = false;
		ProcessConfigFile(PGC_SIGHUP);
	}
}

/*
 * Connect to queen.database.  A connection to a missing database is FATAL
 * (exit 1, a restart 5 s later), so the start after a failed attempt comes
 * up connected to no database instead: it watches pg_database and exits 1
 * to reconnect once the database is there, without a crash loop.
 */
void
queen_worker_connect(QueenWorkerSlot *slot, const char *who)
{
	bool		logged = false;

	if (!slot->connect_attempted)
	{
		slot->connect_attempted = true;
		BackgroundWorkerInitializeConnection(queen_database, NULL, 0);
		slot->connect_attempted = false;
		return;
	}

	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	queen_worker_set_state(slot, QUEEN_WORKER_WAITING);
	for (;;)
	{
		bool		exists;

		queen_worker_poll_signals();
		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		exists = queen_database_exists();
		CommitTransactionCommand();
		if (exists)
		{
			/* exit 1: the postmaster starts us again, and that start connects */
			slot->connect_attempted = false;
			ereport(LOG,
					(errmsg("queen %s: database \"%s\" exists now; reconnecting",
							who, queen_database)));
			proc_exit(1);
		}
		if (!logged)
			ereport(LOG,
					(errmsg("queen %s: database \"%s\" (queen.database) does not exist; waiting for it",
							who, queen_database)));
		logged = true;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 2000L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
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

void
queen_worker_set_state(QueenWorkerSlot *slot, QueenWorkerState state)
{
	pg_atomic_write_u32(&slot->state, (uint32) state);
}

QueenWorkerState
queen_worker_state(QueenWorkerSlot *slot)
{
	return (QueenWorkerState) pg_atomic_read_u32(&slot->state);
}

/* Is every one of n workers in one of the states (bits 1 << state)? */
bool
queen_workers_all_in(QueenWorkerSlot *slots, int n, uint32 states)
{
	int			i;

	for (i = 0; i < n; i++)
		if (((1U << queen_worker_state(&slots[i])) & states) == 0)
			return false;
	return true;
}

void
queen_worker_wake(QueenWorkerSlot *slot)
{
	Latch	   *latch = slot->latch;

	if (latch != NULL)
		SetLatch(latch);
}

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
					"zstd_level=%d max_body_bytes=%d max_push_items=%d http_idle_timeout_ms=%d "
					"http_header_timeout_ms=%d http_body_timeout_ms=%d http_max_connections=%d "
					"push_permits=%d/%d/%d (min/initial/max) dedup_cache_mb=%d "
					"spool_directory=%s push_statement_timeout_ms=%d maintenance_mode=%s",
					who, queen_database, queen_http_listen_address, queen_http_port,
					queen_http_workers, queen_broker->nshards,
					queen_fusion_shards == 0 ? " (auto)" : "", queen_bundle_max,
					queen_fusion_hold_ms, queen_fusion_min_frames, queen_fusion_frames,
					queen_zstd_level, queen_max_body_bytes, queen_max_push_items,
					queen_http_idle_timeout_ms, queen_http_header_timeout_ms,
					queen_http_body_timeout_ms, queen_http_max_connections,
					queen_push_permits_min, queen_push_permits_initial,
					queen_push_permits_max, queen_dedup_cache_mb,
					queen_spool_directory, queen_push_statement_timeout_ms,
					queen_maintenance_mode_setting ? "on" : "off")));
}

static void
queen_register_worker(const char *type, const char *function, int index)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS;
	if (strcmp(function, "queen_listener_main") != 0)
		worker.bgw_flags |= BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	/* a worker that exits 1 comes back after this; it never crash-loops faster */
	worker.bgw_restart_time = 5;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "queen");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "%s", function);
	snprintf(worker.bgw_name, BGW_MAXLEN, "queen %s %d", type, index);
	snprintf(worker.bgw_type, BGW_MAXLEN, "queen %s", type);
	worker.bgw_main_arg = Int32GetDatum(index);
	RegisterBackgroundWorker(&worker);
}

/*
 * Called from _PG_init when preloaded: set up the hooks and register the
 * listeners and shards.  queen.http_workers = 0 turns the broker off.
 */
void
queen_broker_preload(void)
{
	int			needed;
	int			i;

	if (queen_http_workers <= 0)
	{
		ereport(LOG,
				(errmsg("queen: HTTP broker disabled (queen.http_workers = 0)")));
		return;
	}

	queen_layout_listeners = queen_http_workers;
	queen_layout_shards = queen_fusion_shards_effective();

	queen_prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = queen_shmem_request;
	queen_prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = queen_shmem_startup;

	needed = queen_layout_listeners + queen_layout_shards + 1;
	if (needed > max_worker_processes)
		ereport(WARNING,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("queen: the HTTP broker needs %d background workers (queen.http_workers = %d, queen.fusion_shards = %d, one maintenance worker) but max_worker_processes is %d",
						needed, queen_layout_listeners, queen_layout_shards,
						max_worker_processes),
				 errhint("Set max_worker_processes to at least %d plus what other extensions and parallel queries need, and restart.",
						 needed)));

	for (i = 0; i < queen_layout_shards; i++)
		queen_register_worker("shard", "queen_shard_main", i);
	for (i = 0; i < queen_layout_listeners; i++)
		queen_register_worker("listener", "queen_listener_main", i);
	queen_register_worker("maintenance", "queen_maintenance_main", 0);
}

/*
 * queen.push_statement_timeout around a broker transaction.  Background
 * workers get no statement_timeout from PostgreSQL (only a client's
 * statements do), so the worker arms the same timer itself: when it fires,
 * the process cancels its own query, and the lock wait or statement in
 * progress ends with an ERROR that rolls the transaction back.
 */
void
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
void
queen_statement_timeout_stop(bool check)
{
	disable_timeout(STATEMENT_TIMEOUT, false);
	if (check)
		CHECK_FOR_INTERRUPTS();
	else
		QueryCancelPending = false;
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
 * queen.test_fault, for the TAP tests only: true once when the setting
 * names this fault, then not again until the setting is emptied (any
 * shard's reload clears the mark), so a restarted worker does not fail
 * again.  Empty, the default, costs one comparison.
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
