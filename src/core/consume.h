/*-------------------------------------------------------------------------
 *
 * consume.h
 *	  The consumption core: the claim (claim.c), the ack decision procedure
 *	  and dead-letter filing (ack.c), lease renewal, and the consumer-group
 *	  administration and dead-letter listing both doors offer
 *	  (consumer_admin.c).
 *
 * The SQL door (src/sql/pop_sql.c, ack_sql.c) calls these in the caller's
 * transaction; the broker calls the same functions from a worker's
 * transaction and renders their results as HTTP bodies.  Nothing here
 * knows about HTTP or JSON: requests come in as structs, results go out as
 * structs, and a door turns them into rows or bodies.
 *
 * Every entry point must run inside a transaction; each connects to SPI and
 * finishes it itself, and leaves its results in the memory context that was
 * current when it was called.  They raise (ereport ERROR) only for bad input
 * a caller could have checked (with an errcode), a damaged segment
 * (ERRCODE_DATA_CORRUPTED), or a failing database; everything a consumer
 * may legitimately meet (no such queue, nothing to deliver, a lease that
 * expired, an unknown transactionId) is a result, never an error.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_CONSUME_H
#define QUEEN_CONSUME_H

#include "queen.h"
#include "codec.h"

/* The reserved group of queue mode. */
#define QUEEN_QUEUE_MODE		"__QUEUE_MODE__"

/* A lease id is a UUID in text form (36 bytes and a NUL). */
#define QUEEN_LEASE_ID_LEN		36

/* Queen's defaults when a pop request says nothing. */
#define QUEEN_POP_DEFAULT_BATCH	200

/*
 * What a delivered message costs queen.pop_max_bytes beyond its strings and
 * the partition and group names: what the pop body spends on its keys, ids
 * and timestamps (render.c), rounded up.
 */
#define QUEEN_POP_MESSAGE_OVERHEAD	320
#define QUEEN_DEFAULT_LEASE		60
#define QUEEN_DEFAULT_RETRY_LIMIT 3

/* How a consumer group's cursors start at its first contact (4.2 step 3). */
typedef enum QueenSubMode
{
	QUEEN_SUB_ALL = 0,			/* everything retained */
	QUEEN_SUB_NEW,				/* only what arrives after first contact */
	QUEEN_SUB_TIMESTAMP			/* segments created at or after sub_from */
} QueenSubMode;

/*
 * One pop.  queue and partition name one partition; partition NULL means
 * any of the queue's partitions (the wildcard).  With queue NULL, namespace
 * and/or task select every matching queue of the tenant (the discovery
 * route); at least one of them is then non-NULL.
 */
typedef struct QueenPopRequest
{
	pg_uuid_t	tenant;
	const char *queue;
	const char *partition;
	const char *namespace_name;
	const char *task;
	const char *group;			/* QUEEN_QUEUE_MODE for queue mode; never NULL */
	int32		batch;			/* message budget over all partitions, >= 1 */
	int32		max_partitions; /* most partitions claimed; <= 0: no limit */
	int32		lease_seconds;	/* <= 0: each queue's lease_time */
	bool		auto_ack;		/* move the cursor now, no lease (at most once) */
	QueenSubMode sub_mode;		/* for a group's first contact; ignored in queue mode */
	TimestampTz sub_from;		/* with QUEEN_SUB_TIMESTAMP */

	/*
	 * Until when the caller asks again after an empty answer, at the
	 * answer's retry_at (a parked long-poll); 0: it does not.  Before then,
	 * a wildcard pop may leave a draw of its candidates for later.
	 */
	TimestampTz retry_until;

	/*
	 * A try of a SQL pop that waits (wait.c): it writes nothing it can do
	 * without, so that it can be rolled back when it delivers nothing; the
	 * wildcard's scan floor, when stale, is computed for this process
	 * instead of stored.
	 */
	bool		waiting;

	/*
	 * The lease id every claimed partition is leased under.  A caller may
	 * choose it (the broker does, so it can log it); an empty string makes
	 * queen_pop mint a UUIDv7.  With auto_ack the result's lease id is "".
	 */
	char		lease_id[QUEEN_LEASE_ID_LEN + 1];
} QueenPopRequest;

/* One delivered message; frame's pointers borrow from the result's memory. */
typedef struct QueenPopMessage
{
	int64		offset;
	QueenFrame	frame;
	TimestampTz created_at;		/* its segment's */
} QueenPopMessage;

/* The messages of one claimed partition, in offset order. */
typedef struct QueenPopPartition
{
	char	   *queue;
	char	   *partition;
	pg_uuid_t	partition_id;
	int32		delivery_attempt;	/* 1 on first delivery, +1 per lease expiry */
	TimestampTz lease_acquired_at;	/* 0 with auto_ack */
	TimestampTz lease_expires_at;	/* 0 with auto_ack */
	int			nmessages;
	QueenPopMessage *messages;
} QueenPopPartition;

typedef struct QueenPopResult
{
	char		lease_id[QUEEN_LEASE_ID_LEN + 1];	/* "" with auto_ack */
	int			npartitions;	/* in claim order */
	QueenPopPartition *partitions;
	int64		nmessages;		/* over all partitions */

	/*
	 * Nothing was delivered, but a partition had messages a live lease or a
	 * deferral (delayedProcessing, windowBuffer) held back: a parked
	 * long-poll should try again by then (0 when nothing is known).
	 */
	TimestampTz retry_at;

	/* Claimed partitions whose previous lease had expired (redeliveries). */
	int32		leases_expired;

	/*
	 * A namespace/task pop matched no queue at all: only a queue created or
	 * configured into its namespace can change that (a parked long-poll
	 * need not try again on every commit).
	 */
	bool		no_queue;

	/* A pop of one named partition found no such partition (yet). */
	bool		no_partition;
} QueenPopResult;

/*
 * The claim, in the caller's transaction.  A queue
 * that does not exist yet delivers nothing.  Pushes this transaction made
 * are flushed first, so they are visible to it.
 */
extern void queen_pop(QueenPopRequest *req, QueenPopResult *res);

/*
 * Start the leases a pop granted (in this transaction) again from now, plus
 * extra_usecs, each as long as it was: for a caller that is about to answer
 * a pop which took a while since its claim, and whose answer will take
 * extra_usecs to reach the client, so that the consumer gets the whole
 * lease from the moment it is answered.
 */
extern void queen_pop_restamp(const QueenPopRequest *req, QueenPopResult *res,
							  int64 extra_usecs);

/*
 * subscriptionMode / subscriptionFrom as 4.1 reads them, strictly: a mode of
 * all, new, new-only or timestamp (or none), a from of "now" (new) or an
 * ISO-8601 timestamp, which wins over the mode; timestamp needs a from.
 * Returns why not, naming the fields as the caller's door does, or NULL.
 * Either may be NULL.
 */
extern const char *queen_sub_mode_parse(const char *mode, const char *from,
										const char *mode_name, const char *from_name,
										QueenSubMode *out_mode, TimestampTz *out_from);

/* ----------------------------------------------------------------
 *		Ack (ack.c)
 * ----------------------------------------------------------------
 */
typedef enum QueenAckStatus
{
	QUEEN_ACK_COMPLETED = 0,
	QUEEN_ACK_FAILED,
	QUEEN_ACK_RETRY,
	QUEEN_ACK_DLQ
} QueenAckStatus;

/*
 * A lease id as stored: a UUID in any case, with or without hyphens, in the
 * canonical lower-case form pops hand out (palloc'd); anything else as is
 * (it matches no lease).  NULL stays NULL.
 */
extern const char *queen_lease_id_normal(const char *lease);

/* 5.1's normalisation: NULL and completed/success/acked/ok complete, ... */
extern QueenAckStatus queen_ack_status(const char *status, size_t len);
extern bool queen_ack_status_known(const char *status, size_t len);

/*
 * One acknowledgement and its verdict.  The caller fills the input; queen_ack
 * fills the output.  Strings are NUL-terminated and stay the caller's.
 */
typedef struct QueenAckItem
{
	/* input */
	pg_uuid_t	partition_id;
	const char *transaction_id;
	size_t		txn_len;
	QueenAckStatus status;
	const char *lease_id;		/* NULL or "": acknowledge without a lease */
	const char *error;			/* a nack's reason, or NULL */

	/*
	 * Release the lease even when this completes only part of the leased
	 * batch: the rest is delivered again at once, from the new cursor (a
	 * stream cycle's release_lease).
	 */
	bool		release_lease;

	/* output */
	bool		success;		/* the instruction was carried out */
	char	   *problem;		/* why not (or a DLQ filing's note); NULL */
	bool		lease_released;
	bool		dlq;			/* this item's message was filed as a dead letter */
	bool		noop;			/* already acknowledged: nothing to do */

	/*
	 * A noop whose lease was not the live one: already acknowledged, but
	 * not necessarily by this caller (its lease may have run out and
	 * another consumer acknowledged the message); why, or NULL.
	 */
	char	   *lease_problem;
	int64		offset;			/* the message's offset, -1 if unresolved or acked
								 * with its whole batch (5.2's fast path) */
} QueenAckItem;

/*
 * Acknowledge items of one consumer group, in the caller's transaction.
 * Items are grouped by (partition, lease id) and each group runs 5.4's
 * decision procedure once, in ascending (partition id, group) order, so two
 * callers acknowledging the same partitions cannot deadlock.  A group whose
 * head signal files a dead letter files it here, in the same transaction.
 * Returns how many leases were released (for the broker's wake-ups).
 */
extern int	queen_ack(const char *group, QueenAckItem *items, int nitems);

/*
 * A consumer row: the unit of every consumption lock.  The global lock
 * order takes them in ascending (partition id, group), after any partition
 * row (docs/ARCHITECTURE.md, "Global lock order").
 */
typedef struct QueenConsumerKey
{
	pg_uuid_t	partition_id;
	const char *group;
} QueenConsumerKey;

/*
 * Lock these consumer rows, and those of the live leases of these lease
 * ids, in the global order, waiting for each.  A transaction that will ack
 * or renew for several requests calls it first: every later lock of theirs
 * is then already held, so two such transactions (or one and a caller's
 * own ack) wait for each other instead of deadlocking.  Rows that do not
 * exist are skipped.
 */
extern void queen_lock_consumers(const QueenConsumerKey *keys, int nkeys,
								 const char *const *leases, int nleases);

/*
 * Renew every lease held under lease_id (5.5): expiry becomes
 * GREATEST(current, now + seconds), never shorter; seconds < 1 counts as 1.
 * Returns how many partitions were renewed and, if any, the earliest new
 * expiry among them.
 */
extern int	queen_renew_lease(const char *lease_id, int32 seconds,
							  TimestampTz *earliest);

/* The lease a (locked) consumer row holds now, or NULL (lease.c). */
extern char *queen_consumer_lease(const pg_uuid_t *partition, const char *group);

/* ----------------------------------------------------------------
 *		Consumer groups (consumer_admin.c)
 * ----------------------------------------------------------------
 */

/*
 * Forget a consumer group: its cursors and leases on every queue of the
 * tenant, or on one queue; with delete_metadata also its remembered
 * subscription.  Returns the number of cursors removed.
 */
extern int64 queen_delete_consumer_group(const pg_uuid_t *tenant,
										 const char *group, const char *queue,
										 bool delete_metadata);

/*
 * Dead letters of one queue (GET /api/v1/dlq), newest first: total is how
 * many match the filter, entries the page limit/offset selects.
 */
typedef struct QueenDlqFilter
{
	pg_uuid_t	tenant;
	const char *queue;			/* required */
	const char *group;			/* NULL: every group */
	const char *partition;		/* NULL: every partition */
	TimestampTz from;			/* failed_at >= from; DT_NOBEGIN: no bound */
	TimestampTz to;				/* failed_at <= to; DT_NOEND: no bound */
	int32		limit;
	int64		offset;
} QueenDlqFilter;

typedef struct QueenDlqEntry
{
	pg_uuid_t	id;
	pg_uuid_t	message_id;
	pg_uuid_t	partition_id;
	char	   *partition;		/* NULL if the partition is gone */
	char	   *queue;
	char	   *namespace_name;	/* NULL if none */
	char	   *task;			/* NULL if none */
	char	   *consumer_group;
	char	   *transaction_id;
	char	   *error;			/* NULL if none */
	char	   *payload;		/* the snapshot as JSON text, NULL if none */
	int32		retry_count;
	int64		offset;
	TimestampTz created_at;		/* the message's */
	TimestampTz failed_at;
} QueenDlqEntry;

extern int64 queen_dlq_list(const QueenDlqFilter *filter,
							QueenDlqEntry **entries, int *nentries);

/* A (queue, consumer group) pair's lag (queen_consumer_lag_top). */
typedef struct QueenLagRow
{
	pg_uuid_t	tenant;
	char	   *queue;
	char	   *group;
	int64		partitions;
	int64		messages;
} QueenLagRow;

extern int	queen_consumer_lag_top(int limit, QueenLagRow **rows);

#endif							/* QUEEN_CONSUME_H */
