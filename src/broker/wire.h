/*-------------------------------------------------------------------------
 *
 * wire.h
 *	  The messages that travel on the rings (wire.c): one struct per type
 *	  and an encode/decode pair, so each layout is written once and a new
 *	  message type is one struct and one pair here.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_WIRE_H
#define QUEEN_WIRE_H

#include "lib/stringinfo.h"
#include "utils/uuid.h"

typedef enum QueenMsgType
{
	QUEEN_MSG_PUSH = 1,
	QUEEN_MSG_CONTROL,
	QUEEN_MSG_VERDICT,
	QUEEN_MSG_REPLY
} QueenMsgType;

typedef enum QueenControlOp
{
	QUEEN_CONTROL_HEALTH = 1,
	QUEEN_CONTROL_CONFIGURE,
	QUEEN_CONTROL_DELETE_QUEUE,
	/* consumption (shard_consume.c); argument encodings below */
	QUEEN_CONTROL_POP,
	QUEEN_CONTROL_ACK,
	QUEEN_CONTROL_RENEW,
	QUEEN_CONTROL_DLQ,
	QUEEN_CONTROL_DELETE_GROUP
} QueenControlOp;

/* Is this a consumption op?  Its outcome is unknown if the shard ends. */
#define QUEEN_CONTROL_CONSUMES(op)	((op) >= QUEEN_CONTROL_POP)

/* Outcome of a whole group. */
typedef enum QueenGroupOutcome
{
	QUEEN_GROUP_DONE = 0,		/* per-frame statuses follow */
	QUEEN_GROUP_FAILED,			/* the bundle's transaction failed */
	QUEEN_GROUP_UNAVAILABLE,	/* database or extension not there */
	QUEEN_GROUP_SPOOL_FAILED	/* maintenance mode, and the spool failed */
} QueenGroupOutcome;

/* Per-frame status in a verdict. */
typedef enum QueenFrameVerdict
{
	QUEEN_VERDICT_QUEUED = 1,
	QUEEN_VERDICT_DUPLICATE,
	QUEEN_VERDICT_FAILED,
	QUEEN_VERDICT_BUFFERED		/* on disk in the spool, committed later */
} QueenFrameVerdict;

/* Cursor over a received message. */
typedef struct QueenMsgReader
{
	const char *data;
	Size		len;
	Size		pos;
	bool		bad;
} QueenMsgReader;

/* One struct per message type; strings point into the message. */
typedef struct QueenWirePush
{
	uint64		request;
	uint32		group;
	const char *tenant;			/* UUID_LEN bytes */
	const char *queue;
	uint16		queue_len;
	const char *partition;
	uint16		partition_len;
	uint32		nframes;		/* the frames follow */
} QueenWirePush;

typedef struct QueenWireControl
{
	uint64		request;
	uint8		op;				/* QueenControlOp */
	const char *tenant;			/* UUID_LEN bytes */
	const char *arg;
	uint32		arglen;
} QueenWireControl;

typedef struct QueenWireVerdict
{
	uint64		request;
	uint32		group;
	uint8		outcome;		/* QueenGroupOutcome */
	uint32		nframes;		/* per-frame verdicts follow */
} QueenWireVerdict;

typedef struct QueenWireReply
{
	uint64		request;
	uint16		status;			/* HTTP */
	const char *body;
	uint32		len;
} QueenWireReply;

/*
 * The arguments of the consumption ops.  A text is a u32 length and bytes;
 * length 0 means absent wherever an empty value means nothing.
 */
typedef struct QueenWireText
{
	const char *data;
	uint32		len;
} QueenWireText;

/* POP: queue (absent for discovery), partition (absent: any), the rest of 4.1 */
typedef struct QueenWirePop
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
} QueenWirePop;

/* The pop hint's flags: a discovery that matched no queue at all. */
#define QUEEN_POP_HINT_NO_QUEUE		0x01

/* ACK: the group, then nitems items (queen_wire_put_ack_item). */
typedef struct QueenWireAck
{
	QueenWireText group;		/* absent: queue mode */
	uint32		nitems;
} QueenWireAck;

#define QUEEN_ACK_ITEM_VALID		0x01	/* else problem says why */
#define QUEEN_ACK_ITEM_STATUS		0x02	/* a status was given (not null) */
#define QUEEN_ACK_ITEM_ERROR		0x04	/* an error text was given */

typedef struct QueenWireAckItem
{
	uint8		flags;
	const char *partition_id;	/* UUID_LEN bytes */
	QueenWireText txn;
	QueenWireText status;
	QueenWireText lease;
	QueenWireText error;
	QueenWireText problem;		/* why an invalid item is not applied */
} QueenWireAckItem;

/* RENEW: every lease held under the id, by seconds. */
typedef struct QueenWireRenew
{
	QueenWireText lease;
	int32		seconds;
} QueenWireRenew;

/* DLQ: the listing's filter; from and to as the client wrote them. */
typedef struct QueenWireDlq
{
	QueenWireText queue;
	QueenWireText group;
	QueenWireText partition;
	QueenWireText from;
	QueenWireText to;
	int32		limit;
	int64		offset;
} QueenWireDlq;

/* DELETE_GROUP: the group on every queue of the tenant, or on one. */
typedef struct QueenWireGroupDelete
{
	QueenWireText group;
	QueenWireText queue;		/* absent: every queue */
	uint8		delete_metadata;
} QueenWireGroupDelete;

extern StringInfo queen_wire_new(MemoryContext cxt);
extern uint8 queen_wire_get_head(QueenMsgReader *r, StringInfo msg, uint64 *request);
extern void queen_wire_put_push(StringInfo msg, const QueenWirePush *m);
extern bool queen_wire_get_push(QueenMsgReader *r, QueenWirePush *m);
extern void queen_wire_put_control(StringInfo msg, const QueenWireControl *m);
extern bool queen_wire_get_control(QueenMsgReader *r, QueenWireControl *m);
extern void queen_wire_put_verdict(StringInfo msg, const QueenWireVerdict *m);
extern void queen_wire_put_verdict_frame(StringInfo msg, uint8 status, const pg_uuid_t *id);
extern bool queen_wire_get_verdict(QueenMsgReader *r, QueenWireVerdict *m);
extern bool queen_wire_get_verdict_frame(QueenMsgReader *r, uint8 *status, const char **id);
extern void queen_wire_put_reply(StringInfo msg, const QueenWireReply *m);
extern bool queen_wire_get_reply(QueenMsgReader *r, QueenWireReply *m);

extern void queen_wire_reader(QueenMsgReader *r, const char *data, Size len);
extern void queen_wire_put_pop(StringInfo arg, const QueenWirePop *m);
extern bool queen_wire_get_pop(QueenMsgReader *r, QueenWirePop *m);
extern void queen_wire_put_pop_hint(StringInfo body, int64 retry_at, uint8 flags);
extern bool queen_wire_get_pop_hint(const char *body, Size len, int64 *retry_at,
									uint8 *flags);
extern void queen_wire_put_ack(StringInfo arg, const QueenWireAck *m);
extern bool queen_wire_get_ack(QueenMsgReader *r, QueenWireAck *m);
extern void queen_wire_put_ack_item(StringInfo arg, const QueenWireAckItem *m);
extern bool queen_wire_get_ack_item(QueenMsgReader *r, QueenWireAckItem *m);
extern void queen_wire_put_renew(StringInfo arg, const QueenWireRenew *m);
extern bool queen_wire_get_renew(QueenMsgReader *r, QueenWireRenew *m);
extern void queen_wire_put_dlq(StringInfo arg, const QueenWireDlq *m);
extern bool queen_wire_get_dlq(QueenMsgReader *r, QueenWireDlq *m);
extern void queen_wire_put_group_delete(StringInfo arg, const QueenWireGroupDelete *m);
extern bool queen_wire_get_group_delete(QueenMsgReader *r, QueenWireGroupDelete *m);

#endif							/* QUEEN_WIRE_H */
