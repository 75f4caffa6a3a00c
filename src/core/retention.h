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
	int64		by_age;			/* of them, those rule 1 (or the max wait) let go */
	int64		segments_by_age;	/* and the segments that held those */
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
	bool		max_wait;		/* rule 1's cutoff is maxWaitTimeSeconds' */
} QueenRetentionDue;

extern int	queen_retention_due(int limit, QueenRetentionDue **due);
extern int	queen_txns_due(int limit, QueenRetentionDue **due);
extern void queen_txns_purge_step(const pg_uuid_t *partition, TimestampTz cutoff, int max_rows,
								  QueenRetentionStep *out);

extern int64 queen_dlq_expire(TimestampTz before, int limit);
extern int	queen_idle_partitions_due(TimestampTz cutoff, int limit, QueenRetentionDue **due);
extern bool queen_idle_partition_remove(const pg_uuid_t *partition, TimestampTz cutoff);

/*
 * One phase of retention: per partition (due, then a step on each, each
 * step a transaction of its own in the maintenance worker) or a batch
 * (removes at most limit of what is past its age; how many).
 */
typedef struct QueenRetentionPhase
{
	const char *name;			/* as queen.retention_phases names it */
	int			bit;			/* QUEEN_PHASE_* */
	const int  *age;			/* its setting; 0 turns it off; NULL: the queues' options */
	int			(*due) (int limit, QueenRetentionDue **due);
	void		(*step) (const QueenRetentionDue *d, int max_rows, QueenRetentionStep *out);
	int64		(*batch) (int limit);
} QueenRetentionPhase;

extern const QueenRetentionPhase *queen_retention_phase(int i);
extern bool queen_retention_phase_on(const QueenRetentionPhase *phase);

#endif							/* QUEEN_RETENTION_H */
