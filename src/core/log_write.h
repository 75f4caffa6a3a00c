/*-------------------------------------------------------------------------
 *
 * log_write.h
 *	  The write path's entry points (log_write.c): a bundle of segments in,
 *	  a verdict per segment out.
 *
 * Everything that pushes (the SQL functions, queen.push, the broker's
 * shards through bundle.c) calls these, so there is exactly one place where
 * an offset is assigned.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_LOG_WRITE_H
#define QUEEN_LOG_WRITE_H

#include "queen.h"

/* A frame of an incoming segment that matched a stored transactionId. */
typedef struct QueenDup
{
	int32		index;			/* incoming frame index, 0-based */
	int64		offset;			/* absolute offset of the original */
} QueenDup;

/*
 * One segment of a bundle: what the caller supplies, then the verdict the
 * allocator writes back.  Strings are NUL-terminated; hashes and blob are
 * complete varlenas so they can go to SPI without a copy.
 */
/*
 * Whether a segment's payloads are sealed (crypto.c).  Raw frames from a
 * SQL caller are stored as given (ANY); the bundle engine says which, and
 * the allocator writes nothing where that differs from the queue's
 * encryptionEnabled (QUEEN_SEGMENT_RESEAL).
 */
typedef enum QueenSeal
{
	QUEEN_SEAL_ANY = 0,
	QUEEN_SEAL_PLAIN,
	QUEEN_SEAL_SEALED
} QueenSeal;

typedef struct QueenSegment
{
	/* input */
	const char *queue;
	const char *partition;
	pg_uuid_t	tenant;
	int32		msg_count;
	bytea	   *hashes;			/* 16 * msg_count bytes, frame order */
	int64		verified;		/* caller vouches: no hash at offset <= this */
	bytea	   *blob;			/* zstd(packed frames) */
	bool		window_set;		/* use window_in instead of the queue's */
	int32		window_in;
	bool		untrusted;		/* from a SQL caller: verify the blob completely */
	QueenSeal	seal;			/* what the frames' payloads are, if known */

	/* output */
	QueenSegmentStatus status;
	pg_uuid_t	partition_id;
	int32		window;			/* dedup window the queue had, seconds */
	bool		queue_encrypted;	/* the queue's encryptionEnabled, once locked */
	int64		base_offset;	/* queued: offset of frame 0 */
	TimestampTz created_at;		/* queued: the bundle's timestamp */
	int64		probed_upto;	/* duplicate: last_offset the probe covered */
	int			ndups;
	QueenDup   *dups;			/* duplicate: ascending by index */
} QueenSegment;

extern void queen_push_bundle(QueenSegment *segs, int nsegs);
extern void queen_push_one_resolved(QueenSegment *seg, const pg_uuid_t *pid);

/* Deferred offsets (log_deferred.c): the rows brought up to date. */
extern void queen_alloc_flush(void);

/* The oldest stamp a write not yet visible may have left (write_horizon.c). */
extern TimestampTz queen_write_horizon(void);

#endif							/* QUEEN_LOG_WRITE_H */
