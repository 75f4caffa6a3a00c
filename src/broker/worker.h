/*-------------------------------------------------------------------------
 *
 * worker.h
 *	  The runtime every broker worker uses (worker.c): the kinds of worker
 *	  and their registration, the lifecycle (begin, signals, connect, the
 *	  exit-code policy), and the one transaction runner.
 *
 * A worker's main function is a loop of its own; what every kind does the
 * same way lives here, so a new kind is one row of the kinds table and
 * its main function, and a new kind of transaction is one callback.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_WORKER_H
#define QUEEN_WORKER_H

#include "broker.h"

#include "datatype/timestamp.h"

/* The kinds of broker worker, one row each in worker.c's table. */
typedef enum QueenWorkerKind
{
	QUEEN_LISTENER,
	QUEEN_SHARD,
	QUEEN_MAINTENANCE,
	QUEEN_DBWATCH
} QueenWorkerKind;

/* The main functions the kinds table names. */
extern PGDLLEXPORT void queen_listener_main(Datum arg);
extern PGDLLEXPORT void queen_shard_main(Datum arg);
extern PGDLLEXPORT void queen_maintenance_main(Datum arg);
extern PGDLLEXPORT void queen_dbwatch_main(Datum arg);

/* Lifecycle */
extern void queen_broker_preload(void);
extern QueenWorkerSlot *queen_worker_begin(QueenWorkerKind kind, int index);
extern void queen_worker_connect(QueenWorkerSlot *slot);
extern void queen_dbwatch_await(QueenWorkerSlot *slot);
extern Size queen_dbwatch_shmem_size(void);
extern void queen_dbwatch_shmem_init(void);
extern void queen_worker_poll_signals(void);
extern bool queen_worker_reload(void);
extern bool queen_worker_extension_present(void);
extern int	queen_shutdown_grace_ms(bool shard);
extern bool queen_worker_alone(QueenWorkerSlot *peers, int npeers,
							   TimestampTz closing_since, TimestampTz now);
extern pg_attribute_noreturn() void queen_worker_restart(const char *who);
extern void queen_worker_check_postmaster(void);
extern void queen_broker_log_config(const char *who);
extern bool queen_test_fault(const char *name);

/* Which shard owns a partition. */
extern int	queen_shard_of(const pg_uuid_t *tenant, const char *queue, Size qlen,
						   const char *partition, Size plen, int nshards);

/* ----------------------------------------------------------------
 *		The transaction runner
 * ----------------------------------------------------------------
 */

/* What a transaction did; on failure, the error as the caller needs it. */
typedef struct QueenTxResult
{
	bool		ok;
	int			sqlerrcode;		/* on failure: the SQLSTATE */
	int			sqlclass;		/* and its class (ERRCODE_TO_CATEGORY) */
	char	   *message;		/* on failure, in the caller's memory context */
	int64		exec_us;		/* on success: time before COMMIT */
	int64		commit_us;		/* and in COMMIT */
} QueenTxResult;

typedef void (*QueenTxBody) (void *arg);

extern bool queen_worker_transact(const char *what, const char *log_as,
								  QueenTxBody body, void *arg, QueenTxResult *result);

#endif							/* QUEEN_WORKER_H */
