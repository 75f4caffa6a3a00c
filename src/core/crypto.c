/*-------------------------------------------------------------------------
 *
 * crypto.c
 *	  Encryption at rest: an encrypted queue's payloads are stored, spooled
 *	  and dead-lettered as Queen's AES-256-GCM envelope and opened only on
 *	  their way to a reader.
 *
 * The envelope is Queen's, so data moves between the two systems: the
 * payload's JSON text sealed with AES-256-GCM under a 32-byte key, 16
 * random IV bytes of which the first 12 are the nonce (Queen's quirk, kept
 * for compatibility), a 16-byte tag, all three in standard base64 in the
 * JSON object {"authTag","encrypted","iv"} (keys in the order Queen writes
 * them), and frame flag 4 set.  Only the payload is sealed: transactionIds
 * are the dedup key and stay readable, as in Queen.
 *
 * The key comes from queen.encryption_key (only a superuser can read it)
 * or a key file under the data directory; queen.encryption_key_previous,
 * or the file's second line, opens what the key before a rotation sealed.
 * Unlike Queen, which stores plaintext when its key is missing or bad, a
 * push to an encrypted queue is then refused with the reason: the keys are
 * read again at the first use after a setting changed, and what is wrong
 * with them is the error.
 *
 * One cipher context per process, reused: OpenSSL allocates outside
 * PostgreSQL's memory contexts, so nothing here may leak it on an error.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "queen.h"
#include "crypto.h"
#include "json_walk.h"

#include <openssl/evp.h>
#include <sys/stat.h>

#include "common/base64.h"
#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#define QUEEN_KEY_LEN	32
#define QUEEN_IV_LEN	16			/* stored */
#define QUEEN_NONCE_LEN	12			/* of which the nonce */
#define QUEEN_TAG_LEN	16

char	   *queen_encryption_key_setting = NULL;
char	   *queen_encryption_key_previous_setting = NULL;
char	   *queen_encryption_key_file_setting = NULL;

typedef struct QueenKeys
{
	bool		loaded;
	char	   *problem;		/* NULL when key seals; in TopMemoryContext */
	uint8		key[QUEEN_KEY_LEN];
	bool		has_previous;
	uint8		previous[QUEEN_KEY_LEN];
	bool		from_file;		/* the key file: looked at again now and then */
	struct timespec file_mtime;
	TimestampTz checked_at;
} QueenKeys;

static QueenKeys queen_keys;
static EVP_CIPHER_CTX *queen_cipher = NULL;	/* opening: any key */
static EVP_CIPHER_CTX *queen_sealer = NULL;	/* sealing: the key set once */
static bool queen_sealer_keyed = false;
static bool queen_opener_ready = false;

void
queen_crypto_keys_changed(void)
{
	queen_keys.loaded = false;
}

/* 64 hexadecimal characters, blanks around them allowed, into out. */
static bool
queen_key_parse(const char *text, uint8 *out)
{
	const char *p = text;
	int			i;

	while (*p == ' ' || *p == '\t')
		p++;
	for (i = 0; i < QUEEN_KEY_LEN * 2; i++)
	{
		int			v;
		char		c = p[i];

		if (c >= '0' && c <= '9')
			v = c - '0';
		else if (c >= 'a' && c <= 'f')
			v = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v = c - 'A' + 10;
		else
			return false;
		if (i % 2 == 0)
			out[i / 2] = (uint8) (v << 4);
		else
			out[i / 2] |= (uint8) v;
	}
	p += QUEEN_KEY_LEN * 2;
	while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
		p++;
	return *p == '\0';
}

/*
 * The key file: the key on its first line, the previous key on an optional
 * second.  Like a server's TLS key it must be a regular file no one but its
 * owner can read.  A relative path is the data directory's, every server
 * process's working directory (as queen.spool_directory's).  Returns the
 * problem, or NULL.
 */
static char *
queen_keys_from_file(const char *path, QueenKeys *k)
{
	struct stat st;
	FILE	   *f;
	char		line[2][256];
	int			n = 0;

	k->from_file = true;
	if (stat(path, &st) != 0)
		return psprintf("queen.encryption_key_file \"%s\" cannot be read: %m", path);
	k->file_mtime = st.st_mtim;
	if (!S_ISREG(st.st_mode))
		return psprintf("queen.encryption_key_file \"%s\" is not a regular file", path);
	if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0)
		return psprintf("queen.encryption_key_file \"%s\" is readable by others than its owner (chmod 600 it)",
						path);
	f = fopen(path, "r");
	if (f == NULL)
		return psprintf("queen.encryption_key_file \"%s\" cannot be read: %m", path);
	while (n < 2 && fgets(line[n], sizeof(line[n]), f) != NULL)
	{
		if (line[n][strspn(line[n], " \t\r\n")] != '\0')
			n++;
	}
	fclose(f);
	if (n == 0 || !queen_key_parse(line[0], k->key))
		return psprintf("queen.encryption_key_file \"%s\" must hold the key as 64 hexadecimal characters on its first line",
						path);
	if (n == 2)
	{
		if (!queen_key_parse(line[1], k->previous))
			return psprintf("the second line of queen.encryption_key_file \"%s\" (the previous key) is not 64 hexadecimal characters",
							path);
		k->has_previous = true;
	}
	return NULL;
}

/* Read the settings into queen_keys; its problem says what is wrong. */
static void
queen_keys_load(void)
{
	QueenKeys	k;
	char	   *problem = NULL;
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

	memset(&k, 0, sizeof(k));
	if (queen_encryption_key_setting != NULL && queen_encryption_key_setting[0] != '\0')
	{
		if (!queen_key_parse(queen_encryption_key_setting, k.key))
			problem = pstrdup("queen.encryption_key is not 64 hexadecimal characters");
	}
	else if (queen_encryption_key_file_setting != NULL &&
			 queen_encryption_key_file_setting[0] != '\0')
		problem = queen_keys_from_file(queen_encryption_key_file_setting, &k);
	else
		problem = pstrdup("no encryption key is configured (queen.encryption_key or queen.encryption_key_file)");

	if (problem == NULL && queen_encryption_key_previous_setting != NULL &&
		queen_encryption_key_previous_setting[0] != '\0')
	{
		if (!queen_key_parse(queen_encryption_key_previous_setting, k.previous))
			problem = pstrdup("queen.encryption_key_previous is not 64 hexadecimal characters");
		else
			k.has_previous = true;
	}

	if (queen_keys.problem != NULL)
		pfree(queen_keys.problem);
	queen_keys = k;
	queen_keys.problem = problem;
	queen_keys.loaded = true;
	queen_keys.checked_at = GetCurrentTimestamp();
	if (problem != NULL)
		memset(queen_keys.key, 0, sizeof(queen_keys.key));
	MemoryContextSwitchTo(old);
	explicit_bzero(&k, sizeof(k));

	queen_sealer_keyed = false;
	if (queen_cipher == NULL)
	{
		queen_cipher = EVP_CIPHER_CTX_new();
		queen_sealer = EVP_CIPHER_CTX_new();
		if (queen_cipher == NULL || queen_sealer == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory creating a cipher context")));
	}
}

/*
 * A key file is read again, at most once a second, when it changed or was
 * refused: an operator who mends its mode or rotates its keys need not
 * reload every session.
 */
static bool
queen_key_file_stale(void)
{
	TimestampTz now;
	struct stat st;

	if (!queen_keys.from_file)
		return false;
	now = GetCurrentTimestamp();
	if (!TimestampDifferenceExceeds(queen_keys.checked_at, now, 1000))
		return false;
	queen_keys.checked_at = now;
	if (queen_keys.problem != NULL)
		return true;
	return stat(queen_encryption_key_file_setting, &st) != 0 ||
		st.st_mtim.tv_sec != queen_keys.file_mtime.tv_sec ||
		st.st_mtim.tv_nsec != queen_keys.file_mtime.tv_nsec;
}

const char *
queen_crypto_problem(void)
{
	if (!queen_keys.loaded || queen_key_file_stale())
		queen_keys_load();
	return queen_keys.problem;
}

/* Refuse, with the reason, when queue's payloads cannot be sealed. */
void
queen_crypto_require(const char *queue)
{
	const char *problem = queen_crypto_problem();

	if (problem != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("queue \"%s\" is encrypted and its messages cannot be sealed: %s",
						queue, problem),
				 errhint("Set queen.encryption_key to 64 hexadecimal characters (or queen.encryption_key_file) and reload, or turn encryptionEnabled off for the queue.")));
}

static void
queen_b64_append(StringInfo out, const uint8 *data, int len)
{
	int			need = pg_b64_enc_len(len);
	int			n;

	enlargeStringInfo(out, need);
	n = pg_b64_encode((const char *) data, len, out->data + out->len, need);
	if (n < 0)
		elog(ERROR, "queen: base64 encoding failed");
	out->len += n;
	out->data[out->len] = '\0';
}

static void
queen_cipher_failed(const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_INTERNAL_ERROR),
			 errmsg("queen: AES-256-GCM %s failed", what)));
}

/* Append plain's envelope, sealed with the key, to out. */
void
queen_crypto_seal(const char *plain, Size len, StringInfo out)
{
	uint8		iv[QUEEN_IV_LEN];
	uint8		tag[QUEEN_TAG_LEN];
	uint8	   *sealed;
	int			n = 0,
				fin = 0;

	if (queen_crypto_problem() != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("a payload cannot be sealed: %s", queen_crypto_problem())));
	if (len > (Size) (MaxAllocSize / 2))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a payload of %zu bytes is too large to encrypt", len)));
	if (!pg_strong_random(iv, sizeof(iv)))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not generate a random IV")));
	sealed = palloc(len + 1);

	/*
	 * The cipher and its key schedule once per key; then only the IV per
	 * payload (looking the cipher up again costs more than a small
	 * payload's encryption with OpenSSL 3).
	 */
	if (!queen_sealer_keyed)
	{
		if (EVP_EncryptInit_ex(queen_sealer, EVP_aes_256_gcm(), NULL, NULL, NULL) != 1 ||
			EVP_CIPHER_CTX_ctrl(queen_sealer, EVP_CTRL_GCM_SET_IVLEN, QUEEN_NONCE_LEN, NULL) != 1 ||
			EVP_EncryptInit_ex(queen_sealer, NULL, NULL, queen_keys.key, NULL) != 1)
			queen_cipher_failed("set-up");
		queen_sealer_keyed = true;
	}
	if (EVP_EncryptInit_ex(queen_sealer, NULL, NULL, NULL, iv) != 1)
		queen_cipher_failed("set-up");
	if ((len > 0 && EVP_EncryptUpdate(queen_sealer, sealed, &n, (const uint8 *) plain,
									  (int) len) != 1) ||
		EVP_EncryptFinal_ex(queen_sealer, sealed + n, &fin) != 1 ||
		EVP_CIPHER_CTX_ctrl(queen_sealer, EVP_CTRL_GCM_GET_TAG, QUEEN_TAG_LEN, tag) != 1)
	{
		queen_sealer_keyed = false;
		queen_cipher_failed("encryption");
	}

	appendStringInfoString(out, "{\"authTag\":\"");
	queen_b64_append(out, tag, QUEEN_TAG_LEN);
	appendStringInfoString(out, "\",\"encrypted\":\"");
	queen_b64_append(out, sealed, n + fin);
	appendStringInfoString(out, "\",\"iv\":\"");
	queen_b64_append(out, iv, QUEEN_IV_LEN);
	appendStringInfoString(out, "\"}");
	pfree(sealed);
}

/* One key's attempt at the envelope's parts: true with the plaintext in out. */
static bool
queen_open_with(const uint8 *key, const uint8 *iv, const uint8 *data, int len,
				const uint8 *tag, StringInfo out)
{
	int			n = 0,
				fin = 0;
	int			start = out->len;

	enlargeStringInfo(out, len + 1);
	/* the cipher once; the key and IV per envelope (two keys may take turns) */
	if (!queen_opener_ready)
	{
		if (EVP_DecryptInit_ex(queen_cipher, EVP_aes_256_gcm(), NULL, NULL, NULL) != 1 ||
			EVP_CIPHER_CTX_ctrl(queen_cipher, EVP_CTRL_GCM_SET_IVLEN, QUEEN_NONCE_LEN, NULL) != 1)
			queen_cipher_failed("set-up");
		queen_opener_ready = true;
	}
	if (EVP_DecryptInit_ex(queen_cipher, NULL, NULL, key, iv) != 1)
		queen_cipher_failed("set-up");
	if ((len > 0 && EVP_DecryptUpdate(queen_cipher, (uint8 *) out->data + start, &n,
									  data, len) != 1) ||
		EVP_CIPHER_CTX_ctrl(queen_cipher, EVP_CTRL_GCM_SET_TAG, QUEEN_TAG_LEN,
							unconstify(uint8 *, tag)) != 1 ||
		EVP_DecryptFinal_ex(queen_cipher, (uint8 *) out->data + start + n, &fin) <= 0)
	{
		/* a wrong key or altered bytes: nothing of it is kept */
		memset(out->data + start, 0, n);
		out->data[start] = '\0';
		return false;
	}
	out->len = start + n + fin;
	out->data[out->len] = '\0';
	return true;
}

/* A base64 string of the envelope, decoded; NULL when it is not one. */
static uint8 *
queen_b64_field(const QueenJsonValue *v, int *len)
{
	uint8	   *buf;

	if (v->type != JSON_TOKEN_STRING || v->len > (size_t) (MaxAllocSize / 2))
		return NULL;
	buf = palloc(pg_b64_dec_len((int) v->len) + 1);
	*len = pg_b64_decode(v->str, (int) v->len, (char *) buf, pg_b64_dec_len((int) v->len));
	return *len < 0 ? NULL : buf;
}

/* The envelope's decoded parts; false when the text is not an envelope. */
static bool
queen_envelope_parts(const char *envelope, Size len, uint8 **tag, uint8 **data,
					 int *data_len, uint8 **iv)
{
	static const char *const names[3] = {"authTag", "encrypted", "iv"};
	QueenJsonValue values[3];
	QueenJsonShape shape;
	int			tag_len,
				iv_len;

	queen_json_shape_keys(&shape, names, 3, values);
	if (queen_json_shape(envelope, len, &shape) != NULL || !shape.root_object)
		return false;
	*tag = queen_b64_field(&values[0], &tag_len);
	*data = queen_b64_field(&values[1], data_len);
	*iv = queen_b64_field(&values[2], &iv_len);
	return *tag != NULL && *data != NULL && *iv != NULL && tag_len == QUEEN_TAG_LEN &&
		iv_len >= QUEEN_NONCE_LEN;
}

/*
 * Is this payload Queen's envelope (whatever key sealed it)?  A frame
 * flagged sealed must carry one, or its plaintext would sit in a queue
 * that promises none (the raw SQL door's check).
 */
bool
queen_crypto_is_envelope(const char *payload, Size len)
{
	uint8	   *tag,
			   *data,
			   *iv;
	int			data_len;

	return queen_envelope_parts(payload, len, &tag, &data, &data_len, &iv);
}

/*
 * Append the plaintext of an envelope to out, trying the key and then the
 * previous key.  False, with out as it was, when it is not an envelope or
 * no configured key opens it.
 */
bool
queen_crypto_open(const char *envelope, Size len, StringInfo out)
{
	uint8	   *tag,
			   *data,
			   *iv;
	int			data_len;

	if (queen_crypto_problem() != NULL && !queen_keys.has_previous)
		return false;
	if (!queen_envelope_parts(envelope, len, &tag, &data, &data_len, &iv))
		return false;
	if (queen_keys.problem == NULL &&
		queen_open_with(queen_keys.key, iv, data, data_len, tag, out))
		return true;
	if (queen_keys.has_previous &&
		queen_open_with(queen_keys.previous, iv, data, data_len, tag, out))
		return true;
	return false;
}

/*
 * A payload stored as JSON text outside a frame (a dead letter's, which
 * keeps its queue's envelope): opened when a configured key opens it,
 * otherwise as it is.
 */
char *
queen_crypto_open_text(char *text)
{
	StringInfoData plain;

	if (text == NULL || strstr(text, "\"authTag\"") == NULL)
		return text;
	initStringInfo(&plain);
	if (queen_crypto_open(text, strlen(text), &plain))
		return plain.data;
	pfree(plain.data);
	return text;
}

/*
 * Append the packed frame at packed (len bytes, exactly one frame) to out,
 * sealed (encrypt) or opened.  A frame already so is appended as it is; a
 * sealed one that no configured key opens stays sealed.
 */
void
queen_frame_reseal(const char *packed, Size len, bool encrypt, StringInfo out)
{
	QueenFrame	frame;
	size_t		pos = 0;
	StringInfoData payload;
	const char *problem = queen_frame_decode(packed, len, &pos, &frame);

	if (problem != NULL || pos != len)
		elog(ERROR, "queen: a checked frame does not decode: %s", problem ? problem : "trailing bytes");
	if (((frame.flags & QUEEN_FRAME_ENCRYPTED) != 0) == encrypt)
	{
		appendBinaryStringInfo(out, packed, (int) len);
		return;
	}
	initStringInfo(&payload);
	if (encrypt)
		queen_crypto_seal(frame.payload, frame.payload_len, &payload);
	else if (!queen_crypto_open(frame.payload, frame.payload_len, &payload))
	{
		appendBinaryStringInfo(out, packed, (int) len);
		pfree(payload.data);
		return;
	}
	frame.flags ^= QUEEN_FRAME_ENCRYPTED;
	frame.payload = payload.data;
	frame.payload_len = (uint32) payload.len;
	queen_frame_append(out, &frame);
	pfree(payload.data);
}

/* What became of the frames a reader tried to open since the last report. */
static int64 queen_unopened = 0;

/*
 * A reader's frame opened in place (its payload then in palloc'd memory).
 * False, the frame unchanged, when no configured key opens it: the reader
 * gets the envelope, never the wrong plaintext and never an error that
 * would stop a consumer at this message for good.  The reader says so
 * once, with queen_crypto_report_unopened.
 */
bool
queen_frame_open(QueenFrame *frame)
{
	StringInfoData plain;

	if ((frame->flags & QUEEN_FRAME_ENCRYPTED) == 0)
		return true;
	initStringInfo(&plain);
	if (!queen_crypto_open(frame->payload, frame->payload_len, &plain))
	{
		pfree(plain.data);
		queen_unopened++;
		return false;
	}
	frame->payload = plain.data;
	frame->payload_len = (uint32) plain.len;
	frame->flags &= ~QUEEN_FRAME_ENCRYPTED;
	return true;
}

/* One warning for what a read could not open, at its end. */
void
queen_crypto_report_unopened(void)
{
	int64		n = queen_unopened;

	if (n == 0)
		return;
	queen_unopened = 0;
	ereport(WARNING,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg_plural("queen: " INT64_FORMAT " encrypted payload could not be opened with the configured keys and was delivered sealed",
						   "queen: " INT64_FORMAT " encrypted payloads could not be opened with the configured keys and were delivered sealed",
						   n, n),
			 errhint("Set queen.encryption_key_previous to the key they were sealed with.")));
}
