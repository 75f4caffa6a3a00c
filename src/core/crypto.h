/*-------------------------------------------------------------------------
 *
 * crypto.h
 *	  Encryption at rest of an encrypted queue's payloads (crypto.c): the
 *	  keys, Queen's AES-256-GCM envelope, and frames sealed or opened.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_CRYPTO_H
#define QUEEN_CRYPTO_H

#include "codec.h"

#include "lib/stringinfo.h"

/* the settings (guc.c): what an assign hook changed is read again at next use */
extern char *queen_encryption_key_setting;
extern char *queen_encryption_key_previous_setting;
extern char *queen_encryption_key_file_setting;
extern void queen_crypto_keys_changed(void);

/* NULL when a key seals, or why pushes to an encrypted queue are refused */
extern const char *queen_crypto_problem(void);
extern void queen_crypto_require(const char *queue);

extern void queen_crypto_seal(const char *plain, Size len, StringInfo out);
extern bool queen_crypto_open(const char *envelope, Size len, StringInfo out);
extern bool queen_crypto_is_envelope(const char *payload, Size len);
extern char *queen_crypto_open_text(char *text);

extern void queen_frame_reseal(const char *packed, Size len, bool encrypt, StringInfo out);
extern bool queen_frame_open(QueenFrame *frame);
extern void queen_crypto_report_unopened(void);

/* the first flags byte of a packed frame: after body_len */
static inline uint8
queen_packed_flags(const char *packed)
{
	return (uint8) packed[4];
}

#endif							/* QUEEN_CRYPTO_H */
