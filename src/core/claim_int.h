/*-------------------------------------------------------------------------
 *
 * claim_int.h
 *	  What the claim's two files share: claim.c claims one partition and
 *	  builds the result; claim_scan.c finds the partitions a wildcard or
 *	  namespace/task pop should try, and seeds a consumer group's cursors.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_CLAIM_INT_H
#define QUEEN_CLAIM_INT_H

#include "consume.h"

#include "executor/spi.h"

/* One partition the claim may take, with its queue's knobs. */
typedef struct QueenClaimTarget
{
	pg_uuid_t	pid;
	pg_uuid_t	queue_id;
	char	   *queue;
	char	   *partition;
	int64		last_offset;	/* in the snapshot that found it */
	int32		delayed;		/* delayed_processing, seconds */
	int32		window;			/* window_buffer, seconds */
	int32		lease_time;		/* the queue's lease_time, seconds */

	/*
	 * Where a missing cursor starts (first contact): the group's remembered
	 * subscription moment, DT_NOBEGIN for everything retained.  Unknown
	 * until looked up (the single-partition route looks only when needed).
	 */
	bool		sub_known;
	TimestampTz sub_from;
} QueenClaimTarget;

/* One pop in progress. */
typedef struct QueenClaim
{
	QueenPopRequest *req;
	QueenPopResult *res;
	MemoryContext res_cxt;		/* the caller's: everything returned lives here */
	TimestampTz now;			/* one clock for the whole pop */
	int32		budget;			/* messages still to deliver */
	int64		bytes_left;		/* of queen.pop_max_bytes */
	bool		bytes_spent;	/* the byte budget stopped the pop */
	int			allocated;		/* slots in res->partitions */
} QueenClaim;

/* A statement of the claim: its text and argument types, prepared once. */
typedef struct QueenClaimStatement
{
	const char *sql;
	int			nargs;
	Oid			argtypes[8];
	bool		custom;			/* planned for each call's values */
} QueenClaimStatement;

/* claim.c */
extern uint64 queen_claim_exec(SPIPlanPtr *plan, const QueenClaimStatement *st,
							   Datum *values, const char *nulls, int expected);
extern int32 queen_claim_partition(QueenClaim *c, QueenClaimTarget *t);
extern void queen_claim_retry_hint(QueenClaim *c, TimestampTz when);
extern bool queen_claim_is_queue_mode(const QueenClaim *c);

/* claim_scan.c */
extern bool queen_claim_subscription(QueenClaim *c, const pg_uuid_t *queue_id,
									 TimestampTz *sub_from);
extern bool queen_claim_queue_upsert(QueenClaim *c, pg_uuid_t *queue_id);
extern void queen_claim_first_contact(const pg_uuid_t *pid, const char *group,
									  TimestampTz sub_from);
extern void queen_claim_wildcard(QueenClaim *c, const pg_uuid_t *queue_ids,
								 int nqueues);
extern void queen_claim_discover(QueenClaim *c);

#endif							/* QUEEN_CLAIM_INT_H */
