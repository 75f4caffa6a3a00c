/*-------------------------------------------------------------------------
 *
 * retention_sql.c
 *	  queen.retention_run: retention from SQL, for a cluster without the
 *	  broker (a DBA schedules it with pg_cron), over the same core as the
 *	  maintenance worker (retention.c).
 *
 * It runs in the caller's transaction, the phases queen.retention_phases
 * names in the core's order (retention.c): per partition, one step on each
 * due partition, at most max_partitions of them; a batch phase (dead
 * letters, traces) one batch of at most max_rows.  It returns what each
 * step removed: kind "segments" (the queues' rules, messages and the
 * segments that held them), "hashes" (the hashes' purge), "partitions"
 * (idle partitions removed), "dlq" and "traces" (rows removed, in
 * messages).  Call it often rather than with large limits, since every
 * partition it steps stays locked against pushes until the caller commits.
 * queen.stats_refresh, the figures' refresh (stats_refresh.c), is the
 * other piece of housekeeping such a DBA schedules.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "queen.h"
#include "admin.h"
#include "retention.h"

#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"

PG_FUNCTION_INFO_V1(queen_retention_run_sql);
PG_FUNCTION_INFO_V1(queen_stats_refresh_sql);

/* One row of the result; queue and partition NULL for a batch phase. */
static void
queen_retention_row(ReturnSetInfo *rsinfo, const char *kind, const QueenRetentionDue *d,
					int64 segments, int64 messages, int64 log_start)
{
	Datum		values[6];
	bool		nulls[6] = {false, false, false, false, false, false};

	values[0] = CStringGetTextDatum(kind);
	if (d != NULL)
	{
		values[1] = CStringGetTextDatum(d->queue);
		values[2] = CStringGetTextDatum(d->partition);
	}
	nulls[1] = nulls[2] = d == NULL;
	values[3] = Int64GetDatum(segments);
	nulls[3] = segments < 0;
	values[4] = Int64GetDatum(messages);
	values[5] = Int64GetDatum(log_start);
	nulls[5] = log_start < 0;
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

Datum
queen_retention_run_sql(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int32		max_partitions = PG_ARGISNULL(0) ? 100 : PG_GETARG_INT32(0);
	int32		max_rows = PG_ARGISNULL(1) ? 1000 : PG_GETARG_INT32(1);
	const QueenRetentionPhase *phase;
	int			p;

	if (max_partitions < 1 || max_rows < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_partitions and max_rows must be at least 1")));
	InitMaterializedSRF(fcinfo, 0);
	for (p = 0; (phase = queen_retention_phase(p)) != NULL; p++)
	{
		QueenRetentionDue *due;
		int			n;
		int			i;

		if (!queen_retention_phase_on(phase))
			continue;
		if (phase->batch != NULL)
		{
			int64		removed = phase->batch(max_rows);

			if (removed > 0)
				queen_retention_row(rsinfo, phase->name, NULL, -1, removed, -1);
			continue;
		}
		n = phase->due(max_partitions, &due);
		for (i = 0; i < n; i++)
		{
			QueenRetentionStep step;

			phase->step(&due[i], max_rows, &step);
			if (step.segments == 0)
				continue;
			if (phase->bit == QUEEN_PHASE_PARTITIONS)
				queen_retention_row(rsinfo, phase->name, &due[i], -1, 0, -1);
			else
				queen_retention_row(rsinfo, phase->name, &due[i], step.segments,
									step.messages, step.new_log_start);
		}
	}
	return (Datum) 0;
}

/* queen.stats_refresh(full_pass) -> (queues, groups): the rows refreshed */
Datum
queen_stats_refresh_sql(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Datum		values[2];
	bool		nulls[2] = {false, false};
	int64		queues;
	int64		groups;

	InitMaterializedSRF(fcinfo, 0);
	queen_stats_refresh_run(!PG_ARGISNULL(0) && PG_GETARG_BOOL(0), &queues, &groups);
	values[0] = Int64GetDatum(queues);
	values[1] = Int64GetDatum(groups);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	return (Datum) 0;
}
