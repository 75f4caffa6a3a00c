/*-------------------------------------------------------------------------
 *
 * maintenance_mode.c
 *	  Maintenance mode: the flag that sends pushes to the disk spool, its
 *	  state file, and the JSON of the buffer routes.  The worker that drains
 *	  the spool once the flag is off is maintenance_worker.c.
 *
 * The flag.  Shared memory holds it (the shards read it before every
 * flush); maintenance.state in the spool directory keeps it across
 * restarts and crashes.  Two things change it: POST
 * /api/v1/system/maintenance, and a reload that changes
 * queen.maintenance_mode.  The last change wins.  The file also records
 * the setting last applied, so a setting edited while the server was down
 * counts as a change at the next start.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "broker.h"
#include "spool.h"

#include <sys/stat.h>
#include <unistd.h>

#include "miscadmin.h"
#include "storage/fd.h"

#define QUEEN_STATE_FILE		"maintenance.state"

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
