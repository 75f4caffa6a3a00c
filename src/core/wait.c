/*-------------------------------------------------------------------------
 *
 * wait.c
 *	  queen.pop's wait: a SQL consumer that sleeps until a commit makes its
 *	  queue pending, instead of polling; and the commit side that wakes it
 *	  (and, with queen.notify, NOTIFYs applications that LISTEN).
 *
 * A waiting pop registers the slot of its queue (a hash, shared with the
 * broker's long-polls) in a per-process cell of shared memory, tries the
 * claim, and sleeps on its latch.  A committer that made queues pending
 * (a SQL push or an ack that released a lease, marked here; the broker's
 * bundles, drains and acks, which call queen_wait_wake after their own
 * COMMIT) sets the latches of the processes watching those slots, after
 * the commit is visible, so the claim that follows sees what woke it.
 * Registering before the claim closes the gap between a claim that found
 * nothing and the sleep: a commit in between has already set the latch.
 * Leases that run out and deferred segments wake nobody; the claim reports
 * when they will (retry_at) and the pop sleeps no longer than that.
 *
 * Shared memory needs the library preloaded.  Without it a waiting pop
 * sleeps on a backoff (10 ms doubling to 250 ms) and tries again; its latch
 * is also set by any NOTIFY the session LISTENs to, so queen.listen and
 * queen.notify make it prompt there too.
 *
 * What a wait holds: never a row lock or a transaction id, because each
 * try runs in a subtransaction that is rolled back when it delivered and
 * wrote nothing (taking its relation and advisory locks with it).  A try
 * that wrote (a group's first contact: its subscription and cursors) is
 * kept and the pop returns at once: waiting would hold that write's locks.
 * The one write a try can do without, a stale scan floor, it computes
 * without storing (QueenPopRequest.waiting).  It
 * holds its statement's snapshot, as any running statement does.  A
 * transaction that has already written, or whose snapshot is fixed
 * (REPEATABLE READ, SERIALIZABLE: it could never see what woke it), may
 * not wait.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "queen.h"
#include "wait.h"

#include "access/twophase.h"
#include "access/xact.h"
#include "commands/async.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/wait_event.h"

/* A cell's value: 0 not waiting, slot + 1, or any commit at all. */
#define QUEEN_WAIT_ANY			PG_UINT32_MAX

/* Backoff without shared memory. */
#define QUEEN_WAIT_POLL_MIN_MS	10
#define QUEEN_WAIT_POLL_MAX_MS	250

/*
 * One per PGPROC.  wakes counts the wakes sent to it: the latch alone could
 * lose one, since a try that sleeps on a heavyweight lock resets the latch
 * when it gets the lock, so the waiter compares counts before it sleeps.
 */
typedef struct QueenWaitCell
{
	pg_atomic_uint32 watch;		/* 0, slot + 1, or QUEEN_WAIT_ANY */
	pg_atomic_uint32 wakes;
} QueenWaitCell;

typedef struct QueenWaitShared
{
	pg_atomic_uint32 nwaiting;
	int			ncells;
	QueenWaitCell cells[FLEXIBLE_ARRAY_MEMBER];	/* by pgprocno */
} QueenWaitShared;

queen_wait_commit_hook_type queen_wait_commit_hook = NULL;
bool		queen_wait_commit_publishes = true;

static QueenWaitShared *queen_wait_shared = NULL;
static shmem_request_hook_type queen_wait_prev_request = NULL;
static shmem_startup_hook_type queen_wait_prev_startup = NULL;
static bool queen_wait_exit_armed = false;

/* What the current transaction marked: its slots, and names for NOTIFY. */
static int	queen_marked[QUEEN_WAKE_SLOTS];
static int	queen_nmarked = 0;
static uint64 queen_marked_bits[QUEEN_WAKE_SLOTS / 64];
static List *queen_marked_channels = NIL;	/* in TopTransactionContext */

/*
 * What was marked when each open subtransaction began: a subtransaction
 * that rolls back takes its marks back (its pushes never happened).
 */
typedef struct QueenWaitLevel
{
	SubTransactionId subid;
	int			nmarked;
	int			nchannels;
} QueenWaitLevel;

static List *queen_wait_levels = NIL;	/* in TopTransactionContext, innermost last */

/* FNV-1a-64 over the tenant and the queue, as the broker's shard choice. */
uint64
queen_queue_hash(const pg_uuid_t *tenant, const char *queue, Size qlen)
{
	uint64		h = UINT64CONST(0xcbf29ce484222325);
	Size		i;

	for (i = 0; i < UUID_LEN; i++)
		h = (h ^ tenant->data[i]) * UINT64CONST(0x100000001b3);
	for (i = 0; i < qlen; i++)
		h = (h ^ (unsigned char) queue[i]) * UINT64CONST(0x100000001b3);
	return h;
}

int
queen_wake_slot(const pg_uuid_t *tenant, const char *queue, Size qlen)
{
	return (int) (queen_queue_hash(tenant, queue, qlen) % QUEEN_WAKE_SLOTS);
}

/* ----------------------------------------------------------------
 *		Shared memory (preloaded only)
 * ----------------------------------------------------------------
 */

static int
queen_wait_ncells(void)
{
	/* every PGPROC a backend may have: proc.c's TotalProcs */
	return MaxBackends + NUM_AUXILIARY_PROCS + max_prepared_xacts;
}

static Size
queen_wait_shmem_size(void)
{
	return add_size(offsetof(QueenWaitShared, cells),
					mul_size(sizeof(QueenWaitCell), queen_wait_ncells()));
}

static void
queen_wait_shmem_request(void)
{
	if (queen_wait_prev_request)
		queen_wait_prev_request();
	RequestAddinShmemSpace(queen_wait_shmem_size());
}

static void
queen_wait_shmem_startup(void)
{
	bool		found;

	if (queen_wait_prev_startup)
		queen_wait_prev_startup();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	queen_wait_shared = ShmemInitStruct("queen sql waiters", queen_wait_shmem_size(), &found);
	if (!found)
	{
		int			i;

		queen_wait_shared->ncells = queen_wait_ncells();
		pg_atomic_init_u32(&queen_wait_shared->nwaiting, 0);
		for (i = 0; i < queen_wait_shared->ncells; i++)
		{
			pg_atomic_init_u32(&queen_wait_shared->cells[i].watch, 0);
			pg_atomic_init_u32(&queen_wait_shared->cells[i].wakes, 0);
		}
	}
	LWLockRelease(AddinShmemInitLock);
}

void
queen_wait_preload(void)
{
	queen_wait_prev_request = shmem_request_hook;
	shmem_request_hook = queen_wait_shmem_request;
	queen_wait_prev_startup = shmem_startup_hook;
	shmem_startup_hook = queen_wait_shmem_startup;
}

/* Stop watching; safe to call when not watching. */
static void
queen_wait_unregister(void)
{
	pg_atomic_uint32 *cell;

	if (queen_wait_shared == NULL || MyProc == NULL)
		return;
	cell = &queen_wait_shared->cells[MyProc->pgprocno].watch;
	if (pg_atomic_exchange_u32(cell, 0) != 0)
		pg_atomic_fetch_sub_u32(&queen_wait_shared->nwaiting, 1);
}

static void
queen_wait_on_exit(int code, Datum arg)
{
	(void) code;
	(void) arg;
	queen_wait_unregister();
}

/* Watch a slot (or QUEEN_WAIT_ANY); visible before the claim that follows. */
static void
queen_wait_register(uint32 value)
{
	if (queen_wait_shared == NULL)
		return;
	if (!queen_wait_exit_armed)
	{
		before_shmem_exit(queen_wait_on_exit, (Datum) 0);
		queen_wait_exit_armed = true;
	}
	if (pg_atomic_exchange_u32(&queen_wait_shared->cells[MyProc->pgprocno].watch, value) == 0)
		pg_atomic_fetch_add_u32(&queen_wait_shared->nwaiting, 1);
	pg_memory_barrier();
}

void
queen_wait_wake(const int *slots, int nslots)
{
	uint64		bits[QUEEN_WAKE_SLOTS / 64];
	int			i;

	if (queen_wait_shared == NULL || nslots == 0)
		return;
	pg_memory_barrier();
	if (pg_atomic_read_u32(&queen_wait_shared->nwaiting) == 0)
		return;
	memset(bits, 0, sizeof(bits));
	for (i = 0; i < nslots; i++)
		bits[slots[i] / 64] |= UINT64CONST(1) << (slots[i] % 64);
	for (i = 0; i < queen_wait_shared->ncells; i++)
	{
		uint32		v = pg_atomic_read_u32(&queen_wait_shared->cells[i].watch);

		if (v == 0)
			continue;
		if (v == QUEEN_WAIT_ANY ||
			(bits[(v - 1) / 64] & (UINT64CONST(1) << ((v - 1) % 64))) != 0)
		{
			pg_atomic_fetch_add_u32(&queen_wait_shared->cells[i].wakes, 1);
			SetLatch(&ProcGlobal->allProcs[i].procLatch);
		}
	}
}

/* ----------------------------------------------------------------
 *		The committer's side
 * ----------------------------------------------------------------
 */

/*
 * The channel: queen_ and the queue's name with . and - as _ (what
 * pg_qpubsub's channel_name gives) for the default tenant when it fits;
 * otherwise queen_ and 16 hex digits of the (tenant, queue) hash.
 */
char *
queen_wait_channel(const pg_uuid_t *tenant, const char *queue, Size qlen)
{
	static const uint8 default_tenant[UUID_LEN] = {0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 1};
	char	   *out;
	Size		i;

	if (memcmp(tenant->data, default_tenant, UUID_LEN) == 0 &&
		qlen + 6 < NAMEDATALEN)
	{
		out = palloc(qlen + 7);
		memcpy(out, "queen_", 6);
		for (i = 0; i < qlen; i++)
			out[6 + i] = (queue[i] == '.' || queue[i] == '-') ? '_' : queue[i];
		out[6 + qlen] = '\0';
		return out;
	}
	return psprintf("queen_%016" INT64_MODIFIER "x",
					queen_queue_hash(tenant, queue, qlen));
}

/* NOTIFY the queue's channel at this transaction's commit (queen.notify). */
static void
queen_wait_note_channel(const pg_uuid_t *tenant, const char *queue, Size qlen)
{
	MemoryContext old;
	char	   *channel;
	ListCell   *lc;

	old = MemoryContextSwitchTo(TopTransactionContext);
	channel = queen_wait_channel(tenant, queue, qlen);
	foreach(lc, queen_marked_channels)
	{
		if (strcmp((char *) lfirst(lc), channel) == 0)
			break;
	}
	if (lc == NULL)
		queen_marked_channels = lappend(queen_marked_channels, channel);
	else
		pfree(channel);
	MemoryContextSwitchTo(old);
}

void
queen_wait_mark(const pg_uuid_t *tenant, const char *queue, Size qlen)
{
	int			slot = queen_wake_slot(tenant, queue, qlen);

	if ((queen_marked_bits[slot / 64] & (UINT64CONST(1) << (slot % 64))) == 0)
	{
		queen_marked_bits[slot / 64] |= UINT64CONST(1) << (slot % 64);
		queen_marked[queen_nmarked++] = slot;
	}
	if (queen_notify)
		queen_wait_note_channel(tenant, queue, qlen);
}

/* The slots this transaction marked so far (the broker's acks publish them). */
int
queen_wait_marked_slots(const int **slots)
{
	*slots = queen_marked;
	return queen_nmarked;
}

/*
 * The broker's bundles and drains publish their wakes themselves (wake.c);
 * they only need the NOTIFY.
 */
void
queen_wait_notify(const pg_uuid_t *tenant, const char *queue, Size qlen)
{
	if (queen_notify)
		queen_wait_note_channel(tenant, queue, qlen);
}

static void
queen_wait_forget(void)
{
	int			i;

	for (i = 0; i < queen_nmarked; i++)
		queen_marked_bits[queen_marked[i] / 64] = 0;
	queen_nmarked = 0;
	queen_marked_channels = NIL;
	queen_wait_levels = NIL;
}

static void
queen_wait_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
							SubTransactionId parentSubid, void *arg)
{
	QueenWaitLevel *level;

	(void) parentSubid;
	(void) arg;
	if (event == SUBXACT_EVENT_START_SUB)
	{
		level = MemoryContextAlloc(TopTransactionContext, sizeof(QueenWaitLevel));
		level->subid = mySubid;
		level->nmarked = queen_nmarked;
		level->nchannels = list_length(queen_marked_channels);
		queen_wait_levels = lappend(queen_wait_levels, level);
		return;
	}
	if (event != SUBXACT_EVENT_COMMIT_SUB && event != SUBXACT_EVENT_ABORT_SUB)
		return;
	if (queen_wait_levels == NIL)
		return;
	level = (QueenWaitLevel *) llast(queen_wait_levels);
	if (level->subid != mySubid)
		return;
	queen_wait_levels = list_delete_last(queen_wait_levels);
	if (event == SUBXACT_EVENT_ABORT_SUB)
	{
		while (queen_nmarked > level->nmarked)
		{
			int			slot = queen_marked[--queen_nmarked];

			queen_marked_bits[slot / 64] &= ~(UINT64CONST(1) << (slot % 64));
		}
		queen_marked_channels = list_truncate(queen_marked_channels, level->nchannels);
	}
	pfree(level);
}

static void
queen_wait_xact_callback(XactEvent event, void *arg)
{
	ListCell   *lc;

	(void) arg;

	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			/* NOTIFY is queued here and sent by this very commit */
			foreach(lc, queen_marked_channels)
				Async_Notify((char *) lfirst(lc), "");
			break;
		case XACT_EVENT_COMMIT:
			if (queen_nmarked > 0 && queen_wait_commit_publishes)
			{
				if (queen_wait_commit_hook != NULL)
					queen_wait_commit_hook(queen_marked, queen_nmarked);
				queen_wait_wake(queen_marked, queen_nmarked);
			}
			queen_wait_forget();
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PREPARE:
		case XACT_EVENT_PARALLEL_ABORT:
			queen_wait_forget();
			break;
		default:
			break;
	}
}

void
queen_wait_init(void)
{
	RegisterXactCallback(queen_wait_xact_callback, NULL);
	RegisterSubXactCallback(queen_wait_subxact_callback, NULL);
}

/* ----------------------------------------------------------------
 *		The waiting pop
 * ----------------------------------------------------------------
 */

/* Wakes sent to this process so far (0 without shared memory). */
static uint32
queen_wait_wakes(void)
{
	if (queen_wait_shared == NULL)
		return 0;
	return pg_atomic_read_u32(&queen_wait_shared->cells[MyProc->pgprocno].wakes);
}

/*
 * One try of the claim in a subtransaction: kept if it delivered or wrote,
 * rolled back (with every lock it took) otherwise.  Returns whether it
 * wrote without delivering.
 */
static bool
queen_pop_try(QueenPopRequest *req, QueenPopResult *res)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	bool		wrote;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		queen_pop(req, res);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		/* leave the subtransaction before the error, as PL handlers expect */
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		ReThrowError(edata);
	}
	PG_END_TRY();
	wrote = GetCurrentTransactionIdIfAny() != InvalidTransactionId;

	if (res->nmessages > 0 || wrote)
		ReleaseCurrentSubTransaction();
	else
		RollbackAndReleaseCurrentSubTransaction();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
	return wrote && res->nmessages == 0;
}

static void
queen_pop_wait_check(void)
{
	if (IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("queen.pop cannot wait in a %s transaction",
						IsolationIsSerializable() ? "SERIALIZABLE" : "REPEATABLE READ"),
				 errdetail("Its snapshot is fixed, so it would never see the messages committed while it waits."),
				 errhint("Pop with wait in a READ COMMITTED transaction, or without wait.")));
	if (GetTopTransactionIdIfAny() != InvalidTransactionId)
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("queen.pop cannot wait in a transaction that has already written"),
				 errdetail("The row locks of its writes would be held for the whole wait, stalling every session that needs those rows."),
				 errhint("Pop with wait first in the transaction, or commit before it (a pop that registered a new consumer group has written).")));
}

/*
 * Sleep until woken or the time next.  A client that went away is noticed
 * here only with client_connection_check_interval set: its timeout sets
 * the latch and CHECK_FOR_INTERRUPTS ends the session (docs/SQL.md).
 */
static void
queen_pop_sleep(long timeout_ms)
{
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					 Max(timeout_ms, 1), PG_WAIT_EXTENSION);
	CHECK_FOR_INTERRUPTS();
}

void
queen_pop_wait(QueenPopRequest *req, QueenPopResult *res, int64 wait_usecs)
{
	MemoryContext cxt = CurrentMemoryContext;
	MemoryContext try_cxt;
	TimestampTz deadline;
	uint32		watch;
	volatile int poll_ms = QUEEN_WAIT_POLL_MIN_MS;
	volatile bool first = true;

	queen_pop_wait_check();
	deadline = GetCurrentTimestamp() + wait_usecs;
	watch = req->queue != NULL ?
		(uint32) queen_wake_slot(&req->tenant, req->queue, strlen(req->queue)) + 1 :
		QUEEN_WAIT_ANY;
	req->waiting = true;
	/* an empty try's result and working memory go with it */
	try_cxt = AllocSetContextCreate(cxt, "queen.pop try", ALLOCSET_DEFAULT_SIZES);

	queen_wait_register(watch);
	PG_TRY();
	{
		for (;;)
		{
			TimestampTz now;
			TimestampTz next;
			uint32		wakes;
			bool		wrote;

			ResetLatch(MyLatch);
			wakes = queen_wait_wakes();

			/*
			 * The first try sees all that was pushed before the call, as a
			 * pop without wait does; the later ones, woken with many others
			 * perhaps, may be refused a fresh draw of a wildcard's
			 * candidates until its spacing has passed (claim_scan.c), and
			 * are told when to come back.
			 */
			req->retry_until = first ? 0 : deadline;
			first = false;
			MemoryContextReset(try_cxt);
			MemoryContextSwitchTo(try_cxt);
			wrote = queen_pop_try(req, res);
			MemoryContextSwitchTo(cxt);
			if (wrote || res->nmessages > 0)
				break;
			now = GetCurrentTimestamp();
			if (now >= deadline)
				break;
			if (queen_wait_wakes() != wakes)
				continue;		/* woken during the try: its latch may be lost */
			next = deadline;
			if (res->retry_at != 0 && res->retry_at < next)
				next = Max(res->retry_at, now);
			if (queen_wait_shared == NULL)
			{
				next = Min(next, now + (TimestampTz) poll_ms * 1000);
				poll_ms = Min(poll_ms * 2, QUEEN_WAIT_POLL_MAX_MS);
			}
			queen_pop_sleep((long) ((next - now + 999) / 1000));
		}
	}
	PG_FINALLY();
	{
		MemoryContextSwitchTo(cxt);
		queen_wait_unregister();
	}
	PG_END_TRY();
}
