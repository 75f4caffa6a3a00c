# Two listener processes share the port (SO_REUSEPORT), each with its own
# rings to every shard: concurrent clients spread over both are answered,
# everything answered "queued" is stored exactly once, and both listeners
# served some of the connections (each connection's socket is found in one
# listener's file descriptors, through /proc).
use strict;
use warnings;

use IO::Socket::INET;
use JSON::PP;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use QueenHTTP;
use Time::HiRes qw(time);
use IO::Select;

$ENV{QUEEN_LOAD} or plan skip_all => 'QUEEN_LOAD (bench/queen-load) not given';

my ($node, $port) = start_broker(
	name => 'listeners',
	shards => 3,
	extra => "queen.http_workers = 2\n");

# listeners hold no database connection, so the log tells their pids
sub listener_pids
{
	my %pid;
	for (split /\n/, slurp_file($node->logfile))
	{
		$pid{$2} = $1 if /\[(\d+)\] LOG:  queen listener (\d+): listening on/;
	}
	return %pid;
}
ok(wait_for(sub { my %p = listener_pids(); keys %p == 2 }), 'two listeners bound the port');

my $tmp = PostgreSQL::Test::Utils::tempdir;
my $results = "$tmp/load.tsv";
my $summary = run_load(
	$port, '--connections', 48, '--requests', 3000,
	  '--items', 3, '--partitions', 200, '--queue', 'two', '--txn-prefix', 'l',
	  '--results', $results, '--timeout', 120);
is($summary->{http}{201}, 3000, 'all requests answered 201');

my ($queued, $not_once, $wrong_id, $unanswered, $other) =
  verify_results($node, $results, 'two');
is($queued, 9000, 'every item answered queued');
is($not_once, 0, 'each stored exactly once');
is($wrong_id, 0, 'under the id the client was given');
is($unanswered, 0, 'nothing stored that was not answered');
is(gapless($node, 'two'), '0', 'offsets are gapless per partition');

# ---- both listeners serve ------------------------------------------------------
# 32 keep-alive connections, each answered one push and left open; the
# kernel spreads connections over the two sockets by a hash of their
# addresses, so each listener gets some (all 32 on one: 1 in 2^31).

# Read one answer (Content-Length framed) from a keep-alive connection.
sub read_one
{
	my ($sock) = @_;
	my $sel = IO::Select->new($sock);
	my $buf = '';
	my $deadline = time + 60;
	while (time < $deadline && $sel->can_read($deadline - time))
	{
		my $n = sysread($sock, $buf, 65536, length $buf);
		last unless $n;
		if ($buf =~ /^(.*?)\r\n\r\n/s)
		{
			my $head = $1;
			my ($len) = $head =~ /^Content-Length: (\d+)\r?$/mi;
			return ($head, substr($buf, length($head) + 4))
			  if defined $len && length($buf) >= length($head) + 4 + $len;
		}
	}
	return;
}

# The local ports of the established connections to the broker's port that
# a process holds, from its file descriptors and /proc/net/tcp{,6}.
sub client_ports_of
{
	my ($pid) = @_;
	my %inode;
	opendir(my $dh, "/proc/$pid/fd") or return ();
	for (readdir $dh)
	{
		my $target = readlink("/proc/$pid/fd/$_") // next;
		$inode{$1} = 1 if $target =~ /^socket:\[(\d+)\]$/;
	}
	closedir $dh;
	my @ports;
	for my $table ('/proc/net/tcp', '/proc/net/tcp6')
	{
		open(my $fh, '<', $table) or next;
		<$fh>;
		while (my $line = <$fh>)
		{
			my @f = split ' ', $line;
			my ($lport) = $f[1] =~ /:([0-9A-F]+)$/;
			my ($rport) = $f[2] =~ /:([0-9A-F]+)$/;
			push @ports, hex $rport
			  if hex($lport) == $port && $f[3] eq '01' && $inode{ $f[9] };
		}
		close $fh;
	}
	return @ports;
}

my %served_by;
my @conns;
my $answered = 0;
for my $i (1 .. 32)
{
	my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp')
	  or die "connect: $!";
	$sock->autoflush(1);
	my $body = JSON::PP->new->encode(
		{ items => [ { queue => 'two', partition => "conn$i", payload => $i } ] });
	print $sock "POST /api/v1/push HTTP/1.1\r\nHost: 127.0.0.1\r\n"
	  . "Content-Type: application/json\r\nContent-Length: " . length($body) . "\r\n\r\n$body";
	my ($head, $rbody) = read_one($sock);
	$answered++ if defined $head && $head =~ m{^HTTP/1\.1 201 } && $rbody =~ /"status":"queued"/;
	push @conns, $sock;
}
is($answered, 32, '32 keep-alive connections were each answered a push');
my %lpids = listener_pids();
for my $index (sort keys %lpids)
{
	$served_by{$_} = $index for client_ports_of($lpids{$index});
}
my @ours = map { $_->sockport } @conns;
is(scalar(grep { defined $served_by{$_} } @ours), 32,
	'each of them is held by a listener');
for my $index (sort keys %lpids)
{
	my $n = grep { ($served_by{$_} // -1) eq $index } @ours;
	cmp_ok($n, '>', 0, "listener $index served $n of the 32");
}
close $_ for @conns;

# a listener that exits with an error: the other keeps serving, it comes back
my %pids = listener_pids();
kill 'TERM', $pids{1};
ok( wait_for(sub { my %p = listener_pids(); $p{1} != $pids{1} }, 60),
	'the terminated listener is started again');
my ($s, $r) = push_items($port, { queue => 'two', partition => 'after', payload => 1 });
is($s, 201, 'pushes are answered after the listener restart');
is($r->[0]{status}, 'queued', 'and stored');
is_deeply([ log_crashes($node) ], [], 'no worker crashed');

$node->stop;
done_testing();
