# What a pop in flight comes to when its shard fails (queen.test_fault, test
# only): a pop whose transaction fails after its claim is answered 500 and
# took no lease (the messages are delivered at once, first attempt); a shard
# that ends between a pop's COMMIT and its answer leaves the client a 500
# that says the outcome is unknown, and the lease it committed expires and
# redelivers the messages (second attempt).
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

$node->stop;
done_testing();
