/*-------------------------------------------------------------------------
 *
 * codec.h
 *	  The frame codec, compression, transactionId hashing and ids
 *	  (codec.c): the one frame layout every door writes and reads
 *	  (docs/FORMAT.md).
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_CODEC_H
#define QUEEN_CODEC_H

#include "queen.h"

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

/* A frame's producer subject (flag 2), or none for NULL. */
static inline void
queen_frame_set_producer(QueenFrame *frame, const char *subject)
{
	if (subject == NULL)
		return;
	frame->flags |= QUEEN_FRAME_PRODUCER;
	frame->producer_sub = subject;
	frame->producer_sub_len = (uint16) strlen(subject);
}

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
 * and an ack that names exactly that batch matches it (Queen's fast
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
										 int *sqlstate, bool *all_sealed);

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

#endif							/* QUEEN_CODEC_H */
