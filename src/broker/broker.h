/*-------------------------------------------------------------------------
 *
 * broker.h
 *	  The broker's runtime, shared by all its processes: its hard limits,
 *	  its settings (defined in guc.c), the worker slots and rings in shared
 *	  memory (shmem.c).  Each concern beside it has a header of its own:
 *	  the rings (ring.h), the messages on them (wire.h), the control
 *	  operations (ops.h), the worker runtime (worker.h), the permits
 *	  (permits.h), the counters and /metrics (metrics.h), the wake-ups
 *	  (wake.h), the spool and maintenance mode (maintenance/spool.h).
 *
 * The broker's background workers are of four kinds.  Listeners speak
 * HTTP and never touch the database; fusion shards own disjoint sets of
 * partitions and run one transaction at a time; one maintenance worker
 * drains the spool and samples what /metrics shows; one database watch
 * tells the others whether their database exists.  Between every listener
 * L and shard S there are two single-producer single-consumer byte rings
 * in shared memory: submissions L->S and verdicts S->L.  Everything a
 * process keeps across messages is its own; shared memory holds only the
 * rings, the worker slots, and each subsystem's own shared state.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_BROKER_H
#define QUEEN_BROKER_H

#include "queen.h"

#include "metrics.h"
#include "ring.h"
#include "wake.h"

#include "nodes/pg_list.h"
#include "port/atomics.h"
#include "storage/latch.h"
#include "storage/spin.h"

/* Hard limits of the process model; the GUCs are clamped to these. */
#define QUEEN_MAX_LISTENERS		16
#define QUEEN_MAX_SHARDS		64

/*
 * Highest queen.max_body_bytes.  Frames take up to about 2.5 times the
 * JSON they come from (a minted transactionId per item), and one push's
 * frames travel as one message that must stay under PostgreSQL's 1 GB
 * allocation limit.
 */
#define QUEEN_MAX_BODY_LIMIT	(256 * 1024 * 1024)

/* A shard stops taking submissions while it holds this much unflushed. */
#define QUEEN_SHARD_BACKLOG_BYTES	((Size) 256 * 1024 * 1024)

/*
 * Ring sizes: what may be in transit while the consumer is busy.  A pop's
 * answer streams through the verdict ring a ring at a time, each a round
 * trip of wake-ups between shard and listener, so its size sets how fast a
 * big answer gets to the listener (256 kB moved about 67 MB/s).
 */
#define QUEEN_SUBMIT_RING_BYTES	(1024 * 1024)
#define QUEEN_VERDICT_RING_BYTES (1024 * 1024)

/* ----------------------------------------------------------------
 *		Settings of the broker (defined in guc.c)
 * ----------------------------------------------------------------
 */
extern char *queen_database;
extern char *queen_http_listen_address;
extern int	queen_http_port;
extern int	queen_http_workers;
extern int	queen_fusion_shards;
extern int	queen_bundle_max;
extern int	queen_fusion_shards_effective(void);
extern int	queen_fusion_hold_ms;
extern int	queen_consumer_lag_interval_s;
extern int	queen_dedup_index_min_hashes;
extern int	queen_fusion_min_frames;
extern int	queen_fusion_frames;
extern int	queen_max_body_bytes;
extern int	queen_http_idle_timeout_ms;
extern int	queen_http_header_timeout_ms;
extern int	queen_http_body_timeout_ms;
extern int	queen_http_max_connections;
extern int	queen_max_push_items;
extern int	queen_max_ack_items;
extern int	queen_consume_lock_timeout_ms;

/* authentication on the HTTP door (listener/auth.c) */
extern char *queen_jwt_secret;
extern char *queen_jwt_public_key_file;
extern char *queen_jwt_issuer;
extern char *queen_jwt_audience;
extern int	queen_jwt_clock_skew_s;
extern char *queen_jwt_skip_paths;
extern void queen_jwt_settings_changed(void);
extern char *queen_tenant_header;

/*
 * The tenant whose series /metrics renders (listener/handle_admin.c sets
 * it while it renders, with queen.tenant_header on), or NULL for all.
 */
extern const pg_uuid_t *queen_metrics_tenant;
extern int	queen_push_permits_min;
extern int	queen_push_permits_initial;
extern int	queen_push_permits_max;
extern char *queen_spool_directory;
extern int	queen_push_statement_timeout_ms;
extern bool queen_maintenance_mode_setting;
extern char *queen_test_fault_setting;

/* ----------------------------------------------------------------
 *		Shared memory (shmem.c)
 * ----------------------------------------------------------------
 */
typedef enum QueenWorkerState
{
	QUEEN_WORKER_STOPPED = 0,
	QUEEN_WORKER_STARTING,
	QUEEN_WORKER_WAITING,		/* shard: database or extension missing */
	QUEEN_WORKER_READY,
	QUEEN_WORKER_CLOSING,		/* SIGTERM received, finishing what it holds */
	QUEEN_WORKER_STANDBY		/* the node is in recovery: waits for promotion */
} QueenWorkerState;

typedef struct QueenWorkerSlot
{
	pg_atomic_uint32 state;		/* QueenWorkerState */
	pg_atomic_uint32 incarnation;	/* bumped at every start */
	int			pid;
	Latch	   *latch;
} QueenWorkerSlot;

/*
 * Wake-ups for parked long-polls (wake.h): a slot's generation, or these
 * two counters of queen_wake_generation's.
 */
#define QUEEN_WAKE_TOTAL		(-1)
#define QUEEN_WAKE_CATALOG		(-2)

/*
 * The runtime's own shared memory: the worker slots and the rings.  Each
 * subsystem beside it owns its shared state, sized and laid out by its own
 * pair of functions (the table in worker.c): the metrics, the permit
 * pool, the spool, the wake-ups, the consumer lag, the database watch.
 */
typedef struct QueenBrokerShared
{
	int			nlisteners;
	int			nshards;
	QueenWorkerSlot listeners[QUEEN_MAX_LISTENERS];
	QueenWorkerSlot shards[QUEEN_MAX_SHARDS];
	QueenWorkerSlot maintenance;
	QueenWorkerSlot dbwatch;
	pg_atomic_uint32 test_fault_fired;	/* queen.test_fault: fired once per value */
	/* ring offsets from the start of this struct */
	Size		submit_off[QUEEN_MAX_LISTENERS][QUEEN_MAX_SHARDS];
	Size		verdict_off[QUEEN_MAX_SHARDS][QUEEN_MAX_LISTENERS];
} QueenBrokerShared;

/* A subsystem's shared memory: its size, and its layout when new. */
typedef struct QueenShmemPart
{
	Size		(*size) (void);
	void		(*init) (void);
} QueenShmemPart;

extern QueenBrokerShared *queen_broker;

extern void queen_shmem_install(int listeners, int shards, const QueenShmemPart *parts,
								int nparts);
extern QueenRing *queen_submit_ring(int listener, int shard);
extern QueenRing *queen_verdict_ring(int shard, int listener);
extern void queen_worker_set_state(QueenWorkerSlot *slot, QueenWorkerState state);
extern QueenWorkerState queen_worker_state(QueenWorkerSlot *slot);
extern bool queen_workers_all_in(QueenWorkerSlot *slots, int n, uint32 states);
extern void queen_worker_wake(QueenWorkerSlot *slot);

/* The states a worker shows once it has stopped taking new work. */
#define QUEEN_WORKERS_GOING	((1U << QUEEN_WORKER_STOPPED) | (1U << QUEEN_WORKER_CLOSING))

#endif							/* QUEEN_BROKER_H */
