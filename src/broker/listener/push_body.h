/*-------------------------------------------------------------------------
 *
 * push_body.h
 *	  The HTTP door's push body: one item per element of {"items": [...]},
 *	  split by push_body.c without building a tree.
 *
 * These are the HTTP door's types, not the core's: the core sees frames
 * and item keys (queen.h), never an HTTP body, so they live beside the
 * broker that parses them.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_PUSH_BODY_H
#define QUEEN_PUSH_BODY_H

#include "queen.h"

/*
 * One item of a push body.  Strings are read-only (items without a partition
 * share one "Default"); payload points into the body, which must outlive the
 * items.
 */
typedef struct QueenHttpItem
{
	char	   *queue;			/* de-escaped, NUL-terminated (palloc'd) */
	size_t		queue_len;
	char	   *partition;		/* de-escaped; "Default" when absent or JSON null */
	size_t		partition_len;
	char	   *txn;			/* de-escaped transactionId, or NULL when
								 * absent/null/empty string (the caller mints
								 * one) */
	size_t		txn_len;
	const char *payload;		/* the payload value's JSON text exactly as
								 * sent, pointing into the body (not copied) */
	size_t		payload_len;
} QueenHttpItem;

extern const char *queen_parse_push_body(const char *body, size_t len,
										 int max_items, QueenHttpItem **items,
										 int *nitems, bool *too_many);
extern char *queen_body_problem(const char *body, size_t len);

/* A pushed item of a transaction or a stream cycle on the wire (handle_txn.c). */
extern void queen_txn_put_push(StringInfo arg, const QueenHttpItem *item, const char *subject);
extern bool queen_parse_enabled_body(const char *body, size_t len, bool *enabled);

#endif							/* QUEEN_PUSH_BODY_H */
