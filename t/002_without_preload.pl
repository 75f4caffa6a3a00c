# The SQL door in clusters that do not preload queen: one that never did
# (a managed PostgreSQL, a team that wants only the SQL door), and one that
# ran the broker and no longer preloads it, with the broker's settings still
# in postgresql.conf.  Each psql call is a new session, so these are the
# sessions that load the library on their own (sql/modes.sql covers the
# rest of the surface in such a cluster).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use QueenHTTP;

# (exit code, stdout, stderr) of one session
sub session
{
	my ($node, $sql) = @_;
	my ($out, $err) = ('', '');
	my $rc = $node->psql('postgres', $sql, stdout => \$out, stderr => \$err,
		extra_params => [ '-v', 'ON_ERROR_STOP=1' ]);
	return ($rc, $out, $err);
}

# ---- a cluster that never preloads queen -----------------------------------
my $plain = PostgreSQL::Test::Cluster->new('plain');
$plain->init(extra => [ '--encoding=UTF8', '--locale=C' ]);
$plain->start;

my ($rc, $out, $err) = session($plain, 'CREATE EXTENSION queen');
is($rc, 0, 'CREATE EXTENSION queen without preloading');
is($err, '', 'CREATE EXTENSION says nothing else');

($rc, $out, $err) = session($plain, q{
	SELECT string_agg(status, ',' ORDER BY status) FROM (
		SELECT status FROM queen.push('plain.q', '{"n": 1}', 'p', 'plain-1')
		UNION ALL
		SELECT status FROM queen.push('{"items": [{"queue": "plain.q", "partition": "p", "payload": {"n": 2}},
		                                          {"queue": "plain.q", "partition": "r", "payload": {"n": 3}}]}')) s});
is($out, 'queued,queued,queued', 'both forms of queen.push in the session that loaded the library');
is($err, '', 'no warning or error');
is($plain->safe_psql('postgres', q{SELECT string_agg(log_offset || ':' || payload::text, ' ' ORDER BY log_offset) FROM queen.read('plain.q', 'p')}),
	'0:{"n": 1} 1:{"n": 2}', 'queen.read in a new session returns both, in offset order');
# the readers over internal functions work where the test-only extension
# (test/queen_test) was never installed, as in production
is($plain->safe_psql('postgres', q{SELECT count(*) FROM queen.dlq('plain.q')}), '0',
	'queen.dlq without the test-only extension');

($rc, $out, $err) = session($plain, q{LOAD 'queen'; SHOW queen.zstd_level});
is("$rc $out", '0 3', 'LOAD in a plain session, then SHOW queen.zstd_level');

# PostgreSQL knows a library's settings only once it is loaded: a session
# that has not called queen yet does not know them (docs/SQL.md says how to
# load it for every session).
($rc, $out, $err) = session($plain, 'SHOW queen.zstd_level');
like($err, qr/unrecognized configuration parameter "queen.zstd_level"/,
	'before the library is loaded, a session does not know its settings');

# A tenant SET before the library is loaded is checked only when it loads,
# and PostgreSQL then keeps the default tenant with a mere WARNING: the
# session must not push into the default tenant's queues.
($rc, $out, $err) = session($plain, q{
	SET queen.tenant = 'not-a-uuid';
	SELECT status FROM queen.push('plain.tenant', '{"who": "nobody"}')});
isnt($rc, 0, 'a push under a refused tenant fails');
like($err, qr/ERROR:  invalid value for parameter "queen.tenant": "not-a-uuid"/,
	'the error names the setting and the value');
like($err, qr/set before the queen library was loaded/, 'and says why it was not refused at SET');
is($plain->safe_psql('postgres', q{SELECT count(*) FROM queen.queues WHERE name = 'plain.tenant'}),
	'0', 'nothing was written, in any tenant');

($rc, $out, $err) = session($plain, q{
	SET queen.tenant = 'not-a-uuid';
	SELECT count(*) FROM queen.read('plain.q', 'p')});
isnt($rc, 0, 'a read under a refused tenant fails too');
like($err, qr/ERROR:  invalid value for parameter "queen.tenant"/, 'with the same error');
($rc, $out, $err) = session($plain, q{
	SET queen.tenant = 'not-a-uuid';
	SELECT queen.uuid_v7() IS NOT NULL;
	RESET queen.tenant;
	SELECT count(*) FROM queen.read('plain.q', 'p')});
is("$rc $out", "0 t\n2", 'after RESET the session reads as the default tenant again');

($rc, $out, $err) = session($plain, q{
	SET queen.tenant = '00000000-0000-0000-0000-0000000000b2';
	SELECT status FROM queen.push('plain.tenant', '{"who": "b2"}')});
is("$rc $out", '0 queued', 'a valid tenant SET before the library loaded is used');
is($plain->safe_psql('postgres', q{SELECT tenant_id FROM queen.queues WHERE name = 'plain.tenant'}),
	'00000000-0000-0000-0000-0000000000b2', 'the message went to that tenant');

# With session_preload_libraries every session knows the settings from its
# start, and a bad tenant is refused at SET, as when preloaded.
$plain->safe_psql('postgres', q{ALTER DATABASE postgres SET session_preload_libraries = 'queen'});
($rc, $out, $err) = session($plain, 'SHOW queen.zstd_level');
is("$rc $out", '0 3', 'session_preload_libraries: the settings exist from the session start');
($rc, $out, $err) = session($plain, q{SET queen.tenant = 'not-a-uuid'});
like($err, qr/invalid value for parameter "queen.tenant"/, 'and a bad tenant is refused at SET');
$plain->safe_psql('postgres', q{ALTER DATABASE postgres RESET session_preload_libraries});

is($plain->safe_psql('postgres', q{SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'queen%'}),
	'0', 'no broker worker runs');
is_deeply([ log_crashes($plain) ], [], 'no process crashed');
unlike(slurp_file($plain->logfile), qr/FATAL/, 'no session ended with FATAL');
$plain->stop;

# ---- a cluster that ran the broker and no longer preloads it ----------------
my ($node, $port) = start_broker(name => 'once', shards => 2);
my ($status, $results) = push_items($port,
	map { { queue => 'once.q', partition => 'p', payload => { n => $_ }, transactionId => "once-$_" } } (0 .. 2));
is($status, 201, 'the broker took three messages');
is(join(',', map { $_->{status} } @$results), 'queued,queued,queued', 'all queued');

$node->stop;
$node->adjust_conf('postgresql.conf', 'shared_preload_libraries', undef);
$node->start;

($rc, $out, $err) = session($node,
	q{SELECT string_agg(transaction_id, ',' ORDER BY log_offset) FROM queen.read('once.q', 'p')});
is($out, 'once-0,once-1,once-2', 'without the preload, SQL reads what the broker stored');
is($err, '', 'the broker settings left in postgresql.conf load without a warning');
($rc, $out, $err) = session($node, q{SELECT log_offset FROM queen.push('once.q', '{"n": 3}', 'p', 'once-3')});
is("$rc $out $err", '0 3 ', 'and SQL pushes after them, gapless');
is($node->safe_psql('postgres', q{LOAD 'queen'; SELECT context || ' ' || setting FROM pg_settings WHERE name = 'queen.http_port'}),
	"sighup $port", 'the leftover broker setting is kept, as a setting nothing reads');
($status) = http_request($port, 'GET', '/health');
is($status, 599, 'no broker answers without the preload');

$node->append_conf('postgresql.conf', "shared_preload_libraries = 'queen'\n");
$node->restart;
ok(wait_healthy($port, 60), 'preloaded again, the broker is back');
($status, $results) = push_items($port, { queue => 'once.q', partition => 'p', payload => { n => 4 }, transactionId => 'once-4' });
is("$status $results->[0]{status}", '201 queued', 'and takes a push');
is($node->safe_psql('postgres', q{SELECT string_agg(log_offset || '=' || transaction_id, ',' ORDER BY log_offset) FROM queen.read('once.q', 'p')}),
	'0=once-0,1=once-1,2=once-2,3=once-3,4=once-4', 'one gapless log across both modes');
is_deeply([ log_crashes($node) ], [], 'no process crashed');
$node->stop;
done_testing();
