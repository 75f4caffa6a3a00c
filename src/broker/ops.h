/*-------------------------------------------------------------------------
 *
 * ops.h
 *	  The control operations: every request a listener hands to a shard
 *	  to run in a transaction (health, configure, delete queue, and the
 *	  consumption operations), each one row of one table (ops.c).
 *
 * A row says everything the listener and the shard need to know of an
 * operation: its name, whether it may share a transaction with others,
 * the layout of its arguments on the ring, how to run it (a core call),
 * how to render what it returned, how to answer when its transaction
 * failed, which rows it locks up front in a shared transaction, and what
 * to tell others once it committed.  The listener's handler fills the
 * arguments' struct; the shard's generic runner (shard_control.c) decodes
 * it by the row's layout and calls the row's functions.  So a new route
 * that reaches the database is: a row in the route table (routes.c), an
 * operation here (its number, its arguments' struct) and its row in
 * ops.c, a handler, and the core function.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_OPS_H
#define QUEEN_OPS_H

#include "consume.h"
#include "wire.h"

/* An operation's number on the wire, and its row's index in ops.c. */
typedef enum QueenControlOp
{
	QUEEN_CONTROL_HEALTH = 1,
	QUEEN_CONTROL_CONFIGURE,
	QUEEN_CONTROL_DELETE_QUEUE,
	QUEEN_CONTROL_POP,
	QUEEN_CONTROL_ACK,
	QUEEN_CONTROL_RENEW,
	QUEEN_CONTROL_DLQ,
	QUEEN_CONTROL_DELETE_GROUP,
	QUEEN_CONTROL_TXN,
	QUEEN_CONTROL_TRACE,
	QUEEN_CONTROL_TRACES,
	QUEEN_CONTROL_STREAM_REGISTER,
	QUEEN_CONTROL_STREAM_STATE,
	QUEEN_CONTROL_ADMIN,
	QUEEN_CONTROL_ADMIN_WRITE,
	QUEEN_CONTROL_NOPS
} QueenControlOp;

/*
 * QUEEN_OP_CONSUMES: a consumption operation.  It runs under
 * queen.consume_lock_timeout, its counts are published only once it
 * committed, and if its shard ends before answering, its outcome is
 * unknown (it may have committed).
 * QUEEN_OP_SHARES: it may share one transaction with the consumption
 * operations queued beside it.
 * QUEEN_OP_RUNS_LAST: in a shared transaction it runs after the others
 * (a pop, whose lease should start as late as possible).
 */
#define QUEEN_OP_CONSUMES		0x01
#define QUEEN_OP_SHARES			0x02
#define QUEEN_OP_RUNS_LAST		0x04

/* The arguments, one struct an operation (health has none). */
typedef struct QueenArgsText
{
	QueenWireText text;			/* configure: the body; delete: the queue */
} QueenArgsText;

/* POP: queue (absent for discovery), partition (absent: any), the filters */
typedef struct QueenArgsPop
{
	QueenWireText queue;
	QueenWireText partition;
	QueenWireText namespace_name;
	QueenWireText task;
	QueenWireText group;		/* absent: queue mode */
	QueenWireText sub_mode;
	QueenWireText sub_from;
	int32		batch;
	int32		max_partitions;
	int32		lease_seconds;
	uint8		auto_ack;
	int64		retry_until;	/* QueenPopRequest.retry_until */
} QueenArgsPop;

/* ACK: the group and how many items follow (QueenArgsAckItem each). */
typedef struct QueenArgsAck
{
	QueenWireText group;		/* absent: queue mode */
	int32		nitems;
} QueenArgsAck;

#define QUEEN_ACK_ITEM_VALID		0x01	/* else problem says why */
#define QUEEN_ACK_ITEM_STATUS		0x02	/* a status was given (not null) */
#define QUEEN_ACK_ITEM_ERROR		0x04	/* an error text was given */

typedef struct QueenArgsAckItem
{
	uint8		flags;
	const char *partition_id;	/* UUID_LEN bytes */
	QueenWireText txn;
	QueenWireText status;
	QueenWireText lease;
	QueenWireText error;
	QueenWireText problem;		/* why an invalid item is not applied */
} QueenArgsAckItem;

/* RENEW: every lease held under the id, by seconds. */
typedef struct QueenArgsRenew
{
	QueenWireText lease;
	int32		seconds;
} QueenArgsRenew;

/* DLQ: the listing's filter; from and to as the client wrote them. */
typedef struct QueenArgsDlq
{
	QueenWireText queue;
	QueenWireText group;
	QueenWireText partition;
	QueenWireText from;
	QueenWireText to;
	int32		limit;
	int64		offset;
} QueenArgsDlq;

/* DELETE_GROUP: the group on every queue of the tenant, or on one. */
typedef struct QueenArgsGroupDelete
{
	QueenWireText group;
	QueenWireText queue;		/* absent: every queue */
	uint8		delete_metadata;
} QueenArgsGroupDelete;

/*
 * TXN: how many items follow (QueenArgsTxnItem each), in request order.  A
 * stream cycle (POST /streams/v1/cycle) is a transaction that also changes
 * the state of its query's source partition.
 */
typedef struct QueenArgsTxn
{
	int32		nitems;
	uint8		cycle;
	uint8		release_lease;	/* a cycle's: its ack releases the lease */
	const char *query_id;		/* a cycle's, UUID_LEN bytes */
	const char *partition_id;	/* a cycle's source partition */
} QueenArgsTxn;

#define QUEEN_TXN_PUSH		1	/* queue, partition, txn, frame */
#define QUEEN_TXN_ACK		2	/* group; a QueenArgsAckItem follows */
#define QUEEN_TXN_LEASE		3	/* lease: one of the request's requiredLeases */
#define QUEEN_TXN_STATE		4	/* key, value (JSON; absent: remove the key) */

typedef struct QueenArgsTxnItem
{
	uint8		kind;			/* QUEEN_TXN_* */
	QueenWireText queue;
	QueenWireText partition;
	QueenWireText txn;
	QueenWireText frame;		/* a push: its frame, packed as stored */
	QueenWireText group;		/* an ack's; absent: queue mode */
	QueenWireText lease;
	QueenWireText key;
	QueenWireText value;
} QueenArgsTxnItem;

/* STREAM_REGISTER: POST /streams/v1/queries. */
typedef struct QueenArgsStreamRegister
{
	QueenWireText name;
	QueenWireText source_queue;
	QueenWireText sink_queue;	/* absent: none */
	QueenWireText config_hash;
	uint8		reset;
} QueenArgsStreamRegister;

/* STREAM_STATE: POST /streams/v1/state/get; nkeys keys follow (QueenArgsText each). */
typedef struct QueenArgsStreamState
{
	const char *query_id;
	const char *partition_id;
	QueenWireText key_prefix;	/* absent: none */
	QueenWireText ripe;			/* ripe_at_or_before, a JSON number; absent: none */
	int32		nkeys;
} QueenArgsStreamState;

/* TRACE: one trace to record; its names joined by 0x1F (a name has no control character). */
typedef struct QueenArgsTrace
{
	const char *partition_id;	/* UUID_LEN bytes */
	QueenWireText txn;
	QueenWireText group;		/* absent: queue mode */
	QueenWireText event_type;
	QueenWireText data;			/* JSON text */
	QueenWireText names;
} QueenArgsTrace;

/* TRACES: which listing, and what it reads of the rest. */
#define QUEEN_TRACES_OF_MESSAGE		1	/* partition_id, txn */
#define QUEEN_TRACES_BY_NAME		2	/* name, from, to, a page */
#define QUEEN_TRACES_NAMES			3	/* a page */

typedef struct QueenArgsTraces
{
	uint8		listing;		/* QUEEN_TRACES_* */
	const char *partition_id;
	QueenWireText txn;
	QueenWireText name;
	int64		from;			/* TimestampTz */
	int64		to;
	int32		limit;
	int64		offset;
} QueenArgsTraces;

/*
 * ADMIN, ADMIN_WRITE: one administration request (core/admin.h), its
 * arguments as QueenAdminArgs has them; an absent text is none.
 */
typedef struct QueenArgsAdmin
{
	uint8		request;		/* QueenAdminRequest */
	QueenWireText text0;
	QueenWireText text1;
	QueenWireText text2;
	QueenWireText text3;
	QueenWireText text4;
	int32		limit;
	int64		offset;
	int32		number;
	uint8		flag;
	int64		from;			/* TimestampTz */
	int64		to;
} QueenArgsAdmin;

/* One run of an operation in the shard. */
typedef struct QueenOpCall
{
	uint8		op;				/* QueenControlOp */
	pg_uuid_t	tenant;
	const void *args;			/* decoded by the row's layout */
	QueenMsgReader items;		/* what follows the arguments (an ack's items) */
	/* set by a run that refuses: {"error": problem, "invalid": invalid} */
	const char *problem;
	const char *invalid;
	int			status;			/* the refusal's status; 0: 400 */
} QueenOpCall;

/* The consumer rows a shared transaction locks before its operations run. */
typedef struct QueenOpLocks
{
	QueenConsumerKey *keys;
	int			nkeys;
	int			maxkeys;
	const char **leases;
	int			nleases;
	int			maxleases;
} QueenOpLocks;

typedef struct QueenControlOpDef
{
	const char *name;			/* "pop": logs, errors ("pop failed: ...") */
	const char *activity;		/* pg_stat_activity while it runs */
	uint8		flags;			/* QUEEN_OP_* */
	const QueenWireLayout *args;	/* NULL: none (layouts.c has them) */
	const QueenWireLayout *items;	/* trailing items; NULL: none */

	/* The core call, in the shard's transaction; NULL with call->problem set: 400. */
	void	   *(*run) (QueenOpCall *call);
	/* The answer: its HTTP status, the body appended to out. */
	int			(*render) (QueenOpCall *call, void *result, StringInfo out);
	/* Its transaction rolled back (NULL: 500 "<name> failed: <message>"). */
	int			(*fail) (QueenOpCall *call, const char *message, StringInfo out);
	/* The consumer rows it will lock, locked first in a shared transaction. */
	void		(*lock) (QueenOpCall *call, QueenOpLocks *locks);
	/* After its COMMIT, before its answer leaves. */
	void		(*committed) (QueenOpCall *call);
} QueenControlOpDef;

/* The operations' argument layouts (layouts.c). */
extern const QueenWireLayout queen_args_text;
extern const QueenWireLayout queen_args_pop;
extern const QueenWireLayout queen_args_ack;
extern const QueenWireLayout queen_args_ack_item;
extern const QueenWireLayout queen_args_renew;
extern const QueenWireLayout queen_args_dlq;
extern const QueenWireLayout queen_args_group_delete;
extern const QueenWireLayout queen_args_txn;
extern const QueenWireLayout queen_args_txn_item;
extern const QueenWireLayout queen_args_trace;
extern const QueenWireLayout queen_args_traces;
extern const QueenWireLayout queen_args_stream_register;
extern const QueenWireLayout queen_args_stream_state;
extern const QueenWireLayout queen_args_admin;

extern const QueenControlOpDef *queen_control_op(uint8 op);
extern void queen_control_put_args(StringInfo arg, uint8 op, const void *args);
extern void queen_control_put_item(StringInfo arg, uint8 op, const void *item);
extern bool queen_control_get_args(QueenMsgReader *r, uint8 op, void *args);

#endif							/* QUEEN_OPS_H */
