/*-------------------------------------------------------------------------
 *
 * shard_streams.c
 *	  Stream processing in the shard: registering a query (POST
 *	  /streams/v1/queries) and reading a partition's state (POST
 *	  /streams/v1/state/get), each a core call (streams.c) and Queen's
 *	  answer rendered from its result.  A cycle is a transaction
 *	  (shard_txn.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "shard.h"
#include "render.h"
#include "streams.h"

typedef struct QueenStreamRegistered
{
	QueenStreamQuery q;
	char	   *name;
	char	   *config_hash;
} QueenStreamRegistered;

void *
queen_op_stream_register_run(QueenOpCall *call)
{
	const QueenArgsStreamRegister *a = (const QueenArgsStreamRegister *) call->args;
	QueenStreamRegistered *r = palloc0(sizeof(QueenStreamRegistered));

	r->name = queen_wire_cstring(a->name);
	r->config_hash = queen_wire_cstring(a->config_hash);
	queen_stream_register(&call->tenant, r->name, queen_wire_cstring(a->source_queue),
						  a->sink_queue.len > 0 ? queen_wire_cstring(a->sink_queue) : NULL,
						  r->config_hash, a->reset != 0, &r->q);
	return r;
}

/* Queen's answer; a changed config_hash without reset is 409, nothing done. */
int
queen_op_stream_register_render(QueenOpCall *call, void *result, StringInfo out)
{
	QueenStreamRegistered *r = (QueenStreamRegistered *) result;

	(void) call;
	appendStringInfo(out, "{\"success\":%s,\"query_id\":", r->q.conflict ? "false" : "true");
	queen_render_uuid(out, &r->q.id);
	appendStringInfoString(out, ",\"name\":");
	queen_render_text(out, r->name);
	if (r->q.conflict)
	{
		appendStringInfoString(out, ",\"error\":");
		queen_render_text(out, psprintf("config_hash mismatch: operator chain changed for queryId '%s'. Pass reset:true to wipe existing state, or use a new queryId.",
										r->name));
		appendStringInfoChar(out, '}');
		return 409;
	}
	appendStringInfoString(out, ",\"config_hash\":");
	queen_render_text(out, r->config_hash);
	appendStringInfo(out, ",\"fresh\":%s,\"reset\":%s}", r->q.fresh ? "true" : "false",
					 r->q.reset ? "true" : "false");
	return 200;
}

typedef struct QueenStreamRows
{
	QueenStateRow *rows;
	int			n;
} QueenStreamRows;

void *
queen_op_stream_state_run(QueenOpCall *call)
{
	const QueenArgsStreamState *a = (const QueenArgsStreamState *) call->args;
	QueenStreamRows *r = palloc0(sizeof(QueenStreamRows));
	QueenStateFilter filter;
	char	  **keys = palloc(sizeof(char *) * Max(a->nkeys, 1));
	pg_uuid_t	query;
	pg_uuid_t	partition;
	int			i;

	memset(&filter, 0, sizeof(filter));
	for (i = 0; i < a->nkeys; i++)
	{
		QueenArgsText key;

		if (!queen_wire_get_fields(&call->items, &queen_args_text, &key))
		{
			call->status = 500;
			call->problem = "malformed state keys";
			return NULL;
		}
		keys[i] = queen_wire_cstring(key.text);
	}
	filter.keys = (const char *const *) keys;
	filter.nkeys = a->nkeys;
	filter.key_prefix = a->key_prefix.len > 0 ? queen_wire_cstring(a->key_prefix) : NULL;
	filter.ripe = a->ripe.len > 0 ? queen_wire_cstring(a->ripe) : NULL;
	memcpy(query.data, a->query_id, UUID_LEN);
	memcpy(partition.data, a->partition_id, UUID_LEN);
	r->n = queen_stream_state_get(&call->tenant, &query, &partition, &filter, &r->rows);
	return r;
}

int
queen_op_stream_state_render(QueenOpCall *call, void *result, StringInfo out)
{
	QueenStreamRows *r = (QueenStreamRows *) result;

	(void) call;
	appendStringInfoString(out, "{\"success\":true,\"rows\":");
	queen_render_objects(out, &queen_answer_state_row, r->rows, sizeof(QueenStateRow), r->n);
	appendStringInfoChar(out, '}');
	return 200;
}
