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
 *-------------------------------------------------------------------------
 */
#include "broker.h"
#include "bundle.h"

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
	uint64		quarantined = pg_atomic_read_u64(&sp->quarantined_items);

	if (shape == 0)
	{
		appendStringInfo(out, "{\"pending\":" UINT64_FORMAT ",\"failed\":" UINT64_FORMAT
						 ",\"quarantined\":" UINT64_FORMAT ",\"dbHealthy\":%s,\"worker\":0}",
						 pending, failed, quarantined, db ? "true" : "false");
		return;
	}
	appendStringInfo(out, "{\"maintenanceMode\":%s,", on ? "true" : "false");
	if (shape == 1)
		appendStringInfoString(out, "\"popMaintenanceMode\":false,");
	appendStringInfo(out, "\"bufferedMessages\":" UINT64_FORMAT ",\"bufferHealthy\":%s,",
					 pending, healthy ? "true" : "false");
	if (shape == 1)
		appendStringInfo(out, "\"bufferStats\":{\"pendingCount\":" UINT64_FORMAT
						 ",\"failedCount\":" UINT64_FORMAT ",\"quarantinedItems\":" UINT64_FORMAT
						 ",\"dbHealthy\":%s,"
						 "\"failedFiles\":{\"count\":" UINT64_FORMAT ",\"totalBytes\":" UINT64_FORMAT
						 ",\"totalMB\":%.2f,\"failoverCount\":0,\"qos0Count\":0}}}",
						 pending, failed, quarantined, db ? "true" : "false", failed, failed_bytes,
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
	QUEEN_DRAIN_RETRY			/* left in place, whole or in part; try again later */
} QueenDrainResult;

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

/* The outcome of one drain transaction. */
typedef struct QueenDrainTx
{
	bool		ok;
	bool		already;		/* its key was in queen.spool_drained */
	bool		has_units;		/* parts of it were committed on their own before */
	int			sqlerrcode;
	char	   *message;
	uint64		queued;
	uint64		dropped;
} QueenDrainTx;

/* Errors that say the database cannot take the items now, not that it never will. */
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

/*
 * Errors that say nothing can be stored now, whatever is tried (no point
 * splitting the file): the database or the extension is not there, or the
 * server is going away.  A statement timeout or a lock is not one of them:
 * smaller transactions, or other partitions, may well go through.
 */
static bool
queen_error_database_down(int sqlerrcode)
{
	int			class = ERRCODE_TO_CATEGORY(sqlerrcode);

	return class == ERRCODE_CONNECTION_EXCEPTION ||
		class == ERRCODE_INSUFFICIENT_RESOURCES ||
		class == ERRCODE_SYSTEM_ERROR ||
		(class == ERRCODE_OPERATOR_INTERVENTION && sqlerrcode != ERRCODE_QUERY_CANCELED) ||
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
		pg_atomic_fetch_add_u64(&queen_broker->spool.items_quarantined,
								queen_spool_file_items(name));
		ereport(WARNING,
				(errmsg("queen spool: \"%s\" moved to \"%s\" after %d failed attempts to read it: %s",
						from, to, QUEEN_DRAIN_MAX_ATTEMPTS, why)));
	}
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
 * One drain transaction.  key is what goes into queen.spool_drained: the
 * file's name for the whole file, "<name>#g<group>" for one group,
 * "<name>#g<group>#i<item>" for one item; a key found there was committed
 * before and is not replayed.  With whole, parts committed on their own
 * before make it stop (has_units) without doing anything; with finish,
 * the parts' keys are removed, since the file's own key now stands for
 * them.  bgs may be empty (n = 0).  With check_parts, parts of the key
 * committed on their own before ("<key>#...") make it stop without doing
 * anything (has_units): the caller goes to the parts.
 */
static void
queen_drain_tx(QueenDrainTx *tx, const char *key, QueenBundleGroup *bgs, int n,
			   int64 items, bool check_parts, bool finish)
{
	MemoryContext cxt = CurrentMemoryContext;

	memset(tx, 0, sizeof(QueenDrainTx));
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PG_TRY();
	{
		PushActiveSnapshot(GetTransactionSnapshot());
		pgstat_report_activity(STATE_RUNNING, "queen: drain spool file");
		queen_statement_timeout_start();
		if (check_parts &&
			queen_drain_sql("SELECT 1 FROM queen.spool_drained WHERE starts_with(file, $1 || '#') LIMIT 1",
							key, 0) > 0)
			tx->has_units = true;
		else
		{
			/* the record first: a key committed before inserts nothing */
			tx->already = queen_drain_sql("INSERT INTO queen.spool_drained (file, items) VALUES ($1, $2)"
										  " ON CONFLICT (file) DO NOTHING",
										  key, items) == 0;
			if (!tx->already && n > 0)
			{
				int			i,
							k;

				queen_bundle_push(bgs, n);
				for (i = 0; i < n; i++)
					for (k = 0; k < bgs[i].nframes; k++)
					{
						if (bgs[i].frames[k].status == QUEEN_SEGMENT_QUEUED)
							tx->queued++;
						else
							tx->dropped++;
					}
			}
			if (finish)
				(void) queen_drain_sql("DELETE FROM queen.spool_drained WHERE starts_with(file, $1 || '#')",
									   key, 0);
			/* parts' keys stay while their file does: they are its progress */
			if ((check_parts || finish) && !tx->already)
				(void) queen_drain_sql("DELETE FROM queen.spool_drained WHERE drained_at < now() - interval '1 day'"
									   " AND strpos(file, '#') = 0",
									   key, 0);
		}
		queen_statement_timeout_stop(true);
		PopActiveSnapshot();
		CommitTransactionCommand();
		tx->ok = true;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		queen_statement_timeout_stop(false);
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		AbortCurrentTransaction();
		tx->sqlerrcode = edata->sqlerrcode;
		tx->message = pstrdup(edata->message);
		FreeErrorData(edata);
		tx->queued = tx->dropped = 0;
		if (tx->sqlerrcode == ERRCODE_QUERY_CANCELED)
			pg_atomic_fetch_add_u64(&queen_broker->spool.statement_timeouts, 1);
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	pgstat_report_activity(STATE_IDLE, NULL);
	pgstat_report_stat(false);
	if (tx->ok)
	{
		pg_atomic_fetch_add_u64(&queen_broker->spool.items_drained, tx->queued);
		pg_atomic_fetch_add_u64(&queen_broker->spool.items_dropped, tx->dropped);
	}
	queen_metrics_publish_core();
}

/* The name of a file without ".buf". */
static char *
queen_drain_stem(const char *name)
{
	size_t		n = strlen(name);

	return n > 4 ? pnstrdup(name, n - 4) : pstrdup(name);
}

/*
 * Set one item the database refuses aside as a one-record spool file under
 * failed/, loudly.  False if it could not be kept (it then stays in the
 * spool and is tried again).
 */
static bool
queen_drain_quarantine_item(const char *name, int gi, int k, QueenDrainGroup *g,
							const char *frame, Size frame_len, const char *txn,
							int sqlerrcode, const char *message)
{
	StringInfoData rec;
	QueenSpoolRecord r;
	char	   *kept = psprintf("%s-g%d-i%d-n1.buf", queen_drain_stem(name), gi, k);
	char	   *why = NULL;
	struct stat st;
	bool		again;

	/*
	 * Set aside by an earlier pass whose record of it did not commit: the
	 * same item, written again under the same name, and not counted twice.
	 */
	again = stat(psprintf("%s/%s", queen_spool_path("failed"), kept), &st) == 0;
	initStringInfo(&rec);
	r.tenant = g->tenant;
	r.queue = g->queue;
	r.qlen = (uint16) strlen(g->queue);
	r.partition = g->partition;
	r.plen = (uint16) strlen(g->partition);
	r.nframes = 1;
	r.frames = frame;
	r.frames_len = frame_len;
	queen_spool_append_record(&rec, &r);
	if (!queen_spool_quarantine(kept, rec.data, rec.len, &why))
	{
		ereport(WARNING,
				(errcode_for_file_access(),
				 errmsg("queen spool: %s: an item of queue \"%s\" partition \"%s\" cannot be stored (SQLSTATE %s: %s) and could not be set aside: %s; it stays in the spool",
						name, g->queue, g->partition, unpack_sql_state(sqlerrcode), message, why)));
		return false;
	}
	if (!again)
		pg_atomic_fetch_add_u64(&queen_broker->spool.items_quarantined, 1);
	ereport(WARNING,
			(errmsg("queen spool: QUARANTINED an item answered \"buffered\": queue \"%s\" partition \"%s\" transactionId \"%s\" from \"%s\" cannot be stored (SQLSTATE %s: %s)",
					g->queue, g->partition, txn, name, unpack_sql_state(sqlerrcode), message),
			 errdetail("Its bytes are kept as failed/%s, a spool file of one record.", kept),
			 errhint("Fix the cause, then move the file back into the spool directory to drain it.")));
	return true;
}

static bool
queen_drain_blocked(HTAB *blocked, QueenDrainKey *key)
{
	return hash_search(blocked, key, HASH_FIND, NULL) != NULL;
}

static void
queen_drain_block(HTAB *blocked, QueenDrainKey *key)
{
	(void) hash_search(blocked, key, HASH_ENTER, NULL);
}

/*
 * One group, item by item, each in its own transaction.  Items the
 * database refuses for good are quarantined; an item that fails for a
 * reason of the moment (a lock, a timeout) stops the group there, since a
 * partition's items commit in order.  True when every item is settled.
 */
static bool
queen_drain_items(const char *name, int gi, QueenDrainGroup *g)
{
	Size		pos = 0;
	int			k;

	for (k = 0; k < g->nframes; k++)
	{
		Size		start = pos;
		QueenFrame	frame;
		QueenBundleGroup bg;
		QueenDrainTx tx;
		char	   *key = psprintf("%s#g%d#i%d", name, gi, k);
		char	   *txn;

		/* one transaction per item can take a while: stop for a shutdown */
		if (ShutdownRequestPending || queen_maintenance_on())
			return false;
		/* decoded once already when the record was read */
		if (queen_frame_decode(g->frames.data, g->frames.len, &pos, &frame) != NULL)
			elog(ERROR, "queen: spooled frames do not decode");
		txn = pnstrdup(frame.txn, frame.txn_len);
		memset(&bg, 0, sizeof(bg));
		queen_bundle_group_init(&bg, &g->tenant, g->queue, g->partition,
								g->frames.data + start, pos - start, 1);
		queen_drain_tx(&tx, key, &bg, 1, 1, false, false);
		if (tx.ok)
			continue;
		ereport(LOG,
				(errmsg("queen spool: %s: item %d of queue \"%s\" partition \"%s\" failed (SQLSTATE %s): %s",
						name, k, g->queue, g->partition, unpack_sql_state(tx.sqlerrcode), tx.message)));
		if (queen_error_transient(tx.sqlerrcode))
			return false;
		if (!queen_drain_quarantine_item(name, gi, k, g, g->frames.data + start, pos - start,
										 txn, tx.sqlerrcode, tx.message))
			return false;
		/* settled: not tried again (a crash before this quarantines it again, same file) */
		queen_drain_tx(&tx, key, NULL, 0, 0, false, false);
		if (!tx.ok)
			return false;
	}
	return true;
}

/*
 * Drain one finished file.  First whole, in one transaction, which is the
 * common case.  If that fails, or parts of it were committed before, or an
 * earlier file still holds items of one of its partitions (blocked), group
 * by group in transactions of their own, and a group that fails item by
 * item: what can be stored is, exactly once (each part's key in
 * queen.spool_drained), what the database refuses is quarantined, and
 * what fails for a reason of the moment stays for a later attempt with
 * its partition added to blocked.  The file is removed once every item is
 * settled.  The caller's memory context is reset after.
 */
static QueenDrainResult
queen_drain_file(QueenDrainFile *st, HTAB *blocked)
{
	const char *name = st->name;
	char	   *path = queen_spool_path(name);
	char	   *why = NULL;
	Size		len = 0;
	char	   *data;
	List	   *groups;
	int64		items;
	List	   *damage = NIL;
	ListCell   *lc;
	bool		units = false;
	bool		pending = false;
	QueenDrainTx tx;
	int			gi;
	uint64		queued = 0,
				dropped = 0;

	data = queen_spool_read_file(path, &len, &why);
	if (data == NULL)
	{
		ereport(WARNING, (errcode_for_file_access(), errmsg("queen spool: %s", why)));
		if (++st->read_failures >= QUEEN_DRAIN_MAX_ATTEMPTS)
		{
			queen_drain_quarantine_file(name, why);
			return QUEEN_DRAIN_DONE;
		}
		return QUEEN_DRAIN_RETRY;
	}
	st->read_failures = 0;
	groups = queen_drain_parse(data, len, &items, &damage);

	foreach(lc, groups)
		if (queen_drain_blocked(blocked, &((QueenDrainGroup *) lfirst(lc))->key))
			units = true;

	if (!units)
	{
		int			ngroups = list_length(groups);
		QueenBundleGroup *bgs = palloc0(sizeof(QueenBundleGroup) * Max(ngroups, 1));

		gi = 0;
		foreach(lc, groups)
		{
			QueenDrainGroup *g = (QueenDrainGroup *) lfirst(lc);

			queen_bundle_group_init(&bgs[gi++], &g->tenant, g->queue, g->partition,
									g->frames.data, g->frames.len, g->nframes);
		}
		queen_drain_tx(&tx, name, bgs, ngroups, items, true, false);
		if (tx.ok && !tx.has_units)
		{
			pg_atomic_write_u32(&queen_broker->spool.db_healthy, 1);
			queen_drain_report_damage(name, data, damage);
			if (tx.already)
				ereport(LOG,
						(errmsg("queen spool: \"%s\" was committed before (it is in queen.spool_drained); removed without replaying it",
								name)));
			else
				ereport(LOG,
						(errmsg("queen spool: drained \"%s\": " UINT64_FORMAT " items committed, " UINT64_FORMAT " already stored (dropped as duplicates)",
								name, tx.queued, tx.dropped)));
			goto done;
		}
		if (!tx.ok)
		{
			ereport(LOG,
					(errmsg("queen spool: draining \"%s\" in one transaction failed (SQLSTATE %s): %s",
							name, unpack_sql_state(tx.sqlerrcode), tx.message)));
			if (queen_error_database_down(tx.sqlerrcode))
			{
				pg_atomic_write_u32(&queen_broker->spool.db_healthy, 0);
				foreach(lc, groups)
					queen_drain_block(blocked, &((QueenDrainGroup *) lfirst(lc))->key);
				return QUEEN_DRAIN_RETRY;
			}
			ereport(LOG,
					(errmsg("queen spool: storing \"%s\" partition by partition, in transactions of their own",
							name)));
		}
	}

	/* part by part */
	gi = -1;
	foreach(lc, groups)
	{
		QueenDrainGroup *g = (QueenDrainGroup *) lfirst(lc);
		QueenBundleGroup bg;

		gi++;
		if (queen_drain_blocked(blocked, &g->key) || ShutdownRequestPending ||
			queen_maintenance_on())
		{
			pending = true;
			continue;
		}
		memset(&bg, 0, sizeof(bg));
		queen_bundle_group_init(&bg, &g->tenant, g->queue, g->partition,
								g->frames.data, g->frames.len, g->nframes);
		queen_drain_tx(&tx, psprintf("%s#g%d", name, gi), &bg, 1, g->nframes, true, false);
		if (tx.ok && tx.has_units)
		{
			/* items of it were stored one by one before: go on with them */
			if (!queen_drain_items(name, gi, g))
			{
				pg_atomic_fetch_add_u64(&queen_broker->spool.drain_retries, 1);
				queen_drain_block(blocked, &g->key);
				pending = true;
			}
			continue;
		}
		if (tx.ok)
		{
			queued += tx.queued;
			dropped += tx.dropped;
			continue;
		}
		ereport(LOG,
				(errmsg("queen spool: %s: queue \"%s\" partition \"%s\" (%d items) failed (SQLSTATE %s): %s",
						name, g->queue, g->partition, g->nframes,
						unpack_sql_state(tx.sqlerrcode), tx.message)));
		if (queen_error_database_down(tx.sqlerrcode) ||
			(queen_error_transient(tx.sqlerrcode) && tx.sqlerrcode != ERRCODE_QUERY_CANCELED) ||
			!queen_drain_items(name, gi, g))
		{
			pg_atomic_fetch_add_u64(&queen_broker->spool.drain_retries, 1);
			queen_drain_block(blocked, &g->key);
			pending = true;
		}
	}

	if (pending)
	{
		pg_atomic_write_u32(&queen_broker->spool.db_healthy, 0);
		ereport(LOG,
				(errmsg("queen spool: \"%s\" is drained in part (" UINT64_FORMAT " items committed now); the rest stays in the spool and is tried again, later files go on meanwhile",
						name, queued)));
		return QUEEN_DRAIN_RETRY;
	}

	/* every item settled: the file's own key stands for its parts now */
	queen_drain_tx(&tx, name, NULL, 0, items, false, true);
	if (!tx.ok)
	{
		ereport(LOG,
				(errmsg("queen spool: finishing \"%s\" failed (SQLSTATE %s): %s; it stays in the spool",
						name, unpack_sql_state(tx.sqlerrcode), tx.message)));
		return QUEEN_DRAIN_RETRY;
	}
	pg_atomic_write_u32(&queen_broker->spool.db_healthy, 1);
	queen_drain_report_damage(name, data, damage);
	ereport(LOG,
			(errmsg("queen spool: drained \"%s\" part by part: " UINT64_FORMAT " items committed now, " UINT64_FORMAT " already stored (dropped as duplicates)",
					name, queued, dropped)));

done:
	pg_atomic_fetch_add_u64(&queen_broker->spool.files_drained, 1);
	if (unlink(path) != 0)
		ereport(WARNING,
				(errcode_for_file_access(),
				 errmsg("queen spool: could not remove drained \"%s\": %m; it will not be replayed", path)));
	else if (!queen_spool_sync_dir(queen_spool_directory, &why))
		ereport(WARNING, (errcode_for_file_access(), errmsg("queen spool: %s", why)));
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
	uint64		quarantined;
	List	   *names = queen_spool_list(&items);
	HASH_SEQ_STATUS seq;
	QueenDrainFile *st;
	ListCell   *lc;

	pg_atomic_write_u64(&queen_broker->spool.pending_files, items);
	queen_spool_failed_stats(&files, &bytes, &quarantined);
	pg_atomic_write_u64(&queen_broker->spool.failed_files, files);
	pg_atomic_write_u64(&queen_broker->spool.failed_bytes, bytes);
	pg_atomic_write_u64(&queen_broker->spool.quarantined_items, quarantined);

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

static HTAB *
queen_drain_keyset(const char *what)
{
	HASHCTL		ctl;

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(QueenDrainKey);
	ctl.entrysize = sizeof(QueenDrainKey);
	ctl.hcxt = CurrentMemoryContext;
	return hash_create(what, 64, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
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
		/* no latch wait between files: notice a dead postmaster here */
		if (!PostmasterIsAlive())
			proc_exit(1);
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
		result = queen_drain_file(st, mine);
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

void
queen_maintenance_main(Datum arg)
{
	QueenWorkerSlot *slot;
	TimestampTz closing_since = 0;
	HASHCTL		ctl;

	slot = queen_worker_begin(QUEEN_MAINTENANCE, DatumGetInt32(arg));
	if (slot == NULL)
		proc_exit(0);
	queen_worker_connect(slot, "maintenance");
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
		if (files != NIL && !queen_maintenance_on() && queen_drain_extension_ready() &&
			queen_drain_pass(files) > 0)
			continue;
		if (files != NIL)
			timeout = 100;

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 timeout, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}
