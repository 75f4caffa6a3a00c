/*-------------------------------------------------------------------------
 *
 * maintenance.h
 *	  What the maintenance worker's loop (maintenance_worker.c) runs beside
 *	  the drain: the consumer lag sample for /metrics (lag.c) and the
 *	  sorting of stored hashes into dedup runs (dedup_index.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_MAINTENANCE_H
#define QUEEN_MAINTENANCE_H

#include "broker.h"

extern Size queen_lag_shmem_size(void);
extern void queen_lag_shmem_init(void);
extern void queen_lag_sample(void);
extern bool queen_dedup_index_pass(void);

#endif							/* QUEEN_MAINTENANCE_H */
