# Tenants on the HTTP door: with queen.tenant_header set, the header's
# UUID places a request in a tenant, and two tenants using the same queue
# names never see each other's queues, messages, consumer groups, dead
# letters or metrics series on any route; a malformed header is 400; no
# header is the default tenant.
use strict;
use warnings;

use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use QueenHTTP;

my ($node, $port) = start_broker(name => 'tenants', shards => 2,
	extra => "queen.tenant_header = 'x-queen-tenant'\nqueen.stats_interval = 1\nqueen.consumer_lag_interval = 1\n");
my $json = JSON::PP->new->canonical;
my %tenant = (a => '00000000-0000-0000-0000-00000000000a', b => '00000000-0000-0000-0000-00000000000b');

sub call
{
	my ($t, $method, $path, $body) = @_;
	my %h;
	$h{'x-queen-tenant'} = $tenant{$t} if defined $t;
	my ($s, $content) = http_request($port, $method, $path,
		defined $body ? (ref $body ? $json->encode($body) : $body) : undef, \%h);
	my $d = eval { $json->decode($content) };
	return ($s, $d, $content);
}

# the same names in both tenants
for my $t (qw(a b))
{
	my ($s, $d) = call($t, 'POST', '/api/v1/configure', { queue => 'shared', namespace => "ns-$t", options => { retryLimit => 0 } });
	is($s, 200, "configure in tenant $t");
	($s, $d) = call($t, 'POST', '/api/v1/push',
		{ items => [ map { { queue => 'shared', partition => 'p', transactionId => "$t-$_", payload => { tenant => $t, n => $_ } } } 1 .. 3 ] });
	is(join(',', map { $_->{status} } @$d), 'queued,queued,queued', "push in tenant $t");
	($s, $d) = call($t, 'POST', '/api/v1/push', { items => [ { queue => "only-$t", payload => { n => 0 } } ] });
}

# pops see their own tenant's messages
my ($s, $d) = call('a', 'GET', '/api/v1/pop/queue/shared?batch=10&consumerGroup=g');
is(join(',', map { $_->{data}{tenant} } @{ $d->{messages} }), 'a,a,a', 'tenant a pops its own messages');
my @msgs = @{ $d->{messages} };
# one of them into a's DLQ
($s) = call('a', 'POST', '/api/v1/ack', { transactionId => $msgs[0]{transactionId}, partitionId => $msgs[0]{partitionId},
	leaseId => $msgs[0]{leaseId}, consumerGroup => 'g', status => 'failed', error => 'a-only' });
($s, $d) = call('b', 'GET', '/api/v1/pop/queue/shared?batch=10&autoAck=true');
is(join(',', map { $_->{data}{tenant} } @{ $d->{messages} }), 'b,b,b', 'tenant b pops its own');

# listings: each tenant its own
($s, $d) = call('a', 'GET', '/api/v1/resources/queues');
is(join(',', sort map { $_->{name} } @{ $d->{queues} }), 'only-a,shared', 'resources/queues: a sees a\'s');
($s, $d) = call('b', 'GET', '/api/v1/resources/queues');
is(join(',', sort map { $_->{name} } @{ $d->{queues} }), 'only-b,shared', 'resources/queues: b sees b\'s');
($s) = call('b', 'GET', '/api/v1/resources/queues/only-a');
is($s, 404, 'another tenant\'s queue is 404');
($s, $d) = call('b', 'GET', '/api/v1/resources/namespaces');
unlike($json->encode($d), qr/ns-a/, 'namespaces: b does not see a\'s');
# the group listing reads the stats tables (refreshed every second here)
ok(wait_for(sub {
	my (undef, $ad) = call('a', 'GET', '/api/v1/consumer-groups');
	return $json->encode($ad) =~ /"g"/;
}, 60), 'consumer groups: a sees its group');
($s, $d) = call('b', 'GET', '/api/v1/consumer-groups');
unlike($json->encode($d), qr/"g"/, '... b does not');
($s, $d) = call('b', 'GET', '/api/v1/dlq?queue=shared');
is(scalar @{ $d->{messages} // [] }, 0, 'DLQ: b sees none of a\'s dead letters');
($s, $d) = call('a', 'GET', '/api/v1/dlq?queue=shared');
is(scalar @{ $d->{messages} // [] }, 1, '... a sees its one');
($s, $d) = call('b', 'GET', '/api/v1/messages?queue=shared');
unlike($json->encode($d), qr/"a-\d"/, 'messages: b browses none of a\'s');
($s) = call('b', 'GET', "/api/v1/messages/$msgs[1]{partitionId}/$msgs[1]{transactionId}");
is($s, 404, 'a message of a by its address, asked by b: 404');
($s, $d) = call('b', 'GET', '/api/v1/status/queues');
unlike($json->encode($d), qr/only-a/, 'status/queues: b does not see a\'s queues');
($s) = call('b', 'DELETE', '/api/v1/resources/queues/only-a');
is($node->safe_psql('postgres', q{SELECT count(*) FROM queen.queues WHERE name = 'only-a'}), 1,
	'b deleting "only-a" deletes nothing of a\'s');

# metrics: a tenant sees its own queues' series
ok(wait_for(sub {
	my (undef, undef, $m) = call('a', 'GET', '/metrics/prometheus');
	return $m =~ /queen_queue_messages\{tenant="$tenant{a}",queue="only-a"\}/;
}, 60), 'metrics: a sees its queue series');
my (undef, undef, $mb) = call('b', 'GET', '/metrics/prometheus');
unlike($mb, qr/only-a|tenant="$tenant{a}"/, 'metrics: b sees none of a\'s series');

# the header: malformed is 400, absent is the default tenant
($s) = call(undef, 'GET', '/api/v1/resources/queues', undef);
is($s, 200, 'no header: the default tenant');
my ($ds, $dd) = call(undef, 'GET', '/api/v1/resources/queues');
is(scalar @{ $dd->{queues} }, 0, '... which has no queues here');
($s, undef, my $content) = do {
	my ($st, $c) = http_request($port, 'GET', '/api/v1/resources/queues', undef, { 'x-queen-tenant' => 'not-a-uuid' });
	($st, undef, $c);
};
is($s, 400, 'a malformed tenant header: 400');
like($content, qr/x-queen-tenant/, '... naming the header');

is(scalar(log_crashes($node)), 0, 'no worker crashed');
$node->stop;
done_testing();
