/*-------------------------------------------------------------------------
 *
 * shard_traces.c
 *	  Traces in the shard: recording one (POST /api/v1/traces) and the
 *	  three readers (a message's, a name's, the names), each a core call
 *	  (traces.c) and Queen's answer rendered from its result.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "shard.h"
#include "consume.h"
#include "render.h"
#include "traces.h"

/* POST /api/v1/traces: the trace's id */
void *
queen_op_trace_run(QueenOpCall *call)
{
	const QueenArgsTrace *a = (const QueenArgsTrace *) call->args;
	QueenTraceInput in;
	pg_uuid_t  *id = palloc(sizeof(pg_uuid_t));
	char	   *names = queen_wire_cstring(a->names);
	char	  **list = palloc(sizeof(char *) * (a->names.len / 2 + 1));
	int			n = 0;
	char	   *p;

	/* the listener joined the names with 0x1F, which no name holds */
	for (p = names; a->names.len > 0 && p != NULL; n++)
	{
		char	   *sep = strchr(p, '\x1f');

		list[n] = p;
		if (sep != NULL)
			*sep++ = '\0';
		p = sep;
	}
	memset(&in, 0, sizeof(in));
	in.tenant = call->tenant;
	memcpy(in.partition_id.data, a->partition_id, UUID_LEN);
	in.transaction_id = queen_wire_cstring(a->txn);
	in.consumer_group = a->group.len > 0 ? queen_wire_cstring(a->group) : QUEEN_QUEUE_MODE;
	in.event_type = queen_wire_cstring(a->event_type);
	in.data = queen_wire_cstring(a->data);
	in.names = (const char *const *) list;
	in.nnames = n;
	queen_trace_record(&in, id);
	return id;
}

int
queen_op_trace_render(QueenOpCall *call, void *result, StringInfo out)
{
	(void) call;
	appendStringInfoString(out, "{\"success\":true,\"traceId\":");
	queen_render_uuid(out, (pg_uuid_t *) result);
	appendStringInfoChar(out, '}');
	return 200;
}

/* A listing as run: its traces or its names, and what paged them. */
typedef struct QueenTraceListing
{
	uint8		listing;		/* QUEEN_TRACES_* */
	QueenTrace *traces;
	QueenTraceName *names;
	int			n;
	int64		total;
	int32		limit;
	int64		offset;
} QueenTraceListing;

/* GET /api/v1/traces/...: a message's traces, a name's, or the names */
void *
queen_op_traces_run(QueenOpCall *call)
{
	const QueenArgsTraces *a = (const QueenArgsTraces *) call->args;
	QueenTraceListing *l = palloc0(sizeof(QueenTraceListing));
	pg_uuid_t	pid;

	l->listing = a->listing;
	l->limit = a->limit;
	l->offset = a->offset;
	memcpy(pid.data, a->partition_id, UUID_LEN);
	switch (a->listing)
	{
		case QUEEN_TRACES_OF_MESSAGE:
			l->n = queen_traces_of_message(&call->tenant, &pid, queen_wire_cstring(a->txn),
										   &l->traces);
			break;
		case QUEEN_TRACES_BY_NAME:
			l->total = queen_traces_by_name(&call->tenant, queen_wire_cstring(a->name),
											(TimestampTz) a->from, (TimestampTz) a->to,
											a->limit, a->offset, &l->traces, &l->n);
			break;
		case QUEEN_TRACES_NAMES:
			l->total = queen_trace_names(&call->tenant, a->limit, a->offset, &l->names, &l->n);
			break;
		default:
			call->status = 500;
			call->problem = "malformed trace listing";
			return NULL;
	}
	return l;
}

/*
 * Queen's answers: {"traces": [...]} for a message; by name the same with
 * the total and the page; {"trace_names": [...], ...} for the names.
 */
int
queen_op_traces_render(QueenOpCall *call, void *result, StringInfo out)
{
	QueenTraceListing *l = (QueenTraceListing *) result;

	(void) call;
	if (l->listing == QUEEN_TRACES_NAMES)
	{
		appendStringInfoString(out, "{\"trace_names\":");
		queen_render_objects(out, &queen_answer_trace_name, l->names, sizeof(QueenTraceName), l->n);
	}
	else
	{
		appendStringInfoString(out, "{\"traces\":");
		queen_render_objects(out, l->listing == QUEEN_TRACES_BY_NAME ?
							 &queen_answer_trace_by_name : &queen_answer_trace,
							 l->traces, sizeof(QueenTrace), l->n);
	}
	if (l->listing != QUEEN_TRACES_OF_MESSAGE)
		appendStringInfo(out, ",\"total\":" INT64_FORMAT ",\"pagination\":{\"limit\":%d,\"offset\":" INT64_FORMAT "}",
						 l->total, l->limit, l->offset);
	appendStringInfoChar(out, '}');
	return 200;
}
