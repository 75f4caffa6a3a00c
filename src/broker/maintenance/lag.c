/*-------------------------------------------------------------------------
 *
 * lag.c
 *	  Consumer lag and queue depth for /metrics: the maintenance worker
 *	  asks the core for the most lagging (queue, group) pairs
 *	  (queen_consumer_lag_top, which refreshes the stats first) every
 *	  queen.consumer_lag_interval seconds, and for the deepest queues as
 *	  that refresh found them (queen_queue_stats_top), and writes them to
 *	  this file's shared memory, from which any listener renders them
 *	  without a database round trip.
 *
 * The refresh reads only what changed since the last, but once an hour
 * every partition and cursor (stats_refresh.c), so it runs in the
 * maintenance worker, never in a shard, whose pushes, pops and acks would
 * wait behind it.  The table in shared memory
 * is guarded by a sequence count: odd while written, and nothing between
 * its two increments can fail.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "maintenance.h"
#include "admin.h"
#include "codec.h"
#include "consume.h"
#include "worker.h"

#include "pgstat.h"
#include "storage/shmem.h"
#include "utils/backend_status.h"
#include "utils/timestamp.h"

/*
 * The last sample, most lagging first.  seq is odd while the worker
 * writes; a reader copies and retries if seq moved.
 */
#define QUEEN_LAG_ENTRIES		256

typedef struct QueenLagEntry
{
	pg_uuid_t	tenant;
	char		queue[QUEEN_MAX_NAME_BYTES + 1];
	char		group[QUEEN_MAX_NAME_BYTES + 1];
	int64		partitions;
	int64		messages;
} QueenLagEntry;

typedef struct QueenQueueEntry
{
	pg_uuid_t	tenant;
	char		queue[QUEEN_MAX_NAME_BYTES + 1];
	int64		messages;
	int64		pending;
	int64		dead_letters;
	int64		max_lag_seconds;
} QueenQueueEntry;

typedef struct QueenLagShared
{
	pg_atomic_uint64 seq;
	TimestampTz sampled_at;		/* 0: not yet */
	int			n;
	bool		truncated;		/* more (queue, group) pairs than entries */
	QueenLagEntry entries[QUEEN_LAG_ENTRIES];
	TimestampTz stats_at;		/* the stats refresh the queues come from; 0: none */
	int			nqueues;
	bool		queues_truncated;
	QueenQueueEntry queues[QUEEN_LAG_ENTRIES];
} QueenLagShared;

static QueenLagShared *queen_lag = NULL;

Size
queen_lag_shmem_size(void)
{
	return MAXALIGN(sizeof(QueenLagShared));
}

void
queen_lag_shmem_init(void)
{
	bool		found;

	queen_lag = ShmemInitStruct("queen consumer lag", queen_lag_shmem_size(), &found);
	if (!found)
	{
		memset(queen_lag, 0, sizeof(QueenLagShared));
		pg_atomic_init_u64(&queen_lag->seq, 0);
	}
}

static void
queen_lag_body(void *arg)
{
	QueenLagEntry *entries = palloc0(sizeof(QueenLagEntry) * QUEEN_LAG_ENTRIES);
	QueenQueueEntry *queues = palloc0(sizeof(QueenQueueEntry) * QUEEN_LAG_ENTRIES);
	QueenLagRow *rows;
	QueenQueueStatRow *qrows;
	TimestampTz stats_at;
	int			found;
	int			qfound;
	int			n;
	int			nq;
	int			i;

	(void) arg;
	pgstat_report_activity(STATE_RUNNING, "queen: consumer lag");
	found = queen_consumer_lag_top(QUEEN_LAG_ENTRIES, &rows);
	n = Min(found, QUEEN_LAG_ENTRIES);
	for (i = 0; i < n; i++)
	{
		entries[i].tenant = rows[i].tenant;
		strlcpy(entries[i].queue, rows[i].queue, sizeof(entries[i].queue));
		strlcpy(entries[i].group, rows[i].group, sizeof(entries[i].group));
		entries[i].partitions = rows[i].partitions;
		entries[i].messages = rows[i].messages;
	}
	qfound = queen_queue_stats_top(QUEEN_LAG_ENTRIES + 1, &qrows, &stats_at);
	nq = Min(qfound, QUEEN_LAG_ENTRIES);
	for (i = 0; i < nq; i++)
	{
		queues[i].tenant = qrows[i].tenant;
		strlcpy(queues[i].queue, qrows[i].queue, sizeof(queues[i].queue));
		queues[i].messages = qrows[i].messages;
		queues[i].pending = qrows[i].pending;
		queues[i].dead_letters = qrows[i].dead_letters;
		queues[i].max_lag_seconds = qrows[i].max_lag_seconds;
	}

	/* nothing below can fail: a reader never sees seq stay odd */
	pg_atomic_fetch_add_u64(&queen_lag->seq, 1);
	pg_write_barrier();
	memcpy(queen_lag->entries, entries, sizeof(QueenLagEntry) * n);
	queen_lag->n = n;
	queen_lag->truncated = found > n;
	queen_lag->sampled_at = GetCurrentTimestamp();
	memcpy(queen_lag->queues, queues, sizeof(QueenQueueEntry) * nq);
	queen_lag->nqueues = nq;
	queen_lag->queues_truncated = qfound > nq;
	queen_lag->stats_at = stats_at;
	pg_write_barrier();
	pg_atomic_fetch_add_u64(&queen_lag->seq, 1);
}

/* One sample, in a transaction of its own; a failure is logged and skipped. */
void
queen_lag_sample(void)
{
	QueenTxResult result;

	(void) queen_worker_transact("consumer lag", "maintenance", queen_lag_body, NULL, &result);
}

/* The queues' families, from a copy of the last sample. */
static void
queen_queues_render(StringInfo out, const QueenQueueEntry *queues, int nq, bool truncated,
					TimestampTz stats_at)
{
	static const char *const names[4] = {
		"queen_queue_messages", "queen_queue_pending_messages", "queen_queue_dead_letters",
		"queen_queue_oldest_pending_seconds"
	};
	static const char *const helps[4] = {
		"Messages retained per queue, at the last stats refresh (queen.stats_interval).",
		"Messages not yet acknowledged by the queue's most lagging consumer group, at the last stats refresh.",
		"Dead letters per queue, at the last stats refresh.",
		"How long the queue's oldest pending message had waited, at the last stats refresh."
	};
	int			k;
	int			i;

	queen_metric(out, "queen_stats_age_seconds", "gauge",
				 "Seconds since queen.stats_refresh() last ran (the overview routes' statsAge); -1 before the first.");
	appendStringInfo(out, "queen_stats_age_seconds %.1f\n", stats_at == 0 ? -1.0 :
					 (double) (GetCurrentTimestamp() - stats_at) / USECS_PER_SEC);
	queen_metric(out, "queen_queues_truncated", "gauge",
				 "1 when there are more queues than the 256 deepest listed.");
	appendStringInfo(out, "queen_queues_truncated %d\n", truncated ? 1 : 0);
	for (k = 0; k < 4; k++)
	{
		queen_metric(out, names[k], "gauge", helps[k]);
		for (i = 0; i < nq; i++)
		{
			char		tenant[UUID_LEN * 2 + 5];
			int64		v = k == 0 ? queues[i].messages : k == 1 ? queues[i].pending :
				k == 2 ? queues[i].dead_letters : queues[i].max_lag_seconds;

			if (queen_metrics_tenant != NULL &&
				memcmp(queen_metrics_tenant->data, queues[i].tenant.data, UUID_LEN) != 0)
				continue;
			queen_uuid_format(&queues[i].tenant, tenant);
			appendStringInfo(out, "%s{", names[k]);
			queen_metric_label(out, "tenant", tenant);
			appendStringInfoChar(out, ',');
			queen_metric_label(out, "queue", queues[i].queue);
			appendStringInfo(out, "} " INT64_FORMAT "\n", v);
		}
	}
}

/*
 * The last sample on /metrics, copied out under its sequence count so a
 * sample being written is never rendered half.
 */
void
queen_lag_render(StringInfo out)
{
	QueenLagEntry *rows = palloc(sizeof(QueenLagEntry) * QUEEN_LAG_ENTRIES);
	QueenQueueEntry *queues = palloc(sizeof(QueenQueueEntry) * QUEEN_LAG_ENTRIES);
	TimestampTz sampled_at;
	TimestampTz stats_at;
	bool		truncated;
	bool		queues_truncated;
	uint64		seq;
	int			n;
	int			nq;
	int			i;
	int			k;

	for (;;)
	{
		seq = pg_atomic_read_u64(&queen_lag->seq);
		if (seq % 2 == 1)
		{
			pg_usleep(1000L);
			continue;
		}
		pg_read_barrier();
		n = queen_lag->n;
		truncated = queen_lag->truncated;
		sampled_at = queen_lag->sampled_at;
		memcpy(rows, queen_lag->entries, sizeof(QueenLagEntry) * n);
		nq = queen_lag->nqueues;
		queues_truncated = queen_lag->queues_truncated;
		stats_at = queen_lag->stats_at;
		memcpy(queues, queen_lag->queues, sizeof(QueenQueueEntry) * nq);
		pg_read_barrier();
		if (pg_atomic_read_u64(&queen_lag->seq) == seq)
			break;
	}

	queen_metric(out, "queen_consumer_lag_age_seconds", "gauge",
				 "Seconds since the consumer lag was sampled (queen.consumer_lag_interval); -1 before the first sample.");
	appendStringInfo(out, "queen_consumer_lag_age_seconds %.1f\n", sampled_at == 0 ? -1.0 :
					 (double) (GetCurrentTimestamp() - sampled_at) / USECS_PER_SEC);
	queen_metric(out, "queen_consumer_lag_truncated", "gauge",
				 "1 when more (queue, group) pairs lag than the 256 most lagging listed.");
	appendStringInfo(out, "queen_consumer_lag_truncated %d\n", truncated ? 1 : 0);
	for (k = 0; k < 2; k++)
	{
		const char *name = k == 0 ? "queen_consumer_lag_messages" : "queen_consumer_lag_partitions";

		queen_metric(out, name, "gauge", k == 0 ?
					 "Messages not yet acknowledged, per queue and consumer group (queue mode: __QUEUE_MODE__), at the last sample." :
					 "Partitions holding messages not yet acknowledged, per queue and consumer group, at the last sample.");
		for (i = 0; i < n; i++)
		{
			char		tenant[UUID_LEN * 2 + 5];

			if (queen_metrics_tenant != NULL &&
				memcmp(queen_metrics_tenant->data, rows[i].tenant.data, UUID_LEN) != 0)
				continue;
			queen_uuid_format(&rows[i].tenant, tenant);
			appendStringInfo(out, "%s{", name);
			queen_metric_label(out, "tenant", tenant);
			appendStringInfoChar(out, ',');
			queen_metric_label(out, "queue", rows[i].queue);
			appendStringInfoChar(out, ',');
			queen_metric_label(out, "group", rows[i].group);
			appendStringInfo(out, "} " INT64_FORMAT "\n",
							 k == 0 ? rows[i].messages : rows[i].partitions);
		}
	}
	queen_queues_render(out, queues, nq, queues_truncated, stats_at);
	pfree(rows);
	pfree(queues);
}
