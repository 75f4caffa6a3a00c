# POST /api/v1/configure and DELETE /api/v1/resources/queues/:queue over
# HTTP, and a broker started before its database exists: the workers wait,
# /health says why, and they serve once the database and the extension are
# created, without restarting the cluster.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use QueenHTTP;

# queen.database names a database that does not exist yet
my ($node, $port) = start_broker(
	name => 'configure',
	database => 'later',
	no_extension => 1);

ok( wait_for(
		sub {
			my ($s, $b) = http_request($port, 'GET', '/health');
			return $s == 503 && $b =~ /waiting for database \\"later\\"/;
		}),
	'/health is 503 while queen.database does not exist');
ok(wait_for(sub { slurp_file($node->logfile) =~ /database "later" \(queen\.database\) does not exist/ }),
	'the log says the broker waits for the database');

$node->safe_psql('postgres', 'CREATE DATABASE later');
$node->safe_psql('later', 'CREATE EXTENSION queen');
ok(wait_healthy($port, 90), 'the broker serves once the database and extension exist');
is_deeply([ log_crashes($node) ], [], 'waiting for the database crashed nothing');

# ---- configure -------------------------------------------------------------------
my ($status, $res) = http_json($port, 'POST', '/api/v1/configure',
	{ queue => 'cfg.orders', options => { leaseTime => 30, dedupWindowSeconds => 0 } });
is($status, 200, 'configure answers 200');
is($res->{configured}, JSON::PP::true, 'configured: true');
is($res->{queue}, 'cfg.orders', 'queue echoed');
is($res->{namespace}, 'cfg', 'namespace derived from the dotted name');
is($res->{options}{leaseTime}, 30, 'leaseTime as given');
is($res->{options}{retryLimit}, 3, 'other options at their configure defaults');
is($res->{options}{dedupWindowSeconds}, 0, 'dedupWindowSeconds as given');

# merge: an absent option keeps its value
($status, $res) = http_json($port, 'POST', '/api/v1/configure',
	{ queue => 'cfg.orders', options => { retryLimit => 7 } });
is($res->{options}{leaseTime}, 30, 'merge keeps options not given');
is($res->{options}{retryLimit}, 7, 'merge sets the option given');

# dedupWindowSeconds takes effect on the next push
my @twice = ({ queue => 'cfg.orders', payload => 1, transactionId => 'w' });
push_items($port, @twice);
(undef, $res) = push_items($port, @twice);
is($res->[0]{status}, 'queued', 'with dedupWindowSeconds 0 a repeated transactionId is stored again');
http_json($port, 'POST', '/api/v1/configure',
	{ queue => 'cfg.orders', options => { dedupWindowSeconds => 3600 } });
(undef, $res) = push_items($port, @twice);
is($res->[0]{status}, 'duplicate', 'after setting 3600 it is a duplicate at once');

# replace resets everything not given
($status, $res) = http_json($port, 'POST', '/api/v1/configure',
	{ queue => 'cfg.orders', mode => 'replace', options => { retryLimit => 1 } });
is($res->{options}{leaseTime}, 300, 'replace resets leaseTime to its default');
is($res->{options}{retryLimit}, 1, 'replace sets what is given');

# invalid values: 400, nothing written
my $before = $node->safe_psql('later', "SELECT row_to_json(q)::text FROM queen.queues q WHERE name = 'cfg.orders'");
for my $case (
	[ { queue => 'cfg.orders', options => { leaseTime => 'long' } }, 'leaseTime' ],
	[ { queue => 'cfg.orders', options => { dedupWindowSeconds => -1 } }, 'dedupWindowSeconds' ],
	[ { queue => 'cfg.orders', options => { retentionEnabled => 'yes' } }, 'retentionEnabled' ],
	[ { queue => 'cfg.orders', mode => 'sideways' }, undef ],
	[ { options => {} }, undef ])
{
	my ($body, $key) = @$case;
	($status, $res) = http_json($port, 'POST', '/api/v1/configure', $body);
	is($status, 400, '400 for ' . ($key // 'a bad body'));
	is($res->{invalid}, $key, "names the invalid option $key") if defined $key;
	ok(defined $res->{error}, 'with an error message');
}
($status) = http_request($port, 'POST', '/api/v1/configure', '{"queue": ');
is($status, 400, 'malformed JSON is 400');
is($node->safe_psql('later', "SELECT row_to_json(q)::text FROM queen.queues q WHERE name = 'cfg.orders'"),
	$before, 'refused configures wrote nothing');
($status) = http_request($port, 'GET', '/api/v1/configure');
is($status, 405, 'GET on configure is 405');

# ---- delete ------------------------------------------------------------------------
push_items($port, map { { queue => 'gone.q', partition => "p$_", payload => $_ } } 1 .. 5);
push_items($port, { queue => 'kept', payload => 1 });
($status, $res) = http_json($port, 'DELETE', '/api/v1/resources/queues/gone.q');
is($status, 200, 'delete answers 200');
is($res->{deleted}, JSON::PP::true, 'deleted: true');
is( $node->safe_psql('later', q{
	SELECT (SELECT count(*) FROM queen.queues WHERE name = 'gone.q')
	     + (SELECT count(*) FROM queen.log_partitions p WHERE NOT EXISTS (SELECT 1 FROM queen.queues q WHERE q.id = p.queue_id))
	     + (SELECT count(*) FROM queen.log_txns t WHERE NOT EXISTS (SELECT 1 FROM queen.log_partitions p WHERE p.id = t.partition_id))
	     + (SELECT count(*) FROM queen.log_segments s WHERE NOT EXISTS (SELECT 1 FROM queen.log_partitions p WHERE p.id = s.partition_id))}),
	'0', 'the queue, its partitions, segments and hashes are gone');
is($node->safe_psql('later', "SELECT count(*) FROM queen.read('kept')"), '1',
	'other queues are untouched');
($status, $res) = http_json($port, 'DELETE', '/api/v1/resources/queues/never.there');
is($status, 200, 'deleting a queue that does not exist succeeds');
# Queen's clients (its deleteQueue test) require deleted: true here
is($res->{deleted}, JSON::PP::true, 'with deleted: true, as Queen answers');
is($res->{existed}, JSON::PP::false, 'and says it did not exist');
is($res->{queue}, 'never.there', 'naming the queue');
($status) = http_request($port, 'DELETE', '/api/v1/resources/queues/a%01b');
is($status, 400, 'a control character in the queue name is 400');
(undef, $res) = push_items($port, { queue => 'gone.q', partition => 'p1', payload => 'again' });
is($res->[0]{status}, 'queued', 'a deleted queue is created again by the next push');

# ---- after DROP EXTENSION: 503, as a push is answered ------------------------------
$node->safe_psql('later', 'DROP EXTENSION queen');
($status, $res) = http_json($port, 'POST', '/api/v1/configure',
	{ queue => 'cfg.dropped', options => { leaseTime => 30 } });
is($status, 503, 'configure after DROP EXTENSION is 503');
like($res->{error}, qr/extension queen is not installed|CREATE EXTENSION queen/,
	'and says the extension is missing');
($status, $res) = http_json($port, 'DELETE', '/api/v1/resources/queues/gone.q');
is($status, 503, 'delete after DROP EXTENSION is 503');
like($res->{error}, qr/extension queen is not installed|CREATE EXTENSION queen/,
	'and says the extension is missing');
$node->safe_psql('later', 'CREATE EXTENSION queen');
ok( wait_for(
		sub {
			my ($s) = http_json($port, 'POST', '/api/v1/configure',
				{ queue => 'cfg.back', options => { leaseTime => 30 } });
			return $s == 200;
		},
		60),
	'configure answers 200 again after CREATE EXTENSION');

is_deeply([ log_crashes($node) ], [], 'no worker crashed');
$node->stop;
done_testing();
