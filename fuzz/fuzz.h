/*-------------------------------------------------------------------------
 *
 * fuzz.h
 *	  What the fuzz targets share: the per-input memory context of
 *	  shim_pg.c and a reader that takes bytes off the front of an input.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_FUZZ_H
#define QUEEN_FUZZ_H

#include <stddef.h>
#include <stdint.h>

/* A fresh context for one input, the previous input's memory freed. */
extern MemoryContext fuzz_iteration_context(void);

/* Bytes not yet taken from an input. */
typedef struct FuzzInput
{
	const uint8_t *data;
	size_t		len;
} FuzzInput;

static inline uint8_t
fuzz_byte(FuzzInput *in)
{
	uint8_t		b = 0;

	if (in->len > 0)
	{
		b = in->data[0];
		in->data++;
		in->len--;
	}
	return b;
}

/* The rest of the input as a NUL-terminated copy (fuzzers pass no NUL). */
static inline char *
fuzz_rest(FuzzInput *in)
{
	char	   *s = palloc(in->len + 1);

	memcpy(s, in->data, in->len);
	s[in->len] = '\0';
	return s;
}

/* libFuzzer's entry points. */
extern int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
extern int	LLVMFuzzerInitialize(int *argc, char ***argv);

#endif							/* QUEEN_FUZZ_H */
