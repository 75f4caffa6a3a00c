/*-------------------------------------------------------------------------
 *
 * permits.h
 *	  The push permit pool (permits.c): a shard takes a permit per bundle
 *	  and gives it back with the bundle's timings, which move the limit.
 *
 * The pool is permits.c's own shared memory; these are the only ways to
 * touch it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_PERMITS_H
#define QUEEN_PERMITS_H

#include "broker.h"

extern Size queen_permits_shmem_size(void);
extern void queen_permits_shmem_init(void);
extern bool queen_permit_try_acquire(int shard);
extern void queen_permit_cancel_wait(int shard);
extern void queen_permit_release(int shard, int nsegments, int64 exec_us, int64 commit_us);
extern void queen_permits_reclaim(int shard, const char *when);
extern void queen_permits_reconfigure(void);

#endif							/* QUEEN_PERMITS_H */
