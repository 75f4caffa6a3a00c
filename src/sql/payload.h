/*-------------------------------------------------------------------------
 *
 * payload.h
 *	  A stored payload as jsonb (read.c): the one parse that checks and
 *	  builds it, shared by queen.read and queen.pop so both turn the same
 *	  bytes into the same value and report the same damage.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_SQL_PAYLOAD_H
#define QUEEN_SQL_PAYLOAD_H

/* The jsonb of a stored payload, or (Datum) 0 with *problem set. */
extern Datum queen_payload_jsonb(const char *payload, size_t len, char **problem);

#endif							/* QUEEN_SQL_PAYLOAD_H */
