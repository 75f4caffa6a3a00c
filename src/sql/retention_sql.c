/*-------------------------------------------------------------------------
 *
 * retention_sql.c
 *	  queen.retention_run: retention from SQL, for a cluster without the
 *	  broker (a DBA schedules it with pg_cron), over the same core as the
 *	  maintenance worker (retention.c).
 *
 * It runs in the caller's transaction, one step per due partition under
 * the queues' rules (kind "segments"), then one per partition whose hashes
 * are past every dedup window (kind "hashes"), and returns what each
 * removed; call it often rather than with large limits,
 * since every partition it steps stays locked against pushes until the
 * caller commits.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "queen.h"
#include "retention.h"

#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"

PG_FUNCTION_INFO_V1(queen_retention_run_sql);

Datum
queen_retention_run_sql(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int32		max_partitions = PG_ARGISNULL(0) ? 100 : PG_GETARG_INT32(0);
	int32		max_rows = PG_ARGISNULL(1) ? 1000 : PG_GETARG_INT32(1);
	QueenRetentionDue *due;
	int			n;
	int			i;
	int			phase;

	if (max_partitions < 1 || max_rows < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_partitions and max_rows must be at least 1")));
	InitMaterializedSRF(fcinfo, 0);
	for (phase = 0; phase < 2; phase++)
	{
		n = phase == 0 ? queen_retention_due(max_partitions, &due) :
			queen_txns_due(max_partitions, &due);
		for (i = 0; i < n; i++)
		{
			QueenRetentionStep step;
			Datum		values[6];
			bool		nulls[6] = {false, false, false, false, false, false};

			if (phase == 0)
				queen_retention_step(&due[i].partition_id, due[i].all_cutoff,
									 due[i].completed_cutoff, max_rows, &step);
			else
				queen_txns_purge_step(&due[i].partition_id, due[i].all_cutoff, max_rows, &step);
			if (step.segments == 0)
				continue;
			values[0] = CStringGetTextDatum(phase == 0 ? "segments" : "hashes");
			values[1] = CStringGetTextDatum(due[i].queue);
			values[2] = CStringGetTextDatum(due[i].partition);
			values[3] = Int64GetDatum(step.segments);
			values[4] = Int64GetDatum(step.messages);
			values[5] = Int64GetDatum(step.new_log_start);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
	return (Datum) 0;
}
