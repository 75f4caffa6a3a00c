-- queen_test: internal functions of queen.so that only the regression tests
-- call, declared here rather than in queen--1.1.sql so that a production
-- database never has them.  scripts/test installs this extension (make
-- install-test) and pg_regress loads it after queen.

\echo Use "CREATE EXTENSION queen_test" to load this file. \quit

-- ---------------------------------------------------------------------
-- Internal: the HTTP push body parser, exposed for the regression tests.
-- ---------------------------------------------------------------------
CREATE FUNCTION queen._parse_push_body(text) RETURNS text
AS 'MODULE_PATHNAME', 'queen_parse_push_body_sql'
LANGUAGE C IMMUTABLE STRICT;
COMMENT ON FUNCTION queen._parse_push_body(text) IS
'Internal, for tests: how the HTTP broker splits a POST /api/v1/push body.';

-- ---------------------------------------------------------------------
-- Internal: the broker's push permit law (src/broker/permits.c) replayed over a
-- series of bundles (ten a second), for the regression tests.
-- ---------------------------------------------------------------------
CREATE FUNCTION queen._permit_law_replay(
	p_min int, p_initial int, p_max int,
	p_inflight int[], p_segments int[], p_exec_us int8[], p_commit_us int8[])
RETURNS TABLE (sample int, permit_limit int, naive_limit int)
AS 'MODULE_PATHNAME', 'queen_permit_law_replay'
LANGUAGE C IMMUTABLE STRICT;
COMMENT ON FUNCTION queen._permit_law_replay(int, int, int, int[], int[], int8[], int8[]) IS
'Internal, for tests: both push permit laws over a series of bundles.';

-- ---------------------------------------------------------------------
-- Internal: an encryption envelope opened with the configured keys
-- (src/core/crypto.c), for the known answers of Queen's envelope.
-- ---------------------------------------------------------------------
CREATE FUNCTION queen._open_envelope(text) RETURNS text
AS 'MODULE_PATHNAME', 'queen_open_envelope_sql'
LANGUAGE C STABLE STRICT;
COMMENT ON FUNCTION queen._open_envelope(text) IS
'Internal, for tests: the plaintext of an encryption envelope, NULL when no configured key opens it.';
