# Damaged spool files.  A spool file is parsed here by the spec's record
# layout (16-byte header: magic "QSPL", body length, CRC-32C of the body,
# version 1), which this test checks on a real file.  Then, with the node
# stopped, one record's body gets a flipped byte and the file is cut inside
# its last record: the drain skips the damaged record, stops at the
# truncated one, drains everything intact, logs both, quarantines their
# bytes under failed/ and deletes the file.  A leftover .tmp file with a
# torn tail (what a crash leaves) is finished at start and drained.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use QueenHTTP;

my ($node, $port) = start_broker(name => 'spoolfile', shards => 1);
my $spool = $node->data_dir . '/queen_spool';
my $tenant = pack('H*', '00000000000000000000000000000001');

# CRC-32C (Castagnoli, reflected 0x82F63B78)
my @crc_table = map {
	my $c = $_;
	$c = ($c & 1) ? (($c >> 1) ^ 0x82F63B78) : ($c >> 1) for 1 .. 8;
	$c;
} 0 .. 255;

sub crc32c
{
	my ($data) = @_;
	my $crc = 0xFFFFFFFF;
	$crc = $crc_table[ ($crc ^ $_) & 0xFF ] ^ ($crc >> 8) for unpack('C*', $data);
	return $crc ^ 0xFFFFFFFF;
}
is(crc32c('123456789'), 0xE3069283, 'the test\'s CRC-32C is the standard one');

# Records of a spool file's bytes: hashes of offset, len, crc, version, body.
sub parse_records
{
	my ($bytes) = @_;
	my @recs;
	my $pos = 0;
	while ($pos + 16 <= length $bytes)
	{
		my ($magic, $len, $crc, $version) = unpack('V4', substr($bytes, $pos, 16));
		last if $magic != 0x4C505351 || $pos + 16 + $len > length $bytes;
		push @recs, {
			offset => $pos, len => $len, crc => $crc, version => $version,
			body => substr($bytes, $pos + 16, $len) };
		$pos += 16 + $len;
	}
	return (\@recs, $pos);
}

sub read_bytes
{
	my ($path) = @_;
	open(my $fh, '<:raw', $path) or die "open $path: $!";
	local $/;
	my $bytes = <$fh>;
	close $fh;
	return $bytes;
}

sub write_bytes
{
	my ($path, $bytes) = @_;
	open(my $fh, '>:raw', $path) or die "open $path: $!";
	print $fh $bytes;
	close $fh or die "close $path: $!";
}

sub stored_ids
{
	my ($queue, $txn) = @_;
	return map { $_->[2] } grep { $_->[1] eq $txn } stored_frames($node, $queue);
}

sub pending
{
	my $b = buffer_status($port);
	return $b ? $b->{pending} : -1;
}

# Push the items in one request, each to its own partition (p1, p2, ...),
# in maintenance mode; returns txn => message id.  One shard spools them
# within milliseconds, far inside the 100 ms that finish a file, so they
# land in one file, one record per partition, in partition order.
sub push_buffered
{
	my ($queue, @txns) = @_;
	my %ids;
	my $n = 0;
	my ($s, $r) = push_items($port,
		map { { queue => $queue, partition => 'p' . ++$n, payload => { t => $_ }, transactionId => $_ } } @txns);
	is($s, 201, 'push answered 201');
	for my $i (0 .. $#txns)
	{
		is($r->[$i]{status}, 'buffered', "$txns[$i] buffered");
		$ids{ $txns[$i] } = $r->[$i]{message_id};
	}
	return %ids;
}

# The one finished spool file, once it is finished (100 ms idle).
sub one_buf_file
{
	ok( wait_for(
			sub {
				scalar(spool_files($spool, qr/^queen-.*\.buf$/)) >= 1
				  && !spool_files($spool, qr/\.tmp$/);
			},
			30),
		'the spool file is finished: a .buf and no .tmp');
	my @bufs = spool_files($spool, qr/^queen-.*\.buf$/);
	is(scalar @bufs, 1, 'exactly one .buf file') or diag("files: @bufs");
	return $bufs[0];
}

# ---- four records, one damaged, the last cut short ----------------------------------
my ($ms) = set_maintenance($port, 1);
is($ms, 200, 'maintenance on');
my %id = push_buffered('dmg', qw(d1 d2 d3 d4));
my $name = one_buf_file();
like($name, qr/^queen-\d{13}-00-\d+-\d{6}-n4\.buf$/, "file name $name follows the spec, with 4 items");
$node->stop;

my $path = "$spool/$name";
my $bytes = read_bytes($path);
my ($recs, $end) = parse_records($bytes);
is(scalar @$recs, 4, 'four records, one per partition');
is($end, length $bytes, 'the records fill the file');
for my $i (0 .. $#$recs)
{
	my $r = $recs->[$i];
	my $n = $i + 1;
	is($r->{version}, 1, "record $n: version 1");
	is($r->{crc}, crc32c($r->{body}), "record $n: CRC-32C of the body");
	my ($t, $q, $p, $frames) = unpack('a16 v/a* v/a* V', $r->{body});
	ok( $t eq $tenant && $q eq 'dmg' && $p eq "p$n" && $frames == 1,
		"record $n: default tenant, dmg/p$n, one frame");
}
is(substr($bytes, 0, 4), 'QSPL', 'the magic reads QSPL in bytes');

# flip one byte in the middle of record 2's body, cut 5 bytes off record 4
my $r2 = $recs->[1];
my $r4 = $recs->[3];
my $at = $r2->{offset} + 16 + int($r2->{len} / 2);
substr($bytes, $at, 1) = chr(ord(substr($bytes, $at, 1)) ^ 0xFF);
isnt(crc32c(substr($bytes, $r2->{offset} + 16, $r2->{len})), $r2->{crc},
	'record 2 no longer matches its checksum');
$bytes = substr($bytes, 0, length($bytes) - 5);
my $damaged_rec = substr($bytes, $r2->{offset}, 16 + $r2->{len});
my $torn_rec = substr($bytes, $r4->{offset});
write_bytes($path, $bytes);

$node->start;
ok(wait_healthy($port, 60), 'healthy after the start');
($ms) = set_maintenance($port, 0);
is($ms, 200, 'maintenance off');
ok( wait_for(
		sub {
			scalar(stored_ids('dmg', 'd1')) && scalar(stored_ids('dmg', 'd3'))
			  && !-e $path;
		},
		60),
	'd1 and d3 are drained and the file is deleted');
is_deeply([ stored_ids('dmg', 'd1') ], [ $id{d1} ], 'd1 stored once under its buffered id');
is_deeply([ stored_ids('dmg', 'd3') ], [ $id{d3} ], 'd3 stored once under its buffered id');
is_deeply([ stored_ids('dmg', 'd2') ], [], 'the damaged d2 is not stored');
is_deeply([ stored_ids('dmg', 'd4') ], [], 'the truncated d4 is not stored');
is(gapless($node, 'dmg'), '0', 'offsets are gapless');

my $damaged_line = qr/queen spool: [^\n]*\Q$name\E"?: record at byte $r2->{offset}\b[^\n]*damaged/;
my $truncated_line = qr/queen spool: [^\n]*\Q$name\E"?: record at byte $r4->{offset}\b[^\n]*truncated/;
ok(wait_for(sub { slurp_file($node->logfile) =~ $damaged_line }, 10),
	"the log names the damaged record at byte $r2->{offset}");
ok(wait_for(sub { slurp_file($node->logfile) =~ $truncated_line }, 10),
	"the log names the truncated record at byte $r4->{offset}");

my @failed = spool_files("$spool/failed");
cmp_ok(scalar @failed, '>=', 1, 'the bad bytes are quarantined under failed/');
my $quarantined = join('', map { read_bytes("$spool/failed/$_") } @failed);
cmp_ok(length $quarantined, '>=', length($damaged_rec) + length($torn_rec),
	'failed/ holds at least the damaged and the torn record');
ok(index($quarantined, $damaged_rec) >= 0, 'failed/ holds the damaged record\'s bytes');
ok(index($quarantined, $torn_rec) >= 0, 'failed/ holds the torn record\'s bytes');
ok(wait_for(sub { my $b = buffer_status($port); $b && $b->{failed} == scalar(spool_files("$spool/failed")) }, 30),
	'status/buffers failed counts the files in failed/');
ok(wait_for(sub { pending() == 0 }, 30), 'nothing pending');
cmp_ok(metric($port, 'queen_spool_records_damaged_total') // 0, '>=', 2,
	'queen_spool_records_damaged_total counts both bad records');

# ---- a leftover .tmp with a torn tail ------------------------------------------------
($ms) = set_maintenance($port, 1);
is($ms, 200, 'maintenance on again');
my %eid = push_buffered('torn', qw(e1 e2));
$name = one_buf_file();
$node->stop;

my $tmpname = 'queen-0000000000001-00-1-000001';
$bytes = read_bytes("$spool/$name");
($recs, $end) = parse_records($bytes);
is(scalar @$recs, 2, 'two records in the second file');
write_bytes("$spool/$tmpname.tmp", $bytes . "\x51\x53\x50\x4c\x07\x00\x00");
unlink("$spool/$name") or die "unlink $name: $!";

$node->start;
ok(wait_healthy($port, 60), 'healthy after the start');
ok( wait_for(sub { -e "$spool/$tmpname-n2.buf" && !-e "$spool/$tmpname.tmp" }, 30),
	'the leftover .tmp is finished as a .buf counting its 2 intact items');
($ms) = set_maintenance($port, 0);
is($ms, 200, 'maintenance off');
ok( wait_for(
		sub {
			scalar(stored_ids('torn', 'e1')) && scalar(stored_ids('torn', 'e2'))
			  && !spool_files($spool, qr/\.(?:buf|tmp)$/);
		},
		60),
	'its intact records are drained and the file disappears');
is_deeply([ stored_ids('torn', 'e1') ], [ $eid{e1} ], 'e1 stored once under its buffered id');
is_deeply([ stored_ids('torn', 'e2') ], [ $eid{e2} ], 'e2 stored once under its buffered id');
is(stored_count($node, 'torn'), '2', 'nothing else stored');

# ---- a file whose commit was recorded but which was not deleted -------------------------
# What a crash between a drain's COMMIT and the file's unlink leaves: the
# name is in queen.spool_drained, so the file goes without a replay, even
# with the dedup window off (the probe alone could not catch it).
$node->safe_psql('postgres',
	q{SELECT queen.configure_queue_v1('{"queue":"marked","options":{"dedupWindowSeconds":0}}')});
($ms) = set_maintenance($port, 1);
is($ms, 200, 'maintenance on for the recorded file');
push_buffered('marked', qw(m1));
$name = one_buf_file();
$node->safe_psql('postgres', "INSERT INTO queen.spool_drained (file, items) VALUES ('$name', 1)");
($ms) = set_maintenance($port, 0);
is($ms, 200, 'maintenance off');
ok(wait_for(sub { !-e "$spool/$name" }, 60), 'the recorded file is removed');
is(stored_count($node, 'marked'), '0', 'and not replayed: nothing stored for it');
like(slurp_file($node->logfile), qr/\Q$name\E" was committed before/,
	'the log says it was removed without a replay');

is_deeply([ log_crashes($node) ], [], 'no worker crashed');
$node->stop;
done_testing();
