# Consumption over HTTP, measured (docs/ARCHITECTURE.md, "Consumption in the
# broker"): the time from a push's answer to the answer of the long-poll it
# woke (40 trials), and one sequential client popping batch=100 and acking
# each batch.  It is a TAP file for PostgreSQL's test harness (it starts its
# own cluster with t/QueenHTTP.pm), kept out of t/ so the suite does not run
# it: copy it into t/ and run it as one of the TAP tests, e.g.
#   cp bench/consume-latency.pl t/099_measure.pl && make installcheck PROVE_TESTS=t/099_measure.pl
# The figures are printed as diagnostics.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use HTTP::Tiny;
use JSON::PP;
use QueenHTTP;

my ($node, $port) = start_broker(name => 'measure');
sub parked { return metric($port, 'queen_parked_long_polls') // -1; }
my @lat;
for my $i (1 .. 40)
{
	my $sock = send_request($port, 'GET', '/api/v1/pop/queue/w?wait=true&timeout=30000&autoAck=true');
	wait_for(sub { parked() == 1 });
	push_items($port, { queue => 'w', payload => $i });
	my $t0 = time;
	my ($s) = read_response($sock, 30);
	push @lat, (time - $t0) * 1000 if $s == 200;
}
@lat = sort { $a <=> $b } @lat;
diag(sprintf("wake: n=%d median %.2f ms p90 %.2f ms max %.2f ms", scalar @lat, $lat[@lat/2], $lat[int(@lat*0.9)], $lat[-1]));

# sequential pop(batch 100) + ack(batch 100), one client, keep-alive
my $ua = HTTP::Tiny->new(keep_alive => 1);
my $json = JSON::PP->new;
for my $b (1 .. 20)
{
	my $items = [ map { { queue => 'thr', partition => 'p' . ($_ % 10), payload => { n => $_ } } } 1 .. 1000 ];
	$ua->post("http://127.0.0.1:$port/api/v1/push", { content => $json->encode({ items => $items }), headers => { 'Content-Type' => 'application/json' } });
}
my ($n, $pops, $acks) = (0, 0, 0);
my ($tp, $ta) = (0, 0);
my $t0 = time;
while (1)
{
	my $a = time;
	my $r = $ua->get("http://127.0.0.1:$port/api/v1/pop/queue/thr?batch=100&partitions=10");
	$tp += time - $a;
	$pops++;
	last unless $r->{status} == 200;
	my $b = $json->decode($r->{content});
	my @acks = map { { transactionId => $_->{transactionId}, partitionId => $_->{partitionId}, leaseId => $_->{leaseId} } } @{ $b->{messages} };
	$a = time;
	my $sock = send_request($port, 'POST', '/api/v1/ack/batch', { acknowledgments => \@acks });
	my ($as, $ad) = read_response($sock, 30);
	die "ack $as" unless $as == 200 && !grep { !$_->{success} } @$ad;
	$ta += time - $a;
	$acks++;
	$n += @acks;
}
my $el = time - $t0;
diag(sprintf("pop+ack sequential: %d messages in %.2f s = %.0f msg/s; pop %.2f ms avg over %d, ack %.2f ms avg over %d", $n, $el, $n / $el, $tp * 1000 / $pops, $pops, $ta * 1000 / $acks, $acks));
ok(1);
$node->stop;
done_testing();
