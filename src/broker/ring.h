/*-------------------------------------------------------------------------
 *
 * ring.h
 *	  The single-producer single-consumer byte rings between listeners and
 *	  shards (ring.c): they move length-framed messages and nothing else;
 *	  what a message holds is wire.h's business.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_RING_H
#define QUEEN_RING_H

#include "lib/stringinfo.h"
#include "nodes/pg_list.h"
#include "storage/spin.h"

/*
 * A byte ring with one writer and one reader.  Positions count bytes ever
 * written and read; they and the epoch change under the spinlock, data is
 * copied outside it (the region between the positions belongs to exactly
 * one side).  A restarting worker resets the rings it owns by bumping the
 * epoch; the other side notices, drops any half-moved message and fails
 * what it had outstanding.
 */
typedef struct QueenRing
{
	slock_t		mutex;
	uint32		epoch;
	uint64		written;
	uint64		read;
	bool		writer_waiting;	/* writer found it full and wants a wake-up */
	Size		size;
	char		data[FLEXIBLE_ARRAY_MEMBER];
} QueenRing;

/* Messages are a u32 length followed by that many bytes. */
typedef struct QueenRingWriter
{
	QueenRing  *ring;
	uint32		epoch;			/* the epoch our queued bytes belong to */
	MemoryContext cxt;			/* where the queue's list lives */
	bool		resend_on_reset;	/* reader restarted: resend, not drop */
	List	   *queue;			/* StringInfo messages not yet fully written */
	Size		head_done;		/* bytes of the first queued message written */
} QueenRingWriter;

typedef struct QueenRingReader
{
	QueenRing  *ring;
	uint32		epoch;
	MemoryContext cxt;
	char		lenbuf[4];
	int			lenhave;
	StringInfoData msg;			/* message being reassembled */
	uint32		msglen;
	bool		inmsg;
	bool		wake_writer;	/* we made room the writer was waiting for */
} QueenRingReader;

extern Size queen_ring_shmem_size(Size size);
extern void queen_ring_init(QueenRing *ring, Size size);
extern void queen_ring_reset(QueenRing *ring);

extern void queen_ring_writer_init(QueenRingWriter *w, QueenRing *ring, MemoryContext cxt,
								   bool resend_on_reset);
extern void queen_ring_send(QueenRingWriter *w, StringInfo msg);
extern bool queen_ring_flush(QueenRingWriter *w, bool *epoch_changed);
extern void queen_ring_writer_discard(QueenRingWriter *w);

extern void queen_ring_reader_init(QueenRingReader *r, QueenRing *ring, MemoryContext cxt);
extern StringInfo queen_ring_receive(QueenRingReader *r, bool *epoch_changed);

#endif							/* QUEEN_RING_H */
