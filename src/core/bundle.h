/*-------------------------------------------------------------------------
 *
 * bundle.h
 *	  The bundle engine's contract (bundle.c): the frames of one partition
 *	  offered to a bundle and the verdicts written back, and layer-1
 *	  grouping of a request's items before that.
 *
 * Both doors and the drain speak it: queen.push (push.c), the broker's
 * shards (shard.c) and the drain (drain_file.c), so a duplicate means the
 * same thing whichever way a message came in.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_BUNDLE_H
#define QUEEN_BUNDLE_H

#include "queen.h"

/* One frame offered to a bundle, and its verdict. */
typedef struct QueenBundleFrame
{
	/* input */
	const char *packed;			/* the frame encoded as stored */
	uint32		packed_len;
	uint8		hash[QUEEN_HASH_LEN];	/* XXH3-128 of its transactionId */
	pg_uuid_t	message_id;		/* the minted id; a duplicate's becomes the original's */

	/* output */
	QueenSegmentStatus status;
	int			leader;			/* layer-2 follower of this frame index, or -1 */
	int64		offset;			/* queued: its own; duplicate: the original's */
	TimestampTz created_at;
	bool		created_known;
} QueenBundleFrame;

/* The frames for one (tenant, queue, partition). */
typedef struct QueenBundleGroup
{
	const char *queue;
	const char *partition;
	pg_uuid_t	tenant;
	QueenBundleFrame *frames;
	int			nframes;

	/* output */
	pg_uuid_t	partition_id;
	int			nsegments;		/* segments written for this group (0 or 1) */
	const char *refused;		/* why its frames are QUEEN_SEGMENT_REFUSED, or NULL */

	/* private to bundle.c */
	int		   *pending;
	int			npending;
	int64		verified;
	bool		seal;			/* its payloads go sealed (the queue is encrypted) */
	int			reseals;
} QueenBundleGroup;

/*
 * What the one decode of a frame keeps for the bundle it will go to, so
 * that nothing decodes it again: its length (a group's frames lie end to
 * end, so lengths are the boundaries), its transactionId's hash and its id.
 */
typedef struct QueenFrameMark
{
	uint32		len;
	uint8		hash[QUEEN_HASH_LEN];
	pg_uuid_t	message_id;
} QueenFrameMark;

extern void queen_bundle_push(QueenBundleGroup *groups, int ngroups);
extern void queen_bundle_raise_refused(const QueenBundleGroup *groups, int ngroups);
extern const char *queen_frames_mark(const char *frames, Size len, int nframes,
									 QueenFrameMark *marks, Size *used);
extern void queen_bundle_group_marked(QueenBundleGroup *bg, const pg_uuid_t *tenant,
									  const char *queue, const char *partition,
									  const char *frames, const QueenFrameMark *marks,
									  int nframes);
extern void queen_bundle_group_init(QueenBundleGroup *bg, const pg_uuid_t *tenant,
									const char *queue, const char *partition,
									const char *frames, Size len, int nframes);

/* What identifies an item of a push request for layer-1 dedup. */
typedef struct QueenItemKey
{
	const char *queue;
	const char *partition;
	const char *txn;
} QueenItemKey;

extern int	queen_group_items(const QueenItemKey *keys, int n, int *leader,
							  int ***members, int **nmembers);

#endif							/* QUEEN_BUNDLE_H */
