/*-------------------------------------------------------------------------
 *
 * shard_answer.c
 *	  A fusion shard's answers to the listeners: verdicts for the groups of
 *	  their push requests and replies to their control requests, queued per
 *	  listener and moved into the verdict rings as they have room.
 *
 * A shard never waits for a listener: what does not fit in a verdict ring
 * stays queued here and goes at the next flush.  A listener that stopped
 * gets nothing: its clients' connections died with it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "shard.h"

#include "utils/memutils.h"

static QueenRingWriter queen_writers[QUEEN_MAX_LISTENERS];
static MemoryContext queen_answer_cxt;	/* queued answers, until sent */

/* The verdict rings this shard writes, one per listener. */
void
queen_shard_answers_init(int shard, MemoryContext cxt)
{
	int			l;

	queen_answer_cxt = cxt;
	for (l = 0; l < queen_broker->nlisteners; l++)
		queen_ring_writer_init(&queen_writers[l], queen_verdict_ring(shard, l), cxt, true);
}

/* Push queued answers into the verdict rings; wake listeners that got some. */
void
queen_shard_flush_answers(void)
{
	int			l;

	for (l = 0; l < queen_broker->nlisteners; l++)
	{
		bool		reset;

		if (queen_writers[l].queue == NIL)
			continue;
		if (queen_worker_state(&queen_broker->listeners[l]) == QUEEN_WORKER_STOPPED)
		{
			/* nobody to answer: its clients' connections died with it */
			queen_ring_writer_discard(&queen_writers[l]);
			continue;
		}
		if (queen_ring_flush(&queen_writers[l], &reset))
			queen_worker_wake(&queen_broker->listeners[l]);
	}
}

bool
queen_shard_answers_pending(void)
{
	int			l;

	for (l = 0; l < queen_broker->nlisteners; l++)
		if (queen_writers[l].queue != NIL)
			return true;
	return false;
}

void
queen_answer_send(int listener, StringInfo msg)
{
	queen_ring_send(&queen_writers[listener], msg);
}

/* A verdict for one group of a request; nframes per-frame verdicts follow. */
StringInfo
queen_verdict_new(uint64 request, uint32 group, QueenGroupOutcome outcome, uint32 nframes)
{
	StringInfo	msg = queen_wire_new(queen_answer_cxt);
	QueenWireVerdict v = {request, group, (uint8) outcome, nframes};

	queen_wire_put(msg, QUEEN_MSG_VERDICT, &v);
	return msg;
}

/* A whole group answered without per-frame verdicts. */
void
queen_answer_group(int listener, uint64 request, uint32 group, QueenGroupOutcome outcome)
{
	queen_answer_send(listener, queen_verdict_new(request, group, outcome, 0));
}

void
queen_answer_reply(int listener, uint64 request, int status, const char *body, Size len)
{
	StringInfo	msg = queen_wire_new(queen_answer_cxt);
	QueenWireReply m = {request, (uint16) status, {body, (uint32) len}};

	queen_wire_put(msg, QUEEN_MSG_REPLY, &m);
	queen_answer_send(listener, msg);
}
