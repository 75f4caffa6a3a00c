/*-------------------------------------------------------------------------
 *
 * drained.c
 *	  The ledger of spooled work already committed: queen.spool_drained,
 *	  which the broker's drain writes in the same transaction as what it
 *	  stores, so a file (or a part of one: "<file>#g<group>",
 *	  "<file>#g<group>#i<item>") found there is never stored again, after a
 *	  crash or whatever the queues' dedup windows.
 *
 * The drain (src/broker/maintenance/drain_file.c) decides what a key
 * covers and when; this file owns the statements, in the caller's
 * transaction.  A file's own key stays a day after its parts' keys are
 * replaced by it; parts' keys stay while their file does (they are its
 * progress).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "queen.h"
#include "drained.h"
#include "spi.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"

typedef enum QueenDrainedPlan
{
	QUEEN_DRAINED_PARTS,
	QUEEN_DRAINED_RECORD,
	QUEEN_DRAINED_FORGET_PARTS,
	QUEEN_DRAINED_EXPIRE,
	QUEEN_DRAINED_NPLANS
} QueenDrainedPlan;

static const char *const queen_drained_sql[QUEEN_DRAINED_NPLANS] = {
	"SELECT 1 FROM queen.spool_drained WHERE starts_with(file, $1 || '#') LIMIT 1",
	/* a key committed before inserts nothing */
	"INSERT INTO queen.spool_drained (file, items) VALUES ($1, $2) ON CONFLICT (file) DO NOTHING",
	"DELETE FROM queen.spool_drained WHERE starts_with(file, $1 || '#')",
	"DELETE FROM queen.spool_drained WHERE drained_at < now() - interval '1 day'"
	" AND strpos(file, '#') = 0",
};

static const int queen_drained_nargs[QUEEN_DRAINED_NPLANS] = {1, 2, 1, 0};

static SPIPlanPtr queen_drained_plans[QUEEN_DRAINED_NPLANS];

/* Run one of the ledger's statements; the rows it processed. */
static uint64
queen_drained_exec(QueenDrainedPlan id, const char *key, int64 items, int expected)
{
	Oid			types[2] = {TEXTOID, INT8OID};
	Datum		values[2];
	uint64		rows;

	values[0] = key != NULL ? CStringGetTextDatum(key) : (Datum) 0;
	values[1] = Int64GetDatum(items);
	queen_spi_connect();
	queen_exec(queen_plan_once(&queen_drained_plans[id], queen_drained_sql[id],
							   queen_drained_nargs[id], types, false),
			   values, expected, "keeping the drain's ledger");
	rows = SPI_processed;		/* SPI_finish restores the caller's count */
	SPI_finish();
	return rows;
}

/* Is some part of file recorded (the file was being drained part by part)? */
bool
queen_drained_parts_exist(const char *file)
{
	return queen_drained_exec(QUEEN_DRAINED_PARTS, file, 0, SPI_OK_SELECT) > 0;
}

/* Record key; false when it was recorded already (its work is committed). */
bool
queen_drained_record(const char *key, int64 items)
{
	return queen_drained_exec(QUEEN_DRAINED_RECORD, key, items, SPI_OK_INSERT) > 0;
}

/* The file is recorded whole: its parts' keys go. */
void
queen_drained_forget_parts(const char *file)
{
	(void) queen_drained_exec(QUEEN_DRAINED_FORGET_PARTS, file, 0, SPI_OK_DELETE);
}

/* Whole files' keys older than a day go: no file that old is still in the spool. */
void
queen_drained_expire(void)
{
	(void) queen_drained_exec(QUEEN_DRAINED_EXPIRE, NULL, 0, SPI_OK_DELETE);
}
