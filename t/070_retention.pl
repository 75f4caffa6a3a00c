# Retention in the broker: the maintenance worker applies a queue's rules
# every queen.retention_interval, one bounded step per due partition, while
# the queue is in use.  Ageing is simulated by moving created_at into the
# past (no sleeping); the worker's effect is polled for with a deadline.
use strict;
use warnings;

use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use QueenHTTP;

my ($node, $port) = start_broker(name => 'retention', extra => "queen.retention_interval = '200ms'\n");

sub sql { return $node->safe_psql('postgres', $_[0]); }

my ($s) = http_json($port, 'POST', '/api/v1/configure',
	{ queue => 'rt.all', options => { retentionEnabled => JSON::PP::true, retentionSeconds => 60 } });
is($s, 200, 'a queue with retentionSeconds');
($s) = http_json($port, 'POST', '/api/v1/configure',
	{ queue => 'rt.done', options => { retentionEnabled => JSON::PP::true, completedRetentionSeconds => 60 } });
is($s, 200, 'a queue with completedRetentionSeconds');
for my $q ('rt.all', 'rt.done')
{
	push_items($port, { queue => $q, transactionId => "$q-$_", payload => $_ }) for 0 .. 2;
}

# nothing is old yet: nothing goes
usleep(600_000);
is(sql("SELECT count(*) FROM queen.read('rt.all')"), '3', 'young messages stay');

# rt.done's one group has consumed offset 0 only
my ($ps, $pop) = pop($port, '/api/v1/pop/queue/rt.done?batch=1&autoAck=true&consumerGroup=g');
is($pop->{messages}[0]{transactionId}, 'rt.done-0', 'a group consumed the first message');

sql(q{UPDATE queen.log_segments s SET created_at = s.created_at - interval '1 hour'
        FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
       WHERE p.id = s.partition_id AND q.name LIKE 'rt.%' AND s.base_offset < 2});
sql(q{UPDATE queen.log_partitions p SET oldest_live_at = p.oldest_live_at - interval '1 hour'
        FROM queen.queues q WHERE q.id = p.queue_id AND q.name LIKE 'rt.%'});

ok(wait_for(sub { sql("SELECT string_agg(log_offset::text, ',') FROM queen.read('rt.all')") eq '2' }, 30),
	'rule 1: the worker removed the two old segments');
ok(wait_for(sub { sql("SELECT string_agg(log_offset::text, ',') FROM queen.read('rt.done')") eq '1,2' }, 30),
	'rule 2: only what the group committed');
($ps, $pop) = pop($port, '/api/v1/pop/queue/rt.all?batch=10&autoAck=true&consumerGroup=late');
is_deeply([ map { $_->{transactionId} } @{ $pop->{messages} } ], [ 'rt.all-2' ],
	'a group arriving later starts at the first segment kept');
push_items($port, { queue => 'rt.all', transactionId => 'after', payload => 3 });
is(sql("SELECT max(log_offset) FROM queen.read('rt.all')"), '3', 'pushes go on at the next offset');

# the hashes behind every dedup window go too, whatever the retention
sql(q{UPDATE queen.log_txns t SET created_at = t.created_at - interval '1 hour'
        FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
       WHERE p.id = t.partition_id AND q.name = 'rt.all' AND t.base_offset < 2});
sql(q{UPDATE queen.log_partitions p SET oldest_txn_at = p.oldest_txn_at - interval '1 hour'
        FROM queen.queues q WHERE q.id = p.queue_id AND q.name = 'rt.all'});
ok(wait_for(sub { sql(q{SELECT p.txns_start FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
                        WHERE q.name = 'rt.all'}) eq '2' }, 30),
	'the worker purged the two old hash rows');
push_items($port, { queue => 'rt.all', transactionId => 'rt.all-0', payload => 'again' });
is(sql("SELECT max(log_offset) FROM queen.read('rt.all')"), '4', 'a transactionId whose hash went is stored again');

is(scalar(log_crashes($node)), 0, 'no worker crashed');
$node->stop;
done_testing();
