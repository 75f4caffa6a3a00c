/*-------------------------------------------------------------------------
 *
 * shard_groups.c
 *	  A fusion shard's accumulating groups: one per (tenant, queue,
 *	  partition), holding the frames that arrived since its last flush,
 *	  their marks from the one decode on arrival, and which requests
 *	  contributed them; the ready list, oldest first; and the backlog the
 *	  shard bounds.  Private to the shard's process (shard.c), so no locks.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "shard_groups.h"
#include "codec.h"

#include "common/hashfn.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

/* Groups nobody pushed to for this long are forgotten. */
#define QUEEN_GROUP_IDLE_SECS			60

dlist_head	queen_groups_ready = DLIST_STATIC_INIT(queen_groups_ready);
Size		queen_backlog_bytes = 0;	/* frames accumulated, not yet flushed */

static HTAB *queen_groups;
static MemoryContext queen_groups_cxt;	/* the shard's: groups and their buffers */

static uint32
queen_group_hash(const void *key, Size keysize)
{
	const QueenGroupKey *k = (const QueenGroupKey *) key;

	(void) keysize;
	return hash_bytes((const unsigned char *) k->bytes, (int) k->len);
}

static int
queen_group_match(const void *key1, const void *key2, Size keysize)
{
	const QueenGroupKey *a = (const QueenGroupKey *) key1;
	const QueenGroupKey *b = (const QueenGroupKey *) key2;

	(void) keysize;
	if (a->len != b->len)
		return 1;
	return memcmp(a->bytes, b->bytes, a->len);
}

void
queen_groups_create(MemoryContext cxt)
{
	HASHCTL		ctl;

	queen_groups_cxt = cxt;
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(QueenGroupKey);
	ctl.entrysize = sizeof(QueenShardGroup);
	ctl.hash = queen_group_hash;
	ctl.match = queen_group_match;
	ctl.hcxt = queen_groups_cxt;
	queen_groups = hash_create("queen shard groups", 1024, &ctl,
							   HASH_ELEM | HASH_FUNCTION | HASH_COMPARE | HASH_CONTEXT);
}

QueenShardGroup *
queen_group_lookup(const pg_uuid_t *tenant, const char *queue, uint16 qlen,
				   const char *partition, uint16 plen)
{
	char		stack[QUEEN_IDENT_MAX];
	QueenGroupKey key;
	QueenShardGroup *g;
	bool		found;

	key.bytes = stack;
	key.len = queen_partition_ident(stack, tenant, queue, qlen, partition, plen);

	g = (QueenShardGroup *) hash_search(queen_groups, &key, HASH_ENTER, &found);
	if (!found)
	{
		MemoryContext old = MemoryContextSwitchTo(queen_groups_cxt);
		char	   *owned = palloc(key.len);

		memcpy(owned, stack, key.len);
		g->key.bytes = owned;
		g->key.len = key.len;
		g->tenant = *tenant;
		g->queue = pnstrdup(queue, qlen);
		g->partition = pnstrdup(partition, plen);
		initStringInfo(&g->packed);
		g->maxmarks = 64;
		g->marks = palloc(sizeof(QueenFrameMark) * g->maxmarks);
		g->nframes = 0;
		g->maxcontrib = 8;
		g->contrib = palloc(sizeof(QueenContributor) * g->maxcontrib);
		g->ncontrib = 0;
		g->ready = false;
		/* a group whose first submission is refused is swept like an idle one */
		g->first_arrival = g->last_arrival = GetCurrentTimestamp();
		MemoryContextSwitchTo(old);
	}
	return g;
}

/* Empty a group after its flush; a buffer that grew huge is given back. */
void
queen_group_reset(QueenShardGroup *g)
{
	queen_backlog_bytes -= Min(queen_backlog_bytes, (Size) g->packed.len);
	if (g->packed.maxlen > 1024 * 1024)
	{
		MemoryContext old = MemoryContextSwitchTo(queen_groups_cxt);

		pfree(g->packed.data);
		initStringInfo(&g->packed);
		MemoryContextSwitchTo(old);
	}
	else
		resetStringInfo(&g->packed);
	/* marks take 36 bytes a frame: given back past about 256 kB, as packed past 1 MB */
	if (g->maxmarks > 8192)
	{
		g->maxmarks = 64;
		g->marks = repalloc(g->marks, sizeof(QueenFrameMark) * g->maxmarks);
	}
	g->nframes = 0;
	g->ncontrib = 0;
}

/*
 * Room for n more marks after the group's frames, where the arriving
 * frames are marked in place: their one decode writes straight into the
 * group, and nothing counts them until queen_group_add.
 */
QueenFrameMark *
queen_group_marks_room(QueenShardGroup *g, int n)
{
	if (g->nframes + n > g->maxmarks)
	{
		while (g->nframes + n > g->maxmarks)
			g->maxmarks *= 2;
		g->marks = repalloc(g->marks, sizeof(QueenFrameMark) * g->maxmarks);
	}
	return g->marks + g->nframes;
}

/*
 * Append one request's checked frames to a group (their marks are already
 * in queen_group_marks_room), note the request as a contributor, and put
 * the group on the ready list.
 */
void
queen_group_add(QueenShardGroup *g, int listener, const QueenWirePush *m,
				const char *frames, Size frames_len)
{
	QueenContributor *ct;

	if (g->ncontrib == g->maxcontrib)
	{
		g->maxcontrib *= 2;
		g->contrib = repalloc(g->contrib, sizeof(QueenContributor) * g->maxcontrib);
	}
	ct = &g->contrib[g->ncontrib++];
	ct->listener = listener;
	ct->request = m->request;
	ct->group = m->group;
	ct->first = g->nframes;
	ct->count = (int) m->nframes;
	appendBinaryStringInfo(&g->packed, frames, (int) frames_len);
	queen_backlog_bytes += frames_len;
	g->last_arrival = GetCurrentTimestamp();
	if (g->nframes == 0)
		g->first_arrival = g->last_arrival;
	g->nframes += (int) m->nframes;
	if (!g->ready)
	{
		g->ready = true;
		dlist_push_tail(&queen_groups_ready, &g->ready_node);
	}
}

/* Forget groups nobody has pushed to for a while, so memory follows load. */
void
queen_groups_sweep(TimestampTz now)
{
	HASH_SEQ_STATUS seq;
	QueenShardGroup *g;

	hash_seq_init(&seq, queen_groups);
	while ((g = (QueenShardGroup *) hash_seq_search(&seq)) != NULL)
	{
		QueenGroupKey key;

		if (g->nframes > 0 || g->ready ||
			!TimestampDifferenceExceeds(g->last_arrival, now, QUEEN_GROUP_IDLE_SECS * 1000))
			continue;
		key = g->key;
		pfree(g->queue);
		pfree(g->partition);
		pfree(g->packed.data);
		pfree(g->marks);
		pfree(g->contrib);
		hash_search(queen_groups, &key, HASH_REMOVE, NULL);
		pfree((void *) key.bytes);
	}
}

int
queen_groups_count(void)
{
	return (int) hash_get_num_entries(queen_groups);
}
