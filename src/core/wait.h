/*-------------------------------------------------------------------------
 *
 * wait.h
 *	  Waiting for a commit from SQL (wait.c): the wake slots every process
 *	  hashes a queue to, what a committing transaction marks, and the pop
 *	  that waits.
 *
 * The broker's long-polls (src/broker/wake.c) and the SQL door's waiting
 * pops share the slots: a commit on either door wakes both kinds of
 * waiter.  The broker plugs its side in through queen_wait_commit_hook, so
 * the core knows nothing of listeners.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_WAIT_H
#define QUEEN_WAIT_H

#include "consume.h"

/* Queues hash into this many slots; a collision costs a spurious wake. */
#define QUEEN_WAKE_SLOTS		4096

extern uint64 queen_queue_hash(const pg_uuid_t *tenant, const char *queue, Size qlen);
extern int	queen_wake_slot(const pg_uuid_t *tenant, const char *queue, Size qlen);

/*
 * Called after a COMMIT of the SQL door that made the slots pending, when
 * the library is preloaded: the broker bumps their generations and wakes
 * its listeners, so a parked HTTP pop sees a SQL push at once.
 */
typedef void (*queen_wait_commit_hook_type) (const int *slots, int nslots);
extern queen_wait_commit_hook_type queen_wait_commit_hook;

/*
 * False in the broker's workers: they publish what their commits made
 * pending themselves (wake.c), marks of the core included (an ack's), and
 * keep only the NOTIFY of those marks.
 */
extern bool queen_wait_commit_publishes;

/* Setup: the XACT callback on first load, shared memory when preloaded. */
extern void queen_wait_init(void);
extern void queen_wait_preload(void);

/* The transaction about to commit made a queue pending (SQL door). */
extern void queen_wait_mark(const pg_uuid_t *tenant, const char *queue, Size qlen);

/* What this transaction marked so far: slots, and how many. */
extern int	queen_wait_marked_slots(const int **slots);

/* Only the NOTIFY of that (queen.notify), for a committer that wakes itself. */
extern void queen_wait_notify(const pg_uuid_t *tenant, const char *queue, Size qlen);

/* Wake the waiting SQL pops watching any of slots (a committer's side). */
extern void queen_wait_wake(const int *slots, int nslots);

/* queen.channel: the NOTIFY channel of a queue (NAMEDATALEN-bounded). */
extern char *queen_wait_channel(const pg_uuid_t *tenant, const char *queue, Size qlen);

/*
 * queen_pop, again and again until it delivers, writes, or wait_usecs have
 * passed, sleeping between tries until a commit wakes it (or a lease or
 * deferral the last try reported runs out).  Raises when the transaction
 * cannot wait safely (docs/SQL.md, "Waiting").
 */
extern void queen_pop_wait(QueenPopRequest *req, QueenPopResult *res, int64 wait_usecs);

#endif							/* QUEEN_WAIT_H */
