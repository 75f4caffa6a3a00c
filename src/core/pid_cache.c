/*-------------------------------------------------------------------------
 *
 * pid_cache.c
 *	  Which partition id a (tenant, queue, partition) name resolved to in
 *	  this process, so the write path can pre-lock by primary key.
 *
 * Resolving (tenant, queue, partition) names costs an existence count and
 * a pre-lock that joins on the names, with text comparisons in
 * log_partitions' unique index; in the steady state every partition of a
 * bundle exists and its id never changes.  So each process remembers the
 * ids its name pre-locks returned and, when every segment of a bundle has
 * one, pre-locks by primary key instead (log_lock.c).
 *
 * An entry is only a hint: the pre-lock by id proves that the row exists
 * before it takes the lock, and ids are never reused (gen_random_uuid) nor
 * moved to another name (nothing updates log_partitions.name, queue_id or
 * queues.name/tenant_id).  A stale entry (the partition was deleted, or its
 * creating transaction rolled back) makes the pre-lock lock nothing, and
 * the bundle takes the name path, which provisions and refreshes the entry.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "queen.h"
#include "codec.h"
#include "pid_cache.h"
#include "spi.h"

#include "utils/hsearch.h"
#include "utils/memutils.h"

#include <xxhash.h>

/* Past this many entries the cache starts over (about 100 bytes each). */
#define QUEEN_PID_CACHE_MAX		65536

typedef struct QueenPidEntry
{
	QueenPidKey key;			/* first: dynahash compares it */
	pg_uuid_t	pid;
	char	   *ident;			/* the hashed bytes, so a collision is a miss */
	Size		ident_len;
} QueenPidEntry;

static MemoryContext queen_pid_cxt = NULL;
static HTAB *queen_pid_cache = NULL;

/* The identity bytes of a segment's partition (validated names). */
char *
queen_pid_ident(const QueenSegment *seg, Size *len)
{
	char	   *buf = palloc(QUEEN_IDENT_MAX);

	*len = queen_partition_ident(buf, &seg->tenant, seg->queue, strlen(seg->queue),
								 seg->partition, strlen(seg->partition));
	return buf;
}

void
queen_pid_key(const char *ident, Size len, QueenPidKey *key)
{
	XXH128_canonical_t c;

	XXH128_canonicalFromHash(&c, XXH3_128bits(ident, len));
	memcpy(key->digest, c.digest, sizeof(key->digest));
}

static void
queen_pid_cache_reset(void)
{
	queen_pid_cache = queen_process_hash("queen pid cache", sizeof(QueenPidKey),
										 sizeof(QueenPidEntry), 1024, &queen_pid_cxt);
}

/* The cached id of a segment's partition, or false. */
bool
queen_pid_cache_get(const char *ident, Size len, const QueenPidKey *key,
					pg_uuid_t *pid)
{
	QueenPidEntry *e;

	if (queen_pid_cache == NULL)
		return false;
	e = hash_search(queen_pid_cache, key, HASH_FIND, NULL);
	if (e == NULL || e->ident_len != len || memcmp(e->ident, ident, len) != 0)
		return false;
	*pid = e->pid;
	return true;
}

void
queen_pid_cache_put(const char *ident, Size len, const QueenPidKey *key,
					const pg_uuid_t *pid)
{
	QueenPidEntry *e;
	bool		found;

	if (queen_pid_cache == NULL ||
		hash_get_num_entries(queen_pid_cache) >= QUEEN_PID_CACHE_MAX)
		queen_pid_cache_reset();
	e = hash_search(queen_pid_cache, key, HASH_ENTER, &found);
	if (found && e->ident_len == len && memcmp(e->ident, ident, len) == 0)
	{
		e->pid = *pid;
		return;
	}
	if (found)
		pfree(e->ident);
	/* fill the entry before it can be seen half-made (palloc may raise) */
	e->ident = NULL;
	e->ident_len = 0;
	e->pid = *pid;
	e->ident = MemoryContextAlloc(queen_pid_cxt, len);
	memcpy(e->ident, ident, len);
	e->ident_len = len;
}

void
queen_pid_cache_forget(const QueenPidKey *key)
{
	QueenPidEntry *e;

	if (queen_pid_cache == NULL)
		return;
	e = hash_search(queen_pid_cache, key, HASH_FIND, NULL);
	if (e == NULL)
		return;
	if (e->ident != NULL)
		pfree(e->ident);
	hash_search(queen_pid_cache, key, HASH_REMOVE, NULL);
}
