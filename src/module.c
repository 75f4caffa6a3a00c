/*-------------------------------------------------------------------------
 *
 * module.c
 *	  Extension entry point.
 *
 * Queen works without being preloaded: the SQL door only needs its
 * settings and its transaction callbacks (the dedup cache's, the
 * allocator's, the waiting pops' wakes), set up here on first load.  Only
 * when preloaded does it also request shared memory (the SQL waiters' and
 * the broker's) and register the broker's workers (worker.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "queen.h"
#include "broker/worker.h"
#include "wait.h"

#include "fmgr.h"
#include "miscadmin.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

void
_PG_init(void)
{
	queen_define_gucs();
	queen_dedup_cache_init();
	queen_alloc_init();
	queen_wait_init();
	if (process_shared_preload_libraries_in_progress)
	{
		queen_wait_preload();
		queen_broker_preload();
	}
}
