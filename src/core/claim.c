/*-------------------------------------------------------------------------
 *
 * claim.c
 *	  The claim: one partition taken for one consumer group
 *	  and its messages read, in the caller's transaction; queen_pop, the
 *	  entry point both doors call, and the result it fills.
 *
 * A partition is claimed by locking its consumer row FOR UPDATE SKIP
 * LOCKED, only if no live lease holds it: a pop never waits for another
 * consumer, it takes another partition or nothing.  A missing row (first
 * contact) is created under a try-advisory lock, so two first contacts do
 * not queue on each other's uncommitted insert.  The messages are read by
 * the log reader from the cursor forward, at most the pop's budget, so a
 * deep backlog costs what is delivered, not what is stored; deferrals
 * (windowBuffer, delayedProcessing) hold back whole suffixes.  Then either
 * the cursor moves (autoAck) or the span is leased to the pop's lease id.
 * Finding partitions for a wildcard or namespace/task pop, and a group's
 * first contact with a queue, are claim_scan.c.
 *
 * What is returned is copied into the caller's memory context: frames
 * outlive the SPI connection and the reader's per-segment buffers.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "claim_int.h"
#include "validate.h"
#include "codec.h"
#include "crypto.h"
#include "log_read.h"
#include "log_write.h"
#include "spi.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/memutils.h"

/* ----------------------------------------------------------------
 *		Statements
 * ----------------------------------------------------------------
 */
typedef enum QueenClaimPlanId
{
	CLAIM_RESOLVE,
	CLAIM_QUEUE_ID,
	CLAIM_NEWEST,
	CLAIM_LOCK,
	CLAIM_HELD,
	CLAIM_LEASE,
	CLAIM_AUTO_ACK,
	CLAIM_SEAL,
	CLAIM_RESTAMP,
	CLAIM_NPLANS
} QueenClaimPlanId;

static const QueenClaimStatement queen_claim_statements[CLAIM_NPLANS] =
{
	/* 4.2 step 1: the partition and its queue's knobs in one join */
	[CLAIM_RESOLVE] = {
		"SELECT p.id, q.id, p.last_offset, q.delayed_processing, q.window_buffer, q.lease_time"
		"  FROM queen.queues q JOIN queen.log_partitions p ON p.queue_id = q.id"
		" WHERE q.tenant_id = $1 AND q.name = $2 AND p.name = $3",
	3, {UUIDOID, TEXTOID, TEXTOID}},
	[CLAIM_QUEUE_ID] = {
		"SELECT id FROM queen.queues WHERE tenant_id = $1 AND name = $2",
	2, {UUIDOID, TEXTOID}},
	/* windowBuffer: the newest segment, one backward step on the key */
	[CLAIM_NEWEST] = {
		"SELECT created_at FROM queen.log_segments WHERE partition_id = $1"
		" ORDER BY base_offset DESC LIMIT 1",
	1, {UUIDOID}},
	/*
	 * Step 4: the claim; a leased or locked row is skipped, never waited
	 * for.  With the span a redelivery may cover: what the same first offset
	 * was delivered with before.
	 */
	[CLAIM_LOCK] = {
		"SELECT committed, worker_id IS NOT NULL,"
		"       CASE WHEN attempt_offset = committed + 1 THEN attempt_end END"
		"  FROM queen.log_consumers"
		" WHERE partition_id = $1 AND consumer_group = $2"
		"   AND (worker_id IS NULL OR lease_expires_at IS NULL OR lease_expires_at < $3)"
		"   FOR UPDATE SKIP LOCKED",
	3, {UUIDOID, TEXTOID, TIMESTAMPTZOID}},
	/* the claim missed: is the row there (leased, or another pop has it)? */
	[CLAIM_HELD] = {
		"SELECT lease_expires_at FROM queen.log_consumers"
		" WHERE partition_id = $1 AND consumer_group = $2",
	2, {UUIDOID, TEXTOID}},
	/*
	 * Step 9, leased: the cursor stays; a redelivery counts its attempts,
	 * and attempt_end remembers the widest span delivered from this first
	 * offset, which a redelivery does not go beyond.
	 */
	[CLAIM_LEASE] = {
		"UPDATE queen.log_consumers SET batch_end = $3, worker_id = $4,"
		"       lease_expires_at = $5, lease_acquired_at = $6,"
		"       attempt_count = CASE WHEN attempt_offset = $7 THEN attempt_count + 1 ELSE 1 END,"
		"       attempt_end = CASE WHEN attempt_offset = $7 THEN GREATEST(attempt_end, $3) ELSE $3 END,"
		"       attempt_offset = $7, batch_digest = $8"
		" WHERE partition_id = $1 AND consumer_group = $2"
		" RETURNING attempt_count",
	8, {UUIDOID, TEXTOID, INT8OID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID, BYTEAOID}},
	/* step 9, autoAck: delivered is consumed, at most once */
	[CLAIM_AUTO_ACK] = {
		"UPDATE queen.log_consumers SET committed = $3, batch_end = NULL, worker_id = NULL,"
		"       lease_expires_at = NULL, lease_acquired_at = NULL, attempt_offset = NULL,"
		"       attempt_end = NULL, attempt_count = 0, batch_retry_count = 0, total_consumed = total_consumed + $4"
		" WHERE partition_id = $1 AND consumer_group = $2",
	4, {UUIDOID, TEXTOID, INT8OID, INT8OID}},

	/*
	 * Step 8, the cursor seal: everything up to last_offset was retained
	 * away, so the partition would look pending for ever.  Not when any
	 * segment is left (those may only be deferred).
	 */
	[CLAIM_SEAL] = {
		"UPDATE queen.log_consumers SET committed = $3, batch_end = NULL, worker_id = NULL,"
		"       lease_expires_at = NULL, lease_acquired_at = NULL"
		" WHERE partition_id = $1 AND consumer_group = $2 AND committed < $3"
		"   AND NOT EXISTS (SELECT 1 FROM queen.log_segments s WHERE s.partition_id = $1)",
	3, {UUIDOID, TEXTOID, INT8OID}},
	/* the lease of a pop about to be answered starts again (queen_pop_restamp) */
	[CLAIM_RESTAMP] = {
		"UPDATE queen.log_consumers SET lease_acquired_at = $3, lease_expires_at = $4"
		" WHERE partition_id = $1 AND consumer_group = $2 AND worker_id = $5",
	5, {UUIDOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID, TEXTOID}},
};

static SPIPlanPtr queen_claim_plans[CLAIM_NPLANS];

/*
 * Run a statement of the claim, prepared on first use, with a fresh
 * snapshot (so a pop sees its own transaction's earlier writes); the rows
 * are in SPI_tuptable.
 */
uint64
queen_claim_exec(SPIPlanPtr *plan, const QueenClaimStatement *st,
				 Datum *values, const char *nulls, int expected)
{
	int			rc;

	if (*plan == NULL && st->custom)
		*plan = queen_keep_custom_plan(st->sql, st->nargs, (Oid *) st->argtypes);
	queen_plan_once(plan, st->sql, st->nargs, (Oid *) st->argtypes, false);
	rc = SPI_execute_plan(*plan, values, nulls, false, 0);
	if (rc != expected)
		elog(ERROR, "queen: claim statement failed: %s", SPI_result_code_string(rc));
	return SPI_processed;
}

static uint64
queen_claim_run(QueenClaimPlanId id, Datum *values, int expected)
{
	return queen_claim_exec(&queen_claim_plans[id], &queen_claim_statements[id],
							values, NULL, expected);
}

/* ----------------------------------------------------------------
 *		The result
 * ----------------------------------------------------------------
 */

bool
queen_claim_is_queue_mode(const QueenClaim *c)
{
	return strcmp(c->req->group, QUEEN_QUEUE_MODE) == 0;
}

/* Nothing was delivered: when might something be?  The earliest hint wins. */
void
queen_claim_retry_hint(QueenClaim *c, TimestampTz when)
{
	if (c->res->retry_at == 0 || when < c->res->retry_at)
		c->res->retry_at = when;
}

/* A new partition of the result, in claim order. */
static QueenPopPartition *
queen_claim_add_partition(QueenClaim *c, const QueenClaimTarget *t)
{
	QueenPopResult *res = c->res;
	QueenPopPartition *part;
	MemoryContext old = MemoryContextSwitchTo(c->res_cxt);

	if (res->npartitions == c->allocated)
	{
		c->allocated = c->allocated == 0 ? 4 : c->allocated * 2;
		res->partitions = res->partitions == NULL ?
			palloc(sizeof(QueenPopPartition) * c->allocated) :
			repalloc(res->partitions, sizeof(QueenPopPartition) * c->allocated);
	}
	part = &res->partitions[res->npartitions++];
	memset(part, 0, sizeof(*part));
	part->queue = pstrdup(t->queue);
	part->partition = pstrdup(t->partition);
	part->partition_id = t->pid;
	part->messages = palloc(sizeof(QueenPopMessage) * Min(c->budget, 64));
	MemoryContextSwitchTo(old);
	return part;
}

/*
 * Keep one message: its frame's strings are copied out of the reader's
 * segment buffer, which the next segment reuses, into the caller's context.
 */
static void
queen_claim_keep(QueenClaim *c, QueenPopPartition *part, int *cap,
				 const QueenLogMessage *msg)
{
	QueenFrame	opened = msg->frame;
	const QueenFrame *f = &opened;
	QueenPopMessage *m;
	Size		len;
	char	   *buf;

	/* an encrypted queue's payload goes out opened; the copy below keeps it */
	queen_frame_open(&opened);
	len = (Size) f->txn_len + f->producer_sub_len + f->payload_len + 3;

	if (part->nmessages == *cap)
	{
		*cap *= 2;
		part->messages = repalloc(part->messages, sizeof(QueenPopMessage) * *cap);
	}
	m = &part->messages[part->nmessages++];
	m->offset = msg->offset;
	m->created_at = msg->created_at;
	m->frame = *f;
	buf = MemoryContextAllocExtended(c->res_cxt, len, MCXT_ALLOC_HUGE);
	memcpy(buf, f->txn, f->txn_len);
	buf[f->txn_len] = '\0';
	m->frame.txn = buf;
	buf += f->txn_len + 1;
	if (f->producer_sub_len > 0)
		memcpy(buf, f->producer_sub, f->producer_sub_len);
	buf[f->producer_sub_len] = '\0';
	m->frame.producer_sub = buf;
	buf += f->producer_sub_len + 1;
	if (f->payload_len > 0)
		memcpy(buf, f->payload, f->payload_len);
	buf[f->payload_len] = '\0';
	m->frame.payload = buf;
	if (opened.payload != msg->frame.payload)
		pfree(unconstify(char *, opened.payload));
}

/* ----------------------------------------------------------------
 *		One partition
 * ----------------------------------------------------------------
 */

/*
 * Lock the partition's consumer row for this pop (4.2 steps 3-4), creating
 * it at first contact.  False when another consumer holds it or is creating
 * it; then what is known of when it frees is a retry hint.
 */
static bool
queen_claim_lock(QueenClaim *c, QueenClaimTarget *t, int64 *committed,
				 bool *had_lease, int64 *upto)
{
	Datum		values[3];
	int			attempt;

	values[0] = UUIDPGetDatum(&t->pid);
	values[1] = CStringGetTextDatum(c->req->group);
	values[2] = TimestampTzGetDatum(c->now);
	for (attempt = 0; attempt < 2; attempt++)
	{
		if (queen_claim_run(CLAIM_LOCK, values, SPI_OK_SELECT) == 1)
		{
			HeapTuple	tuple = SPI_tuptable->vals[0];
			bool		isnull;

			*committed = queen_get_int64(tuple, SPI_tuptable->tupdesc, 1);
			*had_lease = DatumGetBool(SPI_getbinval(tuple, SPI_tuptable->tupdesc, 2, &isnull));
			*upto = DatumGetInt64(SPI_getbinval(tuple, SPI_tuptable->tupdesc, 3, &isnull));
			if (isnull)
				*upto = PG_INT64_MAX;
			return true;
		}
		if (attempt > 0)
			break;

		/* missed: leased, locked by another pop, or no row at all */
		if (queen_claim_run(CLAIM_HELD, values, SPI_OK_SELECT) == 1)
		{
			bool		isnull;
			Datum		until = SPI_getbinval(SPI_tuptable->vals[0],
											  SPI_tuptable->tupdesc, 1, &isnull);

			if (!isnull && DatumGetTimestampTz(until) >= c->now)
				queen_claim_retry_hint(c, DatumGetTimestampTz(until));
			return false;
		}
		if (!t->sub_known)
		{
			if (!queen_claim_subscription(c, &t->queue_id, &t->sub_from))
				return false;
			t->sub_known = true;
		}
		queen_claim_first_contact(&t->pid, c->req->group, t->sub_from);
	}
	return false;
}

/*
 * Read from the cursor forward (4.2 steps 5-7) into the result: at most the
 * budget of messages and of bytes (queen.pop_max_bytes; the pop's first
 * message is taken whatever its size, so every message is deliverable),
 * nothing past upto (a redelivery repeats the span it was delivered in), and
 * nothing created after the delayedProcessing deadline (created_at is
 * monotone per partition, so what is held back is a suffix).
 */
static void
queen_claim_read(QueenClaim *c, QueenClaimTarget *t, QueenPopPartition *part,
				 int64 wanted, int64 upto)
{
	TimestampTz deadline = DT_NOEND;
	QueenLogReader reader;
	QueenLogMessage msg;
	int			cap = Min(c->budget, 64);

	/*
	 * What a message costs the byte budget: its strings, and what an answer
	 * spends on its keys and on the partition and group it repeats, so the
	 * budget bounds the rendered answer (and the SQL door's rows), not only
	 * the payloads.
	 */
	int64		overhead = QUEEN_POP_MESSAGE_OVERHEAD + strlen(t->partition) +
		strlen(c->req->group);

	if (t->delayed > 0)
		deadline = c->now - (TimestampTz) t->delayed * USECS_PER_SEC;
	queen_log_open(&reader, &t->pid, wanted, upto, c->budget, true);
	while (queen_log_next(&reader, &msg))
	{
		const QueenFrame *f = &msg.frame;
		int64		cost = overhead + f->payload_len + f->txn_len + f->producer_sub_len;

		if (msg.created_at > deadline)
		{
			queen_claim_retry_hint(c, msg.created_at + (TimestampTz) t->delayed * USECS_PER_SEC);
			break;
		}
		if (cost > c->bytes_left && c->res->nmessages + part->nmessages > 0)
		{
			c->bytes_spent = true;
			break;
		}
		c->bytes_left -= cost;
		queen_claim_keep(c, part, &cap, &msg);
	}
	if (reader.problem != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("segment at offset " INT64_FORMAT " of queue \"%s\" partition \"%s\" is malformed: %s",
						reader.problem_base, t->queue, t->partition, reader.problem)));
	queen_log_close(&reader);
	queen_crypto_report_unopened();
}

/*
 * The lease a pop grants: asked for, else the queue's, else the default;
 * never longer than queen.max_lease_seconds (a request for longer is
 * refused by the doors, a queue configured longer is held to it).
 */
static inline int32
queen_claim_lease_seconds(const QueenPopRequest *req, const QueenClaimTarget *t)
{
	int32		seconds = req->lease_seconds > 0 ? req->lease_seconds :
		t->lease_time > 0 ? t->lease_time : QUEEN_DEFAULT_LEASE;

	return Min(seconds, queen_max_lease_seconds);
}

/*
 * Step 9: the cursor moves (autoAck) or the span is leased, with the digest
 * of the transactionIds delivered in it for the ack's fast path.
 */
static void
queen_claim_commit(QueenClaim *c, QueenClaimTarget *t, QueenPopPartition *part)
{
	QueenPopRequest *req = c->req;
	int64		first = part->messages[0].offset;
	int64		last = part->messages[part->nmessages - 1].offset;
	Datum		values[8];
	QueenTxnDigest digest;
	bytea	   *digest_bytes;
	int			i;

	values[0] = UUIDPGetDatum(&t->pid);
	values[1] = CStringGetTextDatum(req->group);
	values[2] = Int64GetDatum(last);
	if (req->auto_ack)
	{
		values[3] = Int64GetDatum(part->nmessages);
		queen_claim_run(CLAIM_AUTO_ACK, values, SPI_OK_UPDATE);
		part->delivery_attempt = 1;
		part->lease_expires_at = 0;
		return;
	}
	/*
	 * The lease starts now, after the read, not when the pop began: a pop
	 * that read for a long time still hands out the whole lease (the broker
	 * restamps it again just before its COMMIT, queen_pop_restamp).
	 */
	part->lease_acquired_at = GetCurrentTimestamp();
	part->lease_expires_at = part->lease_acquired_at + (TimestampTz)
		queen_claim_lease_seconds(req, t) * USECS_PER_SEC;
	values[3] = CStringGetTextDatum(c->res->lease_id);
	values[4] = TimestampTzGetDatum(part->lease_expires_at);
	values[5] = TimestampTzGetDatum(part->lease_acquired_at);
	values[6] = Int64GetDatum(first);
	memset(&digest, 0, sizeof(digest));
	for (i = 0; i < part->nmessages; i++)
	{
		uint8		hash[QUEEN_HASH_LEN];

		queen_txn_hash(part->messages[i].frame.txn, part->messages[i].frame.txn_len, hash);
		queen_txn_digest_add(&digest, hash);
	}
	digest_bytes = palloc(VARHDRSZ + QUEEN_DIGEST_LEN);
	SET_VARSIZE(digest_bytes, VARHDRSZ + QUEEN_DIGEST_LEN);
	memcpy(VARDATA(digest_bytes), &digest, QUEEN_DIGEST_LEN);
	values[7] = PointerGetDatum(digest_bytes);
	if (queen_claim_run(CLAIM_LEASE, values, SPI_OK_UPDATE_RETURNING) != 1)
		elog(ERROR, "queen: the claimed consumer row vanished");
	part->delivery_attempt = queen_get_int32(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
}

/*
 * Claim partition t for the pop and deliver up to the remaining budget from
 * it.  Returns how many messages were taken (0: nothing to deliver, or
 * another consumer has it).
 */
int32
queen_claim_partition(QueenClaim *c, QueenClaimTarget *t)
{
	QueenPopPartition *part;
	int64		committed;
	int64		upto;
	bool		had_lease;
	Datum		values[3];

	/* windowBuffer: a partition still being written to is left alone */
	if (t->window > 0)
	{
		values[0] = UUIDPGetDatum(&t->pid);
		if (queen_claim_run(CLAIM_NEWEST, values, SPI_OK_SELECT) == 1)
		{
			TimestampTz until = queen_get_timestamptz(SPI_tuptable->vals[0],
													  SPI_tuptable->tupdesc, 1) +
				(TimestampTz) t->window * USECS_PER_SEC;

			if (until > c->now)
			{
				queen_claim_retry_hint(c, until);
				return 0;
			}
		}
	}

	if (!queen_claim_lock(c, t, &committed, &had_lease, &upto))
		return 0;

	part = queen_claim_add_partition(c, t);
	queen_claim_read(c, t, part, committed + 1, upto);
	if (part->nmessages == 0)
	{
		c->res->npartitions--;
		if (c->bytes_spent)
			c->budget = 0;		/* the next partition's first message would not fit either */
		if (t->last_offset > committed)
		{
			values[0] = UUIDPGetDatum(&t->pid);
			values[1] = CStringGetTextDatum(c->req->group);
			values[2] = Int64GetDatum(t->last_offset);
			queen_claim_run(CLAIM_SEAL, values, SPI_OK_UPDATE);
		}
		return 0;
	}

	queen_claim_commit(c, t, part);
	if (had_lease)
		c->res->leases_expired++;
	c->res->nmessages += part->nmessages;
	c->budget = c->bytes_spent ? 0 : c->budget - part->nmessages;
	return part->nmessages;
}

/* ----------------------------------------------------------------
 *		queen_pop
 * ----------------------------------------------------------------
 */

/* The id of a queue of the request's tenant; false if there is none. */
static bool
queen_claim_queue_id(QueenClaim *c, pg_uuid_t *queue_id)
{
	Datum		values[2];

	values[0] = UUIDPGetDatum(&c->req->tenant);
	values[1] = CStringGetTextDatum(c->req->queue);
	if (queen_claim_run(CLAIM_QUEUE_ID, values, SPI_OK_SELECT) == 0)
		return false;
	queen_get_uuid(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, queue_id);
	return true;
}

/*
 * A queue that does not exist delivers nothing.  For a named consumer group
 * its row is created and the group registered, so a subscription made
 * before the first push (a "new" group, say) starts from that moment.
 */
static void
queen_claim_missing(QueenClaim *c)
{
	pg_uuid_t	queue_id;
	TimestampTz sub_from;

	if (queen_claim_is_queue_mode(c))
		return;
	if (!queen_claim_queue_id(c, &queue_id) && !queen_claim_queue_upsert(c, &queue_id))
		return;
	(void) queen_claim_subscription(c, &queue_id, &sub_from);
}

/* The single-partition route. */
static void
queen_claim_named(QueenClaim *c)
{
	QueenClaimTarget t;
	Datum		values[3];
	HeapTuple	tuple;
	TupleDesc	desc;

	values[0] = UUIDPGetDatum(&c->req->tenant);
	values[1] = CStringGetTextDatum(c->req->queue);
	values[2] = CStringGetTextDatum(c->req->partition);
	if (queen_claim_run(CLAIM_RESOLVE, values, SPI_OK_SELECT) == 0)
	{
		c->res->no_partition = true;
		queen_claim_missing(c);
		return;
	}
	tuple = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	memset(&t, 0, sizeof(t));
	queen_get_uuid(tuple, desc, 1, &t.pid);
	queen_get_uuid(tuple, desc, 2, &t.queue_id);
	t.last_offset = queen_get_int64(tuple, desc, 3);
	t.delayed = queen_get_int32(tuple, desc, 4);
	t.window = queen_get_int32(tuple, desc, 5);
	t.lease_time = queen_get_int32(tuple, desc, 6);
	t.queue = unconstify(char *, c->req->queue);
	t.partition = unconstify(char *, c->req->partition);
	(void) queen_claim_partition(c, &t);
}

void
queen_pop(QueenPopRequest *req, QueenPopResult *res)
{
	QueenClaim	c;

	if (req->batch < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("batch must be at least 1")));
	if (req->queue == NULL && req->namespace_name == NULL && req->task == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("namespace or task is required")));

	memset(res, 0, sizeof(*res));
	memset(&c, 0, sizeof(c));
	c.req = req;
	c.res = res;
	c.res_cxt = CurrentMemoryContext;
	c.now = GetCurrentTimestamp();
	c.budget = req->batch;
	c.bytes_left = (int64) queen_pop_max_bytes;
	if (!req->auto_ack)
	{
		if (req->lease_id[0] == '\0')
		{
			pg_uuid_t	id;

			queen_uuid_v7(&id);
			queen_uuid_format(&id, req->lease_id);
		}
		strlcpy(res->lease_id, req->lease_id, sizeof(res->lease_id));
	}

	/* this transaction's own pushes are part of what there is to pop */
	queen_alloc_flush();
	queen_spi_connect();
	if (req->queue == NULL)
		queen_claim_discover(&c);
	else if (req->partition != NULL)
		queen_claim_named(&c);
	else
	{
		pg_uuid_t	queue_id;

		if (queen_claim_queue_id(&c, &queue_id))
			queen_claim_wildcard(&c, &queue_id, 1);
		else
			queen_claim_missing(&c);
	}
	SPI_finish();
	if (res->nmessages > 0)
		res->retry_at = 0;
}

void
queen_pop_restamp(const QueenPopRequest *req, QueenPopResult *res, int64 extra_usecs)
{
	TimestampTz now = GetCurrentTimestamp();
	Datum		values[5];
	int			i;

	if (res->lease_id[0] == '\0')
		return;					/* autoAck leases nothing */
	queen_spi_connect();
	values[1] = CStringGetTextDatum(req->group);
	values[4] = CStringGetTextDatum(res->lease_id);
	for (i = 0; i < res->npartitions; i++)
	{
		QueenPopPartition *part = &res->partitions[i];

		part->lease_expires_at = now + extra_usecs +
			(part->lease_expires_at - part->lease_acquired_at);
		part->lease_acquired_at = now;
		values[0] = UUIDPGetDatum(&part->partition_id);
		values[2] = TimestampTzGetDatum(part->lease_acquired_at);
		values[3] = TimestampTzGetDatum(part->lease_expires_at);
		if (queen_claim_run(CLAIM_RESTAMP, values, SPI_OK_UPDATE) != 1)
			elog(ERROR, "queen: a lease this transaction granted vanished");
	}
	SPI_finish();
}

/* ----------------------------------------------------------------
 *		subscriptionMode / subscriptionFrom
 * ----------------------------------------------------------------
 */

const char *
queen_sub_mode_parse(const char *mode, const char *from, const char *mode_name,
					 const char *from_name, QueenSubMode *out_mode, TimestampTz *out_from)
{
	bool		by_time = mode != NULL && strcmp(mode, "timestamp") == 0;

	*out_mode = QUEEN_SUB_ALL;
	*out_from = DT_NOBEGIN;
	if (mode != NULL && mode[0] != '\0' && !by_time && strcmp(mode, "all") != 0 &&
		strcmp(mode, "new") != 0 && strcmp(mode, "new-only") != 0)
		return psprintf("%s must be all, new, new-only or timestamp", mode_name);
	if (from != NULL && from[0] != '\0')
	{
		if (strcmp(from, "now") == 0)
			*out_mode = QUEEN_SUB_NEW;
		else if (queen_parse_iso8601(from, out_from))
			*out_mode = QUEEN_SUB_TIMESTAMP;
		else
			return psprintf("%s must be \"now\" or an ISO-8601 timestamp such as 2026-01-31T08:00:00Z",
							from_name);
	}
	else if (by_time)
		return psprintf("%s timestamp needs a timestamp in %s", mode_name, from_name);
	else if (mode != NULL && (strcmp(mode, "new") == 0 || strcmp(mode, "new-only") == 0))
		*out_mode = QUEEN_SUB_NEW;
	if (*out_mode != QUEEN_SUB_TIMESTAMP)
		*out_from = DT_NOBEGIN;
	return NULL;
}
