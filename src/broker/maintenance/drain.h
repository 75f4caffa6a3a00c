/*-------------------------------------------------------------------------
 *
 * drain.h
 *	  Between the maintenance worker's schedule (maintenance_worker.c) and the draining
 *	  of one spool file (drain_file.c): a file's outcome, and the sets of
 *	  partitions an unfinished file holds back.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_DRAIN_H
#define QUEEN_DRAIN_H

#include "broker.h"
#include "codec.h"

#include "utils/hsearch.h"

/* A partition, as the drain tells them apart: its identity bytes. */
typedef struct QueenDrainKey
{
	uint16		len;
	char		ident[QUEEN_IDENT_MAX];
} QueenDrainKey;

typedef enum QueenDrainResult
{
	QUEEN_DRAIN_DONE,			/* committed (or found committed) and removed */
	QUEEN_DRAIN_RETRY			/* left in place, whole or in part; try again later */
} QueenDrainResult;

extern QueenDrainResult queen_drain_file(const char *name, int *read_failures,
										 HTAB *blocked);
extern HTAB *queen_drain_keyset(const char *what);
extern void queen_drain_block(HTAB *blocked, QueenDrainKey *key);

#endif							/* QUEEN_DRAIN_H */
