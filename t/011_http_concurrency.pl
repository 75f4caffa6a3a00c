# Many concurrent clients over many partitions: every item answered
# "queued" is stored exactly once, offsets stay gapless per partition, and
# the fusion shards share commits between partitions (segments > commits).
# Then a clean shutdown with requests in flight: every answered "queued"
# item survives, every worker exits 0.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run qw(start finish);
use JSON::PP;
use QueenHTTP;

my $load = $ENV{QUEEN_LOAD} or plan skip_all => 'QUEEN_LOAD (bench/queen-load) not given';

my ($node, $port) = start_broker(name => 'concurrency');
my $tmp = PostgreSQL::Test::Utils::tempdir;

# ---- 100 clients, 1,000 partitions, known transactionIds -------------------------
my $results = "$tmp/load.tsv";
my $summary = run_load(
	$port, '--connections', 100, '--requests', 6000,
	  '--partitions', 1000, '--queue', 'conc', '--txn-prefix', 'c',
	  '--dup-every', 10, '--results', $results, '--timeout', 120);
is($summary->{http}{201}, 6000, 'all 6000 requests answered 201');
is($summary->{errors}{reset} + $summary->{errors}{timeout} + $summary->{errors}{protocol}, 0,
	'no connection errors');
cmp_ok($summary->{status}{duplicate}, '>', 0, 'repeated transactionIds came back duplicate');

my ($queued, $not_once, $wrong_id, $unanswered, $other) =
  verify_results($node, $results, 'conc');
is($queued, $summary->{status}{queued}, 'results file has every queued item');
is($not_once, 0, 'every item answered queued is stored exactly once');
is($wrong_id, 0, 'stored under the message id the client was given');
is($unanswered, 0, 'nothing stored that was not answered queued');
is($other, 0, 'no item failed');
is(gapless($node, 'conc'), '0', 'offsets are gapless per partition');

my $segments = metric($port, 'queen_batches_fired_total{op="push"}');
my $commits = metric($port, 'queen_bundles_committed_total');
cmp_ok($segments, '>', $commits,
	"fusion shares commits between partitions ($segments segments in $commits commits)");
ok( wait_for(sub { slurp_file($node->logfile) =~ /bundle summary commits=\d+ segments=\d+ segments_per_commit=[\d.]+/ }, 30),
	'the bundle summary line is logged');

# ---- clean shutdown with requests in flight -------------------------------------------
my $results2 = "$tmp/shutdown.tsv";
my ($out2, $err2) = ('', '');
my $h = start(
	[ $load, '--port', $port, '--connections', 64, '--duration', 6,
	  '--partitions', 1000, '--queue', 'stop', '--txn-prefix', 's',
	  '--results', $results2, '--timeout', 60 ],
	'>', \$out2, '2>', \$err2);
ok( wait_for(sub { ($node->safe_psql('postgres',
	"SELECT count(*) FROM queen.queues WHERE name = 'stop'") // 0) > 0 }, 30),
	'load is running');
$node->stop('fast');
finish($h);
my $s2 = decode_json($out2);
cmp_ok($s2->{status}{queued}, '>', 0, 'some pushes were answered queued before the stop');

my $log = slurp_file($node->logfile);
unlike($log, qr/background worker "queen [^"]*" \(PID \d+\) exited with exit code [^0]/,
	'no broker worker exited with a non-zero code');
is_deeply([ log_crashes($node) ], [], 'no worker crashed');
like($log, qr/queen listener 0: stopping; answering \d+ outstanding requests/,
	'the listener stopped accepting and answered what it held');

$node->start;
($queued, $not_once, $wrong_id, $unanswered, $other) = verify_results($node, $results2, 'stop');
cmp_ok($queued, '>', 0, 'queued answers to check');
is($not_once, 0, 'after the restart every item answered queued is stored exactly once');
is($wrong_id, 0, 'under the id the client was given');
is(gapless($node, 'stop'), '0', 'offsets are gapless after the shutdown');

$node->stop;
done_testing();
