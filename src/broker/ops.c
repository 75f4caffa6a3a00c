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

static const QueenWireField queen_text_fields[] = {
	QUEEN_WIRE_FIELD(QueenArgsText, text, QUEEN_WIRE_TEXT),
};

static const QueenWireField queen_pop_fields[] = {
	QUEEN_WIRE_FIELD(QueenArgsPop, queue, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenArgsPop, partition, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenArgsPop, namespace_name, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenArgsPop, task, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenArgsPop, group, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenArgsPop, sub_mode, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenArgsPop, sub_from, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenArgsPop, batch, QUEEN_WIRE_I32),
	QUEEN_WIRE_FIELD(QueenArgsPop, max_partitions, QUEEN_WIRE_I32),
	QUEEN_WIRE_FIELD(QueenArgsPop, lease_seconds, QUEEN_WIRE_I32),
	QUEEN_WIRE_FIELD(QueenArgsPop, auto_ack, QUEEN_WIRE_U8),
	QUEEN_WIRE_FIELD(QueenArgsPop, retry_until, QUEEN_WIRE_I64),
};

static const QueenWireField queen_ack_fields[] = {
	QUEEN_WIRE_FIELD(QueenArgsAck, group, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenArgsAck, nitems, QUEEN_WIRE_I32),
};

static const QueenWireField queen_ack_item_fields[] = {
	QUEEN_WIRE_FIELD(QueenArgsAckItem, flags, QUEEN_WIRE_U8),
	QUEEN_WIRE_FIELD(QueenArgsAckItem, partition_id, QUEEN_WIRE_UUID),
	QUEEN_WIRE_FIELD(QueenArgsAckItem, txn, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenArgsAckItem, status, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenArgsAckItem, lease, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenArgsAckItem, error, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenArgsAckItem, problem, QUEEN_WIRE_TEXT),
};

static const QueenWireField queen_renew_fields[] = {
	QUEEN_WIRE_FIELD(QueenArgsRenew, lease, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenArgsRenew, seconds, QUEEN_WIRE_I32),
};

static const QueenWireField queen_dlq_fields[] = {
	QUEEN_WIRE_FIELD(QueenArgsDlq, queue, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenArgsDlq, group, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenArgsDlq, partition, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenArgsDlq, from, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenArgsDlq, to, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenArgsDlq, limit, QUEEN_WIRE_I32),
	QUEEN_WIRE_FIELD(QueenArgsDlq, offset, QUEEN_WIRE_I64),
};

static const QueenWireField queen_group_delete_fields[] = {
	QUEEN_WIRE_FIELD(QueenArgsGroupDelete, group, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenArgsGroupDelete, queue, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenArgsGroupDelete, delete_metadata, QUEEN_WIRE_U8),
};

#define QUEEN_NO_FIELDS		{NULL, 0, 0}

/*
 * Which consumption operations share a transaction: all but a consumer
 * group's deletion, which locks a group's rows across a queue or the whole
 * tenant (and its scan floors and subscription) and runs alone, so that a
 * shared transaction can lock everything it will wait for up front.
 */
static const QueenControlOpDef queen_control_ops[QUEEN_CONTROL_NOPS] = {
	[QUEEN_CONTROL_HEALTH] = {
		"health check", "queen: health", 0,
		QUEEN_NO_FIELDS, QUEEN_NO_FIELDS,
		queen_op_health_run, queen_op_health_render, queen_op_health_fail, NULL, NULL
	},
	[QUEEN_CONTROL_CONFIGURE] = {
		"configure", "queen: configure", 0,
		QUEEN_WIRE_LAYOUT(QueenArgsText, queen_text_fields), QUEEN_NO_FIELDS,
		queen_op_configure_run, queen_op_configure_render, NULL, NULL,
		queen_op_catalog_changed
	},
	[QUEEN_CONTROL_DELETE_QUEUE] = {
		"queue deletion", "queen: delete queue", 0,
		QUEEN_WIRE_LAYOUT(QueenArgsText, queen_text_fields), QUEEN_NO_FIELDS,
		queen_op_delete_queue_run, queen_op_delete_queue_render, NULL, NULL,
		queen_op_catalog_changed
	},
	[QUEEN_CONTROL_POP] = {
		"pop", "queen: pop", QUEEN_OP_CONSUMES | QUEEN_OP_SHARES | QUEEN_OP_RUNS_LAST,
		QUEEN_WIRE_LAYOUT(QueenArgsPop, queen_pop_fields), QUEEN_NO_FIELDS,
		queen_op_pop_run, queen_op_pop_render, NULL, NULL, NULL
	},
	[QUEEN_CONTROL_ACK] = {
		"ack", "queen: ack", QUEEN_OP_CONSUMES | QUEEN_OP_SHARES,
		QUEEN_WIRE_LAYOUT(QueenArgsAck, queen_ack_fields),
		QUEEN_WIRE_LAYOUT(QueenArgsAckItem, queen_ack_item_fields),
		queen_op_ack_run, queen_op_ack_render, queen_op_ack_fail, queen_op_ack_lock, NULL
	},
	[QUEEN_CONTROL_RENEW] = {
		"lease extension", "queen: lease extension", QUEEN_OP_CONSUMES | QUEEN_OP_SHARES,
		QUEEN_WIRE_LAYOUT(QueenArgsRenew, queen_renew_fields), QUEEN_NO_FIELDS,
		queen_op_renew_run, queen_op_renew_render, NULL, queen_op_renew_lock, NULL
	},
	[QUEEN_CONTROL_DLQ] = {
		"dead-letter listing", "queen: dead letters", QUEEN_OP_CONSUMES | QUEEN_OP_SHARES,
		QUEEN_WIRE_LAYOUT(QueenArgsDlq, queen_dlq_fields), QUEEN_NO_FIELDS,
		queen_op_dlq_run, queen_op_dlq_render, NULL, NULL, NULL
	},
	[QUEEN_CONTROL_DELETE_GROUP] = {
		"consumer group deletion", "queen: delete consumer group", QUEEN_OP_CONSUMES,
		QUEEN_WIRE_LAYOUT(QueenArgsGroupDelete, queen_group_delete_fields), QUEEN_NO_FIELDS,
		queen_op_group_delete_run, queen_op_group_delete_render, NULL, NULL, NULL
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

void
queen_control_put_args(StringInfo arg, uint8 op, const void *args)
{
	queen_wire_put_fields(arg, &queen_control_op(op)->args, args);
}

void
queen_control_put_item(StringInfo arg, uint8 op, const void *item)
{
	queen_wire_put_fields(arg, &queen_control_op(op)->items, item);
}

/* Decode an operation's arguments; false when they are malformed. */
bool
queen_control_get_args(QueenMsgReader *r, uint8 op, void *args)
{
	const QueenControlOpDef *def = queen_control_op(op);

	if (def == NULL || !queen_wire_get_fields(r, &def->args, args))
		return false;
	/* only an operation with items may carry more than its arguments */
	return def->items.nfields > 0 || r->pos == r->len;
}
