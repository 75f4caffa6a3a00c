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

#include "postgres.h"

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
	QUEEN_CONTROL_DELETE_QUEUE
} QueenControlOp;

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

#endif							/* QUEEN_WIRE_H */
