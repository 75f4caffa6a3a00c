/*-------------------------------------------------------------------------
 *
 * admin.h
 *	  Administration: the operator's reads (admin.c, Queen's answers as
 *	  JSON from the SQL functions queen._api_*) and writes (admin_write.c:
 *	  seeks, subscriptions, dead letters purged, replayed and forgotten).
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_ADMIN_H
#define QUEEN_ADMIN_H

#include "queen.h"

/* The administration requests, one row each in admin.c. */
typedef enum QueenAdminRequest
{
	QUEEN_ADMIN_QUEUES = 1,		/* namespace, task; a page */
	QUEEN_ADMIN_QUEUE,			/* queue; a page of partitions */
	QUEEN_ADMIN_OVERVIEW,
	QUEEN_ADMIN_NAMESPACES,
	QUEEN_ADMIN_TASKS,
	QUEEN_ADMIN_GROUPS,
	QUEEN_ADMIN_LAGGING,		/* number: the least lag in seconds; limit */
	QUEEN_ADMIN_GROUP,			/* group; limit */
	QUEEN_ADMIN_STATUS,			/* queue, namespace, task; from, to */
	QUEEN_ADMIN_QUEUE_OPS,		/* queue; from, to */
	QUEEN_ADMIN_QUEUE_LAG,		/* queue; from, to */
	QUEEN_ADMIN_RETENTION,		/* queue; from, to */
	QUEEN_ADMIN_ANALYTICS,		/* queue, namespace, task; from, to */
	QUEEN_ADMIN_WORKER_METRICS, /* from, to */
	QUEEN_ADMIN_SYSTEM_METRICS, /* from, to */
	QUEEN_ADMIN_STATS_REFRESH,
	QUEEN_ADMIN_SEEK,			/* group, queue, partition; to_end or from */
	QUEEN_ADMIN_SUBSCRIPTION,	/* group; from */
	QUEEN_ADMIN_DLQ_PURGE,		/* queue, group */
	QUEEN_ADMIN_DLQ_REPLAY,		/* id (text) */
	QUEEN_ADMIN_MESSAGE,		/* partition id, transactionId (text) */
	QUEEN_ADMIN_MESSAGES,		/* queue, partition, status; a page */
	QUEEN_ADMIN_MESSAGE_FORGET, /* partition id, transactionId */
	QUEEN_ADMIN_MESSAGE_RETRY,	/* partition id, transactionId */
	QUEEN_ADMIN_NREQUESTS
} QueenAdminRequest;

#define QUEEN_ADMIN_TEXTS	5

/* A request's arguments; which it reads is its row's business. */
typedef struct QueenAdminArgs
{
	const char *text[QUEEN_ADMIN_TEXTS];	/* NULL: absent */
	int32		limit;
	int64		offset;
	int32		number;
	bool		flag;
	TimestampTz from;
	TimestampTz to;
} QueenAdminArgs;

/* The answer: JSON, or NULL with not_found saying what was not. */
typedef struct QueenAdminAnswer
{
	char	   *json;
	const char *not_found;
	bool		writes;			/* it changed something (a write's row) */
} QueenAdminAnswer;

extern bool queen_admin_writes(int request);
extern int64 queen_message_offset(const pg_uuid_t *pid, int64 lo, int64 hi, const char *txn);
extern void queen_admin_run(int request, const pg_uuid_t *tenant, const QueenAdminArgs *args,
							QueenAdminAnswer *out);

/* A queue's figures as the last stats refresh found them (queen_queue_stats_top). */
typedef struct QueenQueueStatRow
{
	pg_uuid_t	tenant;
	char	   *queue;
	int64		messages;
	int64		pending;
	int64		dead_letters;
	int64		max_lag_seconds;
} QueenQueueStatRow;

extern void queen_broker_history_record(const char *counters_json);
extern int	queen_queue_stats_top(int limit, QueenQueueStatRow **rows, TimestampTz *refreshed_at);

/* stats_refresh.c: the figures' refresh, and the marks that keep it incremental */
extern void queen_stats_refresh_run(bool full, int64 *queues, int64 *groups);
extern void queen_stats_mark(const pg_uuid_t *queue, const pg_uuid_t *partition);
extern void queen_stats_mark_group(const pg_uuid_t *tenant, const char *group,
								   const char *queue);

/* admin_write.c */
typedef struct QueenReplay
{
	bool		found;
	bool		duplicate;		/* the replay's transactionId was stored already: nothing moved */
	pg_uuid_t	dlq_id;
	pg_uuid_t	message_id;		/* the new message's (a duplicate's: the original's) */
	pg_uuid_t	partition_id;
	char	   *queue;
	char	   *partition;
	char	   *transaction_id;
	int64		offset;
} QueenReplay;

extern int64 queen_seek(const pg_uuid_t *tenant, const char *queue, const char *partition,
						const char *group, bool to_end, TimestampTz at, bool *found);
extern int64 queen_group_subscription(const pg_uuid_t *tenant, const char *group,
									  TimestampTz at);
extern int64 queen_dlq_purge(const pg_uuid_t *tenant, const char *queue, const char *group,
							 bool *found);
extern void queen_dlq_replay(const pg_uuid_t *tenant, const pg_uuid_t *id, QueenReplay *out);
extern bool queen_dlq_newest(const pg_uuid_t *tenant, const pg_uuid_t *partition,
							 const char *txn, pg_uuid_t *id);
extern int64 queen_dlq_forget(const pg_uuid_t *tenant, const pg_uuid_t *partition,
							  const char *txn);

#endif							/* QUEEN_ADMIN_H */
