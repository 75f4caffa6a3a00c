/*-------------------------------------------------------------------------
 *
 * shmem.c
 *	  The broker's shared memory: its size, the hooks that request and lay
 *	  it out, where each ring is, and the worker slots.
 *
 * Everything here happens only when the library is in
 * shared_preload_libraries: the SQL door never needs shared memory.  The
 * size is fixed at postmaster start from queen.http_workers and
 * queen.fusion_shards (both PGC_POSTMASTER), requested in
 * shmem_request_hook (PostgreSQL 15 refuses it anywhere else) and laid out
 * once in shmem_startup_hook under AddinShmemInitLock.  After a crash the
 * postmaster reinitialises shared memory, so every ring and counter starts
 * clean together with the restarted workers; only maintenance mode is
 * carried over, from its state file (maintenance_mode.c).
 *
 * What fills the permit pool and the maintenance flag is handed in by the
 * worker runtime (worker.c, queen_shmem_install), so this file, the bottom
 * of the broker, calls nothing above it.
 *
 * Locking: worker slots are written by their own worker (state and
 * incarnation are atomics others read); rings have their own spinlocks;
 * the permit pool's controller state has a spinlock; counters, gauges and
 * the maintenance flag are atomics.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "broker.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"

QueenBrokerShared *queen_broker = NULL;

static shmem_request_hook_type queen_prev_shmem_request_hook = NULL;
static shmem_startup_hook_type queen_prev_shmem_startup_hook = NULL;

/* Fixed at preload, since both settings are PGC_POSTMASTER. */
static int	queen_layout_listeners = 0;
static int	queen_layout_shards = 0;
static void (*queen_layout_fill) (void) = NULL;

static Size
queen_broker_shmem_size(void)
{
	Size		size = MAXALIGN(sizeof(QueenBrokerShared));
	int			pairs = queen_layout_listeners * queen_layout_shards;

	size = add_size(size, mul_size(pairs, queen_ring_shmem_size(QUEEN_SUBMIT_RING_BYTES)));
	size = add_size(size, mul_size(pairs, queen_ring_shmem_size(QUEEN_VERDICT_RING_BYTES)));
	return size;
}

static void
queen_shmem_request(void)
{
	if (queen_prev_shmem_request_hook)
		queen_prev_shmem_request_hook();
	RequestAddinShmemSpace(queen_broker_shmem_size());
}

static void
queen_slot_init(QueenWorkerSlot *slot)
{
	pg_atomic_init_u32(&slot->state, QUEEN_WORKER_STOPPED);
	pg_atomic_init_u32(&slot->incarnation, 0);
}

static void
queen_shmem_startup(void)
{
	bool		found;
	int			l,
				s;

	if (queen_prev_shmem_startup_hook)
		queen_prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	queen_broker = ShmemInitStruct("queen broker", queen_broker_shmem_size(), &found);
	if (!found)
	{
		char	   *base = (char *) queen_broker;
		Size		off = MAXALIGN(sizeof(QueenBrokerShared));

		memset(queen_broker, 0, sizeof(QueenBrokerShared));
		queen_broker->nlisteners = queen_layout_listeners;
		queen_broker->nshards = queen_layout_shards;
		for (l = 0; l < QUEEN_MAX_LISTENERS; l++)
			queen_slot_init(&queen_broker->listeners[l]);
		queen_slot_init(&queen_broker->maintenance);
		queen_slot_init(&queen_broker->dbwatch);
		pg_atomic_init_u64(&queen_broker->dbwatch_state.asked, 0);
		pg_atomic_init_u64(&queen_broker->dbwatch_state.answered, 0);
		pg_atomic_init_u32(&queen_broker->dbwatch_state.exists, 0);
		for (s = 0; s < QUEEN_MAX_SHARDS; s++)
			queen_slot_init(&queen_broker->shards[s]);
		for (l = 0; l < queen_layout_listeners; l++)
			for (s = 0; s < queen_layout_shards; s++)
			{
				queen_broker->submit_off[l][s] = off;
				queen_ring_init((QueenRing *) (base + off), QUEEN_SUBMIT_RING_BYTES);
				off += queen_ring_shmem_size(QUEEN_SUBMIT_RING_BYTES);
				queen_broker->verdict_off[s][l] = off;
				queen_ring_init((QueenRing *) (base + off), QUEEN_VERDICT_RING_BYTES);
				off += queen_ring_shmem_size(QUEEN_VERDICT_RING_BYTES);
			}

		pg_atomic_init_u64(&queen_broker->metrics.push_requests, 0);
		pg_atomic_init_u64(&queen_broker->metrics.push_messages, 0);
		pg_atomic_init_u64(&queen_broker->metrics.push_rejected, 0);
		pg_atomic_init_u64(&queen_broker->metrics.http_requests, 0);
		pg_atomic_init_u64(&queen_broker->metrics.commits, 0);
		pg_atomic_init_u64(&queen_broker->metrics.bundle_failures, 0);
		pg_atomic_init_u64(&queen_broker->metrics.segments, 0);
		pg_atomic_init_u64(&queen_broker->metrics.items, 0);
		pg_atomic_init_u64(&queen_broker->metrics.queued, 0);
		pg_atomic_init_u64(&queen_broker->metrics.duplicates, 0);
		pg_atomic_init_u64(&queen_broker->metrics.failed, 0);
		pg_atomic_init_u64(&queen_broker->metrics.exec_us, 0);
		pg_atomic_init_u64(&queen_broker->metrics.commit_us, 0);
		pg_atomic_init_u64(&queen_broker->metrics.started_at, (uint64) GetCurrentTimestamp());
		pg_atomic_init_u64(&queen_broker->lag.seq, 0);
		/* the zeroed struct is a valid start for the spool's atomics */
		pg_atomic_init_u32(&queen_broker->spool.db_healthy, 1);
		queen_layout_fill();
	}
	LWLockRelease(AddinShmemInitLock);
}

QueenRing *
queen_submit_ring(int listener, int shard)
{
	return (QueenRing *) ((char *) queen_broker + queen_broker->submit_off[listener][shard]);
}

QueenRing *
queen_verdict_ring(int shard, int listener)
{
	return (QueenRing *) ((char *) queen_broker + queen_broker->verdict_off[shard][listener]);
}

void
queen_worker_set_state(QueenWorkerSlot *slot, QueenWorkerState state)
{
	pg_atomic_write_u32(&slot->state, (uint32) state);
}

QueenWorkerState
queen_worker_state(QueenWorkerSlot *slot)
{
	return (QueenWorkerState) pg_atomic_read_u32(&slot->state);
}

/* Is every one of n workers in one of the states (bits 1 << state)? */
bool
queen_workers_all_in(QueenWorkerSlot *slots, int n, uint32 states)
{
	int			i;

	for (i = 0; i < n; i++)
		if (((1U << queen_worker_state(&slots[i])) & states) == 0)
			return false;
	return true;
}

void
queen_worker_wake(QueenWorkerSlot *slot)
{
	Latch	   *latch = slot->latch;

	if (latch != NULL)
		SetLatch(latch);
}

/*
 * At preload: the layout's size, fixed from the settings, and the hooks
 * that request and lay it out.  fill sets up what lives in it beyond rings
 * and counters (the permit pool, the maintenance flag) when it is new.
 */
void
queen_shmem_install(int listeners, int shards, void (*fill) (void))
{
	queen_layout_listeners = listeners;
	queen_layout_shards = shards;
	queen_layout_fill = fill;

	queen_prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = queen_shmem_request;
	queen_prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = queen_shmem_startup;
}
