/*-------------------------------------------------------------------------
 *
 * codec.c
 *	  The frame layout, segment compression, transactionId hashing and
 *	  UUIDv7 minting: everything that decides which bytes are stored.
 *
 * These bytes must stay identical to Queen's (docs/FORMAT.md), so segments
 * written here are readable by any Queen tool and benchmarks stay
 * comparable.  Decoding is written for hostile input: every length is
 * checked against the bytes that remain before it is used, and problems are
 * returned as messages rather than raised, so a broker worker can answer a
 * client instead of unwinding.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "queen.h"
#include "codec.h"
#include "crypto.h"
#include "validate.h"

#include <time.h>

#include <xxhash.h>
#include <zstd.h>

#include "mb/pg_wchar.h"
#include "port/pg_bswap.h"
#include "utils/memutils.h"

/* ----------------------------------------------------------------
 *		Frames
 * ----------------------------------------------------------------
 */

/* Bytes after the 4-byte body_len field. */
static size_t
queen_frame_body_size(const QueenFrame *frame)
{
	size_t		body = 1 + UUID_LEN + 2 + frame->txn_len + frame->payload_len;

	if (frame->flags & QUEEN_FRAME_TRACE)
		body += UUID_LEN;
	if (frame->flags & QUEEN_FRAME_PRODUCER)
		body += 2 + frame->producer_sub_len;
	return body;
}

/* Encoded size of a frame including its length prefix. */
size_t
queen_frame_size(const QueenFrame *frame)
{
	return 4 + queen_frame_body_size(frame);
}

/*
 * Append one frame to buf.  The caller has validated the lengths (txn and
 * producer sub fit their u16 prefixes by type; the body must fit a u32).
 */
void
queen_frame_append(StringInfo buf, const QueenFrame *frame)
{
	size_t		body = queen_frame_body_size(frame);
	char	   *p;

	if (body > MaxAllocSize - 5)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("message of %zu bytes does not fit a frame", body)));

	enlargeStringInfo(buf, (int) (4 + body));
	p = buf->data + buf->len;

	queen_put_u32(p, (uint32) body);
	p += 4;
	*p++ = (char) frame->flags;
	memcpy(p, frame->message_id.data, UUID_LEN);
	p += UUID_LEN;
	if (frame->flags & QUEEN_FRAME_TRACE)
	{
		memcpy(p, frame->trace_id.data, UUID_LEN);
		p += UUID_LEN;
	}
	queen_put_u16(p, frame->txn_len);
	p += 2;
	if (frame->txn_len > 0)
		memcpy(p, frame->txn, frame->txn_len);
	p += frame->txn_len;
	if (frame->flags & QUEEN_FRAME_PRODUCER)
	{
		queen_put_u16(p, frame->producer_sub_len);
		p += 2;
		if (frame->producer_sub_len > 0)
			memcpy(p, frame->producer_sub, frame->producer_sub_len);
		p += frame->producer_sub_len;
	}
	if (frame->payload_len > 0)
		memcpy(p, frame->payload, frame->payload_len);
	p += frame->payload_len;

	buf->len += (int) (4 + body);
	buf->data[buf->len] = '\0';
}

/*
 * Decode the frame at *pos of buf[0..len).  On success advance *pos past it
 * and return NULL; on malformed input return a static description and leave
 * *pos where the bad frame starts.  Nothing is read outside buf.
 */
const char *
queen_frame_decode(const char *buf, size_t len, size_t *pos, QueenFrame *frame)
{
	size_t		at = *pos;
	size_t		remaining;
	size_t		body;
	const char *p;

	if (at >= len)
		return "no frame left in the buffer";
	remaining = len - at;
	if (remaining < 4)
		return "truncated frame length";
	body = queen_get_u32(buf + at);
	if (body < QUEEN_FRAME_MIN_BODY)
		return "frame body shorter than its fixed header";
	if (body > remaining - 4)
		return "frame body runs past the end of the segment";

	p = buf + at + 4;
	frame->flags = (uint8) p[0];
	if (frame->flags & ~(QUEEN_FRAME_TRACE | QUEEN_FRAME_PRODUCER | QUEEN_FRAME_ENCRYPTED))
		return "frame has unknown flag bits";
	p += 1;
	body -= 1;
	memcpy(frame->message_id.data, p, UUID_LEN);
	p += UUID_LEN;
	body -= UUID_LEN;

	if (frame->flags & QUEEN_FRAME_TRACE)
	{
		if (body < UUID_LEN + 2)
			return "frame too short for its trace id";
		memcpy(frame->trace_id.data, p, UUID_LEN);
		p += UUID_LEN;
		body -= UUID_LEN;
	}
	else
		memset(frame->trace_id.data, 0, UUID_LEN);

	/* body >= 2 holds here: the minimum body covers txn_len */
	frame->txn_len = queen_get_u16(p);
	p += 2;
	body -= 2;
	if (frame->txn_len > body)
		return "transaction id runs past the end of the frame";
	frame->txn = p;
	p += frame->txn_len;
	body -= frame->txn_len;

	if (frame->flags & QUEEN_FRAME_PRODUCER)
	{
		if (body < 2)
			return "frame too short for its producer length";
		frame->producer_sub_len = queen_get_u16(p);
		p += 2;
		body -= 2;
		if (frame->producer_sub_len > body)
			return "producer id runs past the end of the frame";
		frame->producer_sub = p;
		p += frame->producer_sub_len;
		body -= frame->producer_sub_len;
	}
	else
	{
		frame->producer_sub = NULL;
		frame->producer_sub_len = 0;
	}

	frame->payload = p;
	frame->payload_len = (uint32) body;
	*pos = (size_t) (p + body - buf);
	return NULL;
}

/* ----------------------------------------------------------------
 *		Compression
 * ----------------------------------------------------------------
 */

/* Contexts live for the whole process: creating one costs more than a small compression. */
static ZSTD_CCtx *queen_cctx = NULL;
static ZSTD_DCtx *queen_dctx = NULL;

/*
 * zstd-compress data into a new bytea (one standard zstd frame).
 */
bytea *
queen_compress(const char *data, size_t len, int level)
{
	size_t		bound = ZSTD_compressBound(len);
	size_t		written;
	bytea	   *out;

	if (ZSTD_isError(bound) || bound > MaxAllocSize - VARHDRSZ)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("segment of %zu bytes is too large to compress", len)));

	if (queen_cctx == NULL)
	{
		queen_cctx = ZSTD_createCCtx();
		if (queen_cctx == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory creating a zstd context")));
	}

	out = (bytea *) palloc(VARHDRSZ + bound);
	written = ZSTD_compressCCtx(queen_cctx, VARDATA(out), bound, data, len, level);
	if (ZSTD_isError(written))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("zstd compression failed: %s", ZSTD_getErrorName(written))));
	SET_VARSIZE(out, VARHDRSZ + written);
	return out;
}

/*
 * Decompress one or more concatenated zstd frames, appending to out.  Uses
 * the streaming decoder so a frame without (or with a lying) content size
 * still decodes.  Returns NULL on success or a description of the damage.
 * Output is bounded by StringInfo's 1 GB limit, which raises an ERROR.
 */
/* The process's decompression context, ready for a new stream. */
static void
queen_decompress_begin(void)
{
	if (queen_dctx == NULL)
	{
		queen_dctx = ZSTD_createDCtx();
		if (queen_dctx == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory creating a zstd context")));
	}
	else
		ZSTD_DCtx_reset(queen_dctx, ZSTD_reset_session_only);
}

const char *
queen_decompress(const char *data, size_t len, StringInfo out)
{
	ZSTD_inBuffer in = {data, len, 0};
	unsigned long long hint;

	if (len == 0)
		return "empty segment blob";

	queen_decompress_begin();

	/*
	 * A content size in the header lets the common case decode in one pass;
	 * it is only a hint, and capped so a forged header cannot make us
	 * allocate far more than the data could plausibly hold.
	 */
	hint = ZSTD_getFrameContentSize(data, len);
	if (hint != ZSTD_CONTENTSIZE_UNKNOWN && hint != ZSTD_CONTENTSIZE_ERROR &&
		hint <= 64 * 1024 * 1024)
		enlargeStringInfo(out, (int) hint + 1);

	for (;;)
	{
		ZSTD_outBuffer o;
		size_t		ret;

		/* doubles, up to what one allocation can hold */
		if (out->maxlen - out->len < 4096 && (Size) out->len < QUEEN_SEGMENT_MAX_RAW)
			enlargeStringInfo(out, (int) Min((Size) out->maxlen,
											 QUEEN_SEGMENT_MAX_RAW - (Size) out->len));
		/* a forged or damaged blob must not inflate without bound */
		if (out->maxlen - out->len - 1 <= 0)
		{
			ZSTD_DCtx_reset(queen_dctx, ZSTD_reset_session_only);
			return "segment inflates to more than 1 GB";
		}
		o.dst = out->data + out->len;
		o.size = (size_t) (out->maxlen - out->len - 1);
		o.pos = 0;

		ret = ZSTD_decompressStream(queen_dctx, &o, &in);
		if (ZSTD_isError(ret))
		{
			ZSTD_DCtx_reset(queen_dctx, ZSTD_reset_session_only);
			return ZSTD_getErrorName(ret);
		}
		out->len += (int) o.pos;
		out->data[out->len] = '\0';

		if (in.pos == in.size)
		{
			if (ret == 0)
				return NULL;	/* every frame complete */
			if (o.pos < o.size)
			{
				/* input gone, output not full, frame unfinished */
				ZSTD_DCtx_reset(queen_dctx, ZSTD_reset_session_only);
				return "compressed data is truncated";
			}
		}
	}
}

/* ----------------------------------------------------------------
 *		Hashing and ids
 * ----------------------------------------------------------------
 */

/*
 * XXH3-128 (seed 0) of the transactionId bytes, in xxHash's canonical
 * big-endian form: the 16 bytes stored in log_segments.hashes and compared by probes.
 */
void
queen_txn_hash(const char *txn, size_t len, uint8 *out)
{
	XXH128_hash_t h = XXH3_128bits(txn, len);
	XXH128_canonical_t canon;

	XXH128_canonicalFromHash(&canon, h);
	memcpy(out, canon.digest, QUEEN_HASH_LEN);
}

void
queen_txn_digest_add(QueenTxnDigest *d, const uint8 *hash)
{
	uint64		half[2];

	memcpy(half, hash, sizeof(half));
	d->sum[0] += half[0];
	d->sum[1] += half[1];
}

/* One frame of a caller's segment against its hash and the doors' rules. */
static const char *
queen_frame_problem(const QueenFrame *frame, int k, const uint8 *hashes, int *sqlstate)
{
	uint8		hash[QUEEN_HASH_LEN];
	const char *bad;

	bad = queen_name_problem(frame->txn, frame->txn_len, QUEEN_MAX_TXN_BYTES);
	if (bad == NULL && !pg_verify_mbstr(PG_UTF8, frame->txn, (int) frame->txn_len, true))
		bad = "is not valid UTF-8";
	if (bad != NULL)
	{
		*sqlstate = ERRCODE_INVALID_PARAMETER_VALUE;
		return psprintf("frame %d: transactionId %s", k, bad);
	}
	queen_txn_hash(frame->txn, frame->txn_len, hash);
	if (memcmp(hash, hashes + (Size) k * QUEEN_HASH_LEN, QUEEN_HASH_LEN) != 0)
	{
		*sqlstate = ERRCODE_INVALID_PARAMETER_VALUE;
		return psprintf("hash %d is not the XXH3-128 of frame %d's transactionId", k, k);
	}
	bad = queen_json_problem(frame->payload, frame->payload_len);
	if (bad != NULL)
	{
		*sqlstate = ERRCODE_INVALID_TEXT_REPRESENTATION;
		return psprintf("frame %d: the payload is not JSON jsonb can hold: %s", k, bad);
	}
	return NULL;
}

/*
 * Why a segment supplied by a caller is not one the broker would have
 * built, or NULL: the blob decompresses within QUEEN_SEGMENT_MAX_RAW into
 * exactly msg_count well-formed frames and nothing after them, each
 * frame's transactionId is a valid one whose XXH3-128 is the matching
 * entry of hashes, and each payload is JSON jsonb can hold.  *sqlstate is
 * set for the caller's ereport.
 *
 * Frames are checked as they come out of the decompressor, keeping only
 * the one being assembled: a blob that inflates without bound (a few kB
 * of zstd can claim gigabytes) is refused at its first bad frame, having
 * cost about one frame of memory.
 */
const char *
queen_segment_problem(const char *blob, size_t blob_len, const uint8 *hashes,
					  int msg_count, int *sqlstate, bool *all_sealed)
{
	ZSTD_inBuffer in = {blob, blob_len, 0};
	StringInfoData buf;			/* undecoded output: [start, len) */
	size_t		start = 0;
	Size		total = 0;
	int			k = 0;
	int			sealed = 0;
	bool		finished = false;

	*sqlstate = ERRCODE_INVALID_BINARY_REPRESENTATION;
	*all_sealed = false;
	if (blob_len == 0)
		return "the blob is empty";
	queen_decompress_begin();
	initStringInfo(&buf);
	for (;;)
	{
		ZSTD_outBuffer o;
		size_t		ret;

		/* decode every complete frame the buffer holds */
		for (;;)
		{
			size_t		avail = (size_t) buf.len - start;
			size_t		pos = start;
			QueenFrame	frame;
			const char *problem;
			uint32		body;

			if (avail < 4)
				break;
			body = queen_get_u32(buf.data + start);
			if (body < QUEEN_FRAME_MIN_BODY)
				return psprintf("frame %d: frame body shorter than its fixed header", k);
			if ((Size) body + 4 > QUEEN_SEGMENT_MAX_RAW)
				return psprintf("frame %d is larger than 1 GB", k);
			/* a header already wrong needs no body to be refused */
			if (avail >= 5 &&
				((uint8) buf.data[start + 4] &
				 ~(QUEEN_FRAME_TRACE | QUEEN_FRAME_PRODUCER | QUEEN_FRAME_ENCRYPTED)) != 0)
				return psprintf("frame %d: frame has unknown flag bits", k);
			/* incomplete: read on (the buffer grows with what arrives, not what is claimed) */
			if (avail < (size_t) body + 4)
				break;
			if (k >= msg_count)
			{
				*sqlstate = ERRCODE_INVALID_PARAMETER_VALUE;
				return psprintf("msg_count is %d but the blob holds more frames", msg_count);
			}
			problem = queen_frame_decode(buf.data, buf.len, &pos, &frame);
			if (problem != NULL)
				return psprintf("frame %d: %s", k, problem);
			problem = queen_frame_problem(&frame, k, hashes, sqlstate);
			if (problem != NULL)
				return problem;
			/*
			 * A caller's frames: the producer subject is the broker's to
			 * stamp from a token, and a sealed frame holds an envelope.
			 */
			if (frame.flags & QUEEN_FRAME_PRODUCER)
			{
				*sqlstate = ERRCODE_INVALID_PARAMETER_VALUE;
				return psprintf("frame %d carries a producerSub, which only the broker sets (from a token's sub)", k);
			}
			if (frame.flags & QUEEN_FRAME_ENCRYPTED)
			{
				if (!queen_crypto_is_envelope(frame.payload, frame.payload_len))
					return psprintf("frame %d is flagged sealed but its payload is not Queen's envelope", k);
				sealed++;
			}
			k++;
			start = pos;
		}
		if (finished)
			break;

		/* compact, then decompress some more */
		if (start > 0)
		{
			memmove(buf.data, buf.data + start, buf.len - start);
			buf.len -= (int) start;
			start = 0;
		}
		if (buf.maxlen - buf.len < 65536)
			enlargeStringInfo(&buf, 65536);
		o.dst = buf.data + buf.len;
		o.size = (size_t) (buf.maxlen - buf.len - 1);
		o.pos = 0;
		ret = ZSTD_decompressStream(queen_dctx, &o, &in);
		if (ZSTD_isError(ret))
			return psprintf("the blob does not decompress: %s", ZSTD_getErrorName(ret));
		buf.len += (int) o.pos;
		total += o.pos;
		if (total > QUEEN_SEGMENT_MAX_RAW)
			return "the blob inflates to more than 1 GB";
		if (in.pos == in.size && o.pos < o.size)
		{
			if (ret != 0)
				return "the blob does not decompress: compressed data is truncated";
			finished = true;	/* everything is out: decode what is left */
		}
	}
	if (buf.len - start != 0)
		return psprintf("frame %d: the blob ends inside it", k);
	if (k != msg_count)
	{
		*sqlstate = ERRCODE_INVALID_PARAMETER_VALUE;
		return psprintf("msg_count is %d but the blob holds %d frames", msg_count, k);
	}
	pfree(buf.data);
	*all_sealed = (sealed == k);
	return NULL;
}

/*
 * The bytes that identify a partition everywhere a key is needed (the
 * broker's shard choice and groups, the allocator's id cache): tenant,
 * queue, 0x1F, partition.  Names cannot contain 0x1F (validated), so it is
 * unambiguous.  out must hold QUEEN_IDENT_MAX bytes; returns the length.
 */
size_t
queen_partition_ident(char *out, const pg_uuid_t *tenant, const char *queue,
					  size_t qlen, const char *partition, size_t plen)
{
	Assert(qlen <= QUEEN_MAX_NAME_BYTES && plen <= QUEEN_MAX_NAME_BYTES);
	memcpy(out, tenant->data, UUID_LEN);
	memcpy(out + UUID_LEN, queue, qlen);
	out[UUID_LEN + qlen] = 0x1F;
	memcpy(out + UUID_LEN + qlen + 1, partition, plen);
	return UUID_LEN + qlen + 1 + plen;
}

/* Random bytes are drawn in blocks: one pg_strong_random call per 25 ids. */
static uint8 queen_random_pool[256];
static int	queen_random_left = 0;

static void
queen_random_bytes(uint8 *out, int n)
{
	if (queen_random_left < n)
	{
		if (!pg_strong_random(queen_random_pool, sizeof(queen_random_pool)))
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("could not generate random bytes for a message id")));
		queen_random_left = sizeof(queen_random_pool);
	}
	memcpy(out, queen_random_pool + sizeof(queen_random_pool) - queen_random_left, n);
	queen_random_left -= n;
}

/*
 * Mint a UUIDv7 (RFC 9562): 48-bit Unix milliseconds, then a 12-bit counter
 * in rand_a so ids minted by one process are strictly increasing even within
 * one millisecond (method 1 of section 6.2); when the counter overflows the
 * timestamp is advanced by one millisecond rather than breaking the order.
 */
void
queen_uuid_v7(pg_uuid_t *out)
{
	static uint64 last_ms = 0;
	static uint32 counter = 0;
	struct timespec ts;
	uint64		ms;
	uint8		rnd[9];

	clock_gettime(CLOCK_REALTIME, &ts);
	ms = (uint64) ts.tv_sec * 1000 + (uint64) ts.tv_nsec / 1000000;
	queen_random_bytes(rnd, sizeof(rnd));

	if (ms > last_ms)
	{
		last_ms = ms;
		/* start low so the counter has room for a burst */
		counter = ((uint32) rnd[8]) & 0x3ff;
	}
	else
	{
		counter++;
		if (counter > 0xfff)
		{
			last_ms++;
			counter = 0;
		}
	}

	out->data[0] = (uint8) (last_ms >> 40);
	out->data[1] = (uint8) (last_ms >> 32);
	out->data[2] = (uint8) (last_ms >> 24);
	out->data[3] = (uint8) (last_ms >> 16);
	out->data[4] = (uint8) (last_ms >> 8);
	out->data[5] = (uint8) last_ms;
	out->data[6] = (uint8) (0x70 | ((counter >> 8) & 0x0f));
	out->data[7] = (uint8) (counter & 0xff);
	out->data[8] = (uint8) (0x80 | (rnd[0] & 0x3f));
	memcpy(out->data + 9, rnd + 1, 7);
}

/* Canonical 36-character text form; out must hold 37 bytes. */
void
queen_uuid_format(const pg_uuid_t *uuid, char *out)
{
	static const char hex[] = "0123456789abcdef";
	int			i;
	char	   *p = out;

	for (i = 0; i < UUID_LEN; i++)
	{
		if (i == 4 || i == 6 || i == 8 || i == 10)
			*p++ = '-';
		*p++ = hex[uuid->data[i] >> 4];
		*p++ = hex[uuid->data[i] & 0x0f];
	}
	*p = '\0';
}

int
queen_hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * Parse the canonical 8-4-4-4-12 form (or 32 bare hex digits) without
 * raising, for settings whose check hooks must not throw.
 */
bool
queen_uuid_parse(const char *text, pg_uuid_t *out)
{
	size_t		len = strlen(text);
	bool		dashed = (len == 36);
	const char *p = text;
	int			i;

	if (len != 36 && len != 32)
		return false;
	for (i = 0; i < UUID_LEN; i++)
	{
		int			hi,
					lo;

		if (dashed && (i == 4 || i == 6 || i == 8 || i == 10))
		{
			if (*p != '-')
				return false;
			p++;
		}
		hi = queen_hex_value(p[0]);
		lo = queen_hex_value(p[1]);
		if (hi < 0 || lo < 0)
			return false;
		out->data[i] = (uint8) ((hi << 4) | lo);
		p += 2;
	}
	return *p == '\0';
}
