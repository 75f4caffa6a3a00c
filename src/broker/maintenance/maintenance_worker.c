/*-------------------------------------------------------------------------
 *
 * maintenance_worker.c
 *	  The maintenance worker, which drains the disk spool (spool.c) into
 *	  the database exactly once while maintenance mode (maintenance_mode.c) is
 *	  off, samples the consumer lag for /metrics (lag.c), sorts stored
 *	  hashes into dedup runs (dedup_index.c), refreshes the stats tables
 *	  every queen.stats_interval (admin.c) and runs retention's phases
 *	  every queen.retention_interval (retention.c): the queues' rules,
 *	  the hashes' purge, expired dead letters and traces, idle partitions.
 *
 * The drain.  While maintenance mode is off, the worker takes finished
 * spool files oldest first and commits each one in one transaction
 * through the bundle engine (bundle.c), with the frames as spooled: the
 * message ids the clients were given, the original transactionIds, and a
 * full dedup probe, so an item whose transactionId is already stored comes
 * back duplicate and is dropped.  The transaction also inserts the file's
 * name into queen.spool_drained, and the file is deleted only after the
 * commit: a crash in between leaves a file the next attempt recognises and
 * deletes without replaying, whatever the queues' dedup windows.
 *
 * Failures.  A file that cannot be committed whole is not retried whole:
 * the drain stores it part by part, each part in a transaction of its own
 * with its own key in queen.spool_drained ("<file>#g<group>" for one
 * partition's items, "<file>#g<group>#i<item>" for one item), so what was
 * committed is never replayed and a smaller transaction fits where the
 * whole file did not (a replay longer than queen.push_statement_timeout).
 * A partition that fails goes item by item.  An item the database refuses
 * for a reason that will not pass by itself (a constraint, bad data) is
 * quarantined: kept under failed/ as a one-record spool file, counted, and
 * logged at WARNING; everything else of the file commits.  A part that
 * fails for a reason of the moment (a lock, a timeout, the database gone)
 * stays in the spool; its file is tried again after a growing delay of its
 * own, and later files go on meanwhile, except for their items of the
 * partitions it still holds, so a partition's items still commit in the
 * order spooled.  A file that cannot even be read five times in a row is
 * moved to failed/ whole.  When every item of a file is settled (stored,
 * found stored, or quarantined) its parts' keys are replaced by the file's
 * own and the file is deleted.
 *
 * This file is the worker and its schedule: which files go when, and
 * what a file that could not be finished holds back.  Draining one file
 * is drain_file.c's.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "drain.h"
#include "maintenance.h"
#include "spool.h"
#include "retention.h"
#include "admin.h"
#include "crypto.h"
#include "metrics.h"
#include "worker.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

/* Files drained per pass before the gauges are refreshed. */
#define QUEEN_DRAIN_FILES_PER_PASS	10

/* Retry delays after a failed drain. */
#define QUEEN_DRAIN_RETRY_MIN_MS	500
#define QUEEN_DRAIN_RETRY_MAX_MS	10000

/*
 * What the worker remembers of a file it could not finish: when to try it
 * again, and which partitions it still holds items of (later files' items
 * of those partitions wait for them, so a partition's order holds).
 */
typedef struct QueenDrainFile
{
	char		name[MAXPGPATH];	/* hash key */
	int			read_failures;	/* reads in a row that failed */
	TimestampTz retry_at;
	long		retry_ms;
	QueenDrainKey *pending;		/* in TopMemoryContext */
	int			npending;
	bool		seen;			/* still in the spool at the last survey */
} QueenDrainFile;

static MemoryContext queen_drain_cxt;	/* one pass of the loop */
static MemoryContext queen_file_cxt;	/* one file: its bytes and groups */
static HTAB *queen_drain_files = NULL;	/* QueenDrainFile by name */

/*
 * Retention (retention.c), phase by phase as the core's table lists them:
 * a per-partition phase takes its due partitions, then one step each in a
 * transaction of its own, so no partition row is held longer than one
 * step's segments and a push waits for one step at most; a batch phase
 * removes a bounded batch per transaction.  What each removed is counted
 * for /metrics.
 */
#define QUEEN_RETENTION_DUE_CAP		1000
#define QUEEN_RETENTION_MAX_ROWS	1000

/* A stats refresh or lag sample waits at least this many times as long as the last took. */
#define QUEEN_STATS_SPACING			4

typedef struct QueenRetentionPass
{
	MemoryContext cxt;			/* where the work list lives, across transactions */
	const QueenRetentionPhase *phase;
	QueenRetentionDue *due;
	int			ndue;
	int			i;				/* the partition a step body works on */
	QueenRetentionStep step;
	int64		removed;		/* a batch's */
} QueenRetentionPass;

static void
queen_retention_due_body(void *arg)
{
	QueenRetentionPass *p = (QueenRetentionPass *) arg;
	MemoryContext old = MemoryContextSwitchTo(p->cxt);

	p->ndue = p->phase->due(QUEEN_RETENTION_DUE_CAP, &p->due);
	MemoryContextSwitchTo(old);
}

static void
queen_retention_step_body(void *arg)
{
	QueenRetentionPass *p = (QueenRetentionPass *) arg;

	p->phase->step(&p->due[p->i], QUEEN_RETENTION_MAX_ROWS, &p->step);
}

static void
queen_retention_batch_body(void *arg)
{
	QueenRetentionPass *p = (QueenRetentionPass *) arg;

	p->removed = p->phase->batch(QUEEN_RETENTION_MAX_ROWS);
}

/* What a committed step removed, into the counters of its phase and rule. */
static void
queen_retention_count(const QueenRetentionPass *p)
{
	const QueenRetentionStep *st = &p->step;

	switch (p->phase->bit)
	{
		case QUEEN_PHASE_SEGMENTS:
			queen_count(p->due[p->i].max_wait ? QUEEN_COUNT_RET_MAX_WAIT :
						QUEEN_COUNT_RET_RETENTION, st->by_age);
			queen_count(QUEEN_COUNT_RET_COMPLETED, st->messages - st->by_age);
			queen_count(QUEEN_COUNT_RET_SEGMENTS, st->segments);
			break;
		case QUEEN_PHASE_HASHES:
			queen_count(QUEEN_COUNT_RET_HASHES, st->messages);
			break;
		case QUEEN_PHASE_PARTITIONS:
			queen_count(QUEEN_COUNT_RET_PARTITIONS, st->segments);
			break;
		case QUEEN_PHASE_DLQ:
			queen_count(QUEEN_COUNT_RET_DLQ, p->removed);
			break;
		case QUEEN_PHASE_TRACES:
			queen_count(QUEEN_COUNT_RET_TRACES, p->removed);
			break;
	}
}

/* One phase of a sweep; true when it left work for the next. */
static bool
queen_retention_phase_run(const QueenRetentionPhase *phase)
{
	QueenRetentionPass p;
	QueenTxResult result;
	bool		behind = false;

	memset(&p, 0, sizeof(p));
	p.cxt = CurrentMemoryContext;
	p.phase = phase;
	if (phase->batch != NULL)
	{
		if (!queen_worker_transact(phase->name, "maintenance", queen_retention_batch_body,
								   &p, &result))
			return false;
		queen_retention_count(&p);
		return p.removed == QUEEN_RETENTION_MAX_ROWS;
	}
	if (!queen_worker_transact("retention work list", "maintenance", queen_retention_due_body,
							   &p, &result))
		return false;
	for (p.i = 0; p.i < p.ndue; p.i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (ShutdownRequestPending)
			break;
		if (!queen_worker_transact(phase->name, "maintenance", queen_retention_step_body,
								   &p, &result))
			continue;
		queen_retention_count(&p);
		if (!p.step.done)
			behind = true;
	}
	return behind || p.ndue == QUEEN_RETENTION_DUE_CAP;
}

/* One sweep over every phase that is on; true when one left work for the next. */
static bool
queen_retention_sweep(void)
{
	const QueenRetentionPhase *phase;
	bool		behind = false;
	int			i;

	if (!queen_worker_extension_present())
		return false;
	for (i = 0; (phase = queen_retention_phase(i)) != NULL; i++)
		if (queen_retention_phase_on(phase) && queen_retention_phase_run(phase))
			behind = true;
	queen_metrics_retention_swept(GetCurrentTimestamp());
	return behind;
}

static void
queen_stats_refresh_body(void *arg)
{
	QueenAdminArgs a;
	QueenAdminAnswer ans;
	pg_uuid_t	none;

	StringInfoData counters;

	(void) arg;
	memset(&a, 0, sizeof(a));
	memset(&none, 0, sizeof(none));
	queen_admin_run(QUEEN_ADMIN_STATS_REFRESH, &none, &a, &ans);
	/* and the broker's own counters, for GET /api/v1/analytics/worker-metrics */
	initStringInfo(&counters);
	queen_metrics_history_json(&counters);
	queen_broker_history_record(counters.data);
}

/*
 * queen.stats_refresh() and a row of the broker's history, in a transaction
 * of its own; a failure is logged and skipped.
 */
static void
queen_stats_refresh(void)
{
	QueenTxResult result;

	if (queen_worker_extension_present())
		(void) queen_worker_transact("stats refresh", "maintenance", queen_stats_refresh_body,
									 NULL, &result);
}

/* The consumer lag for /metrics (lag.c), off the shards' path. */
static void
queen_lag_refresh(void)
{
	if (queen_worker_extension_present())
		queen_lag_sample();
}

/*
 * run() every interval_s, from when *next is reached.  The stats refresh
 * reads every partition and cursor row (16 s at a million partitions,
 * bench/million), and the lag sample's view every partition and cursor of
 * the queues consumers touched (10 s there), so the next run waits at least
 * QUEEN_STATS_SPACING times as long as this one took: each then has at
 * most a fifth of this worker and of a core, and retention, the indexer
 * and the other keep their turns.  statsAge and
 * queen_consumer_lag_age_seconds tell how old the numbers are.
 */
static void
queen_spaced_when_due(TimestampTz *next, int interval_s, void (*run) (void))
{
	TimestampTz start = GetCurrentTimestamp();
	TimestampTz took;

	if (interval_s <= 0 || start < *next)
		return;
	run();
	took = GetCurrentTimestamp() - start;
	*next = start + took +
		Max((TimestampTz) interval_s * USECS_PER_SEC - took, QUEEN_STATS_SPACING * took);
}

/* Refresh the gauges; returns the finished files, oldest first. */
static List *
queen_drain_survey(void)
{
	uint64		items;
	uint64		files,
				bytes;
	uint64		quarantined;
	List	   *names = queen_spool_list(&items);
	HASH_SEQ_STATUS seq;
	QueenDrainFile *st;
	ListCell   *lc;

	pg_atomic_write_u64(&queen_spool_state->pending_files, items);
	queen_spool_failed_stats(&files, &bytes, &quarantined);
	pg_atomic_write_u64(&queen_spool_state->failed_files, files);
	pg_atomic_write_u64(&queen_spool_state->failed_bytes, bytes);
	pg_atomic_write_u64(&queen_spool_state->quarantined_items, quarantined);

	/* forget files that are gone */
	hash_seq_init(&seq, queen_drain_files);
	while ((st = (QueenDrainFile *) hash_seq_search(&seq)) != NULL)
		st->seen = false;
	foreach(lc, names)
	{
		const char *name = (const char *) lfirst(lc);

		if (strlen(name) < MAXPGPATH &&
			(st = (QueenDrainFile *) hash_search(queen_drain_files, name, HASH_FIND, NULL)) != NULL)
			st->seen = true;
	}
	hash_seq_init(&seq, queen_drain_files);
	while ((st = (QueenDrainFile *) hash_seq_search(&seq)) != NULL)
		if (!st->seen)
		{
			if (st->pending)
				pfree(st->pending);
			hash_search(queen_drain_files, st->name, HASH_REMOVE, NULL);
		}
	return names;
}

/* Remember which partitions a file left pending, and when to try it again. */
static void
queen_drain_file_failed(QueenDrainFile *st, HTAB *blocked_by_it)
{
	HASH_SEQ_STATUS seq;
	QueenDrainKey *key;
	long		n = hash_get_num_entries(blocked_by_it);
	int			i = 0;

	if (st->pending)
		pfree(st->pending);
	st->pending = MemoryContextAlloc(TopMemoryContext, sizeof(QueenDrainKey) * Max(n, 1));
	hash_seq_init(&seq, blocked_by_it);
	while ((key = (QueenDrainKey *) hash_seq_search(&seq)) != NULL)
		st->pending[i++] = *key;
	st->npending = i;
	st->retry_at = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), st->retry_ms);
	st->retry_ms = Min(st->retry_ms * 2, QUEEN_DRAIN_RETRY_MAX_MS);
}

/*
 * One pass over the finished files, oldest first.  A file that cannot be
 * finished now is tried again after its own growing delay, and the files
 * after it go on meanwhile, except for their items of partitions it still
 * holds (so a partition's spooled items commit in the order spooled).
 * Returns the files finished.
 */
static int
queen_drain_pass(List *files)
{
	HTAB	   *blocked = queen_drain_keyset("queen drain blocked");
	TimestampTz now = GetCurrentTimestamp();
	ListCell   *lc;
	int			done = 0;

	foreach(lc, files)
	{
		const char *name = (const char *) lfirst(lc);
		QueenDrainFile *st;
		QueenDrainResult result;
		HTAB	   *mine;
		bool		found;
		int			i;

		if (done == QUEEN_DRAIN_FILES_PER_PASS || ShutdownRequestPending ||
			queen_maintenance_on())
			break;
		/* no latch wait between files */
		queen_worker_check_postmaster();
		if (strlen(name) >= MAXPGPATH)
			continue;
		st = (QueenDrainFile *) hash_search(queen_drain_files, name, HASH_ENTER, &found);
		if (!found)
		{
			st->read_failures = 0;
			st->retry_at = 0;
			st->retry_ms = QUEEN_DRAIN_RETRY_MIN_MS;
			st->pending = NULL;
			st->npending = 0;
			st->seen = true;
		}
		if (now < st->retry_at)
		{
			/* waiting for its turn: what it holds still goes first */
			for (i = 0; i < st->npending; i++)
				queen_drain_block(blocked, &st->pending[i]);
			continue;
		}

		MemoryContextSwitchTo(queen_file_cxt);
		mine = queen_drain_keyset("queen drain file blocked");
		{
			HASH_SEQ_STATUS seq;
			QueenDrainKey *key;

			/* blocked as of now, and what this file adds to it */
			hash_seq_init(&seq, blocked);
			while ((key = (QueenDrainKey *) hash_seq_search(&seq)) != NULL)
				queen_drain_block(mine, key);
		}
		result = queen_drain_file(st->name, &st->read_failures, mine);
		if (result == QUEEN_DRAIN_DONE)
		{
			if (st->pending)
				pfree(st->pending);
			hash_search(queen_drain_files, name, HASH_REMOVE, NULL);
			done++;
		}
		else
		{
			HASH_SEQ_STATUS seq;
			QueenDrainKey *key;

			queen_drain_file_failed(st, mine);
			MemoryContextSwitchTo(queen_drain_cxt);
			hash_seq_init(&seq, mine);
			while ((key = (QueenDrainKey *) hash_seq_search(&seq)) != NULL)
				queen_drain_block(blocked, key);
		}
		MemoryContextSwitchTo(queen_drain_cxt);
		MemoryContextReset(queen_file_cxt);
	}
	return done;
}

/*
 * A key that is set but cannot seal, said at start and after every reload:
 * pushes to encrypted queues are refused until it is mended (crypto.c).
 */
static void
queen_keys_announce(void)
{
	const char *problem = queen_crypto_problem();
	bool		set = (queen_encryption_key_setting && queen_encryption_key_setting[0]) ||
		(queen_encryption_key_file_setting && queen_encryption_key_file_setting[0]) ||
		(queen_encryption_key_previous_setting && queen_encryption_key_previous_setting[0]);

	if (set && problem != NULL)
		ereport(WARNING,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("queen: %s: pushes to encrypted queues are refused", problem),
				 errhint("Set queen.encryption_key to 64 hexadecimal characters and reload.")));
}

void
queen_maintenance_main(Datum arg)
{
	QueenWorkerSlot *slot;
	TimestampTz closing_since = 0;
	TimestampTz next_lag = 0;
	TimestampTz last_index = 0;
	TimestampTz last_retention = 0;
	TimestampTz next_stats = 0;
	bool		index_behind = false;
	bool		retention_behind = false;
	HASHCTL		ctl;

	slot = queen_worker_begin(QUEEN_MAINTENANCE, DatumGetInt32(arg));
	if (slot == NULL)
		proc_exit(0);
	queen_worker_connect(slot);
	pgstat_report_appname("queen maintenance");
	queen_drain_cxt = AllocSetContextCreate(TopMemoryContext, "queen drain",
											ALLOCSET_DEFAULT_SIZES);
	queen_file_cxt = AllocSetContextCreate(TopMemoryContext, "queen drain file",
										   ALLOCSET_DEFAULT_SIZES);
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = MAXPGPATH;
	ctl.entrysize = sizeof(QueenDrainFile);
	queen_drain_files = hash_create("queen drain files", 64, &ctl, HASH_ELEM | HASH_STRINGS);
	MemoryContextSwitchTo(queen_drain_cxt);
	/* .tmp files of shards that no longer exist (queen.fusion_shards shrank) */
	queen_spool_recover(-1, queen_broker->nshards);
	queen_worker_set_state(slot, QUEEN_WORKER_READY);
	queen_keys_announce();

	for (;;)
	{
		List	   *files;
		long		timeout = 1000;
		TimestampTz now;

		MemoryContextReset(queen_drain_cxt);
		/* a cancel between transactions has nothing to cancel */
		QueryCancelPending = false;
		CHECK_FOR_INTERRUPTS();
		if (queen_worker_reload())
			queen_keys_announce();
		/* every pass, so a reload while this worker was restarting counts too */
		if ((pg_atomic_read_u32(&queen_spool_state->setting_seen) != 0) !=
			queen_maintenance_mode_setting)
			queen_maintenance_set(queen_maintenance_mode_setting, true);
		now = GetCurrentTimestamp();
		if (ShutdownRequestPending)
		{
			/*
			 * At a cluster shutdown the listeners stop too: exit 0.  Alone
			 * (pg_terminate_backend), exit 1 (worker.c).
			 */
			if (closing_since == 0)
				closing_since = now;
			if (queen_workers_all_in(queen_broker->listeners, queen_broker->nlisteners,
									 QUEEN_WORKERS_GOING))
				proc_exit(0);
			if (queen_worker_alone(queen_broker->listeners, queen_broker->nlisteners,
								   closing_since, now))
				queen_worker_restart("maintenance");
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 50L, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
			continue;
		}

		/* the stats tables the overview routes read (admin.c), before the lag sample reads them */
		queen_spaced_when_due(&next_stats, queen_stats_interval_s, queen_stats_refresh);
		queen_spaced_when_due(&next_lag, queen_consumer_lag_interval_s, queen_lag_refresh);

		/* dedup runs (dedup_index.c): again at once while there is a backlog */
		if (TimestampDifferenceExceeds(last_index, now, 1000) || index_behind)
		{
			last_index = now;
			index_behind = queen_worker_extension_present() && queen_dedup_index_pass();
		}

		/* the queues' retention (retention.c): again at once while behind */
		if ((queen_retention_interval_ms > 0 &&
			 TimestampDifferenceExceeds(last_retention, now, queen_retention_interval_ms)) ||
			retention_behind)
		{
			last_retention = now;
			retention_behind = queen_retention_sweep();
		}

		files = queen_drain_survey();
		if (files != NIL && !queen_maintenance_on() && queen_worker_extension_present() &&
			queen_drain_pass(files) > 0)
			continue;
		if (files != NIL)
			timeout = 100;
		if (index_behind || retention_behind)
			timeout = 1;

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 timeout, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}
