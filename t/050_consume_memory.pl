# Consumption's memory is bounded (issue 29, findings 1 and 4).
#
# An ack body has an item cap, as a push body has: 8,388,609 empty items in
# 25 MB used to end the listener (invalid memory alloc request size
# 1476395008), dropping every connection and a parked pop with them; now it
# is refused with 413 before its items cost anything, and a body at the cap
# keeps the listener's and the shard's peak memory within the bounds below.
#
# A pop has a byte budget (queen.pop_max_bytes), always at least one
# message: 17 messages of 66 MB in one partition used to make every default
# pop answer 500 (out of memory: the body passes 1 GB) for ever; now each
# pop delivers one, within the bound below.
#
# Bounds (peak resident memory, VmHWM, reset before each phase):
#   listener during the 25 MB ack: 4 x the body + 64 MB
#   listener and shard for an ack at the cap (10,000 items): 64 MB each
#   shard for a pop of one 66 MB message: 5 x the message + 64 MB
#   (the segment decoded, the message kept, the answer rendered, the ring)
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use HTTP::Tiny;
use JSON::PP;
use QueenHTTP;

my ($node, $port) = start_broker(name => 'consmem', shards => 2);
my $listener = last_listener_pid($node);
ok($listener, 'the listener logged its pid');
my @shards = split /\n/, $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'queen shard' ORDER BY pid");
is(scalar @shards, 2, 'two shards');

sub mb { return sprintf('%.1f MB', $_[0] / 1024 / 1024); }

# Peak resident memory of $pid since the last reset, in bytes.
sub hwm
{
	my ($pid) = @_;
	my ($kb) = slurp_file("/proc/$pid/status") =~ /^VmHWM:\s+(\d+) kB/m;
	return $kb * 1024;
}

sub rss
{
	my ($pid) = @_;
	my ($kb) = slurp_file("/proc/$pid/status") =~ /^VmRSS:\s+(\d+) kB/m;
	return $kb * 1024;
}

# Start counting the peak afresh (the workers run as this test's user).
sub reset_peak
{
	for my $pid (@_)
	{
		open(my $fh, '>', "/proc/$pid/clear_refs") or die "clear_refs of $pid: $!";
		print $fh "5\n";
		close $fh;
	}
}

sub post
{
	my ($path, $body) = @_;
	my $ua = HTTP::Tiny->new(timeout => 300, keep_alive => 0);
	my $r = $ua->request('POST', "http://127.0.0.1:$port$path",
		{ content => $body, headers => { 'Content-Type' => 'application/json' } });
	return ($r->{status}, $r->{content});
}

sub listener_starts
{
	my $n = () = slurp_file($node->logfile) =~ /queen listener 0: listening on/g;
	return $n;
}

# ---- 1. a 25 MB ack of 8,388,609 empty items --------------------------------------
my $starts = listener_starts();
my $parked = send_request($port, 'GET', '/api/v1/pop/queue/idle?wait=true&timeout=60000');
ok(wait_for(sub { (metric($port, 'queen_parked_long_polls') // 0) >= 1 }, 30),
	'a pop is parked on another connection');

my $huge = '{"acknowledgments":[' . join(',', ('{}') x 8388609) . ']}';
reset_peak($listener);
my $before = rss($listener);
my ($status, $content) = post('/api/v1/ack/batch', $huge);
is($status, 413, mb(length $huge) . ' of empty acknowledgments is 413');
like($content, qr/more than 10000 items \(queen\.max_ack_items\)/, 'and names the limit');
my $peak = hwm($listener) - $before;
note('listener peak over its resident size: ' . mb($peak));
cmp_ok($peak, '<', 4 * length($huge) + 64 * 1024 * 1024,
	'the listener stays within 4 x the body + 64 MB');
ok(process_alive($listener), 'the listener is alive');
is(listener_starts(), $starts, 'and was never restarted');
push_items($port, { queue => 'idle', transactionId => 'wake', payload => 1 });
my ($ps, $pb) = read_response($parked, 60);
is($ps, 200, 'the parked pop is answered: its connection survived');
is($pb->{messages}[0]{transactionId}, 'wake', 'with the message that woke it');

# one item over the cap, of a valid shape: still 413, nothing applied
my $pid = '00000000-0000-0000-0000-00000000abcd';
my $item = qq({"transactionId":"x","partitionId":"$pid"});
($status, $content) = post('/api/v1/ack/batch',
	'{"acknowledgments":[' . join(',', ($item) x 10001) . ']}');
is($status, 413, '10,001 acknowledgments are 413');

# at the cap: answered per item, within the bounds
reset_peak($listener, @shards);
my %base = map { $_ => rss($_) } ($listener, @shards);
($status, $content) = post('/api/v1/ack/batch',
	'{"acknowledgments":[' . join(',', ($item) x 10000) . ']}');
is($status, 200, '10,000 acknowledgments are answered');
my $answered = () = $content =~ /"index":/g;
is($answered, 10000, 'one answer per item');
my $refused = () = $content =~ /"success":false,"error":"unresolvable: no such partition"/g;
is($refused, 10000, 'each saying why it was not applied');
for my $p ($listener, @shards)
{
	my $grew = hwm($p) - $base{$p};
	note("process $p peak over its resident size: " . mb($grew));
	cmp_ok($grew, '<', 64 * 1024 * 1024, "process $p stays within 64 MB for the ack at the cap");
}

# ---- 4. a backlog of 17 messages of 66 MB ----------------------------------------
my $size = 66_000_000;
my $pad = 'x' x $size;
for my $i (1 .. 17)
{
	($status) = post('/api/v1/push', qq({"items":[{"queue":"huge","partition":"p","transactionId":"h$i","payload":"$pad"}]}));
	is($status, 201, "message $i of 66 MB is pushed") or last;
}
undef $pad;
reset_peak($listener, @shards);
%base = map { $_ => rss($_) } ($listener, @shards);
my @got;
for my $i (1 .. 17)
{
	# read without a JSON decoder: a pure-Perl one takes seconds per 66 MB
	my ($s, $raw) = http_request($port, 'GET', '/api/v1/pop/queue/huge');
	unless (is($s, 200, "default pop $i is answered 200"))
	{
		diag(substr($raw // '', 0, 300));
		last;
	}
	my @txns = $raw =~ /"transactionId":"([^"]*)"/g;
	is(scalar @txns, 1, "pop $i delivers one message: the budget stops it before the second");
	push @got, $txns[0];
	ok(index($raw, '"data":"' . ('x' x 1000)) > 0 && length($raw) > $size
		&& length($raw) < $size + 2048, "pop $i delivers the whole message");
	my ($pid) = $raw =~ /"partitionId":"([^"]*)"/;
	my ($lease) = $raw =~ /"leaseId":"([^"]*)"/;
	my ($as, $ar) = http_json($port, 'POST', '/api/v1/ack',
		{ transactionId => $txns[0], partitionId => $pid, leaseId => $lease });
	ok($as == 200 && $ar->[0]{success}, "message $i is acknowledged");
}
is_deeply(\@got, [ map { "h$_" } 1 .. 17 ], 'every message delivered, in order');
my ($s204) = pop($port, '/api/v1/pop/queue/huge');
is($s204, 204, 'then nothing is left');
for my $p (@shards)
{
	my $grew = hwm($p) - $base{$p};
	note("shard $p peak over its resident size: " . mb($grew));
	cmp_ok($grew, '<', 5 * $size + 64 * 1024 * 1024,
		"shard $p stays within 5 x the message + 64 MB");
}
is(scalar(log_crashes($node)), 0, 'no worker crashed');

$node->stop;
done_testing();
