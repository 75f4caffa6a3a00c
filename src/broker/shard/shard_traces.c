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

static char *
queen_trace_wire_text(QueenWireText t)
{
	return pnstrdup(t.data != NULL ? t.data : "", t.len);
}

/* POST /api/v1/traces: the trace's id */
void *
queen_op_trace_run(QueenOpCall *call)
{
	const QueenArgsTrace *a = (const QueenArgsTrace *) call->args;
	QueenTraceInput in;
	pg_uuid_t  *id = palloc(sizeof(pg_uuid_t));
	char	   *names = queen_trace_wire_text(a->names);
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
	in.transaction_id = queen_trace_wire_text(a->txn);
	in.consumer_group = a->group.len > 0 ? queen_trace_wire_text(a->group) : QUEEN_QUEUE_MODE;
	in.event_type = queen_trace_wire_text(a->event_type);
	in.data = queen_trace_wire_text(a->data);
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

/* A page of traces and what paged it (by name only). */
typedef struct QueenTracePage
{
	QueenTrace *traces;
	int			ntraces;
	bool		by_name;
	int64		total;
	int32		limit;
	int64		offset;
} QueenTracePage;

void *
queen_op_traces_message_run(QueenOpCall *call)
{
	const QueenArgsTraces *a = (const QueenArgsTraces *) call->args;
	QueenTracePage *page = palloc0(sizeof(QueenTracePage));
	pg_uuid_t	pid;

	memcpy(pid.data, a->partition_id, UUID_LEN);
	page->ntraces = queen_traces_of_message(&call->tenant, &pid, queen_trace_wire_text(a->txn),
											&page->traces);
	return page;
}

void *
queen_op_traces_by_name_run(QueenOpCall *call)
{
	const QueenArgsTraces *a = (const QueenArgsTraces *) call->args;
	QueenTracePage *page = palloc0(sizeof(QueenTracePage));

	page->by_name = true;
	page->limit = a->limit;
	page->offset = a->offset;
	page->total = queen_traces_by_name(&call->tenant, queen_trace_wire_text(a->name),
									   (TimestampTz) a->from, (TimestampTz) a->to, a->limit,
									   a->offset, &page->traces, &page->ntraces);
	return page;
}

/* Queen's answers: {"traces": [...]}, and by name the total and the page. */
int
queen_op_traces_render(QueenOpCall *call, void *result, StringInfo out)
{
	QueenTracePage *page = (QueenTracePage *) result;

	(void) call;
	appendStringInfoString(out, "{\"traces\":");
	queen_render_objects(out, page->by_name ? &queen_answer_trace_by_name : &queen_answer_trace,
						 page->traces, sizeof(QueenTrace), page->ntraces);
	if (page->by_name)
		appendStringInfo(out, ",\"total\":" INT64_FORMAT ",\"pagination\":{\"limit\":%d,\"offset\":" INT64_FORMAT "}",
						 page->total, page->limit, page->offset);
	appendStringInfoChar(out, '}');
	return 200;
}

/* The names and their counts, one page. */
typedef struct QueenTraceNamesPage
{
	QueenTraceName *names;
	int			nnames;
	int64		total;
	int32		limit;
	int64		offset;
} QueenTraceNamesPage;

void *
queen_op_trace_names_run(QueenOpCall *call)
{
	const QueenArgsTraces *a = (const QueenArgsTraces *) call->args;
	QueenTraceNamesPage *page = palloc0(sizeof(QueenTraceNamesPage));

	page->limit = a->limit;
	page->offset = a->offset;
	page->total = queen_trace_names(&call->tenant, a->limit, a->offset, &page->names,
									&page->nnames);
	return page;
}

int
queen_op_trace_names_render(QueenOpCall *call, void *result, StringInfo out)
{
	QueenTraceNamesPage *page = (QueenTraceNamesPage *) result;

	(void) call;
	appendStringInfoString(out, "{\"trace_names\":");
	queen_render_objects(out, &queen_answer_trace_name, page->names, sizeof(QueenTraceName),
						 page->nnames);
	appendStringInfo(out, ",\"total\":" INT64_FORMAT ",\"pagination\":{\"limit\":%d,\"offset\":" INT64_FORMAT "}}",
					 page->total, page->limit, page->offset);
	return 200;
}
