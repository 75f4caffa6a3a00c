# Connections and slow clients (issue 14, finding 7): the listener raises its
# open-file limit to fit queen.http_max_connections; a client over the limit,
# or arriving when the process is out of descriptors, is answered 503 at
# once instead of hanging in the backlog; a header or a body trickled a byte
# at a time is cut off by a deadline that bytes do not extend (408).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IO::Socket::INET;
use IO::Select;
use Time::HiRes qw(time sleep);
use QueenHTTP;

my ($node, $port) = start_broker(
	name => 'limits',
	shards => 2,
	extra => "queen.http_idle_timeout = 30000\n"
	  . "queen.http_header_timeout = 2000\n"
	  . "queen.http_body_timeout = 3000\n");

my $listener = last_listener_pid($node);
ok($listener, 'the listener logged its pid');

# Soft and hard "Max open files" of a process.
sub nofile
{
	my ($pid) = @_;
	my $limits = slurp_file("/proc/$pid/limits");
	my ($soft, $hard) = $limits =~ /^Max open files\s+(\S+)\s+(\S+)/m;
	$_ = ($_ eq 'unlimited' ? 1e18 : $_) for $soft, $hard;
	return ($soft, $hard);
}

# ---- the open-file limit fits the connections ------------------------------------
my ($soft, $hard) = nofile($listener);
my $want = 10000 + 64;    # queen.http_max_connections' default and the reserve
cmp_ok($soft, '>=', ($hard < $want ? $hard : $want),
	"the listener's soft open-file limit ($soft, hard $hard) is raised to fit 10000 connections");
like(slurp_file($node->logfile), qr/DETAIL:  Up to \d+ connections; open-file limit \d+/,
	'the listener logs how many connections it allows');

# Open $n connections that send nothing; returns the sockets.
sub open_idle
{
	my ($n) = @_;
	my @socks;
	for (1 .. $n)
	{
		my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp')
		  or die "connect: $!";
		push @socks, $s;
	}
	return @socks;
}

# For each socket: what it received before the server closed it or $timeout
# passed ('' for a socket that is still open and silent).
sub replies
{
	my ($timeout, @socks) = @_;
	my %got = map { ($_ => '') } @socks;
	my %open = map { ($_ => $_) } @socks;
	my $deadline = time + $timeout;
	while (%open && time < $deadline)
	{
		my $sel = IO::Select->new(values %open);
		for my $s ($sel->can_read($deadline - time))
		{
			my $n = sysread($s, my $buf, 4096);
			if ($n) { $got{$s} .= $buf; }
			else { delete $open{$s}; }
			delete $open{$s} if $got{$s} =~ /\r\n\r\n.*\}/s;
		}
	}
	return map { $got{$_} } @socks;
}

# ---- over queen.http_max_connections: 503 ------------------------------------------
ok(set_max_connections($node, 20), 'queen.http_max_connections = 20 applied');
my @held = open_idle(20);
# the backlog is accepted in order: these come after the 20
my @over = open_idle(5);
my @got = replies(15, @over);
is(scalar(grep { /^HTTP\/1\.1 503 .*too many open connections/s } @got), 5,
	'five clients over queen.http_max_connections = 20 are answered 503');
close $_ for @held, @over;
ok(wait_for(sub { my ($s) = http_request($port, 'GET', '/status'); $s == 200 }),
	'the listener serves again once they are gone');
ok(set_max_connections($node, 10000), 'queen.http_max_connections = 10000 applied');

# ---- out of descriptors: 503 at once, never a hang ---------------------------------
# Lower the listener's limit from outside, below what its connections need:
# accept() then fails with EMFILE, and the clients behind must still be told.
my $rc = system('prlimit', "--pid=$listener", '--nofile=80:80');
is($rc, 0, 'lowered the listener\'s open-file limit to 80');
@held = open_idle(100);
@got = replies(15, @held);
my $refused = grep { /^HTTP\/1\.1 503 / } @got;
my $silent = grep { $_ eq '' } @got;
cmp_ok($refused, '>=', 20, "clients beyond the descriptors are answered 503 ($refused of 100)");
is($refused + $silent, 100, 'every other client holds an open connection (none hangs unanswered and none gets anything else)');
close $_ for @held;
ok(wait_for(sub { my ($s) = http_request($port, 'GET', '/status'); $s == 200 }),
	'the listener serves again once they are gone');
like(slurp_file($node->logfile), qr/out of file descriptors .* new clients get 503/,
	'the log says descriptors ran out');
cmp_ok(metric($port, 'queen_http_connections_refused_total{listener="0"}'), '>=', 5 + $refused,
	'queen_http_connections_refused_total counts both kinds of refusal');

# ---- a trickled header or body meets a deadline ------------------------------------
# Send $bytes one byte every 0.2 s (well inside the idle timeout of 30 s,
# which each byte used to restart), until the server answers or closes.
# Returns (what it answered, how many bytes it took).
sub trickle
{
	my ($prefix, $bytes) = @_;
	my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp')
	  or die "connect: $!";
	$s->autoflush(1);
	print $s $prefix if length $prefix;
	my $sel = IO::Select->new($s);
	my $out = '';
	my $sent = 0;
	for my $c (split //, $bytes)
	{
		last unless defined send($s, $c, 0);
		$sent++;
		if ($sel->can_read(0.2))
		{
			my $n = sysread($s, my $buf, 4096);
			$out .= $buf if $n;
			last;
		}
	}
	# the answer may still be on its way
	while ($out !~ /\}\z/ && $sel->can_read(5))
	{
		my $n = sysread($s, my $buf, 4096);
		last unless $n;
		$out .= $buf;
	}
	close $s;
	return ($out, $sent);
}

# 400 header bytes take 80 s at this pace; the deadline is 2 s
my $header = "POST /api/v1/push HTTP/1.1\r\nHost: x\r\n" . ('X-Slow: ' . ('a' x 50) . "\r\n") x 7 . "\r\n";
my ($ans, $sent) = trickle('', $header);
like($ans, qr{^HTTP/1\.1 408 .*request header was not complete within 2000 ms}s,
	'a header sent a byte at a time gets 408 from queen.http_header_timeout');
cmp_ok($sent, '<', length $header, "before it was complete ($sent of " . length($header) . ' bytes)');

my $body = '{"items":[{"queue":"slow","payload":"' . ('b' x 300) . '"}]}';
my $head = "POST /api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Length: " . length($body) . "\r\n\r\n";
($ans, $sent) = trickle($head, $body);
like($ans, qr{^HTTP/1\.1 408 .*request body was not complete within 3000 ms}s,
	'a body sent a byte at a time gets 408 from queen.http_body_timeout');
cmp_ok($sent, '<', length($body), "before it was complete ($sent of " . length($body) . ' bytes)');

# the deadlines do not touch a client that sends at once
my ($st) = http_request($port, 'POST', '/api/v1/push', $body);
is($st, 201, 'a push sent at once is answered 201');

is_deeply([ log_crashes($node) ], [], 'no worker crashed');
$node->stop;
done_testing();
