/*-------------------------------------------------------------------------
 *
 * maintenance_mode.c
 *	  Maintenance mode: the flag that sends pushes to the disk spool, its
 *	  state file, and the JSON of the buffer routes.  The worker that drains
 *	  the spool once the flag is off is maintenance_worker.c.
 *
 * The flag.  Shared memory holds it (the shards read it before every
 * flush); maintenance.state in the spool directory keeps it across
 * restarts and crashes, with pop maintenance mode (POST
 * /api/v1/system/maintenance/pop: pops answer empty at once, so consumers
 * pause while producers go on).  Two things change the first: POST
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

#include "metrics.h"

#include "miscadmin.h"
#include "storage/fd.h"
#include "storage/shmem.h"

#define QUEEN_STATE_FILE		"maintenance.state"

QueenSpoolShared *queen_spool_state = NULL;

static void queen_maintenance_load(void);

Size
queen_spool_shmem_size(void)
{
	return MAXALIGN(sizeof(QueenSpoolShared));
}

/* At shared memory initialisation: the flag as saved, the rest zero. */
void
queen_spool_shmem_init(void)
{
	bool		found;
	int			s;

	queen_spool_state = ShmemInitStruct("queen spool", queen_spool_shmem_size(), &found);
	if (found)
		return;
	pg_atomic_init_u32(&queen_spool_state->maintenance, 0);
	pg_atomic_init_u32(&queen_spool_state->pop_maintenance, 0);
	pg_atomic_init_u32(&queen_spool_state->setting_seen, 0);
	pg_atomic_init_u32(&queen_spool_state->db_healthy, 1);
	pg_atomic_init_u64(&queen_spool_state->pending_files, 0);
	pg_atomic_init_u64(&queen_spool_state->failed_files, 0);
	pg_atomic_init_u64(&queen_spool_state->failed_bytes, 0);
	pg_atomic_init_u64(&queen_spool_state->quarantined_items, 0);
	for (s = 0; s < QUEEN_MAX_SHARDS; s++)
		pg_atomic_init_u32(&queen_spool_state->active_items[s], 0);
	queen_maintenance_load();
}

bool
queen_maintenance_on(void)
{
	return queen_spool_state != NULL && pg_atomic_read_u32(&queen_spool_state->maintenance) != 0;
}

bool
queen_pop_maintenance_on(void)
{
	return queen_spool_state != NULL &&
		pg_atomic_read_u32(&queen_spool_state->pop_maintenance) != 0;
}

/*
 * At shared memory initialisation (postmaster start and crash restart):
 * the saved flag, unless the setting changed since it was saved; and the
 * pop flag as saved.
 */
static void
queen_maintenance_load(void)
{
	char	   *path = queen_spool_path(QUEEN_STATE_FILE);
	FILE	   *f = AllocateFile(path, "r");
	int			enabled = -1,
				setting = -1,
				pop = 0;
	bool		on = queen_maintenance_mode_setting;

	if (f != NULL)
	{
		/* a file of a version without the pop flag has two fields */
		if (fscanf(f, "enabled=%d setting=%d pop=%d", &enabled, &setting, &pop) >= 2 &&
			(setting != 0) == queen_maintenance_mode_setting)
			on = enabled != 0;
		FreeFile(f);
	}
	pg_atomic_write_u32(&queen_spool_state->pop_maintenance, pop == 1 ? 1 : 0);
	if (pop == 1)
		ereport(LOG, (errmsg("queen: pop maintenance mode is on; pops answer empty")));
	pg_atomic_write_u32(&queen_spool_state->maintenance, on ? 1 : 0);
	pg_atomic_write_u32(&queen_spool_state->setting_seen, queen_maintenance_mode_setting ? 1 : 0);
	if (on)
		ereport(LOG, (errmsg("queen: maintenance mode is on; pushes go to the spool")));
	pfree(path);
}

/* Write maintenance.state durably (temporary file, fsync, rename). */
static bool
queen_maintenance_write(bool on, bool setting, bool pop, char **why)
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
	ok = fprintf(f, "enabled=%d setting=%d pop=%d\n", on ? 1 : 0, setting ? 1 : 0,
				 pop ? 1 : 0) > 0 &&
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
 * Save the flags as they are now.  Two listeners may change the two flags
 * at once and rename their files in either order, so a saver looks again
 * after its rename and writes once more if a flag moved meanwhile: the
 * last file renamed then holds the flags as the last change left them.
 * on and setting are the caller's (queen.maintenance_mode's change has
 * not reached the shared flag when the setting is recorded).
 */
static bool
queen_maintenance_save(bool on, bool setting, char **why)
{
	int			tries;

	for (tries = 0; tries < 3; tries++)
	{
		bool		pop = queen_pop_maintenance_on();

		if (!queen_maintenance_write(on, setting, pop, why))
			return false;
		if (queen_maintenance_on() == on && queen_pop_maintenance_on() == pop)
			return true;
		on = queen_maintenance_on();
	}
	return true;
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
		pg_atomic_write_u32(&queen_spool_state->setting_seen, on ? 1 : 0);
	pg_atomic_write_u32(&queen_spool_state->maintenance, on ? 1 : 0);
	if (!queen_maintenance_save(on, pg_atomic_read_u32(&queen_spool_state->setting_seen) != 0,
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

/* Turn pop maintenance mode on or off, saved with the other flag. */
void
queen_pop_maintenance_set(bool on)
{
	char	   *why = NULL;

	pg_atomic_write_u32(&queen_spool_state->pop_maintenance, on ? 1 : 0);
	if (!queen_maintenance_save(queen_maintenance_on(),
								pg_atomic_read_u32(&queen_spool_state->setting_seen) != 0, &why))
		ereport(WARNING,
				(errcode_for_file_access(),
				 errmsg("queen: pop maintenance mode is %s, but it could not be saved for a restart: %s",
						on ? "on" : "off", why)));
	ereport(LOG, (errmsg("queen: pop maintenance mode %s", on ? "enabled" : "disabled")));
}

/*
 * Items in the spool not yet committed: finished files as the maintenance
 * worker last counted them, plus the shards' open files as of now.
 */
uint64
queen_spool_pending(void)
{
	uint64		items = pg_atomic_read_u64(&queen_spool_state->pending_files);
	int			s;

	for (s = 0; s < queen_broker->nshards; s++)
		items += pg_atomic_read_u32(&queen_spool_state->active_items[s]);
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
	QueenSpoolShared *sp = queen_spool_state;
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
		appendStringInfo(out, "\"popMaintenanceMode\":%s,",
						 queen_pop_maintenance_on() ? "true" : "false");
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

/* Items the drain set aside under failed/: not 0 needs an operator. */
uint64
queen_spool_quarantined(void)
{
	return pg_atomic_read_u64(&queen_spool_state->quarantined_items);
}

/* The spool's gauges on /metrics (its counters are rows of metrics.c). */
void
queen_spool_render(StringInfo out)
{
	QueenSpoolShared *sp = queen_spool_state;

	queen_metric(out, "queen_maintenance_mode", "gauge",
				 "1 while maintenance mode sends every push to the spool.");
	appendStringInfo(out, "queen_maintenance_mode %d\n", queen_maintenance_on() ? 1 : 0);
	queen_metric(out, "queen_file_buffer_pending", "gauge",
				 "Items in the disk spool not yet committed.");
	appendStringInfo(out, "queen_file_buffer_pending " UINT64_FORMAT "\n", queen_spool_pending());
	queen_metric(out, "queen_file_buffer_failed", "gauge",
				 "Files set aside under the spool's failed/ directory.");
	appendStringInfo(out, "queen_file_buffer_failed " UINT64_FORMAT "\n",
					 pg_atomic_read_u64(&sp->failed_files));
	queen_metric(out, "queen_file_buffer_db_healthy", "gauge",
				 "1 unless the last drain attempt failed for a reason in the database.");
	appendStringInfo(out, "queen_file_buffer_db_healthy %u\n", pg_atomic_read_u32(&sp->db_healthy));
	queen_metric(out, "queen_spool_quarantined_items", "gauge",
				 "Spooled items the database refused, set aside under failed/ (never committed): not 0 needs an operator.");
	appendStringInfo(out, "queen_spool_quarantined_items " UINT64_FORMAT "\n",
					 queen_spool_quarantined());
}
