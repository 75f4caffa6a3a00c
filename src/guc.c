/*-------------------------------------------------------------------------
 *
 * guc.c
 *	  Every queen.* setting, defined in one place.
 *
 * Settings are defined when the library loads: at postmaster start with
 * shared_preload_libraries, or in a session, on the first call of a queen
 * function or a LOAD, in a cluster that does not preload it (the SQL door
 * needs no broker).  After defining them the "queen" prefix is reserved so
 * a misspelt queen.* setting is reported instead of silently ignored.
 *
 * The broker's process layout, addresses and spool are fixed when the
 * postmaster starts, so they are PGC_POSTMASTER settings; but PostgreSQL
 * ends the session (FATAL) that defines a PGC_POSTMASTER setting anywhere
 * but in shared_preload_libraries.  A library loaded by a session runs no
 * broker, and nothing reads those settings there, so it defines them as
 * PGC_SIGHUP instead: a postgresql.conf written for the broker (a cluster
 * that once preloaded queen) still loads in every session without a
 * warning, and the prefix can stay reserved in both modes.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "queen.h"
#include "codec.h"
#include "crypto.h"
#include "broker/broker.h"

#include "miscadmin.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/varlena.h"

/* zstd level for segment blobs; Queen's default is 3 */
int			queen_zstd_level = 3;

/* per-process budget of the dedup cache (dedup_cache.c); 0 turns it off */
int			queen_dedup_cache_mb = 32;
int			queen_dedup_filter_mb = 64;

/* tenant the SQL door acts for; the HTTP door takes it from a header instead */
char	   *queen_tenant_setting = NULL;

/* what one pop may deliver, and the longest lease a consumer may hold */
int			queen_pop_max_bytes = 16 * 1024 * 1024;
int			queen_max_lease_seconds = 86400;

/* the SQL consumer's door: verdicts that raise, and NOTIFY on push commits */
bool		queen_strict_acks = false;
bool		queen_notify = false;

/* ---- the HTTP broker (broker.h says what each is for) ---- */
char	   *queen_database = NULL;
char	   *queen_http_listen_address = NULL;
int			queen_http_port = 6632;
char	   *queen_tenant_header = NULL;
int			queen_http_workers = 1;
int			queen_fusion_shards = 0;
int			queen_bundle_max = 256;
int			queen_fusion_hold_ms = 15;
int			queen_fusion_min_frames = 0;
int			queen_fusion_frames = 500;
int			queen_max_body_bytes = 64 * 1024 * 1024;
int			queen_http_idle_timeout_ms = 60000;
int			queen_http_header_timeout_ms = 10000;
int			queen_http_body_timeout_ms = 60000;
int			queen_http_max_connections = 10000;
int			queen_max_push_items = 10000;
int			queen_max_ack_items = 10000;
int			queen_consume_lock_timeout_ms = 100;
int			queen_push_permits_min = 2;
int			queen_push_permits_initial = 8;
int			queen_push_permits_max = 8;
char	   *queen_spool_directory = NULL;
int			queen_push_statement_timeout_ms = 30000;
bool		queen_maintenance_mode_setting = false;
int			queen_consumer_lag_interval_s = 10;
int			queen_trace_retention_s = 7 * 86400;
int			queen_retention_interval_ms = 5000;
int			queen_dedup_index_min_hashes = 4096;
int			queen_dlq_retention_s = 30 * 86400;
int			queen_partition_cleanup_days = 30;
int			queen_stats_interval_s = 10;
int			queen_stats_history_days = 7;
char	   *queen_retention_phases_setting = NULL;
int			queen_retention_phases = QUEEN_PHASE_ALL;
char	   *queen_test_fault_setting = NULL;

/* parsed form of queen.tenant, kept by the assign hook */
static pg_uuid_t queen_tenant_value;

/*
 * A value of queen.tenant that was SET before the library was loaded in
 * this session and that PostgreSQL refused when the library defined the
 * setting, or NULL.  See queen_define_core_gucs.
 */
static char *queen_tenant_refused = NULL;

/*
 * A check hook's parsed value as its extra: the GUC machinery frees extra
 * with free(), so it must come from malloc.  False (out of memory) after
 * saying so.
 */
static bool
queen_guc_extra(const void *value, Size size, void **extra)
{
	void	   *copy = malloc(size);

	if (copy == NULL)
	{
		GUC_check_errcode(ERRCODE_OUT_OF_MEMORY);
		GUC_check_errmsg("out of memory");
		return false;
	}
	memcpy(copy, value, size);
	*extra = copy;
	return true;
}

static bool
queen_tenant_check(char **newval, void **extra, GucSource source)
{
	pg_uuid_t	parsed;

	(void) source;
	if (*newval == NULL || !queen_uuid_parse(*newval, &parsed))
	{
		GUC_check_errdetail("queen.tenant must be a UUID such as %s.",
							QUEEN_DEFAULT_TENANT);
		return false;
	}
	return queen_guc_extra(&parsed, sizeof(parsed), extra);
}

static void
queen_tenant_assign(const char *newval, void *extra)
{
	(void) newval;
	if (extra != NULL)
		queen_tenant_value = *(pg_uuid_t *) extra;
	/* any value assigned since replaces the refused one */
	queen_tenant_refused = NULL;
}

static void
queen_jwt_assign(const char *newval, void *extra)
{
	(void) newval;
	(void) extra;
	queen_jwt_settings_changed();
}

static void
queen_keys_assign(const char *newval, void *extra)
{
	(void) newval;
	(void) extra;
	queen_crypto_keys_changed();
}

/* The tenant this session pushes and reads as. */
void
queen_session_tenant(pg_uuid_t *out)
{
	if (queen_tenant_refused != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for parameter \"queen.tenant\": \"%s\"",
						queen_tenant_refused),
				 errdetail("It was set before the queen library was loaded, when it could not be checked; queen.tenant must be a UUID such as %s.",
						   QUEEN_DEFAULT_TENANT),
				 errhint("SET queen.tenant to a UUID, or RESET it.")));
	*out = queen_tenant_value;
}

/*
 * The core's settings, read by both doors: compression, the dedup cache's
 * budget, and the session's tenant.
 */
static void
queen_define_core_gucs(void)
{
	const char *tenant_set_before;

	DefineCustomIntVariable("queen.zstd_level",
							"zstd compression level for stored segments.",
							"Higher levels trade push CPU for smaller segments; 3 is Queen's default.",
							&queen_zstd_level,
							3, 1, 19,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queen.dedup_filter_mb",
							"Memory each process may use for Bloom filters of the dedup runs it probes.",
							"A filter answers most lookups of a run without reading it; a run whose filter does not fit is read by index for every incoming hash. 0 turns the filters off.",
							&queen_dedup_filter_mb,
							64, 0, 65536,
							PGC_USERSET,
							GUC_UNIT_MB,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queen.dedup_cache_mb",
							"Memory each process may use to remember the transactionId hashes it has verified.",
							"A push then reads only what other sessions wrote since; 0 turns the cache off and every push reads its partition's whole dedup window.",
							&queen_dedup_cache_mb,
							32, 0, 65536,
							PGC_USERSET,
							GUC_UNIT_MB,
							NULL, NULL, NULL);

	/*
	 * Without preloading, a session may SET queen.tenant before its first
	 * queen call.  PostgreSQL keeps that text unchecked and applies it only
	 * now, and a value the check refuses then is a WARNING that leaves the
	 * default tenant in force: the session would push into the default
	 * tenant's queues.  So a refusal is remembered, and acting as the tenant
	 * raises it until the setting is assigned again.
	 */
	tenant_set_before = GetConfigOption("queen.tenant", true, false);
	if (tenant_set_before != NULL)
		tenant_set_before = pstrdup(tenant_set_before);

	DefineCustomStringVariable("queen.tenant",
							   "Tenant that queen.push and queen.read act for in this session.",
							   "An opaque scope: two tenants may use the same queue names without sharing data.",
							   &queen_tenant_setting,
							   QUEEN_DEFAULT_TENANT,
							   PGC_USERSET,
							   0,
							   queen_tenant_check, queen_tenant_assign, NULL);

	if (tenant_set_before != NULL && strcmp(tenant_set_before, queen_tenant_setting) != 0)
		queen_tenant_refused = MemoryContextStrdup(TopMemoryContext, tenant_set_before);

	DefineCustomIntVariable("queen.pop_max_bytes",
							"Most a pop delivers at once, in bytes of messages and their keys.",
							"The first message is delivered whatever its size; the claim stops before the one that would pass this, so a deep backlog of big messages costs a pop this much memory, not the whole batch.",
							&queen_pop_max_bytes,
							16 * 1024 * 1024, 1024, MaxAllocSize / 4,
							PGC_USERSET,
							GUC_UNIT_BYTE,
							NULL, NULL, NULL);

	/* superuser-only: it bounds how long one consumer may keep others from a partition */
	DefineCustomIntVariable("queen.max_lease_seconds",
							"Longest lease a pop or a lease renewal may ask for.",
							"Longer requests are refused (HTTP 400, SQLSTATE 22023).",
							&queen_max_lease_seconds,
							86400, 1, INT_MAX / 2,
							PGC_SUSET,
							GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("queen.strict_acks",
							 "Makes queen.ack, nack, reject and renew raise an error when nothing was applied.",
							 "A call's strict argument overrides it.  An ack that did nothing then rolls back its transaction instead of letting it commit.",
							 &queen_strict_acks,
							 false,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	/* off by default: NOTIFY serializes the commits of concurrent pushers */
	DefineCustomBoolVariable("queen.notify",
							 "Sends NOTIFY on a queue's channel (queen.channel) from every commit that made it pending.",
							 "Once per queue per transaction, from pushes and from acks that release a lease, for applications that LISTEN.  Waiting pops do not need it when the library is preloaded.",
							 &queen_notify,
							 false,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
}


/* Each phase of retention by its name in queen.retention_phases. */
static const struct
{
	const char *name;
	int			bit;
}			queen_phase_names[] = {
	{"segments", QUEEN_PHASE_SEGMENTS},
	{"hashes", QUEEN_PHASE_HASHES},
	{"dlq", QUEEN_PHASE_DLQ},
	{"traces", QUEEN_PHASE_TRACES},
	{"partitions", QUEEN_PHASE_PARTITIONS},
};

static bool
queen_phases_check(char **newval, void **extra, GucSource source)
{
	char	   *raw;
	List	   *names;
	ListCell   *lc;
	int			bits = 0;

	(void) source;
	raw = pstrdup(*newval);
	if (!SplitIdentifierString(raw, ',', &names))
	{
		GUC_check_errdetail("List syntax is invalid.");
		return false;
	}
	foreach(lc, names)
	{
		const char *name = (const char *) lfirst(lc);
		int			i;

		for (i = 0; i < (int) lengthof(queen_phase_names); i++)
			if (strcmp(name, queen_phase_names[i].name) == 0)
				break;
		if (i == (int) lengthof(queen_phase_names))
		{
			GUC_check_errdetail("Unknown phase \"%s\": the phases are segments, hashes, dlq, traces and partitions.",
								name);
			return false;
		}
		bits |= queen_phase_names[i].bit;
	}
	return queen_guc_extra(&bits, sizeof(bits), extra);
}

static void
queen_phases_assign(const char *newval, void *extra)
{
	(void) newval;
	if (extra != NULL)
		queen_retention_phases = *(int *) extra;
}

/* Encryption at rest (core/crypto.c): the keys. */
static void
queen_define_crypto_gucs(void)
{
	/*
	 * The keys: read in every process that seals or opens (pushes, pops,
	 * reads, the spool), shown to superusers only.  A superuser may SET
	 * them for a session (the tests do); everyone else uses the server's.
	 */
	DefineCustomStringVariable("queen.encryption_key",
							   "Key that seals the payloads of encrypted queues (encryptionEnabled).",
							   "64 hexadecimal characters: an AES-256 key. Without a usable key pushes to encrypted queues are refused.",
							   &queen_encryption_key_setting,
							   "",
							   PGC_SUSET,
							   GUC_SUPERUSER_ONLY,
							   NULL, queen_keys_assign, NULL);
	DefineCustomStringVariable("queen.encryption_key_previous",
							   "The key before the last rotation: it opens what it sealed, and seals nothing.",
							   "64 hexadecimal characters, or empty.",
							   &queen_encryption_key_previous_setting,
							   "",
							   PGC_SUSET,
							   GUC_SUPERUSER_ONLY,
							   NULL, queen_keys_assign, NULL);
	DefineCustomStringVariable("queen.encryption_key_file",
							   "File holding the encryption key, used when queen.encryption_key is empty.",
							   "Relative to the data directory. The key on its first line, the previous key on an optional second; only its owner may read it.",
							   &queen_encryption_key_file_setting,
							   "",
							   PGC_SUSET,
							   GUC_SUPERUSER_ONLY,
							   NULL, queen_keys_assign, NULL);
}

/*
 * Retention's settings, read by the maintenance worker and by
 * queen.retention_run alike: how often, which phases, and the ages of
 * what no queue option governs; and the statistics' refresh.
 */
static void
queen_define_retention_gucs(void)
{
	DefineCustomIntVariable("queen.trace_retention",
							"How long traces (POST /api/v1/traces) are kept.",
							"The maintenance worker removes older ones, a batch at a time. 0 keeps them.",
							&queen_trace_retention_s,
							7 * 86400, 0, INT_MAX,
							PGC_SUSET,
							GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queen.retention_interval",
							"How often the maintenance worker applies the queues' retention.",
							"Each sweep steps every partition due under retentionSeconds or completedRetentionSeconds, one bounded transaction per step. 0 turns retention off in the broker (queen.retention_run still works).",
							&queen_retention_interval_ms,
							5000, 0, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomStringVariable("queen.retention_phases",
							   "Which phases of retention run.",
							   "A list of segments (the queues' retention rules and maxWaitTimeSeconds), hashes (the purge of transactionId hashes behind the dedup windows), dlq (queen.dlq_retention), traces (queen.trace_retention) and partitions (queen.partition_cleanup_days). Both the maintenance worker and queen.retention_run obey it.",
							   &queen_retention_phases_setting,
							   "segments, hashes, dlq, traces, partitions",
							   PGC_SUSET,
							   GUC_LIST_INPUT,
							   queen_phases_check, queen_phases_assign, NULL);

	DefineCustomIntVariable("queen.dlq_retention",
							"How long dead letters are kept.",
							"Older ones are removed by retention's dlq phase, a batch at a time. 0 keeps them.",
							&queen_dlq_retention_s,
							30 * 86400, 0, INT_MAX,
							PGC_SUSET,
							GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queen.partition_cleanup_days",
							"Days after which an idle, empty partition is removed.",
							"Only a partition retention emptied (no message, no transactionId hash), with no dead letter, stream state, lease or consumer activity in that time. A later push recreates it with offsets from 0. 0 keeps them.",
							&queen_partition_cleanup_days,
							30, 0, 36500,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queen.stats_interval",
							"How often the maintenance worker runs queen.stats_refresh().",
							"The overview routes and views read what it last found (their statsAge, refreshed_at). 0 stops it; POST /api/v1/stats/refresh still works.",
							&queen_stats_interval_s,
							10, 0, 86400,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queen.stats_history_days",
							"Days of per-minute queue figures queen.stats_refresh() keeps (queen.stats_history, queen.retention_history).",
							NULL,
							&queen_stats_history_days,
							7, 1, 3650,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);
}

/*
 * The HTTP broker from here on.  First its process layout and address,
 * fixed at postmaster start when it runs (fixed_at_start).
 */
static void
queen_define_broker_layout_gucs(GucContext fixed_at_start)
{
	/* authentication on the HTTP door (listener/auth.c): on when a key is set */
	DefineCustomStringVariable("queen.jwt_secret",
							   "Shared secret of HS256, HS384 and HS512 bearer tokens on the HTTP door.",
							   "Setting it (or queen.jwt_public_key_file) turns authentication on.",
							   &queen_jwt_secret,
							   "",
							   PGC_SIGHUP,
							   GUC_SUPERUSER_ONLY,
							   NULL, queen_jwt_assign, NULL);
	DefineCustomStringVariable("queen.jwt_public_key_file",
							   "PEM public key of RS256/RS384/RS512 (RSA) or EdDSA (Ed25519) bearer tokens.",
							   "Relative to the data directory. Setting it (or queen.jwt_secret) turns authentication on.",
							   &queen_jwt_public_key_file,
							   "",
							   PGC_SIGHUP,
							   0,
							   NULL, queen_jwt_assign, NULL);
	DefineCustomStringVariable("queen.jwt_issuer",
							   "The iss a token must carry; empty accepts any.",
							   NULL,
							   &queen_jwt_issuer,
							   "",
							   PGC_SIGHUP,
							   0,
							   NULL, NULL, NULL);
	DefineCustomStringVariable("queen.jwt_audience",
							   "The aud a token must name; empty accepts any.",
							   NULL,
							   &queen_jwt_audience,
							   "",
							   PGC_SIGHUP,
							   0,
							   NULL, NULL, NULL);
	DefineCustomIntVariable("queen.jwt_clock_skew",
							"Leeway for a token's exp and nbf.",
							NULL,
							&queen_jwt_clock_skew_s,
							30, 0, 3600,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomStringVariable("queen.jwt_skip_paths",
							   "Paths answered without a token, comma-separated.",
							   "Public routes (/health, /metrics/prometheus) need none anyway.",
							   &queen_jwt_skip_paths,
							   "/health,/metrics/prometheus",
							   PGC_SIGHUP,
							   GUC_LIST_INPUT,
							   NULL, NULL, NULL);

	DefineCustomStringVariable("queen.tenant_header",
							   "HTTP header naming the tenant (a UUID) a request acts for; empty: every request is the default tenant.",
							   "Only behind a proxy that sets it and strips what clients send: the broker trusts it as it comes.",
							   &queen_tenant_header,
							   "",
							   PGC_SIGHUP,
							   0,
							   NULL, NULL, NULL);

	DefineCustomStringVariable("queen.database",
							   "Database the HTTP broker's workers connect to.",
							   "The extension must be created there; the workers wait until the database and the extension exist.",
							   &queen_database,
							   "postgres",
							   fixed_at_start,
							   0,
							   NULL, NULL, NULL);

	DefineCustomStringVariable("queen.http_listen_address",
							   "Address the HTTP broker listens on.",
							   "A host name or IP address; * means every address.",
							   &queen_http_listen_address,
							   "127.0.0.1",
							   fixed_at_start,
							   0,
							   NULL, NULL, NULL);

	DefineCustomIntVariable("queen.http_port",
							"TCP port of the HTTP broker.",
							NULL,
							&queen_http_port,
							6632, 1, 65535,
							fixed_at_start,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queen.http_workers",
							"Number of HTTP listener workers; 0 turns the broker off.",
							"Several listeners share the port with SO_REUSEPORT.",
							&queen_http_workers,
							1, 0, QUEEN_MAX_LISTENERS,
							fixed_at_start,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queen.fusion_shards",
							"Number of fusion shard workers, each with its own database connection.",
							"0 (the default) picks two per CPU core the server sees, between 2 and 8. A shard owns a disjoint set of partitions and runs one bundle transaction at a time.",
							&queen_fusion_shards,
							0, 0, QUEEN_MAX_SHARDS,
							fixed_at_start,
							0,
							NULL, NULL, NULL);
}

/* How the fusion shards gather frames into bundles. */
static void
queen_define_fusion_gucs(void)
{
	DefineCustomIntVariable("queen.bundle_max",
							"Most partitions committed together in one bundle transaction.",
							NULL,
							&queen_bundle_max,
							256, 1, 1024,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queen.fusion_hold_ms",
							"Liveness backstop tick of a fusion shard that is waiting for a push permit.",
							"Not a batching window: arrivals and completions already wake the shard.",
							&queen_fusion_hold_ms,
							15, 1, 10000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queen.fusion_min_frames",
							"Experiment only: a shard sends no bundle until one of its ready groups has this many frames or has waited 2 ms; then it sends every ready group.",
							"0 turns the floor off, and dispatch is then exactly as without it.",
							&queen_fusion_min_frames,
							0, 0, 1000000,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queen.fusion_frames",
							"Parsed and shown for compatibility with Queen; not a flush trigger.",
							"Segment size is emergent: whatever arrived during the previous flush.",
							&queen_fusion_frames,
							500, 1, 1000000,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);
}

/* The listeners' limits on connections, requests and bodies. */
static void
queen_define_http_gucs(void)
{
	DefineCustomIntVariable("queen.max_body_bytes",
							"Largest HTTP request body the broker accepts; larger ones get 413.",
							NULL,
							&queen_max_body_bytes,
							64 * 1024 * 1024, 1024, QUEEN_MAX_BODY_LIMIT,
							PGC_SIGHUP,
							GUC_UNIT_BYTE,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queen.http_idle_timeout",
							"Close HTTP connections idle between requests for this long.",
							NULL,
							&queen_http_idle_timeout_ms,
							60000, 100, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queen.http_header_timeout",
							"Answer 408 and close when a request's header is not complete this long after its first byte.",
							"Bytes arriving do not extend it; 0 = no limit.",
							&queen_http_header_timeout_ms,
							10000, 0, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queen.http_body_timeout",
							"Answer 408 and close when a request's body is not complete this long after its header.",
							"Bytes arriving do not extend it; 0 = no limit.",
							&queen_http_body_timeout_ms,
							60000, 0, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queen.http_max_connections",
							"Open HTTP connections per listener; a client over it gets 503.",
							"The listener raises its open-file limit to fit them; a lower hard limit lowers it.",
							&queen_http_max_connections,
							10000, 1, 1000000,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queen.max_push_items",
							"Most items in one HTTP push; a body with more gets 413.",
							"It bounds the listener's memory per request, which grows with the items.",
							&queen_max_push_items,
							10000, 1, 10000000,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queen.max_ack_items",
							"Most acknowledgments in one HTTP ack; a body with more gets 413, and a pop may ask for at most this many messages.",
							"It bounds the listener's and the shard's memory per ack, which grows with the items; a pop's batch is bounded by it so that what one pop delivers can be acknowledged in one request.",
							&queen_max_ack_items,
							10000, 1, 10000000,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);
}

/*
 * The broker's push permit pool, spool, statement timeout and maintenance
 * mode, and the test-only fault.
 */
static void
queen_define_delivery_gucs(GucContext fixed_at_start)
{
	DefineCustomIntVariable("queen.push_permits_min",
							"Lowest limit of the shared push permit pool (bundles in flight).",
							NULL,
							&queen_push_permits_min,
							2, 1, QUEEN_MAX_SHARDS,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queen.push_permits_initial",
							"Starting limit of the shared push permit pool.",
							NULL,
							&queen_push_permits_initial,
							8, 1, QUEEN_MAX_SHARDS,
							fixed_at_start,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queen.push_permits_max",
							"Highest limit of the shared push permit pool.",
							"A shard holds at most one permit, so values above queen.fusion_shards act as queen.fusion_shards.",
							&queen_push_permits_max,
							8, 1, QUEEN_MAX_SHARDS,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomStringVariable("queen.spool_directory",
							   "Directory of the broker's disk spool.",
							   "Items that cannot be committed now (maintenance mode, a failed bundle) are written here and drained later. A relative path is under the data directory.",
							   &queen_spool_directory,
							   "queen_spool",
							   fixed_at_start,
							   0,
							   NULL, NULL, NULL);

	DefineCustomIntVariable("queen.push_statement_timeout",
							"Longest a broker transaction may run before it is cancelled and rolled back.",
							"A push bundle that exceeds it goes to the disk spool. 0 means no limit.",
							&queen_push_statement_timeout_ms,
							30000, 0, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queen.consume_lock_timeout",
							"Longest a shard's pop, ack or lease renewal waits for a row another transaction holds.",
							"An application's open transaction that popped or acknowledged from SQL holds its consumer rows until it ends; past this wait the request is answered 503 (retry) and the shard moves on to its other work.",
							&queen_consume_lock_timeout_ms,
							100, 1, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("queen.maintenance_mode",
							 "Send every HTTP push to the disk spool instead of the database.",
							 "A reload that changes it sets the broker's maintenance flag, which POST /api/v1/system/maintenance also sets; the last change wins.",
							 &queen_maintenance_mode_setting,
							 false,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("queen.consumer_lag_interval",
							"How often the broker samples queen.consumer_lag for queen_consumer_lag_messages.",
							"The maintenance worker reads the view at most this often. 0 stops the sampling.",
							&queen_consumer_lag_interval_s,
							10, 0, 3600,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queen.dedup_index_min_hashes",
							"Hashes a partition gathers before the broker sorts them into a dedup run.",
							"The maintenance worker calls queen.dedup_index with this every second. Smaller runs cost more lookups per push; 0 stops the indexing.",
							&queen_dedup_index_min_hashes,
							4096, 0, 1048576,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	/* for the TAP tests only (worker.c, queen_test_fault); not in the sample file */
	DefineCustomStringVariable("queen.test_fault",
							   "Test only: a fault the broker injects once (an ERROR at a named point).",
							   "Empty means none. Used by the TAP tests to reach failure paths that have no honest trigger.",
							   &queen_test_fault_setting,
							   "",
							   PGC_SIGHUP,
							   GUC_NOT_IN_SAMPLE | GUC_NO_SHOW_ALL,
							   NULL, NULL, NULL);
}

void
queen_define_gucs(void)
{
	/* what a broker setting fixed at postmaster start is, in this process */
	GucContext	fixed_at_start = process_shared_preload_libraries_in_progress ?
		PGC_POSTMASTER : PGC_SIGHUP;

	queen_define_core_gucs();
	queen_define_crypto_gucs();
	queen_define_retention_gucs();
	queen_define_broker_layout_gucs(fixed_at_start);
	queen_define_fusion_gucs();
	queen_define_http_gucs();
	queen_define_delivery_gucs(fixed_at_start);
	MarkGUCPrefixReserved("queen");
}

/*
 * The number of shards queen.fusion_shards asks for.  Automatic: two per
 * core, because a shard alternates between CPU work and waiting for its
 * commit's flush, and two keep a core busy through that wait; no more,
 * because every extra shard splits the same load into smaller bundles, so
 * more commits with their fixed cost compete for the same cores (on two
 * cores, 8 shards carried 20-35% fewer one-item pushes than 4; see
 * docs/BENCHMARKS.md).  At most 8, Queen's own default.
 */
int
queen_fusion_shards_effective(void)
{
	long		cores;

	if (queen_fusion_shards > 0)
		return queen_fusion_shards;
	cores = sysconf(_SC_NPROCESSORS_ONLN);
	if (cores < 1)
		cores = 1;
	return (int) Min(Max(2 * cores, 2), 8);
}
