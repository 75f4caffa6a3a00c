/*-------------------------------------------------------------------------
 *
 * spool.h
 *	  The disk spool (spool.c: files, records, quarantine) and maintenance
 *	  mode (maintenance_mode.c: the flag and the buffer routes' JSON), which the
 *	  shards write to, the listeners answer from, and the drain (maintenance_worker.c)
 *	  empties.
 *
 * Their shared state is maintenance_mode.c's (queen_spool_state); its
 * counters are the metric table's (metrics.h).
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_SPOOL_H
#define QUEEN_SPOOL_H

#include "broker.h"

/*
 * The spool's shared state.  The maintenance flag is authoritative here;
 * the state file in the spool directory keeps it across restarts.  The
 * gauges are written by the maintenance worker, active_items by the shards.
 */
typedef struct QueenSpoolShared
{
	pg_atomic_uint32 maintenance;	/* pushes go to the spool */
	pg_atomic_uint32 pop_maintenance;	/* pops answer empty at once */
	pg_atomic_uint32 setting_seen;	/* queen.maintenance_mode last applied */
	pg_atomic_uint32 db_healthy;	/* the last drain attempt worked */
	pg_atomic_uint64 pending_files; /* items in finished files, not yet drained */
	pg_atomic_uint64 failed_files;	/* files in failed/ */
	pg_atomic_uint64 failed_bytes;
	pg_atomic_uint64 quarantined_items; /* items in failed/ (from its files) */
	pg_atomic_uint32 active_items[QUEEN_MAX_SHARDS];	/* in each shard's open file */
} QueenSpoolShared;

extern QueenSpoolShared *queen_spool_state;

/* One record of a spool file: a partition's frames from one flush. */
typedef struct QueenSpoolRecord
{
	pg_uuid_t	tenant;
	const char *queue;
	uint16		qlen;
	const char *partition;
	uint16		plen;
	uint32		nframes;
	const char *frames;
	Size		frames_len;
} QueenSpoolRecord;

typedef enum QueenSpoolStep
{
	QUEEN_SPOOL_RECORD,			/* an intact record */
	QUEEN_SPOOL_DAMAGED,		/* a record that fails its checksum; skipped */
	QUEEN_SPOOL_TRUNCATED,		/* the rest of the file cannot be read */
	QUEEN_SPOOL_END
} QueenSpoolStep;

extern void queen_spool_append_record(StringInfo buf, const QueenSpoolRecord *rec);
extern bool queen_spool_write(StringInfo records, int items, int shard, char **why);
extern bool queen_spool_write_file(StringInfo records, int items, int owner, char **why);
extern void queen_spool_finish(int shard);
extern long queen_spool_idle(int shard, TimestampTz now);
extern void queen_spool_recover(int shard, int nshards);
extern QueenSpoolStep queen_spool_next(const char *data, Size len, Size *pos,
									   QueenSpoolRecord *rec, Size *bad_start);
extern char *queen_spool_read_file(const char *path, Size *len, char **why);
extern bool queen_spool_sync_dir(const char *dir, char **why);
extern bool queen_spool_ensure_dir(const char *dir, char **why);
extern char *queen_spool_path(const char *name);
extern List *queen_spool_list(uint64 *items);
extern uint64 queen_spool_file_items(const char *name);
extern void queen_spool_failed_stats(uint64 *files, uint64 *bytes, uint64 *items);
extern bool queen_spool_quarantine(const char *name, const char *data, Size len, char **why);

/* Maintenance mode (maintenance_mode.c) */
extern Size queen_spool_shmem_size(void);
extern void queen_spool_shmem_init(void);
extern void queen_spool_render(StringInfo out);
extern uint64 queen_spool_quarantined(void);
extern bool queen_maintenance_on(void);
extern bool queen_pop_maintenance_on(void);
extern void queen_pop_maintenance_set(bool on);
extern uint64 queen_spool_pending(void);
extern void queen_maintenance_set(bool on, bool setting);
extern void queen_buffers_json(StringInfo out, int shape);

#endif							/* QUEEN_SPOOL_H */
