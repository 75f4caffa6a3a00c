/*-------------------------------------------------------------------------
 *
 * log_write_int.h
 *	  What the write path's steps share: a segment resolved to its locked
 *	  partition row, and the steps that take one (the pre-lock by id, the
 *	  dedup probe, the row inserts, the transaction's deferred offsets).
 *
 * Private to the write path: log_write.c drives these steps in order; no
 * other part of Queen includes this header.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_LOG_WRITE_INT_H
#define QUEEN_LOG_WRITE_INT_H

#include "log_write.h"

#include "access/htup.h"
#include "access/tupdesc.h"
#include "nodes/parsenodes.h"
#include "storage/itemptr.h"
#include "utils/relcache.h"

/*
 * last_write_at is indexed: every write path rewrites it only when it is
 * older than this, so a partition's allocator update stays HOT (the
 * wildcard claim reads it with two minutes of slack).
 */
#define QUEEN_LAST_WRITE_QUANTUM_SECS	10
#define QUEEN_LAST_WRITE_QUANTUM_SQL \
	"interval '" CppAsString2(QUEEN_LAST_WRITE_QUANTUM_SECS) " seconds'"

/* A segment whose partition is resolved, as the write steps see it. */
typedef struct QueenTarget
{
	QueenSegment *seg;
	pg_uuid_t	pid;
	int32		window;
	int32		queue_window;	/* the queue's, whatever the segment asked for */
	bool		queue_encrypted;	/* the queue's encryptionEnabled */
	int64		last_offset;	/* as locked */
	int64		txns_start;
	TimestampTz generation;		/* the row's created_at: tells a recreated partition */
	ItemPointerData tid;		/* where the pre-lock found the row, if tid_valid */
	bool		tid_valid;
} QueenTarget;

/* The dedup probe (dedup_probe.c). */
extern bool queen_probe(QueenSegment *seg, const QueenTarget *t, int64 from,
						TimestampTz now, MemoryContext out_cxt);

/* The allocator's update and the segment and hash rows (log_rows.c). */
extern void queen_update_partitions(QueenTarget **targets, int n, TimestampTz now);
extern void queen_insert_rows(QueenTarget **targets, int n);
extern RangeTblEntry *queen_rows_rte(Oid relid, AclMode perms);
extern bool queen_rows_rls_applies(Relation rel);

/* What came of a pre-lock of partitions by id (log_lock.c). */
typedef enum QueenLockResult
{
	QUEEN_LOCK_ALL,				/* every row locked, its target filled in */
	QUEEN_LOCK_NONE,			/* a row is missing: nothing locked */
	QUEEN_LOCK_SOME,			/* a row vanished as we locked: some stay locked */
	QUEEN_LOCK_STATEMENT		/* row-level security applies: a statement must lock */
} QueenLockResult;

extern QueenLockResult queen_lock_partitions(QueenTarget **targets, int n);
extern void queen_target_from_row(QueenTarget *t, HeapTuple tuple, TupleDesc desc);

/* Partitions this transaction already holds (log_deferred.c). */
extern void queen_own_locked(const QueenTarget *t, bool described);
extern bool queen_own_target(QueenTarget *t, QueenSegment *seg, const pg_uuid_t *pid);
extern void queen_write_deferred(QueenTarget **targets, int n, TimestampTz now);
extern void queen_alloc_flush_connected(void);

/*
 * The columns of log_partitions a push reads or writes, all looked up at
 * once (queen_partition_attnums): the pre-lock reads the first five
 * (log_lock.c), the row update reads the id and writes last_offset and
 * the last three (log_rows.c).
 */
typedef enum QueenPartitionColumn
{
	PART_ID,
	PART_QUEUE_ID,
	PART_LAST_OFFSET,
	PART_TXNS_START,
	PART_CREATED_AT,
	PART_OLDEST_LIVE,
	PART_OLDEST_TXN,
	PART_LAST_WRITE,
	PART_NCOLUMNS
} QueenPartitionColumn;

extern void queen_partition_attnums(Oid relid, AttrNumber *attnums);

#endif							/* QUEEN_LOG_WRITE_INT_H */
