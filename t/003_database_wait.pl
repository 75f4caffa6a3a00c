# A broker started before its database exists (scripts/setup's first
# start) waits calmly: one line says the workers wait for queen.database,
# no worker connects to a missing database (PostgreSQL ends such a
# connection with FATAL) and none exits to try again; once the database
# and the extension are created the broker serves.  The same after
# DROP DATABASE ... WITH (FORCE) under a running broker.  Before the
# database watch, each shard and the maintenance worker logged
# 'FATAL:  database "..." does not exist' and exited twice.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use QueenHTTP;

my ($node, $port) = start_broker(
	name => 'dbwait',
	database => 'later',
	no_extension => 1);

sub log_text { return slurp_file($node->logfile); }

# Server log lines about a missing database or a worker exiting.
sub noisy
{
	my ($text) = @_;
	return grep { /FATAL|background worker "queen [^"]*" \(PID \d+\) exited/ } split /\n/, $text;
}

ok( wait_for(
		sub {
			my ($s, $b) = http_request($port, 'GET', '/health');
			return $s == 503 && $b =~ /waiting for database \\"later\\"/;
		}),
	'/health is 503 and says the broker waits for the database');
ok(wait_for(sub { log_text() =~ /database "later" \(queen\.database\) does not exist/ }),
	'the log says so');
# give a crash loop time to show: a worker that exits comes back after 5 s
sleep 6;
my $waiting = log_text();
is_deeply([ noisy($waiting) ], [], 'no FATAL and no worker exit while it waits');
is(scalar(() = $waiting =~ /does not exist/g), 1, 'one line says the workers wait, not one per worker');

$node->safe_psql('postgres', 'CREATE DATABASE later');
$node->safe_psql('later', 'CREATE EXTENSION queen');
ok(wait_healthy($port, 60), 'the broker serves once the database and the extension exist');
my ($s, $r) = push_items($port, { queue => 'w.q', payload => 1 });
is($r->[0]{status}, 'queued', 'and stores a push');
my $served = log_text();
is_deeply([ noisy($served) ], [], 'no FATAL and no worker exit on the way');
like($served, qr/database "later" exists now/, 'the log says the database appeared');

# ---- the database dropped under a running broker, and created again ---------------
my $before = length log_text();
$node->safe_psql('postgres', 'DROP DATABASE later WITH (FORCE)');
ok( wait_for(
		sub {
			my ($st, $b) = http_request($port, 'GET', '/health');
			return $st == 503 && $b =~ /waiting for database \\"later\\"/;
		},
		60),
	'after DROP DATABASE ... WITH (FORCE) the restarted shards wait for it');
my $dropped = substr(log_text(), $before);
unlike($dropped, qr/FATAL:  database "later" does not exist/,
	'no worker tried to connect to the dropped database');
$node->safe_psql('postgres', 'CREATE DATABASE later');
$node->safe_psql('later', 'CREATE EXTENSION queen');
ok(wait_healthy($port, 60), 'the broker serves again once it is back');

# ---- a restart with the database there: serving at once, quietly ------------------
$node->restart;
ok(wait_healthy($port, 60), 'after a restart the broker serves');
$before = 0;
my @after_restart = noisy((split /database system is ready to accept connections/, log_text())[-1]);
is_deeply(\@after_restart, [], 'without a FATAL or a worker exit');

is_deeply([ log_crashes($node) ], [], 'nothing crashed');
$node->stop;
done_testing();
