/*-------------------------------------------------------------------------
 *
 * validate.h
 *	  What the doors check of their input before anything is written
 *	  (validate.c): names, transactionIds, timestamps, and payloads jsonb
 *	  can hold.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_VALIDATE_H
#define QUEEN_VALIDATE_H

#include "queen.h"

extern const char *queen_name_problem(const char *name, size_t len,
									  size_t max_len);
extern bool queen_parse_iso8601(const char *text, TimestampTz *out);

/* "2026-01-31T08:00:00.000000Z" and its NUL, with room for a five-digit year */
#define QUEEN_ISO8601_LEN	40
extern bool queen_format_iso8601(TimestampTz ts, char *buf);
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

#endif							/* QUEEN_VALIDATE_H */
