# A stopping listener and a bundle stuck on a lock (issue 14, finding 6b).
# With queen.push_statement_timeout at its default of 30 s, the listener
# used to give up after 25 s and answer "failed"; the shard then hit the
# timeout, spooled the bundle, and the drain stored it: a client told
# "failed" for an item that was stored.  Now the listener waits longer than
# the statement timeout (and spools whatever is still unanswered when its
# own wait runs out), so the client is told "buffered" and the item is
# stored exactly once.
use strict;
use warnings;

use IO::Select;
use IO::Socket::INET;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use JSON::PP;
use Time::HiRes qw(time);
use QueenHTTP;

my ($node, $port) = start_broker(name => 'shutwait', shards => 1);

sub stored_ids
{
	my ($txn) = @_;
	return map { $_->[2] } grep { $_->[1] eq $txn } stored_frames($node, 'stuck');
}

my ($status, $res) = push_items($port, { queue => 'stuck', partition => 'p', payload => 0, transactionId => 's0' });
is($res->[0]{status}, 'queued', 'stuck/p exists');

my $locker = $node->background_psql('postgres');
$locker->query_safe('BEGIN');
$locker->query_safe(q{
	SELECT 1 FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
	 WHERE q.name = 'stuck' FOR UPDATE OF p});

my $body = '{"items":[{"queue":"stuck","partition":"p","payload":1,"transactionId":"s1"}]}';
my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp')
  or die "connect: $!";
print $sock "POST /api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
  . "Content-Length: " . length($body) . "\r\nConnection: close\r\n\r\n$body";
$sock->flush;

# the push waits on the lock; stop its listener (SIGTERM to it alone)
ok(wait_for(sub { $node->safe_psql('postgres',
	q{SELECT count(*) FROM pg_stat_activity WHERE application_name = 'queen shard' AND wait_event_type = 'Lock'}) eq '1' }, 30),
	'the bundle waits on the row lock');
my $lpid = last_listener_pid($node, 0);
ok($lpid, "the listener's pid ($lpid)");
kill 'TERM', $lpid;

my $reply = '';
my $sel = IO::Select->new($sock);
my $deadline = time + 120;
while (time < $deadline)
{
	next unless $sel->can_read(1);
	my $n = sysread($sock, my $chunk, 65536);
	last unless $n;
	$reply .= $chunk;
}
close $sock;
my ($code) = $reply =~ m{^HTTP/1\.1 (\d+)};
is($code, 201, 'the stopping listener answers the push 201');
my ($json) = $reply =~ /\r\n\r\n(.*)\z/s;
my $items = eval { JSON::PP->new->decode($json) } // [];
is($items->[0]{status}, 'buffered', 'the item is buffered, not failed');

$locker->query_safe('COMMIT');
$locker->quit;
ok(wait_for(sub { scalar(stored_ids('s1')) == 1 }, 60), 'the item is stored once the lock goes');
is_deeply([ stored_ids('s1') ], [ $items->[0]{message_id} ], 'exactly once, under the id answered');
ok(wait_healthy($port, 60), 'the listener is back');
is(scalar(log_crashes($node)), 0, 'no worker crashed');

$node->stop;
done_testing();
