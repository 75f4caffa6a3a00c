/*-------------------------------------------------------------------------
 *
 * module.c
 *	  Extension entry point.
 *
 * Queen works without being preloaded: the SQL door only needs its
 * settings and the dedup cache's transaction callbacks, set up here on
 * first load.  Background workers and shared
 * memory are registered from here too once the broker exists.
 *
 *-------------------------------------------------------------------------
 */
#include "queen.h"

#include "fmgr.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

void
_PG_init(void)
{
	queen_define_gucs();
	queen_dedup_cache_init();
}
