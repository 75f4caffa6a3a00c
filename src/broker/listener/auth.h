/*-------------------------------------------------------------------------
 *
 * auth.h
 *	  Who may call a route (auth.c): bearer JWTs checked in the listener,
 *	  their role against the route's access level.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_AUTH_H
#define QUEEN_AUTH_H

#include "http/http.h"

/* A route's access level, Queen's five (docs/HTTP.md, "Authentication"). */
typedef enum QueenAccess
{
	QUEEN_ACCESS_PUBLIC = 0,
	QUEEN_ACCESS_READ,			/* read-only, read-write, admin */
	QUEEN_ACCESS_WRITE,			/* write-only, read-write, admin */
	QUEEN_ACCESS_READ_WRITE,	/* read-write, admin */
	QUEEN_ACCESS_ADMIN			/* admin */
} QueenAccess;

/* What a request may do and who it is: in the request's memory. */
typedef struct QueenAuth
{
	bool		checked;		/* auth is on and the token was valid */
	char	   *subject;		/* the token's sub, or NULL */
} QueenAuth;

extern bool queen_auth_enabled(void);
extern const char *queen_auth_problem(void);
extern bool queen_auth_request(QueenHttpRequest *req, QueenAccess need);
extern const char *queen_auth_subject(QueenHttpRequest *req);

#endif							/* QUEEN_AUTH_H */
