# The push permit pool under contention: with one permit for two shards, a
# shard whose bundle holds it stops the other from committing (its groups
# wait, the request is not answered), and once the permit comes back the
# waiting shard commits what it gathered, answered and stored exactly once.
# Then a concurrent load over both shards with the single permit.
#
# The order is shown without timing: shard A's bundle is stopped on a row
# lock the test holds (so it keeps its permit), a push for shard B is
# dispatched, and then control requests (/health) go round-robin to the
# shards: one of every two reaches B, which answers it from the same loop
# that tries for a permit.  After B has answered two of them, it has had
# the push and tried for a permit at least once since.
use strict;
use warnings;

use IO::Select;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use QueenHTTP;

my ($node, $port) = start_broker(
	name => 'permits',
	shards => 2,
	extra => "queen.push_permits_min = 1\nqueen.push_permits_initial = 1\n"
	  . "queen.push_permits_max = 1\nqueen.push_statement_timeout = '10min'\n");

# a partition of each shard
my ($pa) = grep { shard_of('perm', $_, 2) == 0 } map { "p$_" } 0 .. 99;
my ($pb) = grep { shard_of('perm', $_, 2) == 1 } map { "p$_" } 0 .. 99;

sub stored_in
{
	my ($part) = @_;
	return [ grep { $_->[0] eq $part } stored_frames($node, 'perm') ];
}

my ($s, $r) = push_items($port,
	{ queue => 'perm', partition => $pa, payload => 0, transactionId => 'a0' },
	{ queue => 'perm', partition => $pb, payload => 0, transactionId => 'b0' });
is_deeply([ map { $_->{status} } @{ $r // [] } ], [qw(queued queued)],
	"$pa (shard 0) and $pb (shard 1) exist");
is(metric($port, 'queen_push_permits_limit'), 1, 'the pool has one permit');

# ---- shard 0 holds the only permit ---------------------------------------------
my $holder = hold_partition_lock($node, 'perm', $pa);
my $held = send_request($port, 'POST', '/api/v1/push',
	{ items => [ { queue => 'perm', partition => $pa, payload => 1, transactionId => 'a1' } ] });
ok(wait_for(sub { shards_waiting_on_lock($node) == 1 }, 60),
	"shard 0's bundle waits for the row the test holds");
is(metric($port, 'queen_push_permits_inflight'), 1, 'and holds the permit');

my $requests = metric($port, 'queen_process_push_requests_total');
my $waiting = send_request($port, 'POST', '/api/v1/push',
	{ items => [ { queue => 'perm', partition => $pb, payload => 1, transactionId => 'b1' } ] });
ok(wait_for(sub { metric($port, 'queen_process_push_requests_total') > $requests }, 60),
	"the push for $pb is dispatched to shard 1");

my @stuck;
for my $round (1, 2)
{
	my @pair = map { send_request($port, 'GET', '/health') } 1, 2;
	my ($first) = IO::Select->new(@pair)->can_read(60);
	ok($first, "round $round: one of two /health requests is answered (by shard 1)");
	my ($hs) = $first ? read_response($first, 60) : ();
	is($hs, 200, "round $round: it is 200");
	push @stuck, grep { !$first || $_ != $first } @pair;
}
is_deeply(stored_in($pb), [ [ $pb, 'b0', $r->[1]{message_id} ] ],
	"without a permit shard 1 has not committed the push for $pb");
ok(!IO::Select->new($waiting)->can_read(0), 'and its request is not answered');

# ---- the permit comes back -----------------------------------------------------
$holder->query_safe('COMMIT');
$holder->quit;
my ($hs, $hr) = read_response($held, 120);
is($hr->[0]{status}, 'queued', "the push that held the permit is stored");
my ($ws, $wr) = read_response($waiting, 120);
is($ws, 201, 'the waiting push is answered 201 once the permit is released');
is($wr->[0]{status}, 'queued', 'queued');
is_deeply(stored_in($pb),
	[ [ $pb, 'b0', $r->[1]{message_id} ], [ $pb, 'b1', $wr->[0]{message_id} ] ],
	'stored once, under the id it was answered with');
for my $sock (@stuck)
{
	my ($cs) = read_response($sock, 120);
	is($cs, 200, "shard 0's /health is answered after its bundle");
}
ok(wait_for(sub { (metric($port, 'queen_push_permits_inflight') // -1) == 0 }, 60),
	'no permit is left in flight');

# ---- a load over both shards with one permit ----------------------------------------
SKIP:
{
	skip 'QUEEN_LOAD (bench/queen-load) not given', 6 unless $ENV{QUEEN_LOAD};
	my $results = PostgreSQL::Test::Utils::tempdir . '/load.tsv';
	my $summary = run_load(
		$port, '--connections', 8, '--requests', 400,
		  '--items', 3, '--partitions', 40, '--queue', 'contended', '--txn-prefix', 'c',
		  '--results', $results, '--timeout', 120);
	is($summary->{http}{201}, 400, 'all requests answered 201 with one permit');
	my ($queued, $not_once, $wrong_id, $unanswered, $other) =
	  verify_results($node, $results, 'contended');
	is($queued, 1200, 'every item answered queued');
	is($not_once, 0, 'each stored exactly once');
	is($wrong_id, 0, 'under the id the client was given');
	is($unanswered, 0, 'nothing stored that was not answered');
	is(gapless($node, 'contended'), '0', 'offsets are gapless per partition');
}
is(metric($port, 'queen_push_permits_limit'), 1, 'the limit never left its bounds');
is_deeply([ log_crashes($node) ], [], 'no worker crashed');

$node->stop;
done_testing();
