/*-------------------------------------------------------------------------
 *
 * wake.c
 *	  Wake-ups for parked long-polls: the generations a shard bumps after a
 *	  COMMIT that made a queue pending, and what a listener reads of them.
 *
 * A parked pop costs its listener a few bytes and nothing else (no worker,
 * no connection, no permit), so something must say when trying again may
 * deliver.  A shard marks the (tenant, queue) of every group a bundle
 * stored and of every partition whose lease an ack released, and the
 * drain the queues of the spooled items it stored; after the
 * COMMIT it publishes them: each marked slot's generation once, however
 * many of the transaction's partitions or pushes fell into it (a hot queue
 * costs one bump per transaction, not one per push), then the total, then
 * the listeners' latches, once.  Bumping after the COMMIT is what makes a
 * wake truthful: a pop sent after it sees what woke it.
 *
 * The slots are a fixed array indexed by a hash, so two queues may share
 * one; that costs a pop an extra try, never a missed wake.
 *
 *-------------------------------------------------------------------------
 */
#include "broker.h"

/* Slots this process marked since it last published. */
static int	queen_wake_marked[QUEEN_WAKE_SLOTS];
static int	queen_wake_nmarked = 0;
static uint64 queen_wake_bits[QUEEN_WAKE_SLOTS / 64];

/* The slot of a (tenant, queue): FNV-1a-64 over both, as queen_shard_of. */
int
queen_wake_slot(const pg_uuid_t *tenant, const char *queue, Size qlen)
{
	uint64		h = UINT64CONST(0xcbf29ce484222325);
	Size		i;

	for (i = 0; i < UUID_LEN; i++)
		h = (h ^ tenant->data[i]) * UINT64CONST(0x100000001b3);
	for (i = 0; i < qlen; i++)
		h = (h ^ (unsigned char) queue[i]) * UINT64CONST(0x100000001b3);
	return (int) (h % QUEEN_WAKE_SLOTS);
}

/* A queue became pending in the transaction about to commit. */
void
queen_wake_mark(const pg_uuid_t *tenant, const char *queue, Size qlen)
{
	queen_wake_mark_slot(queen_wake_slot(tenant, queue, qlen));
}

/* The same, by the queue's slot (queen_wake_slot). */
void
queen_wake_mark_slot(int slot)
{
	if (queen_wake_bits[slot / 64] & (UINT64CONST(1) << (slot % 64)))
		return;
	queen_wake_bits[slot / 64] |= UINT64CONST(1) << (slot % 64);
	queen_wake_marked[queen_wake_nmarked++] = slot;
}

/* The transaction that marked rolled back: nothing became pending. */
void
queen_wake_forget(void)
{
	int			i;

	for (i = 0; i < queen_wake_nmarked; i++)
		queen_wake_bits[queen_wake_marked[i] / 64] = 0;
	queen_wake_nmarked = 0;
}

/*
 * After the COMMIT: bump what was marked and wake the listeners.  Returns
 * how many slots (queues, but for collisions) were bumped.
 */
int
queen_wake_publish(void)
{
	QueenWakeShared *w = &queen_broker->wake;
	int			n = queen_wake_nmarked;
	int			i;

	if (n == 0)
		return 0;
	for (i = 0; i < queen_wake_nmarked; i++)
	{
		int			slot = queen_wake_marked[i];

		pg_atomic_fetch_add_u32(&w->gen[slot], 1);
		queen_wake_bits[slot / 64] &= ~(UINT64CONST(1) << (slot % 64));
	}
	queen_wake_nmarked = 0;
	/* a listener that sees the new total sees the slots bumped before it */
	pg_atomic_fetch_add_u64(&w->total, 1);
	for (i = 0; i < queen_broker->nlisteners; i++)
		queen_worker_wake(&queen_broker->listeners[i]);
	return n;
}

/* A slot's generation; slot < 0 is the total (discovery pops). */
uint64
queen_wake_generation(int slot)
{
	if (slot < 0)
		return pg_atomic_read_u64(&queen_broker->wake.total);
	return pg_atomic_read_u32(&queen_broker->wake.gen[slot]);
}
