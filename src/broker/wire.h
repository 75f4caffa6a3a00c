/*-------------------------------------------------------------------------
 *
 * wire.h
 *	  The messages that travel on the rings (wire.c): one struct per type,
 *	  its layout (layouts.c) and one pair of walkers for every layout, so
 *	  a new message type is a struct here and a layout there.
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
	QUEEN_MSG_REPLY,
	QUEEN_MSG_NTYPES
} QueenMsgType;

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
	QUEEN_VERDICT_BUFFERED,		/* on disk in the spool, committed later */
	QUEEN_VERDICT_REFUSED		/* failed: its queue is encrypted and no key seals */
} QueenFrameVerdict;

/* Cursor over a received message. */
typedef struct QueenMsgReader
{
	const char *data;
	Size		len;
	Size		pos;
	bool		bad;
} QueenMsgReader;

/*
 * A text on the wire: a u32 length and bytes; length 0 means absent
 * wherever an empty value means nothing.  Decoded, it points into the
 * message.
 */
typedef struct QueenWireText
{
	const char *data;
	uint32		len;
} QueenWireText;

static inline QueenWireText
queen_wire_text(const char *s, Size len)
{
	QueenWireText t = {s, (uint32) (s != NULL ? len : 0)};

	return t;
}

/* A text's copy, NUL-terminated ("" for an absent one), for the core. */
static inline char *
queen_wire_cstring(QueenWireText t)
{
	return pnstrdup(t.data != NULL ? t.data : "", t.len);
}

/*
 * One struct per message type, request first (every message's head is its
 * type and request id); strings point into the message.
 */
typedef struct QueenWirePush
{
	uint64		request;
	uint32		group;
	const char *tenant;			/* UUID_LEN bytes */
	QueenWireText queue;
	QueenWireText partition;
	uint32		nframes;		/* the frames follow */
} QueenWirePush;

typedef struct QueenWireControl
{
	uint64		request;
	uint8		op;				/* QueenControlOp */
	const char *tenant;			/* UUID_LEN bytes */
	QueenWireText arg;
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
	QueenWireText body;
} QueenWireReply;

/*
 * A message's or a control operation's fields: a struct of these kinds,
 * and its layout, the fields in the order they travel (layouts.c states
 * them all).  A uuid is a pointer to 16 bytes
 * (NULL writes zeros).
 */

typedef enum QueenWireKind
{
	QUEEN_WIRE_TEXT,			/* QueenWireText */
	QUEEN_WIRE_U8,				/* uint8 */
	QUEEN_WIRE_U16,				/* uint16 */
	QUEEN_WIRE_U32,				/* uint32 */
	QUEEN_WIRE_I32,				/* int32 */
	QUEEN_WIRE_I64,				/* int64 */
	QUEEN_WIRE_UUID				/* const char *, UUID_LEN bytes */
} QueenWireKind;

typedef struct QueenWireField
{
	uint8		kind;			/* QueenWireKind */
	uint16		offset;			/* in the struct */
} QueenWireField;

#define QUEEN_WIRE_FIELD(type, member, kind) {(kind), offsetof(type, member)}

typedef struct QueenWireLayout
{
	const QueenWireField *fields;
	int			nfields;
	Size		size;			/* of the struct */
} QueenWireLayout;

#define QUEEN_WIRE_LAYOUT(type, fields) {(fields), lengthof(fields), sizeof(type)}

/* Each message type's fields after its head (layouts.c). */
extern const QueenWireLayout queen_msg_layouts[QUEEN_MSG_NTYPES];

/* The pop hint's flags: a discovery that matched no queue at all. */
#define QUEEN_POP_HINT_NO_QUEUE		0x01

extern StringInfo queen_wire_new(MemoryContext cxt);
extern uint8 queen_wire_get_head(QueenMsgReader *r, StringInfo msg, uint64 *request);
extern void queen_wire_put(StringInfo msg, QueenMsgType type, const void *m);
extern bool queen_wire_get(QueenMsgReader *r, QueenMsgType type, void *m);
extern void queen_wire_put_verdict_frame(StringInfo msg, uint8 status, const pg_uuid_t *id);
extern bool queen_wire_get_verdict_frame(QueenMsgReader *r, uint8 *status, const char **id);

extern void queen_wire_reader(QueenMsgReader *r, const char *data, Size len);
extern void queen_wire_put_fields(StringInfo arg, const QueenWireLayout *layout, const void *m);
extern bool queen_wire_get_fields(QueenMsgReader *r, const QueenWireLayout *layout, void *m);
extern void queen_wire_put_pop_hint(StringInfo body, int64 retry_at, uint8 flags);
extern bool queen_wire_get_pop_hint(const char *body, Size len, int64 *retry_at,
									uint8 *flags);

#endif							/* QUEEN_WIRE_H */
