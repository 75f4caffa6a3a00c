# Crash safety of the push path and the spool under load.  While
# bench/queen-load pushes (32 connections, 100 partitions, known
# transactionIds), three crashes:
#  (a) a shard is SIGKILLed (maintenance off: items are queued);
#  (b) maintenance on, the listener is SIGKILLed (items are buffered into
#      spool files a shard may have been writing);
#  (c) maintenance off, so the drain runs while the load continues, and the
#      postmaster itself is SIGKILLed (with the draining worker, so the drain
#      is cut short), every old process exits, and it is started again.
# After the drain: every item answered queued or buffered is stored exactly
# once under the message id it was given, no transactionId is stored twice
# (unanswered items at most once), nothing answered failed is stored, and
# offsets are gapless.  The log shows the recoveries and no worker exiting
# badly other than the ones killed on purpose.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Cwd ();
use QueenHTTP;

my $load = $ENV{QUEEN_LOAD};
plan skip_all => 'QUEEN_LOAD (bench/queen-load) not given' unless $load && -x $load;

# PostgreSQL::Test::Cluster turns restart_after_crash off; these crashes
# must be recovered from by the postmaster, as in production.
my ($node, $port) = start_broker(
	name => 'crashspool',
	shards => 4,
	extra => "restart_after_crash = on\n");
my $spool = $node->data_dir . '/queen_spool';
my $tmp = PostgreSQL::Test::Utils::tempdir;
my $reinit = qr/all server processes terminated; reinitializing/;

sub pending
{
	my $b = buffer_status($port);
	return $b ? $b->{pending} : -1;
}

sub count_matches
{
	my ($re) = @_;
	my @m = slurp_file($node->logfile) =~ /$re/g;
	return scalar @m;
}

# A load run in the background: 8 s of 1-item pushes to $queue.
sub start_load
{
	my ($queue, $prefix) = @_;
	my $run = load_start($port, "load on $queue", '--connections', 32, '--partitions', 100,
		'--items', 1, '--queue', $queue, '--txn-prefix', $prefix,
		'--results', "$tmp/$queue.tsv", '--duration', 8, '--timeout', 90);
	$run->{queue} = $queue;
	$run->{file} = "$tmp/$queue.tsv";
	return $run;
}

# Wait for the postmaster to notice a crash and reinitialise, then for the
# broker to serve again.
sub wait_recovered
{
	my ($before, $what) = @_;
	ok(wait_for(sub { count_matches($reinit) > $before }, 60),
		"$what: the postmaster reinitialised");
	ok(wait_healthy($port, 90), "$what: /health is 200 again");
}

sub set_maintenance_retry
{
	my ($on) = @_;
	return wait_for(
		sub {
			my ($s, $d) = set_maintenance($port, $on);
			return $s == 200 && ref $d eq 'HASH' && ($d->{maintenanceMode} ? 1 : 0) == ($on ? 1 : 0);
		},
		60);
}

sub mode
{
	my $m = get_maintenance($port);
	return $m ? ($m->{maintenanceMode} ? 'on' : 'off') : 'no answer';
}

# ---- (a) SIGKILL a shard mid-load -------------------------------------------------
my $run_a = start_load('crash_a', 'a');
ok(wait_for(sub { stored_count($node, 'crash_a') >= 200 }, 30), '(a) the load is storing');
my $shard_pid = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'queen shard' ORDER BY pid LIMIT 1");
like($shard_pid, qr/^\d+$/, "(a) a shard to kill: $shard_pid");
my $reinits = count_matches($reinit);
kill 'KILL', $shard_pid;
wait_recovered($reinits, '(a)');
my $sum_a = load_finish($run_a);
like(slurp_file($node->logfile), qr/\(PID $shard_pid\) was terminated by signal 9/,
	'(a) the log shows the shard killed by signal 9');

# ---- (b) maintenance on, SIGKILL the listener mid-load ----------------------------
ok(set_maintenance_retry(1), '(b) maintenance turned on after the recovery');
my $pending_before = pending();
my $run_b = start_load('crash_b', 'b');
ok(wait_for(sub { pending() >= $pending_before + 200 }, 30), '(b) the load is being buffered');
my $listener_pid = last_listener_pid($node, 0);
ok($listener_pid && process_alive($listener_pid), "(b) the listener to kill: " . ($listener_pid // 'none'));
$reinits = count_matches($reinit);
kill 'KILL', $listener_pid;
wait_recovered($reinits, '(b)');
is(mode(), 'on', '(b) maintenance is still on after the crash');
my $sum_b = load_finish($run_b);
like(slurp_file($node->logfile), qr/\(PID $listener_pid\) was terminated by signal 9/,
	'(b) the log shows the listener killed by signal 9');
is(stored_count($node, 'crash_b'), '0', '(b) nothing of the buffered load is stored yet');

# ---- (c) maintenance off under load, SIGKILL the postmaster during the drain ---------
# Only the postmaster is killed.  Its children must notice and exit on
# their own: the listener at once, the shards once idle, the maintenance
# worker after the file it is committing (it checks between files), so the
# drain is cut short with files left.  (Killing a backend too would be a
# different experiment: without a postmaster to reset shared memory, a
# backend killed holding an LWLock leaves the others waiting on it forever.)
$pending_before = pending();
my $run_c = start_load('crash_c', 'c');
ok(wait_for(sub { pending() >= $pending_before + 200 }, 30), '(c) the load is being buffered');
open(my $pidfh, '<', $node->data_dir . '/postmaster.pid') or die "postmaster.pid: $!";
chomp(my $pm = <$pidfh>);
close $pidfh;
my $drained_lines = count_matches(qr/queen spool: drained "/);
ok(set_maintenance_retry(0), '(c) maintenance turned off with the load running');
# HTTP only in this loop: a psql per poll would let the whole drain finish
ok(wait_for(sub { (metric($port, 'queen_spool_items_drained_total') // 0) > 0 }, 30),
	'(c) the drain has committed a first file');
$node->kill9;
my $files_before_kill = count_matches(qr/queen spool: drained "/) - $drained_lines;
diag("(c) spool files drained before the kill: $files_before_kill; left: "
	  . scalar(spool_files($spool, qr/\.buf$/)));

# Every process of the old cluster has the data directory as its working
# directory.  The new postmaster refuses to start while kill(old pid, 0)
# succeeds, which it does for an unreaped zombie too; the children only need
# to have let go of the shared memory, which a zombie has.
my $pgdata = Cwd::abs_path($node->data_dir);
sub old_processes
{
	return grep {
		my ($pid) = m{/proc/(\d+)/cwd$};
		(readlink($_) // '') eq $pgdata && process_alive($pid);
	} glob '/proc/[0-9]*/cwd';
}
ok(wait_for(sub { !kill(0, $pm) && !old_processes() }, 60),
	'(c) the postmaster and every old process are gone')
  or diag('still there: ' . join(' ', old_processes()));
$node->start;
ok(wait_healthy($port, 90), '(c) /health is 200 after the new start');
is(mode(), 'off', '(c) maintenance is still off after the restart');
my $sum_c = load_finish($run_c);
like(slurp_file($node->logfile), qr/database system was not properly shut down; automatic recovery in progress/,
	'(c) the new postmaster ran crash recovery');

# ---- everything drained ---------------------------------------------------------------
ok(wait_for(sub { pending() == 0 }, 120), 'pending reaches 0: the spool is drained');
ok(wait_for(sub { !spool_files($spool, qr/\.(?:buf|tmp)$/) }, 30), 'no spool file is left');

my %checks = (
	'(a) shard killed' => $run_a,
	'(b) listener killed in maintenance' => $run_b,
	'(c) postmaster killed during the drain' => $run_c);
my %r;
for my $phase (sort keys %checks)
{
	my $run = $checks{$phase};
	my $r = $r{$phase} = verify_acknowledged($node, $run->{file}, $run->{queue});
	diag("$phase: " . join(', ', map { "$_=$r->{$_}" } sort keys %$r));
	cmp_ok($r->{queued} + $r->{buffered}, '>', 0, "$phase: acknowledged items to check");
	is($r->{acked_not_once}, 0, "$phase: every item answered queued or buffered is stored exactly once");
	is($r->{acked_wrong_id}, 0, "$phase: under the message id it was given");
	is($r->{txn_stored_twice}, 0, "$phase: no transactionId is stored twice");
	is($r->{failed_stored}, 0, "$phase: no item answered failed is stored");
	# every transactionId is sent once, so no answer can be a duplicate
	is($r->{duplicate} + $r->{other}, 0, "$phase: no duplicate or unknown status answered");
	is(gapless($node, $run->{queue}), '0', "$phase: offsets are gapless");
}
cmp_ok($r{'(a) shard killed'}{queued}, '>', 0, '(a) items were queued');
cmp_ok($r{'(b) listener killed in maintenance'}{buffered}, '>', 0, '(b) items were buffered');
cmp_ok($r{'(c) postmaster killed during the drain'}{buffered}, '>', 0, '(c) items were buffered before the drain');
cmp_ok($r{'(c) postmaster killed during the drain'}{queued}, '>', 0, '(c) items were queued after maintenance off');

# ---- the log: recoveries, and nothing else exited badly ---------------------------------
my $log = slurp_file($node->logfile);
like($log, qr/terminated by signal 9/, 'the log shows workers terminated by signal 9');
cmp_ok(count_matches($reinit), '>=', 2, 'the postmaster reinitialised after both worker kills');
my @unexpected = grep { !/\(PID (?:$shard_pid|$listener_pid)\) was terminated by signal 9/ }
  log_crashes($node);
is_deeply(\@unexpected, [], 'no other process crashed or was terminated by a signal');
my %drained;
$drained{$1}++ while $log =~ /queen spool: drained "([^"]+)"/g;
is_deeply([ grep { $drained{$_} > 1 } sort keys %drained ], [], 'no spool file was drained twice');
my @bad_exits = grep { /exited with exit code (\d+)/ && $1 > 1 } split /\n/, $log;
is_deeply(\@bad_exits, [], 'no worker exited with a code other than 0 or 1');

$node->stop;
done_testing();
