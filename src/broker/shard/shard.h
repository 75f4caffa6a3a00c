/*-------------------------------------------------------------------------
 *
 * shard.h
 *	  The parts of a fusion shard beside its groups and bundles (shard.c):
 *	  its answers to the listeners (shard_answer.c), its control
 *	  operations' runner (shard_control.c) and the functions the rows of
 *	  the operation table name (ops.c).  Private to the shard's process,
 *	  but for those functions, which ops.c names.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_SHARD_H
#define QUEEN_SHARD_H

#include "broker.h"
#include "ops.h"

/* Answers to listeners (shard_answer.c) */
extern void queen_shard_answers_init(int shard, MemoryContext cxt);
extern void queen_shard_flush_answers(void);
extern bool queen_shard_answers_pending(void);
extern void queen_answer_send(int listener, StringInfo msg);
extern StringInfo queen_verdict_new(uint64 request, uint32 group, QueenGroupOutcome outcome,
									uint32 nframes);
extern void queen_answer_group(int listener, uint64 request, uint32 group,
							   QueenGroupOutcome outcome);
extern void queen_answer_reply(int listener, uint64 request, int status, const char *body,
							   Size len);

/* Control requests (shard_control.c) */
extern void queen_shard_controls_init(const char *who, MemoryContext keep_cxt,
									  MemoryContext run_cxt);
extern void queen_shard_take_control(int listener, StringInfo raw);
extern bool queen_shard_run_controls(void);

/*
 * The operations' functions, named by their rows (ops.c): health,
 * configure and delete queue (shard_admin.c), the consumption operations
 * (shard_consume.c), a transaction of pushes and acks (shard_txn.c).
 */
extern void *queen_op_health_run(QueenOpCall *call);
extern int	queen_op_health_render(QueenOpCall *call, void *result, StringInfo out);
extern int	queen_op_health_fail(QueenOpCall *call, const char *message, StringInfo out);
extern void *queen_op_configure_run(QueenOpCall *call);
extern int	queen_op_configure_render(QueenOpCall *call, void *result, StringInfo out);
extern void *queen_op_delete_queue_run(QueenOpCall *call);
extern int	queen_op_delete_queue_render(QueenOpCall *call, void *result, StringInfo out);
extern void queen_op_catalog_changed(QueenOpCall *call);
extern void *queen_op_admin_run(QueenOpCall *call);
extern int	queen_op_admin_render(QueenOpCall *call, void *result, StringInfo out);

extern void *queen_op_pop_run(QueenOpCall *call);
extern int	queen_op_pop_render(QueenOpCall *call, void *result, StringInfo out);
extern void *queen_op_ack_run(QueenOpCall *call);
extern int	queen_op_ack_render(QueenOpCall *call, void *result, StringInfo out);
extern int	queen_op_ack_fail(QueenOpCall *call, const char *message, StringInfo out);
extern void queen_op_ack_lock(QueenOpCall *call, QueenOpLocks *locks);
extern void *queen_op_renew_run(QueenOpCall *call);
extern int	queen_op_renew_render(QueenOpCall *call, void *result, StringInfo out);
extern void queen_op_renew_lock(QueenOpCall *call, QueenOpLocks *locks);
extern void *queen_op_dlq_run(QueenOpCall *call);
extern int	queen_op_dlq_render(QueenOpCall *call, void *result, StringInfo out);
extern void *queen_op_group_delete_run(QueenOpCall *call);
extern int	queen_op_group_delete_render(QueenOpCall *call, void *result, StringInfo out);

/* POST /api/v1/transaction (shard_txn.c) */
extern void *queen_op_txn_run(QueenOpCall *call);
extern int	queen_op_txn_render(QueenOpCall *call, void *result, StringInfo out);
extern int	queen_op_txn_fail(QueenOpCall *call, const char *message, StringInfo out);
extern void queen_op_txn_committed(QueenOpCall *call);

/* Traces (shard_traces.c) */
extern void *queen_op_trace_run(QueenOpCall *call);
extern int	queen_op_trace_render(QueenOpCall *call, void *result, StringInfo out);
extern void *queen_op_traces_run(QueenOpCall *call);
extern int	queen_op_traces_render(QueenOpCall *call, void *result, StringInfo out);

/* Stream processing's registration and state reads (shard_streams.c) */
extern void *queen_op_stream_register_run(QueenOpCall *call);
extern int	queen_op_stream_register_render(QueenOpCall *call, void *result, StringInfo out);
extern void *queen_op_stream_state_run(QueenOpCall *call);
extern int	queen_op_stream_state_render(QueenOpCall *call, void *result, StringInfo out);

/* The consumption transaction around the operations (shard_consume.c) */
extern void queen_shard_consume_begin(void);
extern void queen_shard_consume_restamp(void);
extern void queen_shard_consume_done(bool committed);
extern void queen_shard_consume_discard(void);
extern void queen_shard_consume_reset(void);
extern void queen_consume_wake_released(void);
extern void queen_ack_item_from_wire(const QueenArgsAckItem *w, QueenAckItem *it);

#endif							/* QUEEN_SHARD_H */
