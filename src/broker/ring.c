/*-------------------------------------------------------------------------
 *
 * ring.c
 *	  Single-producer single-consumer byte rings in shared memory, moving
 *	  length-framed messages (their contents are wire.c's).
 *
 * Why not shm_mq: a shm_mq cannot be reused once either side detaches, and
 * a broker worker that restarts (an ERROR escaping, exit 1) must be able to
 * pick its queues up again without restarting the cluster.  These rings are
 * reset by the restarting side bumping an epoch; the other side sees the
 * new epoch, drops whatever half-moved message it had and carries on.
 *
 * Neither side ever blocks here.  A writer queues messages locally and
 * moves as many bytes as fit; a reader takes what is there and reassembles
 * messages across calls.  Both wake the other side's latch when they made
 * progress it may be waiting for, so a message of any size streams through
 * a ring of fixed size.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "broker.h"

#include "nodes/pg_list.h"
#include "utils/memutils.h"

Size
queen_ring_shmem_size(Size size)
{
	return MAXALIGN(offsetof(QueenRing, data) + size);
}

void
queen_ring_init(QueenRing *ring, Size size)
{
	SpinLockInit(&ring->mutex);
	ring->epoch = 1;
	ring->written = 0;
	ring->read = 0;
	ring->writer_waiting = false;
	ring->size = size;
}

/* Empty the ring and start a new epoch; called by a side that (re)starts. */
void
queen_ring_reset(QueenRing *ring)
{
	SpinLockAcquire(&ring->mutex);
	ring->epoch++;
	ring->written = 0;
	ring->read = 0;
	ring->writer_waiting = false;
	SpinLockRelease(&ring->mutex);
}

static uint32
queen_ring_epoch(QueenRing *ring)
{
	uint32		epoch;

	SpinLockAcquire(&ring->mutex);
	epoch = ring->epoch;
	SpinLockRelease(&ring->mutex);
	return epoch;
}

/*
 * Both positions, read under the lock while the ring is still at our epoch
 * (false once it is not).  A writer that finds no room marks itself
 * waiting in the same critical section, so the reader that makes room next
 * cannot miss it.
 */
static bool
queen_ring_positions(QueenRing *ring, uint32 epoch, bool writer,
					 uint64 *written, uint64 *read)
{
	SpinLockAcquire(&ring->mutex);
	if (ring->epoch != epoch)
	{
		SpinLockRelease(&ring->mutex);
		return false;
	}
	*written = ring->written;
	*read = ring->read;
	if (writer && *written - *read == ring->size)
		ring->writer_waiting = true;
	SpinLockRelease(&ring->mutex);
	return true;
}

/*
 * Copy n bytes between the ring at position pos and a flat buffer, in two
 * pieces when they wrap past the end of the ring's data.
 */
static void
queen_ring_copy(QueenRing *ring, uint64 pos, char *flat, Size n, bool to_ring)
{
	Size		at = (Size) (pos % ring->size);
	Size		first = Min(n, ring->size - at);

	if (to_ring)
	{
		memcpy(ring->data + at, flat, first);
		memcpy(ring->data, flat + first, n - first);
	}
	else
	{
		memcpy(flat, ring->data + at, first);
		memcpy(flat + first, ring->data, n - first);
	}
}

/*
 * Copy up to len bytes into the ring.  Returns the count written, or -1 if
 * the ring's epoch is not ours any more.
 */
static int64
queen_ring_put(QueenRing *ring, uint32 epoch, const char *src, Size len)
{
	uint64		written;
	uint64		read;
	Size		n;

	if (!queen_ring_positions(ring, epoch, true, &written, &read))
		return -1;
	n = Min(ring->size - (Size) (written - read), len);
	if (n == 0)
		return 0;
	queen_ring_copy(ring, written, unconstify(char *, src), n, true);

	SpinLockAcquire(&ring->mutex);
	if (ring->epoch != epoch)
	{
		SpinLockRelease(&ring->mutex);
		return -1;
	}
	ring->written = written + n;
	SpinLockRelease(&ring->mutex);
	return (int64) n;
}

/*
 * Copy up to len bytes out of the ring.  Returns the count read, or -1 if
 * the epoch changed.  *wake_writer tells the caller the writer wants room.
 */
static int64
queen_ring_get(QueenRing *ring, uint32 epoch, char *dst, Size len,
			   bool *wake_writer)
{
	uint64		written;
	uint64		read;
	Size		n;

	if (!queen_ring_positions(ring, epoch, false, &written, &read))
		return -1;
	n = Min((Size) (written - read), len);
	if (n == 0)
		return 0;
	queen_ring_copy(ring, read, dst, n, false);

	SpinLockAcquire(&ring->mutex);
	if (ring->epoch != epoch)
	{
		SpinLockRelease(&ring->mutex);
		return -1;
	}
	ring->read = read + n;
	if (ring->writer_waiting)
	{
		ring->writer_waiting = false;
		*wake_writer = true;
	}
	SpinLockRelease(&ring->mutex);
	return (int64) n;
}

/* ----------------------------------------------------------------
 *		Writer side
 * ----------------------------------------------------------------
 */

void
queen_ring_writer_init(QueenRingWriter *w, QueenRing *ring, MemoryContext cxt,
					   bool resend_on_reset)
{
	w->ring = ring;
	w->cxt = cxt;
	w->resend_on_reset = resend_on_reset;
	w->epoch = queen_ring_epoch(ring);
	w->queue = NIL;
	w->head_done = 0;
}

/*
 * Queue a message (its bytes after the length prefix).  The writer takes
 * ownership of msg, which must live in the writer's context or longer; it
 * is freed once written.  The list is kept in the writer's context, not
 * the caller's, since callers send from short-lived contexts.
 */
void
queen_ring_send(QueenRingWriter *w, StringInfo msg)
{
	MemoryContext old = MemoryContextSwitchTo(w->cxt);

	w->queue = lappend(w->queue, msg);
	MemoryContextSwitchTo(old);
}

/* Drop every queued message (the peer restarted). */
void
queen_ring_writer_discard(QueenRingWriter *w)
{
	ListCell   *lc;

	foreach(lc, w->queue)
	{
		StringInfo	msg = (StringInfo) lfirst(lc);

		pfree(msg->data);
		pfree(msg);
	}
	list_free(w->queue);
	w->queue = NIL;
	w->head_done = 0;
	w->epoch = queen_ring_epoch(w->ring);
}

/*
 * Move as many queued bytes into the ring as fit.  Returns true if it moved
 * anything (the caller wakes the reader).  If the ring was reset under us
 * (its reader restarted) *epoch_changed is set and the queue is either
 * dropped or, with resend_on_reset, sent again from its first byte in the
 * new epoch: a shard's answers must reach a listener that restarted after
 * the shard began writing to it (the listener ignores answers to requests
 * it does not know), while a listener's submissions to a restarted shard
 * are failed by the listener instead.
 */
bool
queen_ring_flush(QueenRingWriter *w, bool *epoch_changed)
{
	bool		moved = false;

	*epoch_changed = false;
	while (w->queue != NIL)
	{
		StringInfo	msg = (StringInfo) linitial(w->queue);
		Size		total = (Size) msg->len + 4;
		int64		n;

		if (w->head_done < 4)
		{
			uint32		len = (uint32) msg->len;

			n = queen_ring_put(w->ring, w->epoch,
							   ((const char *) &len) + w->head_done,
							   4 - w->head_done);
		}
		else
			n = queen_ring_put(w->ring, w->epoch,
							   msg->data + (w->head_done - 4),
							   total - w->head_done);
		if (n < 0)
		{
			*epoch_changed = true;
			if (!w->resend_on_reset)
			{
				queen_ring_writer_discard(w);
				return moved;
			}
			/* the ring was emptied: the head message starts over */
			w->head_done = 0;
			w->epoch = queen_ring_epoch(w->ring);
			continue;
		}
		if (n == 0)
			break;
		moved = true;
		w->head_done += (Size) n;
		if (w->head_done == total)
		{
			w->queue = list_delete_first(w->queue);
			pfree(msg->data);
			pfree(msg);
			w->head_done = 0;
		}
	}
	return moved;
}

/* ----------------------------------------------------------------
 *		Reader side
 * ----------------------------------------------------------------
 */

void
queen_ring_reader_init(QueenRingReader *r, QueenRing *ring, MemoryContext cxt)
{
	MemoryContext old = MemoryContextSwitchTo(cxt);

	r->ring = ring;
	r->epoch = queen_ring_epoch(ring);
	r->cxt = cxt;
	r->lenhave = 0;
	r->inmsg = false;
	r->msglen = 0;
	r->wake_writer = false;
	initStringInfo(&r->msg);
	MemoryContextSwitchTo(old);
}

/*
 * Return the next complete message, or NULL if none is complete yet.  The
 * returned StringInfo belongs to the reader and is valid until the next
 * call.  Sets *epoch_changed (and drops any partial message) when the
 * writer's side was reset.  r->wake_writer is set when the writer was
 * waiting for the room just made; the caller wakes it and clears the flag.
 */
StringInfo
queen_ring_receive(QueenRingReader *r, bool *epoch_changed)
{
	int64		n;

	*epoch_changed = false;

	if (r->inmsg && r->msg.len == (int) r->msglen)
	{
		/* the previous call returned this message; start over */
		r->inmsg = false;
		r->lenhave = 0;
		resetStringInfo(&r->msg);
		if (r->msg.maxlen > 4 * 1024 * 1024)
		{
			/* one huge body must not pin its buffer for the process's life */
			MemoryContext old = MemoryContextSwitchTo(r->cxt);

			pfree(r->msg.data);
			initStringInfo(&r->msg);
			MemoryContextSwitchTo(old);
		}
	}

	for (;;)
	{
		if (!r->inmsg)
		{
			n = queen_ring_get(r->ring, r->epoch, r->lenbuf + r->lenhave,
							   4 - r->lenhave, &r->wake_writer);
			if (n < 0)
				goto reset;
			r->lenhave += (int) n;
			if (r->lenhave < 4)
				return NULL;
			memcpy(&r->msglen, r->lenbuf, 4);
			r->inmsg = true;
			resetStringInfo(&r->msg);
			if (r->msglen > MaxAllocSize - 1)
				elog(ERROR, "queen: ring message of %u bytes is too large", r->msglen);
			enlargeStringInfo(&r->msg, (int) r->msglen);
		}
		if ((uint32) r->msg.len < r->msglen)
		{
			n = queen_ring_get(r->ring, r->epoch, r->msg.data + r->msg.len,
							   r->msglen - r->msg.len, &r->wake_writer);
			if (n < 0)
				goto reset;
			r->msg.len += (int) n;
			r->msg.data[r->msg.len] = '\0';
			if ((uint32) r->msg.len < r->msglen)
				return NULL;
		}
		return &r->msg;
	}

reset:
	r->epoch = queen_ring_epoch(r->ring);
	r->inmsg = false;
	r->lenhave = 0;
	resetStringInfo(&r->msg);
	*epoch_changed = true;
	return NULL;
}
