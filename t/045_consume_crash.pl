# Consumption under load, and across crashes.  bench/queen-load pushes
# single items with known transactionIds over 40 partitions while other
# connections pop (wildcard, long-poll, short leases) and acknowledge each
# batch.  The load generator checks every delivery as it consumes: each
# producer's messages arrive in order within their partition.
#  (0) no crash: every message answered queued is delivered exactly once,
#      in order, and acknowledged;
#  (a) a shard is SIGKILLed mid-load;
#  (c) a listener is SIGKILLed mid-load;
#  (b) the postmaster is SIGKILLed mid-load and the cluster started again.
# After each crash the spool drains (a listener that outlives its shards
# spools what they had not answered and answers it buffered) and a drain
# pass consumes what is left (leases the crash cut short expire and
# redeliver).  Then: no message answered queued or buffered is lost; none
# answered otherwise is delivered; a message is delivered again only
# because a crash cut its lease short (never twice in a run without a
# crash); first deliveries of the messages answered queued keep offset
# order per producer and partition (a redelivery never lets a newer message
# overtake an older one; a buffered one is stored when the spool drains,
# after later pushes, as docs/ARCHITECTURE.md says); every cursor ends at
# its partition's last offset with no lease left.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Cwd ();
use QueenHTTP;

my $load = $ENV{QUEEN_LOAD};
plan skip_all => 'QUEEN_LOAD (bench/queen-load) not given' unless $load && -x $load;

my ($node, $port) = start_broker(
	name => 'consumecrash',
	shards => 4,
	extra => "restart_after_crash = on\n");
my $tmp = PostgreSQL::Test::Utils::tempdir;
my $spool = $node->data_dir . '/queen_spool';
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

# A phase: producers and consumers on $queue for $secs seconds, $crash
# called once the consumers have delivered something.
sub phase
{
	my ($queue, $secs, $crash) = @_;
	my $prod = load_start($port, "$queue producers", '--connections', 16, '--partitions', 40,
		'--items', 1, '--queue', $queue, '--txn-prefix', $queue,
		'--results', "$tmp/$queue.p.tsv", '--duration', $secs);
	my $cons = load_start($port, "$queue consumers", '--consume', '--connections', 6,
		'--path', "/api/v1/pop/queue/$queue?batch=20&partitions=4&wait=true&timeout=500&leaseSeconds=3",
		'--results', "$tmp/$queue.c.tsv", '--duration', $secs + 2);
	if ($crash)
	{
		ok(wait_for(sub { -s "$tmp/$queue.c.tsv" || stored_count($node, $queue) >= 300 }, 30),
			"$queue: the load is storing");
		$crash->();
	}
	my $p = load_finish($prod);
	my $c = load_finish($cons);
	return ($p, $c);
}

# Pop until the queue's every cursor reaches its last offset (expired
# leases redeliver on the way), each pass a file of its own.
sub drain
{
	my ($queue) = @_;
	my $n = 0;
	my $done = sub {
		$node->safe_psql('postgres', qq{
			SELECT count(*) FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
			  LEFT JOIN queen.log_consumers c ON c.partition_id = p.id AND c.consumer_group = '__QUEUE_MODE__'
			 WHERE q.name = '$queue' AND (c.committed IS DISTINCT FROM p.last_offset OR c.worker_id IS NOT NULL)}) eq '0';
	};
	my $ok = wait_for(
		sub {
			return 1 if $done->();
			$n++;
			run_load($port, '--consume', '--connections', 2,
				'--path', "/api/v1/pop/queue/$queue?batch=500&partitions=40&wait=true&timeout=300",
				'--results', "$tmp/$queue.d$n.tsv", '--duration', 1);
			return $done->();
		},
		90);
	ok($ok, "$queue: drained, every cursor at its last offset with no lease");
	return map { "$tmp/$queue.d$_.tsv" } 1 .. $n;
}

# What was delivered against what was answered queued.
sub check
{
	my ($queue, @consumed) = @_;
	my (%queued, %promised, %answered, %statuses, %times, %last_first, $order_bad);
	open(my $pf, '<', "$tmp/$queue.p.tsv") or die "$queue.p.tsv: $!";
	while (<$pf>)
	{
		my @c = split /\t/;
		$answered{ $c[0] } = $c[1];
		$statuses{ $c[1] }++;
		$queued{ $c[0] } = 1 if $c[1] eq 'queued';
		# buffered: stored once the spool drains, which check_crash awaits
		$promised{ $c[0] } = 1 if $c[1] eq 'queued' || $c[1] eq 'buffered';
	}
	for my $f ("$tmp/$queue.c.tsv", @consumed)
	{
		open(my $cf, '<', $f) or next;
		while (<$cf>)
		{
			chomp;
			my ($txn, $pid) = split /\t/;
			next if $times{$txn}++;
			# first delivery of what was answered queued: ascending per
			# (partition, producer)
			next unless $queued{$txn};
			my ($producer, $seq) = $txn =~ /^(.*)-(\d+)$/ or next;
			my $key = "$pid|$producer";
			$order_bad++ if defined $last_first{$key} && $seq <= $last_first{$key};
			$last_first{$key} = $seq;
		}
	}
	my $lost = grep { !$times{$_} } keys %promised;
	my $again = grep { $times{$_} > 1 } keys %times;
	# a push whose connection broke before its answer may have committed:
	# delivering it is right; delivering what was answered otherwise is not
	my $unanswered = grep { !exists $answered{$_} } keys %times;
	my $unknown = grep { exists $answered{$_} && !$promised{$_} } keys %times;
	return { queued => scalar(keys %queued), buffered => $statuses{buffered} // 0,
		answers => join('/', map { "$_:$statuses{$_}" } sort keys %statuses),
		lost => $lost, again => $again,
		order_bad => $order_bad // 0, unknown => $unknown, unanswered => $unanswered };
}

# ---- (0) no crash ------------------------------------------------------------------
my ($p0, $c0) = phase('cq0', 5);
my @d0 = drain('cq0');
my $r0 = check('cq0', @d0);
diag('(0) ' . join(', ', map { "$_=$r0->{$_}" } sort keys %$r0));
cmp_ok($r0->{queued}, '>', 200, '(0) messages were queued');
is($r0->{buffered}, 0, '(0) nothing is answered buffered without a crash');
is($r0->{lost}, 0, '(0) every message answered queued is delivered');
is($r0->{again}, 0, '(0) none is delivered twice');
is($r0->{order_bad}, 0, '(0) deliveries keep each producer\'s order per partition');
is($c0->{consume}{order_violations}, 0, '(0) the consumers saw no order violation');
is($c0->{consume}{ack_failed}, 0, '(0) every acknowledgement was applied');
is($r0->{unknown} + $r0->{unanswered}, 0, '(0) nothing delivered that was not answered queued');

# SIGKILL one worker ($tag, its pid) mid-load: the postmaster restarts every process.
sub kill_worker
{
	my ($tag, $pid) = @_;
	my $before = count_matches($reinit);
	kill 'KILL', $pid;
	ok(wait_for(sub { count_matches($reinit) > $before }, 60), "$tag the postmaster reinitialised");
	ok(wait_healthy($port, 90), "$tag /health is 200 again");
}

# What every crash phase promises, once its drain is done.
sub check_crash
{
	my ($tag, $name) = @_;
	ok(wait_for(sub { pending() == 0 && !spool_files($spool, qr/\.(?:buf|tmp)$/) }, 60),
		"$tag the spool is drained");
	my $r = check($name, drain($name));
	diag("$tag " . join(', ', map { "$_=$r->{$_}" } sort keys %$r));
	cmp_ok($r->{queued}, '>', 200, "$tag messages were queued");
	is($r->{lost}, 0, "$tag every message answered queued or buffered is delivered");
	is($r->{order_bad}, 0, "$tag first deliveries of what was queued keep each producer's order per partition");
	is($r->{unknown}, 0, "$tag nothing delivered that was answered neither queued nor buffered");
}

# ---- (a) SIGKILL a shard ----------------------------------------------------------------
phase('cqa', 8, sub {
	kill_worker('(a)', $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'queen shard' ORDER BY pid LIMIT 1"));
});
check_crash('(a)', 'cqa');

# ---- (c) SIGKILL a listener ---------------------------------------------------------------
# its connections, parked pops and requests in flight go with it; the
# postmaster restarts every process, as for a shard
phase('cqc', 8, sub {
	my $listener = last_listener_pid($node);
	ok(process_alive($listener), '(c) the listener is running');
	kill_worker('(c)', $listener);
});
check_crash('(c)', 'cqc');

# ---- (b) SIGKILL the postmaster ---------------------------------------------------------
phase('cqb', 8, sub {
	open(my $pidfh, '<', $node->data_dir . '/postmaster.pid') or die "postmaster.pid: $!";
	chomp(my $pm = <$pidfh>);
	close $pidfh;
	$node->kill9;
	my $pgdata = Cwd::abs_path($node->data_dir);
	my $old = sub {
		return grep {
			my ($pid) = m{/proc/(\d+)/cwd$};
			(readlink($_) // '') eq $pgdata && process_alive($pid);
		} glob '/proc/[0-9]*/cwd';
	};
	ok(wait_for(sub { !kill(0, $pm) && !$old->() }, 60), '(b) every old process is gone');
	$node->start;
	ok(wait_healthy($port, 90), '(b) /health is 200 after the new start');
});
check_crash('(b)', 'cqb');

# the shard killed in (a), the listener killed in (c), and (b)'s processes that saw their postmaster go
my @bad = grep { !/was terminated by signal 9/ } log_crashes($node);
is_deeply(\@bad, [], 'no worker crashed or exited badly other than the one killed');

done_testing();
