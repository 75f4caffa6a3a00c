/*-------------------------------------------------------------------------
 *
 * push_items.h
 *	  Pushing items from inside the database (push_items.c): what the SQL
 *	  door and a dead letter's replay hand over, and the verdicts they get.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_PUSH_ITEMS_H
#define QUEEN_PUSH_ITEMS_H

#include "queen.h"

/* One item of a push call. */
typedef struct QueenPushItem
{
	/* input; strings NUL-terminated */
	const char *queue;
	const char *partition;
	const char *txn;			/* NULL or empty: minted */
	const char *payload;
	size_t		payload_len;

	/* decided here */
	pg_uuid_t	message_id;		/* minted; a duplicate's becomes the original's */
	uint8		hash[QUEEN_HASH_LEN];
	int			leader;			/* item whose verdict this one copies, or -1 */
	QueenSegmentStatus status;	/* the verdict of the frame it became */
	int64		log_offset;		/* -1: unknown */
	TimestampTz created_at;
	bool		created_known;
} QueenPushItem;

/*
 * Push items as one bundle in the current transaction and fill in every
 * item's verdict; errors name items[i] when from_array.
 */
extern void queen_push_items_run(QueenPushItem *items, int n, const pg_uuid_t *tenant,
								 bool from_array);

#endif							/* QUEEN_PUSH_ITEMS_H */
