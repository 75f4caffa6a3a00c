/*-------------------------------------------------------------------------
 *
 * permits.c
 *	  The shared push permit pool and the law that adapts its limit.
 *
 * A fusion shard takes one permit per bundle, without waiting: no permit
 * means the push lane is contended, so the shard keeps accumulating and
 * its next bundle is bigger.  The limit moves between
 * queen.push_permits_min and queen.push_permits_max.
 *
 * The law is Vegas (estimate the queue as limit * (1 - base/sample), grow
 * when it is at most alpha, shrink when it is at least beta, step
 * max(ln limit, 1), act only while the limit binds), with one change that
 * matters on a WAL-bound path: the sample is the bundle's service time
 * BEFORE its COMMIT, not the whole round trip.  The commit's wait for the
 * WAL flush is group commit doing its job: with more bundles in flight
 * each waits for the flush of the others, so the whole round trip rises
 * while throughput rises too.  Vegas reads that rise as queueing and walks
 * the limit down until limit * (1 - base/rtt) falls under beta, about
 * beta itself when the flush dominates, however much the database could
 * take (the failure of Queen's own broker).  The
 * pre-commit time rises only when bundles really compete: for CPU, for
 * locks, for I/O of the statements themselves.  Bundles grow under load
 * and a bigger bundle takes longer for no fault of contention, so the base
 * a sample is compared with is the fastest recent bundle of about the same
 * size (power-of-two buckets of the segment count).
 *
 * Permits are owned: the pool counts what each shard holds, so a shard
 * that exits between taking a permit and giving it back (an ERROR outside
 * its transaction block, out of memory, a SIGTERM) returns what it held
 * from its exit callback, and its successor reclaims anything left over at
 * start.  A crash of any process resets all of shared memory anyway.
 *
 * The textbook law runs beside ours on the same samples and is exported as
 * queen_push_permits_naive_limit, so the difference can be seen on a live
 * broker (docs/ARCHITECTURE.md records a run).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "permits.h"
#include "metrics.h"

#include <math.h>

#include "fmgr.h"
#include "funcapi.h"
#include "storage/shmem.h"
#include "utils/array.h"
#include "utils/lsyscache.h"

/* The push permit pool and its adaptive limit, in shared memory. */
#define QUEEN_PERMIT_SLOTS		60
#define QUEEN_PERMIT_BUCKETS	6	/* bundles of 1, 2-3, 4-7, 8-15, 16-31, 32+ segments */

typedef struct QueenPermitPool
{
	pg_atomic_uint32 inflight;
	pg_atomic_uint32 limit;
	pg_atomic_uint64 waiting;	/* bitmap of shards waiting for a permit */
	pg_atomic_uint32 held[QUEEN_MAX_SHARDS];	/* permits each shard holds now */

	slock_t		mutex;			/* protects the controller state below */
	double		limit_f;
	double		naive_limit_f;	/* the textbook law on the same samples */
	int64		slot_second[QUEEN_PERMIT_SLOTS];
	double		slot_min_cost[QUEEN_PERMIT_SLOTS][QUEEN_PERMIT_BUCKETS];	/* us before COMMIT */
	double		slot_min_rtt[QUEEN_PERMIT_SLOTS];	/* us per bundle, whole */
	uint64		grows;
	uint64		shrinks;
	double		last_queue;		/* last queue estimate of our law */

	/* recent round trips for the quantiles on /metrics */
	int			rtt_next;
	int			rtt_count;
	float		rtt_ms[256];
} QueenPermitPool;

static QueenPermitPool *queen_permit_pool = NULL;

static int
queen_cmp_float(const void *a, const void *b)
{
	float		x = *(const float *) a;
	float		y = *(const float *) b;

	return (x > y) - (x < y);
}

#define QUEEN_VEGAS_ALPHA	3.0
#define QUEEN_VEGAS_BETA	6.0

static int
queen_permit_clamp_to(int v, int lo, int hi)
{
	lo = Max(1, lo);
	hi = Max(lo, hi);
	return Min(Max(v, lo), hi);
}

static int
queen_permit_clamp(int v)
{
	return queen_permit_clamp_to(v, queen_push_permits_min, queen_push_permits_max);
}

static void
queen_permits_init(QueenPermitPool *pool)
{
	int			initial = queen_permit_clamp(queen_push_permits_initial);
	int			i;

	pg_atomic_init_u32(&pool->inflight, 0);
	pg_atomic_init_u32(&pool->limit, (uint32) initial);
	pg_atomic_init_u64(&pool->waiting, 0);
	for (i = 0; i < QUEEN_MAX_SHARDS; i++)
		pg_atomic_init_u32(&pool->held[i], 0);
	SpinLockInit(&pool->mutex);
	pool->limit_f = initial;
	pool->naive_limit_f = initial;
	for (i = 0; i < QUEEN_PERMIT_SLOTS; i++)
	{
		int			b;

		pool->slot_second[i] = -1;
		for (b = 0; b < QUEEN_PERMIT_BUCKETS; b++)
			pool->slot_min_cost[i][b] = 0;
		pool->slot_min_rtt[i] = 0;
	}
	pool->grows = pool->shrinks = 0;
	pool->last_queue = 0;
	pool->rtt_next = pool->rtt_count = 0;
}

/*
 * Take a permit if one is free right now.  If not, the shard is recorded
 * as waiting and the next release wakes it.
 */
bool
queen_permit_try_acquire(int shard)
{
	QueenPermitPool *pool = queen_permit_pool;
	uint32		cur = pg_atomic_read_u32(&pool->inflight);

	for (;;)
	{
		if (cur >= pg_atomic_read_u32(&pool->limit))
		{
			pg_atomic_fetch_or_u64(&pool->waiting, UINT64CONST(1) << shard);
			/* a release may have happened between the check and the flag */
			cur = pg_atomic_read_u32(&pool->inflight);
			if (cur >= pg_atomic_read_u32(&pool->limit))
				return false;
			continue;
		}
		if (pg_atomic_compare_exchange_u32(&pool->inflight, &cur, cur + 1))
		{
			pg_atomic_fetch_add_u32(&pool->held[shard], 1);
			queen_permit_cancel_wait(shard);
			return true;
		}
	}
}

void
queen_permit_cancel_wait(int shard)
{
	pg_atomic_fetch_and_u64(&queen_permit_pool->waiting, ~(UINT64CONST(1) << shard));
}

/* Wake the waiting shards; the first to get there takes the permit. */
static void
queen_permit_wake_waiters(QueenPermitPool *pool)
{
	uint64		waiting = pg_atomic_exchange_u64(&pool->waiting, 0);
	int			s;

	for (s = 0; waiting != 0 && s < queen_broker->nshards; s++)
		if (waiting & (UINT64CONST(1) << s))
			queen_worker_wake(&queen_broker->shards[s]);
}

static int
queen_permit_bucket(int nsegments)
{
	int			b = 0;

	while (nsegments > 1 && b < QUEEN_PERMIT_BUCKETS - 1)
	{
		nsegments >>= 1;
		b++;
	}
	return b;
}

/*
 * Windowed minimum over the one-second slots of the last minute: of the
 * pre-commit time in one size bucket (bucket >= 0), or of the whole round
 * trip (bucket < 0, the textbook law).  0 when there is no sample yet.
 */
static double
queen_permit_base(QueenPermitPool *pool, int64 second, int bucket)
{
	double		base = 0;
	int			i;

	for (i = 0; i < QUEEN_PERMIT_SLOTS; i++)
	{
		double		v;

		if (pool->slot_second[i] < 0 || second - pool->slot_second[i] >= QUEEN_PERMIT_SLOTS)
			continue;
		v = bucket < 0 ? pool->slot_min_rtt[i] : pool->slot_min_cost[i][bucket];
		if (v > 0 && (base == 0 || v < base))
			base = v;
	}
	return base;
}

/* One Vegas step on limit for a sample against its base; returns the queue estimate. */
static double
queen_vegas_step(double *limit, double base, double sample, bool binding,
				 int lo, int hi)
{
	double		queue;
	double		step;

	if (base <= 0 || sample <= 0)
		return 0;
	queue = *limit * (1.0 - base / sample);
	if (!binding)
		return queue;
	step = Max(log(*limit), 1.0);
	if (queue <= QUEEN_VEGAS_ALPHA)
		*limit += step;
	else if (queue >= QUEEN_VEGAS_BETA)
		*limit -= step;
	*limit = queen_permit_clamp_to((int) rint(*limit), lo, hi);
	return queue;
}

/*
 * Teach both laws one bundle: exec_us from its first statement to just
 * before COMMIT, commit_us the COMMIT, inflight the bundles in flight when
 * it finished (itself included), second the wall-clock second.  The caller
 * holds the pool's lock, or owns the pool (the replay below).
 */
static void
queen_permit_learn(QueenPermitPool *pool, int lo, int hi, uint32 inflight,
				   int nsegments, int64 exec_us, int64 commit_us, int64 second)
{
	int			slot = (int) (second % QUEEN_PERMIT_SLOTS);
	int			bucket = queen_permit_bucket(nsegments);
	double		cost = (double) Max(exec_us, 1);
	double		rtt = (double) Max(exec_us + commit_us, 1);
	double		before = pool->limit_f;
	bool		binding;

	if (pool->slot_second[slot] != second)
	{
		int			b;

		pool->slot_second[slot] = second;
		for (b = 0; b < QUEEN_PERMIT_BUCKETS; b++)
			pool->slot_min_cost[slot][b] = 0;
		pool->slot_min_rtt[slot] = rtt;
	}
	else
		pool->slot_min_rtt[slot] = Min(pool->slot_min_rtt[slot], rtt);
	if (pool->slot_min_cost[slot][bucket] == 0 || cost < pool->slot_min_cost[slot][bucket])
		pool->slot_min_cost[slot][bucket] = cost;

	/* the law acts only while the limit binds: in flight >= limit - 1 */
	binding = inflight + 1 >= (uint32) pool->limit_f;
	pool->last_queue = queen_vegas_step(&pool->limit_f,
										queen_permit_base(pool, second, bucket),
										cost, binding, lo, hi);
	if (pool->limit_f > before)
		pool->grows++;
	else if (pool->limit_f < before)
		pool->shrinks++;

	binding = inflight + 1 >= (uint32) pool->naive_limit_f;
	(void) queen_vegas_step(&pool->naive_limit_f,
							queen_permit_base(pool, second, -1),
							rtt, binding, lo, hi);
}

/*
 * Give a permit back and teach the law what the bundle cost.  A failed
 * bundle passes nsegments = 0: it releases but teaches nothing.
 */
void
queen_permit_release(int shard, int nsegments, int64 exec_us, int64 commit_us)
{
	QueenPermitPool *pool = queen_permit_pool;
	uint32		inflight;

	if (pg_atomic_read_u32(&pool->held[shard]) == 0)
	{
		elog(LOG, "queen shard %d: released a permit it does not hold", shard);
		return;
	}
	pg_atomic_fetch_sub_u32(&pool->held[shard], 1);
	inflight = pg_atomic_fetch_sub_u32(&pool->inflight, 1);

	if (nsegments > 0)
	{
		SpinLockAcquire(&pool->mutex);
		queen_permit_learn(pool, queen_push_permits_min, queen_push_permits_max,
						   inflight, nsegments, exec_us, commit_us,
						   GetCurrentTimestamp() / USECS_PER_SEC);
		pg_atomic_write_u32(&pool->limit, (uint32) pool->limit_f);

		pool->rtt_ms[pool->rtt_next] = (float) ((exec_us + commit_us) / 1000.0);
		pool->rtt_next = (pool->rtt_next + 1) % lengthof(pool->rtt_ms);
		if (pool->rtt_count < (int) lengthof(pool->rtt_ms))
			pool->rtt_count++;
		SpinLockRelease(&pool->mutex);
	}

	queen_permit_wake_waiters(pool);
}

/*
 * queen._permit_law_replay: run both laws over a recorded or made-up series
 * of bundles, ten a second, and return both limits after each.  The law is
 * arithmetic on samples, so its behaviour under group commit or contention
 * can be checked exactly, without a noisy machine.
 */
PG_FUNCTION_INFO_V1(queen_permit_law_replay);

Datum
queen_permit_law_replay(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int32		lo = PG_GETARG_INT32(0);
	int32		initial = PG_GETARG_INT32(1);
	int32		hi = PG_GETARG_INT32(2);
	ArrayType  *arrays[4];
	Datum	   *values[4];
	int			counts[4];
	QueenPermitPool *pool;
	int			i;

	for (i = 0; i < 4; i++)
	{
		bool	   *nulls;
		Oid			elemtype = i < 2 ? INT4OID : INT8OID;
		int16		typlen;
		bool		typbyval;
		char		typalign;

		arrays[i] = PG_GETARG_ARRAYTYPE_P(3 + i);
		get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
		deconstruct_array(arrays[i], elemtype, typlen, typbyval, typalign,
						  &values[i], &nulls, &counts[i]);
		if (counts[i] != counts[0])
			ereport(ERROR,
					(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
					 errmsg("inflight, segments, exec_us and commit_us must have the same length")));
	}
	if (lo < 1 || hi < lo || hi > QUEEN_MAX_SHARDS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("permit bounds must satisfy 1 <= min <= max <= %d", QUEEN_MAX_SHARDS)));

	InitMaterializedSRF(fcinfo, 0);
	pool = palloc0(sizeof(QueenPermitPool));
	for (i = 0; i < QUEEN_PERMIT_SLOTS; i++)
		pool->slot_second[i] = -1;
	pool->limit_f = pool->naive_limit_f = queen_permit_clamp_to(initial, lo, hi);

	for (i = 0; i < counts[0]; i++)
	{
		Datum		out[3];
		bool		outnulls[3] = {false, false, false};
		int32		segments = DatumGetInt32(values[1][i]);

		if (segments > 0)
			queen_permit_learn(pool, lo, hi, (uint32) Max(DatumGetInt32(values[0][i]), 0),
							   segments, DatumGetInt64(values[2][i]),
							   DatumGetInt64(values[3][i]), i / 10);
		out[0] = Int32GetDatum(i + 1);
		out[1] = Int32GetDatum((int32) pool->limit_f);
		out[2] = Int32GetDatum((int32) pool->naive_limit_f);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out, outnulls);
	}
	return (Datum) 0;
}

/*
 * Give back every permit a shard holds: from its exit callback, and at the
 * start of its successor (when = "at start").  Only the shard itself or
 * its successor touch its count, so the exchange cannot race a take.
 */
void
queen_permits_reclaim(int shard, const char *when)
{
	QueenPermitPool *pool = queen_permit_pool;
	uint32		n = pg_atomic_exchange_u32(&pool->held[shard], 0);

	queen_permit_cancel_wait(shard);
	if (n == 0)
		return;
	pg_atomic_fetch_sub_u32(&pool->inflight, n);
	ereport(LOG,
			(errmsg("queen shard %d: returned %u push permit%s it held %s",
					shard, n, n == 1 ? "" : "s", when)));
	queen_permit_wake_waiters(pool);
}

/* After a reload: keep the limit inside the new bounds. */
void
queen_permits_reconfigure(void)
{
	QueenPermitPool *pool = queen_permit_pool;

	SpinLockAcquire(&pool->mutex);
	pool->limit_f = queen_permit_clamp((int) pool->limit_f);
	pool->naive_limit_f = queen_permit_clamp((int) pool->naive_limit_f);
	pg_atomic_write_u32(&pool->limit, (uint32) pool->limit_f);
	SpinLockRelease(&pool->mutex);
	queen_permit_wake_waiters(pool);
}

Size
queen_permits_shmem_size(void)
{
	return MAXALIGN(sizeof(QueenPermitPool));
}

void
queen_permits_shmem_init(void)
{
	bool		found;

	queen_permit_pool = ShmemInitStruct("queen permits", queen_permits_shmem_size(), &found);
	if (!found)
		queen_permits_init(queen_permit_pool);
}

/*
 * The pool on /metrics: its limit (also under Queen's name), what is held,
 * where the textbook law would be, and the round trips of the last
 * bundles, copied under the pool's lock.
 */
void
queen_permits_render(StringInfo out)
{
	QueenPermitPool *pool = queen_permit_pool;
	float		rtts[lengthof(pool->rtt_ms)];
	int			nrtt;
	double		naive_limit;
	double		queue_estimate;
	uint64		grows,
				shrinks;
	uint32		limit = pg_atomic_read_u32(&pool->limit);

	SpinLockAcquire(&pool->mutex);
	nrtt = pool->rtt_count;
	memcpy(rtts, pool->rtt_ms, sizeof(float) * nrtt);
	naive_limit = pool->naive_limit_f;
	queue_estimate = pool->last_queue;
	grows = pool->grows;
	shrinks = pool->shrinks;
	SpinLockRelease(&pool->mutex);

	if (nrtt > 0)
	{
		qsort(rtts, nrtt, sizeof(float), queen_cmp_float);
		queen_metric(out, "queen_batch_rtt_milliseconds", "gauge", "Bundle round trip (statements and commit) over the last 256 bundles.");
		appendStringInfo(out, "queen_batch_rtt_milliseconds{op=\"push\",quantile=\"0.5\"} %.3f\n",
						 rtts[nrtt / 2]);
		appendStringInfo(out, "queen_batch_rtt_milliseconds{op=\"push\",quantile=\"0.99\"} %.3f\n",
						 rtts[Min(nrtt - 1, (int) (nrtt * 0.99))]);
	}
	queen_metric(out, "queen_push_permits_limit", "gauge", "Current limit of the shared push permit pool.");
	appendStringInfo(out, "queen_push_permits_limit %u\n", limit);
	queen_metric(out, "queen_seg_push_vegas_limit", "gauge", "Same as queen_push_permits_limit, under Queen's name.");
	appendStringInfo(out, "queen_seg_push_vegas_limit %u\n", limit);
	queen_metric(out, "queen_push_permits_inflight", "gauge", "Push permits held (bundles in flight).");
	appendStringInfo(out, "queen_push_permits_inflight %u\n", pg_atomic_read_u32(&pool->inflight));
	queen_metric(out, "queen_push_permits_naive_limit", "gauge", "Where textbook Vegas on whole round trips would have put the limit (shadow, not used).");
	appendStringInfo(out, "queen_push_permits_naive_limit %.0f\n", naive_limit);
	queen_metric(out, "queen_push_permits_queue_estimate", "gauge", "Last queue estimate of the permit law, in bundles.");
	appendStringInfo(out, "queen_push_permits_queue_estimate %.2f\n", queue_estimate);
	queen_metric(out, "queen_push_permits_adjustments_total", "counter", "Steps the permit law took.");
	appendStringInfo(out, "queen_push_permits_adjustments_total{direction=\"grow\"} " UINT64_FORMAT "\n", grows);
	appendStringInfo(out, "queen_push_permits_adjustments_total{direction=\"shrink\"} " UINT64_FORMAT "\n", shrinks);
}
