# An application's open transaction cannot stall a shard (issue 29,
# finding 7).  A SQL session that popped a partition (BEGIN; SELECT
# queen.pop(...)) holds its consumer row until it ends.  An HTTP ack of that
# partition used to wait for it up to the statement timeout (30 s), and
# every push to any partition of the same shard waited behind it; now the
# shard waits queen.consume_lock_timeout (100 ms) and answers the ack 503
# with Retry-After, nothing applied, and pushes go on.  Once the
# application ends, the same ack applies.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use QueenHTTP;

# one shard: the ack and the unrelated push meet in the same process
my ($node, $port) = start_broker(name => 'applock', shards => 1);

# the consumer row exists (committed) before the application takes it
push_items($port, map { { queue => 'app', partition => 'p', transactionId => "m$_", payload => $_ } } 0 .. 1);
$node->safe_psql('postgres',
	q{SELECT a.success FROM queen.pop('app', partition => 'p') m, queen.ack(m.transaction_id, m.partition_id, m.lease_id) a});
my $app = $node->background_psql('postgres');
$app->query_safe('BEGIN');
my $row = $app->query_safe(
	q{SELECT partition_id || ' ' || lease_id FROM queen.pop('app', partition => 'p')});
my ($pid, $lease) = split ' ', $row;
ok($pid && $lease, 'the application popped the partition and keeps its transaction open');

my $timeouts0 = metric($port, 'queen_consume_lock_timeouts_total') // 0;
my $t0 = time;
my ($s, $body, $headers) = http_request($port, 'POST', '/api/v1/ack',
	qq({"transactionId":"m1","partitionId":"$pid","leaseId":"$lease"}));
my $took = time - $t0;
is($s, 503, 'an HTTP ack of that partition is answered 503');
like($body, qr/ack not applied: a row it needs is locked by another transaction.*retry/,
	'saying why and to retry');
is($headers->{'retry-after'}, '1', 'with Retry-After');
cmp_ok($took, '<', 15, sprintf('long before the 30 s statement timeout (%.1f s)', $took));
is(metric($port, 'queen_consume_lock_timeouts_total'), $timeouts0 + 1, 'counted');

# a push to another queue, in the same (only) shard, goes through meanwhile
$t0 = time;
my ($ps, $pres) = push_items($port, { queue => 'other', partition => 'x', payload => 2 });
$took = time - $t0;
is($ps, 201, 'a push to another queue of the same shard is stored');
is($pres->[0]{status}, 'queued', 'queued');
cmp_ok($took, '<', 15, sprintf('without waiting for the application (%.1f s)', $took));

# the lease is still the application's: nothing of the refused ack was applied
is($node->safe_psql('postgres',
	"SELECT committed FROM queen.log_consumers WHERE partition_id = '$pid'"), '0',
	'the cursor did not move');

# the application ends; the same ack, sent again, applies
$app->query_safe('COMMIT');
$app->quit;
my ($s2, $r2) = http_json($port, 'POST', '/api/v1/ack',
	{ transactionId => 'm1', partitionId => $pid, leaseId => $lease });
is($s2, 200, 'sent again once the application committed');
ok($r2->[0]{success} && !$r2->[0]{noop}, 'the ack is applied');
my ($s3, $r3) = http_json($port, 'POST', '/api/v1/ack',
	{ transactionId => 'm1', partitionId => $pid, leaseId => $lease });
ok($r3->[0]{success} && $r3->[0]{noop}, 'and a third time answers noop');

is(scalar(log_crashes($node)), 0, 'no worker crashed');
$node->stop;
done_testing();
