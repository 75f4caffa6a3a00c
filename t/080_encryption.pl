# Encryption at rest over HTTP: an encrypted queue's payloads are stored
# sealed (the segments' bytes hold no plaintext) and popped opened; the
# spool keeps them sealed while maintenance mode buffers pushes, and the
# drain stores each as its queue says; dead letters are listed opened;
# without a usable key a push to an encrypted queue answers failed with the
# reason and stores nothing, and a bad key is said loudly at start.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use QueenHTTP;

my $key = '000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f';
my ($node, $port) = start_broker(name => 'encryption', shards => 2,
	extra => "queen.encryption_key = '$key'\n");
my $spool = $node->data_dir . '/queen_spool';

sub configure
{
	my ($queue, $encrypted) = @_;
	my ($s, $d) = http_json($port, 'POST', '/api/v1/configure',
		{ queue => $queue, options => { encryptionEnabled => $encrypted ? \1 : \0, retryLimit => 0 } });
	is($s, 200, "configure $queue");
}

# How many of the queue's stored frames contain $needle in their raw bytes.
sub stored_with
{
	my ($queue, $needle) = @_;
	return $node->safe_psql('postgres', qq{
		SELECT count(*) FROM queen.log_segments s
		  JOIN queen.log_partitions p ON p.id = s.partition_id
		  JOIN queen.queues q ON q.id = p.queue_id,
		       queen.unpack_frames(s.blob) f
		 WHERE q.name = '$queue' AND position('$needle'::bytea IN f.payload) > 0});
}

# How many of the queue's segments hold $needle anywhere in their inflated bytes.
sub segments_with
{
	my ($queue, $needle) = @_;
	return $node->safe_psql('postgres', qq{
		SELECT count(*) FROM queen.log_segments s
		  JOIN queen.log_partitions p ON p.id = s.partition_id
		  JOIN queen.queues q ON q.id = p.queue_id
		 WHERE q.name = '$queue' AND position('$needle'::bytea IN queen.decompress_segment(s.blob)) > 0});
}

sub stored_flags
{
	my ($queue) = @_;
	return $node->safe_psql('postgres', qq{
		SELECT string_agg(DISTINCT f.flags::text, ',') FROM queen.log_segments s
		  JOIN queen.log_partitions p ON p.id = s.partition_id
		  JOIN queen.queues q ON q.id = p.queue_id,
		       queen.unpack_frames(s.blob) f
		 WHERE q.name = '$queue'});
}

sub statuses
{
	my ($results) = @_;
	return join(',', map { $_->{status} } @$results);
}

configure('enc', 1);
configure('plain', 0);

# pushed over HTTP: sealed at rest, plain beside it
my @items = map { { queue => 'enc', partition => "p$_", transactionId => "e$_",
		payload => { card => "SECRET-$_" } } } 1 .. 20;
push @items, map { { queue => 'plain', transactionId => "c$_", payload => { note => "CLEAR-$_" } } } 1 .. 5;
my ($s, $r) = push_items($port, @items);
is($s, 201, 'push answered 201');
is(statuses($r), join(',', ('queued') x 25), 'every item queued');
is(segments_with('enc', 'SECRET-'), 0, 'no plaintext of the encrypted queue is stored');
is(stored_flags('enc'), '4', 'every stored frame of the encrypted queue carries flag 4');
is(stored_with('plain', 'CLEAR-'), 5, 'the plain queue stores its payloads as they came');

# popped: opened
my %seen;
for my $p (1 .. 20)
{
	my ($ps, $pd) = pop($port, "/api/v1/pop/queue/enc/partition/p$p?batch=10&autoAck=true");
	next unless $ps == 200;
	$seen{ $_->{transactionId} } = $_->{data}{card} for @{ $pd->{messages} };
}
is(scalar(grep { $seen{"e$_"} && $seen{"e$_"} eq "SECRET-$_" } 1 .. 20), 20,
	'every message pops with its payload opened');

# maintenance mode: the spool holds no plaintext of any queue, and the drain
# stores each push as its queue says
($s) = set_maintenance($port, 1);
is($s, 200, 'maintenance mode on');
($s, $r) = push_items($port,
	(map { { queue => 'enc', partition => 'm', transactionId => "m$_", payload => { card => "SPOOLED-$_" } } } 1 .. 5),
	(map { { queue => 'plain', partition => 'm', transactionId => "n$_", payload => { note => "SPOOLCLEAR-$_" } } } 1 .. 5));
is(statuses($r), join(',', ('buffered') x 10), 'pushes in maintenance mode are buffered');
my @files = spool_files($spool);
ok(@files > 0, 'the spool has files') or diag(`ls -la $spool`);
my $plaintext_files = 0;
for my $f (spool_files($spool))
{
	open(my $fh, '<:raw', "$spool/$f") or next;
	local $/;
	my $bytes = <$fh>;
	$plaintext_files++ if $bytes =~ /SPOOLED-|SPOOLCLEAR-/;
}
is($plaintext_files, 0, 'no spool file holds a payload in plaintext');
($s) = set_maintenance($port, 0);
ok(wait_for(sub { stored_count($node, 'plain') >= 10 && stored_count($node, 'enc') >= 25 }, 120),
	'the spool drains');
is(segments_with('enc', 'SPOOLED-'), 0, 'the drained encrypted pushes are stored sealed');
is(stored_with('plain', 'SPOOLCLEAR-'), 5, 'the drained plain pushes are stored plain');
my ($ps, $pd) = pop($port, '/api/v1/pop/queue/enc/partition/m?batch=10&autoAck=true');
is(join(',', map { $_->{data}{card} } @{ $pd->{messages} }),
	join(',', map { "SPOOLED-$_" } 1 .. 5), 'the drained messages pop opened, in order');

# dead letters: kept sealed, listed opened
($s, $r) = push_items($port, { queue => 'enc', partition => 'd', transactionId => 'd1', payload => { card => 'DEAD-1' } });
($ps, $pd) = pop($port, '/api/v1/pop/queue/enc/partition/d?batch=1');
my $m = $pd->{messages}[0];
my ($as, $ad) = http_json($port, 'POST', '/api/v1/ack',
	{ transactionId => $m->{transactionId}, partitionId => $m->{partitionId}, leaseId => $m->{leaseId},
	  status => 'failed', error => 'declined' });
is($node->safe_psql('postgres', q{SELECT count(*) FROM queen.log_dlq WHERE position('DEAD-1' IN payload::text) > 0}),
	0, 'the dead letter is stored sealed');
my ($ds, $dd) = http_json($port, 'GET', '/api/v1/dlq?queue=enc');
is($dd->{messages}[0]{data}{card}, 'DEAD-1', 'GET /api/v1/dlq lists it opened');

# no usable key: refused with the reason, nothing stored
$node->safe_psql('postgres', "ALTER SYSTEM SET queen.encryption_key = 'not-a-key'");
$node->reload;
my ($refused, $probe) = (undef, 0);
wait_for(
	sub {
		$probe++;
		my ($ks, $kr) = push_items($port, { queue => 'enc', partition => 'k', transactionId => "k$probe", payload => { card => 'NOKEY' } });
		$refused = $kr->[0] if $ks == 201 && $kr->[0]{status} eq 'failed';
		return defined $refused;
	},
	60);
ok(defined $refused, 'a push to the encrypted queue is refused once the key is bad');
like($refused->{error} // '', qr/not 64 hexadecimal characters/, 'the answer says why');
is($node->safe_psql('postgres', qq{
	SELECT count(*) FROM queen.read('enc', 'k', 0, 1000) WHERE transaction_id = 'k$probe'}),
	0, 'the refused push stored nothing');
($s, $r) = push_items($port, { queue => 'plain', payload => { note => 'still fine' } });
is($r->[0]{status}, 'queued', 'a plain queue still takes pushes');

# said loudly at start
$node->restart;
wait_healthy($port, 60);
like(slurp_file($node->logfile), qr/WARNING:.*queen\.encryption_key is not 64 hexadecimal characters/,
	'a bad key is logged at start');

# the key from a file under the data directory, which only its owner may read
my $keyfile = $node->data_dir . '/queen.key';
open(my $kf, '>', $keyfile) or die "$keyfile: $!";
print $kf "$key\n";
close $kf;
chmod 0644, $keyfile;
$node->safe_psql('postgres', "ALTER SYSTEM SET queen.encryption_key = ''");
$node->safe_psql('postgres', "ALTER SYSTEM SET queen.encryption_key_file = 'queen.key'");
$node->reload;
($refused, $probe) = (undef, 0);
wait_for(
	sub {
		$probe++;
		my ($ks, $kr) = push_items($port, { queue => 'enc', partition => 'f', transactionId => "f$probe", payload => { card => 'FILE' } });
		$refused = $kr->[0] if $ks == 201 && $kr->[0]{status} eq 'failed' && ($kr->[0]{error} // '') =~ /readable by others/;
		return defined $refused;
	},
	60);
ok(defined $refused, 'a key file others can read is refused, and the answer says so');
chmod 0600, $keyfile;
my $stored;
wait_for(
	sub {
		$probe++;
		my ($ks, $kr) = push_items($port, { queue => 'enc', partition => 'f', transactionId => "f$probe", payload => { card => 'FILE' } });
		$stored = "f$probe" if $ks == 201 && $kr->[0]{status} eq 'queued';
		return defined $stored;
	},
	60);
ok(defined $stored, 'with the file made private its key seals');
# a file's mode is checked when the keys are read: after a reload
is($node->safe_psql('postgres', qq{
	SET queen.encryption_key_file = 'queen.key';
	SELECT payload->>'card' FROM queen.read('enc', 'f', 0, 1000) WHERE transaction_id = '$stored'}),
	'FILE', 'what the file\'s key sealed reads back');
is(segments_with('enc', 'FILE'), 0, 'and is stored sealed');

is(scalar(log_crashes($node)), 0, 'no worker crashed');

$node->stop;
done_testing();
