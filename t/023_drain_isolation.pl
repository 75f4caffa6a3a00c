# The drain isolates what it cannot store (issue 14, findings 1 and 8).
#
# 1. One spool file holds items of ten partitions and two of a partition the
#    database refuses (a CHECK constraint on queen.log_partitions makes its
#    provisioning fail).  The drain stores the ten partitions' items exactly
#    once, quarantines only the two refused items under failed/ (as a
#    one-record spool file each, with their bytes), and says so loudly: in
#    /health, in /api/v1/system/maintenance and /api/v1/status/buffers, in
#    a Prometheus metric and in a WARNING.  Moved back once the cause is
#    gone, a quarantined item drains like any spool file.
# 2. A partition whose row another session holds locked makes its items
#    time out (queen.push_statement_timeout) on every attempt.  Its file's
#    other partitions, and a later file, are still stored while the lock is
#    held; the locked items wait (they are not quarantined) and commit once
#    it is released, exactly once.
# 3. A file drained in part, then a new maintenance worker: what the old one
#    committed is not stored again, even with a dedup window of 0.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use QueenHTTP;

my ($node, $port) = start_broker(name => 'draniso', shards => 1);
my $spool = $node->data_dir . '/queen_spool';
my $failed = "$spool/failed";

sub stored_ids
{
	my ($queue, $part, $txn) = @_;
	return map { $_->[2] }
	  grep { $_->[0] eq $part && $_->[1] eq $txn } stored_frames($node, $queue);
}

sub quarantined_files { return spool_files($failed, qr/-g\d+-i\d+-n1\.buf$/); }

sub slurp_raw
{
	my ($path) = @_;
	open(my $fh, '<:raw', $path) or die "open $path: $!";
	local $/;
	my $b = <$fh>;
	close $fh;
	return $b;
}

# ---- 1. one refused partition does not take the others with it ----------------
$node->safe_psql('postgres',
	q{ALTER TABLE queen.log_partitions ADD CONSTRAINT poison CHECK (name <> 'poison')});

my ($ms) = set_maintenance($port, 1);
is($ms, 200, 'maintenance mode on');
my @items = map { { queue => 'iso', partition => "p$_", payload => { n => $_ }, transactionId => "t$_" } } 1 .. 10;
push @items,
  { queue => 'iso', partition => 'poison', payload => { n => 'x1' }, transactionId => 'poison-1' },
  { queue => 'iso', partition => 'poison', payload => { n => 'x2' }, transactionId => 'poison-2' };
my ($status, $res) = push_items($port, @items);
is($status, 201, 'the push answers 201');
is_deeply([ map { $_->{status} } @$res ], [ ('buffered') x 12 ], 'all 12 items are buffered');
my %answered = map { $_->{transaction_id} => $_->{message_id} } @$res;
ok(wait_for(sub { scalar(spool_files($spool, qr/\.buf$/)) == 1 }, 30),
	'they are in one finished spool file');

set_maintenance($port, 0);
ok(wait_for(sub { stored_count($node, 'iso') == 10 }, 60),
	'the ten storable items are committed although two of their file cannot be');
ok(wait_for(sub { !spool_files($spool, qr/\.(?:buf|tmp)$/) }, 60),
	'the spool file is settled and removed');
for my $n (1 .. 10)
{
	is_deeply([ stored_ids('iso', "p$n", "t$n") ], [ $answered{"t$n"} ],
		"t$n is stored exactly once under the id answered");
}
is($node->safe_psql('postgres',
		q{SELECT count(*) FROM queen.log_partitions WHERE name = 'poison'}),
	'0', 'the refused partition does not exist');

my @q = quarantined_files();
is(scalar(@q), 2, 'exactly the two refused items are quarantined, one file each');
my $qbytes = join('', map { slurp_raw("$failed/$_") } @q);
like($qbytes, qr/poison-1/, 'the quarantine keeps poison-1\'s bytes');
like($qbytes, qr/poison-2/, 'and poison-2\'s');
unlike($qbytes, qr/"n":\s*\d/, 'and nothing of the stored items');

ok(wait_for(sub { (metric($port, 'queen_spool_quarantined_items') // -1) == 2 }, 30),
	'queen_spool_quarantined_items is 2');
is(metric($port, 'queen_spool_items_quarantined_total'), 2,
	'queen_spool_items_quarantined_total counted them');
my ($hs, $health) = http_json($port, 'GET', '/health');
is($hs, 200, '/health stays 200: the broker still stores pushes');
is($health->{spool}{status}, 'items_quarantined', '/health says items are quarantined');
is($health->{spool}{quarantinedItems}, 2, '/health counts them');
my $m = get_maintenance($port);
is($m->{bufferStats}{quarantinedItems}, 2, 'GET /api/v1/system/maintenance counts them');
is(buffer_status($port)->{quarantined}, 2, 'GET /api/v1/status/buffers counts them');
my $log = slurp_file($node->logfile);
like($log, qr/WARNING:  queen spool: QUARANTINED an item answered "buffered": queue "iso" partition "poison" transactionId "poison-1"/,
	'the server log has a WARNING naming the item');

# the operator fixes the cause and moves the items back: they drain
$node->safe_psql('postgres', 'ALTER TABLE queen.log_partitions DROP CONSTRAINT poison');
rename("$failed/$_", "$spool/$_") or die "rename $_: $!" for @q;
ok(wait_for(sub { stored_count($node, 'iso') == 12 }, 60),
	'moved back into the spool, the quarantined items drain');
is_deeply([ stored_ids('iso', 'poison', 'poison-1') ], [ $answered{'poison-1'} ],
	'poison-1 is stored once under the id answered');
ok(wait_for(sub { (metric($port, 'queen_spool_quarantined_items') // -1) == 0 }, 30),
	'and the quarantine gauge is back to 0');
($hs, $health) = http_json($port, 'GET', '/health');
is($health->{spool}{status}, 'ok', '/health says the spool is ok again');

# ---- 2. a file that times out on every attempt does not hold the others ------------
($status, $res) = push_items($port,
	{ queue => 'slow', partition => 'locked', payload => 0, transactionId => 'l0' });
is($res->[0]{status}, 'queued', 'slow/locked exists');
$node->append_conf('postgresql.conf', 'queen.push_statement_timeout = 1000');
$node->reload;

set_maintenance($port, 1);
($status, $res) = push_items($port,
	{ queue => 'slow', partition => 'locked', payload => 1, transactionId => 'l1' },
	{ queue => 'slow', partition => 'free1',  payload => 1, transactionId => 'f1' });
is_deeply([ map { $_->{status} } @$res ], [ 'buffered', 'buffered' ], 'first file: buffered');
%answered = map { $_->{transaction_id} => $_->{message_id} } @$res;
ok(wait_for(sub { scalar(spool_files($spool, qr/\.buf$/)) == 1 }, 30), 'the first file is finished');
($status, $res) = push_items($port,
	{ queue => 'slow', partition => 'free2', payload => 2, transactionId => 'f2' },
	{ queue => 'slow', partition => 'locked', payload => 2, transactionId => 'l2' });
is_deeply([ map { $_->{status} } @$res ], [ 'buffered', 'buffered' ], 'second file: buffered');
$answered{ $_->{transaction_id} } = $_->{message_id} for @$res;
ok(wait_for(sub { scalar(spool_files($spool, qr/\.buf$/)) == 2 }, 30), 'the second file is finished');

my $locker = $node->background_psql('postgres');
$locker->query_safe('BEGIN');
is( $locker->query_safe(q{
		SELECT 1 FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
		 WHERE q.name = 'slow' AND p.name = 'locked' FOR UPDATE OF p}),
	'1', 'another session holds the row lock of slow/locked');
my $timeouts = metric($port, 'queen_push_statement_timeouts_total') // 0;

set_maintenance($port, 0);
ok(wait_for(sub { scalar(stored_ids('slow', 'free1', 'f1')) == 1 && scalar(stored_ids('slow', 'free2', 'f2')) == 1 }, 60),
	'while the lock is held, the other partition of the first file and the later file are stored');
cmp_ok(metric($port, 'queen_push_statement_timeouts_total') // 0, '>', $timeouts,
	'the locked partition hit the statement timeout');
is_deeply([ stored_ids('slow', 'locked', 'l1') ], [], 'l1 waits for the lock');
is_deeply([ stored_ids('slow', 'locked', 'l2') ], [], 'l2 waits behind l1 (a partition keeps its order)');
is(scalar(quarantined_files()), 0, 'nothing is quarantined for a lock');

$locker->query_safe('COMMIT');
$locker->quit;
ok(wait_for(sub { stored_count($node, 'slow') == 5 }, 60), 'after the lock goes, the locked items commit');
ok(wait_for(sub { !spool_files($spool, qr/\.(?:buf|tmp)$/) }, 60), 'and the spool is empty');
for my $t (qw(l1 f1 f2 l2))
{
	my $part = $t =~ /^l/ ? 'locked' : ($t eq 'f1' ? 'free1' : 'free2');
	is_deeply([ stored_ids('slow', $part, $t) ], [ $answered{$t} ], "$t is stored exactly once");
}
is($node->safe_psql('postgres', q{
	SELECT string_agg(f.transaction_id, ',' ORDER BY s.base_offset, f.idx)
	  FROM queen.log_segments s
	  JOIN queen.log_partitions p ON p.id = s.partition_id
	  JOIN queen.queues q ON q.id = p.queue_id,
	  LATERAL queen.unpack_frames(s.blob) f
	 WHERE q.name = 'slow' AND p.name = 'locked'}),
	'l0,l1,l2', 'slow/locked holds its items in the order spooled');
is(gapless($node, 'slow'), '0', 'offsets are gapless');

# ---- 3. parts committed are never replayed, even with a dedup window of 0 ----------
# A file drained in part keeps its progress in queen.spool_drained, so a new
# maintenance worker does not store again what the old one committed (with
# window 0 no probe would catch it).
my ($cs) = http_json($port, 'POST', '/api/v1/configure',
	{ queue => 'w0', options => { dedupWindowSeconds => 0 } });
is($cs, 200, 'queue w0 has dedupWindowSeconds 0');
($status, $res) = push_items($port, { queue => 'w0', partition => 'locked', payload => 0, transactionId => 'z0' });
is($res->[0]{status}, 'queued', 'w0/locked exists');
set_maintenance($port, 1);
($status, $res) = push_items($port,
	{ queue => 'w0', partition => 'locked', payload => 1, transactionId => 'z1' },
	{ queue => 'w0', partition => 'free',   payload => 1, transactionId => 'z2' });
is_deeply([ map { $_->{status} } @$res ], [ 'buffered', 'buffered' ], 'buffered');
%answered = map { $_->{transaction_id} => $_->{message_id} } @$res;
ok(wait_for(sub { scalar(spool_files($spool, qr/\.buf$/)) == 1 }, 30), 'the file is finished');
$locker = $node->background_psql('postgres');
$locker->query_safe('BEGIN');
$locker->query_safe(q{
	SELECT 1 FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
	 WHERE q.name = 'w0' AND p.name = 'locked' FOR UPDATE OF p});
set_maintenance($port, 0);
ok(wait_for(sub { scalar(stored_ids('w0', 'free', 'z2')) == 1 }, 60), 'the free partition is stored');
my $mpid = $node->safe_psql('postgres',
	q{SELECT pid FROM pg_stat_activity WHERE application_name = 'queen maintenance'});
ok($mpid, "the maintenance worker's pid ($mpid)");
$node->safe_psql('postgres', "SELECT pg_terminate_backend($mpid)");
ok(wait_for(sub {
	my $p = $node->safe_psql('postgres',
		q{SELECT pid FROM pg_stat_activity WHERE application_name = 'queen maintenance'});
	return $p ne '' && $p ne $mpid; }, 60), 'a new maintenance worker runs');
$locker->query_safe('COMMIT');
$locker->quit;
ok(wait_for(sub { scalar(stored_ids('w0', 'locked', 'z1')) == 1 && !spool_files($spool, qr/\.buf$/) }, 60),
	'the rest is stored by the new worker and the file is removed');
is_deeply([ stored_ids('w0', 'free', 'z2') ], [ $answered{z2} ], 'z2 is stored once, not replayed');
is_deeply([ stored_ids('w0', 'locked', 'z1') ], [ $answered{z1} ], 'z1 is stored once');
is($node->safe_psql('postgres', q{SELECT count(*) FROM queen.spool_drained WHERE strpos(file, '#') > 0}),
	'0', 'the parts\' keys are gone with their file');
is(scalar(log_crashes($node)), 0, 'no worker crashed');

$node->stop;
done_testing();
