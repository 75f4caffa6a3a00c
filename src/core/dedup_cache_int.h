/*-------------------------------------------------------------------------
 *
 * dedup_cache_int.h
 *	  What the dedup cache (dedup_cache.c) and the current transaction's
 *	  own writes (dedup_own.c) share: the compact slot table both index
 *	  hashes with, and the cache's absorbing of a committed write.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_DEDUP_CACHE_INT_H
#define QUEEN_DEDUP_CACHE_INT_H

#include "dedup_cache.h"

/*
 * One stored hash in 12 bytes, not the 32 the whole hash, offset and time
 * take, so a budget holds 2.7 times the window.  A slot is therefore only a
 * hint: its key is 4 of the hash's 16 bytes and its time is rounded down to
 * the second, so a slot that matches is a hit the probe confirms against
 * the stored row (dedup_probe.c), and only a slot that cannot match is
 * decided here.  Hits are the duplicates, and a false one about once in a
 * billion lookups.
 */
typedef struct QueenDedupSlot
{
	uint32		key;			/* the hash's first 4 bytes */
	uint32		delta;			/* offset - the table's base; QUEEN_SLOT_EMPTY if empty */
	uint32		created_s;		/* created_at in whole seconds, rounded down */
} QueenDedupSlot;

#define QUEEN_SLOT_EMPTY PG_UINT32_MAX

/* An open-addressing table of slots, capacity a power of two. */
typedef struct QueenSlotTable
{
	uint32		capacity;		/* 0 = none yet */
	uint32		used;
	int64		base;			/* the lowest offset a slot can hold */
	QueenDedupSlot *slots;
} QueenSlotTable;

extern uint32 queen_slots_needed(const QueenSlotTable *t, uint64 want, bool *too_big);
extern bool queen_slots_rebuild(QueenSlotTable *t, uint32 newcap, TimestampTz cutoff,
								MemoryContext cxt);
extern bool queen_slots_add(QueenSlotTable *t, const uint8 *hashes, int count, int64 base,
							TimestampTz created_at);
extern void queen_slots_match(const QueenSlotTable *t, const uint8 *incoming, int count,
							  int64 from, TimestampTz cutoff, QueenDedupHits *hits);
extern void queen_dedup_cache_absorb(const pg_uuid_t *pid, int64 base, int32 count,
									 TimestampTz created_at, const uint8 *hashes);

#endif							/* QUEEN_DEDUP_CACHE_INT_H */
