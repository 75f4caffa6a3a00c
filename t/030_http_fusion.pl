# What a fusion shard does with what accumulated while it was busy, on one
# shard so that every partition is its: the frames of two requests with the
# same transactionId for one partition, in one flush, store one message and
# answer the second as a duplicate naming the first (layer-2 dedup);
# queen.bundle_max bounds the partitions per transaction; in maintenance
# mode a transactionId repeated in one body is spooled once and drained
# once; queen.fusion_min_frames holds a lone push at most briefly.
#
# "While it was busy" is made deterministic without timing: a session of
# the test holds the row lock of a partition, a push to it stops the
# shard's bundle on that lock (seen in pg_stat_activity), and what the test
# sends meanwhile waits in the ring (the listener has dispatched a request
# once queen_process_push_requests_total counts it) until the lock goes.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use QueenHTTP;

my ($node, $port) = start_broker(
	name => 'fusion',
	shards => 1,
	extra => "queen.bundle_max = 3\nqueen.push_statement_timeout = '10min'\n");

my $push = '/api/v1/push';

sub pushed_requests
{
	return metric($port, 'queen_process_push_requests_total') // 0;
}

# send a push and wait until the listener has handed it to the shard
sub send_dispatched
{
	my (@items) = @_;
	my $before = pushed_requests();
	my $sock = send_request($port, 'POST', $push, { items => \@items });
	wait_for(sub { pushed_requests() > $before }, 60)
	  or die "the listener did not take the push";
	return $sock;
}

# Hold $queue/gate's row lock and stop the shard's next bundle on it.
# Returns the holding session and the socket of the push that waits.
sub stop_shard
{
	my ($queue) = @_;
	my $holder = $node->background_psql('postgres');
	$holder->query_safe('BEGIN');
	$holder->query_safe(qq{
		SELECT 1 FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
		 WHERE q.name = '$queue' AND p.name = 'gate' FOR UPDATE OF p});
	my $gate = send_request($port, 'POST', $push,
		{ items => [ { queue => $queue, partition => 'gate', payload => 'gate' } ] });
	ok(wait_for(sub { shards_waiting_on_lock($node) == 1 }, 60),
		"$queue: the shard's bundle waits for the row the test holds");
	return ($holder, $gate);
}

sub release_shard
{
	my ($holder, $gate) = @_;
	$holder->query_safe('COMMIT');
	$holder->quit;
	my ($s, $r) = read_response($gate, 120);
	is($r->[0]{status}, 'queued', 'the push that waited for the lock is stored');
}

for my $queue (qw(l2 bm))
{
	my ($s, $r) = push_items($port, { queue => $queue, partition => 'gate', payload => 0 });
	is($r->[0]{status}, 'queued', "$queue/gate exists");
}

# ---- layer-2 dedup across requests in one flush ----------------------------------
{
	my ($holder, $gate) = stop_shard('l2');
	my $first = send_dispatched(
		{ queue => 'l2', partition => 'x', payload => { from => 'first' }, transactionId => 'same' });
	my $second = send_dispatched(
		{ queue => 'l2', partition => 'x', payload => { from => 'second' }, transactionId => 'same' });
	release_shard($holder, $gate);

	my ($s1, $r1) = read_response($first, 120);
	my ($s2, $r2) = read_response($second, 120);
	is($s1, 201, 'the first request is answered 201');
	is($s2, 201, 'the second request is answered 201');
	is($r1->[0]{status}, 'queued', 'the first frame of the flush is queued');
	is($r2->[0]{status}, 'duplicate', 'the second, same transactionId and partition, is a duplicate');
	is($r2->[0]{message_id}, $r1->[0]{message_id}, 'naming the first one\'s message id');
	my @x = grep { $_->[0] eq 'x' } stored_frames($node, 'l2');
	is_deeply(\@x, [ [ 'x', 'same', $r1->[0]{message_id} ] ],
		'one message is stored, under the first one\'s id');
}

# ---- queen.bundle_max ------------------------------------------------------------
{
	my ($holder, $gate) = stop_shard('bm');
	my $ten = send_dispatched(
		map { { queue => 'bm', partition => "p$_", payload => $_, transactionId => "bm$_" } } 0 .. 9);
	release_shard($holder, $gate);
	my ($s, $r) = read_response($ten, 120);
	is($s, 201, 'ten partitions in one request are answered 201');
	is_deeply([ map { $_->{status} } @{ $r // [] } ], [ ('queued') x 10 ], 'every item is queued');
	# the ten groups were ready when the lock went, so only the setting splits them
	my @per = segments_per_transaction($node, 'bm', 'p%');
	my $total = 0;
	$total += $_ for @per;
	is($total, 10, 'ten segments were written');
	cmp_ok($per[0], '<=', 3, 'by transactions of at most queen.bundle_max (3) partitions')
	  or diag("partitions per transaction: @per");
	like(slurp_file($node->logfile), qr/config: .* bundle_max=3 /, 'the shard logged bundle_max=3');
}

# ---- maintenance mode with a transactionId repeated in one body -------------------
{
	my $written = metric($port, 'queen_spool_items_written_total') // 0;
	my ($ms) = set_maintenance($port, 1);
	is($ms, 200, 'maintenance mode on');
	my ($s, $r) = push_items(
		$port,
		{ queue => 'mt', partition => 'p', payload => 1, transactionId => 'T' },
		{ queue => 'mt', partition => 'p', payload => 2, transactionId => 'T' },
		{ queue => 'mt', partition => 'q', payload => 3, transactionId => 'T' });
	is($s, 201, 'a body repeating a transactionId is answered 201 in maintenance mode');
	is_deeply([ map { $_->{status} } @{ $r // [] } ], [qw(buffered duplicate buffered)],
		'the first is buffered, the repeat in the same partition a duplicate, the other partition buffered');
	is($r->[1]{message_id}, $r->[0]{message_id}, 'the duplicate names the buffered item\'s id');
	isnt($r->[2]{message_id}, $r->[0]{message_id}, 'the other partition\'s item has its own id');
	is((metric($port, 'queen_spool_items_written_total') // 0) - $written, 2,
		'two items went to the spool, not three');

	($ms) = set_maintenance($port, 0);
	is($ms, 200, 'maintenance mode off');
	ok(wait_for(sub { scalar(stored_frames($node, 'mt')) >= 2 && !spool_files(
					$node->data_dir . '/queen_spool', qr/\.buf$/) }, 60),
		'the drain stored the spooled items and finished the file');
	is_deeply([ stored_frames($node, 'mt') ],
		[ [ 'p', 'T', $r->[0]{message_id} ], [ 'q', 'T', $r->[2]{message_id} ] ],
		'each partition holds T once, under the id answered buffered');
}

# ---- queen.fusion_min_frames --------------------------------------------------------
# The floor holds a shard's ready groups until one has that many frames or
# has waited 2 ms (src/broker/shard/shard.c); a lone push never reaches a floor of a
# million, so only the 2 ms bound lets it through.  The hold itself is
# too short to assert without timing it.
{
	$node->append_conf('postgresql.conf', "queen.fusion_min_frames = 1000000\n");
	$node->reload;
	ok( wait_for(
			sub { slurp_file($node->logfile) =~ /shard \(reloaded\): config: .* fusion_min_frames=1000000 / },
			60),
		'the shard applied fusion_min_frames = 1000000');
	my ($s, $r) = push_items($port, { queue => 'mf', partition => 'p', payload => 1, transactionId => 'mf1' });
	is($r->[0]{status}, 'queued', 'a lone push under the floor is committed');
	($s, $r) = push_items($port,
		map { { queue => 'mf', partition => "w$_", payload => $_ } } 1 .. 5);
	is_deeply([ map { $_->{status} } @{ $r // [] } ], [ ('queued') x 5 ],
		'five groups of one frame each, all under the floor, are committed');
	is(scalar(stored_frames($node, 'mf')), 6, 'all six are stored');
}

is(gapless($node, $_), '0', "$_: offsets are gapless") for qw(l2 bm mt mf);
is_deeply([ log_crashes($node) ], [], 'no worker crashed');

$node->stop;
done_testing();
