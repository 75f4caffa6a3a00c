/*-------------------------------------------------------------------------
 *
 * maintenance.c
 *	  Maintenance mode and the maintenance worker, which drains the disk
 *	  spool (spool.c) into the database exactly once.
 *
 * The flag.  Shared memory holds it (the shards read it before every
 * flush); maintenance.state in the spool directory keeps it across
 * restarts and crashes.  Two things change it: POST
 * /api/v1/system/maintenance, and a reload that changes
 * queen.maintenance_mode.  The last change wins.  The file also records
 * the setting last applied, so a setting edited while the server was down
 * counts as a change at the next start.
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
 * Errors follow TimescaleDB's job runner: each file's transaction runs in
 * PG_TRY; on error the worker logs, rolls back and retries later with a
 * growing delay.  An error that is not about the database's state (a
 * class outside connection, resources, locks, operator intervention and
 * system errors) five times in a row on the same file moves the file to
 * failed/, where an operator can look at it.  Later files wait for the
 * head one, so a partition's spooled items commit in the order spooled.
 *
 *-------------------------------------------------------------------------
 */
#include "broker.h"

#include <sys/stat.h>
#include <unistd.h>

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/pmsignal.h"
#include "tcop/tcopprot.h"
#include "utils/backend_status.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/json.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#define QUEEN_STATE_FILE		"maintenance.state"

/* Files drained per pass before the gauges are refreshed. */
#define QUEEN_DRAIN_FILES_PER_PASS	10

/* Retry delays after a failed drain. */
#define QUEEN_DRAIN_RETRY_MIN_MS	500
#define QUEEN_DRAIN_RETRY_MAX_MS	10000

/* Failures in a row, not about the database's state, before quarantine. */
#define QUEEN_DRAIN_MAX_ATTEMPTS	5

/* ----------------------------------------------------------------
 *		The flag
 * ----------------------------------------------------------------
 */

bool
queen_maintenance_on(void)
{
	return queen_broker != NULL && pg_atomic_read_u32(&queen_broker->spool.maintenance) != 0;
}

/*
 * At shared memory initialisation (postmaster start and crash restart):
 * the saved flag, unless the setting changed since it was saved.
 */
void
queen_maintenance_load(void)
{
	char	   *path = queen_spool_path(QUEEN_STATE_FILE);
	FILE	   *f = AllocateFile(path, "r");
	int			enabled = -1,
				setting = -1;
	bool		on = queen_maintenance_mode_setting;

	if (f != NULL)
	{
		if (fscanf(f, "enabled=%d setting=%d", &enabled, &setting) == 2 &&
			(setting != 0) == queen_maintenance_mode_setting)
			on = enabled != 0;
		FreeFile(f);
	}
	pg_atomic_write_u32(&queen_broker->spool.maintenance, on ? 1 : 0);
	pg_atomic_write_u32(&queen_broker->spool.setting_seen, queen_maintenance_mode_setting ? 1 : 0);
	if (on)
		ereport(LOG, (errmsg("queen: maintenance mode is on; pushes go to the spool")));
	pfree(path);
}

/* Write maintenance.state durably (temporary file, fsync, rename). */
static bool
queen_maintenance_save(bool on, bool setting, char **why)
{
	char	   *path = queen_spool_path(QUEEN_STATE_FILE);
	char	   *tmp = psprintf("%s.%d", path, MyProcPid);
	FILE	   *f;
	bool		ok;

	if (!queen_spool_ensure_dir(queen_spool_directory, why))
		return false;
	f = AllocateFile(tmp, PG_BINARY_W);
	if (f == NULL)
	{
		*why = psprintf("could not create \"%s\": %m", tmp);
		return false;
	}
	ok = fprintf(f, "enabled=%d setting=%d\n", on ? 1 : 0, setting ? 1 : 0) > 0 &&
		fflush(f) == 0 && pg_fsync(fileno(f)) == 0;
	if (FreeFile(f) != 0)
		ok = false;
	if (!ok || rename(tmp, path) != 0)
	{
		*why = psprintf("could not write \"%s\": %m", path);
		(void) unlink(tmp);
		return false;
	}
	return queen_spool_sync_dir(queen_spool_directory, why);
}

/*
 * Turn maintenance mode on or off.  setting says the change comes from
 * queen.maintenance_mode (which it then records as applied).  The flag
 * changes even if it cannot be saved: the operator asked for it now.
 */
void
queen_maintenance_set(bool on, bool setting)
{
	char	   *why = NULL;
	int			s;

	if (setting)
		pg_atomic_write_u32(&queen_broker->spool.setting_seen, on ? 1 : 0);
	pg_atomic_write_u32(&queen_broker->spool.maintenance, on ? 1 : 0);
	if (!queen_maintenance_save(on, pg_atomic_read_u32(&queen_broker->spool.setting_seen) != 0,
								&why))
		ereport(WARNING,
				(errcode_for_file_access(),
				 errmsg("queen: maintenance mode is %s, but it could not be saved for a restart: %s",
						on ? "on" : "off", why)));
	ereport(LOG,
			(errmsg("queen: maintenance mode %s (%s)", on ? "enabled" : "disabled",
					setting ? "queen.maintenance_mode" : "HTTP")));
	/* shards finish their spool files, the drain starts or stops */
	for (s = 0; s < queen_broker->nshards; s++)
		queen_worker_wake(&queen_broker->shards[s]);
	queen_worker_wake(&queen_broker->maintenance);
}

/*
 * Items in the spool not yet committed: finished files as the maintenance
 * worker last counted them, plus the shards' open files as of now.
 */
uint64
queen_spool_pending(void)
{
	uint64		items = pg_atomic_read_u64(&queen_broker->spool.pending_files);
	int			s;

	for (s = 0; s < queen_broker->nshards; s++)
		items += pg_atomic_read_u32(&queen_broker->spool.active_items[s]);
	return items;
}

/* Can the spool take a write?  (Its directory is created on first use.) */
static bool
queen_spool_writable(void)
{
	struct stat st;

	if (stat(queen_spool_directory, &st) == 0)
		return access(queen_spool_directory, W_OK | X_OK) == 0;
	return true;
}

/*
 * The JSON of the buffer routes.  shape 0: GET /api/v1/status/buffers;
 * 1: GET /api/v1/system/maintenance; 2: the answer to its POST.
 */
void
queen_buffers_json(StringInfo out, int shape)
{
	QueenSpoolShared *sp = &queen_broker->spool;
	bool		on = queen_maintenance_on();
	uint64		pending = queen_spool_pending();
	uint64		failed = pg_atomic_read_u64(&sp->failed_files);
	uint64		failed_bytes = pg_atomic_read_u64(&sp->failed_bytes);
	bool		db = pg_atomic_read_u32(&sp->db_healthy) != 0;
	bool		healthy = queen_spool_writable();

	if (shape == 0)
	{
		appendStringInfo(out, "{\"pending\":" UINT64_FORMAT ",\"failed\":" UINT64_FORMAT
						 ",\"dbHealthy\":%s,\"worker\":0}",
						 pending, failed, db ? "true" : "false");
		return;
	}
	appendStringInfo(out, "{\"maintenanceMode\":%s,", on ? "true" : "false");
	if (shape == 1)
		appendStringInfoString(out, "\"popMaintenanceMode\":false,");
	appendStringInfo(out, "\"bufferedMessages\":" UINT64_FORMAT ",\"bufferHealthy\":%s,",
					 pending, healthy ? "true" : "false");
	if (shape == 1)
		appendStringInfo(out, "\"bufferStats\":{\"pendingCount\":" UINT64_FORMAT
						 ",\"failedCount\":" UINT64_FORMAT ",\"dbHealthy\":%s,"
						 "\"failedFiles\":{\"count\":" UINT64_FORMAT ",\"totalBytes\":" UINT64_FORMAT
						 ",\"totalMB\":%.2f,\"failoverCount\":0,\"qos0Count\":0}}}",
						 pending, failed, db ? "true" : "false", failed, failed_bytes,
						 (double) failed_bytes / (1024.0 * 1024.0));
	else
		appendStringInfo(out, "\"message\":\"%s\"}",
						 on ? "Maintenance mode ENABLED. All PUSHes routing to file buffer." :
						 "Maintenance mode DISABLED. Background processor will drain buffer to DB.");
}

/* ----------------------------------------------------------------
 *		The drain
 * ----------------------------------------------------------------
 */

/* One partition's frames from a file, in file order. */
typedef struct QueenDrainKey
{
	uint16		len;
	char		ident[QUEEN_IDENT_MAX];
} QueenDrainKey;

typedef struct QueenDrainGroup
{
	QueenDrainKey key;
	pg_uuid_t	tenant;
	char	   *queue;
	char	   *partition;
	StringInfoData frames;
	int			nframes;
} QueenDrainGroup;

/* Bytes of a file that cannot be drained. */
typedef struct QueenDrainDamage
{
	Size		start;
	Size		end;
	bool		truncated;		/* the rest of the file, not one record */
} QueenDrainDamage;

/*
 * Keep a file's unreadable bytes under failed/ and say so.  Done once the
 * file's transaction is settled (committed now or before), so retries do
 * not count the damage twice.
 */
static void
queen_drain_report_damage(const char *name, const char *data, List *damage)
{
	ListCell   *lc;

	foreach(lc, damage)
	{
		QueenDrainDamage *d = (QueenDrainDamage *) lfirst(lc);
		char	   *kept = psprintf("%s.at%zu.damaged", name, d->start);
		char	   *why = NULL;
		bool		saved = queen_spool_quarantine(kept, data + d->start, d->end - d->start, &why);

		pg_atomic_fetch_add_u64(&queen_broker->spool.records_damaged, 1);
		ereport(WARNING,
				(errmsg("queen spool: %s: record at byte %zu is %s (%zu bytes); %s",
						name, d->start,
						d->truncated ? "truncated or unreadable to the end of the file" :
						"damaged (its checksum does not match); skipped",
						d->end - d->start,
						saved ? psprintf("its bytes are kept as failed/%s", kept) :
						psprintf("its bytes could not be kept: %s", why))));
	}
}

typedef enum QueenDrainResult
{
	QUEEN_DRAIN_DONE,			/* committed (or found committed) and removed */
	QUEEN_DRAIN_RETRY			/* left in place; try again later */
} QueenDrainResult;

static MemoryContext queen_drain_cxt;	/* one pass of the loop */
static MemoryContext queen_file_cxt;	/* one file: its bytes and groups */
static char *queen_drain_head = NULL;	/* the file failing, and how often */
static int	queen_drain_attempts = 0;

/* Errors that say the database cannot take the file now, not that it never will. */
static bool
queen_error_transient(int sqlerrcode)
{
	int			class = ERRCODE_TO_CATEGORY(sqlerrcode);

	return class == ERRCODE_CONNECTION_EXCEPTION ||
		class == ERRCODE_TRANSACTION_ROLLBACK ||
		class == ERRCODE_INSUFFICIENT_RESOURCES ||
		class == ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE ||
		class == ERRCODE_OPERATOR_INTERVENTION ||
		class == ERRCODE_SYSTEM_ERROR ||
		sqlerrcode == ERRCODE_UNDEFINED_TABLE || sqlerrcode == ERRCODE_UNDEFINED_FUNCTION;
}

/* Run one statement of the drain's bookkeeping; returns the rows processed. */
static uint64
queen_drain_sql(const char *sql, const char *file, int64 items)
{
	Oid			types[2] = {TEXTOID, INT8OID};
	Datum		values[2];
	int			rc;
	uint64		rows;

	values[0] = CStringGetTextDatum(file);
	values[1] = Int64GetDatum(items);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "queen: SPI_connect failed");
	rc = SPI_execute_with_args(sql, 2, types, values, NULL, false, 0);
	if (rc < 0)
		elog(ERROR, "queen: drain bookkeeping failed: %s", SPI_result_code_string(rc));
	rows = SPI_processed;		/* SPI_finish restores the caller's count */
	SPI_finish();
	return rows;
}

/* Put a file aside under failed/ (moved whole) and say why. */
static void
queen_drain_quarantine_file(const char *name, const char *why)
{
	char	   *from = queen_spool_path(name);
	char	   *dir = queen_spool_path("failed");
	char	   *to = psprintf("%s/%s", dir, name);
	char	   *err = NULL;

	if (!queen_spool_ensure_dir(dir, &err) || rename(from, to) != 0)
		ereport(WARNING,
				(errcode_for_file_access(),
				 errmsg("queen spool: could not move \"%s\" to \"%s\": %m", from, to)));
	else
	{
		(void) queen_spool_sync_dir(queen_spool_directory, &err);
		(void) queen_spool_sync_dir(dir, &err);
		ereport(WARNING,
				(errmsg("queen spool: \"%s\" moved to \"%s\" after %d failed attempts: %s",
						from, to, QUEEN_DRAIN_MAX_ATTEMPTS, why)));
	}
}

/* Count a failure on the head file; true if it should be set aside now. */
static bool
queen_drain_failed_again(const char *name)
{
	if (queen_drain_head == NULL || strcmp(queen_drain_head, name) != 0)
	{
		if (queen_drain_head)
			pfree(queen_drain_head);
		queen_drain_head = MemoryContextStrdup(TopMemoryContext, name);
		queen_drain_attempts = 0;
	}
	return ++queen_drain_attempts >= QUEEN_DRAIN_MAX_ATTEMPTS;
}

/*
 * Split a file into partition groups, and list the ranges that cannot be
 * read.  Returns the groups in order of first appearance.  Not inlined:
 * its locals must stay out of the caller's PG_TRY frame.
 */
static pg_noinline List *
queen_drain_parse(const char *data, Size len, int64 *items, List **damage)
{
	HASHCTL		ctl;
	HTAB	   *groups;
	List	   *order = NIL;
	Size		pos = 0;
	Size		bad;
	QueenSpoolRecord rec;
	QueenSpoolStep step;

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(QueenDrainKey);
	ctl.entrysize = sizeof(QueenDrainGroup);
	ctl.hcxt = CurrentMemoryContext;
	groups = hash_create("queen drain groups", 64, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	*items = 0;

	while ((step = queen_spool_next(data, len, &pos, &rec, &bad)) != QUEEN_SPOOL_END)
	{
		QueenDrainKey key;
		QueenDrainGroup *g;
		bool		found;

		if (step != QUEEN_SPOOL_RECORD)
		{
			QueenDrainDamage *d = palloc(sizeof(QueenDrainDamage));

			d->start = bad;
			d->end = pos;
			d->truncated = step == QUEEN_SPOOL_TRUNCATED;
			*damage = lappend(*damage, d);
			continue;
		}

		memset(&key, 0, sizeof(key));
		key.len = (uint16) queen_partition_ident(key.ident, &rec.tenant, rec.queue, rec.qlen,
												 rec.partition, rec.plen);
		g = (QueenDrainGroup *) hash_search(groups, &key, HASH_ENTER, &found);
		if (!found)
		{
			g->tenant = rec.tenant;
			g->queue = pnstrdup(rec.queue, rec.qlen);
			g->partition = pnstrdup(rec.partition, rec.plen);
			initStringInfo(&g->frames);
			g->nframes = 0;
			order = lappend(order, g);
		}
		appendBinaryStringInfo(&g->frames, rec.frames, (int) rec.frames_len);
		g->nframes += (int) rec.nframes;
		*items += rec.nframes;
	}
	return order;
}

/*
 * Drain one finished file.  The caller's memory context is reset after.
 */
static QueenDrainResult
queen_drain_file(const char *name)
{
	char	   *path = queen_spool_path(name);
	char	   *why = NULL;
	Size		len = 0;
	char	   *data;
	List	   *groups;
	int64		items;
	volatile bool ok = false;
	volatile bool already = false;
	volatile int sqlerrcode = 0;
	char	   *message = NULL;
	uint64		queued = 0,
				dropped = 0;
	List	   *damage = NIL;
	MemoryContext cxt = CurrentMemoryContext;

	data = queen_spool_read_file(path, &len, &why);
	if (data == NULL)
	{
		ereport(WARNING, (errcode_for_file_access(), errmsg("queen spool: %s", why)));
		if (queen_drain_failed_again(name))
			queen_drain_quarantine_file(name, why);
		return QUEEN_DRAIN_RETRY;
	}
	groups = queen_drain_parse(data, len, &items, &damage);

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PG_TRY();
	{
		PushActiveSnapshot(GetTransactionSnapshot());
		pgstat_report_activity(STATE_RUNNING, "queen: drain spool file");
		queen_statement_timeout_start();
		/* the record first: a file committed before inserts nothing */
		already = queen_drain_sql("INSERT INTO queen.spool_drained (file, items) VALUES ($1, $2)"
								  " ON CONFLICT (file) DO NOTHING",
								  name, items) == 0;
		if (!already && groups != NIL)
		{
			int			ngroups = list_length(groups);
			QueenBundleGroup *bgs = palloc0(sizeof(QueenBundleGroup) * ngroups);
			int			i,
						k;

			for (i = 0; i < ngroups; i++)
			{
				QueenDrainGroup *g = (QueenDrainGroup *) list_nth(groups, i);

				queen_bundle_group_init(&bgs[i], &g->tenant, g->queue, g->partition,
										g->frames.data, g->frames.len, g->nframes);
			}
			queen_bundle_push(bgs, ngroups);
			for (i = 0; i < ngroups; i++)
				for (k = 0; k < bgs[i].nframes; k++)
				{
					if (bgs[i].frames[k].status == QUEEN_SEGMENT_QUEUED)
						queued++;
					else
						dropped++;
				}
		}
		if (!already)
			(void) queen_drain_sql("DELETE FROM queen.spool_drained WHERE drained_at < now() - interval '1 day'",
								   name, 0);
		queen_statement_timeout_stop(true);
		PopActiveSnapshot();
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
		sqlerrcode = edata->sqlerrcode;
		message = pstrdup(edata->message);
		FreeErrorData(edata);
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	pgstat_report_activity(STATE_IDLE, NULL);
	pgstat_report_stat(false);

	if (!ok)
	{
		bool		transient = queen_error_transient(sqlerrcode);

		if (sqlerrcode == ERRCODE_QUERY_CANCELED)
			pg_atomic_fetch_add_u64(&queen_broker->spool.statement_timeouts, 1);
		pg_atomic_write_u32(&queen_broker->spool.db_healthy, transient ? 0 : 1);
		ereport(LOG,
				(errmsg("queen spool: draining \"%s\" failed (SQLSTATE %s): %s; it stays in the spool",
						name, unpack_sql_state(sqlerrcode), message)));
		if (!transient && queen_drain_failed_again(name))
			queen_drain_quarantine_file(name, message);
		return QUEEN_DRAIN_RETRY;
	}

	pg_atomic_write_u32(&queen_broker->spool.db_healthy, 1);
	queen_drain_report_damage(name, data, damage);
	if (already)
		ereport(LOG,
				(errmsg("queen spool: \"%s\" was committed before (it is in queen.spool_drained); removed without replaying it",
						name)));
	else
	{
		pg_atomic_fetch_add_u64(&queen_broker->spool.items_drained, queued);
		pg_atomic_fetch_add_u64(&queen_broker->spool.items_dropped, dropped);
		pg_atomic_fetch_add_u64(&queen_broker->spool.files_drained, 1);
		ereport(LOG,
				(errmsg("queen spool: drained \"%s\": " UINT64_FORMAT " items committed, " UINT64_FORMAT " already stored (dropped as duplicates)",
						name, queued, dropped)));
	}
	if (unlink(path) != 0)
		ereport(WARNING,
				(errcode_for_file_access(),
				 errmsg("queen spool: could not remove drained \"%s\": %m; it will not be replayed", path)));
	else if (!queen_spool_sync_dir(queen_spool_directory, &why))
		ereport(WARNING, (errcode_for_file_access(), errmsg("queen spool: %s", why)));
	if (queen_drain_head != NULL && strcmp(queen_drain_head, name) == 0)
		queen_drain_attempts = 0;
	return QUEEN_DRAIN_DONE;
}

/* Is the extension there to drain into? */
static bool
queen_drain_extension_ready(void)
{
	bool		ready;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	ready = OidIsValid(get_extension_oid("queen", true));
	CommitTransactionCommand();
	return ready;
}

/* Refresh the gauges; returns the finished files, oldest first. */
static List *
queen_drain_survey(void)
{
	uint64		items;
	uint64		files,
				bytes;
	List	   *names = queen_spool_list(&items);

	pg_atomic_write_u64(&queen_broker->spool.pending_files, items);
	queen_spool_failed_stats(&files, &bytes);
	pg_atomic_write_u64(&queen_broker->spool.failed_files, files);
	pg_atomic_write_u64(&queen_broker->spool.failed_bytes, bytes);
	return names;
}

void
queen_maintenance_main(Datum arg)
{
	QueenWorkerSlot *slot;
	TimestampTz retry_at = 0;
	long		retry_ms = QUEEN_DRAIN_RETRY_MIN_MS;
	TimestampTz closing_since = 0;

	slot = queen_worker_begin(QUEEN_MAINTENANCE, DatumGetInt32(arg));
	if (slot == NULL)
		proc_exit(0);
	queen_worker_connect(slot, "maintenance");
	pgstat_report_appname("queen maintenance");
	queen_drain_cxt = AllocSetContextCreate(TopMemoryContext, "queen drain",
											ALLOCSET_DEFAULT_SIZES);
	queen_file_cxt = AllocSetContextCreate(TopMemoryContext, "queen drain file",
										   ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(queen_drain_cxt);
	/* .tmp files of shards that no longer exist (queen.fusion_shards shrank) */
	queen_spool_recover(-1, queen_broker->nshards);
	queen_worker_set_state(slot, QUEEN_WORKER_READY);

	for (;;)
	{
		List	   *files;
		long		timeout = 1000;
		TimestampTz now;

		MemoryContextReset(queen_drain_cxt);
		/* a cancel between transactions has nothing to cancel */
		QueryCancelPending = false;
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		/* every pass, so a reload while this worker was restarting counts too */
		if ((pg_atomic_read_u32(&queen_broker->spool.setting_seen) != 0) !=
			queen_maintenance_mode_setting)
			queen_maintenance_set(queen_maintenance_mode_setting, true);
		now = GetCurrentTimestamp();
		if (ShutdownRequestPending)
		{
			/*
			 * At a cluster shutdown the listeners stop too: exit 0.  Alone
			 * (pg_terminate_backend), exit 1 so the postmaster starts the
			 * worker again; exit 0 would unregister it for good.
			 */
			if (closing_since == 0)
				closing_since = now;
			if (queen_workers_all_in(queen_broker->listeners, queen_broker->nlisteners,
									 QUEEN_WORKERS_GOING))
				proc_exit(0);
			if (TimestampDifferenceExceeds(closing_since, now, 500))
			{
				ereport(LOG, (errmsg("queen maintenance: terminated while the broker runs; restarting")));
				proc_exit(1);
			}
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 50L, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
			continue;
		}

		files = queen_drain_survey();
		if (files != NIL && !queen_maintenance_on() && now >= retry_at &&
			queen_drain_extension_ready())
		{
			ListCell   *lc;
			int			done = 0;
			bool		failed = false;

			foreach(lc, files)
			{
				QueenDrainResult result;

				if (done == QUEEN_DRAIN_FILES_PER_PASS || ShutdownRequestPending ||
					queen_maintenance_on())
					break;
				/* no latch wait between files: notice a dead postmaster here */
				if (!PostmasterIsAlive())
					proc_exit(1);
				MemoryContextSwitchTo(queen_file_cxt);
				result = queen_drain_file((const char *) lfirst(lc));
				MemoryContextSwitchTo(queen_drain_cxt);
				MemoryContextReset(queen_file_cxt);
				if (result != QUEEN_DRAIN_DONE)
				{
					failed = true;
					break;
				}
				done++;
			}
			if (failed)
			{
				retry_at = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), retry_ms);
				retry_ms = Min(retry_ms * 2, QUEEN_DRAIN_RETRY_MAX_MS);
			}
			else
				retry_ms = QUEEN_DRAIN_RETRY_MIN_MS;
			if (done > 0)
				continue;
		}
		if (files != NIL)
			timeout = 100;

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 timeout, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}
