# The SQL consumer's door waits without polling (issue 30): a SQL pop with
# wait sleeps until a commit makes its queue pending, whichever door made
# it; a SQL push wakes a parked HTTP pop; a waiting pop can be cancelled;
# and with queen.notify the broker's commits NOTIFY the queue's channel.
# How fast a wake is, is bench/sql-wait's (docs/BENCHMARKS.md); here only
# that a pop waiting up to 60 s returns long before, with what woke it.
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use QueenHTTP;

my ($node, $port) = start_broker(name => 'sqlwait');

# A SQL statement run in its own psql, not waited for.
sub start_sql
{
	my ($sql) = @_;
	my %h = (out => '', err => '', t0 => time);
	$h{run} = IPC::Run::start(
		[ 'psql', '-X', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'),
		  '-c', $sql ],
		'>', \$h{out}, '2>', \$h{err});
	return \%h;
}

sub finish_sql
{
	my ($h) = @_;
	$h->{run}->finish;
	$h->{took} = time - $h->{t0};
	chomp $h->{out};
	return $h;
}

# The pop is asleep on its latch (wait event Extension), after its first try.
sub wait_sleeping
{
	my ($pattern) = @_;
	return wait_for(sub {
		$node->safe_psql('postgres',
			"SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Extension'"
			  . " AND query LIKE '%$pattern%'") eq '1';
	}, 60);
}

# ---- an HTTP push wakes a SQL pop --------------------------------------------
my $w = start_sql(q{SELECT payload->>'n' FROM queen.pop('sw.http', wait => '60s', auto_ack => true)});
ok(wait_sleeping('sw.http'), 'the SQL pop waits on an empty queue');
my ($ps, $pres) = push_items($port, { queue => 'sw.http', partition => 'p', payload => { n => 7 } });
is($pres->[0]{status}, 'queued', 'an HTTP push is queued meanwhile');
finish_sql($w);
is($w->{out}, '7', 'the waiting SQL pop delivers what the HTTP push stored');
cmp_ok($w->{took}, '<', 30, sprintf('long before its 60 s (%.2f s)', $w->{took}));

# ---- a SQL push wakes a parked HTTP pop ---------------------------------------
my $wakes0 = metric($port, 'queen_long_poll_wakes_total{by="sql"}') // 0;
my $sock = send_request($port, 'GET', '/api/v1/pop/queue/sw.sql?wait=true&timeout=60000&autoAck=true');
# its first empty answer parks it before the push
ok(wait_for(sub { (metric($port, 'queen_parked_long_polls') // 0) >= 1 }, 60), 'the HTTP pop is parked');
$node->safe_psql('postgres', q{SELECT queen.push('sw.sql', '{"n": 8}', 'p')});
my ($hs, $hres) = read_response($sock, 60);
is($hs, 200, 'the parked HTTP pop is answered');
is($hres->{messages}[0]{data}{n}, 8, 'with what the SQL push stored');
cmp_ok(metric($port, 'queen_long_poll_wakes_total{by="sql"}'), '>', $wakes0,
	'the SQL commit woke the parked pops of its queue');

# ---- a SQL push wakes a SQL pop of another session -----------------------------
$w = start_sql(q{SELECT payload->>'n' FROM queen.pop('sw.both', wait => '60s', auto_ack => true)});
ok(wait_sleeping('sw.both'), 'a second SQL pop waits');
$node->safe_psql('postgres', q{SELECT queen.push('sw.both', '{"n": 9}', 'p')});
finish_sql($w);
is($w->{out}, '9', 'the SQL push wakes it');
cmp_ok($w->{took}, '<', 30, sprintf('long before its 60 s (%.2f s)', $w->{took}));

# ---- a waiting pop can be cancelled, and leaves nothing behind -----------------
$w = start_sql(q{SELECT count(*) FROM queen.pop('sw.cancel', wait => '60s')});
ok(wait_sleeping('sw.cancel'), 'a pop waits to be cancelled');
$node->safe_psql('postgres',
	"SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query LIKE '%sw.cancel%' AND pid <> pg_backend_pid()");
eval { finish_sql($w) };
like($w->{err}, qr/canceling statement due to user request/, 'pg_cancel_backend ends the wait');
cmp_ok(time - $w->{t0}, '<', 30, 'at once');
$w = start_sql(q{SELECT payload->>'n' FROM queen.pop('sw.cancel', wait => '60s', auto_ack => true)});
ok(wait_sleeping('sw.cancel'), 'the same queue waited on again');
$node->safe_psql('postgres', q{SELECT queen.push('sw.cancel', '{"n": 10}', 'p')});
finish_sql($w);
is($w->{out}, '10', 'and woken');

# ---- queen.notify: the broker's commits NOTIFY the channel ----------------------
$node->safe_psql('postgres', 'ALTER SYSTEM SET queen.notify = on');
$node->reload;
my $listener = $node->background_psql('postgres');
is($listener->query_safe(q{SELECT queen.listen('sw.note')}), 'queen_sw_note', 'a session listens');
# the shards read the setting at their next transaction after the reload
ok(wait_for(sub {
	push_items($port, { queue => 'sw.note', partition => 'p', payload => 1 },
		{ queue => 'sw.note', partition => 'q', payload => 2 });
	$listener->query_safe('SELECT 1') =~ /Asynchronous notification "queen_sw_note"/;
}, 60), 'an HTTP push of two messages NOTIFYs queen_sw_note');
$listener->quit;
$node->safe_psql('postgres', 'ALTER SYSTEM RESET queen.notify');
$node->reload;

is(scalar(log_crashes($node)), 0, 'no worker crashed');
$node->stop;
done_testing();
