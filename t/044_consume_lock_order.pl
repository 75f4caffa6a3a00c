# The global lock order of a shard's shared consumption transaction.  Acks
# queued in one shard share a transaction, and that transaction locks every
# consumer row they will lock before the first of them runs, in ascending
# (partition id, group), whatever order the requests arrived in.  Taken in
# request order instead, two acks could hold one row and wait for another
# that a second transaction (another shard, or an application's own ack in
# SQL) holds while it waits for the first: a deadlock, which PostgreSQL
# breaks only after deadlock_timeout, failing the shared transaction so that
# its requests run again one by one.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use QueenHTTP;

# One shard and one listener: every request goes to the same process, in the
# order it was sent.
my ($node, $port) = start_broker(name => 'lockorder', shards => 1,
	extra => "queen.http_workers = 1\n");

push_items($port, map { { queue => 'lo', partition => "o$_", transactionId => "t$_", payload => $_ } } 1 .. 2);
my @leased;
for my $p ('o1', 'o2')
{
	my ($s, $r) = pop($port, "/api/v1/pop/queue/lo/partition/$p?leaseSeconds=300");
	is($s, 200, "partition $p is leased");
	push @leased, $r;
}
# uuids order as their lower-case text does
my ($low, $high) = sort { $a->{partitionId} cmp $b->{partitionId} } @leased;

sub ack_body
{
	my ($r) = @_;
	return { transactionId => $r->{messages}[0]{transactionId}, partitionId => $r->{partitionId},
		leaseId => $r->{leaseId} };
}

sub shard_waits_for
{
	my ($pid) = @_;
	return $node->safe_psql('postgres', qq{
		SELECT count(*) FROM pg_stat_activity
		 WHERE backend_type = 'queen shard' AND $pid = ANY (pg_blocking_pids(pid))});
}

# An application's transaction holds the lower partition's consumer row.
my $app = $node->background_psql('postgres');
$app->query_safe('BEGIN');
my $app_pid = $app->query_safe('SELECT pg_backend_pid()');
$app->query_safe(qq{
	SELECT 1 FROM queen.log_consumers WHERE partition_id = '$low->{partitionId}' FOR UPDATE});

# A push held on a partition row keeps the shard busy while the acks queue up
# behind it: first the higher partition's, then the lower's.
my $gate = hold_partition_lock($node, 'lo', 'o1');
my $gated = send_request($port, 'POST', '/api/v1/push',
	{ items => [ { queue => 'lo', partition => 'o1', payload => 3, transactionId => 't3' } ] });
ok(wait_for(sub { shards_waiting_on_lock($node) >= 1 }, 30), 'a push holds the shard');
my $shared0 = metric($port, 'queen_consume_shared_failures_total');
my $acks0 = metric($port, 'queen_process_ack_requests_total') // 0;
my $ack_high = send_request($port, 'POST', '/api/v1/ack', ack_body($high));
ok(wait_for(sub { metric($port, 'queen_process_ack_requests_total') >= $acks0 + 1 }, 30),
	'the ack of the higher partition is queued');
my $ack_low = send_request($port, 'POST', '/api/v1/ack', ack_body($low));
ok(wait_for(sub { metric($port, 'queen_process_ack_requests_total') >= $acks0 + 2 }, 30),
	'then the ack of the lower one');
$gate->query_safe('COMMIT');
$gate->quit;
is((read_response($gated, 60))[0], 201, 'the held push is answered');

# The shared transaction now waits for the application's row.  Locked in
# request order, it would hold the higher row already, and the application
# taking it next would close a cycle.
ok(wait_for(sub { shard_waits_for($app_pid) >= 1 }, 30),
	"the acks' shared transaction waits for the application's row");
$app->query_safe(qq{
	SELECT 1 FROM queen.log_consumers WHERE partition_id = '$high->{partitionId}' FOR UPDATE});
pass('the application then takes the higher row without a deadlock');
$app->query_safe('COMMIT');
$app->quit;

my ($sh, $rh) = read_response($ack_high, 60);
my ($sl, $rl) = read_response($ack_low, 60);
is_deeply([ $sh, $sl ], [ 200, 200 ], 'both acks are answered');
ok($rh->[0]{success} && $rl->[0]{success}, 'and applied')
  or diag explain [ $rh, $rl ];
is(metric($port, 'queen_consume_shared_failures_total'), $shared0,
	'their shared transaction never failed: nothing ran twice');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM queen.log_consumers WHERE worker_id IS NOT NULL}), '0',
	'no lease is left');

$node->stop;
done_testing();
