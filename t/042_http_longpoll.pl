# Long-polls over HTTP: a pop with wait=true that finds nothing is parked
# in the listener and answered when a push commits to its queue, when an
# ack releases a lease, or with 204 at its timeout; a discovery pop wakes on
# any matching push; a parked pop whose client left is dropped; a shutdown
# answers every parked pop 204.  Timings are never asserted tight: answers
# are waited for with deadlines far above what they need.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use QueenHTTP;

my ($node, $port) = start_broker(name => 'longpoll');

sub parked { return metric($port, 'queen_parked_long_polls') // -1; }

# ---- woken by a push ------------------------------------------------------------
my $sock = send_request($port, 'GET', '/api/v1/pop/queue/lp.q?wait=true&timeout=60000');
ok(wait_for(sub { parked() == 1 }), 'a pop that finds nothing is parked');
is(metric($port, 'queen_http_requests_waiting{listener="0"}'), 0,
	'a parked pop waits for no shard');
push_items($port, { queue => 'lp.q', payload => { woke => 1 } });
my $pushed = time;
my ($status, $res) = read_response($sock, 50);
is($status, 200, 'the push answers the parked pop');
is($res->{messages}[0]{data}{woke}, 1, 'with the message pushed');
ok(time - $pushed < 50, 'well before its 60 s timeout');
ok(wait_for(sub { parked() == 0 }), 'nothing is parked any more');

# ---- timing out -----------------------------------------------------------------
my $start = time;
($status, undef, my $raw, my $headers) = pop($port, '/api/v1/pop/queue/lp.empty?wait=true&timeout=700');
is($status, 204, 'a long-poll that gets nothing answers 204 at its timeout');
ok(time - $start >= 0.6, 'not before the timeout');
is($raw // '', '', 'with no body');
($status) = pop($port, '/api/v1/pop/queue/lp.empty?timeout=60000');
is($status, 204, 'without wait=true the timeout does not apply: 204 at once');

# ---- woken by an ack that releases a lease ---------------------------------------
push_items($port, { queue => 'lp.r', partition => 'only', transactionId => 'r1', payload => 1 });
my ($s, $held) = pop($port, '/api/v1/pop/queue/lp.r/partition/only?leaseSeconds=300');
is($s, 200, 'consumer A holds the partition under a 300 s lease');
$sock = send_request($port, 'GET', '/api/v1/pop/queue/lp.r/partition/only?wait=true&timeout=60000');
ok(wait_for(sub { parked() == 1 }), 'consumer B parks behind the lease');
my $wakes = metric($port, 'queen_long_poll_wakes_total{by="ack"}');
my ($as, $ack) = ack_batch($port, undef,
	{ transactionId => 'r1', partitionId => $held->{partitionId}, leaseId => $held->{leaseId},
	  status => 'retry' });
ok($ack->[0]{leaseReleased}, 'A gives the message back');
is(metric($port, 'queen_long_poll_wakes_total{by="ack"}'), $wakes + 1, "and the ack wakes lp.r's parked pops");
($status, $res) = read_response($sock, 50);
is($status, 200, 'B is answered long before the lease would have expired');
is($res->{messages}[0]{transactionId}, 'r1', 'with the message A gave back');
# the shard remembers the partition's queue now: a second release wakes as well
$sock = send_request($port, 'GET', '/api/v1/pop/queue/lp.r/partition/only?wait=true&timeout=60000');
ok(wait_for(sub { parked() == 1 }), 'consumer C parks behind B\'s lease');
$wakes = metric($port, 'queen_long_poll_wakes_total{by="ack"}');
($as, $ack) = ack_batch($port, undef,
	{ transactionId => 'r1', partitionId => $res->{partitionId}, leaseId => $res->{leaseId},
	  status => 'retry' });
ok($ack->[0]{leaseReleased}, 'B gives it back too');
is(metric($port, 'queen_long_poll_wakes_total{by="ack"}'), $wakes + 1, 'and wakes lp.r again');
($status, $res) = read_response($sock, 50);
is($res->{messages}[0]{transactionId}, 'r1', 'C gets it');

# ---- woken by the drain of the spool ------------------------------------------------
# (the backoff would find it within a second too: the wake counter says which did)
set_maintenance($port, 1);
my ($ps, $pushed_res) = push_items($port, { queue => 'lp.d', transactionId => 'd1', payload => 'drained' });
is($pushed_res->[0]{status}, 'buffered', 'in maintenance mode a push is buffered');
$sock = send_request($port, 'GET', '/api/v1/pop/queue/lp.d?wait=true&timeout=60000');
ok(wait_for(sub { parked() == 1 }), 'a pop of its queue parks');
my $drain_wakes = metric($port, 'queen_long_poll_wakes_total{by="drain"}');
set_maintenance($port, 0);
($status, $res) = read_response($sock, 50);
is($status, 200, 'the drain that stores it answers the parked pop');
is($res->{messages}[0]{transactionId}, 'd1', 'with the drained message');
ok(metric($port, 'queen_long_poll_wakes_total{by="drain"}') >= $drain_wakes + 1,
	"the drain's commit woke lp.d's parked pops");

# ---- discovery ------------------------------------------------------------------
http_json($port, 'POST', '/api/v1/configure', { queue => 'lp.disc', namespace => 'lpns' });
$sock = send_request($port, 'GET', '/api/v1/pop?namespace=lpns&wait=true&timeout=60000&autoAck=true');
ok(wait_for(sub { parked() == 1 }), 'a discovery pop parks');
push_items($port, { queue => 'lp.disc', payload => 'found' });
($status, $res) = read_response($sock, 50);
is($status, 200, 'a push to a matching queue answers it');
is($res->{messages}[0]{data}, 'found', 'with the message');

# ---- a client that leaves -------------------------------------------------------
$sock = send_request($port, 'GET', '/api/v1/pop/queue/lp.gone?wait=true&timeout=60000');
ok(wait_for(sub { parked() == 1 }), 'parked');
close $sock;
ok(wait_for(sub { parked() == 0 }, 30), 'a parked pop whose client left is dropped');

# ---- shutdown -------------------------------------------------------------------
$sock = send_request($port, 'GET', '/api/v1/pop/queue/lp.q?wait=true&timeout=60000');
ok(wait_for(sub { parked() == 1 }), 'a pop is parked when the cluster stops');
ok(metric($port, 'queen_pop_empty_total') >= 2, 'empty answers are counted');
is_deeply([ log_crashes($node) ], [], 'nothing crashed');
$node->stop('fast');
($status, undef, $raw) = read_response($sock, 30);
is($status, 204, 'the shutdown answered it 204');
done_testing();
