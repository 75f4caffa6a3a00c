# Two listener processes share the port (SO_REUSEPORT), each with its own
# rings to every shard: concurrent clients spread over both are answered,
# everything answered "queued" is stored exactly once, and both listeners
# served some of the connections.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use QueenHTTP;

$ENV{QUEEN_LOAD} or plan skip_all => 'QUEEN_LOAD (bench/queen-load) not given';

my ($node, $port) = start_broker(
	name => 'listeners',
	shards => 3,
	extra => "queen.http_workers = 2\n");

# listeners hold no database connection, so the log tells their pids
sub listener_pids
{
	my %pid;
	for (split /\n/, slurp_file($node->logfile))
	{
		$pid{$2} = $1 if /\[(\d+)\] LOG:  queen listener (\d+): listening on/;
	}
	return %pid;
}
ok(wait_for(sub { my %p = listener_pids(); keys %p == 2 }), 'two listeners bound the port');

my $tmp = PostgreSQL::Test::Utils::tempdir;
my $results = "$tmp/load.tsv";
my $summary = run_load(
	$port, '--connections', 48, '--requests', 3000,
	  '--items', 3, '--partitions', 200, '--queue', 'two', '--txn-prefix', 'l',
	  '--results', $results, '--timeout', 120);
is($summary->{http}{201}, 3000, 'all requests answered 201');

my ($queued, $not_once, $wrong_id, $unanswered, $other) =
  verify_results($node, $results, 'two');
is($queued, 9000, 'every item answered queued');
is($not_once, 0, 'each stored exactly once');
is($wrong_id, 0, 'under the id the client was given');
is($unanswered, 0, 'nothing stored that was not answered');
is(gapless($node, 'two'), '0', 'offsets are gapless per partition');

# a listener that exits with an error: the other keeps serving, it comes back
my %pids = listener_pids();
kill 'TERM', $pids{1};
ok( wait_for(sub { my %p = listener_pids(); $p{1} != $pids{1} }, 60),
	'the terminated listener is started again');
my ($s, $r) = push_items($port, { queue => 'two', partition => 'after', payload => 1 });
is($s, 201, 'pushes are answered after the listener restart');
is($r->[0]{status}, 'queued', 'and stored');
is_deeply([ log_crashes($node) ], [], 'no worker crashed');

$node->stop;
done_testing();
