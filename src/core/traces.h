/*-------------------------------------------------------------------------
 *
 * traces.h
 *	  Traces: named events a consumer records against a message (traces.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_TRACES_H
#define QUEEN_TRACES_H

#include "queen.h"

/* One trace to record; strings NUL-terminated, data a JSON text. */
typedef struct QueenTraceInput
{
	pg_uuid_t	tenant;
	pg_uuid_t	partition_id;
	const char *transaction_id;
	const char *consumer_group;
	const char *event_type;
	const char *data;
	const char *const *names;
	int			nnames;
} QueenTraceInput;

/* A stored trace as read back (queue and partition: by name only). */
typedef struct QueenTrace
{
	pg_uuid_t	id;
	pg_uuid_t	partition_id;
	char	   *transaction_id;
	char	   *consumer_group;
	char	   *event_type;
	char	   *data;			/* JSON text */
	char	   *worker_id;		/* NULL */
	TimestampTz created_at;
	char	   *queue;			/* NULL once the partition is gone */
	char	   *partition;
	QueenTexts	names;
} QueenTrace;

typedef struct QueenTraceName
{
	char	   *name;
	int64		traces;
	int64		messages;
	TimestampTz last_seen;
} QueenTraceName;

/*
 * The most traces a message's listing returns, the oldest first: anyone
 * may record any number against one message, and one request must stay
 * bounded in memory and time.
 */
#define QUEEN_TRACES_OF_MESSAGE_MAX	1000

extern void queen_trace_record(const QueenTraceInput *in, pg_uuid_t *id);
extern int	queen_traces_of_message(const pg_uuid_t *tenant, const pg_uuid_t *partition_id,
									const char *transaction_id, QueenTrace **traces);
extern int64 queen_traces_by_name(const pg_uuid_t *tenant, const char *name, TimestampTz from,
								  TimestampTz to, int limit, int64 offset,
								  QueenTrace **traces, int *ntraces);
extern int64 queen_trace_names(const pg_uuid_t *tenant, int limit, int64 offset,
							   QueenTraceName **names, int *nnames);
extern int64 queen_traces_expire(TimestampTz before, int limit);

#endif							/* QUEEN_TRACES_H */
