/*-------------------------------------------------------------------------
 *
 * render.c
 *	  The JSON bodies the broker builds from what the core returned: the
 *	  pop body, rendered by the shard that ran the pop, the timestamps of
 *	  every answer, the echo of a queue's configuration, and the one error
 *	  body, {"error": message[, "invalid": key]}, every refusal uses.
 *
 * What a client reads is byte for byte Queen's: every key in Queen's
 * order, "data" spliced verbatim from the frame's payload bytes (so null,
 * {}, strings, numbers and multi-megabyte payloads come back exactly as
 * they were pushed; an empty payload is null), and timestamps as
 * YYYY-MM-DDTHH:MI:SS.ffffffZ in UTC whatever the session's TimeZone:
 * they are broken down without a time zone, never through the DateStyle
 * or TimeZone settings.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "render.h"
#include "validate.h"
#include "codec.h"

#include "utils/datetime.h"
#include "utils/json.h"
#include "utils/memutils.h"

/* A timestamp as a JSON string, UTC with microseconds; null if out of range. */
void
queen_render_timestamp(StringInfo out, TimestampTz ts)
{
	char		buf[QUEEN_ISO8601_LEN];

	if (queen_format_iso8601(ts, buf))
		appendStringInfo(out, "\"%s\"", buf);
	else
		appendStringInfoString(out, "null");
}

void
queen_render_uuid(StringInfo out, const pg_uuid_t *id)
{
	char		text[UUID_LEN * 2 + 5];

	queen_uuid_format(id, text);
	appendStringInfoChar(out, '"');
	appendStringInfoString(out, text);
	appendStringInfoChar(out, '"');
}

/* One value of an object by its field's kind. */
static void
queen_render_value(StringInfo out, const QueenRenderField *f, const char *obj)
{
	const void *v = obj + f->offset;
	int			i;

	switch ((QueenRenderKind) f->kind)
	{
		case QUEEN_RENDER_TEXT:
			queen_render_text(out, *(char *const *) v);
			break;
		case QUEEN_RENDER_JSON:
			appendStringInfoString(out, *(char *const *) v != NULL ? *(char *const *) v : "null");
			break;
		case QUEEN_RENDER_UUID:
			queen_render_uuid(out, (const pg_uuid_t *) v);
			break;
		case QUEEN_RENDER_TIME:
			queen_render_timestamp(out, *(const TimestampTz *) v);
			break;
		case QUEEN_RENDER_I32:
			appendStringInfo(out, "%d", *(const int32 *) v);
			break;
		case QUEEN_RENDER_I64:
			appendStringInfo(out, INT64_FORMAT, *(const int64 *) v);
			break;
		case QUEEN_RENDER_TEXTS:
			appendStringInfoChar(out, '[');
			for (i = 0; i < ((const QueenTexts *) v)->n; i++)
			{
				if (i > 0)
					appendStringInfoChar(out, ',');
				queen_render_text(out, ((const QueenTexts *) v)->items[i]);
			}
			appendStringInfoChar(out, ']');
			break;
		case QUEEN_RENDER_NULL:
			appendStringInfoString(out, "null");
			break;
	}
}

/* An object of a core result, keys in the shape's order. */
void
queen_render_object(StringInfo out, const QueenRenderShape *shape, const void *obj)
{
	int			i;

	appendStringInfoChar(out, '{');
	for (i = 0; i < shape->nfields; i++)
	{
		if (i > 0)
			appendStringInfoChar(out, ',');
		escape_json(out, shape->fields[i].key);
		appendStringInfoChar(out, ':');
		queen_render_value(out, &shape->fields[i], (const char *) obj);
	}
	appendStringInfoChar(out, '}');
}

/* n objects of size bytes each, as a JSON array. */
void
queen_render_objects(StringInfo out, const QueenRenderShape *shape, const void *objs, Size size,
					 int n)
{
	int			i;

	appendStringInfoChar(out, '[');
	for (i = 0; i < n; i++)
	{
		if (i > 0)
			appendStringInfoChar(out, ',');
		queen_render_object(out, shape, (const char *) objs + size * i);
	}
	appendStringInfoChar(out, ']');
}

/* A string, escaped; NULL renders null. */
void
queen_render_text(StringInfo out, const char *s)
{
	if (s == NULL)
		appendStringInfoString(out, "null");
	else
		escape_json(out, s);
}

/* A string that is not NUL-terminated (a frame's field). */
static void
queen_render_span(StringInfo out, const char *s, Size len)
{
	char	   *copy = pnstrdup(s, len);

	escape_json(out, copy);
	pfree(copy);
}

/* One delivered message, every key Queen's clients read. */
static void
queen_render_message(StringInfo out, const QueenPopMessage *msg, const QueenPopPartition *part,
					 const char *lease_id, const char *group)
{
	const QueenFrame *f = &msg->frame;

	appendStringInfoString(out, "{\"id\":");
	queen_render_uuid(out, &f->message_id);
	appendStringInfoString(out, ",\"transactionId\":");
	queen_render_span(out, f->txn, f->txn_len);
	appendStringInfoString(out, ",\"traceId\":");
	if (f->flags & QUEEN_FRAME_TRACE)
		queen_render_uuid(out, &f->trace_id);
	else
		appendStringInfoString(out, "null");
	appendStringInfoString(out, ",\"data\":");
	if (f->payload_len == 0)
		appendStringInfoString(out, "null");
	else
		appendBinaryStringInfo(out, f->payload, (int) f->payload_len);
	appendStringInfoString(out, ",\"producerSub\":");
	if (f->flags & QUEEN_FRAME_PRODUCER)
		queen_render_span(out, f->producer_sub, f->producer_sub_len);
	else
		appendStringInfoString(out, "null");
	appendStringInfoString(out, ",\"createdAt\":");
	queen_render_timestamp(out, msg->created_at);
	appendStringInfoString(out, ",\"partitionId\":");
	queen_render_uuid(out, &part->partition_id);
	appendStringInfoString(out, ",\"partition\":");
	escape_json(out, part->partition);
	appendStringInfoString(out, ",\"leaseId\":");
	escape_json(out, lease_id);
	appendStringInfoString(out, ",\"consumerGroup\":");
	escape_json(out, group);
	appendStringInfo(out, ",\"deliveryAttempt\":%d}", part->delivery_attempt);
}

/*
 * The body of a pop that delivered something: the top level names the
 * first claimed partition, as Queen's does; the discovery route (no queue
 * in the request) shows queue "".
 */
void
queen_render_pop(StringInfo out, const QueenPopRequest *req, const QueenPopResult *res)
{
	const QueenPopPartition *first = res->npartitions > 0 ? &res->partitions[0] : NULL;
	Size		guess = 256;
	bool		any = false;
	int			p,
				k;

	/* one allocation for the usual body: the payloads and a little per message */
	for (p = 0; p < res->npartitions; p++)
		for (k = 0; k < res->partitions[p].nmessages; k++)
			guess += res->partitions[p].messages[k].frame.payload_len + 400;
	if (guess < MaxAllocSize)
		enlargeStringInfo(out, (int) guess);

	appendStringInfoString(out, "{\"success\":true,\"queue\":");
	escape_json(out, req->queue ? req->queue : "");
	appendStringInfoString(out, ",\"partition\":");
	queen_render_text(out, first ? first->partition : NULL);
	appendStringInfoString(out, ",\"partitionId\":");
	if (first)
		queen_render_uuid(out, &first->partition_id);
	else
		appendStringInfoString(out, "null");
	appendStringInfoString(out, ",\"leaseId\":");
	escape_json(out, res->lease_id);
	appendStringInfoString(out, ",\"consumerGroup\":");
	escape_json(out, req->group);
	appendStringInfoString(out, ",\"messages\":[");
	for (p = 0; p < res->npartitions; p++)
	{
		const QueenPopPartition *part = &res->partitions[p];

		for (k = 0; k < part->nmessages; k++)
		{
			if (any)
				appendStringInfoChar(out, ',');
			any = true;
			queen_render_message(out, &part->messages[k], part, res->lease_id, req->group);
		}
	}
	appendStringInfo(out, "],\"partitionsClaimed\":%d}", res->npartitions);
}

/* {"error": message}, with "invalid": the key at fault when there is one. */
void
queen_render_error(StringInfo out, const char *message, const char *invalid)
{
	appendStringInfoString(out, "{\"error\":");
	escape_json(out, message);
	if (invalid != NULL)
	{
		appendStringInfoString(out, ",\"invalid\":");
		escape_json(out, invalid);
	}
	appendStringInfoChar(out, '}');
}

/* Queen's configure echo: the effective row, every option under its JSON name. */
void
queen_render_configured(StringInfo out, const QueenCfgResult *res)
{
	int			i;

	appendStringInfoString(out, "{\"configured\":true,\"queueId\":");
	queen_render_uuid(out, &res->id);
	appendStringInfoString(out, ",\"partitionId\":null,\"queue\":");
	escape_json(out, res->queue);
	appendStringInfoString(out, ",\"namespace\":");
	escape_json(out, res->label[0]);
	appendStringInfoString(out, ",\"task\":");
	escape_json(out, res->label[1]);
	/* a literal Queen keeps on the wire since it has one storage engine */
	appendStringInfoString(out, ",\"storage\":\"segments\",\"options\":{");
	for (i = 0; i < QUEEN_NOPTIONS; i++)
	{
		if (i > 0)
			appendStringInfoChar(out, ',');
		escape_json(out, queen_options[i].json);
		appendStringInfoChar(out, ':');
		if (queen_options[i].type == QUEEN_OPT_INT)
			appendStringInfo(out, "%d", res->ival[i]);
		else if (queen_options[i].type == QUEEN_OPT_BOOL)
			appendStringInfoString(out, res->ival[i] ? "true" : "false");
		else
			escape_json(out, res->sval[i]);
	}
	appendStringInfoString(out, "}}");
}
