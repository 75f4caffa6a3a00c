/*-------------------------------------------------------------------------
 *
 * spi.c
 *	  Statements prepared once per process, and the small helpers around
 *	  SPI that the log, queue configuration and queen.read share.
 *
 * Statements are prepared once per process and kept (SPI_keepplan); the
 * plan cache replans them by itself if the tables are recreated.
 *
 *-------------------------------------------------------------------------
 */
#include "spi.h"

#include "catalog/namespace.h"
#include "utils/array.h"
#include "utils/lsyscache.h"

/*
 * Prepare a statement for the life of the process.  Must be called between
 * SPI_connect and SPI_finish.
 *
 * Plans are generic: planned once, not again for every call with new
 * arguments (which dominated the CPU of a small push), and replanned by the
 * plan cache when the tables' statistics change.  A statement read through
 * a cursor that usually stops early is planned for its first rows, so it
 * walks the primary key in order instead of sorting everything up front.
 */
SPIPlanPtr
queen_keep_plan(const char *sql, int nargs, Oid *argtypes, bool first_rows)
{
	int			options = CURSOR_OPT_GENERIC_PLAN;
	SPIPlanPtr	plan;

	if (first_rows)
		options |= CURSOR_OPT_FAST_PLAN;
	plan = SPI_prepare_cursor(sql, nargs, argtypes, options);

	if (plan == NULL)
		elog(ERROR, "queen: could not prepare statement: %s",
			 SPI_result_code_string(SPI_result));
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "queen: could not keep a prepared statement");
	return plan;
}

/*
 * The plan kept in *plan, prepared on first use.  Must be called between
 * SPI_connect and SPI_finish.
 */
SPIPlanPtr
queen_plan_once(SPIPlanPtr *plan, const char *sql, int nargs, Oid *argtypes,
				bool first_rows)
{
	if (*plan == NULL)
		*plan = queen_keep_plan(sql, nargs, argtypes, first_rows);
	return *plan;
}

void
queen_spi_connect(void)
{
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "queen: SPI_connect failed");
}

/* Run a kept plan (a fresh snapshot) and insist on the result it gives. */
void
queen_exec(SPIPlanPtr plan, Datum *values, int expected, const char *what)
{
	int			rc = SPI_execute_plan(plan, values, NULL, false, 0);

	if (rc != expected)
		elog(ERROR, "queen: %s failed: %s", what, SPI_result_code_string(rc));
}

/* A table of schema queen, for code that opens it directly rather than by a statement. */
Oid
queen_table_oid(const char *name)
{
	Oid			relid = get_relname_relid(name, get_namespace_oid("queen", false));

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation \"queen.%s\" does not exist", name)));
	return relid;
}

Datum
queen_array_datum(Datum *elems, int n, Oid elemtype)
{
	int16		typlen;
	bool		typbyval;
	char		typalign;

	get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
	return PointerGetDatum(construct_array(elems, n, elemtype,
										   typlen, typbyval, typalign));
}

/* A column Queen's statements never return NULL in. */
static Datum
queen_get_datum(HeapTuple tuple, TupleDesc desc, int col)
{
	bool		isnull;
	Datum		d = SPI_getbinval(tuple, desc, col, &isnull);

	if (isnull)
		elog(ERROR, "queen: unexpected NULL in column %d", col);
	return d;
}

int64
queen_get_int64(HeapTuple tuple, TupleDesc desc, int col)
{
	return DatumGetInt64(queen_get_datum(tuple, desc, col));
}

int32
queen_get_int32(HeapTuple tuple, TupleDesc desc, int col)
{
	return DatumGetInt32(queen_get_datum(tuple, desc, col));
}

TimestampTz
queen_get_timestamptz(HeapTuple tuple, TupleDesc desc, int col)
{
	return (TimestampTz) queen_get_int64(tuple, desc, col);	/* same representation */
}

void
queen_get_uuid(HeapTuple tuple, TupleDesc desc, int col, pg_uuid_t *out)
{
	memcpy(out, DatumGetUUIDP(queen_get_datum(tuple, desc, col)), sizeof(pg_uuid_t));
}
