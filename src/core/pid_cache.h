/*-------------------------------------------------------------------------
 *
 * pid_cache.h
 *	  The per-process cache of partition ids by name (pid_cache.c), which
 *	  the write path consults to pre-lock by primary key.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_PID_CACHE_H
#define QUEEN_PID_CACHE_H

#include "log_write.h"

typedef struct QueenPidKey
{
	uint8		digest[16];		/* XXH3-128 of tenant, queue, 0x1F, partition */
} QueenPidKey;

extern char *queen_pid_ident(const QueenSegment *seg, Size *len);
extern void queen_pid_key(const char *ident, Size len, QueenPidKey *key);
extern bool queen_pid_cache_get(const char *ident, Size len, const QueenPidKey *key,
								pg_uuid_t *pid);
extern void queen_pid_cache_put(const char *ident, Size len, const QueenPidKey *key,
								const pg_uuid_t *pid);
extern void queen_pid_cache_forget(const QueenPidKey *key);

#endif							/* QUEEN_PID_CACHE_H */
