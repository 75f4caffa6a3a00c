# Traces over HTTP: POST /api/v1/traces with Queen's body (traceNames as a
# string or an array, any JSON data), the three readers (a message's
# traces, a name's with paging, the names with counts), the 400s of bad
# bodies and parameters, traces of unknown messages (stored: traces are
# advisory), and queen.trace_retention removing old traces.
use strict;
use warnings;

use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use QueenHTTP;

my ($node, $port) = start_broker(name => 'traces');

sub trace
{
	my ($body) = @_;
	return http_json($port, 'POST', '/api/v1/traces', $body);
}

push_items($port, map { { queue => 'tq', partition => 'p', transactionId => "m$_", payload => $_ } } 1 .. 2);
my ($s, $pop) = pop($port, '/api/v1/pop/queue/tq/partition/p?batch=2');
my $pid = $pop->{partitionId};

# ---- recording ---------------------------------------------------------------------
my ($status, $res) = trace({ transactionId => 'm1', partitionId => $pid, consumerGroup => 'workers',
	traceNames => [ 'order-1', 'tenant-a' ], eventType => 'processing', data => { step => 1, note => "ok" } });
is($status, 200, 'a trace answers 200');
ok($res->{success}, 'success');
like($res->{traceId}, qr/^[0-9a-f-]{36}$/, 'with the trace id');
($status, $res) = trace({ transactionId => 'm1', partitionId => $pid, traceNames => 'order-1', data => [ 1, 'two' ] });
ok($res->{success}, 'traceNames may be one string, data any JSON');
($status, $res) = trace({ transactionId => 'm2', partitionId => $pid, traceNames => [ 'order-2' ], data => 'plain' });
ok($res->{success}, 'a string as data');
($status, $res) = trace({ transactionId => 'never-pushed', partitionId => $pid, data => {} });
ok($res->{success}, 'a trace of an unknown message is stored (traces are advisory)');

# ---- a message's traces ------------------------------------------------------------
($status, $res) = http_json($port, 'GET', "/api/v1/traces/$pid/m1");
is($status, 200, 'a message\'s traces: 200');
is(scalar @{ $res->{traces} }, 2, 'both of m1\'s traces, and no other');
is_deeply([ sort keys %{ $res->{traces}[0] } ],
	[ sort qw(id event_type data consumer_group worker_id created_at trace_names) ], "Queen's keys");
is($res->{traces}[0]{event_type}, 'processing', 'the first one first, with its event type');
is_deeply($res->{traces}[0]{data}, { step => 1, note => "ok" }, 'its data as sent');
is_deeply($res->{traces}[0]{trace_names}, [ 'order-1', 'tenant-a' ], 'its names');
is($res->{traces}[0]{consumer_group}, 'workers', 'its consumer group');
is($res->{traces}[1]{event_type}, 'info', 'eventType defaults to info');
is($res->{traces}[1]{consumer_group}, '__QUEUE_MODE__', 'consumerGroup defaults to queue mode');
is_deeply($res->{traces}[1]{data}, [ 1, 'two' ], 'an array as data');
($status, $res) = http_json($port, 'GET', "/api/v1/traces/$pid/nothing-here");
is_deeply($res, { traces => [] }, 'a message without traces: an empty list');

# a transactionId longer than a name reads back by its path
my $long = 'L' x 300;
($status, $res) = trace({ transactionId => $long, partitionId => $pid, data => { long => 1 } });
ok($res->{success}, 'a trace of a 300-byte transactionId');
($status, $res) = http_json($port, 'GET', "/api/v1/traces/$pid/$long");
is(scalar @{ $res->{traces} }, 1, 'reads back by its path');

# a message's listing is bounded: at most 1,000 traces, the oldest
$node->safe_psql('postgres', "INSERT INTO queen.message_traces (id, tenant_id, partition_id, transaction_id,"
	. " consumer_group, event_type, data, created_at)"
	. " SELECT gen_random_uuid(), (SELECT tenant_id FROM queen.message_traces LIMIT 1), '$pid', 'many',"
	. " 'g', 'info', jsonb_build_object('i', i), now() + make_interval(secs => i)"
	. " FROM generate_series(1, 1001) i");
($status, $res) = http_json($port, 'GET', "/api/v1/traces/$pid/many");
is(scalar @{ $res->{traces} }, 1000, 'a message with 1,001 traces lists 1,000');
is_deeply($res->{traces}[0]{data}, { i => 1 }, 'the oldest first');
$node->safe_psql('postgres', "DELETE FROM queen.message_traces WHERE transaction_id = 'many'");

# ---- by name, paged ---------------------------------------------------------------
($status, $res) = http_json($port, 'GET', '/api/v1/traces/by-name/order-1');
is($status, 200, 'by name: 200');
is($res->{total}, 2, 'both traces named order-1');
is_deeply($res->{pagination}, { limit => 100, offset => 0 }, 'the default page');
is($res->{traces}[0]{queue_name}, 'tq', 'each names its queue');
is($res->{traces}[0]{partition_name}, 'p', 'and its partition');
is($res->{traces}[0]{transaction_id}, 'm1', 'and its message');
($status, $res) = http_json($port, 'GET', '/api/v1/traces/by-name/order-1?limit=1&offset=1');
is(scalar @{ $res->{traces} }, 1, 'a page of one');
is_deeply($res->{traces}[0]{data}, [ 1, 'two' ], 'the second trace');
is($res->{total}, 2, 'the total is still all of them');
($status, $res) = http_json($port, 'GET', '/api/v1/traces/by-name/order-1?to=2000-01-01T00:00:00Z');
is($res->{total}, 0, 'a time bound before them finds none');

# ---- the names ---------------------------------------------------------------------
($status, $res) = http_json($port, 'GET', '/api/v1/traces/names');
is($status, 200, 'the names: 200');
is($res->{total}, 3, 'three names');
my %count = map { $_->{trace_name} => $_->{trace_count} } @{ $res->{trace_names} };
is_deeply(\%count, { 'order-1' => 2, 'tenant-a' => 1, 'order-2' => 1 }, 'with their trace counts');

# ---- refusals ---------------------------------------------------------------------------
my %refused = (
	'not JSON' => '{"transactionId": ',
	'no data' => qq({"transactionId": "m1", "partitionId": "$pid"}),
	'no partitionId' => '{"transactionId": "m1", "data": {}}',
	'a partitionId that is not a UUID' => '{"transactionId": "m1", "partitionId": "p", "data": {}}',
	'traceNames of numbers' => qq({"transactionId": "m1", "partitionId": "$pid", "data": {}, "traceNames": [1]}),
	'an empty trace name' => qq({"transactionId": "m1", "partitionId": "$pid", "data": {}, "traceNames": [""]}),
	'a number jsonb cannot hold' => qq({"transactionId": "m1", "partitionId": "$pid", "data": {"n": 1e1000000}}),
);
for my $why (sort keys %refused)
{
	($status, $res, my $raw) = trace($refused{$why});
	is($status, 400, "$why: 400") or diag $raw;
	ok($res && $res->{error}, "$why: says why");
}
($status) = http_json($port, 'GET', '/api/v1/traces/by-name/order-1?limit=0');
is($status, 400, 'a limit of 0 is 400');
($status) = http_json($port, 'GET', '/api/v1/traces/not-a-uuid/m1');
is($status, 400, 'a partitionId that is not a UUID in the path is 400');
($status, $res) = http_json($port, 'GET', "/api/v1/traces/$pid/m1");
is(scalar @{ $res->{traces} }, 2, 'no refused trace was stored');

# ---- retention ---------------------------------------------------------------------
$node->append_conf('postgresql.conf', "queen.trace_retention = 2\n");
$node->reload;
ok(wait_for(sub {
	my ($st, $r) = http_json($port, 'GET', '/api/v1/traces/names');
	return $st == 200 && $r->{total} == 0;
}, 60), 'traces older than queen.trace_retention are removed');
is($node->safe_psql('postgres', 'SELECT count(*) FROM queen.message_traces'), 0, 'every one');

is(scalar(log_crashes($node)), 0, 'no worker crashed');
$node->stop;
done_testing();
