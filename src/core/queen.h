/*-------------------------------------------------------------------------
 *
 * queen.h
 *	  Declarations shared by every part of the Queen extension: the frame
 *	  codec, name validation, the allocator core, the SQL door and settings.
 *
 * The allocator and codec form one C core.  The SQL functions, queen.push
 * and (later) the broker's shards all call these entry points, so there is
 * exactly one place where an offset is assigned and one frame layout.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_H
#define QUEEN_H

#include "postgres.h"

#include "lib/stringinfo.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

/* The tenant every request belongs to unless it says otherwise. */
#define QUEEN_DEFAULT_TENANT	"00000000-0000-0000-0000-000000000001"

/* Bytes of one transactionId hash in log_txns.hashes and in hash blobs. */
#define QUEEN_HASH_LEN			16

/* Longest queue and partition name in bytes (queues.name is varchar(255)). */
#define QUEEN_MAX_NAME_BYTES	255

/* txn_len is a u16 in the frame header. */
#define QUEEN_MAX_TXN_BYTES		65535

/* Frame flag bits (docs/FORMAT.md). */
#define QUEEN_FRAME_TRACE		0x01
#define QUEEN_FRAME_PRODUCER	0x02
#define QUEEN_FRAME_ENCRYPTED	0x04

/* body_len counts flags (1) + message id (16) + txn_len (2) at least. */
#define QUEEN_FRAME_MIN_BODY	19

/*
 * Little-endian integers at a byte position, whatever the host's order:
 * the frames (codec.c) and the spool records (spool.c) are stored so.
 */
static inline void
queen_put_u16(char *p, uint16 v)
{
	p[0] = (char) (v & 0xff);
	p[1] = (char) (v >> 8);
}

static inline void
queen_put_u32(char *p, uint32 v)
{
	p[0] = (char) (v & 0xff);
	p[1] = (char) ((v >> 8) & 0xff);
	p[2] = (char) ((v >> 16) & 0xff);
	p[3] = (char) (v >> 24);
}

static inline uint16
queen_get_u16(const char *p)
{
	const unsigned char *u = (const unsigned char *) p;

	return (uint16) (u[0] | (u[1] << 8));
}

static inline uint32
queen_get_u32(const char *p)
{
	const unsigned char *u = (const unsigned char *) p;

	return (uint32) u[0] | ((uint32) u[1] << 8) |
		((uint32) u[2] << 16) | ((uint32) u[3] << 24);
}

/* ----------------------------------------------------------------
 *		Settings (guc.c)
 * ----------------------------------------------------------------
 */
extern int	queen_zstd_level;
extern int	queen_dedup_cache_mb;
extern char *queen_tenant_setting;

extern void queen_define_gucs(void);
extern void queen_session_tenant(pg_uuid_t *out);

/* ----------------------------------------------------------------
 *		Frame codec, hashing and ids (codec.c)
 * ----------------------------------------------------------------
 */

/*
 * One frame.  Pointers borrow from the buffer the frame was decoded from (or
 * the caller's data when encoding); nothing here owns memory.
 */
typedef struct QueenFrame
{
	uint8		flags;
	pg_uuid_t	message_id;
	pg_uuid_t	trace_id;		/* valid when flags & QUEEN_FRAME_TRACE */
	const char *txn;
	uint16		txn_len;
	const char *producer_sub;	/* valid when flags & QUEEN_FRAME_PRODUCER */
	uint16		producer_sub_len;
	const char *payload;
	uint32		payload_len;
} QueenFrame;

extern size_t queen_frame_size(const QueenFrame *frame);
extern void queen_frame_append(StringInfo buf, const QueenFrame *frame);
extern const char *queen_frame_decode(const char *buf, size_t len, size_t *pos,
									  QueenFrame *frame);

extern bytea *queen_compress(const char *data, size_t len, int level);
extern const char *queen_decompress(const char *data, size_t len,
									StringInfo out);

extern void queen_txn_hash(const char *txn, size_t len, uint8 *out);
extern const char *queen_segment_problem(const char *blob, size_t blob_len,
										 const uint8 *hashes, int msg_count,
										 int *sqlstate);

/*
 * Largest a segment's packed frames may inflate to: what one allocation can
 * hold, so every segment the broker builds fits.  Reads stop there.
 */
#define QUEEN_SEGMENT_MAX_RAW	((Size) MaxAllocSize - 1)

/* Longest identity of a partition: tenant, queue, 0x1F, partition. */
#define QUEEN_IDENT_MAX		(UUID_LEN + 2 * QUEEN_MAX_NAME_BYTES + 1)
extern size_t queen_partition_ident(char *out, const pg_uuid_t *tenant,
									const char *queue, size_t qlen,
									const char *partition, size_t plen);
extern void queen_uuid_v7(pg_uuid_t *out);
extern void queen_uuid_format(const pg_uuid_t *uuid, char *out);
extern bool queen_uuid_parse(const char *text, pg_uuid_t *out);
extern int	queen_hex_value(char c);

/* ----------------------------------------------------------------
 *		Input validation (validate.c)
 * ----------------------------------------------------------------
 */
extern const char *queen_name_problem(const char *name, size_t len,
									  size_t max_len);
extern void queen_check_name(const char *what, const char *name, size_t len,
							 size_t max_len);
extern void queen_check_queue_name(const char *name, size_t len);
extern void queen_check_partition_name(const char *name, size_t len);
extern void queen_check_transaction_id(const char *txn, size_t len);
extern char *queen_json_problem(const char *payload, size_t len);
extern const char *queen_json_number_problem(const char *num, size_t len);
extern char *queen_json_syntax_problem(const char *payload, size_t len);
extern bool queen_json_numbers_need_check(const char *text, size_t len);

/*
 * JSON text shorter than this cannot reach jsonb's limits (validate.c): an
 * element takes at least 2 bytes of text ("0,"), so the 16,777,217
 * elements jsonb cannot hold need 33,554,433; 8,388,609 pairs need 5 each;
 * and an element takes at most 13 bytes of jsonb (an entry, a short
 * numeric, alignment), 6.5 per byte of text, so 33,000,000 bytes stay
 * under the 256 MB a container may hold.
 */
#define QUEEN_JSONB_SAFE_TEXT	33000000

/* ----------------------------------------------------------------
 *		The allocator core (alloc.c)
 * ----------------------------------------------------------------
 */
typedef enum QueenSegmentStatus
{
	QUEEN_SEGMENT_PENDING = 0,
	QUEEN_SEGMENT_QUEUED,
	QUEEN_SEGMENT_DUPLICATE
} QueenSegmentStatus;

/* A frame of an incoming segment that matched a stored transactionId. */
typedef struct QueenDup
{
	int32		index;			/* incoming frame index, 0-based */
	int64		offset;			/* absolute offset of the original */
} QueenDup;

/*
 * One segment of a bundle: what the caller supplies, then the verdict the
 * allocator writes back.  Strings are NUL-terminated; hashes and blob are
 * complete varlenas so they can go to SPI without a copy.
 */
typedef struct QueenSegment
{
	/* input */
	const char *queue;
	const char *partition;
	pg_uuid_t	tenant;
	int32		msg_count;
	bytea	   *hashes;			/* 16 * msg_count bytes, frame order */
	int64		verified;		/* caller vouches: no hash at offset <= this */
	bytea	   *blob;			/* zstd(packed frames) */
	bool		window_set;		/* use window_in instead of the queue's */
	int32		window_in;
	bool		untrusted;		/* from a SQL caller: verify the blob completely */

	/* output */
	QueenSegmentStatus status;
	pg_uuid_t	partition_id;
	int32		window;			/* dedup window the queue had, seconds */
	int64		base_offset;	/* queued: offset of frame 0 */
	TimestampTz created_at;		/* queued: the bundle's timestamp */
	int64		probed_upto;	/* duplicate: last_offset the probe covered */
	int			ndups;
	QueenDup   *dups;			/* duplicate: ascending by index */
} QueenSegment;

extern void queen_spi_connect(void);
extern struct _SPI_plan *queen_keep_plan(const char *sql, int nargs, Oid *argtypes,
										 bool first_rows);
extern void queen_push_bundle(QueenSegment *segs, int nsegs);
extern void queen_push_one_resolved(QueenSegment *seg, const pg_uuid_t *pid);
extern void queen_alloc_flush(void);
extern void queen_alloc_init(void);

/* ----------------------------------------------------------------
 *		Bundles of frames (bundle.c)
 * ----------------------------------------------------------------
 */

/* One frame offered to a bundle, and its verdict. */
typedef struct QueenBundleFrame
{
	/* input */
	const char *packed;			/* the frame encoded as stored */
	uint32		packed_len;
	uint8		hash[QUEEN_HASH_LEN];	/* XXH3-128 of its transactionId */
	pg_uuid_t	message_id;		/* the minted id; a duplicate's becomes the original's */

	/* output */
	QueenSegmentStatus status;
	int			leader;			/* layer-2 follower of this frame index, or -1 */
	int64		offset;			/* queued: its own; duplicate: the original's */
	TimestampTz created_at;
	bool		created_known;
} QueenBundleFrame;

/* The frames for one (tenant, queue, partition). */
typedef struct QueenBundleGroup
{
	const char *queue;
	const char *partition;
	pg_uuid_t	tenant;
	QueenBundleFrame *frames;
	int			nframes;

	/* output */
	pg_uuid_t	partition_id;
	int			nsegments;		/* segments written for this group (0 or 1) */

	/* private to bundle.c */
	int		   *pending;
	int			npending;
	int64		verified;
} QueenBundleGroup;

extern void queen_bundle_push(QueenBundleGroup *groups, int ngroups);
extern void queen_bundle_group_init(QueenBundleGroup *bg, const pg_uuid_t *tenant,
									const char *queue, const char *partition,
									const char *frames, Size len, int nframes);

/* What identifies an item of a push request for layer-1 dedup. */
typedef struct QueenItemKey
{
	const char *queue;
	const char *partition;
	const char *txn;
} QueenItemKey;

extern int	queen_group_items(const QueenItemKey *keys, int n, int *leader,
							  int ***members, int **nmembers);

/* ----------------------------------------------------------------
 *		The dedup cache (dedup_cache.c)
 * ----------------------------------------------------------------
 */
typedef struct QueenDedupEntry QueenDedupEntry;

extern void queen_dedup_cache_init(void);
extern QueenDedupEntry *queen_dedup_cache_get(const pg_uuid_t *pid, TimestampTz generation,
											  int64 from, TimestampTz cutoff,
											  int64 last_offset);
extern QueenDedupEntry *queen_dedup_cache_create(const pg_uuid_t *pid, TimestampTz generation,
												 int64 floor, TimestampTz loaded_since);
extern void queen_dedup_cache_drop(QueenDedupEntry *e);
extern bool queen_dedup_cache_add(QueenDedupEntry *e, const uint8 *hashes, int count,
								  int64 base, TimestampTz created_at, TimestampTz cutoff);
extern void queen_dedup_cache_verified(QueenDedupEntry *e, int64 last_offset,
									   TimestampTz cutoff);
extern int64 queen_dedup_cache_verified_upto(const QueenDedupEntry *e);
extern void queen_dedup_cache_match(const QueenDedupEntry *e, const uint8 *incoming,
									int count, int64 from, TimestampTz cutoff,
									int64 *first_off);
/*
 * What the allocator knows of a partition this transaction wrote to, so
 * that later pushes to it in the same transaction neither lock nor update
 * its row again (each update of one row in one transaction lengthens the
 * chain of row versions every later statement walks: n pushes cost n^2).
 * The offsets advance here and reach the row once, before commit.
 */
typedef struct QueenOwnAlloc
{
	bool		locked;			/* our write holds the row lock; last is exact */
	bool		described;		/* window, txns_start and generation are the row's */
	bool		dirty;			/* the row's last_offset may differ from last */
	bool		deferred;		/* some write here left the row behind */
	Oid			userid;			/* who deferred the last write: the flush runs as them */
	int			sec_context;
	SubTransactionId unlocked_in;	/* a queue deletion forgot the row here, or 0 */
	bool		was_locked;		/* locked and described before that */
	bool		was_described;
	int32		window;			/* the queue's dedup window */
	int64		txns_start;
	TimestampTz generation;
	int64		last;			/* the last offset this transaction allocated */
} QueenOwnAlloc;

typedef struct QueenOwnPartition QueenOwnPartition;
extern QueenOwnPartition *queen_dedup_own(const pg_uuid_t *pid);
extern QueenOwnAlloc *queen_dedup_own_alloc(QueenOwnPartition *o);
extern void queen_dedup_own_defer(QueenOwnPartition *o);
extern bool queen_dedup_own_any_dirty(void);
extern int	queen_dedup_own_dirty(QueenOwnAlloc ***dirty);
extern void queen_dedup_own_unlock_all(void);
extern void queen_dedup_own_forget_windows(void);
extern const pg_uuid_t *queen_dedup_own_pid(const QueenOwnAlloc *a);
extern int64 queen_dedup_own_match(const QueenOwnPartition *o, int64 last_offset,
								   const uint8 *incoming, int count, int64 from,
								   TimestampTz cutoff, int64 *first_off);
extern void queen_dedup_cache_remember(const pg_uuid_t *pid, int64 base, int32 count,
									   TimestampTz created_at, const uint8 *hashes);

/* The covering segment of an offset, as log_segment_at_v1 returns it. */
typedef struct QueenStoredSegment
{
	int64		base_offset;
	int64		end_offset;
	TimestampTz created_at;
	bytea	   *blob;
} QueenStoredSegment;

extern bool queen_segment_at(const pg_uuid_t *pid, int64 offset,
							 QueenStoredSegment *out);
extern uint64 queen_damaged_originals;
extern bool queen_resolve_message(const pg_uuid_t *pid, int64 offset,
								  pg_uuid_t *message_id,
								  TimestampTz *created_at);

/* ----------------------------------------------------------------
 *		Queue configuration (configure.c)
 * ----------------------------------------------------------------
 */

/*
 * POST /api/v1/configure and DELETE /api/v1/resources/queues/:queue, in the
 * caller's transaction.  Each returns an HTTP status and appends the JSON
 * body to out: configure answers 200 with the effective configuration or
 * 400 with {"error", "invalid"} having written nothing; delete answers 200
 * whether or not the queue existed (400 only for a name that is not UTF-8).
 * They raise only when the database fails.  Both connect to SPI and finish
 * it themselves.
 */
extern int	queen_configure_queue(const pg_uuid_t *tenant, const char *body,
								  size_t len, StringInfo out);
extern int	queen_delete_queue(const pg_uuid_t *tenant, const char *queue,
							   StringInfo out);

#endif							/* QUEEN_H */
