/*-------------------------------------------------------------------------
 *
 * shard.h
 *	  The parts of a fusion shard beside its groups and bundles (shard.c):
 *	  its answers to the listeners (shard_answer.c) and its control
 *	  requests (shard_control.c).  Included only by the shard's own files;
 *	  all of it is private to the shard's process.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_SHARD_H
#define QUEEN_SHARD_H

#include "broker.h"
#include "wire.h"

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

/* Consumption requests (shard_consume.c), run as control requests */
extern int	queen_shard_consume(uint8 op, const pg_uuid_t *tenant, const char *arg,
								uint32 arglen, StringInfo out);
extern int	queen_shard_consume_failed(uint8 op, const char *arg, uint32 arglen,
									   int sqlerrcode, const char *message, StringInfo out);
extern void queen_shard_consume_done(bool committed);
extern void queen_shard_consume_lock(int n, const uint8 *ops, char *const *args,
									 const uint32 *arglens);
extern void queen_shard_consume_discard(void);
extern void queen_shard_consume_begin(void);
extern void queen_shard_consume_restamp(void);

#endif							/* QUEEN_SHARD_H */
