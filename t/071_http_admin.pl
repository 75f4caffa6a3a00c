# The administration routes over HTTP: resources, status, analytics,
# consumer groups (seek back and forward, subscription, deletion and
# re-consumption), dead letters (purge, replay once across two calls and a
# SIGKILL), messages, stats refresh, pop maintenance mode; every route's
# 404 and 400; and a stats refresh that never waits for a push nor makes
# one wait.
use strict;
use warnings;

use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use QueenHTTP;

my ($node, $port) = start_broker(name => 'admin', extra => "queen.stats_interval = 1\nqueen.consumer_lag_interval = 1\nrestart_after_crash = on\n");

sub sql { return $node->safe_psql('postgres', $_[0]); }
sub get { my ($s, $j) = http_json($port, 'GET', $_[0]); return ($s, $j); }
sub post { my ($s, $j) = http_json($port, 'POST', $_[0], $_[1] // {}); return ($s, $j); }

# ---- a queue, two partitions, two groups, a dead letter ---------------------------
my ($s, $j) = http_json($port, 'POST', '/api/v1/configure',
	{ queue => 'ad.q', namespace => 'shop', task => 'bill', options => { retryLimit => 0 } });
is($s, 200, 'a queue whose failures go to the DLQ at once');
push_items($port, map { { queue => 'ad.q', partition => "p$_", transactionId => "early-$_", payload => { n => $_ } } } 0 .. 1);
push_items($port, map { { queue => 'ad.q', partition => 'p0', transactionId => "mid-$_", payload => $_ } } 0 .. 2);
my $between = sql("SELECT queen._ts(now())");
usleep(20_000);
push_items($port, map { { queue => 'ad.q', partition => 'p0', transactionId => "late-$_", payload => $_ } } 0 .. 2);

my ($ps, $pop) = pop($port, '/api/v1/pop/queue/ad.q/partition/p0?batch=100&autoAck=true&consumerGroup=g');
is(scalar @{ $pop->{messages} }, 7, 'group g consumed p0');
($ps, $pop) = pop($port, '/api/v1/pop/queue/ad.q/partition/p1?batch=1');
my $dead = $pop->{messages}[0];
($s, $j) = http_json($port, 'POST', '/api/v1/ack',
	{ transactionId => $dead->{transactionId}, partitionId => $dead->{partitionId},
	  leaseId => $dead->{leaseId}, status => 'failed', error => 'boom' });
ok($j->[0]{dlq}, 'a failed message went to the DLQ');
# g3 consumes one of p0: six behind there
pop($port, '/api/v1/pop/queue/ad.q/partition/p0?batch=1&autoAck=true&consumerGroup=g3');

# ---- stats refresh and the overview routes -------------------------------------
($s, $j) = post('/api/v1/stats/refresh');
is($s, 200, 'POST /api/v1/stats/refresh');
is($j->{queues}, 1, 'it counted the queue');
($s, $j) = get('/api/v1/resources/queues');
is_deeply([ $s, $j->{total}, $j->{queues}[0]{name}, $j->{queues}[0]{partitions},
			$j->{queues}[0]{messages}{total}, $j->{queues}[0]{messages}{deadLetter} ],
	[ 200, 1, 'ad.q', 2, 8, 1 ], 'the queue list: partitions, messages, dead letters');
($s, $j) = get('/api/v1/resources/queues/ad.q?limit=1&offset=1');
is_deeply([ $s, $j->{options}{retryLimit}, $j->{partitionCount}, scalar @{ $j->{partitions} },
			$j->{partitions}[0]{name}, $j->{totals}{total} ],
	[ 200, 0, 2, 1, 'p1', 8 ], 'a queue: its options and a page of its partitions');
($s, $j) = get('/api/v1/resources/overview');
is_deeply([ $s, $j->{queues}, $j->{partitions}, $j->{namespaces}, $j->{tasks}, $j->{messages}{total} ],
	[ 200, 1, 2, 1, 1, 8 ], 'the overview');
($s, $j) = get('/api/v1/resources/namespaces');
is($j->{namespaces}[0]{namespace}, 'shop', 'the namespaces');
($s, $j) = get('/api/v1/consumer-groups');
my %groups = map { $_->{name} => $_ } @$j;
# a group's first pop gives it a cursor on every partition of the queue
is_deeply([ $groups{g}{members}, $groups{g}{totalLag}, $groups{g3}{totalLag} ], [ 2, 1, 7 ],
	'groups: their partitions and what they have not consumed');
($s, $j) = get('/api/v1/consumer-groups/g');
is($j->{'ad.q'}{partitions}[0]{committed}, 6, 'group g committed offset 6 of p0');
($s, $j) = get('/api/v1/consumer-groups/lagging?minLagSeconds=0');
ok(scalar(grep { $_->{consumer_group} eq 'g3' && $_->{partition_name} eq 'p0' && $_->{offset_lag} == 6 } @$j),
	'g3 lags by six on p0');
($s, $j) = get('/api/v1/status?queue=ad.q');
is_deeply([ $s, $j->{deadLetterQueue}{totalMessages}, $j->{deadLetterQueue}{topErrors}[0]{error} ],
	[ 200, 1, 'boom' ], 'the status: the DLQ and its errors');
($s, $j) = get('/api/v1/analytics/queue-ops?queue=ad.q');
ok($s == 200 && @{ $j->{series} } >= 1, 'queue-ops has a bucket');
($s, $j) = get('/api/v1/messages?queue=ad.q&status=dead_letter');
is_deeply([ map { $_->{transactionId} } @{ $j->{messages} } ], [ 'early-1' ], 'browse by status');
($s, $j) = get("/api/v1/messages/$dead->{partitionId}/early-1");
is_deeply([ $s, $j->{status}, $j->{errorMessage}, $j->{payload}{n} ], [ 200, 'dead_letter', 'boom', 1 ],
	'one message: its state, error and payload');
like(metric_text(), qr/^queen_queue_messages\{tenant="[^"]+",queue="ad\.q"\} 8$/m,
	'/metrics shows the queue depth after the next sample');

# ---- seek back, forward; subscription -------------------------------------------
($s, $j) = post('/api/v1/consumer-groups/g/queues/ad.q/seek', { timestamp => $between });
is_deeply([ $s, $j->{partitionsUpdated} ], [ 200, 2 ], 'seek g back to a moment');
($ps, $pop) = pop($port, '/api/v1/pop/queue/ad.q/partition/p0?batch=100&autoAck=true&consumerGroup=g');
is_deeply([ map { $_->{transactionId} } @{ $pop->{messages} } ], [ 'late-0', 'late-1', 'late-2' ],
	'exactly what was pushed after the moment comes again');
($s, $j) = post('/api/v1/consumer-groups/g/queues/ad.q/partitions/p0/seek', { timestamp => '2000-01-01T00:00:00Z' });
is($j->{partitionsUpdated}, 1, 'seek one partition to the beginning');
($s, $j) = post('/api/v1/consumer-groups/g/queues/ad.q/seek', { toEnd => JSON::PP::true });
($ps) = pop($port, '/api/v1/pop/queue/ad.q?batch=100&consumerGroup=g');
is($ps, 204, 'after a seek to the end nothing is pending for g');
# a parked pop notices a rewind
my $parked = send_request($port, 'GET', '/api/v1/pop/queue/ad.q/partition/p0?batch=1&consumerGroup=g&wait=true&timeout=30000');
usleep(300_000);
post('/api/v1/consumer-groups/g/queues/ad.q/partitions/p0/seek', { timestamp => $between });
my ($pst, $pj) = read_response($parked, 20);
is_deeply([ $pst, $pj->{messages}[0]{transactionId} ], [ 200, 'late-0' ], 'a parked pop is woken by the rewind');
# the lease it took goes with the next seek
post('/api/v1/consumer-groups/g/queues/ad.q/seek', { toEnd => JSON::PP::true });
is(sql(q{SELECT count(*) FROM queen.log_consumers WHERE consumer_group = 'g' AND worker_id IS NOT NULL}), '0',
	'a seek releases the group\'s leases');
($s, $j) = post('/api/v1/consumer-groups/g/subscription', { subscriptionTimestamp => '2026-01-01T00:00:00Z' });
is_deeply([ $s, $j->{rowsUpdated} ], [ 200, 1 ], 'a group\'s subscription moves');

# ---- delete a group; it consumes again what is retained ---------------------------
($s) = http_request($port, 'DELETE', '/api/v1/consumer-groups/g2');
($ps, $pop) = pop($port, '/api/v1/pop/queue/ad.q/partition/p0?batch=100&autoAck=true&consumerGroup=g2');
is(scalar @{ $pop->{messages} }, 7, 'a new group g2 reads p0');
($s) = http_request($port, 'DELETE', '/api/v1/consumer-groups/g2');
is($s, 200, 'g2 deleted');
($ps, $pop) = pop($port, '/api/v1/pop/queue/ad.q/partition/p0?batch=100&autoAck=true&consumerGroup=g2');
is(scalar @{ $pop->{messages} }, 7, 'deleted, it reads all of p0 again');

# ---- dead letters: replay in maintenance mode, twice, across a SIGKILL --------------
my $dlq_id = sql('SELECT id FROM queen.log_dlq');
set_maintenance($port, 1);
($s, $j) = post("/api/v1/dlq/$dlq_id/replay");
is($s, 503, 'no replay in maintenance mode');
set_maintenance($port, 0);
is(sql('SELECT count(*) FROM queen.log_dlq'), '1', 'the dead letter is still there');
($s, $j) = post("/api/v1/dlq/$dlq_id/replay");
is_deeply([ $s, $j->{result}, $j->{replayedAs}{transactionId}, $j->{replayedAs}{partition} ],
	[ 200, 'moved', "dlq:$dlq_id", 'p1' ], 'a replay moves it to its partition');
my $shard = sql("SELECT pid FROM pg_stat_activity WHERE backend_type = 'queen shard' ORDER BY pid LIMIT 1");
my $reinit = qr/all server processes terminated; reinitializing/;
my $before = () = slurp_file($node->logfile) =~ /$reinit/g;
kill 'KILL', $shard;
ok(wait_for(sub { (() = slurp_file($node->logfile) =~ /$reinit/g) > $before }, 60)
	&& wait_healthy($port, 90), 'a shard SIGKILLed, the cluster reinitialised, the broker back');
($s, $j) = post("/api/v1/dlq/$dlq_id/replay");
is($s, 404, 'a second replay, after the crash, finds nothing');
is(sql("SELECT count(*) FROM queen.read('ad.q', 'p1') WHERE transaction_id = 'dlq:$dlq_id'"), '1',
	'the replayed message is in the log once');
is(sql('SELECT count(*) FROM queen.log_dlq'), '0', 'and the dead letter is gone');

# a retry by address and a forget, on a new dead letter
($ps, $pop) = pop($port, '/api/v1/pop/queue/ad.q/partition/p1?batch=10');
my ($m) = grep { $_->{transactionId} eq "dlq:$dlq_id" } @{ $pop->{messages} };
http_json($port, 'POST', '/api/v1/ack', { transactionId => $m->{transactionId}, partitionId => $m->{partitionId},
	leaseId => $m->{leaseId}, status => 'failed', error => 'again' });
($s, $j) = post("/api/v1/messages/$m->{partitionId}/$m->{transactionId}/retry");
is_deeply([ $s, $j->{result} ], [ 200, 'moved' ], 'retry by address replays its dead letter');
($s) = post("/api/v1/messages/$m->{partitionId}/$m->{transactionId}/retry");
is($s, 404, 'nothing left to retry');
($s, $j) = http_json($port, 'DELETE', '/api/v1/dlq?queue=ad.q');
is_deeply([ $s, $j->{deleted} ], [ 200, 0 ], 'a purge of an empty DLQ');

# ---- pop maintenance mode ----------------------------------------------------------
($s, $j) = post('/api/v1/system/maintenance/pop', { enabled => JSON::PP::true });
is_deeply([ $s, $j->{popMaintenanceMode} ], [ 200, JSON::PP::true ], 'pop maintenance on');
my $t0 = time;
($ps) = pop($port, '/api/v1/pop/queue/ad.q?batch=1&wait=true&timeout=20000');
ok($ps == 204 && time - $t0 < 10, 'a pop answers 204 at once although messages wait');
($s, $j) = get('/api/v1/system/maintenance');
is($j->{popMaintenanceMode}, JSON::PP::true, 'the maintenance route says so');
post('/api/v1/system/maintenance/pop', { enabled => JSON::PP::false });
($ps) = pop($port, '/api/v1/pop/queue/ad.q?batch=1');
is($ps, 200, 'pop maintenance off: pops deliver');

# ---- a stats refresh neither waits for a push nor makes one wait ----------------------
my $holder = hold_partition_lock($node, 'ad.q', 'p0');
($s) = post('/api/v1/stats/refresh');
is($s, 200, 'a refresh completes while a push holds a partition');
$holder->query_safe('COMMIT');
$holder->quit;
my $refresh = $node->background_psql('postgres');
$refresh->query_safe('BEGIN');
$refresh->query_safe('SELECT queen.stats_refresh()');
my ($pushs, $pushr) = push_items($port, { queue => 'ad.q', partition => 'p0', payload => 'during refresh' });
is($pushr->[0]{status}, 'queued', 'a push completes while a refresh is open');
$refresh->query_safe('COMMIT');
$refresh->quit;

# ---- the broker's own counters, a row a minute beside each refresh ------------------
# (the counters started again with the crash above)
my ($wm, $base);
ok(wait_for(sub {
	(undef, $wm) = get('/api/v1/analytics/worker-metrics');
	return $wm && $wm->{summary} && defined $wm->{summary}{pushMessages} && @{ $wm->{timeSeries} } >= 1;
}, 30), 'worker-metrics: the broker\'s counters over time');
$base = $wm->{summary}{pushMessages};
push_items($port, map { { queue => 'ad.q', partition => 'p1', payload => $_ } } 1 .. 5);
ok(wait_for(sub {
	(undef, $wm) = get('/api/v1/analytics/worker-metrics');
	return $wm->{summary}{pushMessages} >= $base + 5;
}, 30), 'worker-metrics: five more messages pushed are counted');
($s) = get('/api/v1/analytics/worker-metrics?from=later');
is($s, 400, 'worker-metrics: a bad from');
my $sm;
ok(wait_for(sub {
	(undef, $sm) = get('/api/v1/analytics/system-metrics');
	my $ts = $sm && $sm->{replicas} ? $sm->{replicas}[0]{timeSeries} : undef;
	return $ts && @$ts && $ts->[-1]{metrics}{memory}{rss_bytes}{last} > 0
	  && $ts->[-1]{metrics}{processes} >= 3;
}, 30), 'system-metrics: the broker\'s processes, their memory');

# ---- 404s and 400s ------------------------------------------------------------------
my $zero = '00000000-0000-0000-0000-000000000000';
for my $c (
	[ 'GET', '/api/v1/resources/queues/nope' ],
	[ 'GET', '/api/v1/status/queues/nope' ],
	[ 'GET', '/api/v1/status/queues/nope/messages' ],
	[ 'GET', '/api/v1/consumer-groups/nobody' ],
	[ 'GET', '/api/v1/messages?queue=nope' ],
	[ 'GET', "/api/v1/messages/$zero/x" ],
	[ 'DELETE', "/api/v1/messages/$zero/x" ],
	[ 'POST', "/api/v1/messages/$zero/x/retry" ],
	[ 'POST', "/api/v1/dlq/$zero/replay" ],
	[ 'DELETE', '/api/v1/dlq?queue=nope' ],
	[ 'POST', '/api/v1/consumer-groups/g/queues/nope/seek', { toEnd => JSON::PP::true } ],
	[ 'POST', '/api/v1/consumer-groups/g/queues/ad.q/partitions/nope/seek', { toEnd => JSON::PP::true } ])
{
	my ($st, $body) = http_json($port, $c->[0], $c->[1], $c->[2]);
	is_deeply([ $st, defined $body->{error} ], [ 404, 1 ], "404: $c->[0] $c->[1]");
}
for my $c (
	[ 'GET', '/api/v1/resources/queues?limit=0' ],
	[ 'GET', '/api/v1/resources/queues?limit=abc' ],
	[ 'GET', '/api/v1/resources/queues?offset=-1' ],
	[ 'GET', '/api/v1/resources/queues?bogus=1' ],
	[ 'GET', '/api/v1/resources/queues/bad%01name' ],
	[ 'GET', '/api/v1/status?from=yesterday' ],
	[ 'GET', '/api/v1/status?from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z' ],
	[ 'GET', '/api/v1/status/analytics?interval=fortnight' ],
	[ 'GET', '/api/v1/consumer-groups/lagging?minLagSeconds=-5' ],
	[ 'GET', '/api/v1/messages' ],
	[ 'GET', '/api/v1/messages?queue=ad.q&status=lost' ],
	[ 'GET', '/api/v1/messages/not-a-uuid/x' ],
	[ 'POST', '/api/v1/dlq/not-a-uuid/replay' ],
	[ 'DELETE', '/api/v1/dlq' ],
	[ 'POST', '/api/v1/consumer-groups/g/queues/ad.q/seek', {} ],
	[ 'POST', '/api/v1/consumer-groups/g/queues/ad.q/seek', { toEnd => 'yes' } ],
	[ 'POST', '/api/v1/consumer-groups/g/queues/ad.q/seek', { timestamp => 'soon' } ],
	[ 'POST', '/api/v1/consumer-groups/g/queues/ad.q/seek', '[1,2]' ],
	[ 'POST', '/api/v1/consumer-groups/g/subscription', {} ],
	[ 'POST', '/api/v1/system/maintenance/pop', { enabled => 'yes' } ])
{
	my ($st, $body) = http_json($port, $c->[0], $c->[1], $c->[2]);
	is_deeply([ $st, defined $body->{error} ], [ 400, 1 ], "400: $c->[0] $c->[1]");
}
is(sql('SELECT count(*) FROM queen.log_consumers WHERE committed < -1'), '0', 'no refusal wrote a cursor');

# ---- a slow refresh spaces the next (a fifth of the worker at most) ----------
# An application holds the refresh's lock: the maintenance worker's refresh
# waits behind it for 3 s, and the next one then waits four times as long
# (12 s) though queen.stats_interval is 1 s.  Without the spacing it would
# run again within about a second.  The lag sample, which refreshes the
# figures before it reads them, is off meanwhile.
$node->append_conf('postgresql.conf', "queen.consumer_lag_interval = 0\n");
$node->reload;
sub refreshed_at { return sql('SELECT max(refreshed_at) FROM queen.queue_stats'); }
my $holder = $node->background_psql('postgres');
$holder->query_safe("BEGIN; SELECT pg_advisory_xact_lock(hashtext('queen.stats_refresh'))");
ok(wait_for(sub { sql(q{SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
	WHERE a.application_name = 'queen maintenance' AND l.locktype = 'advisory' AND NOT l.granted}) eq '1' }, 30),
	"the worker's refresh waits for the application's lock");
my $held = time;
sleep 1 while time - $held < 3;
my $before = refreshed_at();
$holder->query_safe('COMMIT');
$holder->quit;
ok(wait_for(sub { refreshed_at() ne $before }, 30), 'the refresh ran once the lock was released');
my $slow = refreshed_at();
is(changes_within(6, sub { refreshed_at() ne $slow }), 0,
	'no refresh for the next 6 s: a 3 s refresh is followed by 12 s of rest');
ok(wait_for(sub { refreshed_at() ne $slow }, 60), 'then the refreshes go on');

# ---- a slow lag sample spaces the next, as a slow refresh does ---------------
# With the refresh off, an application holds the cursors' table for 3 s: the
# worker's lag sample waits behind it, and the next one waits four times as
# long (12 s) though queen.consumer_lag_interval is 1 s.  Without the spacing
# the sample's age would drop back within about a second.
$node->append_conf('postgresql.conf', "queen.stats_interval = 0\nqueen.consumer_lag_interval = 1\n");
$node->reload;
sub lag_age
{
	my (undef, $t) = http_request($port, 'GET', '/metrics/prometheus');
	return $t =~ /^queen_consumer_lag_age_seconds (\S+)$/m ? $1 : -1;
}
my $locker = $node->background_psql('postgres');
$locker->query_safe('BEGIN; LOCK TABLE queen.log_consumers IN ACCESS EXCLUSIVE MODE');
ok(wait_for(sub { sql(q{SELECT count(*) FROM pg_stat_activity
	WHERE application_name = 'queen maintenance' AND query = 'queen: consumer lag'
	  AND wait_event_type = 'Lock'}) eq '1' }, 30),
	"the worker's lag sample waits for the application's lock");
$held = time;
sleep 1 while time - $held < 3;
$locker->query_safe('COMMIT');
$locker->quit;
ok(wait_for(sub { my $a = lag_age(); $a >= 0 && $a < 1 }, 30), 'the sample ran once the lock was released');
my $last_age = lag_age();
is( changes_within(6, sub {
			my $a = lag_age();
			my $dropped = $a < $last_age - 0.5;
			$last_age = $a;
			return $dropped;
		}),
	0, 'no sample for the next 6 s: a 3 s sample is followed by 12 s of rest');
ok(wait_for(sub { lag_age() < $last_age - 0.5 }, 60), 'then the samples go on');
$node->append_conf('postgresql.conf', "queen.stats_interval = 1\n");
$node->reload;

# The broker's sessions are a superuser's: an operator someone put in a
# schema on the default search_path (public, here) never runs in them.
sql(q{CREATE TABLE public.hijacked (who text);
	CREATE FUNCTION public.vt_eq(varchar, text) RETURNS boolean LANGUAGE plpgsql AS $$
	BEGIN INSERT INTO public.hijacked VALUES (current_user); RETURN $1::text OPERATOR(pg_catalog.=) $2; END $$;
	CREATE OPERATOR public.= (LEFTARG = varchar, RIGHTARG = text, FUNCTION = public.vt_eq);});
($s, $j) = get('/api/v1/resources/queues/ad.q');
is($s, 200, 'a queue answered with an operator in public');
($s, $j) = get('/api/v1/resources/queues');
($s, $j) = post('/api/v1/configure', { queue => 'ad.hijack' });
is(sql('SELECT count(*) FROM public.hijacked'), 0, '... which the broker never ran');
sql('DROP OPERATOR public.= (varchar, text); DROP FUNCTION public.vt_eq(varchar, text); DROP TABLE public.hijacked');

is(scalar(grep { !/was terminated by signal 9/ } log_crashes($node)), 0, 'no worker crashed but the one killed');
$node->stop;
done_testing();

# 1 if $changed returns true at a look within $seconds (one every 200 ms), else 0
sub changes_within
{
	my ($seconds, $changed) = @_;
	my $until = time + $seconds;
	while (time < $until)
	{
		return 1 if $changed->();
		usleep(200_000);
	}
	return 0;
}

# /metrics after the maintenance worker's next sample (the consumer lag
# interval's), polled: the queues' families come from the stats tables.
sub metric_text
{
	my $text = '';
	wait_for(sub {
		(undef, $text) = http_request($port, 'GET', '/metrics/prometheus');
		return $text =~ /^queen_queue_messages\{.*queue="ad\.q"\} 8$/m;
	}, 30);
	return $text;
}
