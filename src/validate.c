/*-------------------------------------------------------------------------
 *
 * validate.c
 *	  Validation of what clients send: queue names, partition names,
 *	  transactionIds and JSON payloads.
 *
 * The broker joins these strings with 0x1F to build dedup and grouping keys
 * and the frame stores the transactionId behind a u16 length, so a control
 * character or an oversized id would silently corrupt identity.  Every door
 * (SQL functions, queen.push, HTTP) checks through here so they agree on
 * what is accepted.  queen_name_problem() never raises, for callers that
 * answer with an HTTP status; the queen_check_* wrappers raise for SQL.
 *
 *-------------------------------------------------------------------------
 */
#include "queen.h"

#include "common/jsonapi.h"
#include "mb/pg_wchar.h"

/*
 * Describe what is wrong with a name, or return NULL when it is acceptable.
 * max_len is in bytes.
 */
const char *
queen_name_problem(const char *name, size_t len, size_t max_len)
{
	size_t		i;

	if (len == 0)
		return "must not be empty";
	if (len > max_len)
		return "is too long";
	for (i = 0; i < len; i++)
	{
		unsigned char c = (unsigned char) name[i];

		if (c < 0x20 || c == 0x7f)
			return "must not contain control characters";
	}
	return NULL;
}

void
queen_check_name(const char *what, const char *name, size_t len, size_t max_len)
{
	const char *problem = queen_name_problem(name, len, max_len);

	if (problem == NULL)
		return;
	if (len > max_len)
		ereport(ERROR,
				(errcode(ERRCODE_STRING_DATA_RIGHT_TRUNCATION),
				 errmsg("%s is %zu bytes long, the limit is %zu bytes",
						what, len, max_len)));
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("%s %s", what, problem),
			 len > 0 ? errdetail("Control characters (bytes 0x00-0x1F and 0x7F) are reserved as key separators.") : 0));
}

void
queen_check_queue_name(const char *name, size_t len)
{
	queen_check_name("queue name", name, len, QUEEN_MAX_NAME_BYTES);
}

void
queen_check_partition_name(const char *name, size_t len)
{
	queen_check_name("partition name", name, len, QUEEN_MAX_NAME_BYTES);
}

void
queen_check_transaction_id(const char *txn, size_t len)
{
	queen_check_name("transactionId", txn, len, QUEEN_MAX_TXN_BYTES);
}

/*
 * Describe why payload is not JSON that jsonb can hold, or return NULL.
 * Uses PostgreSQL's own lexer without building a tree, with escapes on so
 * that \u0000, which jsonb cannot store, is caught here and not later.
 */
char *
queen_json_problem(const char *payload, size_t len)
{
	JsonLexContext *lex;
	JsonParseErrorType result;

	lex = makeJsonLexContextCstringLen(unconstify(char *, payload), (int) len,
									   PG_UTF8, true);
	result = pg_parse_json(lex, &nullSemAction);
	if (result == JSON_SUCCESS)
		return NULL;
	return json_errdetail(result, lex);
}
