/*-------------------------------------------------------------------------
 *
 * ack_int.h
 *	  What the ack's files share: one (partition, lease id) group of items
 *	  and what 5.4 decides for it (ack.c), and the dead-letter filing of its
 *	  head (ack_dlq.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_ACK_INT_H
#define QUEEN_ACK_INT_H

#include "queen.h"
#include "codec.h"
#include "consume.h"

/* One (partition, lease id) group of items and what 5.4 decides for it. */
typedef struct QueenAckGroup
{
	const pg_uuid_t *pid;
	const char *group;
	const char *lease;			/* NULL: acknowledged without a lease */
	QueenAckItem **items;		/* in input order */
	int			n;
	uint8	   *hashes;			/* n * 16 */
	int64	   *eff;			/* offset in the span, -1 */
	int64	   *below;			/* an occurrence at or below the cursor, -1 */

	/* the consumer row as locked, and its queue's settings */
	const char *lease_problem;	/* the lease named is not the row's live one */
	int64		committed;
	int64		batch_end;		/* -1: no lease */
	int32		retry_count;
	int64		txns_start;
	int32		retry_limit;
	bool		dlq_enabled;
	bool		has_digest;		/* the pop recorded the batch's digest */
	pg_uuid_t	tenant;			/* the partition's queue, for the wake */
	char	   *queue;
	QueenTxnDigest digest;

	/* the decision */
	int64		sig_off;		/* the head signal's offset, -1: none */
	QueenAckStatus sig_kind;
	int64		new_committed;	/* the completed prefix below the signal */
	int64		final;			/* the cursor after the branch */
	bool		release;
	bool		reset_attempts;
	int32		new_retry_count;
	int64		filed;			/* offset filed as a dead letter, -1 */
	int64		dropped;		/* offset dropped (no DLQ), -1 */
	const char *filing_note;
} QueenAckGroup;

/* ack_dlq.c */
extern void queen_dlq_file(QueenAckGroup *g);
extern bool queen_ack_filed(const QueenAckGroup *g, int64 offset);

#endif							/* QUEEN_ACK_INT_H */
