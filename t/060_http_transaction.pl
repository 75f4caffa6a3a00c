# POST /api/v1/transaction: pushes and acks in one transaction, all or
# nothing.  Queen's answer shape; a push and an ack together; every way an
# ack can fail (unknown transactionId, a lease that is not the live one, a
# lease run out, a message already acknowledged) and a pushed
# transactionId already stored each roll the whole request back with
# nothing written; two transactions acking the same message; first-wins
# duplicates inside one request; 1,000 pushes and 100 acks over 50
# partitions; the 400s and 413s of bad bodies; the metrics.
use strict;
use warnings;

use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use QueenHTTP;

my ($node, $port) = start_broker(name => 'txn', extra => "restart_after_crash = on\n");

sub txn
{
	my ($body) = @_;
	return http_json($port, 'POST', '/api/v1/transaction', $body);
}

# messages of a queue (and partition), in offset order, as SQL reads them
sub stored
{
	my ($queue, $partition) = @_;
	return $node->safe_psql('postgres',
		"SELECT coalesce(string_agg(transaction_id, ',' ORDER BY log_offset), '') FROM queen.read('$queue', '$partition')");
}

# the consumer cursor of a partition (queue mode), -1 when none
sub cursor
{
	my ($pid) = @_;
	return $node->safe_psql('postgres',
		"SELECT coalesce(max(committed), -1) FROM queen.log_consumers WHERE partition_id = '$pid'");
}

# ---- a push and an ack in one transaction ----------------------------------
push_items($port, map { { queue => 'in', partition => 'p', transactionId => "in-$_", payload => { n => $_ } } } 1 .. 4);
my ($s, $pop) = pop($port, '/api/v1/pop/queue/in/partition/p?batch=1');
is($s, 200, 'popped the first input');
my $msg = $pop->{messages}[0];
my ($status, $res) = txn({
	operations => [
		{ type => 'ack', transactionId => $msg->{transactionId}, partitionId => $msg->{partitionId}, status => 'completed' },
		{ type => 'push', items => [ { queue => 'out', partition => 'p', payload => { from => 1 }, transactionId => 'out-1' } ] },
	],
	requiredLeases => [ $pop->{leaseId} ] });
is($status, 200, 'a transaction answers 200');
ok($res->{success}, 'and succeeds');
like($res->{transactionId}, qr/^[0-9a-f-]{36}$/, 'it names its own transactionId');
is_deeply([ map { $_->{type} } @{ $res->{results} } ], [ 'ack', 'push' ], 'one result per operation, in order');
is_deeply([ sort keys %{ $res->{results}[1] } ],
	[ sort qw(index type success transactionId messageId queueName) ], "a push's result has Queen's keys");
is($res->{results}[1]{transactionId}, 'out-1', 'the pushed item keeps its transactionId');
is(stored('out', 'p'), 'out-1', 'the pushed message is stored');
($s, my $out) = pop($port, '/api/v1/pop/queue/out/partition/p');
is($out->{messages}[0]{id}, $res->{results}[1]{messageId}, 'and poppable with the id the answer gave');
($s, my $next) = pop($port, '/api/v1/pop/queue/in/partition/p?batch=1');
is($next->{messages}[0]{transactionId}, 'in-2', 'the acknowledged input is gone: the next pop gets the next one');

# ---- every failing ack rolls the pushes back -------------------------------
push_items($port, map { { queue => 'in', partition => 'f', transactionId => "f-$_", payload => $_ } } 1 .. 2);
($s, my $held) = pop($port, '/api/v1/pop/queue/in/partition/f?batch=1');
my $pid = $held->{partitionId};
my $lease = $held->{leaseId};
my $before = cursor($pid);
my %bad = (
	'an unknown transactionId' => { transactionId => 'never-pushed', partitionId => $pid, leaseId => $lease },
	'a lease that is not the live one' => { transactionId => 'f-1', partitionId => $pid, leaseId => '01a24000-0000-7000-8000-000000000000' },
	'an input already acknowledged' => { transactionId => 'in-1', partitionId => $msg->{partitionId} },
);
my $k = 0;
for my $why (sort keys %bad)
{
	$k++;
	($status, $res) = txn({ operations => [
		{ type => 'push', queue => 'out', partition => 'p', payload => { bad => $k }, transactionId => "bad-$k" },
		{ type => 'ack', %{ $bad{$why} } } ] });
	is($status, 200, "$why: 200");
	ok(!$res->{success}, "$why: success false");
	is($res->{reason}, 'ack_failed', "$why: the reason is the ack");
	like($res->{error}, qr/rolled back/, "$why: the error says it was rolled back");
	is_deeply($res->{results}, [], "$why: no results");
	is(stored('out', 'p'), 'out-1', "$why: the push was not stored");
}
is(cursor($pid), $before, 'no failed transaction moved the cursor');

# a lease that ran out
push_items($port, { queue => 'in', partition => 'e', transactionId => 'e-1', payload => 1 });
($s, my $short) = pop($port, '/api/v1/pop/queue/in/partition/e?batch=1&leaseSeconds=1');
is($s, 200, 'popped under a one-second lease');
my $deadline = time + 1.5;
usleep(50_000) while time < $deadline;
($status, $res) = txn({ operations => [
	{ type => 'ack', transactionId => 'e-1', partitionId => $short->{partitionId}, leaseId => $short->{leaseId} },
	{ type => 'push', queue => 'out', partition => 'p', payload => {}, transactionId => 'late' } ] });
ok(!$res->{success}, 'an ack under a lease that has run out fails the transaction');
is(stored('out', 'p'), 'out-1', 'and its push is not stored');

# a pushed transactionId already stored
($status, $res) = txn({ operations => [
	{ type => 'ack', transactionId => 'f-1', partitionId => $pid, leaseId => $lease },
	{ type => 'push', queue => 'out', partition => 'p', payload => {}, transactionId => 'out-1' } ] });
is($status, 200, 'a stored duplicate: 200');
ok(!$res->{success}, 'success false');
is($res->{reason}, 'duplicate', 'the reason is the duplicate');
like($res->{error}, qr/out-1.*already stored/, 'the error names the transactionId');
is(cursor($pid), $before, 'the ack beside it was not applied');

# ---- two transactions acking the same message: one wins --------------------
($status, $res) = txn({ operations => [
	{ type => 'ack', transactionId => 'f-1', partitionId => $pid, leaseId => $lease },
	{ type => 'push', queue => 'out', partition => 'w', payload => 1, transactionId => 'winner-a' } ] });
ok($res->{success}, 'the first transaction acking a message wins');
($status, $res) = txn({ operations => [
	{ type => 'ack', transactionId => 'f-1', partitionId => $pid, leaseId => $lease },
	{ type => 'push', queue => 'out', partition => 'w', payload => 2, transactionId => 'winner-b' } ] });
ok(!$res->{success}, 'the second transaction acking the same message fails');
like($res->{error}, qr/already acknowledged|lease/, 'and is told why');
is(stored('out', 'w'), 'winner-a', 'only the winner pushed');

# ---- duplicates inside one request: first wins, no rollback ----------------
($status, $res) = txn({ operations => [
	{ type => 'push', items => [
		{ queue => 'out', partition => 'd', payload => 1, transactionId => 'same' },
		{ queue => 'out', partition => 'd', payload => 2, transactionId => 'same' },
		{ queue => 'out', partition => 'd', payload => 3 } ] } ] });
ok($res->{success}, 'a request that repeats a transactionId succeeds');
ok($res->{results}[1]{duplicate}, 'the repeat is a duplicate');
is($res->{results}[1]{messageId}, $res->{results}[0]{messageId}, 'that names the first');
is(scalar(split /,/, stored('out', 'd')), 2, 'two messages stored');

# ---- a large one: 1,000 pushes, 100 acks, 50 partitions ---------------------
push_items($port, map { { queue => 'big.in', partition => 'p' . ($_ % 50), transactionId => "bi-$_", payload => $_ } } 1 .. 100);
my @acks;
my @leases;
for my $p (0 .. 49)
{
	my ($ps, $pp) = pop($port, "/api/v1/pop/queue/big.in/partition/p$p?batch=10");
	push @leases, $pp->{leaseId};
	push @acks, map { { type => 'ack', transactionId => $_->{transactionId}, partitionId => $_->{partitionId} } } @{ $pp->{messages} };
}
is(scalar @acks, 100, 'popped 100 inputs over 50 partitions');
($status, $res) = txn({ operations => [ @acks,
	{ type => 'push', items => [ map { { queue => 'big.out', partition => 'p' . ($_ % 50), payload => { n => $_ } } } 1 .. 1000 ] } ],
	requiredLeases => \@leases });
ok($res->{success}, '1,000 pushes and 100 acks commit together') or diag explain $res;
is(scalar @{ $res->{results} }, 1100, 'with 1,100 results');
my $total = 0;
$total += scalar(split /,/, stored('big.out', "p$_")) for 0 .. 49;
is($total, 1000, 'every pushed message is stored');
($s) = pop($port, '/api/v1/pop/queue/big.in?batch=10');
is($s, 204, 'and every input is acknowledged');

# ---- several requiredLeases: each ack acts under the one its partition holds ---------
push_items($port, map { { queue => 'rl.in', partition => "r$_", transactionId => "rl-$_", payload => $_ } } 1 .. 3);
my %rl;
for my $p (1 .. 3)
{
	my ($ps, $pp) = pop($port, "/api/v1/pop/queue/rl.in/partition/r$p?batch=1");
	$rl{$p} = $pp;
}
($status, $res) = txn({ operations => [
	(map { { type => 'ack', transactionId => "rl-$_", partitionId => $rl{$_}{partitionId} } } 1 .. 2),
	{ type => 'push', queue => 'rl.out', partition => 'ok', payload => 1, transactionId => 'rl-ok' } ],
	requiredLeases => [ $rl{1}{leaseId}, $rl{2}{leaseId} ] });
ok($res->{success}, 'acks without a leaseId, under two requiredLeases: each under its own') or diag explain $res;
# r3's lease runs out and another consumer takes the message: the first one's
# transaction names its lease among others, and is refused
$node->safe_psql('postgres', "UPDATE queen.log_consumers SET lease_expires_at = now() - interval '1 second'"
	. " WHERE partition_id = '$rl{3}{partitionId}'");
my ($ts, $taker) = pop($port, '/api/v1/pop/queue/rl.in/partition/r3?batch=1');
is($taker->{messages}[0]{transactionId}, 'rl-3', 'another consumer took r3 over');
($status, $res) = txn({ operations => [
	{ type => 'ack', transactionId => 'rl-3', partitionId => $rl{3}{partitionId} },
	{ type => 'push', queue => 'rl.out', partition => 'late', payload => 1, transactionId => 'rl-late' } ],
	requiredLeases => [ $rl{1}{leaseId}, $rl{3}{leaseId} ] });
ok(!$res->{success}, 'an ack whose partition is leased under none of requiredLeases fails the transaction');
is($res->{reason}, 'ack_failed', 'as ack_failed');
like($res->{error}, qr/not leased under any of requiredLeases/, 'saying why');
is(stored('rl.out', 'late'), '', 'its push rolled back');
($status, $res) = txn({ operations => [ { type => 'ack', transactionId => 'rl-3', partitionId => $rl{3}{partitionId} } ],
	requiredLeases => [ $rl{1}{leaseId}, $taker->{leaseId} ] });
ok($res->{success}, 'the consumer holding it acks it under its lease among others');

# the last "operations" wins whole, as jsonb keeps the last of duplicate keys
($status, $res, my $rawdup) = txn('{"operations":[{"type":"push","queue":"dup.ops","partition":"a","payload":1}],'
	. '"operations":[{"type":"push","queue":"dup.ops","partition":"b","payload":2}]}');
ok($res->{success} && scalar @{ $res->{results} } == 1, 'two operations arrays: only the last one runs') or diag $rawdup;
is(stored('dup.ops', 'a'), '', 'nothing of the first');

# ---- bad bodies -----------------------------------------------------------------
my %refused = (
	'not JSON' => '{"operations": [',
	'no operations' => '{}',
	'empty operations' => '{"operations": []}',
	'an unknown type' => '{"operations": [{"type": "dance"}]}',
	'a push without payload' => '{"operations": [{"type": "push", "queue": "out"}]}',
	'an item without queue' => '{"operations": [{"type": "push", "items": [{"payload": 1}]}]}',
	'an ack without partitionId' => '{"operations": [{"type": "ack", "transactionId": "x"}]}',
	'a lease that is not a UUID' => '{"operations": [{"type": "push", "queue": "out", "payload": 1}], "requiredLeases": ["nope"]}',
);
for my $why (sort keys %refused)
{
	($status, $res, my $raw) = txn($refused{$why});
	is($status, 400, "$why: 400") or diag $raw;
	ok(defined $res && defined $res->{error}, "$why: says why");
}
is(stored('out', 'Default'), '', 'nothing of a refused request was stored');

($status, $res) = txn({ operations => [ map { { type => 'push', queue => 'out', payload => $_ } } 1 .. 10001 ] });
is($status, 413, 'more pushed items than queen.max_push_items: 413');

# ---- maintenance mode: pushes wait in the spool, a transaction cannot --------------
set_maintenance($port, 1);
($status, $res) = txn({ operations => [ { type => 'push', queue => 'out', partition => 'm', payload => 1 } ] });
is($status, 503, 'in maintenance mode a transaction is 503');
like($res->{error}, qr/maintenance mode/, 'and says why');
set_maintenance($port, 0);
is(stored('out', 'm'), '', 'and nothing of it was stored');
push_items($port, { queue => 'mm.in', partition => 'm', transactionId => 'mm-1', payload => 1 });
my ($ms, $mpop) = pop($port, '/api/v1/pop/queue/mm.in/partition/m?batch=1');
set_maintenance($port, 1);
($status, $res) = txn({ operations => [ { type => 'ack', transactionId => 'mm-1', partitionId => $mpop->{partitionId} } ],
	requiredLeases => [ $mpop->{leaseId} ] });
ok($status == 200 && $res->{success}, 'a transaction of acks alone runs in maintenance mode') or diag explain $res;
set_maintenance($port, 0);

# ---- metrics -------------------------------------------------------------------
ok(metric($port, 'queen_transactions_total{result="committed"}') >= 4, 'committed transactions are counted');
ok(metric($port, 'queen_transactions_total{result="ack_failed"}') >= 5, 'so are failed acks');
is(metric($port, 'queen_transactions_total{result="duplicate"}'), 1, 'and stored duplicates');

is(scalar(log_crashes($node)), 0, 'no worker crashed');

# ---- the shard killed in the middle: never told success, nothing written ----
set_test_fault($node, 'shard_kill_in_transaction');
my ($killed, $kstatus, $kres);
for my $try (1 .. 200)
{
	push_items($port, { queue => 'kill.in', partition => "k$try", transactionId => "ki-$try", payload => $try });
	my ($ps, $pp) = pop($port, "/api/v1/pop/queue/kill.in/partition/k$try?leaseSeconds=3");
	($kstatus, $kres) = txn({ operations => [
		{ type => 'ack', transactionId => "ki-$try", partitionId => $pp->{partitionId}, leaseId => $pp->{leaseId} },
		{ type => 'push', queue => 'kill.out', partition => "k$try", payload => $try, transactionId => "ko-$try" } ] });
	if (test_fault_fired($node, 'shard_kill_in_transaction'))
	{
		$killed = $try;
		last;
	}
	usleep(50_000);
}
ok(defined $killed, 'the shard was killed inside a transaction');
ok(!($kstatus == 200 && $kres && $kres->{success}), 'its client was not told success')
  or diag explain $kres;
ok(wait_healthy($port, 60), 'the broker serves again after the restart');
set_test_fault($node, '');
is(stored('kill.out', "k$killed"), '', 'nothing of it was stored');
($s, my $again) = pop($port, "/api/v1/pop/queue/kill.in/partition/k$killed");
my $again_deadline = time + 30;
while ($s != 200 && time < $again_deadline)
{
	usleep(200_000);
	($s, $again) = pop($port, "/api/v1/pop/queue/kill.in/partition/k$killed");
}
is($again->{messages}[0]{transactionId}, "ki-$killed", 'and its input is delivered again (its ack did not happen)');
$node->stop;
done_testing();
