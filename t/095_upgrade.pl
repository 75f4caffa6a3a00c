# ALTER EXTENSION queen UPDATE on rows the previous version's code wrote.
#
# t/upgrade/queen-1.0-data.sql holds what queen 1.0 stored after
# t/upgrade/fill-1.0.sql (pushes of one and twenty messages, a consumer
# group's commits and dedup runs, a dead letter, segments retention purged
# while their hashes stay, hashes purged while their segments stay) and what
# a reader must find afterwards.  It is loaded under the 1.0 schema, the
# extension is updated, and then: the database matches a fresh install
# object for object, every message 1.0 stored reads back unchanged, the
# group resumes where it committed and acks by transactionId, the dead
# letter is listed, and every transactionId inside its window is still a
# duplicate naming the original while the purged ones are not.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use File::Basename qw(dirname);

my $fixture = dirname(__FILE__) . '/upgrade/queen-1.0-data.sql';

my $node = PostgreSQL::Test::Cluster->new('upgrade');
$node->init(extra => [ '--encoding=UTF8', '--locale=C' ]);
$node->start;

$node->safe_psql('postgres', 'CREATE DATABASE up');
$node->safe_psql('postgres', 'CREATE DATABASE fresh');
$node->safe_psql('up', q{CREATE EXTENSION queen VERSION '1.0'});
is($node->safe_psql('up', q{SELECT extversion FROM pg_extension WHERE extname = 'queen'}),
	'1.0', 'the 1.0 script installs');

my ($rc, $out, $err);
($rc, $out, $err) = $node->psql('up', undef, extra_params => [ '-v', 'ON_ERROR_STOP=1', '-f', $fixture ],
	stdout => \$out, stderr => \$err);
is($rc, 0, 'the rows queen 1.0 wrote load under its schema') or diag($err);

# The fixture's rows were written on the day it was made: move every time in
# them to now, so that the dedup windows and retention see them as just written.
$node->safe_psql('up', q{
	DO $$
	DECLARE
		delta interval := now() - (SELECT max(created_at) FROM queen.log_segments);
		r record;
	BEGIN
		FOR r IN SELECT c.oid::regclass AS tab, string_agg(format('%I = %I + $1', a.attname, a.attname), ', ') AS sets
				   FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
				   JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
				  WHERE n.nspname = 'queen' AND c.relkind = 'r' AND a.atttypid = 'timestamptz'::regtype
				  GROUP BY c.oid LOOP
			EXECUTE format('UPDATE %s SET %s', r.tab, r.sets) USING delta;
		END LOOP;
	END $$});

($rc, $out, $err) = $node->psql('up', 'ALTER EXTENSION queen UPDATE');
is($rc, 0, 'ALTER EXTENSION queen UPDATE') or diag($err);
$node->safe_psql('fresh', 'CREATE EXTENSION queen');
my $version = $node->safe_psql('fresh', q{SELECT extversion FROM pg_extension WHERE extname = 'queen'});
is($node->safe_psql('up', q{SELECT extversion FROM pg_extension WHERE extname = 'queen'}),
	$version, "updated to the default version, $version");
isnt($version, '1.0', 'the default version is a later one');

# ---- the same database as a fresh install, object for object ---------------
# Everything of the schema a client or the C code depends on: relations and
# their options and grants, columns (type, default, storage, grants),
# constraints, indexes, views, functions (body, security, settings, grants),
# the extension's members, the schema's grants.
my $describe = q{
	WITH s AS (SELECT oid FROM pg_namespace WHERE nspname = 'queen')
	SELECT line FROM (
		SELECT format('relation %s kind=%s options=%s acl=%s', c.relname, c.relkind, c.reloptions, c.relacl) AS line
		  FROM pg_class c WHERE c.relnamespace = (SELECT oid FROM s)
		UNION ALL
		SELECT format('column %s.%s #%s %s notnull=%s storage=%s default=%s acl=%s', c.relname, a.attname, a.attnum,
					  format_type(a.atttypid, a.atttypmod), a.attnotnull, a.attstorage,
					  pg_get_expr(d.adbin, d.adrelid), a.attacl)
		  FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
		  LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
		 WHERE c.relnamespace = (SELECT oid FROM s)
		UNION ALL
		SELECT format('constraint %s %s %s', conrelid::regclass, conname, pg_get_constraintdef(oid))
		  FROM pg_constraint WHERE connamespace = (SELECT oid FROM s)
		UNION ALL
		SELECT format('index %s', pg_get_indexdef(i.indexrelid))
		  FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relnamespace = (SELECT oid FROM s)
		UNION ALL
		SELECT format('view %s %s', c.relname, md5(pg_get_viewdef(c.oid)))
		  FROM pg_class c WHERE c.relnamespace = (SELECT oid FROM s) AND c.relkind IN ('v', 'm')
		UNION ALL
		SELECT format('function %s %s definer=%s config=%s acl=%s volatile=%s strict=%s', p.oid::regprocedure,
					  md5(pg_get_functiondef(p.oid)), p.prosecdef, p.proconfig, p.proacl, p.provolatile, p.proisstrict)
		  FROM pg_proc p WHERE p.pronamespace = (SELECT oid FROM s) AND p.prokind IN ('f', 'p')
		UNION ALL
		SELECT format('member %s', pg_describe_object(d.classid, d.objid, d.objsubid))
		  FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
		 WHERE d.refclassid = 'pg_extension'::regclass AND e.extname = 'queen' AND d.deptype = 'e'
		UNION ALL
		SELECT format('schema acl=%s', nspacl) FROM pg_namespace WHERE nspname = 'queen'
	) x ORDER BY line};
my $want = $node->safe_psql('fresh', $describe);
my $got = $node->safe_psql('up', $describe);
ok(length($want) > 10000, 'the description of a fresh install is not empty');
is($got, $want, 'the updated database matches a fresh install of the same version');
if ($got ne $want)
{
	my %w = map { $_ => 1 } split /\n/, $want;
	my %g = map { $_ => 1 } split /\n/, $got;
	diag("only in the fresh install: $_") for grep { !$g{$_} } sort keys %w;
	diag("only in the updated one: $_") for grep { !$w{$_} } sort keys %g;
}

# ---- the rows 1.0 wrote, in this version's layout ---------------------------
# every segment's hashes in its own row, but the 15 whose hashes 1.0 had
# purged past the window; log_txns keeps only the hashes of the 20 segments
# retention took inside their window
is($node->safe_psql('up', q{SELECT count(*) FILTER (WHERE hashes IS NULL) || '/' || count(*) FROM queen.log_segments}),
	'15/175', 'the hashes moved into their segments\' rows (175 segments, 15 without)');
is($node->safe_psql('up', q{
	SELECT q.name || ':' || count(*) || ':' || min(t.base_offset) || '-' || max(t.end_offset)
	  FROM queen.log_txns t JOIN queen.log_partitions p ON p.id = t.partition_id
	  JOIN queen.queues q ON q.id = p.queue_id GROUP BY q.name}),
	'upgrade.retained:20:0-19', 'log_txns keeps the hashes of the segments retention took');

# ---- the rows 1.0 wrote, read by this version ------------------------------
is($node->safe_psql('up', 'SELECT count(*) FROM upgrade_expect_messages'), '251',
	'the fixture expects 251 stored messages');
is($node->safe_psql('up', q{
	SELECT count(*) FROM upgrade_expect_messages e
	 WHERE NOT EXISTS (SELECT 1 FROM queen.read(e.queue, e.partition, e.log_offset, 1) r
						WHERE r.log_offset = e.log_offset AND r.message_id = e.message_id
						  AND r.transaction_id = e.transaction_id AND r.payload = e.payload)}),
	'0', 'every message 1.0 stored reads back with its offset, id, transactionId and payload');
is($node->safe_psql('up', q{
	SELECT string_agg(e.queue || '/' || e.partition || ':' || e.log_offset, ' ')
	  FROM (SELECT q.name AS queue, p.name AS partition, r.log_offset
			  FROM queen.queues q JOIN queen.log_partitions p ON p.queue_id = q.id,
				   LATERAL queen.read(q.name, p.name, 0, 1000) r
			EXCEPT SELECT queue, partition, log_offset FROM upgrade_expect_messages) e}),
	'', 'and nothing else: the 20 segments retention purged stay purged');

# group g1 committed the first 20 of each partition of upgrade.orders
is($node->safe_psql('up', q{
	SELECT string_agg(p || ':' || n || ':' || lo || '-' || hi, ' ' ORDER BY p)
	  FROM (SELECT p, count(*) AS n, min((payload->>'i')::int) AS lo, max((payload->>'i')::int) AS hi
			  FROM generate_series(0, 3) p, LATERAL queen.pop('upgrade.orders', 'p' || p, 'g1', 100) r
			 GROUP BY p) s}),
	'0:30:21-50 1:30:21-50 2:30:21-50 3:30:21-50',
	'the consumer group resumes after its last commit in every partition');
is($node->safe_psql('up', q{
	WITH l AS (SELECT * FROM queen.pop('upgrade.orders', 'p0', 'g2', 10) ORDER BY "offset")
	SELECT count(*) FILTER (WHERE a.success) || '/' || count(*)
	  FROM l, LATERAL queen.ack(l.transaction_id, l.partition_id, l.lease_id, 'completed', 'g2') a}),
	'10/10', 'a new group pops and acks by transactionId the rows 1.0 wrote');
is($node->safe_psql('up', q{SELECT transaction_id || ' ' || error FROM queen.dlq('upgrade.dlq')}),
	'dlq-1 it broke', 'the dead letter 1.0 stored is listed');

# every transactionId inside its window (and only those) is still a duplicate
# naming the original message; the expectations are the hashes 1.0 kept
is($node->safe_psql('up', q{
	WITH c AS (
		SELECT 'upgrade.orders' AS queue, 'p' || p AS partition, 'o-' || p || '-' || i AS tid
		  FROM generate_series(0, 3) p, generate_series(1, 50) i
		UNION ALL SELECT 'upgrade.retained', 'Default', 'r-' || i FROM generate_series(1, 40) i
		UNION ALL SELECT 'upgrade.window', 'Default', 'w-' || i FROM generate_series(1, 30) i),
	pushed AS (
		SELECT c.*, r.status, r.message_id,
			   EXISTS (SELECT 1 FROM upgrade_expect_dedup d
						WHERE d.queue = c.queue AND d.partition = c.partition AND d.hash = queen.txn_hash(c.tid)) AS kept,
			   (SELECT e.message_id FROM upgrade_expect_messages e
				 WHERE e.queue = c.queue AND e.partition = c.partition AND e.transaction_id = c.tid) AS original
		  FROM c, LATERAL queen.push(c.queue, '{"again": true}', c.partition, c.tid) r)
	SELECT format('%s dup, %s new, %s wrong', count(*) FILTER (WHERE status = 'duplicate'),
				  count(*) FILTER (WHERE status = 'queued'),
				  count(*) FILTER (WHERE (status = 'duplicate') <> kept
									OR (status = 'duplicate' AND original IS NOT NULL AND message_id <> original)))
	  FROM pushed}),
	'255 dup, 15 new, 0 wrong',
	'the hashes 1.0 kept still deduplicate (naming the original), the ones it purged do not');

# the maintenance this version runs works on the old rows
($rc, $out, $err) = $node->psql('up', 'SELECT count(*) FROM queen.retention_run()');
is($rc, 0, 'retention runs over the updated tables') or diag($err);
($rc, $out, $err) = $node->psql('up', 'SELECT queen.dedup_index(1, 1000) >= 0');
is("$rc $out", '0 t', 'dedup indexing runs over the updated tables') or diag($err);

$node->stop;
done_testing();
