# The broker's HTTP contract, case by case, over real HTTP against a
# preloaded cluster: POST /api/v1/push (results, dedup, every 4xx), the
# routes, /health before and after CREATE EXTENSION, /metrics/prometheus,
# a reload with changed settings, and a lone push on an idle broker.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use QueenHTTP;

my ($node, $port) = start_broker(
	name => 'push',
	no_extension => 1,
	# a long backstop tick: a lone push must not wait for it; the maintenance
	# worker indexes every 50 hashes, and the shards keep no dedup cache, so
	# their probes use the dedup runs
	extra => "queen.fusion_hold_ms = 10000\nqueen.dedup_index_min_hashes = 50\n"
	  . "queen.dedup_cache_mb = 0\n");

# ---- before CREATE EXTENSION: the workers wait, /health says why -------------
ok( wait_for(
		sub {
			my ($s, $b) = http_request($port, 'GET', '/health');
			return $s == 503 && $b =~ /CREATE EXTENSION queen/;
		}),
	'/health is 503 and names the missing extension before CREATE EXTENSION');
my ($status, $res) = push_items($port, { queue => 'early', payload => 1 });
is($status, 503, 'a push before CREATE EXTENSION is 503');

$node->safe_psql('postgres', 'CREATE EXTENSION queen');
ok(wait_healthy($port, 60), '/health turns 200 once the extension exists');
my ($hs, $hbody) = http_request($port, 'GET', '/health');
like($hbody, qr/"status":"healthy","database":"connected"/, '/health body');

sub count_rows
{
	return $node->safe_psql('postgres',
		'SELECT (SELECT count(*) FROM queen.log_segments) || \'/\' || ((SELECT count(*) FROM queen.log_segments WHERE hashes IS NOT NULL) + (SELECT count(*) FROM queen.log_txns)) || \'/\' || (SELECT count(*) FROM queen.queues)');
}

# ---- a lone push on an idle broker -------------------------------------------
my $t0 = time;
($status, $res) = push_items($port, { queue => 'lone', payload => { n => 1 } });
my $elapsed = time - $t0;
is($status, 201, 'lone push answered 201');
cmp_ok($elapsed, '<', 5,
	'a lone push does not wait for queen.fusion_hold_ms (10 s here)');

# ---- the result contract -------------------------------------------------------
($status, $res) = push_items(
	$port,
	{ queue => 'orders', payload => { a => 1 } },
	{ queue => 'orders', partition => 'p2', payload => [ 1, 2 ], transactionId => 'tx-1' },
	{ queue => 'orders', payload => 'text', transactionId => 'tx-1' },
	{ queue => 'orders', payload => undef });
is($status, 201, 'push answers 201');
is(scalar @$res, 4, 'one result per item');
is_deeply([ map { $_->{index} } @$res ], [ 0, 1, 2, 3 ], 'results in request order');
is_deeply([ sort keys %{ $res->[0] } ],
	[ 'index', 'message_id', 'queueName', 'status', 'transaction_id' ],
	'result keys are the wire contract');
is($res->[0]{transaction_id}, $res->[0]{message_id},
	'a missing transactionId defaults to the minted id');
like($res->[0]{message_id}, qr/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
	'message ids are UUIDv7');
is($res->[1]{transaction_id}, 'tx-1', 'client transactionId echoed');
is($res->[2]{status}, 'queued',
	'same transactionId on another partition is not a duplicate');
is($res->[3]{status}, 'queued', 'a JSON null payload is a payload');

# exact bytes are stored, whitespace and all
my $raw = '{"items":[{"queue":"bytes","payload":{ "k" :  [1, 2]  ,"u":"\u00e9"},"transactionId":"b1"}]}';
($status) = http_request($port, 'POST', '/api/v1/push', $raw);
is($status, 201, 'raw body pushed');
is( $node->safe_psql(
		'postgres',
		q{SELECT convert_from(f.payload, 'UTF8') FROM queen.log_segments s
		  JOIN queen.log_partitions p ON p.id = s.partition_id
		  JOIN queen.queues q ON q.id = p.queue_id,
		  LATERAL queen.unpack_frames(s.blob) f
		  WHERE q.name = 'bytes'}),
	'{ "k" :  [1, 2]  ,"u":"\u00e9"}',
	'the payload is stored byte for byte as sent');

# ---- dedup inside a request and against stored data ---------------------------
($status, $res) = push_items(
	$port,
	{ queue => 'dedup', payload => 1, transactionId => 'd-1' },
	{ queue => 'dedup', payload => 2, transactionId => 'd-1' },
	{ queue => 'dedup', payload => 3, transactionId => 'd-2' });
is($res->[0]{status}, 'queued', 'first occurrence queued');
is($res->[1]{status}, 'duplicate', 'repeat inside the request is a duplicate');
is($res->[1]{message_id}, $res->[0]{message_id}, 'the repeat carries the first id');
my $original = $res->[0]{message_id};

($status, $res) = push_items(
	$port,
	{ queue => 'dedup', payload => 9, transactionId => 'd-1' },
	{ queue => 'dedup', payload => 9, transactionId => 'd-1' },
	{ queue => 'dedup', payload => 4, transactionId => 'd-3' });
is($res->[0]{status}, 'duplicate', 'repeat of a stored transactionId is a duplicate');
is($res->[0]{message_id}, $original, 'and reports the original message id');
is($res->[1]{message_id}, $original, 'its in-request follower reports the original too');
is($res->[2]{status}, 'queued', 'the rest of the request is stored');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM queen.read('dedup') WHERE transaction_id = 'd-1'"),
	'1', 'one copy of d-1 stored');
is($node->safe_psql('postgres', "SELECT count(*) FROM queen.read('dedup')"),
	'3', 'd-1, d-2, d-3 stored once each');

# original segment retained away (as retention does it: its hashes move to
# log_txns for the dedup window, log_start moves past it): the zero UUID
retain_away($node, 'dedup', 'Default', 0);
($status, $res) = push_items($port, { queue => 'dedup', payload => 1, transactionId => 'd-1' });
is($res->[0]{status}, 'duplicate', 'still a duplicate after the original segment is gone');
is($res->[0]{message_id}, '00000000-0000-0000-0000-000000000000',
	'with the zero UUID as its id');

# ---- dedup runs: the maintenance worker sorts the stored hashes ----------------
($status, $res) = push_items($port,
	map { { queue => 'runs', partition => 'r1', payload => $_, transactionId => "run-$_" } } 1 .. 120);
is($status, 201, '120 messages pushed to one partition');
my $run_hashes = q{
	SELECT coalesce(sum(length(d.keys)) / 12, 0) || '/' || count(DISTINCT d.run_end)
	  FROM queen.log_dedup d JOIN queen.log_partitions p ON p.id = d.partition_id
	  JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'runs'};
ok(wait_for(sub { $node->safe_psql('postgres', $run_hashes) =~ /^120\/1$/ }),
	'the maintenance worker sorts them into one dedup run')
  or diag($node->safe_psql('postgres', $run_hashes));
my $original_7 = $node->safe_psql('postgres',
	"SELECT message_id FROM queen.read('runs', 'r1') WHERE transaction_id = 'run-7'");
($status, $res) = push_items($port,
	{ queue => 'runs', partition => 'r1', payload => 'again', transactionId => 'run-7' },
	{ queue => 'runs', partition => 'r1', payload => 'new', transactionId => 'run-new' });
is($res->[0]{status}, 'duplicate', 'a repeat the run holds is a duplicate');
is($res->[0]{message_id}, $original_7, 'naming the original');
is($res->[1]{status}, 'queued', 'a new transactionId beside it is stored');

# The indexer reads only the partitions stamped since its last complete pass,
# as far back as the oldest open transaction that has written (a push stamps
# its partition at its own time, up to 10 s earlier, and commits when it
# will: one segment, its partition's only write, is never stamped again).  A
# push held uncommitted for longer than that, while passes go on, is indexed
# once it commits.
my $partition_runs = q{
	SELECT coalesce(sum(length(d.keys)) / 12, 0) || '/' || count(DISTINCT d.run_end)
	  FROM queen.log_dedup d JOIN queen.log_partitions p ON p.id = d.partition_id
	  JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'runs' AND p.name = '%s'};
my $late = $node->background_psql('postgres');
$late->query_safe(q{BEGIN; SELECT count(*) FROM queen.push((SELECT jsonb_agg(jsonb_build_object(
	'queue', 'runs', 'partition', 'late', 'payload', g, 'transactionId', 'late-' || g))
	FROM generate_series(1, 120) g))});
my $held = time;
sleep 1 while time - $held < 13;
($status, $res) = push_items($port,
	map { { queue => 'runs', partition => 'r2', payload => $_, transactionId => "r2-$_" } } 1 .. 120);
ok(wait_for(sub { $node->safe_psql('postgres', sprintf($partition_runs, 'r2')) eq '120/1' }),
	'a partition pushed 13 s into an open transaction is indexed');
$late->query_safe('COMMIT');
$late->quit;
ok(wait_for(sub { $node->safe_psql('postgres', sprintf($partition_runs, 'late')) eq '120/1' }),
	'and the transaction\'s partition once it commits')
  or diag($node->safe_psql('postgres', sprintf($partition_runs, 'late')));

# ---- bad bodies: 400, nothing written -------------------------------------------
my $before = count_rows();
my @bad = (
	[ 'not JSON', '{"items": [' ],
	[ 'missing items', '{"things": []}' ],
	[ 'items not an array', '{"items": {}}' ],
	[ 'missing queue', '{"items":[{"queue":"ok","payload":1},{"payload":1}]}' ],
	[ 'missing payload', '{"items":[{"queue":"ok"}]}' ],
	[ 'control character in queue', '{"items":[{"queue":"a\u0001b","payload":1}]}' ],
	[ 'control character in partition', '{"items":[{"queue":"a","partition":"p\u001f","payload":1}]}' ],
	[ '\u0000 in a payload', '{"items":[{"queue":"a","payload":{"x":"a\u0000b"}}]}' ],
	[ 'transactionId over 65535 bytes',
		'{"items":[{"queue":"a","payload":1,"transactionId":"' . ('x' x 65536) . '"}]}' ],
	[ 'queue name over 255 bytes', '{"items":[{"queue":"' . ('q' x 256) . '","payload":1}]}' ],
);
for my $case (@bad)
{
	my ($name, $body) = @$case;
	my ($s, $b) = http_request($port, 'POST', '/api/v1/push', $body);
	is($s, 400, "400 for $name");
	like($b, qr/^\{"error":"bad body: /, "error body for $name");
}
is(count_rows(), $before, 'rejected bodies wrote nothing');

($status, my $body) = http_request($port, 'POST', '/api/v1/push', '{"items":[]}');
is($status, 201, 'empty items is 201');
is($body, '[]', 'empty items answers []');

# ---- routes -----------------------------------------------------------------------
($status) = http_request($port, 'GET', '/api/v1/nowhere');
is($status, 404, 'unknown route is 404');
($status) = http_request($port, 'GET', '/api/v1/push');
is($status, 405, 'GET on the push route is 405');
($status) = http_request($port, 'POST', '/health', '{}');
is($status, 405, 'POST on /health is 405');
($status, $body) = http_request($port, 'GET', '/status');
is($status, 200, '/status answers without the database');

# ---- reload: changed settings take effect ------------------------------------------
$node->append_conf('postgresql.conf', "queen.max_body_bytes = 2048\nqueen.bundle_max = 4\n");
$node->reload;
# Until the listener has applied the reload, the big body is accepted and
# stored; only the answers say which attempts were refused.
my $big = '{"items":[{"queue":"big","payload":"' . ('z' x 4096) . '"}]}';
my $stored_before_reload = 0;
ok( wait_for(
		sub {
			my ($s, $b) = http_request($port, 'POST', '/api/v1/push', $big);
			$stored_before_reload++ if $s == 201 && $b =~ /"status":"(queued|buffered)"/;
			return $s == 413;
		}),
	'after SIGHUP a body over the new queen.max_body_bytes is 413');
($status, $body) = http_request($port, 'POST', '/api/v1/push',
	'{"items":[{"queue":"big-after-reload","payload":"' . ('z' x 4096) . '"}]}');
is($status, 413, 'the reloaded limit stays in force');
like($body, qr/request body exceeds 2048 bytes/, 'and says which limit');
($status) = http_request($port, 'POST', '/api/v1/push',
	'{"items":[{"queue":"small","payload":1}]}');
is($status, 201, 'a small body still passes after the reload');
ok( wait_for(sub { slurp_file($node->logfile) =~ /config:.*bundle_max=4.*\(reloaded\)|\(reloaded\): config:.*bundle_max=4/ }),
	'the workers log the reloaded configuration');
is($node->safe_psql('postgres', "SELECT count(*) FROM queen.read('big-after-reload')"),
	'0', 'the 413 body wrote nothing');
ok( wait_for(sub { $node->safe_psql('postgres', "SELECT count(*) FROM queen.read('big')") == $stored_before_reload }),
	"the big bodies answered before the reload are stored, the 413 ones are not ($stored_before_reload accepted)");

# ---- metrics ---------------------------------------------------------------------
($status, $body) = http_request($port, 'GET', '/metrics/prometheus');
is($status, 200, '/metrics/prometheus answers');
for my $family (qw(queen_batch_items_fired_total queen_batches_fired_total
	queen_fusion_items_per_batch queen_process_push_requests_total
	queen_process_push_messages_total queen_push_permits_limit
	queen_push_permits_inflight queen_bundles_committed_total))
{
	like($body, qr/^$family(\{[^}]*\})? \d/m, "metric $family present");
}
cmp_ok(metric($port, 'queen_batch_items_fired_total{op="push"}'), '>=', 8,
	'items fired counts the stored messages');

is_deeply([ log_crashes($node) ], [], 'no worker crashed');
$node->stop;
done_testing();
