# Acknowledging over HTTP: the answer of /api/v1/ack and /api/v1/ack/batch
# item by item (every key, request order, success false with the reason for
# anything not applied, noop), the 400s of a bad body, retries to the dead
# letters and their error text through GET /api/v1/dlq, lease extension,
# consumer-group deletion, and the ack counters on /metrics/prometheus.
use strict;
use warnings;

use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use QueenHTTP;

my ($node, $port) = start_broker(name => 'ack', extra => "queen.consumer_lag_interval = 1\n");

sub ack_one
{
	my ($item) = @_;
	return http_json($port, 'POST', '/api/v1/ack', $item);
}

# ---- one ack, then a batch ------------------------------------------------------
push_items($port, map { { queue => 'ack.q', partition => 'p', transactionId => "a$_", payload => $_ } } 1 .. 3);
my ($s, $pop) = pop($port, '/api/v1/pop/queue/ack.q/partition/p?batch=10');
is($s, 200, 'popped three messages');
my ($lease, $pid) = ($pop->{leaseId}, $pop->{partitionId});

my ($status, $res, $raw) = ack_one({ transactionId => 'a1', partitionId => $pid, leaseId => $lease });
is($status, 200, 'POST /api/v1/ack answers 200');
is(ref $res, 'ARRAY', 'with a top-level array');
is_deeply([ sort keys %{ $res->[0] } ],
	[ sort qw(index transactionId success error leaseReleased dlq noop) ],
	"an item has exactly the keys of Queen's ack answer");
is_deeply($res->[0],
	{ index => 0, transactionId => 'a1', success => JSON::PP::true, error => undef,
	  leaseReleased => JSON::PP::false, dlq => JSON::PP::false, noop => JSON::PP::false },
	'acking the first of three keeps the lease');

($status, $res) = ack_batch($port, undef,
	{ transactionId => 'a2', partitionId => $pid, leaseId => $lease },
	{ transactionId => 'never-pushed', partitionId => $pid, leaseId => $lease },
	{ transactionId => 'a3', partitionId => $pid, leaseId => $lease, status => 'completed' },
	{ transactionId => 'a9', partitionId => 'not-a-uuid' },
	{ partitionId => $pid });
is($status, 200, 'a batch answers 200');
is_deeply([ map { $_->{index} } @$res ], [ 0 .. 4 ], 'one answer per item, in request order');
is_deeply([ map { $_->{transactionId} } @$res ], [ 'a2', 'never-pushed', 'a3', 'a9', undef ],
	'each names its transactionId');
ok($res->[0]{success} && $res->[2]{success}, 'the delivered messages are acknowledged');
ok($res->[0]{leaseReleased} || $res->[2]{leaseReleased}, 'acking the batch\'s end releases the lease');
ok(!$res->[1]{success}, 'an unknown transactionId is not a success');
like($res->[1]{error}, qr/^unresolvable/, 'and says it is unresolvable');
ok(!$res->[3]{success}, 'a partitionId that is not a UUID is not applied');
is($res->[3]{error}, 'partitionId must be a UUID', 'and says why');
is($res->[4]{error}, 'transactionId is required', 'a missing transactionId says so');

($status, $res) = ack_one({ transactionId => 'a1', partitionId => $pid });
ok($res->[0]{success} && $res->[0]{noop}, 'acking again is a noop');
($s) = pop($port, '/api/v1/pop/queue/ack.q/partition/p');
is($s, 204, 'nothing is delivered again');

# ---- 400 only for a bad body ----------------------------------------------------
for my $case ([ '/api/v1/ack', '{"transactionId":' ], [ '/api/v1/ack', '[1]' ],
	[ '/api/v1/ack/batch', '{"acknowledgments":{}}' ], [ '/api/v1/ack/batch', '{}' ],
	[ '/api/v1/ack/batch', '{"acknowledgments":[1]}' ],
	[ '/api/v1/ack/batch', '{"consumerGroup":7,"acknowledgments":[]}' ])
{
	($status, $res) = http_json($port, 'POST', $case->[0], $case->[1]);
	is($status, 400, "400 for $case->[1] on $case->[0]");
	ok(defined $res->{error}, 'with an error');
}
($status, undef, $raw) = http_json($port, 'POST', '/api/v1/ack/batch', '{"acknowledgments":[]}');
is($raw, '[]', 'an empty batch answers []');

# ---- retries to the dead letters ------------------------------------------------
http_json($port, 'POST', '/api/v1/configure', { queue => 'dlq.q', options => { retryLimit => 1 } });
push_items($port, { queue => 'dlq.q', transactionId => 'poison', payload => { bad => [ 1, 'x' ] } });
($s, $pop) = pop($port, '/api/v1/pop/queue/dlq.q?consumerGroup=workers');
($status, $res) = ack_batch($port, 'workers',
	{ transactionId => 'poison', partitionId => $pop->{partitionId}, leaseId => $pop->{leaseId},
	  status => 'failed', error => 'boom once' });
ok($res->[0]{success} && $res->[0]{leaseReleased}, 'a nack within the retry limit releases the lease');
($s, $pop) = pop($port, '/api/v1/pop/queue/dlq.q?consumerGroup=workers');
is($s, 200, 'and the message is delivered again');
($status, $res) = ack_batch($port, 'workers',
	{ transactionId => 'poison', partitionId => $pop->{partitionId}, leaseId => $pop->{leaseId},
	  status => 'failed', error => 'boom twice' });
ok($res->[0]{success} && $res->[0]{dlq}, 'a nack past the limit files a dead letter');
($s) = pop($port, '/api/v1/pop/queue/dlq.q?consumerGroup=workers');
is($s, 204, 'which is not delivered again');

($status, $res) = http_json($port, 'GET', '/api/v1/dlq?queue=dlq.q');
is($status, 200, 'GET /api/v1/dlq answers 200');
is_deeply([ sort keys %$res ], [qw(limit messages offset total)], 'with messages, total, limit, offset');
is($res->{total}, 1, 'one dead letter');
is($res->{limit}, 100, 'limit defaults to 100');
is($res->{offset}, 0, 'offset to 0');
my $d = $res->{messages}[0];
is_deeply([ sort keys %$d ],
	[ sort qw(id messageId partitionId transactionId consumerGroup errorMessage retryCount
		  originalCreatedAt movedToDlqAt queueName namespace task partitionName data) ],
	"a dead letter has every key of Queen's DLQ listing");
like($d->{errorMessage}, qr/boom/, 'with the error text of the nack');
is($d->{transactionId}, 'poison', 'its transactionId');
is($d->{consumerGroup}, 'workers', 'its group');
is($d->{queueName}, 'dlq.q', 'its queue');
is($d->{partitionName}, 'Default', 'its partition');
is_deeply($d->{data}, { bad => [ 1, 'x' ] }, 'and the payload');
like($d->{movedToDlqAt}, qr/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/, 'times in UTC');
($status, $res) = http_json($port, 'GET', '/api/v1/dlq?queue=dlq.q&consumerGroup=others');
is($res->{total}, 0, 'the consumerGroup filter applies');
($status, $res) = http_json($port, 'GET', '/api/v1/dlq?queue=dlq.q&from=2999-01-01T00:00:00Z');
is($res->{total}, 0, 'so does from');
($status) = http_json($port, 'GET', '/api/v1/dlq');
is($status, 400, 'the listing needs a queue');
($status) = http_json($port, 'GET', '/api/v1/dlq?queue=dlq.q&from=yesterday-ish');
is($status, 400, 'a from that is not a timestamp is 400');
($status) = http_json($port, 'GET', '/api/v1/dlq?queue=dlq.q&limit=0');
is($status, 400, 'limit 0 is 400');

# ---- lease extension ------------------------------------------------------------
push_items($port, { queue => 'lease.q', payload => 1 });
($s, $pop) = pop($port, '/api/v1/pop/queue/lease.q?leaseSeconds=30');
my $ext = "/api/v1/lease/$pop->{leaseId}/extend";
($status, $res) = http_json($port, 'POST', $ext, { seconds => 600 });
is($status, 200, 'an extension answers 200');
is_deeply([ sort keys %$res ],
	[ sort qw(leaseId success renewed newExpiresAt expiresAt lease_expires_at) ],
	"with the keys of Queen's lease extension");
is($res->{renewed}, 1, 'one partition renewed');
ok($res->{success}, 'success');
is($res->{expiresAt}, $res->{newExpiresAt}, 'expiresAt repeats newExpiresAt');
is($res->{lease_expires_at}, $res->{newExpiresAt}, 'and so does lease_expires_at');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM queen.log_consumers WHERE lease_expires_at > now() + interval '500 seconds'"),
	1, 'the lease now ends 600 seconds out');
($status, $res, $raw) = http_json($port, 'POST', $ext, '');
is($status, 200, 'an empty body is fine (60 seconds, never shorter)');
is($res->{renewed}, 1, 'still renewed');
($status, $res) = http_json($port, 'POST', '/api/v1/lease/0190aaaa-0000-7000-8000-000000000000/extend', {});
is($status, 200, 'an unknown lease answers 200 too');
ok(!$res->{success} && $res->{renewed} == 0 && !defined $res->{newExpiresAt},
	'with success false, renewed 0 and no expiry');
($status) = http_json($port, 'POST', $ext, '{"seconds":"soon"}');
is($status, 400, 'seconds that are not a number are 400');

# ---- consumer-group deletion ----------------------------------------------------
push_items($port, map { { queue => 'cg.q', payload => $_ } } 1 .. 2);
($s, $pop) = pop($port, '/api/v1/pop/queue/cg.q?consumerGroup=G&autoAck=true&subscriptionMode=all');
is(scalar @{ $pop->{messages} }, 2, 'group G consumed both');
($status, $res) = http_json($port, 'DELETE', '/api/v1/consumer-groups/G/queues/cg.q');
is($status, 200, 'deleting the group on the queue answers 200');
ok($res->{success}, 'success');
is($res->{deletedCursors}, 1, 'one cursor removed');
($s, $pop) = pop($port, '/api/v1/pop/queue/cg.q?consumerGroup=G&autoAck=true&subscriptionMode=all');
is(scalar @{ $pop->{messages} // [] }, 2, 'the group starts over from its subscription');
($status) = http_json($port, 'DELETE', '/api/v1/consumer-groups/G?deleteMetadata=maybe');
is($status, 400, 'deleteMetadata must be a boolean');
($status, $res) = http_json($port, 'DELETE', '/api/v1/consumer-groups/G?deleteMetadata=false');
is($status, 200, 'deleting the group everywhere answers 200');
is($res->{metadataDeleted}, JSON::PP::false, 'keeping its subscription when asked');

# ---- counters -------------------------------------------------------------------
ok(metric($port, 'queen_ack_items_total{result="acked"}') >= 5, 'acknowledged items are counted');
ok(metric($port, 'queen_ack_items_total{result="failed"}') >= 3, 'items not applied are counted');
is(metric($port, 'queen_dlq_filed_total'), 1, 'the dead letter is counted');
ok(metric($port, 'queen_lease_extensions_total') >= 2, 'lease extensions are counted');
ok(metric($port, 'queen_process_ack_requests_total') >= 6, 'ack requests are counted');

# ---- consumer lag on /metrics (sampled every second here) -------------------------
push_items($port,
	map { { queue => 'lag.q', partition => 'p' . ($_ % 2), transactionId => "lag$_", payload => $_ } } 1 .. 5);
my $labels = '{tenant="00000000-0000-0000-0000-000000000001",queue="lag.q",group="__QUEUE_MODE__"}';
my $lag = sub { return metric($port, "queen_consumer_lag_$_[0]$labels") // -1; };
my ($ls, $lpop) = pop($port, '/api/v1/pop/queue/lag.q/partition/p1?batch=10');
is(scalar @{ $lpop->{messages} }, 3, 'a consumer holds p1\'s three messages under a lease');
ok(wait_for(sub { $lag->('messages') == 5 }, 60), 'the lag counts all five: leased is not acknowledged');
is($lag->('partitions'), 2, 'in two partitions');
ack_batch($port, undef,
	map { { transactionId => $_->{transactionId}, partitionId => $lpop->{partitionId},
			leaseId => $lpop->{leaseId} } } @{ $lpop->{messages} });
ok(wait_for(sub { $lag->('messages') == 2 }, 60), 'two once the three are acknowledged');
is($lag->('partitions'), 1, 'in one partition');
ok(metric($port, 'queen_consumer_lag_age_seconds') < 60, 'the sample is recent');

is_deeply([ log_crashes($node) ], [], 'nothing crashed');
$node->stop;
done_testing();
