# The listener's memory per push is bounded (issue 14, finding 9): a body
# with more than queen.max_push_items items is refused with 413 before its
# items cost anything, and a 64 MB body at the item limit keeps the
# listener's peak (VmHWM) within four times the body plus 1 kB per item
# (docs/HTTP.md).  Before, 2.5 million tiny items in 64 MB took 1.5 GB
# and a 412 MB response.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use HTTP::Tiny;
use JSON::PP;
use QueenHTTP;

my ($node, $port) = start_broker(name => 'memory', shards => 2);
my $listener = last_listener_pid($node);
ok($listener, 'the listener logged its pid');

my $limit = 64 * 1024 * 1024;    # queen.max_body_bytes' default
my $max_items = 10000;           # queen.max_push_items' default

# The listener's peak resident memory so far, in bytes.
sub hwm
{
	my ($kb) = slurp_file("/proc/$listener/status") =~ /^VmHWM:\s+(\d+) kB/m;
	return $kb * 1024;
}

sub post
{
	my ($body) = @_;
	my $ua = HTTP::Tiny->new(timeout => 600, keep_alive => 0);
	my $r = $ua->request('POST', "http://127.0.0.1:$port/api/v1/push",
		{ content => $body, headers => { 'Content-Type' => 'application/json' } });
	return ($r->{status}, $r->{content});
}

sub mb { return sprintf('%.1f MB', $_[0] / 1024 / 1024); }

my $base = hwm();
note('listener VmHWM before: ' . mb($base));

# ---- just over the item limit: 413, nothing stored ---------------------------------
my $item = '{"queue":"tiny","payload":1}';
my ($status, $content) = post('{"items":[' . join(',', ($item) x ($max_items + 1)) . ']}');
is($status, 413, 'one item over queen.max_push_items is 413');
# (ok, not like: before the limit the answer was a 1.6 MB array)
ok($content =~ /more than $max_items items in one request.*queen\.max_push_items/,
	'and says why: ' . substr($content, 0, 120));
is($node->safe_psql('postgres', "SELECT count(*) FROM queen.queues WHERE name = 'tiny'"), '0',
	'nothing was stored');

# ---- 64 MB of tiny items: refused, the listener holds little more than the body ----
my $n = int(($limit - 20) / (length($item) + 1));
my $tiny = '{"items":[' . join(',', ($item) x $n) . ']}';
cmp_ok(length $tiny, '<=', $limit, 'the tiny-item body is within queen.max_body_bytes');
($status, $content) = post($tiny);
is($status, 413, "$n items in " . mb(length $tiny) . ' are 413');
my $after_tiny = hwm() - $base;
note('listener VmHWM growth for the refused ' . mb(length $tiny) . " body of $n items: " . mb($after_tiny));
cmp_ok($after_tiny, '<=', 2 * length($tiny),
	'refusing it cost the listener at most twice the body (' . mb($after_tiny) . ')');
undef $tiny;

# ---- 64 MB at the item limit: accepted, within 4 x body + 1 kB per item ------------
my $payload_len = int(($limit - 100 - $max_items * 60) / $max_items);
my @items = map {
	sprintf('{"queue":"big","partition":"p%d","payload":"%s"}', $_ % 16, ('x' x $payload_len))
} 1 .. $max_items;
my $big = '{"items":[' . join(',', @items) . ']}';
undef @items;
cmp_ok(length $big, '<=', $limit, 'the large body is within queen.max_body_bytes');
cmp_ok(length $big, '>', $limit - 2 * 1024 * 1024, 'and close to it (' . mb(length $big) . ')');
($status, $content) = post($big);
is($status, 201, "$max_items items in " . mb(length $big) . ' are 201');
my $res = eval { decode_json($content) } // [];
is(scalar(grep { $_->{status} eq 'queued' } @$res), $max_items, 'every item queued');
my $growth = hwm() - $base;
my $bound = 4 * length($big) + 1024 * $max_items;
note('listener VmHWM growth for the accepted ' . mb(length $big) . " body of $max_items items: " . mb($growth)
	  . ' (bound ' . mb($bound) . ')');
cmp_ok($growth, '<=', $bound,
	'the listener peaked within 4 x body + 1 kB per item (' . mb($growth) . ' of ' . mb($bound) . ')');
is(stored_count($node, 'big'), $max_items, 'and every item is stored');

is_deeply([ log_crashes($node) ], [], 'no worker crashed');
$node->stop;
done_testing();
