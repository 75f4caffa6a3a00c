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
 * Each subsystem owns its shared state, as autovacuum and the logical
 * replication launcher do: a size and an init of its own, which the
 * worker runtime hands in as a table (worker.c, queen_shmem_install), so
 * this file, the bottom of the broker, calls nothing above it.  Each part
 * is its own ShmemInitStruct, laid out in the same startup hook.
 *
 * Locking: worker slots are written by their own worker (state and
 * incarnation are atomics others read); rings have their own spinlocks;
 * each subsystem's state says how it is guarded (mostly atomics).
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
static const QueenShmemPart *queen_layout_parts = NULL;
static int	queen_layout_nparts = 0;

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
	Size		size = queen_broker_shmem_size();
	int			i;

	if (queen_prev_shmem_request_hook)
		queen_prev_shmem_request_hook();
	for (i = 0; i < queen_layout_nparts; i++)
		size = add_size(size, queen_layout_parts[i].size());
	RequestAddinShmemSpace(size);
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
	int			i,
				l,
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

		pg_atomic_init_u32(&queen_broker->test_fault_fired, 0);
	}
	for (i = 0; i < queen_layout_nparts; i++)
		queen_layout_parts[i].init();
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
 * At preload: the layout's size, fixed from the settings, the subsystems'
 * parts beside it, and the hooks that request and lay them out.
 */
void
queen_shmem_install(int listeners, int shards, const QueenShmemPart *parts, int nparts)
{
	queen_layout_listeners = listeners;
	queen_layout_shards = shards;
	queen_layout_parts = parts;
	queen_layout_nparts = nparts;

	queen_prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = queen_shmem_request;
	queen_prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = queen_shmem_startup;
}
