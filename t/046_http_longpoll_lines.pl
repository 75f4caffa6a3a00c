# Parked pops wait in lines (src/broker/listener/longpoll.c): a push wakes the head
# of each line, not every parked pop, so the pops a listener sends again per
# push stay a small constant however many are parked
# (queen_long_poll_resends_total); a line is served in the order its pops
# parked, and a delivery sends the next head at once, so a push of many
# messages answers as many pops; no message is delivered twice; discovery
# pops that match no queue are not sent again by pushes to other queues;
# pops whose clients left, or whose timeout came, are answered and counted
# out of queen_parked_long_polls.  No timing is asserted: answers are waited
# for with deadlines far above what they need, and the counts asserted do
# not depend on how fast the machine is.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use QueenHTTP;

my ($node, $port) = start_broker(name => 'lines');
my $N = 200;	# parked pops
my $M = 20;		# pushes, one request each

sub parked { return metric($port, 'queen_parked_long_polls') // -1; }

# Parked pops sent again so far, for the reasons named (all by default).
sub resends
{
	my @reasons = @_ ? @_ : qw(wake due next);
	my $n = 0;
	$n += metric($port, "queen_long_poll_resends_total{reason=\"$_\"}") // 0 for @reasons;
	return $n;
}

# The same per reason, for the diagnostics.
sub resends_by { return join ' ', map { "$_=" . resends($_) } qw(wake due next); }

# $n requests of $path, each parked before the next is sent: the order of
# the returned sockets is the order they parked in.
sub park_in_order
{
	my ($path, $n) = @_;
	my $base = parked();
	my @socks;
	for my $i (1 .. $n)
	{
		push @socks, send_request($port, 'GET', $path);
		last unless wait_for(sub { parked() == $base + $i });
	}
	return @socks;
}

# ---- a push wakes one pop per line, not every parked pop ----------------------
# Every parked pop waits behind a live lease, so none can be delivered: each
# push makes the queue pending and each try it causes answers 204.
push_items($port, { queue => 'ln.held', partition => 'p', payload => 0 });
my ($status, $held) = pop($port, '/api/v1/pop/queue/ln.held?leaseSeconds=3600');
is($status, 200, 'a consumer holds ln.held under a lease of an hour');
my @held = map { send_request($port, 'GET', '/api/v1/pop/queue/ln.held?wait=true&timeout=600000') } 1 .. $N;
ok(wait_for(sub { parked() == $N }), "$N pops park behind the lease");
my $before = resends();
my $wakes = metric($port, 'queen_long_poll_wakes_total{by="push"}');
for my $i (1 .. $M)
{
	push_items($port, { queue => 'ln.held', partition => 'p', payload => $i });
}
ok(metric($port, 'queen_long_poll_wakes_total{by="push"}') >= $wakes + $M, 'every push woke ln.held');
ok(wait_for(sub { parked() == $N }), 'every pop tried is parked again');
my $sent = resends() - $before;
cmp_ok($sent / $M, '<=', 3, "pops sent again per push: $sent for $M pushes with $N parked");
my $wake_resends = resends('wake');

# ---- clients that leave -----------------------------------------------------------
close $_ for @held;
ok(wait_for(sub { parked() == 0 }, 120), 'pops whose clients left are answered and no longer counted');
# behind a head that stays: never probed, they are found by the sweep
my ($head) = park_in_order('/api/v1/pop/queue/ln.held?wait=true&timeout=600000', 1);
my @behind = park_in_order('/api/v1/pop/queue/ln.held?wait=true&timeout=600000', 50);
is(parked(), 51, 'a pop heads a line of 51');
close $_ for @behind;
ok(wait_for(sub { parked() == 1 }, 120), 'the 50 behind it whose clients left are answered');
close $head;
ok(wait_for(sub { parked() == 0 }, 120), 'and the head');

# ---- first in, first served; the next head at once after a delivery -----------------
# Pops of one partition: a queue's wildcard pops may be answered 204 with a
# retry_at while their shard spaces its candidate draws (claim_scan.c), and
# those tries would depend on the machine's speed.
my @fifo = park_in_order('/api/v1/pop/queue/ln.fifo/partition/p?wait=true&timeout=600000&autoAck=true&batch=1', $N);
is(parked(), $N, "$N pops parked one after another");
$before = resends();
my (%delivered, $dups, $in_order);
($dups, $in_order) = (0, 0);
for my $k (0 .. $M - 1)
{
	push_items($port, { queue => 'ln.fifo', partition => 'p', transactionId => "f$k", payload => $k });
	my ($st, $res) = read_response($fifo[$k], 60);
	my $txn = ($st // 0) == 200 ? $res->{messages}[0]{transactionId} // '' : '';
	$dups++ if length $txn && $delivered{$txn}++;
	last unless $txn eq "f$k";	# out of order: the rest would wait in vain
	$in_order++;
}
is($in_order, $M, 'each push answers the pop that parked first among those left');
$sent = resends() - $before;
cmp_ok($sent / $M, '<=', 3, "pops sent again per push: $sent for $M pushes with up to $N parked");

# one request of the rest: each delivery sends the next head, down the line
SKIP:
{
	skip 'the line was not served in order', 6 if $in_order != $M;
	my $rest = $N - $M;
	$before = resends();
	diag('before the push of the rest: ' . resends_by());
	my ($ps) = push_items($port,
		map { { queue => 'ln.fifo', partition => 'p', transactionId => "f$_", payload => $_ } }
		  $M .. $N - 1);
	is($ps, 201, "one push of $rest messages");
	for my $k ($M .. $N - 1)
	{
		my ($st, $res) = read_response($fifo[$k], 60);
		my $txn = ($st // 0) == 200 ? $res->{messages}[0]{transactionId} // '' : '';
		$in_order++ if $txn eq "f$k";
		$dups++ if length $txn && $delivered{$txn}++;
	}
	is($in_order, $N, "all $N parked pops answered 200, in the order they parked");
	is($dups, 0, 'no message delivered twice');
	is(scalar keys %delivered, $N, 'every message delivered');
	$sent = resends() - $before;
	diag('after it: ' . resends_by());
	cmp_ok($sent, '<=', $rest + 3,
		"pops sent again for $rest messages: $sent (one per delivery, and a few)");
}
close $_ for @fifo;
ok(wait_for(sub { parked() == 0 }, 120), 'nothing left parked');

# ---- discovery pops that match no queue ---------------------------------------------
# ln.other exists before they park, so pushes to it change no queue a
# discovery could match
push_items($port, { queue => 'ln.other', payload => 'first' });
my @disc = map { send_request($port, 'GET', '/api/v1/pop?namespace=ln-nomatch&wait=true&timeout=600000') } 1 .. $N;
ok(wait_for(sub { parked() == $N }), "$N discovery pops that match nothing park");
$before = resends('wake');
for my $i (1 .. $M)
{
	push_items($port, { queue => 'ln.other', payload => $i });
}
ok(wait_for(sub { parked() == $N }), 'and stay parked');
is(resends('wake') - $before, 0, 'pushes to other queues send none of them again');
close $_ for @disc;
ok(wait_for(sub { parked() == 0 }, 120), 'their clients leave: none parked');

# a discovery pop that matched nothing is answered once a queue it matches
# appears: created by a push, or given its namespace by a configure
my $sock = send_request($port, 'GET', '/api/v1/pop?namespace=lnnew&wait=true&timeout=600000&autoAck=true');
ok(wait_for(sub { parked() == 1 }), 'a discovery pop of a namespace without queues parks');
push_items($port, { queue => 'lnnew.t', payload => 'created' });
($status, my $res, my $raw) = read_response($sock, 60);
is($status, 200, 'a push that creates a matching queue answers it');
is($res->{messages}[0]{data}, 'created', 'with the message');
$sock = send_request($port, 'GET', '/api/v1/pop?namespace=lncfg&wait=true&timeout=600000&autoAck=true');
ok(wait_for(sub { parked() == 1 }), 'another parks');
my ($cs) = http_json($port, 'POST', '/api/v1/configure', { queue => 'lncfgq', namespace => 'lncfg' });
ok($cs >= 200 && $cs < 300, 'a queue is configured into its namespace');
push_items($port, { queue => 'lncfgq', payload => 'configured' });
($status, $res) = read_response($sock, 60);
is($status, 200, 'and a push to it answers the pop');
is($res->{messages}[0]{data}, 'configured', 'with the message');

# ---- a probe whose shard ends before answering --------------------------------------
# Its client is answered 500 (the outcome is unknown), and its line goes on
# with the next head: the line must not wait for an answer that never comes.
my @lost = park_in_order('/api/v1/pop/queue/ln.fault/partition/p?wait=true&timeout=600000&autoAck=true', 10);
is(scalar @lost, 10, 'ten pops parked on one partition');
set_test_fault($node, 'shard_error_after_pop_commit');
my ($k, $fired_status) = (0, 0);
while ($k < @lost - 1)
{
	push_items($port, { queue => 'ln.fault', partition => 'p', payload => $k });
	my ($st) = read_response($lost[$k++], 60);
	$fired_status = $st // 0;
	last if test_fault_fired($node, 'shard_error_after_pop_commit');
}
set_test_fault($node, '');
is($fired_status, 500, "the probe whose shard ended is answered 500 (pop $k of 10)");
ok(wait_healthy($port, 60), 'the shard is back');
# a head probed while the shard was coming back may be answered 500 too
# (what a listener sent to a shard that restarted): the line goes on
push_items($port, { queue => 'ln.fault', partition => 'p', payload => 'after' });
my $restarted = 0;
while ($k < @lost)
{
	($status, $res, $raw) = read_response($lost[$k++], 60);
	last unless ($status // 0) == 500 && $raw =~ /restarted before answering/;
	$restarted++;
}
is($status, 200, "the next pop of the line is answered by the next push ($restarted more answered 500)");
is($res->{messages}[0]{data}, 'after', 'with its message');
close $lost[$_] for $k .. $#lost;
ok(wait_for(sub { parked() == 0 }, 120), 'the rest leave');

# ---- timeouts -------------------------------------------------------------------------
my @short = map { send_request($port, 'GET', "/api/v1/pop/queue/ln.empty$_?wait=true&timeout=" . (300 * $_)) } 1 .. 5;
my @st = map { (read_response($_, 60))[0] // 0 } @short;
is_deeply(\@st, [ (204) x 5 ], 'pops that get nothing are answered 204 at their timeouts');
ok(wait_for(sub { parked() == 0 }), 'none parked at the end');
cmp_ok($wake_resends, '>', 0, 'wakes were counted');
is_deeply([ log_crashes($node) ], [], 'nothing crashed');
$node->stop;
done_testing();
