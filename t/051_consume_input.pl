# What a careless or malicious consumer sends over HTTP is parsed or refused
# (issue 29, findings 3, 5, 8 and 10): names that are not UTF-8 are 400 and
# write nothing; an ack sent again after it was applied answers success,
# noop, whatever lease id it names; query strings with too many, unknown or
# malformed parameters are 400, never silently defaulted; leases are capped
# (queen.max_lease_seconds); a lease id matches in any case; partitions=0
# has no limit; a redelivery after a lease expires is no wider than what
# was delivered, so nothing undelivered is marked a second attempt.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use JSON::PP;
use Encode qw(decode);
use QueenHTTP;

my ($node, $port) = start_broker(name => 'consinput', shards => 2);

sub sql { return $node->safe_psql('postgres', $_[0]); }

# (status, error text) of a request that should be refused
sub refused
{
	my ($method, $path, $body) = @_;
	my ($s, $r, $raw) = http_json($port, $method, $path, $body);
	return ($s, ref $r eq 'HASH' ? $r->{error} // '' : $raw // '');
}

sub is_400
{
	my ($method, $path, $body, $like, $name) = @_;
	my ($s, $e) = refused($method, $path, $body);
	is($s, 400, "$name: 400");
	like($e, $like, "$name: says why ($e)");
}

# ---- 3. names that are not UTF-8 ---------------------------------------------------
is_400('GET', '/api/v1/pop/queue/%ff%fe?consumerGroup=grp', undef,
	qr/^queue name must be valid UTF-8$/, 'a queue name that is not UTF-8');
is_400('GET', '/api/v1/pop/queue/q3?consumerGroup=%ff%fe', undef,
	qr/^consumerGroup must be valid UTF-8$/, 'a group that is not UTF-8');
is_400('GET', '/api/v1/pop/queue/q3/partition/%c3%28', undef,
	qr/^partition name must be valid UTF-8$/, 'a partition that is not UTF-8');
is_400('GET', '/api/v1/pop?namespace=%ff&consumerGroup=g', undef,
	qr/^namespace must be valid UTF-8$/, 'a namespace that is not UTF-8');
is_400('GET', '/api/v1/dlq?queue=%ff', undef, qr/^queue name must be valid UTF-8$/,
	'a dead-letter listing of a queue that is not UTF-8');
is_400('DELETE', '/api/v1/consumer-groups/%ff%fe', undef, qr/^consumerGroup must be valid UTF-8$/,
	'deleting a group that is not UTF-8');
is_400('POST', '/api/v1/lease/%ff%fe/extend', '{}', qr/^leaseId must be a UUID/,
	'a lease id that is not UTF-8');
is_400('GET', '/api/v1/pop/queue/q3?%ff=1', undef, qr/^a query parameter's name must be valid UTF-8$/,
	'a parameter name that is not UTF-8');
my ($s, $r) = http_json($port, 'POST', '/api/v1/ack',
	qq({"transactionId":"t","partitionId":"00000000-0000-0000-0000-000000000001","consumerGroup":"\xff\xfe"}));
is($s, 400, 'an ack whose group is not UTF-8: 400');
is(sql(q{SELECT count(*) FROM queen.queues WHERE NOT name ~ '^[ -~]*$'}), '0', 'no such queue was written');
is(sql(q{SELECT count(*) FROM queen.log_consumers WHERE NOT consumer_group ~ '^[ -~]*$'}), '0',
	'no such consumer group was written');
is(sql('SELECT count(*) FROM queen.consumer_groups_metadata'), '0', 'no subscription was registered');
my ($ms, $metrics) = http_request($port, 'GET', '/metrics/prometheus');
ok(defined eval { decode('UTF-8', $metrics, Encode::FB_CROAK) }, 'the metrics page is UTF-8');

# ---- 5. an ack sent again after it was applied -----------------------------------
push_items($port, map { { queue => 'q5', partition => 'p', transactionId => "a$_", payload => $_ } } 0 .. 3);
my ($ps, $pop) = pop($port, '/api/v1/pop/queue/q5/partition/p?batch=2');
is($ps, 200, 'two messages are popped');
my @acks = map { { transactionId => $_->{transactionId}, partitionId => $_->{partitionId},
				   leaseId => $pop->{leaseId}, status => 'completed' } } @{ $pop->{messages} };
my ($as, $first) = ack_batch($port, undef, @acks);
ok((grep { $_->{success} && !$_->{noop} && $_->{leaseReleased} } @$first) == 2,
	'the ack is applied and releases the lease');
my ($as2, $again) = ack_batch($port, undef, @acks);
is($as2, 200, 'the same ack again is answered');
is_deeply([ map { [ $_->{success}, $_->{noop}, $_->{error} ] } @$again ],
	[ [ JSON::PP::true, JSON::PP::true, undef ], [ JSON::PP::true, JSON::PP::true, undef ] ],
	'applied: success, noop');
$_->{leaseId} = uc $_->{leaseId} for @acks;
my ($as3, $upper) = ack_batch($port, undef, @acks);
ok((grep { $_->{success} && $_->{noop} } @$upper) == 2, 'and so with the lease id in upper case');
my ($ps2, $pop2) = pop($port, '/api/v1/pop/queue/q5/partition/p?batch=1');
my ($as4, $stale) = ack_batch($port, undef,
	{ transactionId => 'a2', partitionId => $pop2->{partitionId}, leaseId => $pop->{leaseId} });
ok(!$stale->[0]{success} && $stale->[0]{error} =~ /^invalid lease: not the partition's current lease/,
	'an ack of what was not applied, under a lease that is gone, says why: ' . ($stale->[0]{error} // ''));
my ($as5, $single) = http_json($port, 'POST', '/api/v1/ack',
	{ transactionId => 'a2', partitionId => $pop2->{partitionId}, leaseId => uc $pop2->{leaseId} });
ok($single->[0]{success} && !$single->[0]{noop} && $single->[0]{leaseReleased},
	'an upper-case lease id names the same lease');

# ---- 8. query strings --------------------------------------------------------------
my $junk = join('&', map { "junk$_=1" } 1 .. 32);
is_400('GET', "/api/v1/pop/queue/q8?$junk&consumerGroup=analytics&autoAck=true", undef,
	qr/^unknown query parameter "junk1": this route reads batch, wait/, '32 junk parameters first');
my $many = join('&', ('batch=1') x 33);
is_400('GET', "/api/v1/pop/queue/q8?$many", undef, qr/^too many query parameters: at most 32$/,
	'33 parameters');
is_400('GET', '/api/v1/pop/queue/q8?consumergroup=analytics', undef,
	qr/^unknown query parameter "consumergroup"/, 'a misspelt consumerGroup');
for my $from ('not-a-date', 'garbage', '%ff', 'today', 'J2451187', 'epoch', '2026-02-30T00:00:00Z')
{
	is_400('GET', "/api/v1/pop/queue/q8?consumerGroup=g8&subscriptionFrom=$from", undef,
		qr/^subscriptionFrom must be "now" or an ISO-8601 timestamp/, "subscriptionFrom=$from");
}
is_400('GET', '/api/v1/pop/queue/q8?consumerGroup=g8&subscriptionMode=timestamp', undef,
	qr/^subscriptionMode timestamp needs a timestamp in subscriptionFrom$/, 'timestamp without a time');
is_400('GET', '/api/v1/pop/queue/q8?consumerGroup=g8&subscriptionMode=newest', undef,
	qr/^subscriptionMode must be all, new, new-only or timestamp$/, 'an unknown mode');
is(sql(q{SELECT count(*) FROM queen.consumer_groups_metadata WHERE consumer_group = 'g8'}), '0',
	'none of them registered the group');
($s) = pop($port, '/api/v1/pop/queue/q8?consumerGroup=g8ok&subscriptionFrom=2026-01-31T08:00:00.5%2B01:00');
is($s, 204, 'an ISO-8601 time with an offset is taken');
is_400('GET', '/api/v1/dlq?queue=q8&from=garbage', undef, qr/^from must be "now" or an ISO-8601/,
	'a dead-letter listing from garbage');
is_400('GET', '/api/v1/dlq?queue=q8&to=today', undef, qr/^to must be "now" or an ISO-8601/,
	'a dead-letter listing to today');
is_400('POST', '/api/v1/ack?consumerGroup=g', '{"transactionId":"t","partitionId":"00000000-0000-0000-0000-000000000001"}',
	qr/^unknown query parameter "consumerGroup": this route reads no query parameters$/, 'an ack with a query string');

# ---- 10. the smaller ones ----------------------------------------------------------
for my $n ('+1', '%201', '1%20', '0x10', '1e2', '')
{
	my ($st, $e) = refused('GET', "/api/v1/pop/queue/q10?batch=$n");
	if ($n eq '')
	{
		is($st, 204, 'an empty batch is the default');
		next;
	}
	is($st, 400, "batch=$n: 400");
	like($e, qr/^batch must be an integer from 1 to 10000$/, "batch=$n: says why");
}
is_400('GET', '/api/v1/pop/queue/q10?batch=10001', undef, qr/^batch must be an integer from 1 to 10000$/,
	'a batch over queen.max_ack_items');
is_400('GET', '/api/v1/pop/queue/q10?leaseSeconds=86401', undef,
	qr/^leaseSeconds must be an integer from 0 to 86400$/, 'a lease over queen.max_lease_seconds');
is_400('GET', '/api/v1/pop/queue/q10?partitions=-1', undef,
	qr/^partitions must be an integer from 0 to/, 'negative partitions');
is_400('POST', '/api/v1/lease/' . ('a' x 37) . '/extend', '{}', qr/^leaseId must be a UUID/,
	'a lease id that is too long names its subject');
is_400('POST', '/api/v1/lease/00000000-0000-0000-0000-000000000001/extend', '{"seconds": 86401}',
	qr/^seconds must be from 1 to 86400 \(queen\.max_lease_seconds\)$/, 'an extension over the cap');
is_400('POST', '/api/v1/lease/00000000-0000-0000-0000-000000000001/extend', '{"seconds": 0}',
	qr/^seconds must be from 1 to 86400/, 'an extension of nothing');

# an upper-case lease id is the same lease for an extension too
push_items($port, { queue => 'q10', partition => 'x', transactionId => 'e1', payload => 1 });
my ($es, $epop) = pop($port, '/api/v1/pop/queue/q10/partition/x?leaseSeconds=30');
my ($xs, $ext) = http_json($port, 'POST', '/api/v1/lease/' . uc($epop->{leaseId}) . '/extend',
	{ seconds => 600 });
is($ext->{renewed}, 1, 'an upper-case lease id is extended');

# partitions=0: every partition with something, up to the batch
push_items($port, map { { queue => 'q10w', partition => "p$_", payload => $_ } } 1 .. 600);
my ($ws, $wpop) = pop($port, '/api/v1/pop/queue/q10w?batch=1000&partitions=0&autoAck=true');
is(scalar @{ $wpop->{messages} }, 600, 'partitions=0 claims all 600 partitions');
is($wpop->{partitionsClaimed}, 600, 'and says so');

# a redelivery after a lease expires is no wider than what was delivered
push_items($port, map { { queue => 'q10r', partition => 'p', transactionId => "r$_", payload => $_ } } 0 .. 1);
my ($rs, $rpop) = pop($port, '/api/v1/pop/queue/q10r/partition/p?batch=2&leaseSeconds=1');
is(scalar @{ $rpop->{messages} }, 2, 'two messages are leased for a second');
push_items($port, { queue => 'q10r', partition => 'p', transactionId => 'r2', payload => 2 });
my $again2;
ok(wait_for(sub {
	my ($st, $res) = pop($port, '/api/v1/pop/queue/q10r/partition/p?batch=10');
	$again2 = $res if $st == 200;
	return $st == 200;
}, 30), 'after the lease expires they are delivered again');
is_deeply([ map { [ $_->{transactionId}, $_->{deliveryAttempt} ] } @{ $again2->{messages} } ],
	[ [ 'r0', 2 ], [ 'r1', 2 ] ], 'the same two, second attempt; the third waits for a first delivery');

is(scalar(log_crashes($node)), 0, 'no worker crashed');
$node->stop;
done_testing();
