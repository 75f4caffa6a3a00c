/*-------------------------------------------------------------------------
 *
 * shim_pg.c
 *	  The few server functions the fuzzed code calls, outside the server:
 *	  memory contexts over malloc, ereport, the encoding checks and the
 *	  odd helper.
 *
 * A fuzz target is a plain program (libFuzzer's), so the backend's own
 * functions are not there.  Everything PostgreSQL builds for frontends
 * too (the JSON lexer, StringInfo, base64, hash_bytes, snprintf) comes
 * from its static libpgcommon.a and libpgport.a as the server has it;
 * what follows is only what exists in the backend alone, kept as small
 * as the code under test allows.
 *
 * Every allocation is its own malloc() with its exact size, so
 * AddressSanitizer sees one byte past any of them; a context keeps its
 * chunks in a list and frees them when deleted or reset.
 *
 * An ERROR is a finding: the broker's parsers answer hostile input with a
 * message and never raise (codec.c, push_body.c say so), because a raise
 * in a listener ends the process and every connection it holds.  So
 * errfinish() at ERROR prints the message and aborts, which libFuzzer
 * reports with the input.  Lower levels are formatted and dropped.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "fuzz.h"

#include "mb/pg_wchar.h"
#include "nodes/memnodes.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "common/jsonapi.h"
#include "utils/json.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

/* ----------------------------------------------------------------
 *		Memory contexts
 * ----------------------------------------------------------------
 */

typedef struct FuzzChunk
{
	struct FuzzChunk *prev;
	struct FuzzChunk *next;
	Size		size;
	MemoryContext cxt;			/* right before the data, as in the server */
} FuzzChunk;

typedef struct FuzzContext
{
	MemoryContextData base;
	FuzzChunk  *chunks;
} FuzzContext;

static FuzzContext fuzz_top = {.base = {.type = T_AllocSetContext, .name = "fuzz top"}};

MemoryContext TopMemoryContext = &fuzz_top.base;
MemoryContext CurrentMemoryContext = &fuzz_top.base;
MemoryContext ErrorContext = &fuzz_top.base;

static void
fuzz_oom(Size size)
{
	fprintf(stderr, "fuzz shim: invalid or failed allocation of %zu bytes\n", (size_t) size);
	abort();
}

static void *
fuzz_alloc(MemoryContext cxt, Size size, int flags)
{
	FuzzContext *fc = (FuzzContext *) cxt;
	FuzzChunk  *c;

	if (!((flags & MCXT_ALLOC_HUGE) ? AllocHugeSizeIsValid(size) : AllocSizeIsValid(size)))
		fuzz_oom(size);
	c = malloc(sizeof(FuzzChunk) + size);
	if (c == NULL)
	{
		if (flags & MCXT_ALLOC_NO_OOM)
			return NULL;
		fuzz_oom(size);
	}
	c->size = size;
	c->cxt = cxt;
	c->prev = NULL;
	c->next = fc->chunks;
	if (fc->chunks)
		fc->chunks->prev = c;
	fc->chunks = c;
	if (flags & MCXT_ALLOC_ZERO)
		memset(c + 1, 0, size);
	return c + 1;
}

void
pfree(void *pointer)
{
	FuzzChunk  *c = ((FuzzChunk *) pointer) - 1;
	FuzzContext *fc = (FuzzContext *) c->cxt;

	if (c->prev)
		c->prev->next = c->next;
	else
		fc->chunks = c->next;
	if (c->next)
		c->next->prev = c->prev;
	free(c);
}

void *
repalloc(void *pointer, Size size)
{
	FuzzChunk  *c = ((FuzzChunk *) pointer) - 1;
	void	   *n = fuzz_alloc(c->cxt, size, 0);

	memcpy(n, pointer, Min(size, c->size));
	pfree(pointer);
	return n;
}

void *
MemoryContextAllocExtended(MemoryContext context, Size size, int flags)
{
	return fuzz_alloc(context, size, flags);
}

void *
MemoryContextAlloc(MemoryContext context, Size size)
{
	return fuzz_alloc(context, size, 0);
}

void *
MemoryContextAllocZero(MemoryContext context, Size size)
{
	return fuzz_alloc(context, size, MCXT_ALLOC_ZERO);
}

void *
palloc(Size size)
{
	return fuzz_alloc(CurrentMemoryContext, size, 0);
}

void *
palloc0(Size size)
{
	return fuzz_alloc(CurrentMemoryContext, size, MCXT_ALLOC_ZERO);
}

void *
palloc_extended(Size size, int flags)
{
	return fuzz_alloc(CurrentMemoryContext, size, flags);
}

char *
MemoryContextStrdup(MemoryContext context, const char *string)
{
	Size		n = strlen(string) + 1;
	char	   *s = fuzz_alloc(context, n, 0);

	memcpy(s, string, n);
	return s;
}

char *
pstrdup(const char *in)
{
	return MemoryContextStrdup(CurrentMemoryContext, in);
}

char *
pnstrdup(const char *in, Size len)
{
	char	   *s;

	len = strnlen(in, len);
	s = palloc(len + 1);
	memcpy(s, in, len);
	s[len] = '\0';
	return s;
}

MemoryContext
AllocSetContextCreateInternal(MemoryContext parent, const char *name,
							  Size minContextSize, Size initBlockSize, Size maxBlockSize)
{
	FuzzContext *fc = calloc(1, sizeof(FuzzContext));

	(void) minContextSize;
	(void) initBlockSize;
	(void) maxBlockSize;
	if (fc == NULL)
		fuzz_oom(sizeof(FuzzContext));
	fc->base.type = T_AllocSetContext;
	fc->base.name = name;
	fc->base.parent = parent;
	if (parent)
	{
		fc->base.nextchild = parent->firstchild;
		if (parent->firstchild)
			parent->firstchild->prevchild = &fc->base;
		parent->firstchild = &fc->base;
	}
	return &fc->base;
}

static void fuzz_context_free(MemoryContext cxt, bool self);

void
MemoryContextReset(MemoryContext context)
{
	fuzz_context_free(context, false);
}

void
MemoryContextDelete(MemoryContext context)
{
	fuzz_context_free(context, true);
}

/* Its children and chunks; itself too when self. */
static void
fuzz_context_free(MemoryContext cxt, bool self)
{
	FuzzContext *fc = (FuzzContext *) cxt;

	while (cxt->firstchild)
		fuzz_context_free(cxt->firstchild, true);
	while (fc->chunks)
	{
		FuzzChunk  *c = fc->chunks;

		fc->chunks = c->next;
		free(c);
	}
	if (!self)
		return;
	if (cxt->prevchild)
		cxt->prevchild->nextchild = cxt->nextchild;
	else if (cxt->parent)
		cxt->parent->firstchild = cxt->nextchild;
	if (cxt->nextchild)
		cxt->nextchild->prevchild = cxt->prevchild;
	if (CurrentMemoryContext == cxt)
		CurrentMemoryContext = TopMemoryContext;
	free(fc);
}

MemoryContext
fuzz_iteration_context(void)
{
	static MemoryContext cxt = NULL;

	if (cxt == NULL)
		cxt = AllocSetContextCreate(TopMemoryContext, "fuzz input", ALLOCSET_DEFAULT_SIZES);
	else
		MemoryContextReset(cxt);
	return cxt;
}

/* ----------------------------------------------------------------
 *		ereport
 * ----------------------------------------------------------------
 */

static int	fuzz_elevel;
static char fuzz_errmsg[1024];

bool
errstart(int elevel, const char *domain)
{
	(void) domain;
	fuzz_elevel = elevel;
	fuzz_errmsg[0] = '\0';
	return true;				/* format every message: its arguments are code too */
}

bool
errstart_cold(int elevel, const char *domain)
{
	return errstart(elevel, domain);
}

void
errfinish(const char *filename, int lineno, const char *funcname)
{
	if (fuzz_elevel < ERROR)
		return;
	fprintf(stderr, "fuzz shim: ERROR raised at %s:%d (%s): %s\n",
			filename, lineno, funcname, fuzz_errmsg);
	abort();
}

int
errcode(int sqlerrcode)
{
	(void) sqlerrcode;
	return 0;
}

static int
fuzz_format(const char *fmt, va_list ap)
{
	vsnprintf(fuzz_errmsg, sizeof(fuzz_errmsg), fmt, ap);
	return 0;
}

#define FUZZ_FORMATTER(name) \
int \
name(const char *fmt, ...) \
{ \
	va_list		ap; \
\
	va_start(ap, fmt); \
	fuzz_format(fmt, ap); \
	va_end(ap); \
	return 0; \
}

FUZZ_FORMATTER(errmsg)
FUZZ_FORMATTER(errmsg_internal)
FUZZ_FORMATTER(errdetail)
FUZZ_FORMATTER(errdetail_internal)
FUZZ_FORMATTER(errhint)

int
errmsg_plural(const char *fmt_singular, const char *fmt_plural, unsigned long n, ...)
{
	va_list		ap;

	va_start(ap, n);
	fuzz_format(n == 1 ? fmt_singular : fmt_plural, ap);
	va_end(ap);
	return 0;
}

/* ----------------------------------------------------------------
 *		Encodings: the database's is UTF-8, as the broker requires
 * ----------------------------------------------------------------
 */

int
GetDatabaseEncoding(void)
{
	return PG_UTF8;
}

bool
pg_verify_mbstr(int encoding, const char *mbstr, int len, bool noError)
{
	if (pg_encoding_verifymbstr(encoding, mbstr, len) == len)
		return true;
	if (!noError)
		ereport(ERROR, (errcode(ERRCODE_CHARACTER_NOT_IN_REPERTOIRE),
						errmsg("invalid byte sequence for encoding")));
	return false;
}

bool
pg_verifymbstr(const char *mbstr, int len, bool noError)
{
	return pg_verify_mbstr(PG_UTF8, mbstr, len, noError);
}

int
pg_mbstrlen_with_len(const char *mbstr, int limit)
{
	int			len = 0;

	while (limit > 0 && *mbstr)
	{
		int			l = pg_encoding_mblen(PG_UTF8, mbstr);

		limit -= l;
		mbstr += l;
		len++;
	}
	return len;
}

/* ----------------------------------------------------------------
 *		Time: the clock, and dates
 * ----------------------------------------------------------------
 */

TimestampTz
GetCurrentTimestamp(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (TimestampTz) (ts.tv_sec - (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY) *
		USECS_PER_SEC + ts.tv_nsec / 1000;
}

bool
TimestampDifferenceExceeds(TimestampTz start_time, TimestampTz stop_time, int msec)
{
	return stop_time - start_time >= (TimestampTz) msec * 1000;
}

/*
 * Dates: PostgreSQL's datetime parser is not in a frontend library.  The
 * callers (validate.c) have checked the ISO-8601 shape already; this reads
 * its numbers, checks their ranges and takes every moment as UTC, which is
 * enough for a parsed date to reach the code that uses it.
 */
int
ParseDateTime(const char *timestr, char *workbuf, size_t buflen, char **field,
			  int *ftype, int maxfields, int *numfields)
{
	if (strlen(timestr) >= buflen || maxfields < 1)
		return DTERR_BAD_FORMAT;
	strcpy(workbuf, timestr);
	field[0] = workbuf;
	ftype[0] = DTK_DATE;
	*numfields = 1;
	return 0;
}

int
DecodeDateTime(char **field, int *ftype, int nf, int *dtype, struct pg_tm *tm,
			   fsec_t *fsec, int *tzp)
{
	int			y = 0,
				mo = 0,
				d = 0,
				h = 0,
				mi = 0,
				sec = 0;

	(void) ftype;
	if (nf != 1 || sscanf(field[0], "%4d-%2d-%2d%*c%2d:%2d:%2d", &y, &mo, &d, &h, &mi, &sec) < 3)
		return DTERR_BAD_FORMAT;
	if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60)
		return DTERR_FIELD_OVERFLOW;
	memset(tm, 0, sizeof(*tm));
	tm->tm_year = y;
	tm->tm_mon = mo;
	tm->tm_mday = d;
	tm->tm_hour = h;
	tm->tm_min = mi;
	tm->tm_sec = sec;
	*fsec = 0;
	*tzp = 0;
	*dtype = DTK_DATE;
	return 0;
}

int
tm2timestamp(struct pg_tm *tm, fsec_t fsec, int *tzp, Timestamp *dt)
{
	struct tm	t;

	(void) tzp;
	memset(&t, 0, sizeof(t));
	t.tm_year = tm->tm_year - 1900;
	t.tm_mon = tm->tm_mon - 1;
	t.tm_mday = tm->tm_mday;
	t.tm_hour = tm->tm_hour;
	t.tm_min = tm->tm_min;
	t.tm_sec = tm->tm_sec;
	*dt = ((Timestamp) timegm(&t) - (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY) *
		USECS_PER_SEC + fsec;
	return 0;
}

/* UTC only, which is all the broker renders. */
int
timestamp2tm(Timestamp dt, int *tzp, struct pg_tm *tm, fsec_t *fsec,
			 const char **tzn, pg_tz *attimezone)
{
	time_t		secs = (time_t) (dt / USECS_PER_SEC) +
		(POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY;
	struct tm	t;

	(void) tzp;
	(void) tzn;
	(void) attimezone;
	if (gmtime_r(&secs, &t) == NULL)
		return -1;
	memset(tm, 0, sizeof(*tm));
	tm->tm_year = t.tm_year + 1900;
	tm->tm_mon = t.tm_mon + 1;
	tm->tm_mday = t.tm_mday;
	tm->tm_hour = t.tm_hour;
	tm->tm_min = t.tm_min;
	tm->tm_sec = t.tm_sec;
	*fsec = (fsec_t) (dt % USECS_PER_SEC);
	if (*fsec < 0)
		*fsec += USECS_PER_SEC;
	return 0;
}

/* ----------------------------------------------------------------
 *		Text helpers
 * ----------------------------------------------------------------
 */

text *
cstring_to_text_with_len(const char *s, int len)
{
	text	   *t = palloc(len + VARHDRSZ);

	SET_VARSIZE(t, len + VARHDRSZ);
	memcpy(VARDATA(t), s, len);
	return t;
}

/* Nothing the harness passes is toasted or short-headed. */
struct varlena *
pg_detoast_datum_packed(struct varlena *datum)
{
	return datum;
}

void
escape_json(StringInfo buf, const char *str)
{
	const unsigned char *p;

	appendStringInfoChar(buf, '"');
	for (p = (const unsigned char *) str; *p; p++)
	{
		if (*p == '"' || *p == '\\')
		{
			appendStringInfoChar(buf, '\\');
			appendStringInfoChar(buf, (char) *p);
		}
		else if (*p < ' ')
			appendStringInfo(buf, "\\u%04x", *p);
		else
			appendStringInfoChar(buf, (char) *p);
	}
	appendStringInfoChar(buf, '"');
}

char *
quote_literal_cstr(const char *rawstr)
{
	StringInfoData buf;
	const char *p;

	initStringInfo(&buf);
	if (strchr(rawstr, '\\'))
		appendStringInfoChar(&buf, 'E');
	appendStringInfoChar(&buf, '\'');
	for (p = rawstr; *p; p++)
	{
		if (*p == '\'' || *p == '\\')
			appendStringInfoChar(&buf, *p);
		appendStringInfoChar(&buf, *p);
	}
	appendStringInfoChar(&buf, '\'');
	return buf.data;
}

/*
 * The JSON lexer's error text is built in the backend only (libpgcommon's
 * frontend build leaves it out); the same messages, reading the same
 * token span.
 */
static char *
fuzz_token(JsonLexContext *lex)
{
	return pnstrdup(lex->token_start, lex->token_terminator - lex->token_start);
}

char *
json_errdetail(JsonParseErrorType error, JsonLexContext *lex)
{
	switch (error)
	{
		case JSON_SUCCESS:
			break;
		case JSON_ESCAPING_INVALID:
			return psprintf("Escape sequence \"\\%s\" is invalid.", fuzz_token(lex));
		case JSON_ESCAPING_REQUIRED:
			return psprintf("Character with value 0x%02x must be escaped.",
							(unsigned char) *(lex->token_terminator));
		case JSON_EXPECTED_END:
			return psprintf("Expected end of input, but found \"%s\".", fuzz_token(lex));
		case JSON_EXPECTED_ARRAY_FIRST:
			return psprintf("Expected array element or \"]\", but found \"%s\".", fuzz_token(lex));
		case JSON_EXPECTED_ARRAY_NEXT:
			return psprintf("Expected \",\" or \"]\", but found \"%s\".", fuzz_token(lex));
		case JSON_EXPECTED_COLON:
			return psprintf("Expected \":\", but found \"%s\".", fuzz_token(lex));
		case JSON_EXPECTED_JSON:
			return psprintf("Expected JSON value, but found \"%s\".", fuzz_token(lex));
		case JSON_EXPECTED_MORE:
			return "The input string ended unexpectedly.";
		case JSON_EXPECTED_OBJECT_FIRST:
			return psprintf("Expected string or \"}\", but found \"%s\".", fuzz_token(lex));
		case JSON_EXPECTED_OBJECT_NEXT:
			return psprintf("Expected \",\" or \"}\", but found \"%s\".", fuzz_token(lex));
		case JSON_EXPECTED_STRING:
			return psprintf("Expected string, but found \"%s\".", fuzz_token(lex));
		case JSON_INVALID_TOKEN:
			return psprintf("Token \"%s\" is invalid.", fuzz_token(lex));
		case JSON_UNICODE_CODE_POINT_ZERO:
			return "\\u0000 cannot be converted to text.";
		case JSON_UNICODE_ESCAPE_FORMAT:
			return "\"\\u\" must be followed by four hexadecimal digits.";
		case JSON_UNICODE_HIGH_ESCAPE:
			return "Unicode escape values cannot be used for code point values above 007F when the encoding is not UTF8.";
		case JSON_UNICODE_HIGH_SURROGATE:
			return "Unicode high surrogate must not follow a high surrogate.";
		case JSON_UNICODE_LOW_SURROGATE:
			return "Unicode low surrogate must follow a high surrogate.";
	}
	elog(ERROR, "unexpected json parse error type: %d", (int) error);
	return NULL;
}

/*
 * Shared-memory sizing, reached only from code a target links but never
 * runs; defined here so that libpgcommon's frontend allocator (which has
 * them too) is not linked in beside the contexts above.
 */
Size
add_size(Size s1, Size s2)
{
	if (s1 + s2 < s1)
		fuzz_oom(s1);
	return s1 + s2;
}

Size
mul_size(Size s1, Size s2)
{
	if (s1 != 0 && (s1 * s2) / s1 != s2)
		fuzz_oom(s1);
	return s1 * s2;
}
