/*-------------------------------------------------------------------------
 *
 * module.c
 *	  Extension entry point.
 *
 * Queen works without being preloaded: the SQL door only needs its
 * settings and the dedup cache's transaction callbacks, set up here on
 * first load.  Only when preloaded does it also request the broker's
 * shared memory and register its workers (worker.c).
 *
 *-------------------------------------------------------------------------
 */
#include "queen.h"
#include "broker/worker.h"

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
	if (process_shared_preload_libraries_in_progress)
		queen_broker_preload();
}
