/*-------------------------------------------------------------------------
 *
 * fuzz_codec.c
 *	  libFuzzer target for the frame codec (src/core/codec.c): frame
 *	  decoding and re-encoding, decompression, and the verification of a
 *	  segment a caller supplies (queen.log_push_segment's blob).
 *
 * The first byte of an input picks what the rest is:
 *   0  raw frames: decoded one by one; each must encode back to exactly
 *      the bytes it came from (the format has one encoding per frame)
 *   1  a zstd blob: decompressed, and what comes out decoded as frames
 *   2  a msg_count byte, that many 16-byte hashes, then a zstd blob:
 *      verified as given (hashes rarely match: this reaches the early
 *      refusals, unknown flags, sizes, truncation)
 *   3  raw frames the harness compresses and verifies with the hashes
 *      their transactionIds really have, so the fuzzer's mutations of
 *      frames (not of zstd bytes) reach every later check; the next byte
 *      chooses msg_count off by one either way, or right
 * A verified segment must decode, in full, to the frames it was checked
 * for.  With QUEEN_FUZZ_SEEDS=DIR set, the target writes a few inputs of
 * each kind built by the real encoder into DIR and exits.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <stdio.h>
#include <stdlib.h>

#include "fuzz.h"

#include "codec.h"

#include "lib/stringinfo.h"
#include "utils/memutils.h"

/* Decode frames from buf; each re-encodes to its own bytes.  Returns how many. */
static int
fuzz_frames(const char *buf, size_t len, uint8 *hashes, int maxhashes)
{
	size_t		pos = 0;
	int			n = 0;

	while (pos < len)
	{
		size_t		start = pos;
		QueenFrame	frame;
		StringInfoData again;

		if (queen_frame_decode(buf, len, &pos, &frame) != NULL)
		{
			if (pos != start)
				abort();		/* a refusal leaves *pos where the frame starts */
			break;
		}
		if (pos <= start || pos > len)
			abort();
		initStringInfo(&again);
		queen_frame_append(&again, &frame);
		if ((size_t) again.len != pos - start || memcmp(again.data, buf + start, again.len) != 0)
		{
			fprintf(stderr, "frame at %zu does not encode back to its bytes\n", start);
			abort();
		}
		pfree(again.data);
		if (hashes != NULL && n < maxhashes)
			queen_txn_hash(frame.txn, frame.txn_len, hashes + (Size) n * QUEEN_HASH_LEN);
		n++;
	}
	return n;
}

static void
fuzz_verify(const char *blob, size_t len, const uint8 *hashes, int msg_count)
{
	int			sqlstate;
	bool		sealed;
	const char *problem;

	problem = queen_segment_problem(blob, len, hashes, msg_count, &sqlstate, &sealed);
	if (problem != NULL && strlen(problem) == 0)
		abort();
	if (problem == NULL)
	{
		StringInfoData raw;

		/* accepted: it must read back as exactly msg_count frames */
		initStringInfo(&raw);
		if (queen_decompress(blob, len, &raw) != NULL ||
			fuzz_frames(raw.data, raw.len, NULL, 0) != msg_count)
		{
			fprintf(stderr, "a verified segment does not read back as %d frames\n", msg_count);
			abort();
		}
	}
}

#define FUZZ_MAX_FRAMES 64

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	MemoryContext cxt = fuzz_iteration_context();
	MemoryContext old = MemoryContextSwitchTo(cxt);
	FuzzInput	in = {data, size};
	uint8		mode = fuzz_byte(&in) % 4;
	uint8		hashes[FUZZ_MAX_FRAMES * QUEEN_HASH_LEN];

	if (mode == 0)
		fuzz_frames((const char *) in.data, in.len, NULL, 0);
	else if (mode == 1)
	{
		StringInfoData out;

		initStringInfo(&out);
		if (queen_decompress((const char *) in.data, in.len, &out) == NULL)
			fuzz_frames(out.data, out.len, NULL, 0);
	}
	else if (mode == 2)
	{
		int			count = fuzz_byte(&in) % FUZZ_MAX_FRAMES;
		size_t		hlen = Min(in.len, (size_t) count * QUEEN_HASH_LEN);

		memset(hashes, 0, sizeof(hashes));
		memcpy(hashes, in.data, hlen);
		in.data += hlen;
		in.len -= hlen;
		fuzz_verify((const char *) in.data, in.len, hashes, count);
	}
	else
	{
		int			skew = (int) (fuzz_byte(&in) % 3) - 1;
		int			n = fuzz_frames((const char *) in.data, in.len, hashes, FUZZ_MAX_FRAMES);
		bytea	   *blob;

		if (n <= FUZZ_MAX_FRAMES && n + skew >= 0)
		{
			blob = queen_compress((const char *) in.data, in.len, 1);
			fuzz_verify(VARDATA(blob), VARSIZE(blob) - VARHDRSZ, hashes, n + skew);
		}
	}
	MemoryContextSwitchTo(old);
	return 0;
}

/* ----------------------------------------------------------------
 *		Seeds
 * ----------------------------------------------------------------
 */

static void
fuzz_write_seed(const char *dir, const char *name, uint8 mode, const char *prefix,
				size_t prefix_len, const char *body, size_t len)
{
	char		path[1024];
	FILE	   *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (f == NULL)
	{
		perror(path);
		exit(1);
	}
	fputc(mode, f);
	fwrite(prefix, 1, prefix_len, f);
	fwrite(body, 1, len, f);
	fclose(f);
}

/* Frames the broker would build: plain, traced, with a producer, sealed-flagged. */
static void
fuzz_seed_frames(StringInfo raw, uint8 *hashes, int *n)
{
	static const char *const payloads[] = {
		"{\"order\":1}", "[1,2,3]", "\"text\"", "{\"a\":{\"b\":[null,true,1.5e3]}}", "42"
	};
	int			i;

	for (i = 0; i < (int) lengthof(payloads); i++)
	{
		QueenFrame	f;
		char		txn[32];

		memset(&f, 0, sizeof(f));
		queen_uuid_v7(&f.message_id);
		snprintf(txn, sizeof(txn), "txn-%d", i);
		f.txn = txn;
		f.txn_len = (uint16) strlen(txn);
		f.payload = payloads[i];
		f.payload_len = (uint32) strlen(payloads[i]);
		if (i == 1)
		{
			f.flags |= QUEEN_FRAME_TRACE;
			queen_uuid_v7(&f.trace_id);
		}
		if (i == 2)
			queen_frame_set_producer(&f, "worker-7");
		queen_frame_append(raw, &f);
		queen_txn_hash(f.txn, f.txn_len, hashes + (Size) i * QUEEN_HASH_LEN);
	}
	*n = (int) lengthof(payloads);
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *dir = getenv("QUEEN_FUZZ_SEEDS");
	StringInfoData raw;
	uint8		hashes[FUZZ_MAX_FRAMES * QUEEN_HASH_LEN];
	char		prefix[1 + sizeof(hashes)];
	bytea	   *blob;
	int			n;

	(void) argc;
	(void) argv;
	if (dir == NULL)
		return 0;
	initStringInfo(&raw);
	fuzz_seed_frames(&raw, hashes, &n);
	blob = queen_compress(raw.data, raw.len, 3);
	fuzz_write_seed(dir, "frames", 0, "", 0, raw.data, raw.len);
	fuzz_write_seed(dir, "blob", 1, "", 0, VARDATA(blob), VARSIZE(blob) - VARHDRSZ);
	prefix[0] = (char) n;
	memcpy(prefix + 1, hashes, (Size) n * QUEEN_HASH_LEN);
	fuzz_write_seed(dir, "segment", 2, prefix, 1 + (Size) n * QUEEN_HASH_LEN,
					VARDATA(blob), VARSIZE(blob) - VARHDRSZ);
	fuzz_write_seed(dir, "segment-frames", 3, "\1", 1, raw.data, raw.len);
	exit(0);
}
