/*-------------------------------------------------------------------------
 *
 * metrics.h
 *	  The broker's counters and what /metrics/prometheus shows (metrics.c).
 *
 * A counter is a number here and a row of the metric table in metrics.c,
 * which both counts it (its place in shared memory) and renders it (its
 * name, labels and help).  A new metric is a row there, and for a counter
 * a number here.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_METRICS_H
#define QUEEN_METRICS_H

#include "lib/stringinfo.h"
#include "datatype/timestamp.h"

typedef enum QueenCounter
{
	/* pushes */
	QUEEN_COUNT_PUSH_REQUESTS,
	QUEEN_COUNT_PUSH_MESSAGES,
	QUEEN_COUNT_PUSH_REJECTED,	/* 4xx answered to push requests */
	QUEEN_COUNT_HTTP_REQUESTS,
	QUEEN_COUNT_QUEUED,			/* frames answered queued */
	QUEEN_COUNT_DUPLICATES,		/* frames answered duplicate */
	QUEEN_COUNT_FAILED,			/* frames answered failed */
	QUEEN_COUNT_DAMAGED_ORIGINALS,	/* duplicates whose original could not be read */

	/* bundles */
	QUEEN_COUNT_COMMITS,		/* bundles committed */
	QUEEN_COUNT_BUNDLE_FAILURES,
	QUEEN_COUNT_SEGMENTS,		/* segments in committed bundles */
	QUEEN_COUNT_ITEMS,			/* frames in committed bundles */
	QUEEN_COUNT_EXEC_US,		/* time in bundle statements before COMMIT */
	QUEEN_COUNT_COMMIT_US,		/* time in COMMIT (WAL flush wait included) */

	/* the spool */
	QUEEN_COUNT_SPOOL_WRITTEN,	/* items written and answered buffered */
	QUEEN_COUNT_SPOOL_WRITE_FAILURES,
	QUEEN_COUNT_SPOOL_DRAINED,
	QUEEN_COUNT_SPOOL_DROPPED,	/* replayed as duplicates */
	QUEEN_COUNT_SPOOL_FILES_DRAINED,
	QUEEN_COUNT_SPOOL_DAMAGED,	/* records that could not be read */
	QUEEN_COUNT_SPOOL_QUARANTINED,	/* items this server set aside */
	QUEEN_COUNT_SPOOL_RETRIES,	/* drain units left for later after an error */
	QUEEN_COUNT_SPOOL_UNKNOWN_FATE, /* items spooled after their shard died */
	QUEEN_COUNT_STATEMENT_TIMEOUTS,

	/* consumption */
	QUEEN_COUNT_POP_REQUESTS,
	QUEEN_COUNT_POP_MESSAGES,	/* delivered by committed pops */
	QUEEN_COUNT_POP_EMPTY,		/* pops answered 204 */
	QUEEN_COUNT_LEASES_EXPIRED,
	QUEEN_COUNT_ACK_REQUESTS,
	QUEEN_COUNT_ACK_ITEMS,
	QUEEN_COUNT_ACK_ACKED,
	QUEEN_COUNT_ACK_FAILED,
	QUEEN_COUNT_DLQ_FILED,
	QUEEN_COUNT_LEASE_EXTENSIONS,
	QUEEN_COUNT_WAKES_PUSH,		/* queues woken by bundles that stored messages */
	QUEEN_COUNT_WAKES_ACK,		/* by acks that released a lease */
	QUEEN_COUNT_WAKES_DRAIN,	/* by drained spool items */
	QUEEN_COUNT_WAKES_SQL,		/* by commits of the SQL door (wait.c) */
	QUEEN_COUNT_RESENDS_WAKE,	/* line heads sent again: what they watch moved */
	QUEEN_COUNT_RESENDS_DUE,	/* on the backoff, or at a 204's retry_at */
	QUEEN_COUNT_RESENDS_NEXT,	/* after the head before them delivered */
	QUEEN_COUNT_CONSUME_SHARED_FAILED,
	QUEEN_COUNT_LEASES_RESTAMPED,
	QUEEN_COUNT_CONSUME_LOCK_TIMEOUTS,

	/* transactions (POST /api/v1/transaction) */
	QUEEN_COUNT_TXN_COMMITTED,
	QUEEN_COUNT_TXN_DUPLICATE,	/* rolled back: a pushed transactionId was stored */
	QUEEN_COUNT_TXN_ACK_FAILED, /* rolled back: an ack was not carried out */
	QUEEN_COUNT_TXN_FAILED,		/* rolled back by an error of the server */

	/* stream cycles (POST /streams/v1/cycle), the same outcomes and one more */
	QUEEN_COUNT_CYCLE_COMMITTED,
	QUEEN_COUNT_CYCLE_DUPLICATE,
	QUEEN_COUNT_CYCLE_ACK_FAILED,
	QUEEN_COUNT_CYCLE_NO_QUERY, /* rolled back: no such query */
	QUEEN_COUNT_CYCLE_FAILED,

	/* retention (retention.c), by what let each go */
	QUEEN_COUNT_RET_RETENTION,	/* messages past retentionSeconds */
	QUEEN_COUNT_RET_MAX_WAIT,	/* messages past maxWaitTimeSeconds */
	QUEEN_COUNT_RET_COMPLETED,	/* messages consumed and past completedRetentionSeconds */
	QUEEN_COUNT_RET_SEGMENTS,	/* the segments that held them */
	QUEEN_COUNT_RET_HASHES,		/* transactionId hashes behind every dedup window */
	QUEEN_COUNT_RET_DLQ,		/* dead letters past queen.dlq_retention */
	QUEEN_COUNT_RET_TRACES,		/* traces past queen.trace_retention */
	QUEEN_COUNT_RET_PARTITIONS, /* idle partitions past queen.partition_cleanup_days */

	QUEEN_NCOUNTERS
} QueenCounter;

extern void queen_count(QueenCounter c, uint64 n);
extern void queen_metrics_listener_gauges(int listener, uint32 parked, uint32 lines);
extern bool queen_metrics_listener_waiting(int listener);

extern Size queen_metrics_shmem_size(void);
extern void queen_metrics_shmem_init(void);

extern void queen_metrics_render(StringInfo out);
extern void queen_metrics_retention_swept(TimestampTz at);
extern void queen_metrics_history_json(StringInfo out);
extern TimestampTz queen_metrics_retention_last_sweep(void);
extern void queen_metric(StringInfo out, const char *name, const char *type, const char *help);
extern void queen_metric_label(StringInfo out, const char *name, const char *value);
extern void queen_metrics_bundle_summary(void);
extern void queen_metrics_publish_core(void);
extern void queen_health_json(StringInfo out, bool connected, const char *error);

/* Families a subsystem renders from the shared state it owns. */
extern void queen_permits_render(StringInfo out);
extern void queen_lag_render(StringInfo out);

#endif							/* QUEEN_METRICS_H */
