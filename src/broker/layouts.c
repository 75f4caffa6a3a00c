/*-------------------------------------------------------------------------
 *
 * layouts.c
 *	  The layout of everything that crosses a ring, in one place: each
 *	  message's fields after its head (wire.c writes and reads them) and
 *	  each control operation's arguments and items (ops.c names them in
 *	  the operation's row).  A layout is data: the fields of a struct in
 *	  the order they travel, by kind and offset, for the one pair of
 *	  walkers in wire.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "ops.h"

/*
 * The messages after their head (u8 type, u64 request):
 *
 * PUSH (listener -> shard): u32 group, 16-byte tenant, queue, partition,
 * u32 frame count, then the frames packed exactly as stored
 * (docs/FORMAT.md), which the caller appends.
 * CONTROL (listener -> shard): u8 op, 16-byte tenant, the argument.
 * VERDICT (shard -> listener): u32 group, u8 group outcome, u32 frame
 * count, then per frame u8 status and 16-byte message id
 * (queen_wire_put_verdict_frame, nframes times).
 * REPLY (shard -> listener): u16 HTTP status, the body.
 */
static const QueenWireField queen_push_fields[] = {
	QUEEN_WIRE_FIELD(QueenWirePush, group, QUEEN_WIRE_U32),
	QUEEN_WIRE_FIELD(QueenWirePush, tenant, QUEEN_WIRE_UUID),
	QUEEN_WIRE_FIELD(QueenWirePush, queue, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenWirePush, partition, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenWirePush, nframes, QUEEN_WIRE_U32),
};

static const QueenWireField queen_control_fields[] = {
	QUEEN_WIRE_FIELD(QueenWireControl, op, QUEEN_WIRE_U8),
	QUEEN_WIRE_FIELD(QueenWireControl, tenant, QUEEN_WIRE_UUID),
	QUEEN_WIRE_FIELD(QueenWireControl, arg, QUEEN_WIRE_TEXT),
};

static const QueenWireField queen_verdict_fields[] = {
	QUEEN_WIRE_FIELD(QueenWireVerdict, group, QUEEN_WIRE_U32),
	QUEEN_WIRE_FIELD(QueenWireVerdict, outcome, QUEEN_WIRE_U8),
	QUEEN_WIRE_FIELD(QueenWireVerdict, nframes, QUEEN_WIRE_U32),
};

static const QueenWireField queen_reply_fields[] = {
	QUEEN_WIRE_FIELD(QueenWireReply, status, QUEEN_WIRE_U16),
	QUEEN_WIRE_FIELD(QueenWireReply, body, QUEEN_WIRE_TEXT),
};

const QueenWireLayout queen_msg_layouts[QUEEN_MSG_NTYPES] = {
	[QUEEN_MSG_PUSH] = QUEEN_WIRE_LAYOUT(QueenWirePush, queen_push_fields),
	[QUEEN_MSG_CONTROL] = QUEEN_WIRE_LAYOUT(QueenWireControl, queen_control_fields),
	[QUEEN_MSG_VERDICT] = QUEEN_WIRE_LAYOUT(QueenWireVerdict, queen_verdict_fields),
	[QUEEN_MSG_REPLY] = QUEEN_WIRE_LAYOUT(QueenWireReply, queen_reply_fields),
};

/*
 * The control operations' arguments (ops.h's structs), after the CONTROL
 * message's head: each field in order.
 */
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

static const QueenWireField queen_txn_fields[] = {
	QUEEN_WIRE_FIELD(QueenArgsTxn, nitems, QUEEN_WIRE_I32),
	QUEEN_WIRE_FIELD(QueenArgsTxn, cycle, QUEEN_WIRE_U8),
	QUEEN_WIRE_FIELD(QueenArgsTxn, release_lease, QUEEN_WIRE_U8),
	QUEEN_WIRE_FIELD(QueenArgsTxn, query_id, QUEEN_WIRE_UUID),
	QUEEN_WIRE_FIELD(QueenArgsTxn, partition_id, QUEEN_WIRE_UUID),
};

static const QueenWireField queen_txn_item_fields[] = {
	QUEEN_WIRE_FIELD(QueenArgsTxnItem, kind, QUEEN_WIRE_U8),
	QUEEN_WIRE_FIELD(QueenArgsTxnItem, queue, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenArgsTxnItem, partition, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenArgsTxnItem, txn, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenArgsTxnItem, frame, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenArgsTxnItem, group, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenArgsTxnItem, lease, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenArgsTxnItem, key, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenArgsTxnItem, value, QUEEN_WIRE_TEXT),
};

static const QueenWireField queen_stream_register_fields[] = {
	QUEEN_WIRE_FIELD(QueenArgsStreamRegister, name, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenArgsStreamRegister, source_queue, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenArgsStreamRegister, sink_queue, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenArgsStreamRegister, config_hash, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenArgsStreamRegister, reset, QUEEN_WIRE_U8),
};

static const QueenWireField queen_stream_state_fields[] = {
	QUEEN_WIRE_FIELD(QueenArgsStreamState, query_id, QUEEN_WIRE_UUID),
	QUEEN_WIRE_FIELD(QueenArgsStreamState, partition_id, QUEEN_WIRE_UUID),
	QUEEN_WIRE_FIELD(QueenArgsStreamState, key_prefix, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenArgsStreamState, ripe, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenArgsStreamState, nkeys, QUEEN_WIRE_I32),
};

static const QueenWireField queen_trace_fields[] = {
	QUEEN_WIRE_FIELD(QueenArgsTrace, partition_id, QUEEN_WIRE_UUID),
	QUEEN_WIRE_FIELD(QueenArgsTrace, txn, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenArgsTrace, group, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenArgsTrace, event_type, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenArgsTrace, data, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenArgsTrace, names, QUEEN_WIRE_TEXT),
};

static const QueenWireField queen_traces_fields[] = {
	QUEEN_WIRE_FIELD(QueenArgsTraces, listing, QUEEN_WIRE_U8),
	QUEEN_WIRE_FIELD(QueenArgsTraces, partition_id, QUEEN_WIRE_UUID),
	QUEEN_WIRE_FIELD(QueenArgsTraces, txn, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenArgsTraces, name, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenArgsTraces, from, QUEEN_WIRE_I64),
	QUEEN_WIRE_FIELD(QueenArgsTraces, to, QUEEN_WIRE_I64),
	QUEEN_WIRE_FIELD(QueenArgsTraces, limit, QUEEN_WIRE_I32),
	QUEEN_WIRE_FIELD(QueenArgsTraces, offset, QUEEN_WIRE_I64),
};

static const QueenWireField queen_admin_fields[] = {
	QUEEN_WIRE_FIELD(QueenArgsAdmin, request, QUEEN_WIRE_U8),
	QUEEN_WIRE_FIELD(QueenArgsAdmin, text0, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenArgsAdmin, text1, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenArgsAdmin, text2, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenArgsAdmin, text3, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenArgsAdmin, text4, QUEEN_WIRE_TEXT),
	QUEEN_WIRE_FIELD(QueenArgsAdmin, limit, QUEEN_WIRE_I32),
	QUEEN_WIRE_FIELD(QueenArgsAdmin, offset, QUEEN_WIRE_I64),
	QUEEN_WIRE_FIELD(QueenArgsAdmin, number, QUEEN_WIRE_I32),
	QUEEN_WIRE_FIELD(QueenArgsAdmin, flag, QUEEN_WIRE_U8),
	QUEEN_WIRE_FIELD(QueenArgsAdmin, from, QUEEN_WIRE_I64),
	QUEEN_WIRE_FIELD(QueenArgsAdmin, to, QUEEN_WIRE_I64),
};

const QueenWireLayout queen_args_text = QUEEN_WIRE_LAYOUT(QueenArgsText, queen_text_fields);
const QueenWireLayout queen_args_pop = QUEEN_WIRE_LAYOUT(QueenArgsPop, queen_pop_fields);
const QueenWireLayout queen_args_ack = QUEEN_WIRE_LAYOUT(QueenArgsAck, queen_ack_fields);
const QueenWireLayout queen_args_ack_item = QUEEN_WIRE_LAYOUT(QueenArgsAckItem, queen_ack_item_fields);
const QueenWireLayout queen_args_renew = QUEEN_WIRE_LAYOUT(QueenArgsRenew, queen_renew_fields);
const QueenWireLayout queen_args_dlq = QUEEN_WIRE_LAYOUT(QueenArgsDlq, queen_dlq_fields);
const QueenWireLayout queen_args_group_delete = QUEEN_WIRE_LAYOUT(QueenArgsGroupDelete, queen_group_delete_fields);
const QueenWireLayout queen_args_txn = QUEEN_WIRE_LAYOUT(QueenArgsTxn, queen_txn_fields);
const QueenWireLayout queen_args_txn_item = QUEEN_WIRE_LAYOUT(QueenArgsTxnItem, queen_txn_item_fields);
const QueenWireLayout queen_args_trace = QUEEN_WIRE_LAYOUT(QueenArgsTrace, queen_trace_fields);
const QueenWireLayout queen_args_traces = QUEEN_WIRE_LAYOUT(QueenArgsTraces, queen_traces_fields);
const QueenWireLayout queen_args_stream_register = QUEEN_WIRE_LAYOUT(QueenArgsStreamRegister, queen_stream_register_fields);
const QueenWireLayout queen_args_stream_state = QUEEN_WIRE_LAYOUT(QueenArgsStreamState, queen_stream_state_fields);
const QueenWireLayout queen_args_admin = QUEEN_WIRE_LAYOUT(QueenArgsAdmin, queen_admin_fields);
