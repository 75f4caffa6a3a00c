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
#include "postgres.h"

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

	queen_wire_reader(r, msg->data, (Size) msg->len);
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

/* ----------------------------------------------------------------
 *		The arguments of the consumption ops
 *
 * They travel as a CONTROL message's argument, so the control path
 * (queuing, a transaction of its own, the REPLY) serves them unchanged.
 * ----------------------------------------------------------------
 */

/* A reader over an argument the control message carried. */
void
queen_wire_reader(QueenMsgReader *r, const char *data, Size len)
{
	r->data = data;
	r->len = len;
	r->pos = 0;
	r->bad = false;
}

static void
queen_msg_put_text(StringInfo buf, QueenWireText t)
{
	queen_msg_put_u32(buf, t.len);
	queen_msg_put(buf, t.data, t.len);
}

static QueenWireText
queen_msg_get_text(QueenMsgReader *r)
{
	QueenWireText t;

	t.len = queen_msg_get_u32(r);
	t.data = queen_msg_get(r, t.len);
	if (t.data == NULL)
		t.len = 0;
	return t;
}

/*
 * POP: texts queue, partition, namespace, task, group, subscriptionMode,
 * subscriptionFrom; i32 batch, partitions, leaseSeconds; u8 autoAck;
 * i64 retry_until.
 */
void
queen_wire_put_pop(StringInfo arg, const QueenWirePop *m)
{
	queen_msg_put_text(arg, m->queue);
	queen_msg_put_text(arg, m->partition);
	queen_msg_put_text(arg, m->namespace_name);
	queen_msg_put_text(arg, m->task);
	queen_msg_put_text(arg, m->group);
	queen_msg_put_text(arg, m->sub_mode);
	queen_msg_put_text(arg, m->sub_from);
	queen_msg_put_u32(arg, (uint32) m->batch);
	queen_msg_put_u32(arg, (uint32) m->max_partitions);
	queen_msg_put_u32(arg, (uint32) m->lease_seconds);
	queen_msg_put_u8(arg, m->auto_ack);
	queen_msg_put_u64(arg, (uint64) m->retry_until);
}

bool
queen_wire_get_pop(QueenMsgReader *r, QueenWirePop *m)
{
	m->queue = queen_msg_get_text(r);
	m->partition = queen_msg_get_text(r);
	m->namespace_name = queen_msg_get_text(r);
	m->task = queen_msg_get_text(r);
	m->group = queen_msg_get_text(r);
	m->sub_mode = queen_msg_get_text(r);
	m->sub_from = queen_msg_get_text(r);
	m->batch = (int32) queen_msg_get_u32(r);
	m->max_partitions = (int32) queen_msg_get_u32(r);
	m->lease_seconds = (int32) queen_msg_get_u32(r);
	m->auto_ack = queen_msg_get_u8(r);
	m->retry_until = (int64) queen_msg_get_u64(r);
	return !r->bad && r->pos == r->len;
}

/*
 * A pop that delivered nothing is answered REPLY 204, and its body, which
 * never reaches the client, is the hint for a parked long-poll: i64
 * retry_at (a TimestampTz, 0 when nothing is known), u8 flags
 * (QUEEN_POP_HINT_*).
 */
void
queen_wire_put_pop_hint(StringInfo body, int64 retry_at, uint8 flags)
{
	queen_msg_put_u64(body, (uint64) retry_at);
	queen_msg_put_u8(body, flags);
}

bool
queen_wire_get_pop_hint(const char *body, Size len, int64 *retry_at, uint8 *flags)
{
	QueenMsgReader r;

	queen_wire_reader(&r, body, len);
	*retry_at = (int64) queen_msg_get_u64(&r);
	*flags = queen_msg_get_u8(&r);
	return !r.bad && r.pos == r.len;
}

/* ACK: text group, u32 item count; the items follow. */
void
queen_wire_put_ack(StringInfo arg, const QueenWireAck *m)
{
	queen_msg_put_text(arg, m->group);
	queen_msg_put_u32(arg, m->nitems);
}

bool
queen_wire_get_ack(QueenMsgReader *r, QueenWireAck *m)
{
	m->group = queen_msg_get_text(r);
	m->nitems = queen_msg_get_u32(r);
	return !r->bad;
}

/*
 * One ack item: u8 flags, 16-byte partition id, texts transactionId,
 * status, leaseId, error, problem.
 */
void
queen_wire_put_ack_item(StringInfo arg, const QueenWireAckItem *m)
{
	static const char zero[UUID_LEN];

	queen_msg_put_u8(arg, m->flags);
	queen_msg_put(arg, m->partition_id ? m->partition_id : zero, UUID_LEN);
	queen_msg_put_text(arg, m->txn);
	queen_msg_put_text(arg, m->status);
	queen_msg_put_text(arg, m->lease);
	queen_msg_put_text(arg, m->error);
	queen_msg_put_text(arg, m->problem);
}

bool
queen_wire_get_ack_item(QueenMsgReader *r, QueenWireAckItem *m)
{
	m->flags = queen_msg_get_u8(r);
	m->partition_id = queen_msg_get(r, UUID_LEN);
	m->txn = queen_msg_get_text(r);
	m->status = queen_msg_get_text(r);
	m->lease = queen_msg_get_text(r);
	m->error = queen_msg_get_text(r);
	m->problem = queen_msg_get_text(r);
	return !r->bad;
}

/* RENEW: text leaseId, i32 seconds. */
void
queen_wire_put_renew(StringInfo arg, const QueenWireRenew *m)
{
	queen_msg_put_text(arg, m->lease);
	queen_msg_put_u32(arg, (uint32) m->seconds);
}

bool
queen_wire_get_renew(QueenMsgReader *r, QueenWireRenew *m)
{
	m->lease = queen_msg_get_text(r);
	m->seconds = (int32) queen_msg_get_u32(r);
	return !r->bad && r->pos == r->len;
}

/* DLQ: texts queue, consumerGroup, partition, from, to; i32 limit; i64 offset. */
void
queen_wire_put_dlq(StringInfo arg, const QueenWireDlq *m)
{
	queen_msg_put_text(arg, m->queue);
	queen_msg_put_text(arg, m->group);
	queen_msg_put_text(arg, m->partition);
	queen_msg_put_text(arg, m->from);
	queen_msg_put_text(arg, m->to);
	queen_msg_put_u32(arg, (uint32) m->limit);
	queen_msg_put_u64(arg, (uint64) m->offset);
}

bool
queen_wire_get_dlq(QueenMsgReader *r, QueenWireDlq *m)
{
	m->queue = queen_msg_get_text(r);
	m->group = queen_msg_get_text(r);
	m->partition = queen_msg_get_text(r);
	m->from = queen_msg_get_text(r);
	m->to = queen_msg_get_text(r);
	m->limit = (int32) queen_msg_get_u32(r);
	m->offset = (int64) queen_msg_get_u64(r);
	return !r->bad && r->pos == r->len;
}

/* DELETE_GROUP: texts group, queue; u8 deleteMetadata. */
void
queen_wire_put_group_delete(StringInfo arg, const QueenWireGroupDelete *m)
{
	queen_msg_put_text(arg, m->group);
	queen_msg_put_text(arg, m->queue);
	queen_msg_put_u8(arg, m->delete_metadata);
}

bool
queen_wire_get_group_delete(QueenMsgReader *r, QueenWireGroupDelete *m)
{
	m->group = queen_msg_get_text(r);
	m->queue = queen_msg_get_text(r);
	m->delete_metadata = queen_msg_get_u8(r);
	return !r->bad && r->pos == r->len;
}
