/*-------------------------------------------------------------------------
 *
 * queen.h
 *	  Declarations shared by every part of the Queen extension: the frame
 *	  codec, name validation, settings and the segment verdict.
 *
 * The log (log_write.h, log_read.h) and codec form one C core.  The SQL
 * functions, queen.push and the broker's shards all call its entry points,
 * so there is exactly one place where an offset is assigned and one frame
 * layout.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_H
#define QUEEN_H

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
extern int	queen_dedup_filter_mb;
extern char *queen_tenant_setting;
extern int	queen_pop_max_bytes;
extern int	queen_max_lease_seconds;
extern bool queen_strict_acks;
extern bool queen_notify;

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

/*
 * The digest of a set of transactionIds: the sums of their hashes' two
 * halves, so it does not depend on order.  A pop records its leased batch's
 * and an ack that names exactly that batch matches it (reference 5.2's fast
 * path) without reading a hash back.
 */
typedef struct QueenTxnDigest
{
	uint64		sum[2];
} QueenTxnDigest;

#define QUEEN_DIGEST_LEN	((int) sizeof(QueenTxnDigest))

extern void queen_txn_digest_add(QueenTxnDigest *d, const uint8 *hash);
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
extern bool queen_parse_iso8601(const char *text, TimestampTz *out);
extern void queen_check_name(const char *what, const char *name, size_t len,
							 size_t max_len);
extern void queen_check_queue_name(const char *name, size_t len);
extern void queen_check_partition_name(const char *name, size_t len);
extern void queen_check_transaction_id(const char *txn, size_t len);
extern char *queen_json_problem(const char *payload, size_t len);
extern const char *queen_json_number_problem(const char *num, size_t len);
extern char *queen_json_syntax_problem(const char *payload, size_t len);
struct JsonSemAction;
extern char *queen_json_walk(const char *text, size_t len, struct JsonSemAction *sem);
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
 *		The log (log_write.h, log_read.h, dedup_cache.h, spi.h)
 * ----------------------------------------------------------------
 */

/* The verdict of a segment the write path took, and of each of its frames. */
typedef enum QueenSegmentStatus
{
	QUEEN_SEGMENT_PENDING = 0,
	QUEEN_SEGMENT_QUEUED,
	QUEEN_SEGMENT_DUPLICATE
} QueenSegmentStatus;

/* Registered once at load (module.c): the transaction callbacks. */
extern void queen_dedup_cache_init(void);
extern void queen_alloc_init(void);

#endif							/* QUEEN_H */
