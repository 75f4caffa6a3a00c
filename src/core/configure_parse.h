/*-------------------------------------------------------------------------
 *
 * configure_parse.h
 *	  The queue options and a configure body parsed against them
 *	  (configure_parse.c), shared with the statements that store them
 *	  (configure.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_CONFIGURE_PARSE_H
#define QUEEN_CONFIGURE_PARSE_H

#include "configure.h"

/*
 * One queue option: its JSON name, its column, and what a body may say.
 * The table (configure_parse.c) is the only list of options: the parser,
 * the statements and the echo are all generated from it, so a new option
 * is one line there (and the count below).
 */
typedef enum QueenOptionType
{
	QUEEN_OPT_INT,
	QUEEN_OPT_BOOL,
	QUEEN_OPT_TEXT
} QueenOptionType;

typedef struct QueenOptionDef
{
	const char *json;			/* key in the body and in the echo */
	const char *column;			/* queen.queues column */
	QueenOptionType type;
	int32		def;			/* configure default (bool: 0/1) */
	int32		min;			/* ints: accepted range */
	int32		max;
	bool		clamp;			/* ints: clamp to [lo, hi] instead of refusing */
	int32		lo;
	int32		hi;
} QueenOptionDef;

/* Entries of queen_options; configure_parse.c asserts the count. */
#define QUEEN_NOPTIONS	19

extern const QueenOptionDef queen_options[QUEEN_NOPTIONS];

/* The effective configuration of a queue after a configure. */
struct QueenCfgResult
{
	char	   *queue;
	pg_uuid_t	id;
	char	   *label[2];		/* namespace, task */
	int32		ival[QUEEN_NOPTIONS];
	char	   *sval[QUEEN_NOPTIONS];
};

/* What a body says about one option. */
typedef enum QueenSpecKind
{
	QUEEN_SPEC_ABSENT = 0,		/* keep the stored value (default when new) */
	QUEEN_SPEC_DEFAULT,			/* explicit null: the configure default */
	QUEEN_SPEC_VALUE
} QueenSpecKind;

typedef struct QueenOptionSpec
{
	QueenSpecKind kind;
	int32		ival;			/* ints and bools */
	char	   *sval;			/* text */
} QueenOptionSpec;

/* What a valid body asks for. */
typedef struct QueenCfgRequest
{
	char	   *queue;
	bool		replace;
	QueenOptionSpec label[2];	/* namespace, task */
	QueenOptionSpec opt[QUEEN_NOPTIONS];
} QueenCfgRequest;

extern bool queen_cfg_parse(const char *body, size_t len, QueenCfgRequest *req,
							QueenCfgError *err);

#endif							/* QUEEN_CONFIGURE_PARSE_H */
