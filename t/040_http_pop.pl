# The pop routes over real HTTP, case by case: every key of the pop body a
# client reads, payloads back byte for byte (null, {}, strings, numbers, a
# multi-megabyte one), createdAt in UTC whatever the TimeZone, 204 with no
# body, raw and percent-encoded names, autoAck, leases, a missing queue,
# the discovery route, fan-out to three consumer groups, subscription
# modes, the 400s, and the pop counters on /metrics/prometheus.
use strict;
use warnings;

use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use QueenHTTP;

my ($node, $port) = start_broker(name => 'pop');
# createdAt must not follow the server's zone
$node->safe_psql('postgres', "ALTER SYSTEM SET timezone = 'America/New_York'");
$node->reload;

my $json = JSON::PP->new->utf8->canonical;

# ---- the pop body ----------------------------------------------------------------
my @payloads = ('{"a":1,"b":[true,null]}', 'null', '{}', '"str \u00e9"', '42', '-1.5e3', '[1, 2]');
my $body = '{"items":['
  . join(',', map { qq({"queue":"pop.q","partition":"p1","transactionId":"t$_","payload":$payloads[$_]}) }
	  0 .. $#payloads)
  . ']}';
my ($status, $content) = http_request($port, 'POST', '/api/v1/push', $body);
is($status, 201, 'seven messages pushed');
my $pushed = decode_json($content);

my ($s, $res, $raw, $headers) = pop($port, '/api/v1/pop/queue/pop.q/partition/p1?batch=10');
is($s, 200, 'a pop of the partition answers 200');
is_deeply([ sort keys %$res ],
	[ sort qw(success queue partition partitionId leaseId consumerGroup messages partitionsClaimed) ],
	"the top level has exactly the keys of Queen's pop answer");
is($res->{success}, JSON::PP::true, 'success true');
is($res->{queue}, 'pop.q', 'queue');
is($res->{partition}, 'p1', 'partition');
like($res->{partitionId}, qr/^[0-9a-f-]{36}$/, 'partitionId is a UUID');
like($res->{leaseId}, qr/^[0-9a-f-]{36}$/, 'a leased pop has a lease id');
is($res->{consumerGroup}, '__QUEUE_MODE__', 'queue mode is the reserved group');
is($res->{partitionsClaimed}, 1, 'one partition claimed');
is(scalar @{ $res->{messages} }, 7, 'every message delivered');
my $m0 = $res->{messages}[0];
is_deeply([ sort keys %$m0 ],
	[ sort qw(id transactionId traceId data producerSub createdAt partitionId partition leaseId consumerGroup deliveryAttempt) ],
	"a message has exactly the keys of Queen's pop answer");
is_deeply([ map { $_->{id} } @{ $res->{messages} } ], [ map { $_->{message_id} } @$pushed ],
	'message ids are the pushed ones, in offset order');
is_deeply([ map { $_->{transactionId} } @{ $res->{messages} } ], [ map { "t$_" } 0 .. 6 ],
	'transactionIds in order');
is($m0->{traceId}, undef, 'traceId null');
is($m0->{producerSub}, undef, 'producerSub null');
is($m0->{deliveryAttempt}, 1, 'first delivery is attempt 1');
is($m0->{leaseId}, $res->{leaseId}, 'each message carries the lease id');
is($m0->{partitionId}, $res->{partitionId}, 'each message carries the partition id');
for my $i (0 .. $#payloads)
{
	my $want = quotemeta(',"data":' . $payloads[$i] . ',"producerSub"');
	like($raw, qr/$want/, "payload $payloads[$i] comes back byte for byte");
}
my $utc = $node->safe_psql('postgres',
	"SELECT to_char(s.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') FROM queen.log_segments s "
	  . "JOIN queen.log_partitions p ON p.id = s.partition_id WHERE p.name = 'p1'");
is($m0->{createdAt}, $utc, 'createdAt is the segment time in UTC with microseconds, whatever TimeZone says');

# a live lease holds the partition
($s, undef, $raw, $headers) = pop($port, '/api/v1/pop/queue/pop.q/partition/p1');
is($s, 204, 'a second pop while the lease lives gets nothing: 204');
is($raw // "", "", "a 204 has no body");
ok(!defined $headers->{'content-length'}, 'and no Content-Length');

# ---- autoAck, the wildcard, a missing queue ------------------------------------
push_items($port, map { { queue => 'pop.auto', partition => "p$_", payload => { n => $_ } } } 1 .. 3);
($s, $res) = pop($port, '/api/v1/pop/queue/pop.auto?autoAck=true&partitions=10&batch=100');
is($s, 200, 'a wildcard autoAck pop answers 200');
is($res->{leaseId}, '', 'autoAck: leaseId ""');
is(scalar @{ $res->{messages} }, 3, 'over three partitions');
is($res->{partitionsClaimed}, 3, 'partitionsClaimed 3');
($s) = pop($port, '/api/v1/pop/queue/pop.auto?partitions=10');
is($s, 204, 'autoAck moved the cursors: nothing is delivered again');
($s, undef, $raw) = pop($port, '/api/v1/pop/queue/no.such.queue');
is($s, 204, 'a pop of a queue that does not exist is 204');

# ---- names: percent-encoded and raw ---------------------------------------------
my $name = "pop q/\x{e9}t\x{e9}";
my $utf8 = $name;
utf8::encode($utf8);
($status) = http_request($port, 'POST', '/api/v1/push',
	$json->encode({ items => [ { queue => $name, partition => 'a b', payload => 1 } ] }));
is($status, 201, 'pushed to a queue whose name has a space, a slash and accents');
(my $enc = $utf8) =~ s/([^A-Za-z0-9._~-])/sprintf('%%%02X', ord $1)/ge;
($s, $res) = pop($port, "/api/v1/pop/queue/$enc/partition/a%20b");
is($s, 200, 'a percent-encoded queue and partition name pops');
is($res->{queue}, $utf8, 'the decoded queue name (UTF-8)');
is($res->{partition}, 'a b', 'the decoded partition name');
($status) = http_request($port, 'POST', '/api/v1/push',
	$json->encode({ items => [ { queue => "caf\x{e9}", payload => 2 } ] }));
my $answer = raw_exchange($port,
	"GET /api/v1/pop/queue/caf\xc3\xa9?autoAck=true HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
like($answer, qr{^HTTP/1\.1 200 .*"queue":"caf\x{c3}\x{a9}"}s, 'a raw UTF-8 queue name in the path pops too');

push_items($port, { queue => '50%off', payload => 3 }, { queue => '50%off', payload => 4 });
($s, $res) = pop($port, '/api/v1/pop/queue/50%off?autoAck=true&batch=1');
is($res->{queue}, '50%off', 'a raw % that starts no escape is taken literally');
($s, $res) = pop($port, '/api/v1/pop/queue/50%25off?autoAck=true&batch=1');
is($res->{messages}[0]{data}, 4, 'and the same name percent-encoded names the same queue');

# ---- a multi-megabyte payload ---------------------------------------------------
my $big = '"' . ('x' x (3 * 1024 * 1024)) . 'end"';
($status) = http_request($port, 'POST', '/api/v1/push',
	qq({"items":[{"queue":"pop.big","payload":{"blob":$big,"n":[1,2.50,{}]}}]}));
is($status, 201, 'a 3 MB payload pushed');
($s, undef, $raw) = pop($port, '/api/v1/pop/queue/pop.big?autoAck=true');
is($s, 200, 'and popped');
ok(index($raw, qq("data":{"blob":$big,"n":[1,2.50,{}]},)) > 0, 'byte for byte');

# ---- discovery ------------------------------------------------------------------
($s, undef, $raw) = pop($port, '/api/v1/pop');
is($s, 400, 'discovery without namespace or task is 400');
is($raw, '{"success":false,"error":"namespace or task is required","messages":[]}', 'with Queen\'s body');
http_json($port, 'POST', '/api/v1/configure', { queue => 'disc.work', namespace => 'billing', task => 'invoice' });
push_items($port, { queue => 'disc.work', payload => { d => 1 } });
($s, $res) = pop($port, '/api/v1/pop?namespace=billing&autoAck=true');
is($s, 200, 'discovery by namespace delivers');
is($res->{queue}, '', 'the discovery route\'s top-level queue is ""');
is($res->{messages}[0]{data}{d}, 1, 'the message of the matching queue');
($s) = pop($port, '/api/v1/pop?task=nothing-like-it');
is($s, 204, 'discovery with no matching queue is 204');

# ---- fan-out and subscription modes ---------------------------------------------
push_items($port, map { { queue => 'fan', payload => $_ } } 1 .. 4);
for my $g (qw(g1 g2 g3))
{
	($s, $res) = pop($port, "/api/v1/pop/queue/fan?consumerGroup=$g&autoAck=true&subscriptionMode=all");
	is_deeply([ map { $_->{data} } @{ $res->{messages} } ], [ 1 .. 4 ], "group $g gets every message");
	is($res->{consumerGroup}, $g, "consumerGroup $g in the body");
}
($s) = pop($port, '/api/v1/pop/queue/fan?consumerGroup=late&subscriptionMode=new&autoAck=true');
is($s, 204, 'a new group in mode new skips the backlog');
push_items($port, { queue => 'fan', payload => 5 });
($s, $res) = pop($port, '/api/v1/pop/queue/fan?consumerGroup=late&subscriptionMode=new&autoAck=true');
is_deeply([ map { $_->{data} } @{ $res->{messages} } ], [5], 'and gets what came after its first contact');
($s, $res) = pop($port, '/api/v1/pop/queue/fan?consumerGroup=g1&autoAck=true');
is_deeply([ map { $_->{data} } @{ $res->{messages} } ], [5], 'an existing group gets only the new message');

# ---- 400s -----------------------------------------------------------------------
for my $q ('batch=abc', 'batch=0', 'wait=perhaps', 'timeout=-1', 'autoAck=2', 'consumerGroup=%ZZ')
{
	($s, $res) = pop($port, "/api/v1/pop/queue/pop.q?$q");
	is($s, 400, "400 for $q");
	ok(defined $res->{error}, 'with an error');
}
($s) = pop($port, '/api/v1/pop/queue/bad%01name');
is($s, 400, 'a queue name with a control character is 400');

# ---- counters -------------------------------------------------------------------
ok(metric($port, 'queen_process_pop_messages_total') >= 17, 'messages delivered are counted');
ok(metric($port, 'queen_pop_empty_total') >= 4, 'empty pops are counted');
ok(metric($port, 'queen_process_pop_requests_total') >= 20, 'pop requests are counted');

is_deeply([ log_crashes($node) ], [], 'nothing crashed');
$node->stop;
done_testing();
