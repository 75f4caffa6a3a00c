# Pipelined requests behind one that is answered outside the parse loop: a
# parked long-poll answered at its timeout, a pop answered by its shard, a
# push, a control request run by a shard.  The request behind must be served
# as soon as the one before it is answered, not at the listener's next
# periodic turn (10 s): before the fix, "/status" behind a parked pop came
# ~10 s after the pop's 204.  Answers are checked in request order, and the
# gaps only against a bound far below that 10 s and far above what serving
# them takes, so a busy machine does not make the test fail.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IO::Socket::INET;
use IO::Select;
use Time::HiRes qw(time);
use QueenHTTP;

my ($node, $port) = start_broker(name => 'pipeline');

# The listener's periodic turn is 10 s; an answer held until it would come
# at least that long after the one before.  Anything under this bound was
# served at once.
my $gap_bound = 3;

# Write every request in one write on one connection and read $n answers.
# Returns a list of [status, body, arrival time] in the order they came,
# and the time the requests were written.
sub pipeline
{
	my ($n, @requests) = @_;
	my $sock = IO::Socket::INET->new(
		PeerAddr => '127.0.0.1',
		PeerPort => $port,
		Proto => 'tcp') or die "connect: $!";
	$sock->autoflush(1);
	my $sent = time;
	syswrite($sock, join('', @requests)) or die "write: $!";
	my $sel = IO::Select->new($sock);
	my ($buf, @answers) = ('');
	my $deadline = time + 60;
	while (@answers < $n && time < $deadline)
	{
		last unless $sel->can_read($deadline - time);
		my $got = sysread($sock, my $chunk, 65536);
		last unless $got;
		my $now = time;
		$buf .= $chunk;
		# take every complete answer the buffer holds
		while ($buf =~ /\A(HTTP\/1\.1 (\d{3}) [^\r]*\r\n(.*?)\r\n\r\n)/s)
		{
			my ($head, $status, $fields) = ($1, $2, $3);
			my ($len) = $fields =~ /^Content-Length: (\d+)\r?$/mi;
			$len //= 0;			  # a 204 has no body and no length for one
			last if length($buf) < length($head) + $len;
			push @answers, [ $status, substr($buf, length $head, $len), $now ];
			substr($buf, 0, length($head) + $len) = '';
		}
	}
	close $sock;
	return ($sent, @answers);
}

sub get { return "GET $_[0] HTTP/1.1\r\nHost: x\r\n\r\n"; }

sub post
{
	my ($path, $body) = @_;
	return "POST $path HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
	  . 'Content-Length: ' . length($body) . "\r\n\r\n" . $body;
}

# Check $n answers: their statuses in order, and each came soon after the
# one before it.
sub check
{
	my ($what, $sent, $answers, @statuses) = @_;
	is(scalar(@$answers), scalar(@statuses), "$what: every answer came");
	is_deeply([ map { $_->[0] } @$answers ], \@statuses, "$what: answers in request order");
	for my $i (1 .. $#$answers)
	{
		my $gap = $answers->[$i][2] - $answers->[ $i - 1 ][2];
		note(sprintf('%s: answer %d at %.3f s, %.3f s after the one before',
				$what, $i, $answers->[$i][2] - $sent, $gap));
		cmp_ok($gap, '<', $gap_bound,
			"$what: answer $i came right after answer " . ($i - 1));
	}
	note(sprintf('%s: answer 0 at %.3f s', $what, $answers->[0][2] - $sent)) if @$answers;
}

my $status_re = qr/"status":"ok"/;

# ---- a parked pop answered at its timeout, then /status ------------------------
my ($sent, @a) = pipeline(2,
	get('/api/v1/pop/queue/pl.empty?wait=true&timeout=1000'), get('/status'));
check('parked pop, status', $sent, \@a, 204, 200);
like($a[1][1] // '', $status_re, 'the second answer is /status\'s');
cmp_ok($a[0][2] - $sent, '>=', 0.9, 'the pop was answered at its timeout, not before');

# ---- two parked pops, then /status: the delays must not add up -----------------
($sent, @a) = pipeline(3,
	get('/api/v1/pop/queue/pl.empty?wait=true&timeout=1000'),
	get('/api/v1/pop/queue/pl.empty?wait=true&timeout=1000'),
	get('/status'));
check('parked pop, parked pop, status', $sent, \@a, 204, 204, 200);
cmp_ok($a[1][2] - $a[0][2], '>=', 0.9, 'the second pop waited its own timeout');

# ---- a parked pop woken by a push, then /status --------------------------------
my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp')
  or die "connect: $!";
$sock->autoflush(1);
syswrite($sock, get('/api/v1/pop/queue/pl.woken?wait=true&timeout=30000') . get('/status'));
ok(wait_for(sub { (metric($port, 'queen_parked_long_polls') // 0) == 1 }), 'the pop is parked');
push_items($port, { queue => 'pl.woken', payload => 'wake' });
{
	my $sel = IO::Select->new($sock);
	my $buf = '';
	my $deadline = time + 60;
	my $first;
	while (time < $deadline && $sel->can_read($deadline - time))
	{
		last unless sysread($sock, my $chunk, 65536);
		$buf .= $chunk;
		$first //= time if $buf =~ /"messages":\[/;
		last if $buf =~ $status_re;
	}
	my $last = time;
	like($buf, qr/\AHTTP\/1\.1 200 .*"data":"wake".*HTTP\/1\.1 200 .*"status":"ok"/s,
		'woken pop, status: the message, then /status');
	cmp_ok($last - ($first // 0), '<', $gap_bound, 'woken pop, status: /status came right after');
	close $sock;
}

# ---- answered by a shard: a pop that finds something, a push, /health ----------
push_items($port, { queue => 'pl.full', payload => 1 });
($sent, @a) = pipeline(2, get('/api/v1/pop/queue/pl.full?autoAck=true'), get('/status'));
check('pop answered by its shard, status', $sent, \@a, 200, 200);
($sent, @a) = pipeline(2, get('/api/v1/pop/queue/pl.none'), get('/status'));
check('empty pop without wait, status', $sent, \@a, 204, 200);
($sent, @a) = pipeline(3,
	post('/api/v1/push', '{"items":[{"queue":"pl.push","payload":1}]}'),
	post('/api/v1/push', '{"items":[{"queue":"pl.push","payload":2}]}'),
	get('/status'));
check('push, push, status', $sent, \@a, 201, 201, 200);
($sent, @a) = pipeline(3, get('/health'), get('/health'), get('/status'));
check('health, health, status', $sent, \@a, 200, 200, 200);

is_deeply([ log_crashes($node) ], [], 'nothing crashed');
done_testing();
