/*-------------------------------------------------------------------------
 *
 * drained.h
 *	  The ledger of spooled work already committed (drained.c): the keys
 *	  in queen.spool_drained that make the broker's drain exactly once.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_DRAINED_H
#define QUEEN_DRAINED_H

#include "queen.h"

extern bool queen_drained_parts_exist(const char *file);
extern bool queen_drained_record(const char *key, int64 items);
extern void queen_drained_forget_parts(const char *file);
extern void queen_drained_expire(void);

#endif							/* QUEEN_DRAINED_H */
