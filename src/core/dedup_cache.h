/*-------------------------------------------------------------------------
 *
 * dedup_cache.h
 *	  The per-process dedup cache and what the current transaction wrote
 *	  (dedup_cache.c), as the write path and queue configuration use them.
 *
 * The write path's probe reads and fills the cache; its deferred offsets
 * live in the transaction's own-partition state; queue configuration tells
 * that state when a deletion or an options change made it stale.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_DEDUP_CACHE_H
#define QUEEN_DEDUP_CACHE_H

#include "queen.h"

typedef struct QueenDedupEntry QueenDedupEntry;

/*
 * A slot that may hold incoming hash index at offset: the caches keep part
 * of each hash, so the probe confirms a hit against the stored row.
 */
typedef struct QueenDedupHit
{
	int32		index;
	int64		offset;
} QueenDedupHit;

typedef struct QueenDedupHits
{
	int			n;
	int			cap;
	QueenDedupHit *hits;		/* palloc'd in the caller's context */
} QueenDedupHits;

extern void queen_dedup_hits_add(QueenDedupHits *hits, int32 index, int64 offset);
extern QueenDedupEntry *queen_dedup_cache_get(const pg_uuid_t *pid, TimestampTz generation,
											  int64 from, TimestampTz cutoff,
											  int64 last_offset);
extern int64 queen_dedup_cache_floor(const pg_uuid_t *pid, TimestampTz generation,
									 TimestampTz cutoff, int64 last_offset);
extern QueenDedupEntry *queen_dedup_cache_create(const pg_uuid_t *pid, TimestampTz generation,
												 int64 floor, TimestampTz loaded_since);
extern void queen_dedup_cache_drop(QueenDedupEntry *e);
extern bool queen_dedup_cache_fits(const QueenDedupEntry *e, uint32 more);
extern bool queen_dedup_cache_may_fill(void);
extern void queen_dedup_cache_fill_failed(QueenDedupEntry *e);
extern bool queen_dedup_cache_add(QueenDedupEntry *e, const uint8 *hashes, int count,
								  int64 base, TimestampTz created_at, TimestampTz cutoff);
extern void queen_dedup_cache_verified(QueenDedupEntry *e, int64 last_offset,
									   TimestampTz cutoff);
extern int64 queen_dedup_cache_verified_upto(const QueenDedupEntry *e);
extern void queen_dedup_cache_match(const QueenDedupEntry *e, const uint8 *incoming,
									int count, int64 from, TimestampTz cutoff,
									QueenDedupHits *hits);
/*
 * What the allocator knows of a partition this transaction wrote to, so
 * that later pushes to it in the same transaction neither lock nor update
 * its row again (each update of one row in one transaction lengthens the
 * chain of row versions every later statement walks: n pushes cost n^2).
 * The offsets advance here and reach the row once, before commit.
 */
typedef struct QueenOwnAlloc
{
	bool		locked;			/* our write holds the row lock; last is exact */
	bool		described;		/* window, txns_start and generation are the row's */
	bool		dirty;			/* the row's last_offset may differ from last */
	bool		deferred;		/* some write here left the row behind */
	Oid			userid;			/* who deferred the last write: the flush runs as them */
	int			sec_context;
	SubTransactionId unlocked_in;	/* a queue deletion forgot the row here, or 0 */
	bool		was_locked;		/* locked and described before that */
	bool		was_described;
	int32		window;			/* the queue's dedup window */
	bool		encrypted;		/* the queue's encryptionEnabled */
	int64		txns_start;
	TimestampTz generation;
	int64		last;			/* the last offset this transaction allocated */
} QueenOwnAlloc;

typedef struct QueenOwnPartition QueenOwnPartition;
extern QueenOwnPartition *queen_dedup_own(const pg_uuid_t *pid);
extern QueenOwnAlloc *queen_dedup_own_alloc(QueenOwnPartition *o);
extern void queen_dedup_own_defer(QueenOwnPartition *o);
extern bool queen_dedup_own_any_dirty(void);
extern int	queen_dedup_own_dirty(QueenOwnAlloc ***dirty);
extern void queen_dedup_own_unlock_all(void);
extern void queen_dedup_own_forget_windows(void);
extern const pg_uuid_t *queen_dedup_own_pid(const QueenOwnAlloc *a);
extern int64 queen_dedup_own_match(const QueenOwnPartition *o, int64 last_offset,
								   const uint8 *incoming, int count, int64 from,
								   TimestampTz cutoff, QueenDedupHits *hits);
extern void queen_dedup_cache_remember(const pg_uuid_t *pid, int64 base, int32 count,
									   TimestampTz created_at, const uint8 *hashes);

#endif							/* QUEEN_DEDUP_CACHE_H */
