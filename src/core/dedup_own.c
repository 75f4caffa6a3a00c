/*-------------------------------------------------------------------------
 *
 * dedup_own.c
 *	  What the current transaction wrote, per partition (QueenOwnPartition):
 *	  its own hashes, indexed, so that a later probe in the same
 *	  transaction does not reread them, and the allocator's state of the
 *	  rows it holds (log_deferred.c defers their last_offset to one UPDATE
 *	  before commit).
 *
 * It lives in TopTransactionContext and is unwound per subtransaction.
 * Its writes are pending until the top-level COMMIT, when the dedup cache
 * (dedup_cache.c) absorbs those that continue its entries; abort,
 * subtransaction abort and PREPARE drop them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "queen.h"
#include "dedup_cache_int.h"

#include "access/xact.h"
#include "lib/ilist.h"
#include "miscadmin.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

/*
 * Own writes of the current transaction, in write order, absorbed at
 * commit.  Everything here lives in TopTransactionContext.
 */
typedef struct QueenPendingWrite
{
	dlist_node	node;
	pg_uuid_t	pid;
	int64		base_offset;
	int32		count;
	TimestampTz created_at;
	SubTransactionId subid;
	uint8	   *hashes;
} QueenPendingWrite;

/*
 * Per partition this transaction wrote to: how many of its writes are live,
 * and an index of its own hashes so that a later probe in the same
 * transaction does not reread them from the log (which made a transaction
 * of n pushes to one partition read n^2/2 rows).  The index covers offsets
 * (floor, upto]: the transaction holds the partition row lock from its
 * first write, so nothing else can land in that range.  A rolled back
 * subtransaction may have released that lock, so it drops the index; the
 * probe then reads the table, as it always may.
 */
struct QueenOwnPartition
{
	pg_uuid_t	pid;			/* hash key: must be first */
	int32		live;			/* pending writes not rolled back */
	bool		indexed;		/* own describes (floor, upto] */
	int64		floor;
	int64		upto;
	QueenSlotTable own;
	QueenOwnAlloc alloc;		/* the allocator's, see queen.h */
};

/* Both in TopTransactionContext; reset at every transaction end. */
static dlist_head queen_pending = DLIST_STATIC_INIT(queen_pending);
static HTAB *queen_own = NULL;
static bool queen_own_dirty = false;	/* some entry is dirty */

/* ----------------------------------------------------------------
 *		Own writes: pending until the transaction commits
 * ----------------------------------------------------------------
 */

/* The partition's own-writes record if this transaction wrote to it (and did not roll that back). */
QueenOwnPartition *
queen_dedup_own(const pg_uuid_t *pid)
{
	QueenOwnPartition *o;

	if (queen_own == NULL)
		return NULL;
	o = hash_search(queen_own, pid, HASH_FIND, NULL);
	return (o != NULL && o->live > 0) ? o : NULL;
}

QueenOwnAlloc *
queen_dedup_own_alloc(QueenOwnPartition *o)
{
	return &o->alloc;
}

static void
queen_dedup_own_mark_dirty(QueenOwnPartition *o)
{
	o->alloc.dirty = true;
	queen_own_dirty = true;
}

/*
 * A write whose offsets the row does not have yet.  The row is written
 * later as the user who pushed (a SECURITY DEFINER function, SET ROLE),
 * not as whoever commits.
 */
void
queen_dedup_own_defer(QueenOwnPartition *o)
{
	o->alloc.deferred = true;
	GetUserIdAndSecContext(&o->alloc.userid, &o->alloc.sec_context);
	queen_dedup_own_mark_dirty(o);
}

bool
queen_dedup_own_any_dirty(void)
{
	return queen_own_dirty;
}

/*
 * The partitions whose row is behind what this transaction allocated, in a
 * palloc'd array (in CurrentMemoryContext); they are no longer dirty (the
 * caller writes them, or the transaction fails).  Each one's partition id
 * is queen_dedup_own_pid's.  Returns how many.
 */
int
queen_dedup_own_dirty(QueenOwnAlloc ***dirty)
{
	HASH_SEQ_STATUS seq;
	QueenOwnPartition *o;
	int			n = 0;
	long		max;

	if (queen_own == NULL || !queen_own_dirty)
		return 0;
	queen_own_dirty = false;
	max = hash_get_num_entries(queen_own);
	*dirty = palloc(sizeof(QueenOwnAlloc *) * Max(max, 1));
	hash_seq_init(&seq, queen_own);
	while ((o = hash_seq_search(&seq)) != NULL)
	{
		if (o->live <= 0 || !o->alloc.dirty)
			continue;
		(*dirty)[n++] = &o->alloc;
		o->alloc.dirty = false;
	}
	return n;
}

const pg_uuid_t *
queen_dedup_own_pid(const QueenOwnAlloc *a)
{
	return &((const QueenOwnPartition *) ((const char *) a - offsetof(QueenOwnPartition, alloc)))->pid;
}

/*
 * Make every partition this transaction holds describe itself again from
 * its row; with unlock, lock and update its row again too.
 */
static void
queen_dedup_own_forget(bool unlock)
{
	HASH_SEQ_STATUS seq;
	QueenOwnPartition *o;

	if (queen_own == NULL)
		return;
	hash_seq_init(&seq, queen_own);
	while ((o = hash_seq_search(&seq)) != NULL)
	{
		if (unlock)
		{
			if (o->alloc.unlocked_in == InvalidSubTransactionId)
			{
				o->alloc.unlocked_in = GetCurrentSubTransactionId();
				o->alloc.was_locked = o->alloc.locked;
				o->alloc.was_described = o->alloc.described;
			}
			o->alloc.locked = false;
		}
		o->alloc.described = false;
	}
}

/*
 * Forget which rows this transaction holds (a queue deletion may have
 * removed them): later pushes lock and update their rows again.
 */
void
queen_dedup_own_unlock_all(void)
{
	queen_dedup_own_forget(true);
}

/*
 * A queue's options changed in this transaction: later pushes read the
 * dedup window from the row again instead of the one remembered.
 */
void
queen_dedup_own_forget_windows(void)
{
	queen_dedup_own_forget(false);
}

/*
 * Match the incoming hashes against what this transaction wrote to the
 * partition.  Returns the offset up to which the caller must still read the
 * table: o's floor when o's index covers everything up to last_offset, else
 * last_offset (nothing was matched).
 */
int64
queen_dedup_own_match(const QueenOwnPartition *o, int64 last_offset,
					  const uint8 *incoming, int count, int64 from,
					  TimestampTz cutoff, QueenDedupHits *hits)
{
	if (o == NULL || !o->indexed || o->upto != last_offset)
		return last_offset;
	queen_slots_match(&o->own, incoming, count, from, cutoff, hits);
	return o->floor;
}

static void
queen_own_unindex(QueenOwnPartition *o)
{
	if (o->own.slots != NULL)
		pfree(o->own.slots);
	o->own.slots = NULL;
	o->own.capacity = 0;
	o->own.used = 0;
	o->indexed = false;
}

/* Add a write to its partition's index, or drop the index if it cannot be. */
static void
queen_own_index(QueenOwnPartition *o, const QueenPendingWrite *w)
{
	bool		too_big;
	uint32		newcap;

	if (o->indexed && o->upto != w->base_offset - 1)
		queen_own_unindex(o);	/* not contiguous: cannot vouch for the gap */
	if (!o->indexed)
	{
		o->floor = w->base_offset - 1;
		o->upto = o->floor;
		o->own.base = w->base_offset;
		o->indexed = true;
	}
	newcap = queen_slots_needed(&o->own, (uint64) o->own.used + w->count, &too_big);
	if (too_big ||
		(newcap > 0 && !queen_slots_rebuild(&o->own, newcap, DT_NOBEGIN, TopTransactionContext)) ||
		!queen_slots_add(&o->own, w->hashes, w->count, w->base_offset, w->created_at))
	{
		queen_own_unindex(o);
		return;
	}
	o->upto = w->base_offset + w->count - 1;
}

/* Remember a segment this transaction wrote, to absorb it if we commit. */
void
queen_dedup_cache_remember(const pg_uuid_t *pid, int64 base, int32 count,
						   TimestampTz created_at, const uint8 *hashes)
{
	MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
	QueenPendingWrite *w = palloc(sizeof(QueenPendingWrite));
	QueenOwnPartition *o;
	bool		found;

	w->pid = *pid;
	w->base_offset = base;
	w->count = count;
	w->created_at = created_at;
	w->subid = GetCurrentSubTransactionId();
	w->hashes = palloc((Size) count * QUEEN_HASH_LEN);
	memcpy(w->hashes, hashes, (Size) count * QUEEN_HASH_LEN);
	dlist_push_tail(&queen_pending, &w->node);

	if (queen_own == NULL)
	{
		queen_own = queen_hash_create("queen own writes", sizeof(pg_uuid_t),
									  sizeof(QueenOwnPartition), 16, TopTransactionContext);
	}
	o = hash_search(queen_own, pid, HASH_ENTER, &found);
	if (!found)
	{
		o->live = 0;
		o->indexed = false;
		o->own.capacity = 0;
		o->own.used = 0;
		o->own.slots = NULL;
		memset(&o->alloc, 0, sizeof(o->alloc));
	}
	o->live++;
	o->alloc.last = base + count - 1;
	queen_own_index(o, w);
	MemoryContextSwitchTo(old);
}

/*
 * Absorb committed writes that continue their entry exactly, oldest first,
 * in one pass; never raises.
 */
static void
queen_dedup_absorb(void)
{
	dlist_iter	iter;

	dlist_foreach(iter, &queen_pending)
	{
		QueenPendingWrite *w = dlist_container(QueenPendingWrite, node, iter.cur);

		queen_dedup_cache_absorb(&w->pid, w->base_offset, w->count, w->created_at,
								 w->hashes);
	}
}

/* The transaction is over: what pointed into its memory is forgotten. */
static void
queen_dedup_forget_pending(void)
{
	dlist_init(&queen_pending);
	queen_own = NULL;
	queen_own_dirty = false;
}

static void
queen_dedup_xact_callback(XactEvent event, void *arg)
{
	(void) arg;
	switch (event)
	{
		case XACT_EVENT_COMMIT:
			queen_dedup_absorb();
			queen_dedup_forget_pending();
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PREPARE:	/* committed later, maybe elsewhere: never ours to absorb */
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PARALLEL_ABORT:
			queen_dedup_forget_pending();
			break;
		default:
			break;
	}
}

/*
 * A subtransaction's writes are always the newest pending ones (its
 * children ended before it and handed theirs up), so only that suffix of
 * the list is visited: many subtransactions cost linear time, not
 * quadratic.
 */
static void
queen_dedup_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
							 SubTransactionId parentSubid, void *arg)
{
	dlist_node *cur;
	dlist_node *prev;

	(void) arg;
	if (event != SUBXACT_EVENT_COMMIT_SUB && event != SUBXACT_EVENT_ABORT_SUB)
		return;
	for (cur = dlist_is_empty(&queen_pending) ? NULL : dlist_tail_node(&queen_pending);
		 cur != NULL && cur != &queen_pending.head; cur = prev)
	{
		QueenPendingWrite *w = dlist_container(QueenPendingWrite, node, cur);

		prev = cur->prev;
		if (w->subid != mySubid)
			break;
		if (event == SUBXACT_EVENT_COMMIT_SUB)
		{
			w->subid = parentSubid;
			continue;
		}
		/* rolled back: the rows are gone, and maybe the row lock with them */
		if (queen_own != NULL)
		{
			QueenOwnPartition *o = hash_search(queen_own, &w->pid, HASH_FIND, NULL);

			if (o != NULL)
			{
				o->live--;
				queen_own_unindex(o);
				/* a partition's writes ascend in list order: the earliest removed wins */
				o->alloc.last = w->base_offset - 1;
			}
		}
		dlist_delete(cur);
	}

	/*
	 * The subtransaction may also have written some rows' last_offset (a
	 * flush before a locking push or a queue deletion) and taken that back:
	 * every row that had deferred writes and is still ours is rewritten
	 * before commit.  A queue deletion rolled back gives its rows back
	 * (subtransaction ids grow, so ours and our children's are >= mySubid).
	 * A partition with no write left lost its first one, the one that
	 * locked and updated its row, so the row is as before and no longer
	 * ours.
	 */
	if (event == SUBXACT_EVENT_ABORT_SUB && queen_own != NULL)
	{
		HASH_SEQ_STATUS seq;
		QueenOwnPartition *o;

		hash_seq_init(&seq, queen_own);
		while ((o = hash_seq_search(&seq)) != NULL)
		{
			QueenOwnAlloc *a = &o->alloc;

			if (o->live <= 0)
			{
				memset(a, 0, sizeof(*a));
				continue;
			}
			if (a->unlocked_in != InvalidSubTransactionId && a->unlocked_in >= mySubid)
			{
				a->locked = a->was_locked;
				a->described = a->was_described;
				a->unlocked_in = InvalidSubTransactionId;
			}
			if (a->deferred && a->locked)
				queen_dedup_own_mark_dirty(o);
		}
	}
}

void
queen_dedup_cache_init(void)
{
	RegisterXactCallback(queen_dedup_xact_callback, NULL);
	RegisterSubXactCallback(queen_dedup_subxact_callback, NULL);
}
