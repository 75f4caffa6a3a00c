/*-------------------------------------------------------------------------
 *
 * metrics.c
 *	  What the broker tells operators: its counters, the Prometheus text on
 *	  /metrics/prometheus, and the periodic "bundle summary" log line.
 *
 * Every metric is a row of one table (queen_metric_defs): a counter's row
 * both counts (its number, metrics.h, is its slot in this file's shared
 * memory) and renders (name, labels, help); a gauge's row names the
 * function that reads it; a family whose samples come from another
 * subsystem's shared state (the permit pool, the consumer lag) names that
 * subsystem's function, which renders it whole.  So a new metric is a row.
 *
 * Everything comes from shared memory, so any listener can render it
 * without a database round trip, and a scrape costs nothing to the write
 * path.  Names follow Queen's where Queen has one, so existing dashboards
 * keep working: queen_batches_fired_total counts segments (Queen records
 * one batch per segment), queen_bundles_committed_total counts the
 * transactions that carried them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "broker.h"
#include "log_read.h"
#include "maintenance/spool.h"

#include "access/xlog.h"
#include "storage/shmem.h"
#include "utils/json.h"
#include "utils/timestamp.h"

/* This file's shared memory: the counters and the listeners' gauges. */
typedef struct QueenMetricsShared
{
	pg_atomic_uint64 counters[QUEEN_NCOUNTERS];
	TimestampTz started_at;		/* when shared memory was set up */
	pg_atomic_uint32 parked[QUEEN_MAX_LISTENERS];	/* pops parked per listener */
	pg_atomic_uint32 lines[QUEEN_MAX_LISTENERS];	/* their lines per listener */
	pg_atomic_uint64 retention_swept_at;	/* TimestampTz of retention's last sweep; 0: none */
} QueenMetricsShared;

static QueenMetricsShared *queen_metrics = NULL;

const pg_uuid_t *queen_metrics_tenant = NULL;

Size
queen_metrics_shmem_size(void)
{
	return MAXALIGN(sizeof(QueenMetricsShared));
}

void
queen_metrics_shmem_init(void)
{
	bool		found;
	int			i;

	queen_metrics = ShmemInitStruct("queen metrics", queen_metrics_shmem_size(), &found);
	if (found)
		return;
	for (i = 0; i < QUEEN_NCOUNTERS; i++)
		pg_atomic_init_u64(&queen_metrics->counters[i], 0);
	for (i = 0; i < QUEEN_MAX_LISTENERS; i++)
	{
		pg_atomic_init_u32(&queen_metrics->parked[i], 0);
		pg_atomic_init_u32(&queen_metrics->lines[i], 0);
	}
	pg_atomic_init_u64(&queen_metrics->retention_swept_at, 0);
	queen_metrics->started_at = GetCurrentTimestamp();
}

/* Count n; a process of a cluster without the broker counts nowhere. */
void
queen_count(QueenCounter c, uint64 n)
{
	if (queen_metrics != NULL && n > 0)
		pg_atomic_fetch_add_u64(&queen_metrics->counters[c], n);
}

static uint64
queen_counter(QueenCounter c)
{
	return queen_metrics != NULL ? pg_atomic_read_u64(&queen_metrics->counters[c]) : 0;
}

/* A listener's parked pops and their lines (longpoll.c), as of now. */
void
queen_metrics_listener_gauges(int listener, uint32 parked, uint32 lines)
{
	pg_atomic_write_u32(&queen_metrics->parked[listener], parked);
	pg_atomic_write_u32(&queen_metrics->lines[listener], lines);
}

/*
 * Whether a listener has pops parked or lines kept: the committers' wake
 * (wake.c) skips a listener with neither, which has nothing a generation
 * could move.  True when the gauges are not there to tell.
 */
bool
queen_metrics_listener_waiting(int listener)
{
	if (queen_metrics == NULL)
		return true;
	return pg_atomic_read_u32(&queen_metrics->parked[listener]) > 0 ||
		pg_atomic_read_u32(&queen_metrics->lines[listener]) > 0;
}

/* Retention's sweep ended (maintenance_worker.c); when it last did. */
void
queen_metrics_retention_swept(TimestampTz at)
{
	if (queen_metrics != NULL)
		pg_atomic_write_u64(&queen_metrics->retention_swept_at, (uint64) at);
}

TimestampTz
queen_metrics_retention_last_sweep(void)
{
	return queen_metrics != NULL ?
		(TimestampTz) pg_atomic_read_u64(&queen_metrics->retention_swept_at) : 0;
}

/*
 * Add what this process counted in the core since it last published (the
 * core has no shared memory of its own: the SQL door runs without it).
 */
void
queen_metrics_publish_core(void)
{
	static uint64 published = 0;

	if (queen_damaged_originals != published)
	{
		queen_count(QUEEN_COUNT_DAMAGED_ORIGINALS, queen_damaged_originals - published);
		published = queen_damaged_originals;
	}
}

/* ----------------------------------------------------------------
 *		The gauges the table reads
 * ----------------------------------------------------------------
 */

static double
queen_gauge_uptime(void)
{
	return (double) (GetCurrentTimestamp() - queen_metrics->started_at) / USECS_PER_SEC;
}

static double
queen_gauge_listeners(pg_atomic_uint32 *per_listener)
{
	uint64		sum = 0;
	int			l;

	for (l = 0; l < queen_broker->nlisteners; l++)
		sum += pg_atomic_read_u32(&per_listener[l]);
	return (double) sum;
}

static double
queen_gauge_parked(void)
{
	return queen_gauge_listeners(queen_metrics->parked);
}

static double
queen_gauge_lines(void)
{
	return queen_gauge_listeners(queen_metrics->lines);
}

static double
queen_gauge_items_per_segment(void)
{
	uint64		segments = queen_counter(QUEEN_COUNT_SEGMENTS);

	return segments ? (double) queen_counter(QUEEN_COUNT_ITEMS) / segments : 0.0;
}

static double
queen_gauge_segments_per_commit(void)
{
	uint64		commits = queen_counter(QUEEN_COUNT_COMMITS);

	return commits ? (double) queen_counter(QUEEN_COUNT_SEGMENTS) / commits : 0.0;
}

/* 1 while this node is in recovery: a standby, whose broker waits for promotion */
static double
queen_gauge_standby(void)
{
	return RecoveryInProgress() ? 1.0 : 0.0;
}

/* Unix seconds of retention's last sweep; 0 before the first. */
static double
queen_gauge_retention_swept(void)
{
	TimestampTz at = queen_metrics_retention_last_sweep();

	if (at == 0)
		return 0.0;
	return (double) at / USECS_PER_SEC +
		((POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY);
}

/* 1 for each fusion shard that is connected and serving. */
static void
queen_shards_render(StringInfo out)
{
	int			s;

	queen_metric(out, "queen_shard_ready", "gauge", "1 when the fusion shard is connected and serving.");
	for (s = 0; s < queen_broker->nshards; s++)
		appendStringInfo(out, "queen_shard_ready{shard=\"%d\"} %d\n", s,
						 queen_worker_state(&queen_broker->shards[s]) == QUEEN_WORKER_READY);
}

/* ----------------------------------------------------------------
 *		The table
 * ----------------------------------------------------------------
 */

typedef struct QueenMetricDef
{
	const char *name;
	const char *labels;			/* NULL: none */
	const char *type;			/* NULL: another sample of the family above */
	const char *help;
	int			counter;		/* QueenCounter, or -1 */
	double		(*gauge) (void);	/* when not a counter */
	int			decimals;		/* a gauge's; 6 on a counter: microseconds as seconds */
	void		(*family) (StringInfo out); /* renders a whole family itself */
} QueenMetricDef;

#define QUEEN_COUNTER(name, labels, help, c) {name, labels, "counter", help, c, NULL, 0, NULL}
#define QUEEN_SAMPLE(name, labels, c) {name, labels, NULL, NULL, c, NULL, 0, NULL}
#define QUEEN_SECONDS(name, help, c) {name, NULL, "counter", help, c, NULL, 6, NULL}
#define QUEEN_GAUGE(name, labels, help, fn, dec) {name, labels, "gauge", help, -1, fn, dec, NULL}
#define QUEEN_FAMILY(fn) {NULL, NULL, NULL, NULL, -1, NULL, 0, fn}

static const QueenMetricDef queen_metric_defs[] = {
	QUEEN_GAUGE("queen_uptime_seconds", NULL,
				"Seconds since the broker's shared memory was set up.", queen_gauge_uptime, 0),
	QUEEN_GAUGE("queen_node_standby", NULL,
				"1 while this node is a standby (in recovery): its broker answers 503 and serves once the node is promoted.",
				queen_gauge_standby, 0),

	/* what the listeners took in, and what the shards made of its frames */
	QUEEN_COUNTER("queen_process_push_requests_total", NULL,
				  "Push requests accepted (valid bodies).", QUEEN_COUNT_PUSH_REQUESTS),
	QUEEN_COUNTER("queen_process_push_messages_total", NULL,
				  "Items in accepted push requests.", QUEEN_COUNT_PUSH_MESSAGES),
	QUEEN_COUNTER("queen_push_rejected_total", NULL,
				  "Push requests answered 400.", QUEEN_COUNT_PUSH_REJECTED),
	QUEEN_COUNTER("queen_http_requests_total", NULL,
				  "HTTP requests routed by the listeners.", QUEEN_COUNT_HTTP_REQUESTS),
	QUEEN_COUNTER("queen_push_frames_total", "status=\"queued\"",
				  "Frames that reached a shard, by verdict.", QUEEN_COUNT_QUEUED),
	QUEEN_SAMPLE("queen_push_frames_total", "status=\"duplicate\"", QUEEN_COUNT_DUPLICATES),
	QUEEN_SAMPLE("queen_push_frames_total", "status=\"failed\"", QUEEN_COUNT_FAILED),
	QUEEN_SAMPLE("queen_push_frames_total", "status=\"buffered\"", QUEEN_COUNT_SPOOL_WRITTEN),
	QUEEN_COUNTER("queen_damaged_segments_total", NULL,
				  "Duplicates whose original's segment could not be read (answered with the zero id; the server log names the segment).",
				  QUEEN_COUNT_DAMAGED_ORIGINALS),

	/* the spool and maintenance mode */
	QUEEN_FAMILY(queen_spool_render),
	QUEEN_COUNTER("queen_spool_items_written_total", NULL,
				  "Items written to the spool and answered buffered.", QUEEN_COUNT_SPOOL_WRITTEN),
	QUEEN_COUNTER("queen_spool_write_failures_total", NULL,
				  "Spool writes that failed (their items were answered failed).",
				  QUEEN_COUNT_SPOOL_WRITE_FAILURES),
	QUEEN_COUNTER("queen_spool_items_drained_total", NULL,
				  "Spooled items the maintenance worker committed.", QUEEN_COUNT_SPOOL_DRAINED),
	QUEEN_COUNTER("queen_spool_items_dropped_duplicate_total", NULL,
				  "Spooled items dropped at drain because their transactionId was stored already.",
				  QUEEN_COUNT_SPOOL_DROPPED),
	QUEEN_COUNTER("queen_spool_files_drained_total", NULL,
				  "Spool files committed and removed.", QUEEN_COUNT_SPOOL_FILES_DRAINED),
	QUEEN_COUNTER("queen_spool_records_damaged_total", NULL,
				  "Spool records that could not be read (checksum or truncation), kept under failed/.",
				  QUEEN_COUNT_SPOOL_DAMAGED),
	QUEEN_COUNTER("queen_spool_items_quarantined_total", NULL,
				  "Spooled items this server set aside under failed/ because the database refused them.",
				  QUEEN_COUNT_SPOOL_QUARANTINED),
	QUEEN_COUNTER("queen_spool_drain_retries_total", NULL,
				  "Parts of spool files left for a later attempt after an error of the moment (lock, timeout).",
				  QUEEN_COUNT_SPOOL_RETRIES),
	QUEEN_COUNTER("queen_spool_unknown_fate_items_total", NULL,
				  "Items a listener spooled because their shard ended before answering (replayed; duplicates dropped).",
				  QUEEN_COUNT_SPOOL_UNKNOWN_FATE),
	QUEEN_COUNTER("queen_push_statement_timeouts_total", NULL,
				  "Broker transactions cancelled by queen.push_statement_timeout or a cancel request.",
				  QUEEN_COUNT_STATEMENT_TIMEOUTS),

	/* the committed bundles */
	QUEEN_COUNTER("queen_bundles_committed_total", NULL,
				  "Bundle transactions committed by the fusion shards.", QUEEN_COUNT_COMMITS),
	QUEEN_COUNTER("queen_bundle_failures_total", NULL,
				  "Bundle transactions that failed and were rolled back.",
				  QUEEN_COUNT_BUNDLE_FAILURES),
	QUEEN_COUNTER("queen_batches_fired_total", "op=\"push\"",
				  "Segments written by committed bundles (Queen counts one batch per segment).",
				  QUEEN_COUNT_SEGMENTS),
	QUEEN_COUNTER("queen_batch_items_fired_total", "op=\"push\"",
				  "Messages written by committed bundles.", QUEEN_COUNT_ITEMS),
	QUEEN_GAUGE("queen_fusion_items_per_batch", "op=\"push\"",
				"Lifetime messages per segment.", queen_gauge_items_per_segment, 2),
	QUEEN_GAUGE("queen_segments_per_commit", NULL,
				"Lifetime segments per bundle transaction: partitions sharing one commit.",
				queen_gauge_segments_per_commit, 2),
	QUEEN_SECONDS("queen_bundle_exec_seconds_total",
				  "Time bundles spent in their statements, before COMMIT.", QUEEN_COUNT_EXEC_US),
	QUEEN_SECONDS("queen_bundle_commit_seconds_total",
				  "Time bundles spent in COMMIT, WAL flush wait included.", QUEEN_COUNT_COMMIT_US),

	/* consumption: pops, parked long-polls, acks, dead letters and leases */
	QUEEN_COUNTER("queen_process_pop_requests_total", NULL,
				  "Pop requests taken by the listeners (a parked pop's retries are not counted again).",
				  QUEEN_COUNT_POP_REQUESTS),
	QUEEN_COUNTER("queen_process_pop_messages_total", NULL,
				  "Messages delivered by committed pops.", QUEEN_COUNT_POP_MESSAGES),
	QUEEN_COUNTER("queen_pop_empty_total", NULL,
				  "Pops answered 204: nothing delivered (after the wait, for a long-poll).",
				  QUEEN_COUNT_POP_EMPTY),
	QUEEN_GAUGE("queen_parked_long_polls", NULL,
				"Pops parked in the listeners, waiting for something to deliver.",
				queen_gauge_parked, 0),
	QUEEN_COUNTER("queen_lease_expiries_total", NULL,
				  "Expired leases a pop took over (their messages delivered again).",
				  QUEEN_COUNT_LEASES_EXPIRED),
	QUEEN_COUNTER("queen_process_ack_requests_total", NULL,
				  "Ack requests (/api/v1/ack and /api/v1/ack/batch) taken by the listeners.",
				  QUEEN_COUNT_ACK_REQUESTS),
	QUEEN_COUNTER("queen_process_ack_messages_total", NULL,
				  "Items in those ack requests.", QUEEN_COUNT_ACK_ITEMS),
	QUEEN_COUNTER("queen_ack_items_total", "result=\"acked\"",
				  "Ack items by outcome: carried out (success true) or not applied (success false).",
				  QUEEN_COUNT_ACK_ACKED),
	QUEEN_SAMPLE("queen_ack_items_total", "result=\"failed\"", QUEEN_COUNT_ACK_FAILED),
	QUEEN_COUNTER("queen_dlq_filed_total", NULL,
				  "Messages acks filed as dead letters.", QUEEN_COUNT_DLQ_FILED),
	QUEEN_COUNTER("queen_lease_extensions_total", NULL,
				  "Partition leases renewed by lease extensions.", QUEEN_COUNT_LEASE_EXTENSIONS),
	QUEEN_COUNTER("queen_long_poll_wakes_total", "by=\"push\"",
				  "Queues whose parked pops were woken, by what made them pending: a push bundle that stored messages, an ack that released a lease, the drain of the spool, or a commit of the SQL door (a push, or an ack that released a lease).",
				  QUEEN_COUNT_WAKES_PUSH),
	QUEEN_SAMPLE("queen_long_poll_wakes_total", "by=\"ack\"", QUEEN_COUNT_WAKES_ACK),
	QUEEN_SAMPLE("queen_long_poll_wakes_total", "by=\"drain\"", QUEEN_COUNT_WAKES_DRAIN),
	QUEEN_SAMPLE("queen_long_poll_wakes_total", "by=\"sql\"", QUEEN_COUNT_WAKES_SQL),
	QUEEN_GAUGE("queen_long_poll_lines", NULL,
				"Lines the parked pops wait in: pops that would find the same share one.",
				queen_gauge_lines, 0),
	QUEEN_COUNTER("queen_long_poll_resends_total", "reason=\"wake\"",
				  "Parked pops (heads of their lines) a listener sent to a shard again, by why: what the line watches moved, its backoff or retry_at came, or the head before it delivered.",
				  QUEEN_COUNT_RESENDS_WAKE),
	QUEEN_SAMPLE("queen_long_poll_resends_total", "reason=\"due\"", QUEEN_COUNT_RESENDS_DUE),
	QUEEN_SAMPLE("queen_long_poll_resends_total", "reason=\"next\"", QUEEN_COUNT_RESENDS_NEXT),
	QUEEN_COUNTER("queen_consume_shared_failures_total", NULL,
				  "Shared transactions of consumption requests that failed; each of their requests then ran alone.",
				  QUEEN_COUNT_CONSUME_SHARED_FAILED),
	QUEEN_COUNTER("queen_pop_leases_restamped_total", NULL,
				  "Pops whose leases started again just before their COMMIT, because they had aged while the pop ran.",
				  QUEEN_COUNT_LEASES_RESTAMPED),
	QUEEN_COUNTER("queen_consume_lock_timeouts_total", NULL,
				  "Consumption requests answered 503 because a row they needed stayed locked by another transaction past queen.consume_lock_timeout.",
				  QUEEN_COUNT_CONSUME_LOCK_TIMEOUTS),
	QUEEN_FAMILY(queen_lag_render),

	/* transactions of pushes and acks */
	QUEEN_COUNTER("queen_transactions_total", "result=\"committed\"",
				  "Transactions by outcome: committed, or rolled back whole because a pushed transactionId was already stored, because an ack was not carried out, or by an error of the server (lock timeouts are in queen_consume_lock_timeouts_total).", QUEEN_COUNT_TXN_COMMITTED),
	QUEEN_SAMPLE("queen_transactions_total", "result=\"duplicate\"", QUEEN_COUNT_TXN_DUPLICATE),
	QUEEN_SAMPLE("queen_transactions_total", "result=\"ack_failed\"", QUEEN_COUNT_TXN_ACK_FAILED),
	QUEEN_SAMPLE("queen_transactions_total", "result=\"error\"", QUEEN_COUNT_TXN_FAILED),
	QUEEN_COUNTER("queen_stream_cycles_total", "result=\"committed\"",
				  "Stream cycles by outcome: committed, or rolled back whole because a pushed transactionId was already stored, because the source ack was not carried out, because the query is not registered, or by an error of the server.", QUEEN_COUNT_CYCLE_COMMITTED),
	QUEEN_SAMPLE("queen_stream_cycles_total", "result=\"duplicate\"", QUEEN_COUNT_CYCLE_DUPLICATE),
	QUEEN_SAMPLE("queen_stream_cycles_total", "result=\"ack_failed\"", QUEEN_COUNT_CYCLE_ACK_FAILED),
	QUEEN_SAMPLE("queen_stream_cycles_total", "result=\"no_query\"", QUEEN_COUNT_CYCLE_NO_QUERY),
	QUEEN_SAMPLE("queen_stream_cycles_total", "result=\"error\"", QUEEN_COUNT_CYCLE_FAILED),

	/* retention (retention.c), by what let each go */
	QUEEN_COUNTER("queen_retention_messages_deleted_total", "rule=\"retention\"",
				  "Messages retention removed, by the rule that let them go: retentionSeconds, maxWaitTimeSeconds (unconsumed ones too), or completedRetentionSeconds once every consumer group had them.",
				  QUEEN_COUNT_RET_RETENTION),
	QUEEN_SAMPLE("queen_retention_messages_deleted_total", "rule=\"max_wait\"", QUEEN_COUNT_RET_MAX_WAIT),
	QUEEN_SAMPLE("queen_retention_messages_deleted_total", "rule=\"completed\"", QUEEN_COUNT_RET_COMPLETED),
	QUEEN_COUNTER("queen_retention_segments_deleted_total", NULL,
				  "Segments retention removed (the rows that held those messages).", QUEEN_COUNT_RET_SEGMENTS),
	QUEEN_COUNTER("queen_retention_hashes_deleted_total", NULL,
				  "transactionId hashes removed once past every dedup window (the hashes' purge).", QUEEN_COUNT_RET_HASHES),
	QUEEN_COUNTER("queen_retention_dlq_deleted_total", NULL,
				  "Dead letters removed past queen.dlq_retention.", QUEEN_COUNT_RET_DLQ),
	QUEEN_COUNTER("queen_retention_traces_deleted_total", NULL,
				  "Traces removed past queen.trace_retention.", QUEEN_COUNT_RET_TRACES),
	QUEEN_COUNTER("queen_retention_partitions_deleted_total", NULL,
				  "Idle, empty partitions removed past queen.partition_cleanup_days.", QUEEN_COUNT_RET_PARTITIONS),
	QUEEN_GAUGE("queen_retention_last_sweep_timestamp_seconds", NULL,
				"When retention's last sweep ended (Unix seconds); 0 before the first. Alert when it stops moving.",
				queen_gauge_retention_swept, 0),

	/* the push permit pool, and the shards */
	QUEEN_FAMILY(queen_permits_render),
	QUEEN_FAMILY(queen_shards_render),
};

/* CPU (user, system, in clock ticks) and resident pages of one process, from /proc. */
static bool
queen_process_usage(int pid, uint64 *utime, uint64 *stime, uint64 *rss_pages)
{
	char		path[64];
	char		buf[1024];
	FILE	   *f;
	size_t		n;
	char	   *p;
	unsigned long long ut,
				st;
	unsigned long long size,
				resident;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if ((f = fopen(path, "r")) == NULL)
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* the command may hold spaces and parentheses: fields count from the last ')' */
	if ((p = strrchr(buf, ')')) == NULL ||
		sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/statm", pid);
	if ((f = fopen(path, "r")) == NULL)
		return false;
	if (fscanf(f, "%llu %llu", &size, &resident) != 2)
		resident = 0;
	fclose(f);
	*utime += ut;
	*stime += st;
	*rss_pages += resident;
	return true;
}

/*
 * The broker's processes together, for GET /api/v1/analytics/system-metrics:
 * CPU used (microseconds, since each started) and resident memory now.
 */
static void
queen_metrics_process_json(StringInfo out)
{
	uint64		ut = 0,
				st = 0,
				pages = 0;
	int			n = 0;
	int			i;
	long		hz = sysconf(_SC_CLK_TCK);
	long		page = sysconf(_SC_PAGESIZE);

	for (i = 0; i < queen_broker->nlisteners; i++)
		n += queen_broker->listeners[i].pid > 0 &&
			queen_process_usage(queen_broker->listeners[i].pid, &ut, &st, &pages);
	for (i = 0; i < queen_broker->nshards; i++)
		n += queen_broker->shards[i].pid > 0 &&
			queen_process_usage(queen_broker->shards[i].pid, &ut, &st, &pages);
	n += queen_broker->maintenance.pid > 0 &&
		queen_process_usage(queen_broker->maintenance.pid, &ut, &st, &pages);
	if (hz <= 0)
		hz = 100;
	appendStringInfo(out, "\"processes\":%d,\"cpuUserUs\":" UINT64_FORMAT
					 ",\"cpuSystemUs\":" UINT64_FORMAT ",\"rssBytes\":" UINT64_FORMAT,
					 n, ut * (uint64) (1000000 / hz), st * (uint64) (1000000 / hz),
					 pages * (uint64) (page > 0 ? page : 4096));
}

/*
 * The counters the broker's history keeps (queen.broker_history, a row a
 * minute written by the maintenance worker), as a JSON object: cumulative
 * since the broker's shared memory was set up, so a minute's figure is a
 * difference and a restart shows as a drop.
 */
static const struct
{
	const char *key;
	QueenCounter counter;
}			queen_history_counters[] = {
	{"pushRequests", QUEEN_COUNT_PUSH_REQUESTS},
	{"pushMessages", QUEEN_COUNT_PUSH_MESSAGES},
	{"popRequests", QUEEN_COUNT_POP_REQUESTS},
	{"popMessages", QUEEN_COUNT_POP_MESSAGES},
	{"popEmpty", QUEEN_COUNT_POP_EMPTY},
	{"ackRequests", QUEEN_COUNT_ACK_REQUESTS},
	{"ackMessages", QUEEN_COUNT_ACK_ITEMS},
	{"ackSuccess", QUEEN_COUNT_ACK_ACKED},
	{"ackFailed", QUEEN_COUNT_ACK_FAILED},
	{"dlqCount", QUEEN_COUNT_DLQ_FILED},
	{"transactions", QUEEN_COUNT_TXN_COMMITTED},
	{"commits", QUEEN_COUNT_COMMITS},
	{"dbErrors", QUEEN_COUNT_BUNDLE_FAILURES},
	{"buffered", QUEEN_COUNT_SPOOL_WRITTEN},
	{"lockTimeouts", QUEEN_COUNT_CONSUME_LOCK_TIMEOUTS},
};

void
queen_metrics_history_json(StringInfo out)
{
	int			i;

	appendStringInfoChar(out, '{');
	for (i = 0; i < (int) lengthof(queen_history_counters); i++)
		appendStringInfo(out, "%s\"%s\":" UINT64_FORMAT, i > 0 ? "," : "",
						 queen_history_counters[i].key,
						 queen_counter(queen_history_counters[i].counter));
	appendStringInfo(out, ",\"parkedPops\":%.0f,", queen_gauge_parked());
	queen_metrics_process_json(out);
	appendStringInfoChar(out, '}');
}

/* The HELP and TYPE lines of a family; its samples follow. */
void
queen_metric(StringInfo out, const char *name, const char *type, const char *help)
{
	appendStringInfo(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A Prometheus label: name="value", backslash, double quote and newline escaped. */
void
queen_metric_label(StringInfo out, const char *name, const char *value)
{
	const char *c;

	appendStringInfo(out, "%s=\"", name);
	for (c = value; *c; c++)
	{
		if (*c == '\\' || *c == '"')
			appendStringInfoChar(out, '\\');
		if (*c == '\n')
			appendStringInfoString(out, "\\n");
		else
			appendStringInfoChar(out, *c);
	}
	appendStringInfoChar(out, '"');
}

/* Every row of the table, in order. */
void
queen_metrics_render(StringInfo out)
{
	int			i;

	for (i = 0; i < (int) lengthof(queen_metric_defs); i++)
	{
		const QueenMetricDef *d = &queen_metric_defs[i];

		if (d->family != NULL)
		{
			d->family(out);
			continue;
		}
		if (d->type != NULL)
			queen_metric(out, d->name, d->type, d->help);
		appendStringInfoString(out, d->name);
		if (d->labels != NULL)
			appendStringInfo(out, "{%s}", d->labels);
		if (d->counter < 0)
			appendStringInfo(out, " %.*f\n", d->decimals, d->gauge());
		else if (d->decimals > 0)
			appendStringInfo(out, " %.*f\n", d->decimals,
							 (double) queen_counter(d->counter) / USECS_PER_SEC);
		else
			appendStringInfo(out, " " UINT64_FORMAT "\n", queen_counter(d->counter));
	}
}

/*
 * The body of GET /health, Queen's shape: healthy when error is NULL,
 * otherwise unhealthy with the reason.  The spool's state is added: items
 * the drain quarantined make "spool" say so, loudly, but the status stays
 * healthy (and the code 200): the broker still takes and stores pushes,
 * and a readiness probe that failed would take it out of service for
 * items that need an operator, not a restart.
 */
void
queen_health_json(StringInfo out, bool connected, const char *error)
{
	uint64		quarantined = queen_spool_quarantined();

	appendStringInfo(out, "{\"status\":\"%s\",\"database\":\"%s\",\"engine\":\"queen-postgres\",",
					 error ? "unhealthy" : "healthy", connected ? "connected" : "disconnected");
	appendStringInfo(out, "\"spool\":{\"status\":\"%s\",\"pendingItems\":" UINT64_FORMAT
					 ",\"quarantinedItems\":" UINT64_FORMAT "},",
					 quarantined > 0 ? "items_quarantined" : "ok",
					 queen_spool_pending(), quarantined);
	if (error)
	{
		appendStringInfoString(out, "\"error\":");
		escape_json(out, error);
	}
	else
		appendStringInfoString(out, "\"version\":\"1.0\"");
	appendStringInfoChar(out, '}');
}

/* The "bundle summary" log line: cumulative, about every ten seconds. */
void
queen_metrics_bundle_summary(void)
{
	static uint64 last_commits = 0;
	uint64		commits = queen_counter(QUEEN_COUNT_COMMITS);
	uint64		segments = queen_counter(QUEEN_COUNT_SEGMENTS);

	/* an idle broker does not fill the log */
	if (commits == last_commits)
		return;
	last_commits = commits;
	ereport(LOG,
			(errmsg("queen fusion: bundle summary commits=" UINT64_FORMAT " segments=" UINT64_FORMAT " segments_per_commit=%.2f",
					commits, segments, commits ? (double) segments / commits : 0.0)));
}
