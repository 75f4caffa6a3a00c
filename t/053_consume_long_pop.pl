# A pop that runs longer than its lease never hands out an expired lease
# (issue 29, finding 2).  300,000 messages in one partition, one pop of all
# of them under a 2 s lease, and a second consumer polling the partition
# 0.1 s later: the big pop used to be answered 5 s in, under a lease that had
# expired 3 s before, while the second consumer already held the same
# messages.  Now the lease is stamped when the messages were read and stamped
# again just before the pop's COMMIT (queen_pop_restamp), so it runs from
# the moment the answer leaves: the second consumer gets the first message
# only after the big pop's answer has arrived.  The limits are raised here
# so that one pop may carry it all (queen.max_ack_items, queen.pop_max_bytes);
# by default such a pop is refused, or stopped at 16 MB.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use POSIX ();
use Time::HiRes qw(time sleep);
use QueenHTTP;

my ($node, $port) = start_broker(name => 'longpop', shards => 2,
	extra => "queen.max_ack_items = 300000\nqueen.pop_max_bytes = '255MB'\n");

my $n = 300_000;
my $pad = 'p' x 100;
for (my $i = 0; $i < $n; $i += 10_000)
{
	my ($s) = push_items($port, map { { queue => 'lp', partition => 'p', transactionId => "s$_",
										payload => { n => $_, pad => $pad } } } $i .. $i + 9_999);
	die "push failed: $s" unless $s == 201;
}
is($node->safe_psql('postgres', q{SELECT max(end_offset) FROM queen.log_segments}), $n - 1,
	"$n messages are stored");
my $restamped0 = metric($port, 'queen_pop_leases_restamped_total') // 0;

my $t0 = time;
my $big = send_request($port, 'GET', "/api/v1/pop/queue/lp/partition/p?batch=$n&leaseSeconds=2");

# A child reads the big answer as fast as it comes and notes when it ended;
# the second consumer polls meanwhile.
my $answer_file = "${PostgreSQL::Test::Utils::tmp_check}/big_answer";
my $child = fork;
die "fork: $!" unless defined $child;
if ($child == 0)
{
	my $buf = '';
	while (sysread($big, my $chunk, 1 << 22))
	{
		$buf .= $chunk;
	}
	my $done = time;
	open(my $fh, '>', $answer_file) or die;
	print $fh sprintf("%.6f\n", $done), $buf;
	close $fh;
	POSIX::_exit(0);
}
close $big;
sleep 0.1;
my ($second_at, $second_txn);
my $deadline = time + 120;
while (time < $deadline && !defined $second_at)
{
	my ($s, $raw) = http_request($port, 'GET', '/api/v1/pop/queue/lp/partition/p?batch=1&leaseSeconds=60');
	if ($s == 200)
	{
		$second_at = time;
		($second_txn) = $raw =~ /"transactionId":"([^"]*)"/;
	}
}
waitpid($child, 0);
my ($big_done, $buf) = slurp_file($answer_file) =~ /^(\S+)\n(.*)$/s;
ok(defined $big_done, sprintf('the big pop is answered (%.2f s)', ($big_done // 0) - $t0));
ok(defined $second_at, sprintf('the second consumer gets a message (%.2f s)', ($second_at // 0) - $t0));
my ($status) = $buf =~ m{^HTTP/1\.1 (\d+)};
is($status, 200, 'the big pop delivered');
my $delivered = () = $buf =~ /"transactionId":"s\d+"/g;
is($delivered, $n, "all $n messages, in one answer");
is($second_txn, 's0', 'the second consumer gets the first message again: the big lease expired');
cmp_ok($second_at // 0, '>', $big_done // 1e12,
	'but only after the big pop was answered: no two consumers held it at once');
cmp_ok(metric($port, 'queen_pop_leases_restamped_total'), '>', $restamped0,
	'the big pop\'s lease was stamped again before its COMMIT');

is(scalar(log_crashes($node)), 0, 'no worker crashed');
$node->stop;
done_testing();
