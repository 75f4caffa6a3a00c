/*-------------------------------------------------------------------------
 *
 * auth.c
 *	  Authentication on the HTTP door: a bearer JWT on every request to a
 *	  route that is not public, its signature, times, issuer and audience
 *	  checked in the listener, and its role against the route's access
 *	  level (routes.c has each route's).
 *
 * Queen's contract, which its clients speak: the token in the
 * Authorization header (never the query string, where it would end in
 * access logs), the role in the claim "role" (or the first of "roles")
 * as read-only, write-only, read-write or admin, five access levels,
 * 401 without a valid token and 403 for a role that may not.  Auth is on
 * when queen.jwt_secret (HS256, HS384, HS512) or queen.jwt_public_key_file
 * (RS256, RS384, RS512 with an RSA key, EdDSA with an Ed25519 key) is set.
 *
 * The algorithm comes from the key, never from the token alone: a token's
 * "alg" is accepted only if it is one the configured key is for, so
 * "none" is never accepted and a token signed with HMAC over the public
 * key's text (the classic confusion) is refused: HMAC is checked only
 * against the secret, the public key only by a signature verification.
 * Failures say little to the client and the reason to the log at DEBUG1,
 * so that the log is not a flood an attacker can write.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "auth.h"
#include "broker.h"
#include "json_walk.h"
#include "listener.h"
#include "routes.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>

#include "common/base64.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/varlena.h"

char	   *queen_jwt_secret = NULL;
char	   *queen_jwt_public_key_file = NULL;
char	   *queen_jwt_issuer = NULL;
char	   *queen_jwt_audience = NULL;
int			queen_jwt_clock_skew_s = 30;
char	   *queen_jwt_skip_paths = NULL;

/* The public key, read at first use after its setting changed. */
static bool queen_jwt_loaded = false;
static EVP_PKEY *queen_jwt_key = NULL;
static char *queen_jwt_key_problem = NULL;	/* in TopMemoryContext */

void
queen_jwt_settings_changed(void)
{
	queen_jwt_loaded = false;
}

bool
queen_auth_enabled(void)
{
	return (queen_jwt_secret != NULL && queen_jwt_secret[0] != '\0') ||
		(queen_jwt_public_key_file != NULL && queen_jwt_public_key_file[0] != '\0');
}

static void
queen_jwt_load(void)
{
	const char *path = queen_jwt_public_key_file;
	FILE	   *f;

	if (queen_jwt_key != NULL)
		EVP_PKEY_free(queen_jwt_key);
	queen_jwt_key = NULL;
	if (queen_jwt_key_problem != NULL)
		pfree(queen_jwt_key_problem);
	queen_jwt_key_problem = NULL;
	queen_jwt_loaded = true;
	if (path == NULL || path[0] == '\0')
		return;

	/* relative: the data directory's, the working directory of every server process */
	f = fopen(path, "r");
	if (f != NULL)
	{
		queen_jwt_key = PEM_read_PUBKEY(f, NULL, NULL, NULL);
		fclose(f);
	}
	if (queen_jwt_key == NULL)
		queen_jwt_key_problem = MemoryContextStrdup(TopMemoryContext,
													psprintf("queen.jwt_public_key_file \"%s\" is not a readable PEM public key", path));
	else if (EVP_PKEY_base_id(queen_jwt_key) != EVP_PKEY_RSA &&
			 EVP_PKEY_base_id(queen_jwt_key) != EVP_PKEY_ED25519)
	{
		EVP_PKEY_free(queen_jwt_key);
		queen_jwt_key = NULL;
		queen_jwt_key_problem = MemoryContextStrdup(TopMemoryContext,
													psprintf("queen.jwt_public_key_file \"%s\" is neither an RSA nor an Ed25519 key", path));
	}
}

/* Why tokens signed with the public key cannot be checked, or NULL. */
const char *
queen_auth_problem(void)
{
	if (!queen_jwt_loaded)
		queen_jwt_load();
	return queen_jwt_key_problem;
}

/* base64url without padding, decoded; NULL when it is not. */
static char *
queen_b64url_decode(const char *s, Size n, int *len)
{
	Size		padded = n + (4 - n % 4) % 4;
	char	   *std = palloc(padded + 1);
	char	   *out;
	Size		i;

	if (n % 4 == 1)
		return NULL;
	for (i = 0; i < n; i++)
	{
		char		c = s[i];

		if (c == '-')
			c = '+';
		else if (c == '_')
			c = '/';
		else if (c == '+' || c == '/' || c == '=')
			return NULL;		/* base64url has none of these */
		std[i] = c;
	}
	for (; i < padded; i++)
		std[i] = '=';
	out = palloc(pg_b64_dec_len((int) padded) + 1);
	*len = pg_b64_decode(std, (int) padded, out, pg_b64_dec_len((int) padded));
	if (*len < 0)
		return NULL;
	out[*len] = '\0';
	return out;
}

/* The signature checks of one algorithm. */
typedef enum QueenJwtAlg
{
	QUEEN_JWT_HS256, QUEEN_JWT_HS384, QUEEN_JWT_HS512,
	QUEEN_JWT_RS256, QUEEN_JWT_RS384, QUEEN_JWT_RS512,
	QUEEN_JWT_EDDSA, QUEEN_JWT_NALGS
} QueenJwtAlg;

static const char *const queen_jwt_alg_names[QUEEN_JWT_NALGS] = {
	"HS256", "HS384", "HS512", "RS256", "RS384", "RS512", "EdDSA"
};

static const EVP_MD *
queen_jwt_md(QueenJwtAlg alg)
{
	switch (alg)
	{
		case QUEEN_JWT_HS256:
		case QUEEN_JWT_RS256:
			return EVP_sha256();
		case QUEEN_JWT_HS384:
		case QUEEN_JWT_RS384:
			return EVP_sha384();
		case QUEEN_JWT_HS512:
		case QUEEN_JWT_RS512:
			return EVP_sha512();
		default:
			return NULL;
	}
}

/* Is alg one the configured keys are for? */
static bool
queen_jwt_alg_allowed(QueenJwtAlg alg)
{
	if (alg <= QUEEN_JWT_HS512)
		return queen_jwt_secret != NULL && queen_jwt_secret[0] != '\0';
	if (queen_auth_problem() != NULL || queen_jwt_key == NULL)
		return false;
	if (alg == QUEEN_JWT_EDDSA)
		return EVP_PKEY_base_id(queen_jwt_key) == EVP_PKEY_ED25519;
	return EVP_PKEY_base_id(queen_jwt_key) == EVP_PKEY_RSA;
}

static bool
queen_jwt_signature_ok(QueenJwtAlg alg, const char *signed_part, Size signed_len,
					   const unsigned char *sig, int sig_len)
{
	if (alg <= QUEEN_JWT_HS512)
	{
		unsigned char mac[EVP_MAX_MD_SIZE];
		unsigned int mac_len = 0;

		if (HMAC(queen_jwt_md(alg), queen_jwt_secret, (int) strlen(queen_jwt_secret),
				 (const unsigned char *) signed_part, signed_len, mac, &mac_len) == NULL)
			return false;
		return (int) mac_len == sig_len && CRYPTO_memcmp(mac, sig, mac_len) == 0;
	}
	else
	{
		EVP_MD_CTX *ctx = EVP_MD_CTX_new();
		bool		ok;

		if (ctx == NULL)
			return false;
		ok = EVP_DigestVerifyInit(ctx, NULL, queen_jwt_md(alg), NULL, queen_jwt_key) == 1 &&
			EVP_DigestVerify(ctx, sig, sig_len, (const unsigned char *) signed_part,
							 signed_len) == 1;
		EVP_MD_CTX_free(ctx);
		return ok;
	}
}

/* A NumericDate claim: true with *out, false when absent; *bad when not a number. */
static bool
queen_jwt_time(const QueenJsonValue *v, double *out, bool *bad)
{
	char	   *end;

	if (v->type == JSON_TOKEN_INVALID)
		return false;
	if (v->type != JSON_TOKEN_NUMBER)
	{
		*bad = true;
		return false;
	}
	*out = strtod(v->str, &end);
	if (*end != '\0')
		*bad = true;
	return !*bad;
}

/* queen_json_strings' taker: the first string, or whether one is want. */
typedef struct QueenJwtStrings
{
	const char *want;
	bool		found;
	char	   *first;
} QueenJwtStrings;

static char *
queen_jwt_take(void *arg, int index, char *str, size_t len)
{
	QueenJwtStrings *s = (QueenJwtStrings *) arg;

	(void) len;
	if (index == 0)
		s->first = str;
	if (s->want != NULL && strcmp(str, s->want) == 0)
		s->found = true;
	return NULL;
}

/* Does the aud claim (a string or an array of strings) name want? */
static bool
queen_jwt_audience_ok(const QueenJsonValue *v, const char *want)
{
	QueenJwtStrings s = {want, false, NULL};

	if (v->type == JSON_TOKEN_STRING)
		return strcmp(v->str, want) == 0;
	return v->type == JSON_TOKEN_ARRAY_START &&
		queen_json_strings(v->span, v->span_len, queen_jwt_take, &s) == NULL && s.found;
}

/*
 * The grants of the role claim, or of the first of roles: bits of READ
 * (1), WRITE (2), ADMIN (4); 0 for no role Queen knows.
 */
static int
queen_jwt_grants(const QueenJsonValue *role, const QueenJsonValue *roles)
{
	QueenJwtStrings s = {NULL, false, NULL};
	const char *name = NULL;

	if (role->type == JSON_TOKEN_STRING)
		name = role->str;
	else if (roles->type == JSON_TOKEN_ARRAY_START &&
			 queen_json_strings(roles->span, roles->span_len, queen_jwt_take, &s) == NULL)
		name = s.first;
	if (name == NULL)
		return 0;
	if (strcmp(name, "admin") == 0)
		return 7;
	if (strcmp(name, "read-write") == 0)
		return 3;
	if (strcmp(name, "read-only") == 0)
		return 1;
	if (strcmp(name, "write-only") == 0)
		return 2;
	return 0;
}

static bool
queen_access_granted(QueenAccess need, int grants)
{
	switch (need)
	{
		case QUEEN_ACCESS_PUBLIC:
			return true;
		case QUEEN_ACCESS_READ:
			return (grants & 1) != 0;
		case QUEEN_ACCESS_WRITE:
			return (grants & 2) != 0;
		case QUEEN_ACCESS_READ_WRITE:
			return (grants & 3) == 3;
		case QUEEN_ACCESS_ADMIN:
			return (grants & 4) != 0;
	}
	return false;
}

/*
 * Check a token; NULL and the grants and subject, or why not (for the
 * log).  In the request's memory.
 */
static const char *
queen_jwt_check(const char *token, int *grants, char **subject)
{
	static const char *const hnames[1] = {"alg"};
	static const char *const cnames[8] = {"exp", "nbf", "iss", "aud", "role", "roles", "sub", "iat"};
	QueenJsonValue hv[1];
	QueenJsonValue cv[8];
	QueenJsonShape shape;
	const char *dot1 = strchr(token, '.');
	const char *dot2 = dot1 ? strchr(dot1 + 1, '.') : NULL;
	char	   *header,
			   *claims,
			   *sig;
	int			hlen,
				clen,
				slen;
	int			alg;
	double		now = (double) time(NULL);
	double		t;
	bool		bad = false;

	if (dot1 == NULL || dot2 == NULL || strchr(dot2 + 1, '.') != NULL)
		return "not three base64url parts";
	header = queen_b64url_decode(token, dot1 - token, &hlen);
	claims = queen_b64url_decode(dot1 + 1, dot2 - dot1 - 1, &clen);
	sig = queen_b64url_decode(dot2 + 1, strlen(dot2 + 1), &slen);
	if (header == NULL || claims == NULL || sig == NULL)
		return "a part is not base64url";
	if (!pg_verifymbstr(header, hlen, true) || !pg_verifymbstr(claims, clen, true))
		return "header or claims not UTF-8";

	queen_json_shape_keys(&shape, hnames, 1, hv);
	if (queen_json_shape(header, hlen, &shape) != NULL || !shape.root_object ||
		hv[0].type != JSON_TOKEN_STRING)
		return "header is not a JSON object with alg";
	for (alg = 0; alg < QUEEN_JWT_NALGS; alg++)
		if (strcmp(hv[0].str, queen_jwt_alg_names[alg]) == 0)
			break;
	if (alg == QUEEN_JWT_NALGS || !queen_jwt_alg_allowed((QueenJwtAlg) alg))
		return psprintf("alg \"%s\" is not one the configured key is for", hv[0].str);
	if (!queen_jwt_signature_ok((QueenJwtAlg) alg, token, dot2 - token,
								(unsigned char *) sig, slen))
		return "bad signature";

	queen_json_shape_keys(&shape, cnames, 8, cv);
	if (queen_json_shape(claims, clen, &shape) != NULL || !shape.root_object)
		return "claims are not a JSON object";
	if (queen_jwt_time(&cv[0], &t, &bad) && now > t + queen_jwt_clock_skew_s)
		return "expired";
	if (queen_jwt_time(&cv[1], &t, &bad) && now + queen_jwt_clock_skew_s < t)
		return "not yet valid";
	if (bad)
		return "exp or nbf is not a number";
	if (queen_jwt_issuer != NULL && queen_jwt_issuer[0] != '\0' &&
		(cv[2].type != JSON_TOKEN_STRING || strcmp(cv[2].str, queen_jwt_issuer) != 0))
		return "wrong issuer";
	if (queen_jwt_audience != NULL && queen_jwt_audience[0] != '\0' &&
		!queen_jwt_audience_ok(&cv[3], queen_jwt_audience))
		return "wrong audience";
	*grants = queen_jwt_grants(&cv[4], &cv[5]);
	*subject = cv[6].type == JSON_TOKEN_STRING ? cv[6].str : NULL;
	/* stamped on pushed messages as producerSub: a frame's u16 */
	if (*subject != NULL && (strlen(*subject) > 1024 || strlen(*subject) == 0))
		return "sub is empty or longer than 1024 bytes";
	return NULL;
}

/* Is path one of queen.jwt_skip_paths (a comma-separated list)? */
static bool
queen_auth_skipped(const char *path)
{
	const char *p = queen_jwt_skip_paths;

	while (p != NULL && *p != '\0')
	{
		Size		n;

		while (*p == ' ' || *p == ',')
			p++;
		n = strcspn(p, ", ");
		if (n > 0 && strlen(path) == n && strncmp(path, p, n) == 0)
			return true;
		p += n;
	}
	return false;
}

/*
 * May this request call a route of access level need?  True, with its
 * subject kept for the handlers, or false once it has been answered 401
 * or 403.
 */
bool
queen_auth_request(QueenHttpRequest *req, QueenAccess need)
{
	const char *header;
	const char *why;
	int			grants = 0;
	char	   *subject = NULL;
	MemoryContext old;

	req->subject = NULL;
	if (!queen_auth_enabled() || need == QUEEN_ACCESS_PUBLIC || queen_auth_skipped(req->path))
		return true;

	header = queen_http_header(req, "Authorization");
	if (header == NULL || pg_strncasecmp(header, "Bearer ", 7) != 0)
	{
		queen_http_respond(req, 401, "application/json",
						   "{\"error\":\"authentication required\"}",
						   strlen("{\"error\":\"authentication required\"}"),
						   "WWW-Authenticate: Bearer\r\n");
		return false;
	}
	old = MemoryContextSwitchTo(req->mcxt);
	why = queen_jwt_check(header + 7 + strspn(header + 7, " "), &grants, &subject);
	MemoryContextSwitchTo(old);
	if (why != NULL)
	{
		elog(DEBUG1, "queen: a token was refused: %s", why);
		queen_http_respond(req, 401, "application/json",
						   "{\"error\":\"invalid token\"}", strlen("{\"error\":\"invalid token\"}"),
						   "WWW-Authenticate: Bearer error=\"invalid_token\"\r\n");
		return false;
	}
	if (!queen_access_granted(need, grants))
	{
		queen_respond_error(req, 403, "the token's role may not call this route");
		return false;
	}
	req->subject = subject;
	return true;
}
