/*-------------------------------------------------------------------------
 *
 * dedup_cache.c
 *	  A per-process cache of the transactionId hashes the dedup probe has
 *	  already read, so a push only reads what was written since.
 *
 * Without it every push to a dedup-enabled partition reads every hash of
 * the partition's window from the stored hashes, a cost that grows with the window's
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
 *	- A slot keeps only part of its hash and a rounded time (QueenDedupSlot),
 *	  so a match is a hit the probe confirms against the stored row; a slot
 *	  decides alone only that it cannot match.
 *
 * The cache trusts that the stored hashes change only through Queen: the allocator,
 * and purges that advance txns_start (the lower bound follows it).  Editing
 * the hashes by hand can make it stale; queen.dedup_cache_mb = 0 turns it off.
 *
 * What the current transaction wrote is kept apart (dedup_own.c), and
 * absorbed here only once it committed (queen_dedup_cache_absorb).
 *
 * Memory: one context under TopMemoryContext, bounded by
 * queen.dedup_cache_mb per process, least recently used partitions evicted
 * first; a partition whose window alone does not fit is not cached.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "queen.h"
#include "dedup_cache_int.h"
#include "hash_refs.h"
#include "spi.h"

#include "access/xact.h"
#include "lib/ilist.h"
#include "miscadmin.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

struct QueenDedupEntry
{
	pg_uuid_t	pid;			/* hash key: must be first */
	TimestampTz generation;		/* the partition row's created_at */
	int64		floor;			/* offsets <= floor were never read */
	int64		verified_upto;	/* every hash in (floor, verified_upto] ... */
	TimestampTz loaded_since;	/* ... written at or after this is here */
	QueenSlotTable t;
	dlist_node	lru;			/* head = most recently used */
};

static HTAB *queen_dedup_entries = NULL;
static MemoryContext queen_dedup_cxt = NULL;
static dlist_head queen_dedup_lru = DLIST_STATIC_INIT(queen_dedup_lru);
static Size queen_dedup_bytes = 0;

/*
 * What the cache held when a long walk last failed to fit its partition
 * (0: none since).  Until something frees memory, another long walk would
 * only fill what little is free and drop it again, on every push of every
 * partition the cache cannot hold: such walks do not try.
 */
static Size queen_dedup_fill_failed_at = 0;

static Size
queen_dedup_budget(void)
{
	return (Size) queen_dedup_cache_mb * 1024 * 1024;
}

/* ----------------------------------------------------------------
 *		Slot tables
 * ----------------------------------------------------------------
 */

static inline uint32
queen_slot_key(const uint8 *hash)
{
	uint32		key;

	memcpy(&key, hash, sizeof(key));
	return key;
}

/* The key's slot: spread as the hash sets spread theirs (hash_refs.h). */
static inline uint32
queen_slot_start(uint32 key, uint32 capacity)
{
	return queen_slot_of(key, capacity - 1);
}

static inline uint32
queen_seconds(TimestampTz t)
{
	if (t <= 0)
		return 0;
	return (uint32) Min(t / USECS_PER_SEC, (TimestampTz) PG_UINT32_MAX - 1);
}

/*
 * Whether every time the slot's rounded second stands for is before cutoff.
 * A time past what a slot can hold was clamped: it never expires here (the
 * confirmation reads the exact time).
 */
static inline bool
queen_slot_expired(const QueenDedupSlot *s, TimestampTz cutoff)
{
	if (s->created_s >= PG_UINT32_MAX - 1)
		return false;
	return ((TimestampTz) s->created_s + 1) * USECS_PER_SEC <= cutoff;
}

/*
 * Insert without growing.  The caller reserved room; the walk is bounded
 * anyway, so an accounting mistake degrades to "not cached", never to a
 * process spinning under a lock.  An offset more than 2^32 - 2 above the
 * table's base does not fit a slot either: that partition is not cached.
 */
static bool
queen_slot_put(QueenSlotTable *t, uint32 key, int64 offset, uint32 created_s)
{
	uint32		i = queen_slot_start(key, t->capacity);
	uint32		steps;

	if (offset < t->base || offset - t->base >= (int64) QUEEN_SLOT_EMPTY)
		return false;
	for (steps = 0; t->slots[i].delta != QUEEN_SLOT_EMPTY; steps++)
	{
		if (steps >= t->capacity)
			return false;
		i = (i + 1) & (t->capacity - 1);
	}
	t->slots[i].key = key;
	t->slots[i].delta = (uint32) (offset - t->base);
	t->slots[i].created_s = created_s;
	t->used++;
	return true;
}

/*
 * The capacity a table needs to hold want slots at most 3/4 full; 0 if the
 * table already has room, or if no table can be that large.
 */
uint32
queen_slots_needed(const QueenSlotTable *t, uint64 want, bool *too_big)
{
	uint32		newcap = 64;

	*too_big = false;
	if (t->capacity > 0 && want * 4 <= (uint64) t->capacity * 3)
		return 0;
	while ((uint64) newcap * 3 < want * 4)
	{
		if (newcap >= (1U << 30))
		{
			*too_big = true;
			return 0;
		}
		newcap <<= 1;
	}
	return newcap;
}

/*
 * Move t into a new table of newcap slots allocated in cxt, dropping the
 * slots older than cutoff on the way (they can never match again: cutoffs
 * only move forward).  Returns false, leaving t as it was, when memory is
 * short: nothing is raised, because absorption at commit must not fail.
 */
bool
queen_slots_rebuild(QueenSlotTable *t, uint32 newcap, TimestampTz cutoff,
					MemoryContext cxt)
{
	QueenSlotTable n;
	uint32		i;

	n.capacity = newcap;
	n.used = 0;
	n.base = t->base;
	n.slots = MemoryContextAllocExtended(cxt, (Size) newcap * sizeof(QueenDedupSlot),
										 MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM);
	if (n.slots == NULL)
		return false;
	for (i = 0; i < newcap; i++)
		n.slots[i].delta = QUEEN_SLOT_EMPTY;
	for (i = 0; i < t->capacity; i++)
	{
		QueenDedupSlot *s = &t->slots[i];

		if (s->delta != QUEEN_SLOT_EMPTY && !queen_slot_expired(s, cutoff))
			(void) queen_slot_put(&n, s->key, t->base + s->delta, s->created_s);
	}
	if (t->slots != NULL)
		pfree(t->slots);
	*t = n;
	return true;
}

/* Add count hashes stored at base, base + 1, ...; the caller made room. */
bool
queen_slots_add(QueenSlotTable *t, const uint8 *hashes, int count, int64 base,
				TimestampTz created_at)
{
	uint32		created_s = queen_seconds(created_at);
	int			k;

	/* frames of a row straddling the table's floor are below what it covers */
	for (k = (int) Max(t->base - base, 0); k < count; k++)
		if (!queen_slot_put(t, queen_slot_key(hashes + (Size) k * QUEEN_HASH_LEN), base + k,
							created_s))
			return false;
	return true;
}

/* A candidate for the probe to confirm: incoming hash index may be at offset. */
void
queen_dedup_hits_add(QueenDedupHits *hits, int32 index, int64 offset)
{
	if (hits->n == hits->cap)
	{
		hits->cap = Max(16, hits->cap * 2);
		hits->hits = hits->hits == NULL
			? palloc_extended(sizeof(QueenDedupHit) * hits->cap, MCXT_ALLOC_HUGE)
			: repalloc_huge(hits->hits, sizeof(QueenDedupHit) * hits->cap);
	}
	hits->hits[hits->n].index = index;
	hits->hits[hits->n].offset = offset;
	hits->n++;
}

/*
 * Add to hits every slot above from that may hold incoming hash k written
 * at or after cutoff: the candidates the probe verifies.
 */
void
queen_slots_match(const QueenSlotTable *t, const uint8 *incoming, int count,
				  int64 from, TimestampTz cutoff, QueenDedupHits *hits)
{
	int			k;

	if (t->used == 0)
		return;
	for (k = 0; k < count; k++)
	{
		uint32		key = queen_slot_key(incoming + (Size) k * QUEEN_HASH_LEN);
		uint32		i = queen_slot_start(key, t->capacity);
		uint32		steps;

		for (steps = 0; steps < t->capacity && t->slots[i].delta != QUEEN_SLOT_EMPTY;
			 steps++, i = (i + 1) & (t->capacity - 1))
		{
			const QueenDedupSlot *s = &t->slots[i];
			int64		offset = t->base + s->delta;

			if (s->key != key || offset <= from || queen_slot_expired(s, cutoff))
				continue;
			queen_dedup_hits_add(hits, k, offset);
		}
	}
}

/* ----------------------------------------------------------------
 *		The cache of committed hashes
 * ----------------------------------------------------------------
 */

static void
queen_dedup_free_slots(QueenDedupEntry *e)
{
	if (e->t.slots != NULL)
	{
		pfree(e->t.slots);
		queen_dedup_bytes -= (Size) e->t.capacity * sizeof(QueenDedupSlot);
	}
	e->t.slots = NULL;
	e->t.capacity = 0;
	e->t.used = 0;
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
	queen_dedup_fill_failed_at = 0;
	dlist_init(&queen_dedup_lru);
}

static void
queen_dedup_ensure(void)
{
	if (queen_dedup_entries != NULL)
		return;
	queen_dedup_entries = queen_process_hash("queen dedup cache", sizeof(pg_uuid_t),
											 sizeof(QueenDedupEntry), 64, &queen_dedup_cxt);
	dlist_init(&queen_dedup_lru);
}

/*
 * Make room for more hashes, dropping those older than cutoff on the way.
 * Evicts other partitions to stay within the budget.  Returns false when
 * the entry cannot fit.
 */
static bool
queen_dedup_reserve(QueenDedupEntry *e, uint32 more, TimestampTz cutoff)
{
	bool		too_big;
	uint32		newcap = queen_slots_needed(&e->t, (uint64) e->t.used + more, &too_big);
	Size		oldbytes = (Size) e->t.capacity * sizeof(QueenDedupSlot);
	Size		newbytes;

	if (too_big)
		return false;
	if (newcap == 0)
		return true;
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
			if (queen_dedup_bytes - oldbytes + newbytes > queen_dedup_budget())
				return false;
			break;
		}
		queen_dedup_remove(victim);
	}

	if (!queen_slots_rebuild(&e->t, newcap, cutoff, queen_dedup_cxt))
		return false;
	queen_dedup_bytes += newbytes - oldbytes;
	e->loaded_since = Max(e->loaded_since, cutoff);
	return true;
}

/*
 * Whether e still holds what it claims for this partition row: the same
 * generation, everything since cutoff, and offsets the partition still has.
 */
static inline bool
queen_dedup_entry_true(const QueenDedupEntry *e, TimestampTz generation, TimestampTz cutoff,
					   int64 last_offset)
{
	return e->generation == generation && e->loaded_since <= cutoff &&
		e->verified_upto <= last_offset;
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
	if (!queen_dedup_entry_true(e, generation, cutoff, last_offset))
	{
		queen_dedup_remove(e);
		return NULL;
	}
	/* still true, only not from this low: a probe above its floor may use it (dedup runs) */
	if (e->floor > from)
		return NULL;
	/* it ends below from: it answers nothing there, and a walk from from cannot extend it */
	if (e->verified_upto < from)
		return NULL;
	dlist_move_head(&queen_dedup_lru, &e->lru);
	return e;
}

/*
 * Where pid's entry starts, if it holds what a probe above it needs: a
 * probe from lower down learns (from, floor] elsewhere (the dedup runs),
 * and nothing above it.  last_offset when there is no such entry.
 */
int64
queen_dedup_cache_floor(const pg_uuid_t *pid, TimestampTz generation, TimestampTz cutoff,
						int64 last_offset)
{
	QueenDedupEntry *e;

	if (queen_dedup_entries == NULL || queen_dedup_cache_mb <= 0)
		return last_offset;
	e = hash_search(queen_dedup_entries, pid, HASH_FIND, NULL);
	if (e == NULL || !queen_dedup_entry_true(e, generation, cutoff, last_offset))
		return last_offset;
	return e->floor;
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
	e->t.capacity = 0;
	e->t.used = 0;
	e->t.base = floor + 1;
	e->t.slots = NULL;
	dlist_push_head(&queen_dedup_lru, &e->lru);
	return e;
}

/*
 * Whether e can take more hashes without evicting another partition: the
 * table it would grow to, in place of the one it has, within the budget.
 */
bool
queen_dedup_cache_fits(const QueenDedupEntry *e, uint32 more)
{
	bool		too_big;
	uint32		newcap = queen_slots_needed(&e->t, (uint64) e->t.used + more, &too_big);

	if (queen_dedup_cache_mb <= 0 || too_big)
		return false;
	if (newcap == 0)
		return true;
	return queen_dedup_bytes - (Size) e->t.capacity * sizeof(QueenDedupSlot) +
		(Size) newcap * sizeof(QueenDedupSlot) <= queen_dedup_budget();
}

/* Whether a long walk may try to fill an entry (see queen_dedup_fill_failed_at). */
bool
queen_dedup_cache_may_fill(void)
{
	return queen_dedup_fill_failed_at == 0 || queen_dedup_bytes < queen_dedup_fill_failed_at;
}

/* A long walk's entry did not fit: drop it, and let long walks rest. */
void
queen_dedup_cache_fill_failed(QueenDedupEntry *e)
{
	queen_dedup_remove(e);
	queen_dedup_fill_failed_at = queen_dedup_bytes;
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
	if (!queen_dedup_reserve(e, (uint32) count, cutoff))
		return false;
	return queen_slots_add(&e->t, hashes, count, base, created_at);
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

void
queen_dedup_cache_match(const QueenDedupEntry *e, const uint8 *incoming, int count,
						int64 from, TimestampTz cutoff, QueenDedupHits *hits)
{
	queen_slots_match(&e->t, incoming, count, from, cutoff, hits);
}

/*
 * A committed write of this process's: kept if it continues its entry
 * exactly, else the entry is left as it is (or dropped when the write does
 * not fit).  Never raises.
 */
void
queen_dedup_cache_absorb(const pg_uuid_t *pid, int64 base, int32 count,
						 TimestampTz created_at, const uint8 *hashes)
{
	QueenDedupEntry *e;

	if (queen_dedup_entries == NULL || queen_dedup_cache_mb <= 0)
		return;
	e = hash_search(queen_dedup_entries, pid, HASH_FIND, NULL);
	if (e == NULL || e->verified_upto != base - 1)
		return;
	if (!queen_dedup_cache_add(e, hashes, count, base, created_at, e->loaded_since))
	{
		queen_dedup_remove(e);
		return;
	}
	e->verified_upto = base + count - 1;
}
