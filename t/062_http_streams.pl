# Stream processing over HTTP, as Queen's streaming SDK uses it: a query
# registered (idempotent; 409 on a changed config_hash, reset removes its
# state), cycles that change state, push to the sink and ack the source in
# one transaction (a cycle whose ack fails leaves no state and no push; a
# cycle of an unknown query leaves nothing), release_lease kept or not for
# a part of the batch, the state read by keys, prefix and ripe windows,
# the 400s of bad bodies, the metrics, and a deleted source queue taking
# its queries and their state.  The same from SQL: queen.stream_cycle
# raising rolls back the caller's pushes.
use strict;
use warnings;

use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use QueenHTTP;

my ($node, $port) = start_broker(name => 'streams');

sub post
{
	my ($path, $body) = @_;
	return http_json($port, 'POST', $path, $body);
}

sub sql
{
	return $node->safe_psql('postgres', $_[0]);
}

# ---- registration --------------------------------------------------------------------
my ($status, $res) = post('/streams/v1/queries',
	{ name => 'orders.totals', source_queue => 'st.src', sink_queue => 'st.out', config_hash => 'h1' });
is($status, 200, 'a registration answers 200');
ok($res->{success} && $res->{fresh} && !$res->{reset}, 'fresh, not reset');
like($res->{query_id}, qr/^[0-9a-f-]{36}$/, 'with the query id');
is($res->{config_hash}, 'h1', 'and its config_hash');
my $qid = $res->{query_id};
($status, $res) = post('/streams/v1/queries',
	{ name => 'orders.totals', source_queue => 'st.src', sink_queue => 'st.out', config_hash => 'h1', reset => JSON::PP::false });
ok($res->{success} && !$res->{fresh}, 'registering again: the same query, not fresh');
is($res->{query_id}, $qid, 'same id');
($status, $res) = post('/streams/v1/queries', { name => 'orders.totals', source_queue => 'st.src', config_hash => 'h2' });
is($status, 409, 'a changed config_hash without reset: 409');
ok(!$res->{success}, 'success false');
like($res->{error}, qr/config_hash mismatch.*reset/, 'saying why and what to do');
is(sql("SELECT config_hash FROM queen.stream_queries WHERE id = '$qid'"), 'h1', 'and the query keeps its hash');

# ---- a cycle: state, sink push and source ack, in one commit -------------------------------
push_items($port, map { { queue => 'st.src', partition => 'c1', transactionId => "s$_", payload => { n => $_ } } } 1 .. 4);
my ($ps, $pop) = pop($port, '/api/v1/pop/queue/st.src/partition/c1?batch=2&consumerGroup=streams.q');
is(scalar @{ $pop->{messages} }, 2, 'the source popped, two of four');
my $pid = $pop->{partitionId};
my $lease = $pop->{leaseId};

sub cycle
{
	my (%c) = @_;
	my %body = (query_id => $qid, partition_id => $pid, consumer_group => 'streams.q', %c);
	return post('/streams/v1/cycle', \%body);
}

($status, $res) = cycle(
	state_ops => [ { type => 'upsert', key => 'w:1', value => { acc => 3, windowEnd => 100 } },
		{ type => 'upsert', key => 'w:2', value => { acc => 1, windowEnd => 200 } },
		{ type => 'upsert', key => 'tmp', value => 'x' }, { type => 'delete', key => 'tmp' } ],
	push_items => [ { queue => 'st.out', partition => 'c1', payload => { total => 3 } } ],
	ack => { transactionId => 's2', leaseId => $lease, status => 'completed', count => 2 });
is($status, 200, 'a cycle answers 200');
ok($res->{success}, 'success') or diag explain $res;
is($res->{state_ops_applied}, 4, 'every state op counted');
is($res->{query_id}, $qid, 'its query');
is($res->{partition_id}, $pid, 'its source partition');
is(scalar @{ $res->{push_results} }, 1, 'one push result');
is($res->{push_results}[0]{status}, 'queued', 'queued');
ok($res->{ack_result}{success} && $res->{ack_result}{lease_released}, 'the ack released the lease');
is(sql("SELECT string_agg(key || '=' || value::text, ',' ORDER BY key) FROM queen.stream_state WHERE query_id = '$qid'"),
	'w:1={"acc": 3, "windowEnd": 100},w:2={"acc": 1, "windowEnd": 200}', 'the state as upserted, the deleted key gone');
my ($os, $out) = pop($port, '/api/v1/pop/queue/st.out/partition/c1?batch=10&autoAck=true');
is_deeply([ map { $_->{data} } @{ $out->{messages} } ], [ { total => 3 } ], 'the sink holds the pushed result');
($ps, $pop) = pop($port, '/api/v1/pop/queue/st.src/partition/c1?batch=10&consumerGroup=streams.q');
is_deeply([ map { $_->{transactionId} } @{ $pop->{messages} } ], [ 's3', 's4' ], 'the source continues after the acked ones');
$lease = $pop->{leaseId};

# ---- a cycle whose ack fails leaves no state and no push ------------------------------
($status, $res) = cycle(
	state_ops => [ { type => 'upsert', key => 'w:1', value => { acc => 99 } }, { type => 'upsert', key => 'w:9', value => 1 } ],
	push_items => [ { queue => 'st.out', partition => 'c1', payload => { total => 99 }, transactionId => 'never' } ],
	ack => { transactionId => 's2', leaseId => $lease });
is($status, 200, 'a refused cycle answers 200');
ok(!$res->{success}, 'success false');
is($res->{reason}, 'ack_failed', 'because its ack failed');
like($res->{error}, qr/already acknowledged.*cycle was rolled back/, 'saying why');
is(sql("SELECT value->>'acc' FROM queen.stream_state WHERE query_id = '$qid' AND key = 'w:1'"), '3', 'the state is as before');
is(sql("SELECT count(*) FROM queen.stream_state WHERE key = 'w:9'"), '0', 'no new key');
is(sql("SELECT count(*) FROM queen.read('st.out', 'c1') WHERE transaction_id = 'never'"), '0', 'and nothing was pushed');

($status, $res) = cycle(state_ops => [ { type => 'upsert', key => 'w:1', value => 0 } ],
	ack => { transactionId => 's4', leaseId => '00000000-0000-0000-0000-000000000000' });
ok(!$res->{success} && $res->{reason} eq 'ack_failed', 'a wrong lease fails the cycle too');

# ---- an unknown query leaves nothing either --------------------------------------------
($status, $res) = post('/streams/v1/cycle', { query_id => '00000000-0000-0000-0000-0000000000aa', partition_id => $pid,
	consumer_group => 'streams.q', state_ops => [ { type => 'upsert', key => 'k', value => 1 } ],
	push_items => [ { queue => 'st.out', partition => 'c1', payload => 1, transactionId => 'noq' } ],
	ack => { transactionId => 's3', leaseId => $lease } });
ok(!$res->{success}, 'a cycle of an unregistered query is refused');
is($res->{reason}, 'no_query', 'reason no_query');
is(sql("SELECT count(*) FROM queen.read('st.out', 'c1') WHERE transaction_id = 'noq'"), '0', 'its push rolled back');
($ps, $pop) = pop($port, "/api/v1/pop/queue/st.src/partition/c1?batch=10&consumerGroup=streams.q");
is($ps, 204, 'its ack too: the lease still holds s3 and s4');

# ---- release_lease false: a part of the batch acked, the lease kept ---------------------
($status, $res) = cycle(ack => { transactionId => 's3', leaseId => $lease, count => 1 }, release_lease => JSON::PP::false);
ok($res->{success} && !$res->{ack_result}{lease_released}, 'a partial ack with release_lease false keeps the lease');
is_deeply($res->{push_results}, [], 'no pushes');
is(sql("SELECT committed || ':' || (worker_id IS NOT NULL) FROM queen.log_consumers c JOIN queen.log_partitions p ON p.id = c.partition_id WHERE p.name = 'c1' AND c.consumer_group = 'streams.q'"),
	'2:true', 'the cursor moved to s3, the lease is held');

# release_lease true (the default) on a part of the batch: the rest redelivered at once
push_items($port, map { { queue => 'st.src', partition => 'c1', transactionId => "s$_", payload => { n => $_ } } } 5 .. 6);
($status, $res) = cycle(ack => { transactionId => 's4', leaseId => $lease });
ok($res->{success} && $res->{ack_result}{lease_released}, 'the rest of the batch acked: the lease released');
($ps, $pop) = pop($port, '/api/v1/pop/queue/st.src/partition/c1?batch=2&consumerGroup=streams.q');
is_deeply([ map { $_->{transactionId} } @{ $pop->{messages} } ], [ 's5', 's6' ], 'the next batch');
$lease = $pop->{leaseId};
($status, $res) = cycle(ack => { transactionId => 's5', leaseId => $lease });
ok($res->{success} && $res->{ack_result}{lease_released}, 'a part of it acked with the default: the lease released');
($ps, $pop) = pop($port, '/api/v1/pop/queue/st.src/partition/c1?batch=10&consumerGroup=streams.q');
is($ps, 200, 'so the partition can be popped at once');
is_deeply([ map { $_->{transactionId} } @{ $pop->{messages} } ], [ 's6' ], 'from the message after the acked one');
($status, $res) = cycle(state_ops => [ { type => 'delete', key => 'w:2' } ]);
ok($res->{success} && !defined $res->{ack_result}, 'a cycle without an ack (an idle flush): ack_result null');

# ---- state reads -----------------------------------------------------------------------
cycle(state_ops => [ { type => 'upsert', key => 'w:2', value => { acc => 1, windowEnd => 200 } },
	{ type => 'upsert', key => "tumb:60\x{1f}a", value => { windowEnd => 50 } }, { type => 'upsert', key => 'plain', value => [ 1 ] } ]);
($status, $res) = post('/streams/v1/state/get', { query_id => $qid, partition_id => $pid });
is($status, 200, 'state/get answers 200');
ok($res->{success}, 'success');
is_deeply([ map { $_->{key} } @{ $res->{rows} } ], [ 'plain', "tumb:60\x{1f}a", 'w:1', 'w:2' ], 'every key, in key order');
is_deeply([ sort keys %{ $res->{rows}[0] } ], [ qw(key updated_at value) ], "Queen's keys");
is_deeply($res->{rows}[0]{value}, [ 1 ], 'the value as JSON');
($status, $res) = post('/streams/v1/state/get', { query_id => $qid, partition_id => $pid, keys => [ 'w:1', 'nope' ] });
is_deeply([ map { $_->{key} } @{ $res->{rows} } ], [ 'w:1' ], 'by keys: those that exist');
($status, $res) = post('/streams/v1/state/get', { query_id => $qid, partition_id => $pid, keys => [], key_prefix => 'w:', ripe_at_or_before => 150 });
is_deeply([ map { $_->{key} } @{ $res->{rows} } ], [ 'w:1' ], 'by prefix and ripe windows');
($status, $res) = post('/streams/v1/state/get', { query_id => $qid, partition_id => '00000000-0000-0000-0000-000000000001' });
is_deeply($res, { success => JSON::PP::true, rows => [] }, 'another partition has no state');

# ---- what a body says twice, and its edges ----------------------------------------------------
# the last "state_ops" wins whole, as jsonb keeps the last of duplicate keys
my ($ds, $dbody) = http_request($port, 'POST', '/streams/v1/cycle',
	qq({"query_id":"$qid","partition_id":"$pid","state_ops":[{"type":"upsert","key":"dupA"}],"state_ops":[{"type":"upsert","key":"dupB"}]}));
is($ds, 200, 'two state_ops arrays: 200');
is(sql("SELECT string_agg(key, ',') FROM queen.stream_state WHERE key LIKE 'dup%'"), 'dupB', 'only the last one applied');
($ds, $dbody) = http_request($port, 'POST', '/streams/v1/cycle',
	qq({"query_id":"$qid","partition_id":"$pid","state_ops":[{"type":"bad","key":"x"}],"state_ops":[{"type":"delete","key":"dupB"}]}));
is($ds, 200, 'a refused earlier array does not count either');
($ds, $dbody) = http_request($port, 'POST', '/streams/v1/cycle',
	qq({"query_id":"$qid","partition_id":"$pid","state_ops":[{"type":"upsert","key":"dupC"}],"state_ops":null}));
is(sql("SELECT count(*) FROM queen.stream_state WHERE key LIKE 'dup%'"), '0', 'and a last null is no state op at all');
# more pushes than queen.max_push_items: 413, nothing stored
my @many = map { { queue => 'st.many', payload => $_ } } 1 .. 10001;
($status, $res) = cycle(push_items => \@many);
is($status, 413, 'more than queen.max_push_items push_items: 413');
is(sql("SELECT count(*) FROM queen.queues WHERE name = 'st.many'"), '0', 'nothing pushed');
# ripe_at_or_before compares exactly, whatever the number
cycle(state_ops => [ { type => 'upsert', key => 'r:frac', value => { windowEnd => 100.2 } } ]);
($status, $res) = post('/streams/v1/state/get', { query_id => $qid, partition_id => $pid, key_prefix => 'r:', ripe_at_or_before => 100.5 });
is_deeply([ map { $_->{key} } @{ $res->{rows} } ], [ 'r:frac' ], 'a fractional bound keeps a window ending before it');
($status, $dbody) = http_request($port, 'POST', '/streams/v1/state/get',
	qq({"query_id":"$qid","partition_id":"$pid","key_prefix":"r:","ripe_at_or_before":9223372036854775807}));
like($dbody, qr/"r:frac"/, 'the largest int64 is a bound like any other');
cycle(state_ops => [ { type => 'delete', key => 'r:frac' } ]);
($status, $dbody) = http_request($port, 'POST', '/streams/v1/state/get',
	qq({"query_id":"$qid","partition_id":"$pid","ripe_at_or_before":1e1000000}));
is($status, 400, 'a bound numeric cannot hold: 400');
# consumer_group "" is queue mode, as Queen's NULLIF has it
($status, $res) = post('/streams/v1/cycle', { query_id => $qid, partition_id => $pid, consumer_group => '' });
ok($status == 200 && $res->{success}, 'consumer_group "" is queue mode');

# ---- bad bodies --------------------------------------------------------------------------
my @bad = (
	[ '/streams/v1/queries', '[]', qr/JSON object/ ],
	[ '/streams/v1/queries', '{"source_queue":"a","config_hash":"h"}', qr/name is required/ ],
	[ '/streams/v1/queries', '{"name":"n","config_hash":"h"}', qr/source_queue is required/ ],
	[ '/streams/v1/queries', '{"name":"n","source_queue":"a"}', qr/config_hash is required/ ],
	[ '/streams/v1/queries', '{"name":"n","source_queue":"a","config_hash":"h","reset":"yes"}', qr/reset must be true or false/ ],
	[ '/streams/v1/state/get', '{"partition_id":"' . $pid . '"}', qr/query_id is required/ ],
	[ '/streams/v1/state/get', '{"query_id":"x","partition_id":"' . $pid . '"}', qr/query_id must be a UUID/ ],
	[ '/streams/v1/state/get', '{"query_id":"' . $qid . '","partition_id":"' . $pid . '","keys":[1]}', qr/keys/ ],
	[ '/streams/v1/state/get', '{"query_id":"' . $qid . '","partition_id":"' . $pid . '","ripe_at_or_before":"soon"}', qr/ripe_at_or_before must be a number/ ],
	[ '/streams/v1/cycle', '{"query_id":"' . $qid . '"}', qr/partition_id is required/ ],
	[ '/streams/v1/cycle', '{"query_id":"' . $qid . '","partition_id":"' . $pid . '","state_ops":[{"type":"merge","key":"k"}]}', qr/state_ops\[0\]: type must be/ ],
	[ '/streams/v1/cycle', '{"query_id":"' . $qid . '","partition_id":"' . $pid . '","state_ops":[{"type":"upsert","key":""}]}', qr/state_ops\[0\]: key must not be empty/ ],
	[ '/streams/v1/cycle', '{"query_id":"' . $qid . '","partition_id":"' . $pid . '","state_ops":{}}', qr/state_ops must be an array/ ],
	[ '/streams/v1/cycle', '{"query_id":"' . $qid . '","partition_id":"' . $pid . '","push_items":[{"payload":1}]}', qr/push_items\[0\]/ ],
	[ '/streams/v1/cycle', '{"query_id":"' . $qid . '","partition_id":"' . $pid . '","ack":{"leaseId":"x"}}', qr/ack.transactionId is required/ ],
	[ '/streams/v1/cycle', '{"query_id":"' . $qid . '","partition_id":"' . $pid . '","ack":[1]}', qr/ack must be an object/ ],
	[ '/streams/v1/cycle', '{"query_id":"' . $qid . '","partition_id":"' . $pid . '","release_lease":1}', qr/release_lease must be true or false/ ],
);
my $rows_before = sql("SELECT count(*) FROM queen.stream_state");
for my $b (@bad)
{
	my ($s, $body) = http_request($port, 'POST', $b->[0], $b->[1]);
	is($s, 400, "$b->[0] $b->[1]: 400");
	like($body, $b->[2], '  saying why');
}
is(sql("SELECT count(*) FROM queen.stream_state"), $rows_before, 'no bad body wrote state');

# ---- reset removes the state ------------------------------------------------------------
($status, $res) = post('/streams/v1/queries', { name => 'orders.totals', source_queue => 'st.src', config_hash => 'h2', reset => JSON::PP::true });
ok($res->{success} && $res->{reset} && !$res->{fresh}, 'reset: success, reset true');
is($res->{query_id}, $qid, 'the same query');
is(sql("SELECT count(*) FROM queen.stream_state WHERE query_id = '$qid'"), '0', 'its state is gone');

# ---- metrics ------------------------------------------------------------------------
is(metric($port, 'queen_stream_cycles_total{result="committed"}'), 12, 'committed cycles counted');
is(metric($port, 'queen_stream_cycles_total{result="ack_failed"}'), 2, 'cycles refused for their ack');
is(metric($port, 'queen_stream_cycles_total{result="no_query"}'), 1, 'and for their query');

# ---- the SQL door: a cycle that raises takes the caller's pushes with it -------------------
my ($ok, $stdout, $stderr) = $node->psql('postgres', qq{
	BEGIN;
	SELECT status FROM queen.push('st.out', '{"sql": 1}', 'c1', 'sql-push');
	SELECT * FROM queen.stream_cycle('$qid', '$pid', '{"k": 1}', transaction_id => 's1',
									 consumer_group => 'streams.q');
	COMMIT;});
like($stderr, qr/was not applied: it was already acknowledged/, 'queen.stream_cycle raises for an ack not carried out');
is(sql("SELECT count(*) FROM queen.read('st.out', 'c1') WHERE transaction_id = 'sql-push'"), '0', 'the push before it rolled back');
is(sql("SELECT state_ops_applied FROM queen.stream_cycle('$qid', '$pid', '{\"k\": 1}')"), '1',
	'without an ack it applies the state');
is(sql("SELECT string_agg(key || '=' || value::text, ',') FROM queen.stream_state('$qid', '$pid')"), 'k=1',
	'which queen.stream_state reads back');

# a sink of "" is none, as Queen's NULLIF has it
($status, $res) = post('/streams/v1/queries', { name => 'no.sink', source_queue => 'st.never', sink_queue => '', config_hash => 'h' });
is($status, 200, 'sink_queue "" registers');
is(sql("SELECT sink_queue IS NULL FROM queen.stream_queries WHERE name = 'no.sink'"), 't', 'without a sink');
# deleting a queue that was never created forgets the queries reading it too
($ds) = http_request($port, 'DELETE', '/api/v1/resources/queues/st.never');
is(sql("SELECT count(*) FROM queen.stream_queries WHERE name = 'no.sink'"), '0', 'a query of a queue never created goes with its name');

# ---- a deleted source queue takes its queries and their state ------------------------------
my ($ds) = http_request($port, 'DELETE', '/api/v1/resources/queues/st.src');
is($ds, 200, 'the source queue deleted');
is(sql("SELECT count(*) FROM queen.stream_queries WHERE id = '$qid'"), '0', 'its query is gone');
is(sql("SELECT count(*) FROM queen.stream_state WHERE query_id = '$qid'"), '0', 'and its state');

is(scalar(log_crashes($node)), 0, 'no worker crashed');
$node->stop;
done_testing();
