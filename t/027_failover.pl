# Failover on pg_auto_failover: a monitor, a primary and a secondary on
# loopback, replication as pg_auto_failover sets it up (synchronous).
# Producers push single items with known transactionIds and consumers pop
# and acknowledge against the primary; mid-load the primary's node dies
# (its pg_autoctl and its postmaster SIGKILLed, as a machine dies), the
# monitor promotes the secondary, whose broker starts serving the moment it
# is promoted, and the clients are pointed at it.  Then: every item
# answered queued is stored exactly once on the new primary under the id
# it was answered with, offsets are gapless per partition, a new consumer
# group gets every stored message exactly once, and the queue's consumers
# lose nothing.  No item is answered "buffered" in a formation (spool.c).
# Prints the time from the kill to the first push the new primary stored.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run qw(start);
use Time::HiRes qw(time sleep);
use QueenHTTP;

my $load = $ENV{QUEEN_LOAD};
plan skip_all => 'QUEEN_LOAD (bench/queen-load) not given' unless $load && -x $load;
my $autoctl = '/usr/bin/pg_autoctl';
plan skip_all => 'pg_autoctl not installed (Debian pg-auto-failover-cli, postgresql-15-auto-failover)'
  unless -x $autoctl;

my $tmp = PostgreSQL::Test::Utils::tempdir;
# pg_autoctl keeps its state under XDG directories and puts sockets where
# PG_REGRESS_SOCK_DIR says; the test's psql looks in the same place
$ENV{XDG_CONFIG_HOME} = "$tmp/config";
$ENV{XDG_DATA_HOME} = "$tmp/share";
$ENV{XDG_RUNTIME_DIR} = "$tmp/run";
mkdir "$tmp/run";
$ENV{PG_REGRESS_SOCK_DIR} = $PostgreSQL::Test::Cluster::test_pghost;
$ENV{PGHOST} = $PostgreSQL::Test::Cluster::test_pghost;
my ($pgbin) = grep { -x "$_/pg_ctl" } split /:/, $ENV{PATH};
die 'pg_ctl not on PATH' unless $pgbin;
# pg_auto_failover's extension (and pg_stat_statements, preloaded below) is
# Debian's, in Debian's PostgreSQL: another installation, as the ASan build
# of scripts/build-asan-pg that QUEEN_PG_CONFIG names, has none
my $sharedir = `$pgbin/pg_config --sharedir`;
chomp $sharedir;
plan skip_all => "pg_auto_failover's extension is not in $sharedir/extension"
  unless -e "$sharedir/extension/pgautofailover.control";

my $monitor = PostgreSQL::Test::Cluster->new('monitor');
my @nodes = map { PostgreSQL::Test::Cluster->new("node$_") } 1, 2;
my @http = map { PostgreSQL::Test::Cluster::get_free_port() } 1, 2;
my $monitor_uri = 'postgres://autoctl_node@127.0.0.1:' . $monitor->port . '/pg_auto_failover';
my %running;

sub autoctl_run
{
	my ($node) = @_;
	my $log = "$tmp/" . $node->name . '.autoctl.log';
	$running{ $node->name } = start(
		[ 'setsid', $autoctl, 'run', '--pgdata', $node->data_dir ],
		'>>', $log, '2>&1');
}

sub autoctl
{
	my (@args) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run([ $autoctl, @args ], '>', \$out, '2>', \$err)
	  or die "pg_autoctl @args failed: $err";
	return $out;
}

# A node's server log: pg_autoctl turns the logging collector on
sub server_log
{
	my ($node) = @_;
	my $dir = $node->data_dir . '/log';
	opendir(my $dh, $dir) or return '';
	my $text = join '', map { slurp_file("$dir/$_") } sort grep { /\.log$/ } readdir $dh;
	closedir $dh;
	return $text;
}

# State of a node as the monitor assigned and saw it ("secondary/secondary")
sub node_state
{
	my ($name) = @_;
	return $monitor->safe_psql('pg_auto_failover',
		"SELECT reportedstate || '/' || goalstate FROM pgautofailover.node WHERE nodehost = '127.0.0.1' AND nodeport = "
		  . $nodes[$name]->port);
}

# ---- the formation -----------------------------------------------------------------
autoctl('create', 'monitor', '--pgdata', $monitor->data_dir, '--pgport', $monitor->port,
	'--pgctl', "$pgbin/pg_ctl", '--hostname', '127.0.0.1', '--auth', 'trust', '--no-ssl');
# a failure noticed in seconds, not the default half minute
$monitor->append_conf('postgresql.conf', <<'CONF');
pgautofailover.health_check_period = 1000
pgautofailover.health_check_timeout = 1000
pgautofailover.health_check_max_retries = 1
pgautofailover.health_check_retry_delay = 500
pgautofailover.node_considered_unhealthy_timeout = 3000
pgautofailover.primary_demote_timeout = 4000
CONF
autoctl_run($monitor);
ok(wait_for(sub { eval { $monitor->safe_psql('pg_auto_failover', 'SELECT 1') } }, 60), 'the monitor runs');

for my $i (0, 1)
{
	my $node = $nodes[$i];
	autoctl('create', 'postgres', '--pgdata', $node->data_dir, '--pgport', $node->port,
		'--pgctl', "$pgbin/pg_ctl", '--hostname', '127.0.0.1', '--auth', 'trust', '--no-ssl',
		'--name', $node->name, '--monitor', $monitor_uri);
	if ($i == 0)
	{
		# the secondary copies the primary's configuration; only the port is its own
		$node->append_conf('postgresql.conf',
			broker_conf(http_port => 0, shards => 2) =~ s/^queen\.http_port.*\n//mr
			  . "shared_preload_libraries = 'pg_stat_statements,queen'\n"
			  . "include_if_exists = 'queen-node.conf'\n");
	}
	# a keeper cut off from the monitor demotes its primary within this,
	# before the monitor's primary_demote_timeout promotes another
	autoctl('config', 'set', '--pgdata', $node->data_dir, 'timeout.network_partition_timeout', '2');
	PostgreSQL::Test::Utils::append_to_file($node->data_dir . '/queen-node.conf',
		"queen.http_port = $http[$i]\n");
	autoctl_run($node);
	if ($i == 0)
	{
		ok( wait_for(
				sub {
					node_state(0) eq 'single/single'
					  && eval { $node->safe_psql('postgres', 'SELECT 1') };
				},
				60),
			'node1 runs alone');
		$node->safe_psql('postgres', 'CREATE EXTENSION queen');
		ok(wait_healthy($http[0], 60), 'its broker serves');
	}
}
ok(wait_for(sub { node_state(0) eq 'primary/primary' && node_state(1) eq 'secondary/secondary' }, 120),
	'node1 is the primary and node2 its secondary');
like($nodes[0]->safe_psql('postgres', q{SELECT sync_state FROM pg_stat_replication}),
	qr/^(?:sync|quorum)$/, 'replicating synchronously');
my ($s, $b) = http_request($http[1], 'GET', '/health');
is($s, 503, 'the secondary\'s broker answers 503');
like($b, qr/this node is a standby/, 'saying it is a standby');

# ---- load, and the primary's machine dies ----------------------------------------
my $queue = 'fo';
my @producer_args = ('--connections', 8, '--partitions', 20, '--items', 1, '--queue', $queue);
my $pop_path = "/api/v1/pop/queue/$queue?batch=20&partitions=4&wait=true&timeout=500&leaseSeconds=3";
my $prod = load_start($http[0], 'producers on node1', @producer_args, '--txn-prefix', 'a',
	'--results', "$tmp/a.p.tsv", '--duration', 8);
my $cons = load_start($http[0], 'consumers on node1', '--consume', '--connections', 4,
	'--path', $pop_path, '--results', "$tmp/a.c.tsv", '--duration', 8);
ok(wait_for(sub { -s "$tmp/a.c.tsv" && stored_count($nodes[0], $queue) >= 2000 }, 30),
	'the load stores and delivers');

my $pid = (split /\n/, slurp_file($nodes[0]->data_dir . '/postmaster.pid'))[0];
kill 'KILL', -$running{node1}->{KIDS}[0]{PID};
kill 'KILL', $pid;
my $killed = time;
load_finish($prod);
load_finish($cons);

ok(wait_for(sub { node_state(1) =~ /^(?:wait_primary|primary)\// }, 120),
	'the monitor promotes node2');
my $first_push;
ok( wait_for(
		sub {
			my ($st, $r) = push_items($http[1], { queue => $queue, partition => 'after', payload => 1 });
			return 0 unless $st == 201 && $r->[0]{status} eq 'queued';
			$first_push = time;
			return 1;
		},
		120),
	'node2\'s broker stores a push');
diag(sprintf('from the kill to the first push stored on node2: %.1f s', $first_push - $killed));
like(server_log($nodes[1]), qr/queen shard 0: this node was promoted; starting to serve/,
	'its log says it serves since the promotion');

# the clients, pointed at the new primary
$prod = load_start($http[1], 'producers on node2', @producer_args, '--txn-prefix', 'b',
	'--results', "$tmp/b.p.tsv", '--duration', 3);
$cons = load_start($http[1], 'consumers on node2', '--consume', '--connections', 4,
	'--path', $pop_path, '--results', "$tmp/b.c.tsv", '--duration', 5);
load_finish($prod);
load_finish($cons);

# ---- what node2 holds --------------------------------------------------------------
my $new = $nodes[1];
for my $phase ('a', 'b')
{
	my ($queued, $not_once, $other_id, $unqueued, $neither) =
	  verify_results($new, "$tmp/$phase.p.tsv", $queue);
	cmp_ok($queued, '>', 50, "$phase: items were answered queued ($queued)");
	is($not_once, 0, "$phase: every item answered queued is stored exactly once");
	is($other_id, 0, "$phase: under the message id it was answered with");
}
my @answers = map { (split /\t/)[1] } map { split /\n/, slurp_file("$tmp/$_.p.tsv") } 'a', 'b';
is(scalar(grep { $_ eq 'buffered' } @answers), 0, 'nothing was answered buffered');
is(gapless($new, $queue), '0', 'offsets are gapless in every partition');

# a new consumer group reads the whole queue: every stored message once
my %times;
ok( wait_for(
		sub {
			my $f = "$tmp/g" . time . '.tsv';
			run_load($http[1], '--consume', '--group', 'after', '--connections', 1,
				'--path', "/api/v1/pop/queue/$queue?batch=500&partitions=40&wait=true&timeout=300",
				'--results', $f, '--duration', 1);
			for (split /\n/, -e $f ? slurp_file($f) : '') { $times{ (split /\t/)[0] }++ }
			return scalar(keys %times) >= stored_count($new, $queue);
		},
		90),
	'a new consumer group reaches the end of the queue');
is(scalar(keys %times), stored_count($new, $queue), 'it got every stored message');
is(scalar(grep { $times{$_} > 1 } keys %times), 0, 'each once');

is_deeply([ grep { /terminated by signal|exited with exit code [^01]|PANIC/ } split /\n/, server_log($new) ],
	[], 'nothing crashed on node2');
done_testing();

# Stop what is left of the formation, whatever happened above: its data goes
# with the test, so nothing needs a clean shutdown.  Each Postgres is killed
# with its children (they run in sessions of their own, and a monitor's
# health check worker outlives its postmaster), then the keepers, which
# would start their Postgres again.
sub children_of
{
	my ($parent) = @_;
	my @kids;
	for my $stat (glob '/proc/[0-9]*/stat')
	{
		my $text = eval { slurp_file($stat) } // next;
		push @kids, $1 if $text =~ /^(\d+) \(.*\) \S (\d+) / && $2 == $parent;
	}
	return @kids;
}

END
{
	local $?;					# the test's exit code, not the cleanup's
	for my $node (grep { defined } $monitor, @nodes)
	{
		my $pidfile = $node->data_dir . '/postmaster.pid';
		next unless -e $pidfile;
		my $pid = (split /\n/, slurp_file($pidfile))[0];
		kill 'KILL', $pid, children_of($pid) if $pid;
	}
	kill 'KILL', -$_->{KIDS}[0]{PID} for values %running;
	eval { $_->finish } for values %running;
}
