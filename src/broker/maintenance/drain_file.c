/*-------------------------------------------------------------------------
 *
 * drain_file.c
 *	  Draining one finished spool file exactly once: whole in one
 *	  transaction, else partition by partition and item by item, each part
 *	  recorded under its own key in queen.spool_drained; what the database
 *	  refuses for good is quarantined.  The maintenance worker (maintenance_worker.c)
 *	  decides which file goes when; its header tells the whole story.
 *
 * Every transaction goes through the worker runtime's runner (worker.c,
 * queen_worker_transact), which hands back the SQLSTATE the
 * classification below needs.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "drain.h"
#include "codec.h"
#include "bundle.h"
#include "drained.h"
#include "spool.h"
#include "worker.h"

#include <sys/stat.h>
#include <unistd.h>

#include "miscadmin.h"
#include "postmaster/interrupt.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"

/* Failures in a row, not about the database's state, before quarantine. */
#define QUEEN_DRAIN_MAX_ATTEMPTS	5

/* A set of partitions (QueenDrainKey), in the current memory context. */
HTAB *
queen_drain_keyset(const char *what)
{
	return queen_hash_create(what, sizeof(QueenDrainKey), sizeof(QueenDrainKey), 64,
							 CurrentMemoryContext);
}

static bool
queen_drain_blocked(HTAB *blocked, QueenDrainKey *key)
{
	return hash_search(blocked, key, HASH_FIND, NULL) != NULL;
}

void
queen_drain_block(HTAB *blocked, QueenDrainKey *key)
{
	(void) hash_search(blocked, key, HASH_ENTER, NULL);
}

/* One partition's frames from a file, in file order. */
typedef struct QueenDrainGroup
{
	QueenDrainKey key;
	pg_uuid_t	tenant;
	char	   *queue;
	char	   *partition;
	StringInfoData frames;
	int			nframes;
} QueenDrainGroup;

/* Bytes of a file that cannot be drained. */
typedef struct QueenDrainDamage
{
	Size		start;
	Size		end;
	bool		truncated;		/* the rest of the file, not one record */
} QueenDrainDamage;

/*
 * Keep a file's unreadable bytes under failed/ and say so.  Done once the
 * file's transaction is settled (committed now or before), so retries do
 * not count the damage twice.
 */
static void
queen_drain_report_damage(const char *name, const char *data, List *damage)
{
	ListCell   *lc;

	foreach(lc, damage)
	{
		QueenDrainDamage *d = (QueenDrainDamage *) lfirst(lc);
		char	   *kept = psprintf("%s.at%zu.damaged", name, d->start);
		char	   *why = NULL;
		bool		saved = queen_spool_quarantine(kept, data + d->start, d->end - d->start, &why);

		queen_count(QUEEN_COUNT_SPOOL_DAMAGED, 1);
		ereport(WARNING,
				(errmsg("queen spool: %s: record at byte %zu is %s (%zu bytes); %s",
						name, d->start,
						d->truncated ? "truncated or unreadable to the end of the file" :
						"damaged (its checksum does not match); skipped",
						d->end - d->start,
						saved ? psprintf("its bytes are kept as failed/%s", kept) :
						psprintf("its bytes could not be kept: %s", why))));
	}
}

/* One drain transaction: what it is asked to do, and its outcome. */
typedef struct QueenDrainTx
{
	const char *key;			/* its key in queen.spool_drained */
	QueenBundleGroup *bgs;
	int			n;
	int64		items;
	bool		check_parts;
	bool		finish;

	bool		ok;
	bool		already;		/* its key was in queen.spool_drained */
	bool		has_units;		/* parts of it were committed on their own before */
	int			sqlerrcode;
	char	   *message;
	uint64		queued;
	uint64		dropped;
} QueenDrainTx;

/* Errors that say the database cannot take the items now, not that it never will. */
static bool
queen_error_transient(int sqlerrcode)
{
	int			class = ERRCODE_TO_CATEGORY(sqlerrcode);

	return class == ERRCODE_CONNECTION_EXCEPTION ||
		class == ERRCODE_TRANSACTION_ROLLBACK ||
		class == ERRCODE_INSUFFICIENT_RESOURCES ||
		class == ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE ||
		class == ERRCODE_OPERATOR_INTERVENTION ||
		class == ERRCODE_SYSTEM_ERROR ||
		sqlerrcode == ERRCODE_UNDEFINED_TABLE || sqlerrcode == ERRCODE_UNDEFINED_FUNCTION;
}

/*
 * Errors that say nothing can be stored now, whatever is tried (no point
 * splitting the file): the database or the extension is not there, or the
 * server is going away.  A statement timeout or a lock is not one of them:
 * smaller transactions, or other partitions, may well go through.
 */
static bool
queen_error_database_down(int sqlerrcode)
{
	int			class = ERRCODE_TO_CATEGORY(sqlerrcode);

	return class == ERRCODE_CONNECTION_EXCEPTION ||
		class == ERRCODE_INSUFFICIENT_RESOURCES ||
		class == ERRCODE_SYSTEM_ERROR ||
		(class == ERRCODE_OPERATOR_INTERVENTION && sqlerrcode != ERRCODE_QUERY_CANCELED) ||
		sqlerrcode == ERRCODE_UNDEFINED_TABLE || sqlerrcode == ERRCODE_UNDEFINED_FUNCTION;
}

/* Put a file aside under failed/ (moved whole) and say why. */
static void
queen_drain_quarantine_file(const char *name, const char *why)
{
	char	   *from = queen_spool_path(name);
	char	   *dir = queen_spool_path("failed");
	char	   *to = psprintf("%s/%s", dir, name);
	char	   *err = NULL;

	if (!queen_spool_ensure_dir(dir, &err) || rename(from, to) != 0)
		ereport(WARNING,
				(errcode_for_file_access(),
				 errmsg("queen spool: could not move \"%s\" to \"%s\": %m", from, to)));
	else
	{
		(void) queen_spool_sync_dir(queen_spool_directory, &err);
		(void) queen_spool_sync_dir(dir, &err);
		queen_count(QUEEN_COUNT_SPOOL_QUARANTINED, queen_spool_file_items(name));
		ereport(WARNING,
				(errmsg("queen spool: \"%s\" moved to \"%s\" after %d failed attempts to read it: %s",
						from, to, QUEEN_DRAIN_MAX_ATTEMPTS, why)));
	}
}

/*
 * Split a file into partition groups, and list the ranges that cannot be
 * read.  Returns the groups in order of first appearance.
 */
static List *
queen_drain_parse(const char *data, Size len, int64 *items, List **damage)
{
	HTAB	   *groups;
	List	   *order = NIL;
	Size		pos = 0;
	Size		bad;
	QueenSpoolRecord rec;
	QueenSpoolStep step;

	groups = queen_hash_create("queen drain groups", sizeof(QueenDrainKey),
							   sizeof(QueenDrainGroup), 64, CurrentMemoryContext);
	*items = 0;

	while ((step = queen_spool_next(data, len, &pos, &rec, &bad)) != QUEEN_SPOOL_END)
	{
		QueenDrainKey key;
		QueenDrainGroup *g;
		bool		found;

		if (step != QUEEN_SPOOL_RECORD)
		{
			QueenDrainDamage *d = palloc(sizeof(QueenDrainDamage));

			d->start = bad;
			d->end = pos;
			d->truncated = step == QUEEN_SPOOL_TRUNCATED;
			*damage = lappend(*damage, d);
			continue;
		}

		memset(&key, 0, sizeof(key));
		key.len = (uint16) queen_partition_ident(key.ident, &rec.tenant, rec.queue, rec.qlen,
												 rec.partition, rec.plen);
		g = (QueenDrainGroup *) hash_search(groups, &key, HASH_ENTER, &found);
		if (!found)
		{
			g->tenant = rec.tenant;
			g->queue = pnstrdup(rec.queue, rec.qlen);
			g->partition = pnstrdup(rec.partition, rec.plen);
			initStringInfo(&g->frames);
			g->nframes = 0;
			order = lappend(order, g);
		}
		appendBinaryStringInfo(&g->frames, rec.frames, (int) rec.frames_len);
		g->nframes += (int) rec.nframes;
		*items += rec.nframes;
	}
	return order;
}

/* The drain transaction's statements (run by queen_worker_transact). */
static void
queen_drain_tx_body(void *arg)
{
	QueenDrainTx *tx = (QueenDrainTx *) arg;
	const char *key = tx->key;
	int			i,
				k;

	if (tx->check_parts && queen_drained_parts_exist(key))
	{
		tx->has_units = true;
		return;
	}
	/* the record first: a key committed before is work committed before */
	tx->already = !queen_drained_record(key, tx->items);
	if (!tx->already && tx->n > 0)
	{
		queen_bundle_push(tx->bgs, tx->n);
		/* sealed by a key since removed: kept in the spool until one is back */
		queen_bundle_raise_refused(tx->bgs, tx->n);
		for (i = 0; i < tx->n; i++)
		{
			uint64		before = tx->queued;

			for (k = 0; k < tx->bgs[i].nframes; k++)
			{
				if (tx->bgs[i].frames[k].status == QUEEN_SEGMENT_QUEUED)
					tx->queued++;
				else
					tx->dropped++;
			}
			/* parked pops on the queue may try again once this commits */
			if (tx->queued > before)
			{
				queen_wake_mark(&tx->bgs[i].tenant, tx->bgs[i].queue, strlen(tx->bgs[i].queue));
				queen_wait_notify(&tx->bgs[i].tenant, tx->bgs[i].queue, strlen(tx->bgs[i].queue));
			}
		}
	}
	if (tx->finish)
		queen_drained_forget_parts(key);
	/* parts' keys stay while their file does: they are its progress */
	if ((tx->check_parts || tx->finish) && !tx->already)
		queen_drained_expire();
}

/*
 * One drain transaction.  key is what goes into queen.spool_drained: the
 * file's name for the whole file, "<name>#g<group>" for one group,
 * "<name>#g<group>#i<item>" for one item; a key found there was committed
 * before and is not replayed.  With finish, the parts' keys are removed,
 * since the file's own key now stands for them.  bgs may be empty
 * (n = 0).  With check_parts, parts of the key committed on their own
 * before ("<key>#...") make it stop without doing anything (has_units):
 * the caller goes to the parts.  A failure leaves its SQLSTATE and
 * message in tx, for the caller to log and classify.
 */
static void
queen_drain_tx(QueenDrainTx *tx, const char *key, QueenBundleGroup *bgs, int n,
			   int64 items, bool check_parts, bool finish)
{
	QueenTxResult result;

	memset(tx, 0, sizeof(QueenDrainTx));
	tx->key = key;
	tx->bgs = bgs;
	tx->n = n;
	tx->items = items;
	tx->check_parts = check_parts;
	tx->finish = finish;
	tx->ok = queen_worker_transact("drain spool file", NULL, queen_drain_tx_body, tx, &result);
	if (tx->ok)
	{
		queen_count(QUEEN_COUNT_WAKES_DRAIN, queen_wake_publish());
		queen_count(QUEEN_COUNT_SPOOL_DRAINED, tx->queued);
		queen_count(QUEEN_COUNT_SPOOL_DROPPED, tx->dropped);
	}
	else
	{
		queen_wake_forget();
		tx->sqlerrcode = result.sqlerrcode;
		tx->message = result.message;
		tx->queued = tx->dropped = 0;
	}
	queen_metrics_publish_core();
}

/* The name of a file without ".buf". */
static char *
queen_drain_stem(const char *name)
{
	size_t		n = strlen(name);

	return n > 4 ? pnstrdup(name, n - 4) : pstrdup(name);
}

/*
 * Set one item the database refuses aside as a one-record spool file under
 * failed/, loudly.  False if it could not be kept (it then stays in the
 * spool and is tried again).
 */
static bool
queen_drain_quarantine_item(const char *name, int gi, int k, QueenDrainGroup *g,
							const char *frame, Size frame_len, const char *txn,
							int sqlerrcode, const char *message)
{
	StringInfoData rec;
	QueenSpoolRecord r;
	char	   *kept = psprintf("%s-g%d-i%d-n1.buf", queen_drain_stem(name), gi, k);
	char	   *why = NULL;
	struct stat st;
	bool		again;

	/*
	 * Set aside by an earlier pass whose record of it did not commit: the
	 * same item, written again under the same name, and not counted twice.
	 */
	again = stat(psprintf("%s/%s", queen_spool_path("failed"), kept), &st) == 0;
	initStringInfo(&rec);
	r.tenant = g->tenant;
	r.queue = g->queue;
	r.qlen = (uint16) strlen(g->queue);
	r.partition = g->partition;
	r.plen = (uint16) strlen(g->partition);
	r.nframes = 1;
	r.frames = frame;
	r.frames_len = frame_len;
	queen_spool_append_record(&rec, &r);
	if (!queen_spool_quarantine(kept, rec.data, rec.len, &why))
	{
		ereport(WARNING,
				(errcode_for_file_access(),
				 errmsg("queen spool: %s: an item of queue \"%s\" partition \"%s\" cannot be stored (SQLSTATE %s: %s) and could not be set aside: %s; it stays in the spool",
						name, g->queue, g->partition, unpack_sql_state(sqlerrcode), message, why)));
		return false;
	}
	if (!again)
		queen_count(QUEEN_COUNT_SPOOL_QUARANTINED, 1);
	ereport(WARNING,
			(errmsg("queen spool: QUARANTINED an item answered \"buffered\": queue \"%s\" partition \"%s\" transactionId \"%s\" from \"%s\" cannot be stored (SQLSTATE %s: %s)",
					g->queue, g->partition, txn, name, unpack_sql_state(sqlerrcode), message),
			 errdetail("Its bytes are kept as failed/%s, a spool file of one record.", kept),
			 errhint("Fix the cause, then move the file back into the spool directory to drain it.")));
	return true;
}

/*
 * One group, item by item, each in its own transaction.  Items the
 * database refuses for good are quarantined; an item that fails for a
 * reason of the moment (a lock, a timeout) stops the group there, since a
 * partition's items commit in order.  True when every item is settled.
 */
static bool
queen_drain_items(const char *name, int gi, QueenDrainGroup *g)
{
	Size		pos = 0;
	int			k;

	for (k = 0; k < g->nframes; k++)
	{
		Size		start = pos;
		QueenFrame	frame;
		QueenBundleGroup bg;
		QueenDrainTx tx;
		char	   *key = psprintf("%s#g%d#i%d", name, gi, k);
		char	   *txn;

		/* one transaction per item can take a while: stop for a shutdown */
		if (ShutdownRequestPending || queen_maintenance_on())
			return false;
		/* decoded once already when the record was read */
		if (queen_frame_decode(g->frames.data, g->frames.len, &pos, &frame) != NULL)
			elog(ERROR, "queen: spooled frames do not decode");
		txn = pnstrdup(frame.txn, frame.txn_len);
		memset(&bg, 0, sizeof(bg));
		queen_bundle_group_init(&bg, &g->tenant, g->queue, g->partition,
								g->frames.data + start, pos - start, 1);
		queen_drain_tx(&tx, key, &bg, 1, 1, false, false);
		if (tx.ok)
			continue;
		ereport(LOG,
				(errmsg("queen spool: %s: item %d of queue \"%s\" partition \"%s\" failed (SQLSTATE %s): %s",
						name, k, g->queue, g->partition, unpack_sql_state(tx.sqlerrcode), tx.message)));
		if (queen_error_transient(tx.sqlerrcode))
			return false;
		if (!queen_drain_quarantine_item(name, gi, k, g, g->frames.data + start, pos - start,
										 txn, tx.sqlerrcode, tx.message))
			return false;
		/* settled: not tried again (a crash before this quarantines it again, same file) */
		queen_drain_tx(&tx, key, NULL, 0, 0, false, false);
		if (!tx.ok)
			return false;
	}
	return true;
}

/* What the attempt to drain a file whole in one transaction came to. */
typedef enum QueenDrainWhole
{
	QUEEN_WHOLE_DONE,			/* committed, or found committed before */
	QUEEN_WHOLE_DOWN,			/* nothing can be stored now: retry later */
	QUEEN_WHOLE_PARTS			/* go part by part */
} QueenDrainWhole;

/*
 * The common case: the whole file in one transaction.  Not tried when an
 * earlier file still holds items of one of its partitions (blocked).
 */
static QueenDrainWhole
queen_drain_whole(const char *name, const char *data, List *groups, int64 items,
				  List *damage, HTAB *blocked)
{
	int			ngroups = list_length(groups);
	QueenBundleGroup *bgs;
	QueenDrainTx tx;
	ListCell   *lc;
	int			gi = 0;

	foreach(lc, groups)
		if (queen_drain_blocked(blocked, &((QueenDrainGroup *) lfirst(lc))->key))
			return QUEEN_WHOLE_PARTS;

	bgs = palloc0(sizeof(QueenBundleGroup) * Max(ngroups, 1));
	foreach(lc, groups)
	{
		QueenDrainGroup *g = (QueenDrainGroup *) lfirst(lc);

		queen_bundle_group_init(&bgs[gi++], &g->tenant, g->queue, g->partition,
								g->frames.data, g->frames.len, g->nframes);
	}
	queen_drain_tx(&tx, name, bgs, ngroups, items, true, false);
	if (tx.ok && !tx.has_units)
	{
		pg_atomic_write_u32(&queen_spool_state->db_healthy, 1);
		queen_drain_report_damage(name, data, damage);
		if (tx.already)
			ereport(LOG,
					(errmsg("queen spool: \"%s\" was committed before (it is in queen.spool_drained); removed without replaying it",
							name)));
		else
			ereport(LOG,
					(errmsg("queen spool: drained \"%s\": " UINT64_FORMAT " items committed, " UINT64_FORMAT " already stored (dropped as duplicates)",
							name, tx.queued, tx.dropped)));
		return QUEEN_WHOLE_DONE;
	}
	if (!tx.ok)
	{
		ereport(LOG,
				(errmsg("queen spool: draining \"%s\" in one transaction failed (SQLSTATE %s): %s",
						name, unpack_sql_state(tx.sqlerrcode), tx.message)));
		if (queen_error_database_down(tx.sqlerrcode))
		{
			pg_atomic_write_u32(&queen_spool_state->db_healthy, 0);
			foreach(lc, groups)
				queen_drain_block(blocked, &((QueenDrainGroup *) lfirst(lc))->key);
			return QUEEN_WHOLE_DOWN;
		}
		ereport(LOG,
				(errmsg("queen spool: storing \"%s\" partition by partition, in transactions of their own",
						name)));
	}
	return QUEEN_WHOLE_PARTS;
}

/*
 * Group by group, in transactions of their own, and a group that fails
 * item by item.  A group that cannot be settled now adds its partition
 * to blocked.  Returns whether anything is left pending; what was
 * committed now is added to *queued and *dropped.
 */
static bool
queen_drain_parts(const char *name, List *groups, HTAB *blocked,
				  uint64 *queued, uint64 *dropped)
{
	bool		pending = false;
	ListCell   *lc;
	int			gi = -1;

	foreach(lc, groups)
	{
		QueenDrainGroup *g = (QueenDrainGroup *) lfirst(lc);
		QueenBundleGroup bg;
		QueenDrainTx tx;

		gi++;
		if (queen_drain_blocked(blocked, &g->key) || ShutdownRequestPending ||
			queen_maintenance_on())
		{
			pending = true;
			continue;
		}
		memset(&bg, 0, sizeof(bg));
		queen_bundle_group_init(&bg, &g->tenant, g->queue, g->partition,
								g->frames.data, g->frames.len, g->nframes);
		queen_drain_tx(&tx, psprintf("%s#g%d", name, gi), &bg, 1, g->nframes, true, false);
		if (tx.ok && !tx.has_units)
		{
			*queued += tx.queued;
			*dropped += tx.dropped;
			continue;
		}
		if (!tx.ok)
			ereport(LOG,
					(errmsg("queen spool: %s: queue \"%s\" partition \"%s\" (%d items) failed (SQLSTATE %s): %s",
							name, g->queue, g->partition, g->nframes,
							unpack_sql_state(tx.sqlerrcode), tx.message)));

		/*
		 * Items of it were stored one by one before (has_units): go on with
		 * them.  Failed for a reason the items cannot change: later.
		 */
		if ((!tx.ok && (queen_error_database_down(tx.sqlerrcode) ||
						(queen_error_transient(tx.sqlerrcode) &&
						 tx.sqlerrcode != ERRCODE_QUERY_CANCELED))) ||
			!queen_drain_items(name, gi, g))
		{
			queen_count(QUEEN_COUNT_SPOOL_RETRIES, 1);
			queen_drain_block(blocked, &g->key);
			pending = true;
		}
	}
	return pending;
}

/* A file whose every item is settled: remove it, durably. */
static void
queen_drain_remove(const char *path)
{
	char	   *why = NULL;

	queen_count(QUEEN_COUNT_SPOOL_FILES_DRAINED, 1);
	if (unlink(path) != 0)
		ereport(WARNING,
				(errcode_for_file_access(),
				 errmsg("queen spool: could not remove drained \"%s\": %m; it will not be replayed", path)));
	else if (!queen_spool_sync_dir(queen_spool_directory, &why))
		ereport(WARNING, (errcode_for_file_access(), errmsg("queen spool: %s", why)));
}

/*
 * Drain one finished file.  First whole, in one transaction, which is the
 * common case.  If that fails, or parts of it were committed before, or an
 * earlier file still holds items of one of its partitions (blocked), group
 * by group in transactions of their own, and a group that fails item by
 * item: what can be stored is, exactly once (each part's key in
 * queen.spool_drained), what the database refuses is quarantined, and
 * what fails for a reason of the moment stays for a later attempt with
 * its partition added to blocked.  The file is removed once every item is
 * settled.  The caller's memory context is reset after.
 */
QueenDrainResult
queen_drain_file(const char *name, int *read_failures, HTAB *blocked)
{
	char	   *path = queen_spool_path(name);
	char	   *why = NULL;
	Size		len = 0;
	char	   *data;
	List	   *groups;
	int64		items;
	List	   *damage = NIL;
	QueenDrainWhole whole;
	QueenDrainTx tx;
	uint64		queued = 0,
				dropped = 0;

	data = queen_spool_read_file(path, &len, &why);
	if (data == NULL)
	{
		ereport(WARNING, (errcode_for_file_access(), errmsg("queen spool: %s", why)));
		if (++*read_failures >= QUEEN_DRAIN_MAX_ATTEMPTS)
		{
			queen_drain_quarantine_file(name, why);
			return QUEEN_DRAIN_DONE;
		}
		return QUEEN_DRAIN_RETRY;
	}
	*read_failures = 0;
	groups = queen_drain_parse(data, len, &items, &damage);

	whole = queen_drain_whole(name, data, groups, items, damage, blocked);
	if (whole == QUEEN_WHOLE_DOWN)
		return QUEEN_DRAIN_RETRY;
	if (whole == QUEEN_WHOLE_DONE)
	{
		queen_drain_remove(path);
		return QUEEN_DRAIN_DONE;
	}

	if (queen_drain_parts(name, groups, blocked, &queued, &dropped))
	{
		pg_atomic_write_u32(&queen_spool_state->db_healthy, 0);
		ereport(LOG,
				(errmsg("queen spool: \"%s\" is drained in part (" UINT64_FORMAT " items committed now); the rest stays in the spool and is tried again, later files go on meanwhile",
						name, queued)));
		return QUEEN_DRAIN_RETRY;
	}

	/* every item settled: the file's own key stands for its parts now */
	queen_drain_tx(&tx, name, NULL, 0, items, false, true);
	if (!tx.ok)
	{
		ereport(LOG,
				(errmsg("queen spool: finishing \"%s\" failed (SQLSTATE %s): %s; it stays in the spool",
						name, unpack_sql_state(tx.sqlerrcode), tx.message)));
		return QUEEN_DRAIN_RETRY;
	}
	pg_atomic_write_u32(&queen_spool_state->db_healthy, 1);
	queen_drain_report_damage(name, data, damage);
	ereport(LOG,
			(errmsg("queen spool: drained \"%s\" part by part: " UINT64_FORMAT " items committed now, " UINT64_FORMAT " already stored (dropped as duplicates)",
					name, queued, dropped)));
	queen_drain_remove(path);
	return QUEEN_DRAIN_DONE;
}
