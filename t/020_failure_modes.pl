# The failure-mode table of a push, end to end over HTTP:
#  - duplicates inside one body, against a stored push, and against an
#    original whose segment was deleted (zero UUID);
#  - a bundle that runs into queen.push_statement_timeout (a partition row
#    locked by another session) is rolled back, spooled and answered
#    "buffered" while the shard keeps serving other queues, then drained
#    exactly once, under the answered message ids, when the lock goes away;
#  - the same with an unwritable spool: "failed", and nothing is ever stored;
#  - maintenance mode over HTTP: every push "buffered", nothing in the
#    tables, the mode survives a restart, turning it off drains every item
#    exactly once with gapless offsets and leaves no spool file;
#  - maintenance mode through queen.maintenance_mode and a reload;
#  - a buffered item whose transactionId was committed through SQL meanwhile
#    is dropped by the drain as a duplicate: one copy, the SQL one.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use JSON::PP;
use QueenHTTP;

my ($node, $port) = start_broker(
	name => 'failure',
	shards => 4,
	extra => "queen.push_statement_timeout = '1s'\n");
my $spool = $node->data_dir . '/queen_spool';
my $zero = '00000000-0000-0000-0000-000000000000';

# message ids stored under one transactionId of one partition of a queue
sub stored_ids
{
	my ($queue, $part, $txn) = @_;
	return map { $_->[2] }
	  grep { $_->[0] eq $part && $_->[1] eq $txn } stored_frames($node, $queue);
}

sub pending
{
	my $b = buffer_status($port);
	return $b ? $b->{pending} : -1;
}

sub mode_is
{
	my ($on) = @_;
	my $m = get_maintenance($port);
	return $m && JSON::PP::is_bool($m->{maintenanceMode})
	  && ($m->{maintenanceMode} ? 1 : 0) == ($on ? 1 : 0);
}

# ---- 1. duplicate inside one request body ------------------------------------------
my ($status, $res) = push_items(
	$port,
	{ queue => 'dup', partition => 'p', payload => 1, transactionId => 'a' },
	{ queue => 'dup', partition => 'p', payload => 2, transactionId => 'a' });
is($status, 201, 'a body with a repeated transactionId answers 201');
is($res->[0]{status}, 'queued', 'its first occurrence is queued');
is($res->[1]{status}, 'duplicate', 'the later occurrence is a duplicate');
is($res->[1]{message_id}, $res->[0]{message_id}, 'carrying the first item\'s id');
my $original = $res->[0]{message_id};
is_deeply([ stored_ids('dup', 'p', 'a') ], [$original], 'one copy stored, under the first id');

# ---- 2. duplicate against a previous push --------------------------------------------
($status, $res) = push_items($port,
	{ queue => 'dup', partition => 'p', payload => 3, transactionId => 'a' });
is($res->[0]{status}, 'duplicate', 'a stored transactionId pushed again is a duplicate');
is($res->[0]{message_id}, $original, 'reporting the original message id');
is_deeply([ stored_ids('dup', 'p', 'a') ], [$original], 'still one copy');

# ---- 3. duplicate whose original segment is gone -----------------------------------------
# (as retention deletes it: the hashes the window needs move to log_txns)
retain_away($node, 'dup', 'p', 1000);
is( $node->safe_psql('postgres', q{
		SELECT count(*) FROM queen.log_txns t JOIN queen.log_partitions p ON p.id = t.partition_id
		  JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'dup' AND p.name = 'p'}),
	'1', 'the transactionId hashes are kept while the segment is gone');
($status, $res) = push_items($port,
	{ queue => 'dup', partition => 'p', payload => 4, transactionId => 'a' });
is($res->[0]{status}, 'duplicate', 'a duplicate of a deleted original is still a duplicate');
is($res->[0]{message_id}, $zero, 'with the zero UUID as its id');
is_deeply([ stored_ids('dup', 'p', 'a') ], [], 'and nothing was stored for it');

# ---- 4. statement timeout: spooled, buffered, drained when the lock goes -------------
($status, $res) = push_items($port,
	{ queue => 'locked', partition => 'p', payload => 0, transactionId => 'l0' });
is($res->[0]{status}, 'queued', 'locked/p exists with one message');

my $locker = $node->background_psql('postgres');
$locker->query_safe('BEGIN');
is( $locker->query_safe(q{
		SELECT 1 FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
		 WHERE q.name = 'locked' FOR UPDATE OF p}),
	'1', 'another session holds the row lock of locked/p');

my $t0 = time;
($status, $res) = push_items($port,
	map { { queue => 'locked', partition => 'p', payload => $_, transactionId => "l$_" } } 1 .. 3);
my $took = time - $t0;
is($status, 201, 'a push that hits the statement timeout answers 201');
is_deeply([ map { $_->{status} } @$res ], [ ('buffered') x 3 ], 'every item is buffered');
cmp_ok($took, '>=', 0.9, sprintf('it was answered after the 1 s timeout (%.2f s)', $took));
my %buffered_id = map { $_->{transaction_id} => $_->{message_id} } @$res;

($status, my $other) = push_items($port, { queue => 'elsewhere', payload => 1, transactionId => 'e1' });
is($other->[0]{status}, 'queued', 'while the lock is held, a push to another queue is queued');
is(scalar(stored_frames($node, 'locked')), 1, 'nothing new is stored for locked/p while it is locked');
ok(wait_for(sub { pending() >= 3 }, 30), 'status/buffers counts the 3 spooled items as pending');
cmp_ok(metric($port, 'queen_push_statement_timeouts_total') // 0, '>', 0,
	'queen_push_statement_timeouts_total counted the timeout');

$locker->query_safe('COMMIT');
$locker->quit;
ok(wait_for(sub { scalar(stored_frames($node, 'locked')) == 4 }, 60),
	'after the lock is released the 3 items are stored');
for my $txn (qw(l1 l2 l3))
{
	is_deeply([ stored_ids('locked', 'p', $txn) ], [ $buffered_id{$txn} ],
		"$txn stored exactly once under the id answered as buffered");
}
is(gapless($node, 'locked'), '0', 'locked/p offsets are gapless after the drain');
ok(wait_for(sub { pending() == 0 }, 30), 'pending returns to 0');
ok(wait_for(sub { my $b = buffer_status($port); $b && $b->{dbHealthy} }, 30),
	'status/buffers reports the database healthy again');

# ---- 5. statement timeout with an unwritable spool: failed --------------------------
ok(-d $spool, 'the spool directory was created by the first spooled bundle');
ok(wait_for(sub { pending() == 0 && !spool_files($spool, qr/\.(?:tmp|buf)$/) }, 30),
	'the spool is empty and no file is open');
chmod 0500, $spool or die "chmod $spool: $!";
$locker = $node->background_psql('postgres');
$locker->query_safe('BEGIN');
$locker->query_safe(q{
	SELECT 1 FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
	 WHERE q.name = 'locked' FOR UPDATE OF p});
($status, $res) = push_items($port,
	map { { queue => 'locked', partition => 'p', payload => $_, transactionId => "f$_" } } 1 .. 2);
$locker->query_safe('COMMIT');
$locker->quit;
chmod 0700, $spool or die "chmod $spool: $!";
# the spec names the HTTP status only for maintenance mode (500); accept either
like($status, qr/^(?:201|500)$/, "timeout with an unwritable spool answers ($status)");
is_deeply([ map { $_->{status} } @{ $res // [] } ], [ 'failed', 'failed' ],
	'every item is failed when the spool cannot take them');
# A failed item exists nowhere: no spool file holds it and the shard does not
# retry it, so it must never appear.  3 s is three statement timeouts, more
# than a drain retry or a late replay would need to show up, so watching that
# long can catch a wrong one; it cannot prove a negative forever.
ok( !wait_for(
		sub { scalar(stored_ids('locked', 'p', 'f1')) + scalar(stored_ids('locked', 'p', 'f2')) > 0 }, 3),
	'nothing of the failed items is stored once the lock and the spool are back');
cmp_ok(metric($port, 'queen_spool_write_failures_total') // 0, '>', 0,
	'queen_spool_write_failures_total counted the failed write');

# ---- 6. maintenance mode over HTTP --------------------------------------------------
my ($ms, $md, $mraw) = set_maintenance($port, 1);
is($ms, 200, 'POST maintenance {"enabled":true} answers 200');
is_deeply([ sort keys %{ $md // {} } ],
	[qw(bufferHealthy bufferedMessages maintenanceMode message)], 'enable answer keys');
ok(JSON::PP::is_bool($md->{maintenanceMode}) && $md->{maintenanceMode}, 'maintenanceMode is true');
is($md->{message}, 'Maintenance mode ENABLED. All PUSHes routing to file buffer.',
	'enable message');

my $m = get_maintenance($port);
ok($m, 'GET maintenance answers 200');
is_deeply([ sort keys %{ $m // {} } ],
	[qw(bufferHealthy bufferStats bufferedMessages maintenanceMode popMaintenanceMode)],
	'GET maintenance keys');
is_deeply([ sort keys %{ $m->{bufferStats} // {} } ],
	[qw(dbHealthy failedCount failedFiles pendingCount quarantinedItems)], 'bufferStats keys');
is_deeply([ sort keys %{ $m->{bufferStats}{failedFiles} // {} } ],
	[qw(count failoverCount qos0Count totalBytes totalMB)], 'failedFiles keys');
ok(JSON::PP::is_bool($m->{maintenanceMode}) && $m->{maintenanceMode}, 'GET says maintenance is on');
ok(JSON::PP::is_bool($m->{popMaintenanceMode}) && !$m->{popMaintenanceMode}, 'popMaintenanceMode is false');
is($m->{bufferStats}{failedFiles}{failoverCount}, 0, 'failoverCount is 0');
is($m->{bufferStats}{failedFiles}{qos0Count}, 0, 'qos0Count is 0');
cmp_ok(metric($port, 'queen_maintenance_mode') // -1, '==', 1, 'queen_maintenance_mode is 1');

my @items = map {
	{ queue => 'maint', partition => 'p' . ($_ % 5), payload => { n => $_ }, transactionId => "m$_" }
} 0 .. 19;
($status, $res) = push_items($port, @items);
is($status, 201, 'a push in maintenance mode answers 201');
is_deeply([ map { $_->{status} } @$res ], [ ('buffered') x 20 ], 'all 20 items buffered');
my %maint_id = map { $_->{transaction_id} => $_->{message_id} } @$res;
is(scalar(keys %maint_id), 20, '20 distinct transactionIds answered');
is(stored_count($node, 'maint'), '0', 'nothing is stored in the tables');
ok(wait_for(sub { pending() == 20 }, 30), 'status/buffers pending reaches 20');
$m = get_maintenance($port);
is($m->{bufferStats}{pendingCount}, 20, 'GET maintenance pendingCount is 20');
is($m->{bufferedMessages}, 20, 'GET maintenance bufferedMessages is 20');

for my $bad ('{}', '{"enabled":"yes"}', 'not json')
{
	my ($s, $b) = http_request($port, 'POST', '/api/v1/system/maintenance', $bad);
	is($s, 400, "maintenance body $bad is 400");
	is($b, '{"error":"enabled (boolean) is required"}', "error body for $bad");
}
ok(mode_is(1), 'the bad bodies left maintenance on');

$node->restart;
ok(wait_healthy($port, 60), 'healthy after the restart');
ok(mode_is(1), 'maintenance mode is still on after the restart');
cmp_ok(metric($port, 'queen_maintenance_mode') // -1, '==', 1, 'queen_maintenance_mode is 1 after the restart');
ok(wait_for(sub { pending() == 20 }, 30), 'the 20 items are still pending after the restart');
# pending == 20 shows the maintenance worker has scanned the spool since the
# restart; had it started draining, rows would appear within a moment.  Watch
# for 2 s: this can catch a drain that ignores the persisted mode.
ok(!wait_for(sub { stored_count($node, 'maint') > 0 }, 2), 'nothing drained while maintenance is on');

($ms, $md) = set_maintenance($port, 0);
is($ms, 200, 'POST maintenance {"enabled":false} answers 200');
ok(JSON::PP::is_bool($md->{maintenanceMode}) && !$md->{maintenanceMode}, 'maintenanceMode is false');
is($md->{message}, 'Maintenance mode DISABLED. Background processor will drain buffer to DB.',
	'disable message');
ok(wait_for(sub { stored_count($node, 'maint') >= 20 }, 60), 'the drain stores the 20 items');
my @maint = stored_frames($node, 'maint');
is(scalar @maint, 20, 'exactly 20 messages stored');
is_deeply({ map { $_->[1] => $_->[2] } @maint }, \%maint_id,
	'each under its transactionId and the message id answered as buffered');
is_deeply([ sort map { "$_->[0]/$_->[1]" } @maint ],
	[ sort map { "$_->{partition}/$_->{transactionId}" } @items ], 'each in its partition');
ok(wait_for(sub { pending() == 0 }, 30), 'pending is 0 after the drain');
is(gapless($node, 'maint'), '0', 'offsets are gapless per partition');
ok(wait_for(sub { !spool_files($spool, qr/\.(?:buf|tmp)$/) }, 30),
	'no .buf or .tmp file is left in the spool');
cmp_ok($node->safe_psql('postgres', 'SELECT count(*) FROM queen.spool_drained'), '>', 0,
	'queen.spool_drained records the drained files');
cmp_ok(metric($port, 'queen_maintenance_mode') // -1, '==', 0, 'queen_maintenance_mode is 0');
($status, $res) = push_items($port, $items[7]);
is($res->[0]{status}, 'duplicate', 'a drained transactionId pushed again is a duplicate');
is($res->[0]{message_id}, $maint_id{m7}, 'reporting the drained message id');

# ---- 7. maintenance mode through the setting ---------------------------------------
$node->append_conf('postgresql.conf', "queen.maintenance_mode = on\n");
$node->reload;
ok(wait_for(sub { mode_is(1) }, 30), 'queen.maintenance_mode = on and a reload turn the mode on');
($status, $res) = push_items($port, { queue => 'setting', partition => 'p', payload => 1, transactionId => 's1' });
is($res->[0]{status}, 'buffered', 'a push is buffered');
my $s1 = $res->[0]{message_id};
is(stored_count($node, 'setting'), '0', 'and not stored');
$node->append_conf('postgresql.conf', "queen.maintenance_mode = off\n");
$node->reload;
ok(wait_for(sub { mode_is(0) }, 30), 'queen.maintenance_mode = off and a reload turn it off');
ok(wait_for(sub { stored_count($node, 'setting') > 0 }, 60), 'the buffered item is drained');
is_deeply([ stored_ids('setting', 'p', 's1') ], [$s1], 'stored once, under its buffered id');

# ---- 8. replay of a transactionId committed meanwhile through SQL --------------------
my $dropped_before = metric($port, 'queen_spool_items_dropped_duplicate_total') // 0;
($ms) = set_maintenance($port, 1);
is($ms, 200, 'maintenance on again');
($status, $res) = push_items($port, { queue => 'replay', partition => 'p', payload => 'http', transactionId => 'x' });
is($res->[0]{status}, 'buffered', 'transactionId x is buffered');
my ($sql_status, $sql_id) = split /\|/, $node->safe_psql('postgres',
	q{SELECT status, message_id FROM queen.push('replay', '"sql"', 'p', 'x')});
is($sql_status, 'queued', 'the same transactionId pushed through SQL meanwhile is queued');
isnt($sql_id, $res->[0]{message_id}, 'under another message id');
($ms) = set_maintenance($port, 0);
is($ms, 200, 'maintenance off');
ok( wait_for(
		sub {
			(metric($port, 'queen_spool_items_dropped_duplicate_total') // 0) > $dropped_before
			  && pending() == 0;
		},
		60),
	'the drain drops the replayed item as a duplicate');
is_deeply([ stored_ids('replay', 'p', 'x') ], [$sql_id], 'exactly one copy of x: the SQL one');
cmp_ok(metric($port, 'queen_spool_items_dropped_duplicate_total') // 0, '>=', 1,
	'queen_spool_items_dropped_duplicate_total >= 1');

is_deeply([ log_crashes($node) ], [], 'no worker crashed');
$node->stop;
done_testing();
