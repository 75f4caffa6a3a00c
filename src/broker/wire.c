/*-------------------------------------------------------------------------
 *
 * wire.c
 *	  The messages listeners and shards exchange on the rings: the layout of
 *	  each type, written once, as an encode/decode pair.
 *
 * Integers are native-endian (both ends are processes of one server).  A
 * decoder never reads past a message: one shorter than its fields say
 * marks the reader bad, and the caller drops it.  Decoded strings point
 * into the message, which must outlive them.  Every message's fields, and
 * every control operation's arguments, are a layout (a list of fields by
 * kind and offset, layouts.c) written and read by one pair of walkers: a
 * new message type is a struct in wire.h and its layout in layouts.c, as
 * a new operation's arguments are.
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

/* An unsigned integer of width bytes (1, 2, 4 or 8), native-endian. */
static void
queen_msg_put_uint(StringInfo buf, Size width, uint64 v)
{
	uint8		v8 = (uint8) v;
	uint16		v16 = (uint16) v;
	uint32		v32 = (uint32) v;

	queen_msg_put(buf, width == 1 ? (void *) &v8 : width == 2 ? (void *) &v16 :
				  width == 4 ? (void *) &v32 : (void *) &v, width);
}

#define queen_msg_put_u8(buf, v)	queen_msg_put_uint(buf, 1, v)
#define queen_msg_put_u16(buf, v)	queen_msg_put_uint(buf, 2, v)
#define queen_msg_put_u32(buf, v)	queen_msg_put_uint(buf, 4, v)
#define queen_msg_put_u64(buf, v)	queen_msg_put_uint(buf, 8, v)

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

/* An unsigned integer of width bytes, or 0 once the message ran short. */
static uint64
queen_msg_get_uint(QueenMsgReader *r, Size width)
{
	uint8		v8;
	uint16		v16;
	uint32		v32;
	uint64		v64;

	switch (width)
	{
		case 1:
			queen_msg_copy(r, &v8, 1);
			return v8;
		case 2:
			queen_msg_copy(r, &v16, 2);
			return v16;
		case 4:
			queen_msg_copy(r, &v32, 4);
			return v32;
		default:
			queen_msg_copy(r, &v64, 8);
			return v64;
	}
}

#define queen_msg_get_u8(r)		((uint8) queen_msg_get_uint(r, 1))
#define queen_msg_get_u16(r)	((uint16) queen_msg_get_uint(r, 2))
#define queen_msg_get_u32(r)	((uint32) queen_msg_get_uint(r, 4))
#define queen_msg_get_u64(r)	queen_msg_get_uint(r, 8)

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

/* A message of type: its head from m's request (its first member), then its fields. */
void
queen_wire_put(StringInfo msg, QueenMsgType type, const void *m)
{
	queen_wire_put_head(msg, type, *(const uint64 *) m);
	queen_wire_put_fields(msg, &queen_msg_layouts[type], m);
}

/* After the head (queen_wire_get_head): the reader is left at what follows. */
bool
queen_wire_get(QueenMsgReader *r, QueenMsgType type, void *m)
{
	return queen_wire_get_fields(r, &queen_msg_layouts[type], m);
}

void
queen_wire_put_verdict_frame(StringInfo msg, uint8 status, const pg_uuid_t *id)
{
	queen_msg_put_u8(msg, status);
	queen_msg_put(msg, id->data, UUID_LEN);
}

/* The next frame's status and message id (NULL when the message ran short). */
bool
queen_wire_get_verdict_frame(QueenMsgReader *r, uint8 *status, const char **id)
{
	*status = queen_msg_get_u8(r);
	*id = queen_msg_get(r, UUID_LEN);
	return !r->bad;
}

/* ----------------------------------------------------------------
 *		The arguments of control operations
 *
 * They travel as a CONTROL message's argument, laid out by the layout the
 * operation's row names (ops.c, layouts.c): each field in order, a text as a u32
 * length and its bytes.  One walker writes and reads every operation's
 * arguments, so an operation's layout is stated once, as data.
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

void
queen_wire_put_fields(StringInfo arg, const QueenWireLayout *layout, const void *m)
{
	static const char zero[UUID_LEN];
	int			i;

	for (i = 0; i < layout->nfields; i++)
	{
		const char *f = (const char *) m + layout->fields[i].offset;

		switch ((QueenWireKind) layout->fields[i].kind)
		{
			case QUEEN_WIRE_TEXT:
				{
					const QueenWireText *t = (const QueenWireText *) f;

					queen_msg_put_u32(arg, t->len);
					queen_msg_put(arg, t->data, t->len);
					break;
				}
			case QUEEN_WIRE_U8:
				queen_msg_put_u8(arg, *(const uint8 *) f);
				break;
			case QUEEN_WIRE_U16:
				queen_msg_put_u16(arg, *(const uint16 *) f);
				break;
			case QUEEN_WIRE_U32:
				queen_msg_put_u32(arg, *(const uint32 *) f);
				break;
			case QUEEN_WIRE_I32:
				queen_msg_put_u32(arg, (uint32) *(const int32 *) f);
				break;
			case QUEEN_WIRE_I64:
				queen_msg_put_u64(arg, (uint64) *(const int64 *) f);
				break;
			case QUEEN_WIRE_UUID:
				{
					const char *id = *(const char *const *) f;

					queen_msg_put(arg, id ? id : zero, UUID_LEN);
					break;
				}
		}
	}
}

/* Fill m from the fields; false when the argument ran short. */
bool
queen_wire_get_fields(QueenMsgReader *r, const QueenWireLayout *layout, void *m)
{
	int			i;

	for (i = 0; i < layout->nfields; i++)
	{
		char	   *f = (char *) m + layout->fields[i].offset;

		switch ((QueenWireKind) layout->fields[i].kind)
		{
			case QUEEN_WIRE_TEXT:
				{
					QueenWireText *t = (QueenWireText *) f;

					t->len = queen_msg_get_u32(r);
					t->data = queen_msg_get(r, t->len);
					if (t->data == NULL)
						t->len = 0;
					break;
				}
			case QUEEN_WIRE_U8:
				*(uint8 *) f = queen_msg_get_u8(r);
				break;
			case QUEEN_WIRE_U16:
				*(uint16 *) f = queen_msg_get_u16(r);
				break;
			case QUEEN_WIRE_U32:
				*(uint32 *) f = queen_msg_get_u32(r);
				break;
			case QUEEN_WIRE_I32:
				*(int32 *) f = (int32) queen_msg_get_u32(r);
				break;
			case QUEEN_WIRE_I64:
				*(int64 *) f = (int64) queen_msg_get_u64(r);
				break;
			case QUEEN_WIRE_UUID:
				*(const char **) f = queen_msg_get(r, UUID_LEN);
				break;
		}
	}
	return !r->bad;
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
