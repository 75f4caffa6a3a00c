# The global lock order of a shard's shared consumption transaction.  Acks
# and lease extensions queued in one shard share a transaction, and that
# transaction locks every consumer row they will lock before the first of
# them runs, in ascending (partition id, group), whatever order the requests
# arrived in.  Taken in
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
# order it was sent.  The application holds rows for seconds here, longer
# than a shard waits for one by default (queen.consume_lock_timeout, t/046):
# the order in which the shard takes them is what is tested, so it waits.
my ($node, $port) = start_broker(name => 'lockorder', shards => 1,
	extra => "queen.http_workers = 1\nqueen.consume_lock_timeout = '60s'\n");

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

# Queue two requests in the shard, first the higher partition's, then the
# lower's, while an application's transaction holds the lower partition's
# consumer row; once they run, the application takes the higher row.
# Locked in request order, the shard would hold the higher row already, and
# the application would close a cycle.  Returns the two answers.
my $seq = 10;
sub race
{
	my ($what, $first, $second) = @_;
	my $app = $node->background_psql('postgres');
	$app->query_safe('BEGIN');
	my $app_pid = $app->query_safe('SELECT pg_backend_pid()');
	$app->query_safe(qq{
		SELECT 1 FROM queen.log_consumers WHERE partition_id = '$low->{partitionId}' FOR UPDATE});

	# a push held on a partition row keeps the shard busy while they queue up
	my $gate = hold_partition_lock($node, 'lo', 'o1');
	$seq++;
	my $gated = send_request($port, 'POST', '/api/v1/push',
		{ items => [ { queue => 'lo', partition => 'o1', payload => $seq, transactionId => "g$seq" } ] });
	ok(wait_for(sub { shards_waiting_on_lock($node) >= 1 }, 30), "$what: a push holds the shard");
	my $shared0 = metric($port, 'queen_consume_shared_failures_total');
	my @socks;
	for my $req ($first, $second)
	{
		my ($metric, $step, $method, $path, $body) = @$req;
		my $before = metric($port, $metric) // 0;
		push @socks, send_request($port, $method, $path, $body);
		ok(wait_for(sub { (metric($port, $metric) // 0) >= $before + $step }, 30),
			"$what: $method $path queued");
	}
	$gate->query_safe('COMMIT');
	$gate->quit;
	is((read_response($gated, 60))[0], 201, "$what: the held push is answered");

	ok(wait_for(sub { shard_waits_for($app_pid) >= 1 }, 30),
		"$what: the shared transaction waits for the application's row");
	$app->query_safe(qq{
		SELECT 1 FROM queen.log_consumers WHERE partition_id = '$high->{partitionId}' FOR UPDATE});
	pass("$what: the application then takes the higher row without a deadlock");
	$app->query_safe('COMMIT');
	$app->quit;

	my @answers = map { [ read_response($_, 60) ] } @socks;
	is_deeply([ map { $_->[0] } @answers ], [ 200, 200 ], "$what: both are answered");
	is(metric($port, 'queen_consume_shared_failures_total'), $shared0,
		"$what: their shared transaction never failed: nothing ran twice");
	return map { $_->[1] } @answers;
}

# (the metric that tells the request reached the listener, and by how much)
my $acks = 'queen_process_ack_requests_total';
my ($rh, $rl) = race('two acks',
	[ $acks, 1, 'POST', '/api/v1/ack', ack_body($high) ],
	[ $acks, 1, 'POST', '/api/v1/ack', ack_body($low) ]);
ok($rh->[0]{success} && $rl->[0]{success}, 'two acks: both applied')
  or diag explain [ $rh, $rl ];
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM queen.log_consumers WHERE worker_id IS NOT NULL}), '0',
	'two acks: no lease is left');

# A lease extension locks the rows of its lease, found by its id: the shared
# transaction takes them in the one order with the acks' rows (the lower
# partition's extension queued after the higher one's ack).
push_items($port, map { { queue => 'lo', partition => "o$_", transactionId => "u$_", payload => $_ } } 1 .. 2);
my %again;
for my $p ('o1', 'o2')
{
	my ($s, $r) = pop($port, "/api/v1/pop/queue/lo/partition/$p?leaseSeconds=300");
	is($s, 200, "partition $p is leased again");
	$again{ $r->{partitionId} } = $r;
}
($low, $high) = map { $again{$_} } sort keys %again;
my ($acked, $renewed) = race('an ack and an extension',
	[ $acks, 1, 'POST', '/api/v1/ack', ack_body($high) ],
	# every request counts, the metrics' own too: one more than the poll's
	[ 'queen_http_requests_total', 2, 'POST', "/api/v1/lease/$low->{leaseId}/extend",
		{ seconds => 600 } ]);
ok($acked->[0]{success}, 'an ack and an extension: the ack is applied')
  or diag explain $acked;
is($renewed->{renewed}, 1, 'an ack and an extension: the lease is extended');

$node->stop;
done_testing();
