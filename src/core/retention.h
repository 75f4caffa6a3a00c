/*-------------------------------------------------------------------------
 *
 * retention.h
 *	  Retention's steps and work list (retention.c): what the maintenance
 *	  worker and queen.retention_run call.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_RETENTION_H
#define QUEEN_RETENTION_H

#include "queen.h"

typedef struct QueenRetentionStep
{
	int64		segments;		/* segments (or hash rows) removed */
	int64		messages;		/* the frames they held */
	int64		new_log_start;	/* the first offset kept (txns_start for the purge) */
	bool		done;			/* false: the step stopped at max_rows */
} QueenRetentionStep;

extern void queen_retention_step(const pg_uuid_t *partition, TimestampTz all_cutoff,
								 TimestampTz completed_cutoff, int max_rows,
								 QueenRetentionStep *out);

typedef struct QueenRetentionDue
{
	pg_uuid_t	partition_id;
	char	   *queue;
	char	   *partition;
	TimestampTz all_cutoff;		/* rule 1's; DT_NOBEGIN: off */
	TimestampTz completed_cutoff;	/* rule 2's; DT_NOBEGIN: off */
} QueenRetentionDue;

extern int	queen_retention_due(int limit, QueenRetentionDue **due);
extern int	queen_txns_due(int limit, QueenRetentionDue **due);
extern void queen_txns_purge_step(const pg_uuid_t *partition, TimestampTz cutoff, int max_rows,
								  QueenRetentionStep *out);

#endif							/* QUEEN_RETENTION_H */
