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
#include "postgres.h"

#include "queen.h"
#include "validate.h"
#include "codec.h"
#include "json_walk.h"

#include "common/jsonapi.h"
#include "mb/pg_wchar.h"
#include "utils/datetime.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"

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

	/*
	 * A name is stored as text of a UTF8 database and echoed in JSON: bytes
	 * that are not UTF-8 (a percent-encoded %ff in a URL, say) would make
	 * every dump, JSON answer and metrics page that names it invalid.
	 */
	if (pg_encoding_verifymbstr(PG_UTF8, name, (int) len) != (int) len)
		return "must be valid UTF-8";
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
			 strstr(problem, "control") != NULL ?
			 errdetail("Control characters (bytes 0x00-0x1F and 0x7F) are reserved as key separators.") : 0));
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
 * Does text run digits for n bytes from *p?  Moves *p past them if so.
 */
static bool
queen_digits(const char **p, int n)
{
	int			i;

	for (i = 0; i < n; i++)
		if (!isdigit((unsigned char) (*p)[i]))
			return false;
	*p += n;
	return true;
}

/*
 * A moment as every answer spells it: UTC, microseconds, "...Z", into buf
 * (QUEEN_ISO8601_LEN bytes); false for one that has no such spelling
 * (infinity, out of range).
 */
bool
queen_format_iso8601(TimestampTz ts, char *buf)
{
	struct pg_tm tm;
	fsec_t		fsec;

	if (TIMESTAMP_NOT_FINITE(ts) || timestamp2tm(ts, NULL, &tm, &fsec, NULL, NULL) != 0)
		return false;
	snprintf(buf, QUEEN_ISO8601_LEN, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ",
			 tm.tm_year, tm.tm_mon, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int) fsec);
	return true;
}

/*
 * An ISO-8601 timestamp as clients write them (RFC 3339's profile): a date
 * YYYY-MM-DD, optionally a time HH:MM[:SS[.fraction]] after a T (or a
 * space, as PostgreSQL prints them), optionally Z or an offset +HH[[:]MM];
 * without an offset it is in the server's TimeZone.  False for anything
 * else: PostgreSQL's own parser also reads "today", "epoch" or "J2451187",
 * which a client did not mean as a moment.  Never raises.
 */
bool
queen_parse_iso8601(const char *text, TimestampTz *out)
{
	const char *p = text;
	char		workbuf[MAXDATELEN + MAXDATEFIELDS];
	char	   *field[MAXDATEFIELDS];
	int			ftype[MAXDATEFIELDS];
	int			nf;
	int			dtype;
	int			tz;
	struct pg_tm tm;
	fsec_t		fsec;

	if (!queen_digits(&p, 4) || *p++ != '-' || !queen_digits(&p, 2) || *p++ != '-' ||
		!queen_digits(&p, 2))
		return false;
	if (*p == 'T' || *p == 't' || *p == ' ')
	{
		p++;
		if (!queen_digits(&p, 2) || *p++ != ':' || !queen_digits(&p, 2))
			return false;
		if (*p == ':')
		{
			p++;
			if (!queen_digits(&p, 2))
				return false;
			if (*p == '.')
			{
				p++;
				if (!queen_digits(&p, 1))
					return false;
				while (isdigit((unsigned char) *p))
					p++;
			}
		}
		if (*p == 'Z' || *p == 'z')
			p++;
		else if (*p == '+' || *p == '-')
		{
			p++;
			if (!queen_digits(&p, 2))
				return false;
			if (*p == ':')
				p++;
			if (*p != '\0' && !queen_digits(&p, 2))
				return false;
		}
	}
	if (*p != '\0' || p - text >= MAXDATELEN)
		return false;

	/* the shape is right; PostgreSQL checks the ranges and applies the zone */
	if (ParseDateTime(text, workbuf, sizeof(workbuf), field, ftype,
					  MAXDATEFIELDS, &nf) != 0 ||
		DecodeDateTime(field, ftype, nf, &dtype, &tm, &fsec, &tz) != 0 ||
		dtype != DTK_DATE)
		return false;
	return tm2timestamp(&tm, fsec, &tz, out) == 0;
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
static const char *queen_json_number_scan(const char *num, size_t len, Size *size);

const char *
queen_json_number_problem(const char *num, size_t len)
{
	Size		size;

	return queen_json_number_scan(num, len, &size);
}

/*
 * Can JSON text hold a number numeric cannot?  A cheap byte scan that says
 * no for nearly every body, so the HTTP parser asks for its tokens (a copy
 * of each scalar) only when it must.  A number is out of numeric's range
 * only with more than 16383 digits after the point or a weight past 32767
 * base-10000 digits; without a run of 4096 digits or an exponent of 4
 * digits, its digits and exponent add up to less than 5100 of either.
 */
bool
queen_json_numbers_need_check(const char *text, size_t len)
{
	size_t		run = 0;
	size_t		i;

	for (i = 0; i < len; i++)
	{
		unsigned char c = (unsigned char) text[i];

		if (c >= '0' && c <= '9')
		{
			if (++run >= 4096)
				return true;
			continue;
		}
		run = 0;
		if (c == 'e' || c == 'E')
		{
			size_t		j = i + 1;
			size_t		digits = 0;

			if (j < len && (text[j] == '+' || text[j] == '-'))
				j++;
			while (j < len && isdigit((unsigned char) text[j]) && digits < 4)
			{
				j++;
				digits++;
			}
			if (digits >= 4)
				return true;
		}
	}
	return false;
}

/*
 * The same, also giving in *size at most the bytes the number takes in a
 * jsonb container: its numeric (short or long header, two bytes per
 * base-10000 digit) and up to three bytes of alignment.
 */
static const char *
queen_json_number_scan(const char *num, size_t len, Size *size)
{
	size_t		start = (len > 0 && num[0] == '-') ? 1 : 0;
	size_t		i;
	int64		int_digits = 0;
	int64		frac_digits = 0;
	int64		first_nonzero = -1; /* decimal position of the leading digit */
	int64		last_nonzero = 0;	/* and of the trailing one */
	bool		nonzero = false;
	int64		exponent = 0;
	int64		dscale;
	int64		weight;

	for (i = start; i < len && isdigit((unsigned char) num[i]); i++)
		int_digits++;
	for (i = start; i < len && isdigit((unsigned char) num[i]); i++)
		if (num[i] != '0')
		{
			if (!nonzero)
				first_nonzero = int_digits - 1 - (int64) (i - start);
			nonzero = true;
			last_nonzero = int_digits - 1 - (int64) (i - start);
		}
	if (i < len && num[i] == '.')
	{
		for (i++; i < len && isdigit((unsigned char) num[i]); i++)
		{
			frac_digits++;
			if (num[i] != '0')
			{
				if (!nonzero)
					first_nonzero = -frac_digits;
				nonzero = true;
				last_nonzero = -frac_digits;
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
	*size = 3 + VARHDRSZ + sizeof(uint16);	/* zero: a short numeric */
	if (dscale > 16383)
		return "it has more than 16383 digits after the decimal point";
	if (!nonzero)
		return NULL;			/* zero: no weight to speak of */
	first_nonzero += exponent;
	last_nonzero += exponent;
	/* floor division: numeric groups decimal digits in fours around the point */
	weight = first_nonzero >= 0 ? first_nonzero / 4 : -((-first_nonzero + 3) / 4);
	if (weight > 32767)
		return "it has more than 131072 digits before the decimal point";
	{
		int64		last_group = last_nonzero >= 0 ? last_nonzero / 4 : -((-last_nonzero + 3) / 4);
		bool		is_short = dscale <= 63 && weight >= -64 && weight <= 63;

		*size = 3 + VARHDRSZ + (is_short ? sizeof(uint16) : 2 * sizeof(uint16)) +
			(Size) (weight - last_group + 1) * sizeof(int16);
	}
	return NULL;
}

/*
 * What jsonb_in would refuse for size, tracked while lexing.  PostgreSQL
 * 15 refuses a container whose header, entries and data pass
 * JENTRY_OFFLENMASK bytes (256 MB), a string over 256 MB, and more array
 * elements or object pairs than its parse tree can hold: that tree's
 * array starts at 4 and doubles, so it fails at the first doubling past
 * one allocation (16,777,216 elements, 8,388,608 pairs), before the
 * JSONB_MAX_ELEMS check.  Sizes here are upper bounds (alignment counted
 * at its worst), so a payload accepted here is one jsonb_in takes.
 */
static Size
queen_jsonb_capacity(Size entry_size)
{
	Size		cap = 4;

	while (cap * 2 * entry_size <= MaxAllocSize)
		cap *= 2;
	return Min(cap, Min(MaxAllocSize / entry_size, JB_CMASK));
}

#define QUEEN_JSONB_MAX_ELEMS	queen_jsonb_capacity(sizeof(JsonbValue))
#define QUEEN_JSONB_MAX_PAIRS	queen_jsonb_capacity(sizeof(JsonbPair))

typedef struct QueenJsonbLevel
{
	Size		bytes;			/* entries and data of the children so far */
	Size		count;			/* elements or pairs */
	bool		object;
} QueenJsonbLevel;

typedef struct QueenJsonCheck
{
	const char *problem;		/* first one found */
	QueenJsonbLevel *levels;
	int			depth;
	int			maxdepth;
} QueenJsonCheck;

static void
queen_json_check_fail(QueenJsonCheck *c, const char *problem)
{
	if (c->problem == NULL)
		c->problem = problem;
}

/* A value of size bytes (alignment included) joins the open container. */
static void
queen_json_check_value(QueenJsonCheck *c, Size bytes)
{
	QueenJsonbLevel *l;

	if (c->depth == 0)
		return;
	l = &c->levels[c->depth - 1];
	l->bytes += sizeof(JEntry) + bytes;
	if (l->bytes > JENTRY_OFFLENMASK)
		queen_json_check_fail(c, l->object ?
							  "an object's members take more than the 256 MB jsonb allows" :
							  "an array's elements take more than the 256 MB jsonb allows");
}

/* A container opens (queen_json_opens_object says which kind). */
static void
queen_json_open(void *state)
{
	QueenJsonCheck *c = (QueenJsonCheck *) state;

	if (c->depth == c->maxdepth)
	{
		c->maxdepth = Max(16, c->maxdepth * 2);
		c->levels = c->levels == NULL ?
			palloc(sizeof(QueenJsonbLevel) * c->maxdepth) :
			repalloc(c->levels, sizeof(QueenJsonbLevel) * c->maxdepth);
	}
	c->levels[c->depth].bytes = 0;
	c->levels[c->depth].count = 0;
	c->levels[c->depth].object = queen_json_opens_object();
	c->depth++;
}

static void
queen_json_close(void *state)
{
	QueenJsonCheck *c = (QueenJsonCheck *) state;
	Size		total = sizeof(uint32) + c->levels[c->depth - 1].bytes;	/* header */

	c->depth--;
	if (total > JENTRY_OFFLENMASK)
		queen_json_check_fail(c, "a container takes more than the 256 MB jsonb allows");
	queen_json_check_value(c, 3 + total);
}

static void
queen_json_field_start(void *state, char *fname, bool isnull)
{
	QueenJsonCheck *c = (QueenJsonCheck *) state;
	QueenJsonbLevel *l = &c->levels[c->depth - 1];
	Size		len = strlen(fname);

	(void) isnull;
	if (len > JENTRY_OFFLENMASK)
		queen_json_check_fail(c, "a key is longer than the 256 MB jsonb allows");
	if (++l->count > QUEEN_JSONB_MAX_PAIRS)
		queen_json_check_fail(c, "an object has more members than jsonb allows");
	queen_json_check_value(c, len);
	pfree(fname);
}

static void
queen_json_element_start(void *state, bool isnull)
{
	QueenJsonCheck *c = (QueenJsonCheck *) state;
	QueenJsonbLevel *l = &c->levels[c->depth - 1];

	(void) isnull;
	if (++l->count > QUEEN_JSONB_MAX_ELEMS)
		queen_json_check_fail(c, "an array has more elements than jsonb allows");
}

/* Numbers anywhere in a payload must be numbers jsonb can hold. */
static void
queen_json_scalar(void *state, char *token, JsonTokenType type)
{
	QueenJsonCheck *c = (QueenJsonCheck *) state;
	Size		bytes = 0;

	if (type == JSON_TOKEN_NUMBER)
	{
		const char *problem = queen_json_number_scan(token, strlen(token), &bytes);

		if (problem != NULL)
			queen_json_check_fail(c, psprintf("a number in the payload cannot be stored: %s",
											  problem));
	}
	else if (type == JSON_TOKEN_STRING)
	{
		bytes = strlen(token);
		if (bytes > JENTRY_OFFLENMASK)
			queen_json_check_fail(c, "a string is longer than the 256 MB jsonb allows");
	}
	queen_json_check_value(c, bytes);
	pfree(token);
}

/*
 * Describe why payload is not JSON that jsonb can hold, or return NULL:
 * valid UTF-8, JSON text, numbers numeric can hold, containers within
 * jsonb's limits.  Uses PostgreSQL's own lexer without building a tree,
 * with escapes on so that \u0000, which jsonb cannot store, is caught here
 * and not later.
 */
char *
queen_json_problem(const char *payload, size_t len)
{
	JsonSemAction sem;
	QueenJsonCheck check;
	char	   *problem;

	if (len > 0 && memchr(payload, '\0', len) != NULL)
		return pstrdup("payload contains a NUL byte");
	if (!pg_verify_mbstr(PG_UTF8, payload, (int) len, true))
		return pstrdup("payload is not valid UTF-8");
	memset(&check, 0, sizeof(check));
	queen_json_sem(&sem, &check, queen_json_open, queen_json_close, queen_json_field_start,
				   NULL, queen_json_element_start, queen_json_scalar);
	problem = queen_json_walk(payload, len, &sem);
	if (check.levels != NULL)
		pfree(check.levels);
	if (problem != NULL)
		return problem;
	if (check.problem != NULL)
		return pstrdup(check.problem);
	return NULL;
}

/*
 * The reader's check of a stored payload: valid UTF-8 (jsonb_in does not
 * check it) and JSON syntax, with no semantic actions, so it costs one
 * lexer pass.  Every door checked the whole rule (queen_json_problem)
 * before storing; a payload that fails here was damaged after that.
 */
char *
queen_json_syntax_problem(const char *payload, size_t len)
{
	if (!pg_verify_mbstr(PG_UTF8, payload, (int) len, true))
		return pstrdup("payload is not valid UTF-8");
	return queen_json_walk(payload, len, &nullSemAction);
}
