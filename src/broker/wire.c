/*-------------------------------------------------------------------------
 *
 * wire.c
 *	  The messages listeners and shards exchange on the rings: the layout of
 *	  each type, written once, as an encode/decode pair.
 *
 * Integers are native-endian (both ends are processes of one server).  A
 * decoder never reads past a message: one shorter than its fields say
 * marks the reader bad, and the caller drops it.  Decoded strings point
 * into the message, which must outlive them.  A new message type is a
 * struct in broker.h and a pair here.
 *
 *-------------------------------------------------------------------------
 */
#include "broker.h"
#include "wire.h"

/* ----------------------------------------------------------------
 *		Fields
 * ----------------------------------------------------------------
 */

static void
queen_msg_put(StringInfo buf, const void *data, Size len)
{
	appendBinaryStringInfo(buf, (const char *) data, (int) len);
}

static void
queen_msg_put_u8(StringInfo buf, uint8 v)
{
	appendStringInfoCharMacro(buf, (char) v);
}

static void
queen_msg_put_u16(StringInfo buf, uint16 v)
{
	queen_msg_put(buf, &v, sizeof(v));
}

static void
queen_msg_put_u32(StringInfo buf, uint32 v)
{
	queen_msg_put(buf, &v, sizeof(v));
}

static void
queen_msg_put_u64(StringInfo buf, uint64 v)
{
	queen_msg_put(buf, &v, sizeof(v));
}

static void
queen_msg_reader(QueenMsgReader *r, StringInfo msg)
{
	r->data = msg->data;
	r->len = (Size) msg->len;
	r->pos = 0;
	r->bad = false;
}

/* A message shorter than its fields says marks the reader bad, never reads past. */
static const char *
queen_msg_get(QueenMsgReader *r, Size len)
{
	const char *p;

	if (r->bad || r->len - r->pos < len)
	{
		r->bad = true;
		return NULL;
	}
	p = r->data + r->pos;
	r->pos += len;
	return p;
}

/* Copy len bytes into dst, or zeros once the message ran short. */
static void
queen_msg_copy(QueenMsgReader *r, void *dst, Size len)
{
	const char *p = queen_msg_get(r, len);

	if (p)
		memcpy(dst, p, len);
	else
		memset(dst, 0, len);
}

static uint8
queen_msg_get_u8(QueenMsgReader *r)
{
	uint8		v;

	queen_msg_copy(r, &v, sizeof(v));
	return v;
}

static uint16
queen_msg_get_u16(QueenMsgReader *r)
{
	uint16		v;

	queen_msg_copy(r, &v, sizeof(v));
	return v;
}

static uint32
queen_msg_get_u32(QueenMsgReader *r)
{
	uint32		v;

	queen_msg_copy(r, &v, sizeof(v));
	return v;
}

static uint64
queen_msg_get_u64(QueenMsgReader *r)
{
	uint64		v;

	queen_msg_copy(r, &v, sizeof(v));
	return v;
}

/* ----------------------------------------------------------------
 *		Messages
 * ----------------------------------------------------------------
 */

/*
 * A new, empty message.  It lives in the sender's context (cxt) until its
 * ring has taken it, whatever context the sender happens to run in.
 */
StringInfo
queen_wire_new(MemoryContext cxt)
{
	MemoryContext old = MemoryContextSwitchTo(cxt);
	StringInfo	msg = makeStringInfo();

	MemoryContextSwitchTo(old);
	return msg;
}

/* The type and request id every message starts with. */
static void
queen_wire_put_head(StringInfo msg, QueenMsgType type, uint64 request)
{
	queen_msg_put_u8(msg, (uint8) type);
	queen_msg_put_u64(msg, request);
}

/* Read a message's head; the reader is then at its body.  0 when short. */
uint8
queen_wire_get_head(QueenMsgReader *r, StringInfo msg, uint64 *request)
{
	uint8		type;

	queen_msg_reader(r, msg);
	type = queen_msg_get_u8(r);
	*request = queen_msg_get_u64(r);
	return r->bad ? 0 : type;
}

/*
 * PUSH (listener -> shard): u8 type, u64 request, u32 group, 16-byte
 * tenant, u16 queue length, queue, u16 partition length, partition, u32
 * frame count, then the frames packed exactly as stored (docs/FORMAT.md),
 * which the caller appends.
 */
void
queen_wire_put_push(StringInfo msg, const QueenWirePush *m)
{
	queen_wire_put_head(msg, QUEEN_MSG_PUSH, m->request);
	queen_msg_put_u32(msg, m->group);
	queen_msg_put(msg, m->tenant, UUID_LEN);
	queen_msg_put_u16(msg, m->queue_len);
	queen_msg_put(msg, m->queue, m->queue_len);
	queen_msg_put_u16(msg, m->partition_len);
	queen_msg_put(msg, m->partition, m->partition_len);
	queen_msg_put_u32(msg, m->nframes);
}

/* After the head; the reader is left at the frames. */
bool
queen_wire_get_push(QueenMsgReader *r, QueenWirePush *m)
{
	m->group = queen_msg_get_u32(r);
	m->tenant = queen_msg_get(r, UUID_LEN);
	m->queue_len = queen_msg_get_u16(r);
	m->queue = queen_msg_get(r, m->queue_len);
	m->partition_len = queen_msg_get_u16(r);
	m->partition = queen_msg_get(r, m->partition_len);
	m->nframes = queen_msg_get_u32(r);
	return !r->bad;
}

/*
 * CONTROL (listener -> shard): u8 type, u64 request, u8 op, 16-byte
 * tenant, u32 argument length, argument.
 */
void
queen_wire_put_control(StringInfo msg, const QueenWireControl *m)
{
	queen_wire_put_head(msg, QUEEN_MSG_CONTROL, m->request);
	queen_msg_put_u8(msg, m->op);
	queen_msg_put(msg, m->tenant, UUID_LEN);
	queen_msg_put_u32(msg, m->arglen);
	queen_msg_put(msg, m->arg, m->arglen);
}

bool
queen_wire_get_control(QueenMsgReader *r, QueenWireControl *m)
{
	m->op = queen_msg_get_u8(r);
	m->tenant = queen_msg_get(r, UUID_LEN);
	m->arglen = queen_msg_get_u32(r);
	m->arg = queen_msg_get(r, m->arglen);
	return !r->bad;
}

/*
 * VERDICT (shard -> listener): u8 type, u64 request, u32 group, u8 group
 * outcome, u32 frame count, then per frame u8 status + 16-byte message id
 * (queen_wire_put_verdict_frame, nframes times).
 */
void
queen_wire_put_verdict(StringInfo msg, const QueenWireVerdict *m)
{
	queen_wire_put_head(msg, QUEEN_MSG_VERDICT, m->request);
	queen_msg_put_u32(msg, m->group);
	queen_msg_put_u8(msg, m->outcome);
	queen_msg_put_u32(msg, m->nframes);
}

void
queen_wire_put_verdict_frame(StringInfo msg, uint8 status, const pg_uuid_t *id)
{
	queen_msg_put_u8(msg, status);
	queen_msg_put(msg, id->data, UUID_LEN);
}

bool
queen_wire_get_verdict(QueenMsgReader *r, QueenWireVerdict *m)
{
	m->group = queen_msg_get_u32(r);
	m->outcome = queen_msg_get_u8(r);
	m->nframes = queen_msg_get_u32(r);
	return !r->bad;
}

/* The next frame's status and message id (NULL when the message ran short). */
bool
queen_wire_get_verdict_frame(QueenMsgReader *r, uint8 *status, const char **id)
{
	*status = queen_msg_get_u8(r);
	*id = queen_msg_get(r, UUID_LEN);
	return !r->bad;
}

/* REPLY (shard -> listener): u8 type, u64 request, u16 HTTP status, u32 body length, body. */
void
queen_wire_put_reply(StringInfo msg, const QueenWireReply *m)
{
	queen_wire_put_head(msg, QUEEN_MSG_REPLY, m->request);
	queen_msg_put_u16(msg, m->status);
	queen_msg_put_u32(msg, m->len);
	queen_msg_put(msg, m->body, m->len);
}

bool
queen_wire_get_reply(QueenMsgReader *r, QueenWireReply *m)
{
	m->status = queen_msg_get_u16(r);
	m->len = queen_msg_get_u32(r);
	m->body = queen_msg_get(r, m->len);
	return !r->bad;
}
