# Clients refused at queen.http_max_connections read a complete 503.  The
# listener used to send the 503 and close at once; a client whose request
# had arrived (or arrived next) then got a TCP reset, which can destroy the
# 503 before it is read: at 10,000 open connections one /health in three
# failed so.  Now a refused connection is shut down for writing after its
# 503 and read until the client closes (a lingering close), a bounded
# number at a time.  Out of descriptors, the 503 is sent the same way but
# the descriptor is given back at once, after discarding what the client
# sent.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IO::Socket::INET;
use IO::Select;
use Errno qw(ECONNRESET);
use Time::HiRes qw(time);
use QueenHTTP;

my $limit = 16;
my ($node, $port) = start_broker(
	name => 'refusals',
	shards => 2,
	extra => "queen.http_max_connections = $limit\n");

sub connect_one
{
	my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp')
	  or die "connect: $!";
	return $s;
}

# Open $n connections, each writing GET /health as soon as it is connected,
# then read every one to its end.  With stopped, the listener is stopped
# (SIGSTOP) while they connect and write, so each request is waiting in its
# socket when the connection is accepted: the case that used to end in a
# reset every time.  Returns a hash of counts: 503 (complete 503s), 200
# (complete 200s, on connections the listener took), reset, empty, other.
sub burst
{
	my ($n, %opt) = @_;
	my $listener = last_listener_pid($node);
	my @socks;
	kill 'STOP', $listener if $opt{stopped};
	for (1 .. $n)
	{
		my $s = connect_one();
		syswrite($s, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
		push @socks, $s;
	}
	kill 'CONT', $listener if $opt{stopped};
	my %got = map { ($_ => '') } @socks;
	my %open = map { ($_ => $_) } @socks;
	my %reset;
	my $deadline = time + ($opt{timeout} // 60);
	while (%open && time < $deadline)
	{
		my @ready = IO::Select->new(values %open)->can_read($deadline - time) or last;
		for my $s (@ready)
		{
			my $r = sysread($s, my $buf, 4096);
			if ($r)
			{
				$got{$s} .= $buf;
				# a 200 is an accepted, kept-alive connection: it stays open
				delete $open{$s} if $got{$s} =~ /\AHTTP\/1\.1 200 .*\}\z/s;
				next;
			}
			$reset{$s} = 1 if !defined $r && $! == ECONNRESET;
			delete $open{$s};
		}
	}
	my %count = map { ($_ => 0) } qw(503 200 reset empty other);
	for my $s (@socks)
	{
		my ($head, $body) = split /\r\n\r\n/, $got{$s}, 2;
		my ($status) = ($head // '') =~ /\AHTTP\/1\.1 (\d{3}) /;
		my ($len) = ($head // '') =~ /^Content-Length: (\d+)\r?$/mi;
		if ($reset{$s}) { $count{reset}++; }
		elsif ($got{$s} eq '') { $count{empty}++; }
		elsif (defined $status && ($status == 503 || $status == 200)
			&& defined $len && length($body) == $len)
		{
			$count{$status}++;
		}
		else { $count{other}++; diag("unexpected answer: $got{$s}"); }
	}
	close $_ for @socks;
	note(join(', ', map { "$_: $count{$_}" } sort keys %count));
	return \%count;
}

# ---- at the limit: every client over it reads a whole 503 ------------------------
# the metrics request itself is one of the connections: 15 held + it = 16
my @held = map { connect_one() } 1 .. $limit - 1;
ok( wait_for(sub { (metric($port, 'queen_http_connections_open{listener="0"}') // -1) == $limit }),
	"$limit connections are open");
# the backlog is accepted in order: this one is taken before the bursts
push @held, connect_one();
my $refused_before = metric($port, 'queen_http_connections_refused_total{listener="0"}');

my $c = burst(100, stopped => 1);
is($c->{503}, 100,
	"100 clients over queen.http_max_connections = $limit, their requests sent before they were accepted, each read a complete 503");
is($c->{reset}, 0, 'none of them got a reset');
is($c->{empty} + $c->{other} + $c->{200}, 0, 'none of them got anything else, or nothing');

$c = burst(100);
is($c->{503}, 100, '100 clients sending as they connect each read a complete 503');
is($c->{reset}, 0, 'none of them got a reset');
is($c->{empty} + $c->{other} + $c->{200}, 0, 'none of them got anything else, or nothing');

# A client whose request follows the 503: it writes only once the 503 is
# waiting in its socket, and reads a moment later.  The listener, lingering,
# reads and drops the request.  (On loopback a reset that came after the
# listener's FIN would leave the 503 readable too, so this guards the
# answer, not the lingering; what the lingering adds is a live socket that
# retransmits a 503 lost on a real network.)
my @late = map { connect_one() } 1 .. 5;
ok( wait_for(sub { scalar(IO::Select->new(@late)->can_read(0)) == 5 }, 30),
	'five more clients over the limit have their 503 waiting');
syswrite($_, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n") for @late;
Time::HiRes::sleep(0.3);		# for a reset, had there been one, to arrive
my ($late_whole, $late_reset) = (0, 0);
for my $s (@late)
{
	my $got = '';
	while (IO::Select->new($s)->can_read(10))
	{
		my $r = sysread($s, my $buf, 4096);
		if ($r) { $got .= $buf; next; }
		$late_reset++ if !defined $r && $! == ECONNRESET;
		last;
	}
	$late_whole++ if $got =~ /\AHTTP\/1\.1 503 .*\r\n\r\n\{"error":"too many open connections"\}\z/s;
	close $s;
}
is($late_whole, 5, 'clients that send after the 503 arrived still read it whole');
is($late_reset, 0, 'and get no reset');

close $_ for @held;
ok(wait_for(sub { my ($s) = http_request($port, 'GET', '/health'); $s == 200 }),
	'/health answers 200 again once the held connections are closed');
cmp_ok(metric($port, 'queen_http_connections_refused_total{listener="0"}'), '>=',
	$refused_before + 205, 'queen_http_connections_refused_total counts the refusals');
ok(wait_for(sub { (metric($port, 'queen_http_connections_open{listener="0"}') // -1) == 1 }),
	'refused connections were never counted as open');

# ---- out of descriptors: the 503 is read whole ------------------------------------
# Lower the listener's open-file limit from outside, below what the burst
# needs: accept() fails with EMFILE and the spare descriptor takes each
# client beyond off the backlog to refuse it.
ok(set_max_connections($node, 10000), 'queen.http_max_connections = 10000 applied');
my $listener = last_listener_pid($node);
is(system('prlimit', "--pid=$listener", '--nofile=60:60'), 0,
	'lowered the listener\'s open-file limit to 60');
$c = burst(100, stopped => 1, timeout => 15);
cmp_ok($c->{503}, '>=', 10, "clients beyond the descriptors read a whole 503 ($c->{503})");
is($c->{reset}, 0, 'none of them got a reset');
is($c->{other}, 0, 'none got anything but a 503 or, on a connection it took, a 200');
ok(wait_for(sub { my ($s) = http_request($port, 'GET', '/health'); $s == 200 }),
	'/health answers 200 again once they are gone');

is_deeply([ log_crashes($node) ], [], 'no worker crashed');
done_testing();
