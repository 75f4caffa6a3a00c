/*-------------------------------------------------------------------------
 *
 * streams.h
 *	  Stream processing's server side (streams.c): a query registered by
 *	  name with the shape of its operators, and the state its stateful
 *	  operators keep per (query, source partition, key).
 *
 * A stream cycle is a consumer's unit of work: the state it changed, what
 * it pushed to its sink, and the ack of its source messages, in one
 * transaction.  Both doors build it from the same parts, in the global
 * lock order: the pushes (bundle.c, partition rows), the ack (ack.c,
 * consumer rows), then the state (here: the query row, then its state
 * rows in ascending key).  Like the rest of the core, nothing here knows
 * HTTP or JSON beyond taking a value's text.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_STREAMS_H
#define QUEEN_STREAMS_H

#include "queen.h"

/* A state key is text in a btree; Queen's keys are window and user keys. */
#define QUEEN_STREAM_KEY_MAX	2048

/* Why a key of len bytes cannot name a state row, or NULL. */
extern const char *queen_stream_key_problem(size_t len);

typedef struct QueenStreamQuery
{
	pg_uuid_t	id;
	bool		fresh;			/* registered by this call */
	bool		reset;			/* its state was removed for a changed config_hash */
	bool		conflict;		/* registered with another config_hash: nothing done */
} QueenStreamQuery;

extern void queen_stream_register(const pg_uuid_t *tenant, const char *name,
								  const char *source_queue, const char *sink_queue,
								  const char *config_hash, bool reset,
								  QueenStreamQuery *out);

/* One change of state: value is JSON text, or NULL to remove the key. */
typedef struct QueenStateOp
{
	const char *key;
	const char *value;
} QueenStateOp;

/*
 * Apply ops to the state of (query, partition), in the caller's
 * transaction: in ascending key, and for one key in the given order, so
 * that the last op on a key wins.  False, with nothing written, when the
 * tenant has no such query.
 */
extern bool queen_stream_state_apply(const pg_uuid_t *tenant, const pg_uuid_t *query,
									 const pg_uuid_t *partition, QueenStateOp *ops, int nops);

/* Which rows a read returns; every condition given must hold. */
typedef struct QueenStateFilter
{
	const char *const *keys;	/* these keys (nkeys > 0) */
	int			nkeys;
	const char *key_prefix;		/* keys starting so, or NULL */
	const char *ripe;			/* values whose numeric windowEnd <= this number, or NULL */
} QueenStateFilter;

typedef struct QueenStateRow
{
	char	   *key;
	char	   *value;			/* JSON text */
	TimestampTz updated_at;
} QueenStateRow;

/* The state rows of (query, partition) the filter selects, in key order. */
extern int	queen_stream_state_get(const pg_uuid_t *tenant, const pg_uuid_t *query,
								   const pg_uuid_t *partition, const QueenStateFilter *filter,
								   QueenStateRow **rows);

/* Remove the queries that read a deleted queue, and with them their state. */
extern void queen_stream_forget_source(const pg_uuid_t *tenant, const char *queue);

#endif							/* QUEEN_STREAMS_H */
