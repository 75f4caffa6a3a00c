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
 * one; that costs a pop an extra try, never a missed wake.  The hash and
 * the slots are the core's (wait.h), shared with SQL pops that wait: a
 * publish here wakes them too, and a SQL door's commit moves the slots it
 * marked here (queen_wake_sql_commit), so a parked HTTP pop sees a SQL
 * push at once.
 *
 * A discovery pop (namespace/task) that matched no queue can only find
 * something once a queue it matches appears, so it watches the catalog
 * generation, which moves when a shard configures or deletes a queue and
 * when a process commits to a queue it has not seen before (a push, or the
 * drain, creating it: each process remembers the queues it has published,
 * and forgets them all when a queue is deleted, since the name may come
 * back).  Queues created or configured through the SQL door are not
 * announced; the parked pop's backoff finds them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "broker.h"
#include "spi.h"
#include "wait.h"

#include "storage/shmem.h"
#include "utils/hsearch.h"

/* The generations, in this file's shared memory. */
typedef struct QueenWakeShared
{
	pg_atomic_uint64 total;
	pg_atomic_uint64 catalog;
	pg_atomic_uint32 forgets;
	pg_atomic_uint32 gen[QUEEN_WAKE_SLOTS];
} QueenWakeShared;

static QueenWakeShared *queen_wake_shared = NULL;

Size
queen_wake_shmem_size(void)
{
	return MAXALIGN(sizeof(QueenWakeShared));
}

void
queen_wake_shmem_init(void)
{
	bool		found;
	int			i;

	queen_wake_shared = ShmemInitStruct("queen wake", queen_wake_shmem_size(), &found);
	if (found)
		return;
	pg_atomic_init_u64(&queen_wake_shared->total, 0);
	pg_atomic_init_u64(&queen_wake_shared->catalog, 0);
	pg_atomic_init_u32(&queen_wake_shared->forgets, 0);
	for (i = 0; i < QUEEN_WAKE_SLOTS; i++)
		pg_atomic_init_u32(&queen_wake_shared->gen[i], 0);
}

/* Slots this process marked since it last published. */
static int	queen_wake_marked[QUEEN_WAKE_SLOTS];
static int	queen_wake_nmarked = 0;
static uint64 queen_wake_bits[QUEEN_WAKE_SLOTS / 64];

/*
 * The queues this process has published, by their 64-bit hash (a collision
 * costs a discovery its wake, never more: its backoff finds the queue), and
 * the new ones among those marked since it last published.  Bounded by
 * starting afresh when full, which costs a few catalog bumps.
 */
#define QUEEN_WAKE_KNOWN_MAX	65536
#define QUEEN_WAKE_NEW_MAX		64

static HTAB *queen_wake_known = NULL;
static MemoryContext queen_wake_known_cxt = NULL;
static uint32 queen_wake_known_forgets = 0;
static uint64 queen_wake_new[QUEEN_WAKE_NEW_MAX];
static int	queen_wake_nnew = 0;
static bool queen_wake_catalog_marked = false;

static void queen_wake_listeners(void);

/* Has this process published this queue since the last deletion? */
static bool
queen_wake_known_has(uint64 h)
{
	uint32		forgets = pg_atomic_read_u32(&queen_wake_shared->forgets);

	if (queen_wake_known == NULL || forgets != queen_wake_known_forgets ||
		hash_get_num_entries(queen_wake_known) >= QUEEN_WAKE_KNOWN_MAX)
	{
		queen_wake_known = queen_process_hash("queen queues published", sizeof(uint64),
											  sizeof(uint64), 256, &queen_wake_known_cxt);
		queen_wake_known_forgets = forgets;
	}
	return hash_search(queen_wake_known, &h, HASH_FIND, NULL) != NULL;
}

/* A queue became pending in the transaction about to commit. */
void
queen_wake_mark(const pg_uuid_t *tenant, const char *queue, Size qlen)
{
	uint64		h = queen_queue_hash(tenant, queue, qlen);

	queen_wake_mark_slot((int) (h % QUEEN_WAKE_SLOTS));
	if (queen_wake_known_has(h))
		return;
	/* remembered once published; past the few a transaction keeps, next time */
	queen_wake_catalog_marked = true;
	if (queen_wake_nnew < QUEEN_WAKE_NEW_MAX)
		queen_wake_new[queen_wake_nnew++] = h;
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
	queen_wake_nnew = 0;
	queen_wake_catalog_marked = false;
}

/*
 * After the COMMIT: bump what was marked and wake the listeners.  Returns
 * how many slots (queues, but for collisions) were bumped.
 */
int
queen_wake_publish(void)
{
	QueenWakeShared *w = queen_wake_shared;
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
	queen_wait_wake(queen_wake_marked, n);
	queen_wake_nmarked = 0;
	if (queen_wake_catalog_marked)
	{
		for (i = 0; i < queen_wake_nnew; i++)
			(void) hash_search(queen_wake_known, &queen_wake_new[i], HASH_ENTER, NULL);
		queen_wake_nnew = 0;
		queen_wake_catalog_marked = false;
		pg_atomic_fetch_add_u64(&w->catalog, 1);
	}
	queen_wake_listeners();
	return n;
}

/*
 * After a COMMIT that configured or deleted a queue: discovery pops that
 * matched no queue may match one now.  A deletion also makes every process
 * forget the queues it has published, as the name may be pushed to again.
 */
void
queen_wake_catalog(bool deleted)
{
	if (deleted)
		pg_atomic_fetch_add_u32(&queen_wake_shared->forgets, 1);
	pg_atomic_fetch_add_u64(&queen_wake_shared->catalog, 1);
	queen_wake_listeners();
}

/*
 * After a COMMIT of the SQL door that made these slots pending (wait.c's
 * queen_wait_commit_hook): bumped as a shard's bundle bumps them.
 */
static void
queen_wake_sql_commit(const int *slots, int nslots)
{
	int			i;

	for (i = 0; i < nslots; i++)
		pg_atomic_fetch_add_u32(&queen_wake_shared->gen[slots[i]], 1);
	queen_count(QUEEN_COUNT_WAKES_SQL, nslots);
	queen_wake_listeners();
}

void
queen_wake_install(void)
{
	queen_wait_commit_hook = queen_wake_sql_commit;
}

/*
 * A listener that sees the new total sees what was bumped before it.  Only
 * listeners with pops parked or lines kept are woken: an idle one was
 * woken by every commit of the SQL door, 0.07 to 0.09 cores under
 * eight one-message pushers.  The bump above is a full barrier, and a
 * listener publishes its gauges before it compares generations (longpoll.c),
 * so a pop parked after this reads finds the bump itself.
 */
static void
queen_wake_listeners(void)
{
	int			i;

	pg_atomic_fetch_add_u64(&queen_wake_shared->total, 1);
	for (i = 0; i < queen_broker->nlisteners; i++)
		if (queen_metrics_listener_waiting(i))
			queen_worker_wake(&queen_broker->listeners[i]);
}

/* A slot's generation, the total's (QUEEN_WAKE_TOTAL) or the catalog's. */
uint64
queen_wake_generation(int slot)
{
	if (slot == QUEEN_WAKE_TOTAL)
		return pg_atomic_read_u64(&queen_wake_shared->total);
	if (slot == QUEEN_WAKE_CATALOG)
		return pg_atomic_read_u64(&queen_wake_shared->catalog);
	return pg_atomic_read_u32(&queen_wake_shared->gen[slot]);
}
