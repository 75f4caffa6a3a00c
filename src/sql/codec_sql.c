/*-------------------------------------------------------------------------
 *
 * codec_sql.c
 *	  The frame codec as SQL functions: queen.uuid_v7, queen.txn_hash,
 *	  queen.hash_blob, queen.pack_frames, queen.unpack_frames and
 *	  queen.decompress_segment; and, for the tests only (test/), the
 *	  encryption envelope opened.
 *
 * These let a driver, a benchmark or an operator build exactly what the
 * broker sends to log_push_multi_v1 and look inside any stored segment,
 * without reimplementing the format.  They share codec.c with the push and
 * read paths, so what they produce is what those paths store.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "queen.h"
#include "validate.h"
#include "codec.h"
#include "crypto.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "mb/pg_wchar.h"
#include "utils/lsyscache.h"
#include "common/int.h"
#include "datatype/timestamp.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

PG_FUNCTION_INFO_V1(queen_uuid_v7_sql);
PG_FUNCTION_INFO_V1(queen_txn_hash_sql);
PG_FUNCTION_INFO_V1(queen_hash_blob_sql);
PG_FUNCTION_INFO_V1(queen_pack_frames_sql);
PG_FUNCTION_INFO_V1(queen_unpack_frames_sql);
PG_FUNCTION_INFO_V1(queen_decompress_segment_sql);
PG_FUNCTION_INFO_V1(queen_uuid_v7_time_sql);
PG_FUNCTION_INFO_V1(queen_open_envelope_sql);
PG_FUNCTION_INFO_V1(queen_uuid_v7_at_sql);

/* Microseconds between the Unix epoch and PostgreSQL's (2000-01-01). */
#define QUEEN_UNIX_TO_PG_USECS \
	((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY)

static int
queen_text_array(ArrayType *arr, const char *what, Datum **elems, bool **nulls)
{
	int			n;

	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("%s must be a one-dimensional array", what)));
	deconstruct_array(arr, ARR_ELEMTYPE(arr), -1, false, TYPALIGN_INT,
					  elems, nulls, &n);
	return n;
}

/* Decompress a blob given as an argument; damage is the caller's bad input. */
static void
queen_decompress_arg(bytea *blob, StringInfo raw)
{
	const char *problem;

	initStringInfo(raw);
	problem = queen_decompress(VARDATA_ANY(blob), VARSIZE_ANY_EXHDR(blob), raw);
	if (problem != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
				 errmsg("segment blob does not decompress: %s", problem)));
}

/* queen.uuid_v7() -> uuid */
Datum
queen_uuid_v7_sql(PG_FUNCTION_ARGS)
{
	pg_uuid_t  *id = palloc(sizeof(pg_uuid_t));

	queen_uuid_v7(id);
	PG_RETURN_UUID_P(id);
}

/*
 * queen.uuid_v7_time(uuid) -> timestamptz: the millisecond a UUIDv7 (a
 * message id) was minted at.  Any other version raises 22023: its first
 * bits are not a time.
 */
Datum
queen_uuid_v7_time_sql(PG_FUNCTION_ARGS)
{
	pg_uuid_t  *id = PG_GETARG_UUID_P(0);
	uint64		ms = 0;
	int			i;

	if ((id->data[6] >> 4) != 7)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s is not a UUIDv7: its version is %d",
						DatumGetCString(DirectFunctionCall1(uuid_out, UUIDPGetDatum(id))),
						id->data[6] >> 4)));
	for (i = 0; i < 6; i++)
		ms = (ms << 8) | id->data[i];
	PG_RETURN_TIMESTAMPTZ((int64) ms * 1000 - QUEEN_UNIX_TO_PG_USECS);
}

/*
 * queen.uuid_v7_at(timestamptz) -> uuid: the smallest UUIDv7 of that
 * millisecond, so message_id >= queen.uuid_v7_at(t) selects what was minted
 * at or after t (and < selects before).
 */
Datum
queen_uuid_v7_at_sql(PG_FUNCTION_ARGS)
{
	TimestampTz t = PG_GETARG_TIMESTAMPTZ(0);
	pg_uuid_t  *id = palloc0(sizeof(pg_uuid_t));
	int64		unix_us;
	uint64		ms;
	int			i;

	if (TIMESTAMP_NOT_FINITE(t) ||
		pg_add_s64_overflow(t, QUEEN_UNIX_TO_PG_USECS, &unix_us) ||
		unix_us < 0 || (uint64) unix_us / 1000 >= (UINT64CONST(1) << 48))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a UUIDv7 holds times from 1970-01-01 to the year 10889 only")));
	ms = (uint64) unix_us / 1000;
	for (i = 5; i >= 0; i--)
	{
		id->data[i] = (uint8) (ms & 0xff);
		ms >>= 8;
	}
	id->data[6] = 0x70;
	id->data[8] = 0x80;
	PG_RETURN_UUID_P(id);
}

/* queen.txn_hash(transaction_id) -> 16 bytes, XXH3-128 big-endian */
Datum
queen_txn_hash_sql(PG_FUNCTION_ARGS)
{
	text	   *txn = PG_GETARG_TEXT_PP(0);
	bytea	   *out = palloc(VARHDRSZ + QUEEN_HASH_LEN);

	SET_VARSIZE(out, VARHDRSZ + QUEEN_HASH_LEN);
	queen_txn_hash(VARDATA_ANY(txn), VARSIZE_ANY_EXHDR(txn), (uint8 *) VARDATA(out));
	PG_RETURN_BYTEA_P(out);
}

/* queen.hash_blob(transaction_ids) -> 16 bytes per id, in order */
Datum
queen_hash_blob_sql(PG_FUNCTION_ARGS)
{
	Datum	   *elems;
	bool	   *nulls;
	int			n = queen_text_array(PG_GETARG_ARRAYTYPE_P(0), "transaction_ids",
									 &elems, &nulls);
	bytea	   *out = palloc(VARHDRSZ + (Size) n * QUEEN_HASH_LEN);
	int			i;

	SET_VARSIZE(out, VARHDRSZ + (Size) n * QUEEN_HASH_LEN);
	for (i = 0; i < n; i++)
	{
		text	   *txn;

		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("transaction_ids[%d] is NULL", i + 1)));
		txn = DatumGetTextPP(elems[i]);
		queen_txn_hash(VARDATA_ANY(txn), VARSIZE_ANY_EXHDR(txn),
					   (uint8 *) VARDATA(out) + (Size) i * QUEEN_HASH_LEN);
	}
	PG_RETURN_BYTEA_P(out);
}

/*
 * queen.pack_frames(message_ids, transaction_ids, payloads) -> zstd blob
 *
 * A NULL message id is minted; a NULL transactionId defaults to the message
 * id's text, as every push does.  Payload bytes are packed as given.
 */
Datum
queen_pack_frames_sql(PG_FUNCTION_ARGS)
{
	ArrayType  *ids_arr = PG_GETARG_ARRAYTYPE_P(0);
	Datum	   *ids,
			   *txns,
			   *payloads;
	bool	   *ids_null,
			   *txns_null,
			   *payloads_null;
	int			nids,
				ntxns,
				npayloads;
	StringInfoData packed;
	int			i;

	if (ARR_NDIM(ids_arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("message_ids must be a one-dimensional array")));
	deconstruct_array(ids_arr, UUIDOID, UUID_LEN, false, TYPALIGN_CHAR,
					  &ids, &ids_null, &nids);
	ntxns = queen_text_array(PG_GETARG_ARRAYTYPE_P(1), "transaction_ids", &txns, &txns_null);
	npayloads = queen_text_array(PG_GETARG_ARRAYTYPE_P(2), "payloads", &payloads, &payloads_null);
	if (nids != ntxns || nids != npayloads)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("pack_frames arrays are misaligned: %d message ids, %d transaction ids, %d payloads",
						nids, ntxns, npayloads)));
	if (nids == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a segment holds at least one frame")));

	initStringInfo(&packed);
	for (i = 0; i < nids; i++)
	{
		QueenFrame	frame;
		char		minted[UUID_LEN * 2 + 5];
		bytea	   *payload;

		memset(&frame, 0, sizeof(frame));
		if (ids_null[i])
			queen_uuid_v7(&frame.message_id);
		else
			frame.message_id = *DatumGetUUIDP(ids[i]);
		if (txns_null[i])
		{
			queen_uuid_format(&frame.message_id, minted);
			frame.txn = minted;
			frame.txn_len = (uint16) strlen(minted);
		}
		else
		{
			text	   *txn = DatumGetTextPP(txns[i]);

			queen_check_transaction_id(VARDATA_ANY(txn), VARSIZE_ANY_EXHDR(txn));
			frame.txn = VARDATA_ANY(txn);
			frame.txn_len = (uint16) VARSIZE_ANY_EXHDR(txn);
		}
		if (payloads_null[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("payloads[%d] is NULL", i + 1)));
		payload = DatumGetByteaPP(payloads[i]);
		frame.payload = VARDATA_ANY(payload);
		frame.payload_len = (uint32) VARSIZE_ANY_EXHDR(payload);
		queen_frame_append(&packed, &frame);
	}
	PG_RETURN_BYTEA_P(queen_compress(packed.data, packed.len, queen_zstd_level));
}

/*
 * queen.unpack_frames(blob) -> (idx, flags, message_id, trace_id,
 *								 transaction_id, producer_sub, payload)
 */
Datum
queen_unpack_frames_sql(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	bytea	   *blob = PG_GETARG_BYTEA_PP(0);
	StringInfoData raw;
	const char *problem;
	size_t		pos = 0;
	int			idx = 0;

	InitMaterializedSRF(fcinfo, 0);
	queen_decompress_arg(blob, &raw);

	while (pos < (size_t) raw.len)
	{
		QueenFrame	frame;
		Datum		values[7];
		bool		nulls[7] = {false, false, false, false, false, false, false};
		pg_uuid_t  *mid = palloc(sizeof(pg_uuid_t));
		pg_uuid_t  *tid = palloc(sizeof(pg_uuid_t));
		bytea	   *payload;

		problem = queen_frame_decode(raw.data, raw.len, &pos, &frame);
		if (problem != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
					 errmsg("frame %d of the segment is malformed: %s", idx, problem)));

		*mid = frame.message_id;
		*tid = frame.trace_id;
		payload = palloc(VARHDRSZ + frame.payload_len);
		SET_VARSIZE(payload, VARHDRSZ + frame.payload_len);
		memcpy(VARDATA(payload), frame.payload, frame.payload_len);

		values[0] = Int32GetDatum(idx);
		values[1] = Int32GetDatum(frame.flags);
		values[2] = UUIDPGetDatum(mid);
		values[3] = UUIDPGetDatum(tid);
		nulls[3] = (frame.flags & QUEEN_FRAME_TRACE) == 0;
		pg_verifymbstr(frame.txn, frame.txn_len, false);
		values[4] = PointerGetDatum(cstring_to_text_with_len(frame.txn, frame.txn_len));
		if (frame.flags & QUEEN_FRAME_PRODUCER)
		{
			pg_verifymbstr(frame.producer_sub, frame.producer_sub_len, false);
			values[5] = PointerGetDatum(cstring_to_text_with_len(frame.producer_sub,
																 frame.producer_sub_len));
		}
		else
			nulls[5] = true;
		values[6] = PointerGetDatum(payload);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		idx++;
	}
	return (Datum) 0;
}

/* queen.decompress_segment(blob) -> the packed frames, uncompressed */
Datum
queen_decompress_segment_sql(PG_FUNCTION_ARGS)
{
	bytea	   *blob = PG_GETARG_BYTEA_PP(0);
	StringInfoData raw;
	bytea	   *out;

	queen_decompress_arg(blob, &raw);
	out = palloc(VARHDRSZ + raw.len);
	SET_VARSIZE(out, VARHDRSZ + raw.len);
	memcpy(VARDATA(out), raw.data, raw.len);
	PG_RETURN_BYTEA_P(out);
}

/*
 * queen._open_envelope(text) -> the plaintext, or NULL when no configured
 * key opens it: the tests' known answers of Queen's envelope.  Declared by
 * the queen_test extension only.
 */
Datum
queen_open_envelope_sql(PG_FUNCTION_ARGS)
{
	text	   *envelope = PG_GETARG_TEXT_PP(0);
	StringInfoData plain;

	initStringInfo(&plain);
	if (!queen_crypto_open(VARDATA_ANY(envelope), VARSIZE_ANY_EXHDR(envelope), &plain))
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(cstring_to_text_with_len(plain.data, plain.len));
}
