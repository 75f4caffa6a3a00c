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
 * Why a JSON number cannot be stored in jsonb (whose numbers are numeric),
 * or NULL.  JSON's grammar has no limit; numeric has: a weight (base-10000
 * digits before the point) of at most 32767 and a display scale of at most
 * 16383.  This follows numeric_in's arithmetic on the lexer's token, so the
 * HTTP door refuses exactly what a cast to jsonb would, without building
 * the value.  Without it the store accepts 1e1000000 and every read of
 * that offset fails.
 */
const char *
queen_json_number_problem(const char *num, size_t len)
{
	size_t		start = (len > 0 && num[0] == '-') ? 1 : 0;
	size_t		i;
	int64		int_digits = 0;
	int64		frac_digits = 0;
	int64		first_nonzero = -1; /* decimal position of the leading digit */
	bool		nonzero = false;
	int64		exponent = 0;
	int64		dscale;
	int64		weight;

	for (i = start; i < len && isdigit((unsigned char) num[i]); i++)
		int_digits++;
	for (i = start; i < len && isdigit((unsigned char) num[i]); i++)
		if (!nonzero && num[i] != '0')
		{
			nonzero = true;
			first_nonzero = int_digits - 1 - (int64) (i - start);
		}
	if (i < len && num[i] == '.')
	{
		for (i++; i < len && isdigit((unsigned char) num[i]); i++)
		{
			frac_digits++;
			if (!nonzero && num[i] != '0')
			{
				nonzero = true;
				first_nonzero = -frac_digits;
			}
		}
	}
	if (i < len && (num[i] == 'e' || num[i] == 'E'))
	{
		bool		neg = false;

		i++;
		if (i < len && (num[i] == '+' || num[i] == '-'))
			neg = num[i++] == '-';
		for (; i < len && isdigit((unsigned char) num[i]); i++)
		{
			if (exponent < PG_INT32_MAX)
				exponent = exponent * 10 + (num[i] - '0');
		}
		if (exponent >= PG_INT32_MAX / 2)
			return "its exponent is out of range";
		if (neg)
			exponent = -exponent;
	}

	dscale = Max(frac_digits - exponent, 0);
	if (dscale > 16383)
		return "it has more than 16383 digits after the decimal point";
	if (!nonzero)
		return NULL;			/* zero: no weight to speak of */
	first_nonzero += exponent;
	/* floor division: numeric groups decimal digits in fours around the point */
	weight = first_nonzero >= 0 ? first_nonzero / 4 : -((-first_nonzero + 3) / 4);
	if (weight > 32767)
		return "it has more than 131072 digits before the decimal point";
	return NULL;
}

/* Numbers anywhere in a payload must be numbers jsonb can hold. */
static void
queen_json_scalar(void *state, char *token, JsonTokenType type)
{
	const char **problem = (const char **) state;

	if (type == JSON_TOKEN_NUMBER && *problem == NULL)
		*problem = queen_json_number_problem(token, strlen(token));
	pfree(token);
}

/*
 * Describe why payload is not JSON that jsonb can hold, or return NULL:
 * valid UTF-8, JSON text, numbers numeric can hold.  Uses PostgreSQL's own
 * lexer without building a tree, with escapes on so that \u0000, which
 * jsonb cannot store, is caught here and not later.
 */
char *
queen_json_problem(const char *payload, size_t len)
{
	JsonLexContext *lex;
	JsonParseErrorType result;
	JsonSemAction sem;
	const char *number_problem = NULL;

	if (len > 0 && memchr(payload, '\0', len) != NULL)
		return pstrdup("payload contains a NUL byte");
	if (!pg_verify_mbstr(PG_UTF8, payload, (int) len, true))
		return pstrdup("payload is not valid UTF-8");
	memset(&sem, 0, sizeof(sem));
	sem.semstate = &number_problem;
	sem.scalar = queen_json_scalar;
	lex = makeJsonLexContextCstringLen(unconstify(char *, payload), (int) len,
									   PG_UTF8, true);
	result = pg_parse_json(lex, &sem);
	if (result != JSON_SUCCESS)
		return json_errdetail(result, lex);
	if (number_problem != NULL)
		return psprintf("a number in the payload cannot be stored: %s", number_problem);
	return NULL;
}
