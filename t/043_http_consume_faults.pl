# What a pop in flight comes to when its shard fails (queen.test_fault, test
# only): a pop whose transaction fails after its claim is answered 500 and
# took no lease (the messages are delivered at once, first attempt); a shard
# that ends between a pop's COMMIT and its answer leaves the client a 500
# that says the outcome is unknown, and the lease it committed expires and
# redelivers the messages (second attempt).  Requests that share a
# shard's transaction: one that fails makes each run again alone; a pop
# behind an ack that waits still gets a live lease.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use QueenHTTP;

my ($node, $port) = start_broker(name => 'consumefault', shards => 2);

sub set_fault { set_test_fault($node, @_); }
sub fired { return test_fault_fired($node, @_); }

# Push one message to its own partition and pop it until the fault fires;
# returns the firing pop's (status, body, partition).
my $seq = 0;
sub pop_until_fired
{
	my ($fault, @query) = @_;
	for (1 .. 200)
	{
		$seq++;
		push_items($port, { queue => 'cf', partition => "p$seq", transactionId => "t$seq", payload => $seq });
		my ($s, $res, $raw) = pop($port, "/api/v1/pop/queue/cf/partition/p$seq?@query");
		return ($s, $raw, "p$seq") if fired($fault);
		sleep 0.05;
	}
	return;
}

# ---- a pop whose transaction fails ----------------------------------------------
set_fault('pop_error_before_commit');
my ($status, $raw, $part) = pop_until_fired('pop_error_before_commit', 'leaseSeconds=300');
is($status, 500, 'a pop whose transaction failed is answered 500');
like($raw, qr/pop failed: .*test_fault/, 'saying the pop failed');
my ($s, $res) = pop($port, "/api/v1/pop/queue/cf/partition/$part");
is($s, 200, 'its lease never existed: the message is delivered at once');
is($res->{messages}[0]{deliveryAttempt}, 1, 'as a first attempt');
set_fault('');

# ---- a shard that ends between a pop's COMMIT and its answer --------------------
set_fault('shard_error_after_pop_commit');
($status, $raw, $part) = pop_until_fired('shard_error_after_pop_commit', 'leaseSeconds=2');
is($status, 500, 'a pop whose shard ended before answering is answered 500');
like($raw, qr/outcome is unknown/, 'saying its outcome is unknown');
set_fault('');
ok(wait_healthy($port, 60), 'the shard is back');
($s, $res) = pop($port, "/api/v1/pop/queue/cf/partition/$part");
my $deadline = time + 60;
while ($s != 200 && time < $deadline)
{
	sleep 0.2;
	($s, $res) = pop($port, "/api/v1/pop/queue/cf/partition/$part");
}
is($s, 200, 'the committed lease expired and the message is delivered again');
is($res->{messages}[0]{deliveryAttempt}, 2, 'as a second attempt');
ok(metric($port, 'queen_lease_expiries_total') >= 1, 'the expiry is counted');

# ---- consumption requests that share a transaction --------------------------------
# Pops queued in one shard run in one transaction; when it fails, each runs
# again alone, so one pop's failure costs the others a second try and never
# their answer, and nothing the failed transaction did is delivered.  A push
# held on a row lock keeps a shard busy while pops of partitions it owns
# queue up.
my $q = 'cfb';
my $home = 0;
my ($blocker) = grep { shard_of($q, $_, 2) == $home } map { "b$_" } 1 .. 100;
my @parts = (grep { shard_of($q, $_, 2) == $home } map { "w$_" } 1 .. 100)[0 .. 7];
push_items($port, { queue => $q, partition => $blocker, payload => 0, transactionId => 'b0' });
($s) = pop($port, "/api/v1/pop/queue/$q/partition/$blocker?autoAck=true");
is($s, 200, 'the blocking partition has a cursor and nothing pending');
push_items($port,
	map { { queue => $q, partition => $parts[$_ % 8], payload => $_, transactionId => "w$_" } } 1 .. 40);

my $locker = hold_partition_lock($node, $q, $blocker);
my $held = send_request($port, 'POST', '/api/v1/push',
	{ items => [ { queue => $q, partition => $blocker, payload => 1, transactionId => 'b1' } ] });
ok(wait_for(sub { shards_waiting_on_lock($node) >= 1 }, 30), "a push holds the queue's shard on a row lock");
my $pops0 = metric($port, 'queen_process_pop_requests_total');
my $shared0 = metric($port, 'queen_consume_shared_failures_total');
set_fault('pop_error_before_commit');
my @socks = map { send_request($port, 'GET', "/api/v1/pop/queue/$q/partition/$_?batch=5&autoAck=true") } @parts;
ok(wait_for(sub { metric($port, 'queen_process_pop_requests_total') >= $pops0 + 8 }, 30),
	'eight pops wait behind it');
$locker->query_safe('COMMIT');
$locker->quit;
my @answers = map { [ read_response($_, 60) ] } @socks;
is((read_response($held, 60))[0], 201, 'the held push is answered once the lock goes');
ok(fired('pop_error_before_commit'), 'a pop of the shared transaction failed');
set_fault('');
is(metric($port, 'queen_consume_shared_failures_total'), $shared0 + 1,
	'the shared transaction failed once');
is_deeply([ sort { $a <=> $b } map { $_->[0] } @answers ], [ (200) x 8 ],
	'every pop was answered 200: each ran again alone');
my %seen;
$seen{$_}++ for map { my $r = $_->[1]; map { $_->{transactionId} } @{ $r->{messages} // [] } } @answers;
for (1 .. 20)
{
	my ($st, $res) = pop($port, "/api/v1/pop/queue/$q?batch=100&partitions=100&autoAck=true");
	last if $st == 204;
	$seen{$_}++ for map { $_->{transactionId} } @{ $res->{messages} };
}
is_deeply(\%seen, { b1 => 1, map { ("w$_" => 1) } 1 .. 40 },
	'every message is delivered once: nothing of the failed transaction was');

# ---- a pop in a shared transaction behind an ack that waits ------------------------
# One shard, so the pop and the ack, sent in that order, share a
# transaction.  The ack waits for a consumer row this session holds for
# longer than the pop's lease (the shard is let wait that long here; by
# default it would give up after queen.consume_lock_timeout, t/046); the
# pop's lease starts again just before the COMMIT, not when the
# transaction began: another consumer that pops the partition at once
# finds it leased.
$node->stop;
($node, $port) = start_broker(name => 'consumefault1', shards => 1,
	extra => "queen.consume_lock_timeout = '60s'\n");
push_items($port, { queue => 'cfs', partition => 'A', transactionId => 'sa', payload => 1 });
my ($sa, $popa) = pop($port, '/api/v1/pop/queue/cfs/partition/A?leaseSeconds=300');
is($sa, 200, 'a consumer holds A under a lease');
push_items($port, { queue => 'cfs', partition => 'B', transactionId => 'sb', payload => 2 });
push_items($port, { queue => 'cfs', partition => 'C', transactionId => 'sc', payload => 3 });

my $rowlock = $node->background_psql('postgres');
$rowlock->query_safe('BEGIN');
$rowlock->query_safe(qq{
	SELECT 1 FROM queen.log_consumers WHERE partition_id = '$popa->{partitionId}' FOR UPDATE});
my $gate = hold_partition_lock($node, 'cfs', 'C');
my $gated = send_request($port, 'POST', '/api/v1/push',
	{ items => [ { queue => 'cfs', partition => 'C', payload => 4, transactionId => 'sc2' } ] });
ok(wait_for(sub { shards_waiting_on_lock($node) >= 1 }, 30), 'a push holds the shard');
my $acks0 = metric($port, 'queen_process_ack_requests_total') // 0;
my $pops1 = metric($port, 'queen_process_pop_requests_total') // 0;
my $popsock = send_request($port, 'GET', '/api/v1/pop/queue/cfs/partition/B?leaseSeconds=4');
ok(wait_for(sub { metric($port, 'queen_process_pop_requests_total') >= $pops1 + 1 }, 30),
	'a pop of B with a 4 s lease waits behind it');
my $acksock = send_request($port, 'POST', '/api/v1/ack',
	{ transactionId => 'sa', partitionId => $popa->{partitionId}, leaseId => $popa->{leaseId} });
ok(wait_for(sub { metric($port, 'queen_process_ack_requests_total') >= $acks0 + 1 }, 30),
	'and then an ack of A');
$gate->query_safe('COMMIT');
$gate->quit;
ok(wait_for(sub { shards_waiting_on_lock($node) >= 1 }, 30),
	'the shared transaction waits for the row the test holds');
sleep 5;	# longer than the pop's lease: that is the point
$rowlock->query_safe('COMMIT');
$rowlock->quit;
my ($ps2, $popb) = read_response($popsock, 60);
is($ps2, 200, 'the pop of B is answered');
my ($st2) = pop($port, '/api/v1/pop/queue/cfs/partition/B');
is($st2, 204, 'and its lease is live when it is answered: another pop finds B leased');
my ($as2, $ackres) = read_response($acksock, 60);
ok($ackres->[0]{success}, 'the ack of A was applied');
is((read_response($gated, 60))[0], 201, 'the held push is answered');

$node->stop;
done_testing();
