# A shard that ends in flight (issue 14, findings 5 and 6a, 6c).  The faults
# are injected with queen.test_fault (test only; shmem.c), which raises an
# ERROR at a named point once: the shard exits 1 and the postmaster starts
# it again, as after a real out-of-memory or a bug.
#
# 5.  An ERROR while the shard holds a push permit: the permit goes back to
#     the pool (queen_push_permits_inflight returns to 0) and capacity is
#     whole; before, every such exit lowered it for good.
# 6a. An ERROR between COMMIT and the answers: the items' fate is unknown to
#     the listener, which spools them and answers "buffered", never
#     "failed"; the drain's replay finds them stored and drops them as
#     duplicates, so each is stored exactly once.  The same for the permit
#     case above, where nothing was committed: they are stored by the drain.
# 6c. While a shard is not serving, a push with a group for it is refused
#     whole with 503 and nothing of it is stored (before: 201 with "failed"
#     items beside "queued" ones).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use QueenHTTP;

my ($node, $port) = start_broker(
	name => 'shardfault',
	shards => 2,
	extra => "queen.push_permits_min = 1\nqueen.push_permits_initial = 2\nqueen.push_permits_max = 2\n");
my $spool = $node->data_dir . '/queen_spool';

sub stored_ids
{
	my ($queue, $txn) = @_;
	return map { $_->[2] } grep { $_->[1] eq $txn } stored_frames($node, $queue);
}

sub set_fault { set_test_fault($node, @_); }
sub fired { return test_fault_fired($node, @_); }

# Push 3 items to one partition per request until the fault fires (the
# reload reaches the shards asynchronously); returns the firing push's
# results and every answer seen.
my $seq = 0;
sub push_until_fired
{
	my ($fault, $queue) = @_;
	my %answered;
	my $firing;
	my $before = fired($fault);
	for (1 .. 200)
	{
		$seq++;
		my ($status, $res) = push_items($port,
			map { { queue => $queue, partition => "p$seq", payload => $_, transactionId => "$queue-$seq-$_" } } 1 .. 3);
		$answered{ $_->{transaction_id} } = [ $_->{status}, $_->{message_id} ] for @{ $res // [] };
		if (fired($fault) > $before)
		{
			$firing = [ $status, $res ];
			last;
		}
		sleep 0.05;
	}
	return ($firing, \%answered);
}

# ---- 5 and 6: an ERROR while holding a permit ------------------------------------
is(metric($port, 'queen_push_permits_inflight'), 0, 'no permit is held at rest');
set_fault('shard_error_holding_permit');
my ($firing, $answered) = push_until_fired('shard_error_holding_permit', 'perm');
ok($firing, 'the fault fired');
is($firing->[0], 201, 'the push whose shard died answers 201');
is_deeply([ map { $_->{status} } @{ $firing->[1] } ], [ ('buffered') x 3 ],
	'its items are buffered (their shard ended before answering), not failed');
ok(wait_for(sub { (metric($port, 'queen_push_permits_inflight') // -1) == 0 }, 30),
	'the permit the shard held is back in the pool');
like(slurp_file($node->logfile), qr/queen shard \d+: returned 1 push permit it held at exit/,
	'the shard returned it at exit');
set_fault('');
ok(wait_healthy($port, 60), 'the shard is back');
for my $i (1 .. 4)
{
	my ($s, $r) = push_items($port, { queue => 'perm', partition => "after$i", payload => $i });
	is($r->[0]{status}, 'queued', "a push after the restart is queued ($i)");
}
is(metric($port, 'queen_push_permits_inflight'), 0, 'and no permit is left held');
ok(wait_for(sub { !spool_files($spool, qr/\.(?:buf|tmp|part)$/) }, 60), 'the spool is drained');
for my $txn (sort keys %$answered)
{
	my ($st, $id) = @{ $answered->{$txn} };
	next unless $st eq 'queued' || $st eq 'buffered';
	is_deeply([ stored_ids('perm', $txn) ], [ $id ], "$txn ($st) is stored exactly once");
}

# ---- 6a: an ERROR between COMMIT and the answers -----------------------------------
my $dropped = metric($port, 'queen_spool_items_dropped_duplicate_total') // 0;
set_fault('shard_error_after_commit');
($firing, $answered) = push_until_fired('shard_error_after_commit', 'commit');
ok($firing, 'the fault fired');
is($firing->[0], 201, 'the push whose shard died after COMMIT answers 201');
is_deeply([ map { $_->{status} } @{ $firing->[1] } ], [ ('buffered') x 3 ],
	'its items are buffered, not failed, though they were committed');
set_fault('');
ok(wait_for(sub { !spool_files($spool, qr/\.(?:buf|tmp|part)$/) }, 60), 'the spool is drained');
ok(wait_for(sub { (metric($port, 'queen_spool_items_dropped_duplicate_total') // 0) >= $dropped + 3 }, 30),
	'the replay found the 3 items stored and dropped them as duplicates');
for my $txn (sort keys %$answered)
{
	my ($st, $id) = @{ $answered->{$txn} };
	is_deeply([ stored_ids('commit', $txn) ], [ $id ], "$txn ($st) is stored exactly once");
}
cmp_ok(metric($port, 'queen_spool_unknown_fate_items_total') // 0, '>=', 6,
	'queen_spool_unknown_fate_items_total counted both spoolings');
ok(wait_healthy($port, 60), 'the shard is back');

# ---- 6c: a shard that is not serving: 503, nothing stored ---------------------------
set_fault('shard_start_wait');
my $pid = $node->safe_psql('postgres',
	q{SELECT pid FROM pg_stat_activity WHERE application_name = 'queen shard' ORDER BY pid LIMIT 1});
ok($pid, "a shard's pid ($pid)");
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
my $down;
ok(wait_for(
		sub {
			for my $s (0, 1)
			{
				my $v = metric($port, qq{queen_shard_ready{shard="$s"}});
				if (defined $v && $v == 0) { $down = $s; return 1; }
			}
			return 0;
		},
		60),
	'one shard is not serving (held in its start by the fault)');
my ($status, $res) = push_items($port,
	map { { queue => 'half', partition => "q$_", payload => $_, transactionId => "h$_" } } 1 .. 20);
is($status, 503, 'a push with a group for the shard that is not serving answers 503');
set_fault('');
ok(wait_healthy($port, 60), 'the shard serves again');
my ($s2, $r2) = push_items($port, { queue => 'half', partition => 'q1', payload => 0, transactionId => 'after' });
is($r2->[0]{status}, 'queued', 'a later push is queued');
is(stored_count($node, 'half'), 1, 'nothing of the refused push was stored');

# ---- a listener's unfinished .part file whose writer is gone is removed --------------
# (it was never acknowledged: a listener answers only after the rename to .buf)
my $dead = 4000000;
$dead++ while process_alive($dead);
my $part = sprintf('%s/queen-%013d-%02d-%d-%06d.part', $spool, 1, 64, $dead, 1);
open(my $fh, '>:raw', $part) or die "open $part: $!";
print $fh 'QSPL-torn';
close $fh;
my $mpid = $node->safe_psql('postgres',
	q{SELECT pid FROM pg_stat_activity WHERE application_name = 'queen maintenance'});
$node->safe_psql('postgres', "SELECT pg_terminate_backend($mpid)");
ok(wait_for(sub { !-e $part }, 60), 'the restarted maintenance worker removes the stale .part file');
is(scalar(log_crashes($node)), 0, 'no worker crashed or exited with a code other than 0 or 1');

$node->stop;
done_testing();
