/*-------------------------------------------------------------------------
 *
 * dedup_cache.c
 *	  A per-process cache of the transactionId hashes the dedup probe has
 *	  already read, so a push only reads what was written since.
 *
 * Without it every push to a dedup-enabled partition reads every hash of
 * the partition's window from log_txns, a cost that grows with the window's
 * traffic.  The cache keeps, per partition, the hashes stored at offsets in
 * (floor, verified_upto] written since loaded_since; a probe then checks the
 * incoming hashes against it in memory and reads only the rows above
 * verified_upto.  When nobody else wrote to the partition since our last
 * push, that is nothing at all: Queen's "warm cache, no probe" steady state.
 *
 * Correctness rules (a wrong entry would report a message as a duplicate and
 * lose it, or let a duplicate through):
 *
 *	- An entry only ever holds hashes of committed rows.  Rows read by a
 *	  probe are committed unless this transaction wrote to that partition
 *	  earlier (they may be our own, uncommitted); then the entry is not
 *	  touched.  Our own writes are kept aside as "pending", per
 *	  subtransaction, and absorbed only at top-level commit, and only when
 *	  they continue the entry exactly (verified_upto == base - 1).  Abort,
 *	  subtransaction abort and PREPARE drop them.
 *	- The probe runs under the partition row lock, so rows above
 *	  verified_upto can only come from transactions that committed before
 *	  we got the lock, and a probe sees them all.
 *	- An entry is used only if it is for the same partition row (a partition
 *	  deleted and created again under the same id is told apart by the row's
 *	  created_at) and covers what the probe needs: its floor is
 *	  at or below the probe's lower bound, it holds everything written since
 *	  the window's cutoff, and the partition has not gone below what it
 *	  verified (last_offset < verified_upto means the rows it knew are gone).
 *	  Otherwise it is dropped and the probe reads the window from the table.
 *
 * The cache trusts that log_txns changes only through Queen: the allocator,
 * and purges that advance txns_start (the lower bound follows it).  Editing
 * log_txns by hand can make it stale; queen.dedup_cache_mb = 0 turns it off.
 *
 * Memory: one context under TopMemoryContext, bounded by
 * queen.dedup_cache_mb per process, least recently used partitions evicted
 * first; a partition whose window alone does not fit is not cached.
 *
 *-------------------------------------------------------------------------
 */
#include "queen.h"

#include "access/xact.h"
#include "lib/ilist.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

/* One stored hash: 32 bytes. offset < 0 marks an empty slot. */
typedef struct QueenDedupSlot
{
	uint8		hash[QUEEN_HASH_LEN];
	int64		offset;
	TimestampTz created_at;
} QueenDedupSlot;

struct QueenDedupEntry
{
	pg_uuid_t	pid;			/* hash key: must be first */
	TimestampTz generation;		/* the partition row's created_at */
	int64		floor;			/* offsets <= floor were never read */
	int64		verified_upto;	/* every hash in (floor, verified_upto] ... */
	TimestampTz loaded_since;	/* ... written at or after this is here */
	uint32		capacity;		/* slots, a power of two; 0 = none yet */
	uint32		used;
	QueenDedupSlot *slots;
	dlist_node	lru;			/* head = most recently used */
};

/* Own writes of the current transaction, absorbed at commit. */
typedef struct QueenPendingWrite
{
	pg_uuid_t	pid;
	int64		base_offset;
	int32		count;
	TimestampTz created_at;
	SubTransactionId subid;
	uint8	   *hashes;
	struct QueenPendingWrite *next;
} QueenPendingWrite;

static HTAB *queen_dedup_entries = NULL;
static MemoryContext queen_dedup_cxt = NULL;
static dlist_head queen_dedup_lru = DLIST_STATIC_INIT(queen_dedup_lru);
static Size queen_dedup_bytes = 0;
static QueenPendingWrite *queen_pending = NULL;	/* in TopTransactionContext */

static Size
queen_dedup_budget(void)
{
	return (Size) queen_dedup_cache_mb * 1024 * 1024;
}

static void
queen_dedup_free_slots(QueenDedupEntry *e)
{
	if (e->slots != NULL)
	{
		pfree(e->slots);
		queen_dedup_bytes -= (Size) e->capacity * sizeof(QueenDedupSlot);
	}
	e->slots = NULL;
	e->capacity = 0;
	e->used = 0;
}

static void
queen_dedup_remove(QueenDedupEntry *e)
{
	queen_dedup_free_slots(e);
	dlist_delete(&e->lru);
	hash_search(queen_dedup_entries, &e->pid, HASH_REMOVE, NULL);
}

static void
queen_dedup_clear(void)
{
	if (queen_dedup_cxt != NULL)
		MemoryContextDelete(queen_dedup_cxt);
	queen_dedup_cxt = NULL;
	queen_dedup_entries = NULL;
	queen_dedup_bytes = 0;
	dlist_init(&queen_dedup_lru);
}

static void
queen_dedup_ensure(void)
{
	HASHCTL		ctl;

	if (queen_dedup_entries != NULL)
		return;
	queen_dedup_cxt = AllocSetContextCreate(TopMemoryContext, "queen dedup cache",
											ALLOCSET_DEFAULT_SIZES);
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(pg_uuid_t);
	ctl.entrysize = sizeof(QueenDedupEntry);
	ctl.hcxt = queen_dedup_cxt;
	queen_dedup_entries = hash_create("queen dedup cache", 64, &ctl,
									  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	dlist_init(&queen_dedup_lru);
}

static inline uint32
queen_slot_start(const uint8 *hash, uint32 capacity)
{
	uint64		key;

	/* XXH3 output is uniform: its first bytes are a fine table index */
	memcpy(&key, hash, sizeof(key));
	return (uint32) (key & (capacity - 1));
}

/*
 * Insert without growing.  The caller reserved room; the walk is bounded
 * anyway, so an accounting mistake degrades to "not cached", never to a
 * process spinning under a lock.
 */
static bool
queen_slot_put(QueenDedupSlot *slots, uint32 capacity, const uint8 *hash,
			   int64 offset, TimestampTz created_at)
{
	uint32		i = queen_slot_start(hash, capacity);
	uint32		steps;

	for (steps = 0; slots[i].offset >= 0; steps++)
	{
		if (steps >= capacity)
			return false;
		i = (i + 1) & (capacity - 1);
	}
	memcpy(slots[i].hash, hash, QUEEN_HASH_LEN);
	slots[i].offset = offset;
	slots[i].created_at = created_at;
	return true;
}

/*
 * Make room for more hashes, dropping those older than cutoff on the way
 * (they can never match again: cutoffs only move forward for an entry that
 * stays valid).  Evicts other partitions to stay within the budget.  Returns
 * false when the entry cannot fit; nothing is raised, because absorption at
 * commit must not fail.
 */
static bool
queen_dedup_reserve(QueenDedupEntry *e, uint32 more, TimestampTz cutoff)
{
	uint64		want = (uint64) e->used + more;
	uint32		newcap;
	Size		newbytes;
	QueenDedupSlot *slots;
	uint32		kept = 0;
	uint32		i;

	if (e->capacity > 0 && want * 4 <= (uint64) e->capacity * 3)
		return true;

	newcap = 64;
	while ((uint64) newcap * 3 < want * 4)
	{
		if (newcap >= (1U << 30))
			return false;
		newcap <<= 1;
	}
	newbytes = (Size) newcap * sizeof(QueenDedupSlot);
	if (newbytes > queen_dedup_budget())
		return false;

	/* evict least recently used partitions until the new table fits */
	while (queen_dedup_bytes + newbytes > queen_dedup_budget())
	{
		QueenDedupEntry *victim;

		if (dlist_is_empty(&queen_dedup_lru))
			return false;
		victim = dlist_container(QueenDedupEntry, lru, dlist_tail_node(&queen_dedup_lru));
		if (victim == e)
		{
			/* only our own old table is left to free: it is replaced below */
			if (queen_dedup_bytes - (Size) e->capacity * sizeof(QueenDedupSlot) + newbytes >
				queen_dedup_budget())
				return false;
			break;
		}
		queen_dedup_remove(victim);
	}

	slots = MemoryContextAllocExtended(queen_dedup_cxt, newbytes, MCXT_ALLOC_NO_OOM);
	if (slots == NULL)
		return false;
	for (i = 0; i < newcap; i++)
		slots[i].offset = -1;

	for (i = 0; i < e->capacity; i++)
	{
		QueenDedupSlot *s = &e->slots[i];

		if (s->offset < 0 || s->created_at < cutoff)
			continue;
		if (queen_slot_put(slots, newcap, s->hash, s->offset, s->created_at))
			kept++;
	}
	queen_dedup_free_slots(e);
	e->slots = slots;
	e->capacity = newcap;
	e->used = kept;
	queen_dedup_bytes += newbytes;
	e->loaded_since = Max(e->loaded_since, cutoff);
	return true;
}

/*
 * The entry for pid if it can answer a probe of (from, last_offset] with
 * the given cutoff; an entry that cannot is dropped.  NULL when the cache is
 * off or has nothing usable.
 */
QueenDedupEntry *
queen_dedup_cache_get(const pg_uuid_t *pid, TimestampTz generation, int64 from,
					  TimestampTz cutoff, int64 last_offset)
{
	QueenDedupEntry *e;

	if (queen_dedup_cache_mb <= 0)
	{
		if (queen_dedup_entries != NULL)
			queen_dedup_clear();
		return NULL;
	}
	if (queen_dedup_entries == NULL)
		return NULL;
	e = hash_search(queen_dedup_entries, pid, HASH_FIND, NULL);
	if (e == NULL)
		return NULL;
	if (e->generation != generation || e->floor > from ||
		e->loaded_since > cutoff || e->verified_upto > last_offset)
	{
		queen_dedup_remove(e);
		return NULL;
	}
	dlist_move_head(&queen_dedup_lru, &e->lru);
	return e;
}

/*
 * Start a fresh entry for pid, to be filled by a probe that reads every row
 * of (floor, last_offset] written since loaded_since.  NULL when the cache
 * is off.
 */
QueenDedupEntry *
queen_dedup_cache_create(const pg_uuid_t *pid, TimestampTz generation, int64 floor,
						 TimestampTz loaded_since)
{
	QueenDedupEntry *e;
	bool		found;

	if (queen_dedup_cache_mb <= 0)
		return NULL;
	queen_dedup_ensure();
	e = hash_search(queen_dedup_entries, pid, HASH_ENTER, &found);
	if (found)
	{
		queen_dedup_free_slots(e);
		dlist_delete(&e->lru);
	}
	e->generation = generation;
	e->floor = floor;
	e->verified_upto = floor;
	e->loaded_since = loaded_since;
	e->capacity = 0;
	e->used = 0;
	e->slots = NULL;
	dlist_push_head(&queen_dedup_lru, &e->lru);
	return e;
}

void
queen_dedup_cache_drop(QueenDedupEntry *e)
{
	if (e != NULL)
		queen_dedup_remove(e);
}

/*
 * Add the hashes of one stored row (frame k at base + k).  Returns false
 * when it does not fit, in which case the caller drops the entry.
 */
bool
queen_dedup_cache_add(QueenDedupEntry *e, const uint8 *hashes, int count,
					  int64 base, TimestampTz created_at, TimestampTz cutoff)
{
	int			k;

	if (!queen_dedup_reserve(e, (uint32) count, cutoff))
		return false;
	for (k = 0; k < count; k++)
	{
		if (!queen_slot_put(e->slots, e->capacity, hashes + (Size) k * QUEEN_HASH_LEN,
							base + k, created_at))
			return false;
		e->used++;
	}
	return true;
}

void
queen_dedup_cache_verified(QueenDedupEntry *e, int64 last_offset, TimestampTz cutoff)
{
	e->verified_upto = last_offset;
	e->loaded_since = Max(e->loaded_since, cutoff);
}

int64
queen_dedup_cache_verified_upto(const QueenDedupEntry *e)
{
	return e->verified_upto;
}

/*
 * For each incoming hash, lower first_off[i] to the smallest cached offset
 * above from written at or after cutoff that carries it (first_off[i] < 0
 * means no match yet).
 */
void
queen_dedup_cache_match(const QueenDedupEntry *e, const uint8 *incoming, int count,
						int64 from, TimestampTz cutoff, int64 *first_off)
{
	int			k;

	if (e->used == 0)
		return;
	for (k = 0; k < count; k++)
	{
		const uint8 *h = incoming + (Size) k * QUEEN_HASH_LEN;
		uint32		i = queen_slot_start(h, e->capacity);
		uint32		steps;

		for (steps = 0; steps < e->capacity && e->slots[i].offset >= 0;
			 steps++, i = (i + 1) & (e->capacity - 1))
		{
			const QueenDedupSlot *s = &e->slots[i];

			if (memcmp(s->hash, h, QUEEN_HASH_LEN) != 0 ||
				s->offset <= from || s->created_at < cutoff)
				continue;
			if (first_off[k] < 0 || s->offset < first_off[k])
				first_off[k] = s->offset;
		}
	}
}

/* ----------------------------------------------------------------
 *		Own writes: pending until the transaction commits
 * ----------------------------------------------------------------
 */

/* Has this transaction written to pid (and not rolled that back)? */
bool
queen_dedup_cache_wrote(const pg_uuid_t *pid)
{
	QueenPendingWrite *w;

	for (w = queen_pending; w != NULL; w = w->next)
		if (memcmp(w->pid.data, pid->data, UUID_LEN) == 0)
			return true;
	return false;
}

/* Remember a segment this transaction wrote, to absorb it if we commit. */
void
queen_dedup_cache_remember(const pg_uuid_t *pid, int64 base, int32 count,
						   TimestampTz created_at, const uint8 *hashes)
{
	MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
	QueenPendingWrite *w = palloc(sizeof(QueenPendingWrite));

	w->pid = *pid;
	w->base_offset = base;
	w->count = count;
	w->created_at = created_at;
	w->subid = GetCurrentSubTransactionId();
	w->hashes = palloc((Size) count * QUEEN_HASH_LEN);
	memcpy(w->hashes, hashes, (Size) count * QUEEN_HASH_LEN);
	/* newest first; absorption walks them oldest first */
	w->next = queen_pending;
	queen_pending = w;
	MemoryContextSwitchTo(old);
}

/* Absorb committed writes that continue their entry exactly; never raises. */
static void
queen_dedup_absorb(QueenPendingWrite *w)
{
	QueenDedupEntry *e;

	if (w == NULL)
		return;
	queen_dedup_absorb(w->next);	/* oldest first */
	if (queen_dedup_entries == NULL || queen_dedup_cache_mb <= 0)
		return;
	e = hash_search(queen_dedup_entries, &w->pid, HASH_FIND, NULL);
	if (e == NULL || e->verified_upto != w->base_offset - 1)
		return;
	if (!queen_dedup_cache_add(e, w->hashes, w->count, w->base_offset, w->created_at,
							   e->loaded_since))
	{
		queen_dedup_remove(e);
		return;
	}
	e->verified_upto = w->base_offset + w->count - 1;
}

static void
queen_dedup_xact_callback(XactEvent event, void *arg)
{
	(void) arg;
	switch (event)
	{
		case XACT_EVENT_COMMIT:
			queen_dedup_absorb(queen_pending);
			queen_pending = NULL;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PREPARE:	/* committed later, maybe elsewhere: never ours to absorb */
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PARALLEL_ABORT:
			queen_pending = NULL;
			break;
		default:
			break;
	}
}

static void
queen_dedup_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
							 SubTransactionId parentSubid, void *arg)
{
	QueenPendingWrite **link = &queen_pending;

	(void) arg;
	if (event != SUBXACT_EVENT_COMMIT_SUB && event != SUBXACT_EVENT_ABORT_SUB)
		return;
	while (*link != NULL)
	{
		QueenPendingWrite *w = *link;

		if (w->subid == mySubid)
		{
			if (event == SUBXACT_EVENT_ABORT_SUB)
			{
				*link = w->next;	/* rolled back: the rows are gone */
				continue;
			}
			w->subid = parentSubid;
		}
		link = &w->next;
	}
}

void
queen_dedup_cache_init(void)
{
	RegisterXactCallback(queen_dedup_xact_callback, NULL);
	RegisterSubXactCallback(queen_dedup_subxact_callback, NULL);
}
