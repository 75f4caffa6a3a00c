/*-------------------------------------------------------------------------
 *
 * metrics.c
 *	  What the broker tells operators: the Prometheus text on
 *	  /metrics/prometheus and the periodic "bundle summary" log line.
 *
 * Everything comes from the counters in shared memory, so any listener can
 * render it without a database round trip, and a scrape costs nothing to
 * the write path.  Names follow Queen's where Queen has one, so existing
 * dashboards keep working: queen_batches_fired_total counts segments
 * (Queen records one batch per segment), queen_bundles_committed_total
 * counts the transactions that carried them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "broker.h"
#include "log_read.h"
#include "maintenance/spool.h"

#include "utils/json.h"
#include "utils/timestamp.h"

static int
queen_cmp_float(const void *a, const void *b)
{
	float		x = *(const float *) a;
	float		y = *(const float *) b;

	return (x > y) - (x < y);
}

/* The HELP and TYPE lines of a family; its samples follow. */
void
queen_metric(StringInfo out, const char *name, const char *type, const char *help)
{
	appendStringInfo(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A family with one unlabelled sample. */
static void
queen_metric_u64(StringInfo out, const char *name, const char *type, const char *help,
				 uint64 value)
{
	queen_metric(out, name, type, help);
	appendStringInfo(out, "%s " UINT64_FORMAT "\n", name, value);
}

static void
queen_metric_real(StringInfo out, const char *name, const char *type, const char *help,
				  int decimals, double value)
{
	queen_metric(out, name, type, help);
	appendStringInfo(out, "%s %.*f\n", name, decimals, value);
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
		pg_atomic_fetch_add_u64(&queen_broker->metrics.damaged_originals,
								queen_damaged_originals - published);
		published = queen_damaged_originals;
	}
}

/* A labelled sample of a family whose HELP and TYPE are already out. */
static void
queen_metric_sample(StringInfo out, const char *name, const char *labels, uint64 value)
{
	appendStringInfo(out, "%s{%s} " UINT64_FORMAT "\n", name, labels, value);
}

/* What the listeners took in, and what the shards made of its frames. */
static void
queen_metrics_render_requests(StringInfo out, QueenMetrics *m)
{
	queen_metric_u64(out, "queen_process_push_requests_total", "counter",
					 "Push requests accepted (valid bodies).",
					 pg_atomic_read_u64(&m->push_requests));
	queen_metric_u64(out, "queen_process_push_messages_total", "counter",
					 "Items in accepted push requests.",
					 pg_atomic_read_u64(&m->push_messages));
	queen_metric_u64(out, "queen_push_rejected_total", "counter",
					 "Push requests answered 400.",
					 pg_atomic_read_u64(&m->push_rejected));
	queen_metric_u64(out, "queen_http_requests_total", "counter",
					 "HTTP requests routed by the listeners.",
					 pg_atomic_read_u64(&m->http_requests));

	queen_metric(out, "queen_push_frames_total", "counter", "Frames that reached a shard, by verdict.");
	queen_metric_sample(out, "queen_push_frames_total", "status=\"queued\"",
						pg_atomic_read_u64(&m->queued));
	queen_metric_sample(out, "queen_push_frames_total", "status=\"duplicate\"",
						pg_atomic_read_u64(&m->duplicates));
	queen_metric_sample(out, "queen_push_frames_total", "status=\"failed\"",
						pg_atomic_read_u64(&m->failed));

	queen_metric_u64(out, "queen_damaged_segments_total", "counter",
					 "Duplicates whose original's segment could not be read (answered with the zero id; the server log names the segment).",
					 pg_atomic_read_u64(&m->damaged_originals));
}

/* Consumption: pops, parked long-polls, acks, dead letters and leases. */
static void
queen_metrics_render_consume(StringInfo out, QueenMetrics *m)
{
	uint64		parked = 0;
	uint64		lines = 0;
	int			l;

	for (l = 0; l < queen_broker->nlisteners; l++)
	{
		parked += pg_atomic_read_u32(&m->parked[l]);
		lines += pg_atomic_read_u32(&m->lines[l]);
	}
	queen_metric_u64(out, "queen_process_pop_requests_total", "counter",
					 "Pop requests taken by the listeners (a parked pop's retries are not counted again).",
					 pg_atomic_read_u64(&m->pop_requests));
	queen_metric_u64(out, "queen_process_pop_messages_total", "counter",
					 "Messages delivered by committed pops.",
					 pg_atomic_read_u64(&m->pop_messages));
	queen_metric_u64(out, "queen_pop_empty_total", "counter",
					 "Pops answered 204: nothing delivered (after the wait, for a long-poll).",
					 pg_atomic_read_u64(&m->pop_empty));
	queen_metric_u64(out, "queen_parked_long_polls", "gauge",
					 "Pops parked in the listeners, waiting for something to deliver.",
					 parked);
	queen_metric_u64(out, "queen_lease_expiries_total", "counter",
					 "Expired leases a pop took over (their messages delivered again).",
					 pg_atomic_read_u64(&m->leases_expired));
	queen_metric_u64(out, "queen_process_ack_requests_total", "counter",
					 "Ack requests (/api/v1/ack and /api/v1/ack/batch) taken by the listeners.",
					 pg_atomic_read_u64(&m->ack_requests));
	queen_metric_u64(out, "queen_process_ack_messages_total", "counter",
					 "Items in those ack requests.",
					 pg_atomic_read_u64(&m->ack_items));
	queen_metric(out, "queen_ack_items_total", "counter", "Ack items by outcome: carried out (success true) or not applied (success false).");
	queen_metric_sample(out, "queen_ack_items_total", "result=\"acked\"",
						pg_atomic_read_u64(&m->ack_acked));
	queen_metric_sample(out, "queen_ack_items_total", "result=\"failed\"",
						pg_atomic_read_u64(&m->ack_failed));
	queen_metric_u64(out, "queen_dlq_filed_total", "counter",
					 "Messages acks filed as dead letters.",
					 pg_atomic_read_u64(&m->dlq_filed));
	queen_metric_u64(out, "queen_lease_extensions_total", "counter",
					 "Partition leases renewed by lease extensions.",
					 pg_atomic_read_u64(&m->lease_extensions));
	queen_metric(out, "queen_long_poll_wakes_total", "counter",
				 "Queues whose parked pops were woken, by what made them pending: a push bundle that stored messages, an ack that released a lease, the drain of the spool, or a commit of the SQL door (a push, or an ack that released a lease).");
	queen_metric_sample(out, "queen_long_poll_wakes_total", "by=\"push\"",
						pg_atomic_read_u64(&m->wakes_push));
	queen_metric_sample(out, "queen_long_poll_wakes_total", "by=\"ack\"",
						pg_atomic_read_u64(&m->wakes_ack));
	queen_metric_sample(out, "queen_long_poll_wakes_total", "by=\"drain\"",
						pg_atomic_read_u64(&m->wakes_drain));
	queen_metric_sample(out, "queen_long_poll_wakes_total", "by=\"sql\"",
						pg_atomic_read_u64(&m->wakes_sql));
	queen_metric_u64(out, "queen_long_poll_lines", "gauge",
					 "Lines the parked pops wait in: pops that would find the same share one.",
					 lines);
	queen_metric(out, "queen_long_poll_resends_total", "counter",
				 "Parked pops (heads of their lines) a listener sent to a shard again, by why: what the line watches moved, its backoff or retry_at came, or the head before it delivered.");
	queen_metric_sample(out, "queen_long_poll_resends_total", "reason=\"wake\"",
						pg_atomic_read_u64(&m->resends_wake));
	queen_metric_sample(out, "queen_long_poll_resends_total", "reason=\"due\"",
						pg_atomic_read_u64(&m->resends_due));
	queen_metric_sample(out, "queen_long_poll_resends_total", "reason=\"next\"",
						pg_atomic_read_u64(&m->resends_next));
	queen_metric_u64(out, "queen_consume_shared_failures_total", "counter",
					 "Shared transactions of consumption requests that failed; each of their requests then ran alone.",
					 pg_atomic_read_u64(&m->consume_shared_failed));
	queen_metric_u64(out, "queen_pop_leases_restamped_total", "counter",
					 "Pops whose leases started again just before their COMMIT, because they had aged while the pop ran.",
					 pg_atomic_read_u64(&m->leases_restamped));
	queen_metric_u64(out, "queen_consume_lock_timeouts_total", "counter",
					 "Consumption requests answered 503 because a row they needed stayed locked by another transaction past queen.consume_lock_timeout.",
					 pg_atomic_read_u64(&m->consume_lock_timeouts));
}

/* A Prometheus label value: backslash, double quote and newline escaped. */
static void
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

/*
 * The last consumer-lag sample (lag.c), copied out under its
 * sequence count so a sample being written is never rendered half.
 */
static void
queen_metrics_render_lag(StringInfo out)
{
	QueenLagShared *lag = &queen_broker->lag;
	QueenLagEntry *rows = palloc(sizeof(QueenLagEntry) * QUEEN_LAG_ENTRIES);
	TimestampTz sampled_at;
	bool		truncated;
	uint64		seq;
	int			n;
	int			i;
	int			k;

	for (;;)
	{
		seq = pg_atomic_read_u64(&lag->seq);
		if (seq % 2 == 1)
		{
			pg_usleep(1000L);
			continue;
		}
		pg_read_barrier();
		n = lag->n;
		truncated = lag->truncated;
		sampled_at = lag->sampled_at;
		memcpy(rows, lag->entries, sizeof(QueenLagEntry) * n);
		pg_read_barrier();
		if (pg_atomic_read_u64(&lag->seq) == seq)
			break;
	}

	queen_metric_real(out, "queen_consumer_lag_age_seconds", "gauge",
					  "Seconds since the consumer lag was sampled (queen.consumer_lag_interval); -1 before the first sample.",
					  1, sampled_at == 0 ? -1.0 :
					  (double) (GetCurrentTimestamp() - sampled_at) / USECS_PER_SEC);
	queen_metric_u64(out, "queen_consumer_lag_truncated", "gauge",
					 "1 when more (queue, group) pairs lag than the 256 most lagging listed.",
					 truncated ? 1 : 0);
	for (k = 0; k < 2; k++)
	{
		const char *name = k == 0 ? "queen_consumer_lag_messages" : "queen_consumer_lag_partitions";

		queen_metric(out, name, "gauge", k == 0 ?
					 "Messages not yet acknowledged, per queue and consumer group (queue mode: __QUEUE_MODE__), at the last sample." :
					 "Partitions holding messages not yet acknowledged, per queue and consumer group, at the last sample.");
		for (i = 0; i < n; i++)
		{
			char		tenant[UUID_LEN * 2 + 5];

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
	pfree(rows);
}

/*
 * The spool and maintenance mode.  The first line is the last sample of
 * queen_push_frames_total (so the family's samples stay apart, as they
 * always were on this page).
 */
static void
queen_metrics_render_spool(StringInfo out)
{
	QueenSpoolShared *sp = &queen_broker->spool;

	queen_metric_sample(out, "queen_push_frames_total", "status=\"buffered\"",
						pg_atomic_read_u64(&sp->items_written));
	queen_metric_u64(out, "queen_maintenance_mode", "gauge",
					 "1 while maintenance mode sends every push to the spool.",
					 queen_maintenance_on() ? 1 : 0);
	queen_metric_u64(out, "queen_file_buffer_pending", "gauge",
					 "Items in the disk spool not yet committed.",
					 queen_spool_pending());
	queen_metric_u64(out, "queen_file_buffer_failed", "gauge",
					 "Files set aside under the spool's failed/ directory.",
					 pg_atomic_read_u64(&sp->failed_files));
	queen_metric_u64(out, "queen_file_buffer_db_healthy", "gauge",
					 "1 unless the last drain attempt failed for a reason in the database.",
					 pg_atomic_read_u32(&sp->db_healthy));
	queen_metric_u64(out, "queen_spool_items_written_total", "counter",
					 "Items written to the spool and answered buffered.",
					 pg_atomic_read_u64(&sp->items_written));
	queen_metric_u64(out, "queen_spool_write_failures_total", "counter",
					 "Spool writes that failed (their items were answered failed).",
					 pg_atomic_read_u64(&sp->write_failures));
	queen_metric_u64(out, "queen_spool_items_drained_total", "counter",
					 "Spooled items the maintenance worker committed.",
					 pg_atomic_read_u64(&sp->items_drained));
	queen_metric_u64(out, "queen_spool_items_dropped_duplicate_total", "counter",
					 "Spooled items dropped at drain because their transactionId was stored already.",
					 pg_atomic_read_u64(&sp->items_dropped));
	queen_metric_u64(out, "queen_spool_files_drained_total", "counter",
					 "Spool files committed and removed.",
					 pg_atomic_read_u64(&sp->files_drained));
	queen_metric_u64(out, "queen_spool_records_damaged_total", "counter",
					 "Spool records that could not be read (checksum or truncation), kept under failed/.",
					 pg_atomic_read_u64(&sp->records_damaged));
	queen_metric_u64(out, "queen_spool_quarantined_items", "gauge",
					 "Spooled items the database refused, set aside under failed/ (never committed): not 0 needs an operator.",
					 pg_atomic_read_u64(&sp->quarantined_items));
	queen_metric_u64(out, "queen_spool_items_quarantined_total", "counter",
					 "Spooled items this server set aside under failed/ because the database refused them.",
					 pg_atomic_read_u64(&sp->items_quarantined));
	queen_metric_u64(out, "queen_spool_drain_retries_total", "counter",
					 "Parts of spool files left for a later attempt after an error of the moment (lock, timeout).",
					 pg_atomic_read_u64(&sp->drain_retries));
	queen_metric_u64(out, "queen_spool_unknown_fate_items_total", "counter",
					 "Items a listener spooled because their shard ended before answering (replayed; duplicates dropped).",
					 pg_atomic_read_u64(&sp->unknown_fate));
	queen_metric_u64(out, "queen_push_statement_timeouts_total", "counter",
					 "Broker transactions cancelled by queen.push_statement_timeout or a cancel request.",
					 pg_atomic_read_u64(&sp->statement_timeouts));
}

/*
 * The committed bundles, and the round trips of the last ones (copied
 * under the pool's lock by the caller, sorted here).
 */
static void
queen_metrics_render_bundles(StringInfo out, QueenMetrics *m, float *rtts, int nrtt)
{
	uint64		commits = pg_atomic_read_u64(&m->commits);
	uint64		segments = pg_atomic_read_u64(&m->segments);
	uint64		items = pg_atomic_read_u64(&m->items);

	queen_metric_u64(out, "queen_bundles_committed_total", "counter",
					 "Bundle transactions committed by the fusion shards.",
					 commits);
	queen_metric_u64(out, "queen_bundle_failures_total", "counter",
					 "Bundle transactions that failed and were rolled back.",
					 pg_atomic_read_u64(&m->bundle_failures));
	queen_metric(out, "queen_batches_fired_total", "counter", "Segments written by committed bundles (Queen counts one batch per segment).");
	queen_metric_sample(out, "queen_batches_fired_total", "op=\"push\"", segments);
	queen_metric(out, "queen_batch_items_fired_total", "counter", "Messages written by committed bundles.");
	queen_metric_sample(out, "queen_batch_items_fired_total", "op=\"push\"", items);
	queen_metric(out, "queen_fusion_items_per_batch", "gauge", "Lifetime messages per segment.");
	appendStringInfo(out, "queen_fusion_items_per_batch{op=\"push\"} %.2f\n",
					 segments ? (double) items / segments : 0.0);
	queen_metric_real(out, "queen_segments_per_commit", "gauge",
					  "Lifetime segments per bundle transaction: partitions sharing one commit.",
					  2, commits ? (double) segments / commits : 0.0);
	queen_metric_real(out, "queen_bundle_exec_seconds_total", "counter",
					  "Time bundles spent in their statements, before COMMIT.",
					  6, (double) pg_atomic_read_u64(&m->exec_us) / USECS_PER_SEC);
	queen_metric_real(out, "queen_bundle_commit_seconds_total", "counter",
					  "Time bundles spent in COMMIT, WAL flush wait included.",
					  6, (double) pg_atomic_read_u64(&m->commit_us) / USECS_PER_SEC);

	if (nrtt > 0)
	{
		qsort(rtts, nrtt, sizeof(float), queen_cmp_float);
		queen_metric(out, "queen_batch_rtt_milliseconds", "gauge", "Bundle round trip (statements and commit) over the last 256 bundles.");
		appendStringInfo(out, "queen_batch_rtt_milliseconds{op=\"push\",quantile=\"0.5\"} %.3f\n",
						 rtts[nrtt / 2]);
		appendStringInfo(out, "queen_batch_rtt_milliseconds{op=\"push\",quantile=\"0.99\"} %.3f\n",
						 rtts[Min(nrtt - 1, (int) (nrtt * 0.99))]);
	}
}

void
queen_metrics_render(StringInfo out)
{
	QueenMetrics *m = &queen_broker->metrics;
	QueenPermitPool *pool = &queen_broker->permits;
	TimestampTz started = (TimestampTz) pg_atomic_read_u64(&m->started_at);
	float		rtts[lengthof(pool->rtt_ms)];
	int			nrtt;
	double		naive_limit;
	double		queue_estimate;
	uint64		grows,
				shrinks;
	int			s;

	SpinLockAcquire(&pool->mutex);
	nrtt = pool->rtt_count;
	memcpy(rtts, pool->rtt_ms, sizeof(float) * nrtt);
	naive_limit = pool->naive_limit_f;
	queue_estimate = pool->last_queue;
	grows = pool->grows;
	shrinks = pool->shrinks;
	SpinLockRelease(&pool->mutex);

	queen_metric_real(out, "queen_uptime_seconds", "gauge",
					  "Seconds since the broker's shared memory was set up.",
					  0, (double) (GetCurrentTimestamp() - started) / USECS_PER_SEC);
	queen_metrics_render_requests(out, m);
	queen_metrics_render_spool(out);
	queen_metrics_render_bundles(out, m, rtts, nrtt);
	queen_metrics_render_consume(out, m);
	queen_metrics_render_lag(out);

	queen_metric_u64(out, "queen_push_permits_limit", "gauge",
					 "Current limit of the shared push permit pool.",
					 pg_atomic_read_u32(&pool->limit));
	queen_metric_u64(out, "queen_seg_push_vegas_limit", "gauge",
					 "Same as queen_push_permits_limit, under Queen's name.",
					 pg_atomic_read_u32(&pool->limit));
	queen_metric_u64(out, "queen_push_permits_inflight", "gauge",
					 "Push permits held (bundles in flight).",
					 pg_atomic_read_u32(&pool->inflight));
	queen_metric_real(out, "queen_push_permits_naive_limit", "gauge",
					  "Where textbook Vegas on whole round trips would have put the limit (shadow, not used).",
					  0, naive_limit);
	queen_metric_real(out, "queen_push_permits_queue_estimate", "gauge",
					  "Last queue estimate of the permit law, in bundles.",
					  2, queue_estimate);
	queen_metric(out, "queen_push_permits_adjustments_total", "counter", "Steps the permit law took.");
	queen_metric_sample(out, "queen_push_permits_adjustments_total", "direction=\"grow\"", grows);
	queen_metric_sample(out, "queen_push_permits_adjustments_total", "direction=\"shrink\"", shrinks);

	queen_metric(out, "queen_shard_ready", "gauge", "1 when the fusion shard is connected and serving.");
	for (s = 0; s < queen_broker->nshards; s++)
		appendStringInfo(out, "queen_shard_ready{shard=\"%d\"} %d\n", s,
						 queen_worker_state(&queen_broker->shards[s]) == QUEEN_WORKER_READY);
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
	uint64		quarantined = pg_atomic_read_u64(&queen_broker->spool.quarantined_items);

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

/* The seed's "bundle summary" line: cumulative, about every ten seconds. */
void
queen_metrics_bundle_summary(void)
{
	static uint64 last_commits = 0;
	QueenMetrics *m = &queen_broker->metrics;
	uint64		commits = pg_atomic_read_u64(&m->commits);
	uint64		segments = pg_atomic_read_u64(&m->segments);

	/* an idle broker does not fill the log */
	if (commits == last_commits)
		return;
	last_commits = commits;
	ereport(LOG,
			(errmsg("queen fusion: bundle summary commits=" UINT64_FORMAT " segments=" UINT64_FORMAT " segments_per_commit=%.2f",
					commits, segments, commits ? (double) segments / commits : 0.0)));
}
