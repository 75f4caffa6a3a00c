/*-------------------------------------------------------------------------
 *
 * broker.h
 *	  Declarations shared by the HTTP broker's processes: its settings, the
 *	  shared-memory layout (worker slots, the permit pool's and the spool's
 *	  shared state, the counters) with its accessors (shmem.c), and the
 *	  metrics.  Each concern beside them has a header of its own: the rings
 *	  (ring.h), the messages on them (wire.h), the worker runtime
 *	  (worker.h), the permits (permits.h), the spool and maintenance mode
 *	  (spool.h).
 *
 * The broker's main background workers are of two kinds.  Listeners speak
 * HTTP and never touch the database; fusion shards own disjoint sets of
 * partitions and run one bundle transaction at a time.  (A maintenance
 * worker drains the spool; a database watch tells the others whether
 * their database exists.)  Between every listener L and
 * shard S there are two single-producer single-consumer byte rings in
 * shared memory: submissions L->S and verdicts S->L.  Everything a process
 * keeps across messages is its own; shared memory holds only the rings,
 * the worker slots, the permit pool and counters.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_BROKER_H
#define QUEEN_BROKER_H

#include "queen.h"

#include "nodes/pg_list.h"
#include "port/atomics.h"
#include "ring.h"
#include "storage/latch.h"
#include "storage/spin.h"
#include "wait.h"

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
	QUEEN_WORKER_CLOSING		/* SIGTERM received, finishing what it holds */
} QueenWorkerState;

typedef struct QueenWorkerSlot
{
	pg_atomic_uint32 state;		/* QueenWorkerState */
	pg_atomic_uint32 incarnation;	/* bumped at every start */
	int			pid;
	Latch	   *latch;
} QueenWorkerSlot;

/*
 * Does queen.database exist?  Asked by a worker before it connects, answered
 * by the database watch (dbwatch.c): a ticket is covered once answered
 * reaches it, and exists is the answer then or later.
 */
typedef struct QueenDatabaseWatch
{
	pg_atomic_uint64 asked;		/* tickets taken */
	pg_atomic_uint64 answered;	/* tickets the last answer covers */
	pg_atomic_uint32 exists;	/* that answer: 1 yes, 0 no */
} QueenDatabaseWatch;

/* Counters shown on /metrics/prometheus. */
typedef struct QueenMetrics
{
	pg_atomic_uint64 push_requests;
	pg_atomic_uint64 push_messages;
	pg_atomic_uint64 push_rejected;	/* 4xx answered to push requests */
	pg_atomic_uint64 http_requests;
	pg_atomic_uint64 commits;	/* bundles committed */
	pg_atomic_uint64 bundle_failures;
	pg_atomic_uint64 segments;	/* segments in committed bundles */
	pg_atomic_uint64 items;		/* frames in committed bundles */
	pg_atomic_uint64 queued;	/* frames answered queued */
	pg_atomic_uint64 duplicates;	/* frames answered duplicate */
	pg_atomic_uint64 failed;	/* frames answered failed */
	pg_atomic_uint64 exec_us;	/* time in bundle statements before COMMIT */
	pg_atomic_uint64 commit_us;	/* time in COMMIT (WAL flush wait included) */
	pg_atomic_uint64 damaged_originals;	/* duplicates whose original could not be read */
	pg_atomic_uint64 started_at;	/* TimestampTz of shared memory init */

	/* consumption (zero at start, like the spool's) */
	pg_atomic_uint64 pop_requests;	/* pop requests taken by the listeners */
	pg_atomic_uint64 pop_messages;	/* messages delivered by committed pops */
	pg_atomic_uint64 pop_empty;	/* pops answered 204 */
	pg_atomic_uint64 leases_expired;	/* expired leases taken over by pops */
	pg_atomic_uint64 ack_requests;
	pg_atomic_uint64 ack_items;	/* items in ack requests */
	pg_atomic_uint64 ack_acked;	/* items carried out (success) */
	pg_atomic_uint64 ack_failed;	/* items not applied (success false) */
	pg_atomic_uint64 dlq_filed;	/* messages filed as dead letters by acks */
	pg_atomic_uint64 lease_extensions;	/* leases renewed (partitions) */
	pg_atomic_uint64 consume_shared_failed; /* shared transactions run again one by one */
	pg_atomic_uint64 leases_restamped;	/* pops whose aged leases started again */
	pg_atomic_uint64 consume_lock_timeouts; /* consumption requests that met a held lock */
	pg_atomic_uint64 wakes_push;	/* queues woken by bundles that stored messages */
	pg_atomic_uint64 wakes_ack;	/* by acks that released a lease */
	pg_atomic_uint64 wakes_drain;	/* by drained spool items */
	pg_atomic_uint64 wakes_sql;	/* by commits of the SQL door (wait.c) */
	pg_atomic_uint64 resends_wake;	/* line heads sent again: what they watch moved */
	pg_atomic_uint64 resends_due;	/* on the backoff, or at a 204's retry_at */
	pg_atomic_uint64 resends_next;	/* after the head before them delivered */
	pg_atomic_uint32 parked[QUEEN_MAX_LISTENERS];	/* pops parked per listener */
	pg_atomic_uint32 lines[QUEEN_MAX_LISTENERS];	/* their lines per listener */
} QueenMetrics;

/*
 * Wake-ups for parked long-polls (wake.c).  A shard bumps the generation of
 * a (tenant, queue)'s slot after a COMMIT that made that queue pending (a
 * bundle that stored messages, an ack that released a lease), once per
 * slot per transaction, then bumps total and sets the listeners' latches.
 * A listener compares: a line of parked pops whose slot moved sends its
 * head again (longpoll.c).  Slots are shared by hash, so a collision costs
 * a spurious retry, never a missed wake.  Discovery pops (no single queue)
 * watch total, or catalog when they matched no queue: it moves when a
 * queue is configured, deleted or first committed to by a process
 * (forgets moves on a deletion: every process forgets the queues it knew).
 */
#define QUEEN_WAKE_TOTAL		(-1)	/* queen_wake_generation's other counters */
#define QUEEN_WAKE_CATALOG		(-2)

typedef struct QueenWakeShared
{
	pg_atomic_uint64 total;
	pg_atomic_uint64 catalog;
	pg_atomic_uint32 forgets;
	pg_atomic_uint32 gen[QUEEN_WAKE_SLOTS];
} QueenWakeShared;

/* The push permit pool and its adaptive limit (permits.c). */
#define QUEEN_PERMIT_SLOTS		60
#define QUEEN_PERMIT_BUCKETS	6	/* bundles of 1, 2-3, 4-7, 8-15, 16-31, 32+ segments */

typedef struct QueenPermitPool
{
	pg_atomic_uint32 inflight;
	pg_atomic_uint32 limit;
	pg_atomic_uint64 waiting;	/* bitmap of shards waiting for a permit */
	pg_atomic_uint32 held[QUEEN_MAX_SHARDS];	/* permits each shard holds now */

	slock_t		mutex;			/* protects the controller state below */
	double		limit_f;
	double		naive_limit_f;	/* the textbook law on the same samples */
	int64		slot_second[QUEEN_PERMIT_SLOTS];
	double		slot_min_cost[QUEEN_PERMIT_SLOTS][QUEEN_PERMIT_BUCKETS];	/* us before COMMIT */
	double		slot_min_rtt[QUEEN_PERMIT_SLOTS];	/* us per bundle, whole */
	uint64		grows;
	uint64		shrinks;
	double		last_queue;		/* last queue estimate of our law */

	/* recent round trips for the quantiles on /metrics */
	int			rtt_next;
	int			rtt_count;
	float		rtt_ms[256];
} QueenPermitPool;

/*
 * The spool's shared state (spool.c, maintenance_mode.c, maintenance_worker.c).  The
 * maintenance flag is authoritative here; the state file in the spool
 * directory keeps it across restarts.  The gauges are written by the
 * maintenance worker.
 */
typedef struct QueenSpoolShared
{
	pg_atomic_uint32 maintenance;	/* pushes go to the spool */
	pg_atomic_uint32 setting_seen;	/* queen.maintenance_mode last applied */
	pg_atomic_uint32 db_healthy;	/* the last drain attempt worked */
	pg_atomic_uint64 pending_files;	/* items in finished files, not yet drained */
	pg_atomic_uint64 failed_files;	/* files in failed/ */
	pg_atomic_uint64 failed_bytes;
	pg_atomic_uint64 items_written;
	pg_atomic_uint64 write_failures;
	pg_atomic_uint64 items_drained;
	pg_atomic_uint64 items_dropped;	/* replayed as duplicates */
	pg_atomic_uint64 files_drained;
	pg_atomic_uint64 records_damaged;
	pg_atomic_uint64 statement_timeouts;
	pg_atomic_uint64 quarantined_items;	/* items in failed/ (gauge, from its files) */
	pg_atomic_uint64 items_quarantined;	/* items this server set aside (counter) */
	pg_atomic_uint64 drain_retries;	/* drain units left for later after an error */
	pg_atomic_uint64 unknown_fate;	/* items a listener spooled after their shard died */
	pg_atomic_uint32 active_items[QUEEN_MAX_SHARDS];	/* in each shard's open file */
} QueenSpoolShared;

/*
 * Consumer lag, sampled from the view queen.consumer_lag by shard 0 every
 * queen.consumer_lag_interval seconds (shard_consume.c), most lagging
 * first, for /metrics.  seq is odd while the shard writes; a reader copies
 * and retries if seq moved.
 */
#define QUEEN_LAG_ENTRIES		256

typedef struct QueenLagEntry
{
	pg_uuid_t	tenant;
	char		queue[QUEEN_MAX_NAME_BYTES + 1];
	char		group[QUEEN_MAX_NAME_BYTES + 1];
	int64		partitions;
	int64		messages;
} QueenLagEntry;

typedef struct QueenLagShared
{
	pg_atomic_uint64 seq;
	TimestampTz sampled_at;		/* 0: not yet */
	int			n;
	bool		truncated;		/* more (queue, group) pairs than entries */
	QueenLagEntry entries[QUEEN_LAG_ENTRIES];
} QueenLagShared;

typedef struct QueenBrokerShared
{
	int			nlisteners;
	int			nshards;
	QueenWorkerSlot listeners[QUEEN_MAX_LISTENERS];
	QueenWorkerSlot shards[QUEEN_MAX_SHARDS];
	QueenWorkerSlot maintenance;
	QueenWorkerSlot dbwatch;
	QueenDatabaseWatch dbwatch_state;
	QueenMetrics metrics;
	QueenPermitPool permits;
	QueenSpoolShared spool;
	QueenWakeShared wake;
	QueenLagShared lag;
	pg_atomic_uint32 test_fault_fired;	/* queen.test_fault: fired once per value */
	/* ring offsets from the start of this struct */
	Size		submit_off[QUEEN_MAX_LISTENERS][QUEEN_MAX_SHARDS];
	Size		verdict_off[QUEEN_MAX_SHARDS][QUEEN_MAX_LISTENERS];
} QueenBrokerShared;

extern QueenBrokerShared *queen_broker;
extern void queen_lag_sample(void);
extern bool queen_dedup_index_pass(void);
extern void queen_metrics_publish_core(void);

extern void queen_shmem_install(int listeners, int shards, void (*fill) (void));
extern QueenRing *queen_submit_ring(int listener, int shard);
extern QueenRing *queen_verdict_ring(int shard, int listener);
extern void queen_worker_set_state(QueenWorkerSlot *slot, QueenWorkerState state);
extern QueenWorkerState queen_worker_state(QueenWorkerSlot *slot);
extern bool queen_workers_all_in(QueenWorkerSlot *slots, int n, uint32 states);
extern void queen_worker_wake(QueenWorkerSlot *slot);

/* The states a worker shows once it has stopped taking new work. */
#define QUEEN_WORKERS_GOING	((1U << QUEEN_WORKER_STOPPED) | (1U << QUEEN_WORKER_CLOSING))

/* ----------------------------------------------------------------
 *		Metrics (metrics.c)
 * ----------------------------------------------------------------
 */
extern void queen_metrics_render(StringInfo out);
extern void queen_metric(StringInfo out, const char *name, const char *type, const char *help);
extern void queen_metrics_bundle_summary(void);

/* ----------------------------------------------------------------
 *		Wake-ups for parked pops (wake.c)
 * ----------------------------------------------------------------
 */
extern void queen_wake_install(void);
extern void queen_wake_mark(const pg_uuid_t *tenant, const char *queue, Size qlen);
extern void queen_wake_mark_slot(int slot);
extern void queen_wake_forget(void);
extern int	queen_wake_publish(void);
extern void queen_wake_catalog(bool deleted);
extern uint64 queen_wake_generation(int slot);
extern void queen_health_json(StringInfo out, bool connected, const char *error);

#endif							/* QUEEN_BROKER_H */
