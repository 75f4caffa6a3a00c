/*-------------------------------------------------------------------------
 *
 * fuzz_broker.h
 *	  shim_broker.c's face to the targets that run the listener's
 *	  handlers (fuzz_bodies, fuzz_http).
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_FUZZ_BROKER_H
#define QUEEN_FUZZ_BROKER_H

/* Answer what the last handler took on, as its shard would; how many. */
extern int	fuzz_settle(void);

/* Every answer must be JSON when it says so: abort() if not. */
extern void fuzz_check_answer(int status, const char *content_type,
							  const char *body, size_t len);

#endif							/* QUEEN_FUZZ_BROKER_H */
