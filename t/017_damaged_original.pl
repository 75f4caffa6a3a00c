# A stored segment that cannot be decoded (damaged on disk) must not fail a
# push that duplicates a message in it.  Before, resolving the original's id
# raised, the whole bundle failed, and every partition sharing the shard's
# transaction went to the spool, whose drain failed the same way and set the
# file aside: items answered "buffered" were never stored.  Also: the HTTP
# door refuses a payload jsonb cannot hold, which no reader could return.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use QueenHTTP;

# one shard, so the duplicate and the innocent partitions share a transaction
my ($node, $port) = start_broker(name => 'damaged', shards => 1);

my ($status, $res) = push_items($port,
	{ queue => 'dmg.q', partition => 'hit', payload => { n => 1 }, transactionId => 'orig' });
is($res->[0]{status}, 'queued', 'the original is stored');

$node->safe_psql('postgres', q{
	UPDATE queen.log_segments s SET blob = '\x28b52ffd00112233'
	  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
	 WHERE s.partition_id = p.id AND q.name = 'dmg.q' AND p.name = 'hit'});

my @items = ({ queue => 'dmg.q', partition => 'hit', payload => { n => 1 }, transactionId => 'orig' });
push @items, map { { queue => 'dmg.q', partition => "p$_", payload => { n => $_ }, transactionId => "t$_" } } 1 .. 10;
($status, $res) = push_items($port, @items);
is($status, 201, 'the push is answered 201');
is($res->[0]{status}, 'duplicate', 'the duplicate of the damaged original is reported duplicate');
is($res->[0]{message_id}, '00000000-0000-0000-0000-000000000000', 'with the zero id');
is(scalar(grep { $_->{status} eq 'queued' } @$res[1 .. 10]), 10,
	'the ten other partitions are queued, not buffered');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM queen.log_segments s JOIN queen.log_partitions p ON p.id = s.partition_id
	  JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'dmg.q' AND p.name LIKE 'p%'}),
	'10', 'and stored now');
is(metric($port, 'queen_damaged_segments_total'), 1, 'queen_damaged_segments_total counts it');
like(slurp_file($node->logfile), qr/WARNING:  queen: the segment at offset 0 of partition \S+ cannot be read/,
	'the server log names the damaged segment');
is(metric($port, 'queen_file_buffer_pending'), 0, 'nothing went to the spool');
# What this door accepts, queen.read returns: a payload jsonb cannot hold
# (16,777,217 array elements, 33.5 MB of text) is refused with 400, and
# nothing is stored; one element fewer is stored and read back.
my $over = '{"items":[{"queue":"dmg.big","payload":[' . ('0,' x 16777216) . '0]}]}';
my ($s_over, $b_over) = http_request($port, 'POST', '/api/v1/push', $over);
is($s_over, 400, 'a payload jsonb cannot hold is refused with 400');
like($b_over, qr/an array has more elements than jsonb allows/, 'and the answer says why');
is($node->safe_psql('postgres', q{SELECT count(*) FROM queen.queues WHERE name = 'dmg.big'}),
	'0', 'nothing of it is stored');
$over = undef;
my $at = '{"items":[{"queue":"dmg.big","payload":[' . ('0,' x 16777215) . '0]}]}';
my ($s_at) = http_request($port, 'POST', '/api/v1/push', $at);
$at = undef;
is($s_at, 201, 'one element fewer is accepted');
is($node->safe_psql('postgres',
		q{SELECT jsonb_array_length(payload) FROM queen.read('dmg.big')}),
	'16777216', 'and read back whole');

is_deeply([ log_crashes($node) ], [], 'no worker crashed');

$node->stop;
done_testing();
