/*-------------------------------------------------------------------------
 *
 * lease.c
 *	  Leases apart from the ack's decision: renewal, the
 *	  lease id's canonical form, and locking the consumer rows a transaction
 *	  will ack or renew under, in the global lock order.
 *
 * A lease id is a UUID the claim minted, stored as text in
 * log_consumers.worker_id.  Clients echo it back in whatever case their
 * UUID library prints, so every door reads one through
 * queen_lease_id_normal before comparing it with a stored one: an upper-
 * case lease id names the same lease, as an upper-case partitionId names
 * the same partition.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "queen.h"
#include "codec.h"
#include "consume.h"
#include "spi.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"

/*
 * Every live lease of a lease id, locked in the global order before any is
 * updated, so a renewal and an ack of the same partitions cannot deadlock.
 * The new expiry counts from the clock, not the transaction's start, so a
 * renewal late in a long transaction still buys the time it asks for.
 */
static const char *const sql_renew =
"WITH l AS (SELECT partition_id, consumer_group FROM queen.log_consumers"
"            WHERE worker_id = $1 AND lease_expires_at > now()"
"            ORDER BY partition_id, consumer_group FOR UPDATE)"
"UPDATE queen.log_consumers c"
"   SET lease_expires_at = GREATEST(c.lease_expires_at,"
"                                   clock_timestamp() + make_interval(secs => $2))"
"  FROM l"
" WHERE c.partition_id = l.partition_id AND c.consumer_group = l.consumer_group"
" RETURNING c.lease_expires_at";

/*
 * The consumer rows a transaction is about to ack or renew under several
 * groups or requests, locked in the global order (ascending partition id,
 * then group).  The ORDER BY sorts before the rows are locked, so they are
 * taken in that order.  The live leases of the lease ids given are found
 * by a scan, as the renewal itself finds them; with none given, the
 * one-time filter skips that scan.
 */
static const char *const sql_lock_consumers =
"SELECT 1 FROM queen.log_consumers c"
" WHERE (c.partition_id, c.consumer_group) IN"
"       (SELECT k.p, k.g FROM unnest($1::uuid[], $2::text[]) AS k(p, g)"
"        UNION ALL"
"        SELECT l.partition_id, l.consumer_group FROM queen.log_consumers l"
"         WHERE cardinality($3) > 0 AND l.worker_id = ANY ($3) AND l.lease_expires_at > now())"
" ORDER BY c.partition_id, c.consumer_group FOR UPDATE OF c";

static SPIPlanPtr queen_renew_plan = NULL;
static SPIPlanPtr queen_lock_consumers_plan = NULL;

const char *
queen_lease_id_normal(const char *lease)
{
	pg_uuid_t	id;
	char	   *text;

	if (lease == NULL || lease[0] == '\0' || !queen_uuid_parse(lease, &id))
		return lease;
	text = palloc(QUEEN_LEASE_ID_LEN + 1);
	queen_uuid_format(&id, text);
	return text;
}

int
queen_renew_lease(const char *lease_id, int32 seconds, TimestampTz *earliest)
{
	Oid			types[2] = {TEXTOID, FLOAT8OID};
	Datum		values[2];
	int			renewed;
	uint64		r;

	*earliest = 0;
	if (lease_id == NULL || lease_id[0] == '\0')
		return 0;
	lease_id = queen_lease_id_normal(lease_id);
	queen_spi_connect();
	values[0] = CStringGetTextDatum(lease_id);
	values[1] = Float8GetDatum((double) Max(seconds, 1));
	queen_exec(queen_plan_once(&queen_renew_plan, sql_renew, 2, types, false),
			   values, SPI_OK_UPDATE_RETURNING, "lease renewal");
	renewed = (int) SPI_processed;
	for (r = 0; r < SPI_processed; r++)
	{
		TimestampTz t = queen_get_timestamptz(SPI_tuptable->vals[r],
											  SPI_tuptable->tupdesc, 1);

		if (r == 0 || t < *earliest)
			*earliest = t;
	}
	SPI_finish();
	return renewed;
}

void
queen_lock_consumers(const QueenConsumerKey *keys, int nkeys,
					 const char *const *leases, int nleases)
{
	Oid			types[3] = {UUIDARRAYOID, TEXTARRAYOID, TEXTARRAYOID};
	Datum		values[3];
	Datum	   *pids;
	Datum	   *groups;
	Datum	   *lease_ids;
	int			i;

	if (nkeys + nleases == 0)
		return;
	pids = palloc(sizeof(Datum) * Max(nkeys, 1));
	groups = palloc(sizeof(Datum) * Max(nkeys, 1));
	for (i = 0; i < nkeys; i++)
	{
		pids[i] = UUIDPGetDatum(&keys[i].partition_id);
		groups[i] = CStringGetTextDatum(keys[i].group);
	}
	lease_ids = palloc(sizeof(Datum) * Max(nleases, 1));
	for (i = 0; i < nleases; i++)
		lease_ids[i] = CStringGetTextDatum(leases[i]);
	values[0] = queen_array_datum(pids, nkeys, UUIDOID);
	values[1] = queen_array_datum(groups, nkeys, TEXTOID);
	values[2] = queen_array_datum(lease_ids, nleases, TEXTOID);

	queen_spi_connect();
	queen_exec(queen_plan_once(&queen_lock_consumers_plan, sql_lock_consumers, 3, types, false),
			   values, SPI_OK_SELECT, "locking consumer rows in order");
	SPI_finish();
}

/*
 * The lease a consumer row holds now (its worker_id, live or run out), or
 * NULL when it holds none or there is no such row: for a caller that names
 * the leases its acks may act under rather than each ack's own (a
 * transaction's requiredLeases).  The core's ack then judges that lease as
 * it judges any.  Call it with the row locked, so that the answer holds.
 */
char *
queen_consumer_lease(const pg_uuid_t *partition, const char *group)
{
	static QueenStmt stmt = {
		"SELECT worker_id FROM queen.log_consumers WHERE partition_id = $1 AND consumer_group = $2",
		2, {UUIDOID, TEXTOID}, NULL
	};
	MemoryContext out_cxt = CurrentMemoryContext;
	Datum		values[2];
	char	   *lease = NULL;

	queen_spi_connect();
	values[0] = UUIDPGetDatum(partition);
	values[1] = CStringGetTextDatum(group);
	if (queen_stmt_run(&stmt, values, NULL, true, SPI_OK_SELECT, "consumer lease") == 1)
	{
		char	   *held = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);

		if (held != NULL)
			lease = MemoryContextStrdup(out_cxt, held);
	}
	SPI_finish();
	return lease;
}
