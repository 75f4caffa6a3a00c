/*-------------------------------------------------------------------------
 *
 * guc.c
 *	  Every queen.* setting, defined in one place.
 *
 * Settings are defined when the library loads (lazily on first use of a
 * function, or at postmaster start with shared_preload_libraries).  After
 * defining them the "queen" prefix is reserved so a misspelt queen.* setting
 * is reported instead of silently ignored.
 *
 *-------------------------------------------------------------------------
 */
#include "queen.h"

#include "utils/guc.h"

/* zstd level for segment blobs; Queen's default is 3 */
int			queen_zstd_level = 3;

/* per-process budget of the dedup cache (dedup_cache.c); 0 turns it off */
int			queen_dedup_cache_mb = 32;

/* tenant the SQL door acts for; the HTTP door takes it from a header instead */
char	   *queen_tenant_setting = NULL;

/* parsed form of queen.tenant, kept by the assign hook */
static pg_uuid_t queen_tenant_value;

static bool
queen_tenant_check(char **newval, void **extra, GucSource source)
{
	pg_uuid_t	parsed;
	pg_uuid_t  *copy;

	(void) source;
	if (*newval == NULL || !queen_uuid_parse(*newval, &parsed))
	{
		GUC_check_errdetail("queen.tenant must be a UUID such as %s.",
							QUEEN_DEFAULT_TENANT);
		return false;
	}
	/* the GUC machinery frees extra with free(), so it must come from malloc */
	copy = (pg_uuid_t *) malloc(sizeof(pg_uuid_t));
	if (copy == NULL)
	{
		GUC_check_errcode(ERRCODE_OUT_OF_MEMORY);
		GUC_check_errmsg("out of memory");
		return false;
	}
	*copy = parsed;
	*extra = copy;
	return true;
}

static void
queen_tenant_assign(const char *newval, void *extra)
{
	(void) newval;
	if (extra != NULL)
		queen_tenant_value = *(pg_uuid_t *) extra;
}

/* The tenant this session pushes and reads as. */
void
queen_session_tenant(pg_uuid_t *out)
{
	*out = queen_tenant_value;
}

void
queen_define_gucs(void)
{
	DefineCustomIntVariable("queen.zstd_level",
							"zstd compression level for stored segments.",
							"Higher levels trade push CPU for smaller segments; 3 is Queen's default.",
							&queen_zstd_level,
							3, 1, 19,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queen.dedup_cache_mb",
							"Memory each process may use to remember the transactionId hashes it has verified.",
							"A push then reads only what other sessions wrote since; 0 turns the cache off and every push reads its partition's whole dedup window.",
							&queen_dedup_cache_mb,
							32, 0, 65536,
							PGC_USERSET,
							GUC_UNIT_MB,
							NULL, NULL, NULL);

	DefineCustomStringVariable("queen.tenant",
							   "Tenant that queen.push and queen.read act for in this session.",
							   "An opaque scope: two tenants may use the same queue names without sharing data.",
							   &queen_tenant_setting,
							   QUEEN_DEFAULT_TENANT,
							   PGC_USERSET,
							   0,
							   queen_tenant_check, queen_tenant_assign, NULL);

	MarkGUCPrefixReserved("queen");
}
