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
 * take (the failure of Queen's broker; reference section 7.1).  The
 * pre-commit time rises only when bundles really compete: for CPU, for
 * locks, for I/O of the statements themselves.  Bundles grow under load
 * and a bigger bundle takes longer for no fault of contention, so the base
 * a sample is compared with is the fastest recent bundle of about the same
 * size (power-of-two buckets of the segment count).
 *
 * The textbook law runs beside ours on the same samples and is exported as
 * queen_push_permits_naive_limit, so the difference can be seen on a live
 * broker (docs/ARCHITECTURE.md records a run).
 *
 *-------------------------------------------------------------------------
 */
#include "broker.h"

#include <math.h>

#define QUEEN_VEGAS_ALPHA	3.0
#define QUEEN_VEGAS_BETA	6.0

static int
queen_permit_clamp(int v)
{
	int			lo = Max(1, queen_push_permits_min);
	int			hi = Max(lo, queen_push_permits_max);

	return Min(Max(v, lo), hi);
}

void
queen_permits_init(QueenPermitPool *pool)
{
	int			initial = queen_permit_clamp(queen_push_permits_initial);
	int			i;

	pg_atomic_init_u32(&pool->inflight, 0);
	pg_atomic_init_u32(&pool->limit, (uint32) initial);
	pg_atomic_init_u64(&pool->waiting, 0);
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
	QueenPermitPool *pool = &queen_broker->permits;
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
			queen_permit_cancel_wait(shard);
			return true;
		}
	}
}

void
queen_permit_cancel_wait(int shard)
{
	pg_atomic_fetch_and_u64(&queen_broker->permits.waiting, ~(UINT64CONST(1) << shard));
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
queen_vegas_step(double *limit, double base, double sample, bool binding)
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
	*limit = queen_permit_clamp((int) rint(*limit));
	return queue;
}

/*
 * Give a permit back and teach the law what the bundle cost.  exec_us is
 * the time from the first statement to just before COMMIT, commit_us the
 * COMMIT itself.  A failed bundle passes nsegments = 0: it releases but
 * teaches nothing.
 */
void
queen_permit_release(int nsegments, int64 exec_us, int64 commit_us)
{
	QueenPermitPool *pool = &queen_broker->permits;
	uint32		inflight = pg_atomic_fetch_sub_u32(&pool->inflight, 1);

	if (nsegments > 0)
	{
		int64		second = GetCurrentTimestamp() / USECS_PER_SEC;
		int			slot = (int) (second % QUEEN_PERMIT_SLOTS);
		int			bucket = queen_permit_bucket(nsegments);
		double		cost = (double) Max(exec_us, 1);
		double		rtt = (double) Max(exec_us + commit_us, 1);

		SpinLockAcquire(&pool->mutex);
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

		{
			double		before = pool->limit_f;
			bool		binding = inflight + 1 >= (uint32) pool->limit_f;

			pool->last_queue = queen_vegas_step(&pool->limit_f,
												queen_permit_base(pool, second, bucket),
												cost, binding);
			if (pool->limit_f > before)
				pool->grows++;
			else if (pool->limit_f < before)
				pool->shrinks++;
			binding = inflight + 1 >= (uint32) pool->naive_limit_f;
			(void) queen_vegas_step(&pool->naive_limit_f,
									queen_permit_base(pool, second, -1),
									rtt, binding);
		}
		pg_atomic_write_u32(&pool->limit, (uint32) pool->limit_f);

		pool->rtt_ms[pool->rtt_next] = (float) ((exec_us + commit_us) / 1000.0);
		pool->rtt_next = (pool->rtt_next + 1) % lengthof(pool->rtt_ms);
		if (pool->rtt_count < (int) lengthof(pool->rtt_ms))
			pool->rtt_count++;
		SpinLockRelease(&pool->mutex);
	}

	queen_permit_wake_waiters(pool);
}

/* After a reload: keep the limit inside the new bounds. */
void
queen_permits_reconfigure(void)
{
	QueenPermitPool *pool = &queen_broker->permits;

	SpinLockAcquire(&pool->mutex);
	pool->limit_f = queen_permit_clamp((int) pool->limit_f);
	pool->naive_limit_f = queen_permit_clamp((int) pool->naive_limit_f);
	pg_atomic_write_u32(&pool->limit, (uint32) pool->limit_f);
	SpinLockRelease(&pool->mutex);
	queen_permit_wake_waiters(pool);
}
