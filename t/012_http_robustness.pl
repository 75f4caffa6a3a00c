# Hostile and unlucky clients: malformed HTTP gets a 4xx or a closed
# connection and never crashes a worker; keep-alive and pipelining answer
# in order; a stalled client does not hold up others; bodies over the limit
# get 413; the framing's status codes (issue 14, finding 11): a request cut
# short is 400, a transfer coding other than chunked 501, an HTTP version
# other than 1.0/1.1 505, an overflowing chunk size a chunk error, and HEAD
# answers as GET without the body.  Then the extension is dropped and created again under a live
# broker, and a killed shard comes back while the listener keeps serving.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IO::Socket::INET;
use QueenHTTP;

my ($node, $port) = start_broker(
	name => 'robust',
	extra => "queen.max_body_bytes = 65536\nqueen.http_idle_timeout = 10000\n"
	  . "queen.http_body_timeout = 10000\n");

my $push = '{"items":[{"queue":"r","payload":1}]}';
my $len = length $push;

sub healthy_push
{
	my ($s) = http_request($port, 'POST', '/api/v1/push', $push);
	return $s == 201;
}

# ---- pipelining and keep-alive ---------------------------------------------------
my $two = "POST /api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Length: $len\r\n\r\n$push"
  . "GET /status HTTP/1.1\r\nHost: x\r\n\r\n"
  . "GET /nowhere HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
my $out = raw_exchange($port, $two, timeout => 10);
my @statuses = $out =~ m{HTTP/1\.1 (\d{3})}g;
is_deeply(\@statuses, [ 201, 200, 404 ], 'three pipelined requests answered in order');

# HTTP/1.0 closes by default
$out = raw_exchange($port, "GET /status HTTP/1.0\r\n\r\n", timeout => 5);
like($out, qr{^HTTP/1\.1 200}, 'HTTP/1.0 request answered');

# chunked upload
my $chunked = "POST /api/v1/push HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
  . sprintf("%x\r\n%s\r\n", 10, substr($push, 0, 10))
  . sprintf("%x\r\n%s\r\n", $len - 10, substr($push, 10)) . "0\r\n\r\n";
like(raw_exchange($port, $chunked), qr{^HTTP/1\.1 201}, 'a chunked body is accepted');

# ---- malformed requests ---------------------------------------------------------
my %bad = (
	'garbage request line' => "HELLO\r\n\r\n",
	'truncated request line' => "POST /api/v1/pu",
	'bad header' => "GET /status HTTP/1.1\r\nNo colon here\r\n\r\n",
	'bad chunk size' => "POST /api/v1/push HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nZZZ\r\nabc\r\n0\r\n\r\n",
	'oversized headers' => "GET /status HTTP/1.1\r\nHost: x\r\nX-Big: " . ('a' x 100_000) . "\r\n\r\n",
);
for my $name (sort keys %bad)
{
	my $reply = raw_exchange($port, $bad{$name}, half_close => 1, timeout => 5);
	ok($reply eq '' || $reply =~ m{^HTTP/1\.1 4\d\d}, "$name: 4xx or closed ("
		  . (length $reply ? substr($reply, 0, 12) : 'closed') . ')');
}

# a client that disconnects mid-body
raw_exchange($port,
	"POST /api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"items\":[",
	abort => 1);

# ---- status codes of the framing (issue 14, finding 11) --------------------------
# a client that stops sending mid-body but still reads is told why
$out = raw_exchange($port,
	"POST /api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"items\":[",
	half_close => 1, timeout => 10);
like($out, qr{^HTTP/1\.1 400 .*closed before the request body was complete}s,
	'a body cut short by the client is 400, not dropped silently');
$out = raw_exchange($port, "POST /api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Le",
	half_close => 1, timeout => 10);
like($out, qr{^HTTP/1\.1 400 .*closed before the request header was complete}s,
	'a header cut short by the client is 400');

# transfer codings other than chunked are not implemented
for my $te ('gzip, chunked', 'gzip', 'chunked, gzip', 'identity')
{
	$out = raw_exchange($port,
		"POST /api/v1/push HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: $te\r\n\r\n"
		  . sprintf("%x\r\n%s\r\n0\r\n\r\n", $len, $push),
		timeout => 10);
	like($out, qr{^HTTP/1\.1 501 }, "Transfer-Encoding: $te is 501");
}
is(scalar(() = raw_exchange($port, $chunked, timeout => 10) =~ /^HTTP\/1\.1 201/g), 1,
	'Transfer-Encoding: chunked still works');

# only HTTP/1.0 and HTTP/1.1
for my $v ('9.9', '2.0', '1.2', '0.9')
{
	$out = raw_exchange($port, "GET /status HTTP/$v\r\nHost: x\r\n\r\n", timeout => 10);
	like($out, qr{^HTTP/1\.1 505 }, "HTTP/$v is 505");
}

# a chunk size that overflows is a chunk error
$out = raw_exchange($port,
	"POST /api/v1/push HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
	  . "FFFFFFFFFFFFFFFFFFFF\r\nabc\r\n0\r\n\r\n",
	timeout => 10);
like($out, qr{^HTTP/1\.1 400 .*chunk size}s, 'an overflowing chunk size is 400 naming the chunk size');
unlike((split /\r\n\r\n/, $out, 2)[1] // '', qr{content.length}i,
	'and says nothing of a content length');

# HEAD answers as GET, without the body
for my $path ('/health', '/metrics/prometheus')
{
	my $get = raw_exchange($port, "GET $path HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
		timeout => 10);
	my $head = raw_exchange($port, "HEAD $path HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
		timeout => 10);
	like($head, qr{^HTTP/1\.1 200 }, "HEAD $path is 200");
	like($head, qr{\r\n\r\n\z}, "HEAD $path has no body");
	my ($ct_get) = $get =~ /^(Content-Type: [^\r]*)/mi;
	my ($ct_head) = $head =~ /^(Content-Type: [^\r]*)/mi;
	is($ct_head, $ct_get, "HEAD $path has GET's content type");
}

# too large, announced and chunked
my $big = '{"items":[{"queue":"r","payload":"' . ('x' x 70_000) . '"}]}';
my ($status) = http_request($port, 'POST', '/api/v1/push', $big);
is($status, 413, 'a body over queen.max_body_bytes is 413');
my $big_chunked = "POST /api/v1/push HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
  . join('', map { sprintf("%x\r\n%s\r\n", 10_000, 'y' x 10_000) } 1 .. 8) . "0\r\n\r\n";
like(raw_exchange($port, $big_chunked, timeout => 10), qr{^HTTP/1\.1 413},
	'a chunked body growing over the limit is 413');

ok(healthy_push(), 'the broker still serves after the malformed requests');

# ---- a stalled client does not hold up others ----------------------------------
my $stalled = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port)
  or die "connect: $!";
print $stalled "POST /api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n{\"it";
# A broker that served no one while a client stalls would answer the other
# push only after the body deadline closed the stalled connection, so that
# connection must still be open (nothing to read) once the push is
# answered: a check of order, not of speed, with 10 s of room.
ok(healthy_push(), 'another client is served while one stalls mid-body');
my $rin = '';
vec($rin, fileno($stalled), 1) = 1;
is(select(my $rout = $rin, undef, undef, 0), 0,
	'without waiting for the stalled one: it is still open');
# the body deadline (10 s here) answers the stalled connection 408
my $stalled_got = '';
ok( wait_for(
		sub {
			my $rin = '';
			vec($rin, fileno($stalled), 1) = 1;
			return 0 unless select(my $rout = $rin, undef, undef, 0.1);
			my $n = sysread($stalled, my $buf, 4096);
			$stalled_got .= $buf if $n;
			return defined $n && ($n == 0 || $buf =~ /^HTTP/);
		},
		60),
	'the stalled connection is answered after queen.http_body_timeout');
like($stalled_got, qr{^HTTP/1\.1 408 .*request body was not complete}s, 'with 408');
close $stalled;

is_deeply([ log_crashes($node) ], [], 'no worker crashed on bad input');

# ---- DROP EXTENSION and CREATE EXTENSION under a live broker --------------------
# A push whose bundle fails because the tables just went away is spooled
# and answered "buffered"; the drain commits it once the extension is back.
my $buffered = 0;
$node->safe_psql('postgres', 'DROP EXTENSION queen');
ok( wait_for(
		sub {
			my ($s, $body) = http_request($port, 'POST', '/api/v1/push', $push);
			$buffered++ if $s == 201 && $body =~ /"status":"buffered"/;
			return $s == 503;
		}),
	'after DROP EXTENSION pushes are 503');
$node->safe_psql('postgres', 'CREATE EXTENSION queen');
ok(wait_for(\&healthy_push, 60), 'after CREATE EXTENSION pushes are stored again');
ok( wait_for(
		sub {
			$node->safe_psql('postgres', "SELECT count(*) FROM queen.read('r')") eq 1 + $buffered;
		},
		30),
	"the push after re-creation is stored in the new tables, with the $buffered spooled meanwhile");

# ---- a shard killed with SIGTERM comes back ----------------------------------------
my $pids = $node->safe_psql('postgres',
	"SELECT string_agg(pid::text, ' ') FROM pg_stat_activity WHERE backend_type = 'queen shard'");
my @shards = split ' ', $pids;
cmp_ok(scalar @shards, '==', 4, 'four shards connected');
kill 'TERM', $shards[0];
ok( wait_for(
		sub {
			my $now = $node->safe_psql('postgres',
				"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'queen shard' AND pid <> $shards[0]");
			return $now == 4;
		},
		60),
	'the terminated shard is started again');
ok(wait_for(sub {
	my ($s, $r) = push_items($port, map { { queue => 'after', partition => "p$_", payload => $_ } } 1 .. 40);
	return $s == 201 && !grep { $_->{status} ne 'queued' } @$r;
}, 60), 'pushes to every shard succeed after the restart');

is_deeply([ log_crashes($node) ], [], 'no worker crashed');
$node->stop;
done_testing();
