/*-------------------------------------------------------------------------
 *
 * consume_body.h
 *	  What the listener reads of a consumption request (consume_body.c):
 *	  the query string, the ack bodies and the lease extension's body.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_CONSUME_BODY_H
#define QUEEN_CONSUME_BODY_H

#include "queen.h"
#include "json_walk.h"
#include "routes.h"
#include "wire.h"

/* A lease extension without "seconds": Queen renews by a minute. */
#define QUEEN_DEFAULT_LEASE_EXTENSION	60

/* Most parameters in one query string; more is a 400. */
#define QUEEN_QUERY_MAX		32

typedef struct QueenQuery
{
	int			n;
	char	   *name[QUEEN_QUERY_MAX];
	char	   *value[QUEEN_QUERY_MAX];	/* decoded, NUL-terminated */
	Size		len[QUEEN_QUERY_MAX];
} QueenQuery;

/* One acknowledgement as the body gave it. */
typedef struct QueenAckInput
{
	char	   *txn;			/* NULL unless a string */
	Size		txn_len;
	pg_uuid_t	partition_id;
	char	   *status;			/* NULL when absent or null */
	Size		status_len;
	char	   *lease;			/* NULL when absent, null or "" */
	Size		lease_len;
	char	   *error;			/* NULL when absent or null */
	Size		error_len;
	char	   *problem;		/* why the item cannot be applied, or NULL */
} QueenAckInput;

/* The keys of an acknowledgement, in the order queen_ack_input reads them. */
typedef enum QueenAckKey
{
	QUEEN_ACK_KEY_TXN = 0,
	QUEEN_ACK_KEY_PARTITION,
	QUEEN_ACK_KEY_STATUS,
	QUEEN_ACK_KEY_LEASE,
	QUEEN_ACK_KEY_ERROR,
	QUEEN_ACK_KEY_GROUP,		/* a single ack's, or a transaction's ack */
	QUEEN_ACK_NKEYS
} QueenAckKey;

extern const char *const queen_ack_key_names[QUEEN_ACK_NKEYS];
extern void queen_ack_input(const QueenJsonValue *v, QueenAckInput *it);
extern void queen_put_ack_item(StringInfo arg, const QueenAckInput *in);

/* A request's query string and the names in it or its path, or a 400 (handle_consume.c) */
extern bool queen_read_query(QueenHttpRequest *req, const char *const *allowed, QueenQuery *q);
extern bool queen_take_name(QueenHttpRequest *req, const QueenQuery *q,
							const QueenRouteParams *params, const char *key, const char *what,
							QueenWireText *out);
extern const char *queen_bound_problem(const char *name, const char *value);


extern const char *queen_query_parse(const char *query, const char *const *allowed,
									 QueenQuery *q);
extern const char *queen_query_get(const QueenQuery *q, const char *name, Size *len);
extern const char *queen_query_int(const QueenQuery *q, const char *name, int64 dflt,
								   int64 min, int64 max, int64 *out);
extern const char *queen_query_bool(const QueenQuery *q, const char *name, bool dflt,
									bool *out);
extern const char *queen_parse_ack_body(const char *body, size_t len, bool batch,
										int max_items, int *status,
										char **group, Size *group_len,
										QueenAckInput **items, int *nitems);
extern const char *queen_parse_seconds_body(const char *body, size_t len, int32 *seconds);

/* A body's string value that must be a name (absent or null: NULL), or why not. */
extern const char *queen_body_name(const QueenJsonValue *v, const char *key, Size max,
								   char **out);
extern const char *queen_body_walk(const char *body, size_t len, QueenJsonShape *shape);
extern const char *queen_body_uuid(const QueenJsonValue *v, const char *key, pg_uuid_t *out);
/* A body's value as JSON text, as the body spelt it (a string re-escaped). */
extern char *queen_body_json(const QueenJsonValue *v);

#endif							/* QUEEN_CONSUME_BODY_H */
