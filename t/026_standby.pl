# The broker on a streaming standby, through a promotion and a rejoin.
# On a standby the workers that write wait for promotion (one line each,
# no error, no restart) while the listeners answer 503 saying why; the
# moment the node is promoted it serves, with what the old primary
# committed; the old primary, rewound and started as a standby of the new
# one (what pg_auto_failover does to a demoted node), answers 503 again,
# and a spool file only it had is gone: why a synchronous primary, also
# checked here, answers "failed" where it would answer "buffered".
# Before, the workers did not start on a standby at all: a client met a
# closed port and the log said nothing.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use QueenHTTP;

my $http_primary = PostgreSQL::Test::Cluster::get_free_port();
my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1, extra => [ '--encoding=UTF8', '--locale=C' ]);
# pg_rewind, which rejoins the old primary below, needs hint bits logged
$primary->append_conf('postgresql.conf',
	broker_conf(http_port => $http_primary, shards => 2) . "wal_log_hints = on\nwal_keep_size = 128MB\n");
$primary->start;
$primary->safe_psql('postgres', 'CREATE EXTENSION queen');
ok(wait_healthy($http_primary, 60), 'the primary serves');

my @items = map { { queue => 'ha.q', partition => "p$_", payload => { n => $_ } } } 1 .. 20;
my ($s, $r) = push_items($http_primary, @items);
is_deeply([ map { $_->{status} } @$r ], [ ('queued') x 20 ], 'twenty messages queued on the primary');

$primary->backup('b');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'b', has_streaming => 1);
my $http_standby = PostgreSQL::Test::Cluster::get_free_port();
$standby->append_conf('postgresql.conf', "queen.http_port = $http_standby\n");
$standby->start;
$primary->wait_for_catchup($standby);

sub log_of { return slurp_file($_[0]->logfile); }

# Lines that show a queen worker failing, exiting or being restarted.
sub noisy
{
	my ($text) = @_;
	return grep { /FATAL|ERROR|background worker "queen [^"]*" \(PID \d+\) exited|terminated by signal/ }
	  split /\n/, $text;
}

my $standby_reason = qr/this node is a standby \(in recovery\) and takes no writes/;

# Does the broker on $port answer /health 503, saying its node is a standby?
sub says_standby
{
	my ($port) = @_;
	my ($st, $b) = http_request($port, 'GET', '/health');
	return $st == 503 && $b =~ $standby_reason;
}

ok(wait_for(sub { says_standby($http_standby) }), 'on the standby, /health is 503 and says it is a standby');
($s, $r) = http_json($http_standby, 'POST', '/api/v1/push', { items => [ { queue => 'ha.q', payload => 1 } ] });
is($s, 503, 'a push to the standby is 503');
like($r->{error} // '', $standby_reason, 'and says why');
($s) = pop($http_standby, '/api/v1/pop/queue/ha.q?batch=5&wait=false');
is($s, 503, 'a pop on the standby is 503 too (a pop writes its lease)');
is(metric($http_standby, 'queen_node_standby'), '1', 'the standby gauge is 1 on the standby');
is(metric($http_primary, 'queen_node_standby'), '0', 'and 0 on the primary');
ok( wait_for(
		sub {
			my $log = log_of($standby);
			return (() = $log =~ /queen (shard \d|maintenance 0): this node is a standby/g) == 3;
		}),
	'each worker that writes says once that it waits for promotion');
# a worker that exits comes back after 5 s: give a restart loop time to show
sleep 6;
is_deeply([ noisy(log_of($standby)) ], [], 'no error, no worker exit while it waits');
is((() = log_of($standby) =~ /this node is a standby/g), 3, 'and nothing is said again');

# ---- synchronous replication: no "buffered" on this node's disk --------------------
# A bundle that cannot commit (its partition locked past the statement
# timeout) would be spooled and answered "buffered"; with a synchronous
# standby a spool file would not survive a failover, so it is "failed",
# nothing of it is stored, and the client's retry is what stores it.
$primary->append_conf('postgresql.conf',
	"synchronous_standby_names = 'standby'\nqueen.push_statement_timeout = '1s'\n");
$primary->reload;
ok( wait_for(
		sub {
			$primary->safe_psql('postgres',
				q{SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'}) eq '1';
		}),
	'the standby replicates synchronously');
($s, $r) = push_items($http_primary, { queue => 'ha.q', partition => 'p2', payload => { n => 22 } });
is($r->[0]{status}, 'queued', 'a push is queued with a synchronous standby');
my $locker = hold_partition_lock($primary, 'ha.q', 'p3');
my $logged_from = length log_of($primary);
my @retry = map { { queue => 'ha.q', partition => 'p3', payload => { n => $_ }, transactionId => "r$_" } } 23, 24;
($s, $r) = push_items($http_primary, @retry);
is_deeply([ map { $_->{status} } @{ $r // [] } ], [ 'failed', 'failed' ],
	'a bundle that cannot commit is failed, not buffered');
like(substr(log_of($primary), $logged_from),
	qr/could not spool 2 items; they are answered failed: this node replicates synchronously/,
	'the log says why');
my @spooled = spool_files($primary->data_dir . '/queen_spool', qr/\.(?:tmp|buf)$/);
is_deeply(\@spooled, [], 'no spool file was written');
$locker->query_safe('COMMIT');
$locker->quit;
($s, $r) = push_items($http_primary, @retry);
is_deeply([ map { $_->{status} } @$r ], [ 'queued', 'queued' ], 'the client\'s retry stores them');

# ---- failover: the primary crashes, the standby is promoted ----------------------
$primary->stop('immediate');
my $killed = time;
$standby->promote;
ok(wait_healthy($http_standby, 60), 'the promoted node serves');
($s, $r) = push_items($http_standby, { queue => 'ha.q', partition => 'p1', payload => { n => 21 } });
is($r->[0]{status}, 'queued', 'and stores a push');
note(sprintf('from the stop of the primary to the first push stored: %.2f s', time - $killed));
like(log_of($standby), qr/queen shard 0: this node was promoted; starting to serve/,
	'the log says it serves now');
is(metric($http_standby, 'queen_node_standby'), '0', 'the standby gauge is 0 after promotion');
my %seen;
for my $p (1 .. 20)
{
	my ($st, $got) = pop($http_standby, "/api/v1/pop/queue/ha.q/partition/p$p?batch=10&wait=false");
	$seen{ $_->{data}{n} }++ for @{ $got->{messages} // [] };
}
is_deeply([ sort { $a <=> $b } keys %seen ], [ 1 .. 24 ],
	'what the old primary committed is there after promotion, with the new push');
is_deeply([ grep { $seen{$_} != 1 } keys %seen ], [], 'each delivered once');

# ---- the old primary rejoins as a standby of the new one -------------------------
# what the spool's refusal above rests on: a file only the old primary has
# does not survive its rewind
my $left_behind = $primary->data_dir . '/queen_spool/queen-left-behind-n1.buf';
mkdir $primary->data_dir . '/queen_spool';
PostgreSQL::Test::Utils::append_to_file($left_behind, 'spooled');
# the new timeline reaches the control file at a checkpoint, which pg_rewind reads
$standby->safe_psql('postgres', 'CHECKPOINT');
command_ok(
	[
		'pg_rewind', '--target-pgdata', $primary->data_dir,
		'--source-server', $standby->connstr('postgres')
	],
	'pg_rewind brings the old primary onto the new timeline');
ok(!-e $left_behind, 'pg_rewind removed a spool file only the old primary had');
# it copied the new primary's configuration too: this node's own lines again
$primary->append_conf('postgresql.conf',
	'port = ' . $primary->port . "\nqueen.http_port = $http_primary\n");
$primary->enable_streaming($standby);
my $rejoin_from = length log_of($primary);
$primary->start;
ok(wait_for(sub { says_standby($http_primary) }), 'the demoted node answers 503: it is a standby now');
($s, $r) = http_json($http_primary, 'POST', '/api/v1/push', { items => [ { queue => 'ha.q', payload => 1 } ] });
is($s, 503, 'and refuses pushes');
sleep 6;
is_deeply([ noisy(substr(log_of($primary), $rejoin_from)) ], [],
	'no error, no worker exit on the demoted node');

is_deeply([ log_crashes($standby) ], [], 'nothing crashed on the new primary');
$primary->stop;
$standby->stop;
done_testing();
