/*-------------------------------------------------------------------------
 *
 * shard_groups.h
 *	  A fusion shard's accumulating groups (shard_groups.c), as the shard's
 *	  receiving and bundling (shard.c) see them.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_SHARD_GROUPS_H
#define QUEEN_SHARD_GROUPS_H

#include "broker.h"
#include "bundle.h"
#include "wire.h"

#include "lib/ilist.h"

/* One request's share of a group: which frames are its. */
typedef struct QueenContributor
{
	int			listener;
	uint64		request;
	uint32		group;			/* the request's group index */
	int			first;			/* first frame in the group's packed buffer */
	int			count;
} QueenContributor;

/* Hash key: tenant (16 bytes) + queue + 0x1F + partition. */
typedef struct QueenGroupKey
{
	const char *bytes;
	uint32		len;
} QueenGroupKey;

typedef struct QueenShardGroup
{
	QueenGroupKey key;			/* first: dynahash compares it */
	pg_uuid_t	tenant;
	char	   *queue;
	char	   *partition;
	StringInfoData packed;		/* frames accumulated since the last flush */
	QueenFrameMark *marks;		/* each one's bounds, hash and id, from arrival */
	int			maxmarks;
	int			nframes;
	QueenContributor *contrib;
	int			ncontrib;
	int			maxcontrib;
	TimestampTz first_arrival;
	TimestampTz last_arrival;
	bool		ready;
	dlist_node	ready_node;
} QueenShardGroup;

/* Groups with frames waiting, oldest first, and the bytes they hold. */
extern dlist_head queen_groups_ready;
extern Size queen_backlog_bytes;

extern void queen_groups_create(MemoryContext cxt);
extern QueenShardGroup *queen_group_lookup(const pg_uuid_t *tenant, const char *queue,
										   uint16 qlen, const char *partition, uint16 plen);
extern QueenFrameMark *queen_group_marks_room(QueenShardGroup *g, int n);
extern void queen_group_add(QueenShardGroup *g, int listener, const QueenWirePush *m,
							const char *frames, Size frames_len);
extern void queen_group_reset(QueenShardGroup *g);
extern void queen_groups_sweep(TimestampTz now);
extern int	queen_groups_count(void);

#endif							/* QUEEN_SHARD_GROUPS_H */
