/*-------------------------------------------------------------------------
 *
 * ops.c
 *	  The table of control operations (ops.h): one row an operation, read
 *	  by the listener (how to send its arguments, whether its outcome is
 *	  unknown when a shard ends) and by the shard's runner (everything
 *	  else).  The functions a row names live with their process: the
 *	  shard's in shard/shard_admin.c and shard/shard_consume.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "ops.h"
#include "shard/shard.h"

/*
 * Which consumption operations share a transaction: all but a consumer
 * group's deletion, which locks a group's rows across a queue or the whole
 * tenant (and its scan floors and subscription) and runs alone, so that a
 * shared transaction can lock everything it will wait for up front.
 */
static const QueenControlOpDef queen_control_ops[QUEEN_CONTROL_NOPS] = {
	[QUEEN_CONTROL_HEALTH] = {
		"health check", "queen: health", 0,
		NULL, NULL,
		queen_op_health_run, queen_op_health_render, queen_op_health_fail, NULL, NULL
	},
	[QUEEN_CONTROL_CONFIGURE] = {
		"configure", "queen: configure", 0,
		&queen_args_text, NULL,
		queen_op_configure_run, queen_op_configure_render, NULL, NULL,
		queen_op_catalog_changed
	},
	[QUEEN_CONTROL_DELETE_QUEUE] = {
		"queue deletion", "queen: delete queue", 0,
		&queen_args_text, NULL,
		queen_op_delete_queue_run, queen_op_delete_queue_render, NULL, NULL,
		queen_op_catalog_changed
	},
	[QUEEN_CONTROL_POP] = {
		"pop", "queen: pop", QUEEN_OP_CONSUMES | QUEEN_OP_SHARES | QUEEN_OP_RUNS_LAST,
		&queen_args_pop, NULL,
		queen_op_pop_run, queen_op_pop_render, NULL, NULL, NULL
	},
	[QUEEN_CONTROL_ACK] = {
		"ack", "queen: ack", QUEEN_OP_CONSUMES | QUEEN_OP_SHARES,
		&queen_args_ack,
		&queen_args_ack_item,
		queen_op_ack_run, queen_op_ack_render, queen_op_ack_fail, queen_op_ack_lock, NULL
	},
	[QUEEN_CONTROL_RENEW] = {
		"lease extension", "queen: lease extension", QUEEN_OP_CONSUMES | QUEEN_OP_SHARES,
		&queen_args_renew, NULL,
		queen_op_renew_run, queen_op_renew_render, NULL, queen_op_renew_lock, NULL
	},
	[QUEEN_CONTROL_DLQ] = {
		"dead-letter listing", "queen: dead letters", QUEEN_OP_CONSUMES | QUEEN_OP_SHARES,
		&queen_args_dlq, NULL,
		queen_op_dlq_run, queen_op_dlq_render, NULL, NULL, NULL
	},
	[QUEEN_CONTROL_DELETE_GROUP] = {
		"consumer group deletion", "queen: delete consumer group", QUEEN_OP_CONSUMES,
		&queen_args_group_delete, NULL,
		queen_op_group_delete_run, queen_op_group_delete_render, NULL, NULL, NULL
	},
	/* pushes lock partition rows before its acks lock consumer rows: alone */
	[QUEEN_CONTROL_TXN] = {
		"transaction", "queen: transaction", QUEEN_OP_CONSUMES,
		&queen_args_txn, &queen_args_txn_item,
		queen_op_txn_run, queen_op_txn_render, queen_op_txn_fail, NULL,
		queen_op_txn_committed
	},
	[QUEEN_CONTROL_TRACE] = {
		"trace", "queen: trace", 0,
		&queen_args_trace, NULL,
		queen_op_trace_run, queen_op_trace_render, NULL, NULL, NULL
	},
	[QUEEN_CONTROL_TRACES] = {
		"trace listing", "queen: traces", 0,
		&queen_args_traces, NULL,
		queen_op_traces_run, queen_op_traces_render, NULL, NULL, NULL
	},
	[QUEEN_CONTROL_STREAM_REGISTER] = {
		"stream query registration", "queen: stream register", QUEEN_OP_CONSUMES,
		&queen_args_stream_register, NULL,
		queen_op_stream_register_run, queen_op_stream_register_render, NULL, NULL, NULL
	},
	[QUEEN_CONTROL_STREAM_STATE] = {
		"stream state read", "queen: stream state", 0,
		&queen_args_stream_state, &queen_args_text,
		queen_op_stream_state_run, queen_op_stream_state_render, NULL, NULL, NULL
	},
	/* resources, status, analytics, group and message reads: any shard */
	[QUEEN_CONTROL_ADMIN] = {
		"administration read", "queen: administration", 0,
		&queen_args_admin, NULL,
		queen_op_admin_run, queen_op_admin_render, NULL, NULL, NULL
	},
	/*
	 * seeks, subscriptions, dead letters purged, replayed, forgotten: alone,
	 * under the consumption lock timeout, and what they made pending woken
	 */
	[QUEEN_CONTROL_ADMIN_WRITE] = {
		"administration", "queen: administration", QUEEN_OP_CONSUMES,
		&queen_args_admin, NULL,
		queen_op_admin_run, queen_op_admin_render, NULL, NULL, NULL
	},
};

/* The operation's row, or NULL for a number no row has. */
const QueenControlOpDef *
queen_control_op(uint8 op)
{
	if (op >= QUEEN_CONTROL_NOPS || queen_control_ops[op].name == NULL)
		return NULL;
	return &queen_control_ops[op];
}

/* An operation's arguments (nothing for one that has none), or one of its items. */
void
queen_control_put_args(StringInfo arg, uint8 op, const void *args)
{
	const QueenWireLayout *layout = queen_control_op(op)->args;

	if (layout != NULL)
		queen_wire_put_fields(arg, layout, args);
}

void
queen_control_put_item(StringInfo arg, uint8 op, const void *item)
{
	Assert(queen_control_op(op)->items != NULL);
	queen_wire_put_fields(arg, queen_control_op(op)->items, item);
}

/* Decode an operation's arguments; false when they are malformed. */
bool
queen_control_get_args(QueenMsgReader *r, uint8 op, void *args)
{
	const QueenControlOpDef *def = queen_control_op(op);

	if (def == NULL || (def->args != NULL && !queen_wire_get_fields(r, def->args, args)))
		return false;
	/* only an operation with items may carry more than its arguments */
	return def->items != NULL || r->pos == r->len;
}
