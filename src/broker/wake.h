/*-------------------------------------------------------------------------
 *
 * wake.h
 *	  Wake-ups for parked long-polls (wake.c): what a shard marks during a
 *	  transaction and publishes after its COMMIT, and the generations a
 *	  listener reads to know that trying again may deliver.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_WAKE_H
#define QUEEN_WAKE_H

#include "wait.h"

extern Size queen_wake_shmem_size(void);
extern void queen_wake_shmem_init(void);
extern void queen_wake_install(void);
extern void queen_wake_mark(const pg_uuid_t *tenant, const char *queue, Size qlen);
extern void queen_wake_mark_slot(int slot);
extern void queen_wake_forget(void);
extern int	queen_wake_publish(void);
extern void queen_wake_catalog(bool deleted);
extern uint64 queen_wake_generation(int slot);

#endif							/* QUEEN_WAKE_H */
