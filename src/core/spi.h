/*-------------------------------------------------------------------------
 *
 * spi.h
 *	  The SPI helpers every part of Queen that runs statements shares:
 *	  connecting, plans kept for the life of the process, running them, and
 *	  reading result columns and building array arguments; and beside them
 *	  the catalog checks of Queen's tables and the process-lived hash
 *	  tables its caches are built on.
 *
 * They live apart from the log so that whoever runs a statement (the write
 * and read paths, queue configuration, queen.read) uses one set of rules
 * for how a plan is prepared and what a NULL where none belongs means.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_SPI_H
#define QUEEN_SPI_H

#include "access/htup.h"
#include "access/tupdesc.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

extern void queen_spi_connect(void);
extern SPIPlanPtr queen_keep_plan(const char *sql, int nargs, Oid *argtypes,
								  bool first_rows);
extern SPIPlanPtr queen_keep_custom_plan(const char *sql, int nargs, Oid *argtypes);
extern SPIPlanPtr queen_plan_once(SPIPlanPtr *plan, const char *sql, int nargs,
								  Oid *argtypes, bool first_rows);
extern void queen_exec(SPIPlanPtr plan, Datum *values, int expected,
					   const char *what);

/*
 * A statement of a file's table of statements: its text and argument
 * types, and its plan, prepared at its first run and kept for the process.
 */
#define QUEEN_STMT_MAXARGS	12

typedef struct QueenStmt
{
	const char *sql;
	int			nargs;
	Oid			types[QUEEN_STMT_MAXARGS];
	SPIPlanPtr	plan;
} QueenStmt;

extern int	queen_stmt_run(QueenStmt *stmt, Datum *values, const char *nulls, bool read_only,
						   int expected, const char *what);

extern int64 queen_stmt_expire(QueenStmt *stmt, TimestampTz before, int limit,
							   const char *what);

extern Oid	queen_table_oid(const char *name);
extern void queen_table_changed(const char *table) pg_attribute_noreturn();
extern void queen_table_attnums(Oid relid, const char *table, const char *const *columns,
								int n, AttrNumber *attnums);
extern HTAB *queen_process_hash(const char *name, Size keysize, Size entrysize, long nelem,
								MemoryContext *cxt);
extern Datum queen_array_datum(Datum *elems, int n, Oid elemtype);
extern int64 queen_get_int64(HeapTuple tuple, TupleDesc desc, int col);
extern int32 queen_get_int32(HeapTuple tuple, TupleDesc desc, int col);
extern bool queen_get_bool(HeapTuple tuple, TupleDesc desc, int col);
extern TimestampTz queen_get_timestamptz(HeapTuple tuple, TupleDesc desc, int col);
extern void queen_get_uuid(HeapTuple tuple, TupleDesc desc, int col, pg_uuid_t *out);
extern int64 queen_slot_int64(TupleTableSlot *slot, int att, const char *table);
extern bool queen_spi_listing(SPIPlanPtr count, SPIPlanPtr page, Datum *values,
							  const char *nulls, int limit, int64 *total);
extern void *queen_spi_copy_rows(const uint16 *offsets, int ncols, Size size,
								 MemoryContext cxt, int *n);

#endif							/* QUEEN_SPI_H */
