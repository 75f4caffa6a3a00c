# A crash (immediate shutdown: no checkpoint, no clean exit) loses no
# committed push, keeps nothing of an uncommitted one, and leaves the
# allocator where the last committed push left it: offsets stay gapless.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('crash');
$node->init(extra => [ '--encoding=UTF8', '--locale=C' ]);
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'queen'\n");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION queen');

# 200 messages over 4 partitions: 40 single pushes and 40 four-item pushes
# (one segment per partition each), every call its own committed
# transaction; every one that returned is acknowledged.
my $acked = 0;
for my $i (1 .. 40)
{
	$node->safe_psql('postgres',
		"SELECT queen.push('crash.q', '{\"i\": $i}', 'p' || ($i % 4), 'single-$i')");
	$acked++;
	my $items = join(',',
		map { "{\"queue\": \"crash.q\", \"partition\": \"p" . ($_ % 4) . "\", \"payload\": $_, \"transactionId\": \"bundle-$i-$_\"}" }
		  (1 .. 4));
	$node->safe_psql('postgres', "SELECT count(*) FROM queen.push('[$items]')");
	$acked += 4;
}

# A transaction that pushed but never committed when the server died.
my ($stdin, $stdout, $stderr) = ('', '', '');
my $open = IPC::Run::start(
	[ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres') ],
	'<', \$stdin, '>', \$stdout, '2>', \$stderr);
$stdin .= "BEGIN;\nSELECT 'pushed ' || status FROM queen.push('crash.q', '{\"lost\": true}', 'p1', 'never-committed');\n";
ok(pump_until($open, IPC::Run::timer($PostgreSQL::Test::Utils::timeout_default), \$stdout, qr/pushed queued/),
	'an uncommitted push is in flight');

$node->stop('immediate');
$open->finish;
$node->start;

is($node->safe_psql('postgres',
		"SELECT count(*) FROM queen.log_segments s JOIN queen.log_partitions p ON p.id = s.partition_id"),
	'200', 'every acknowledged segment survived: 40 singles, 40 bundles over 4 partitions');
is($node->safe_psql('postgres',
		"SELECT sum(n) FROM (SELECT count(*) AS n FROM generate_series(0, 3) g, queen.read('crash.q', 'p' || g, 0, 1000)) s"),
	$acked, 'every acknowledged message is readable');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM queen.read('crash.q', 'p1', 0, 1000) WHERE transaction_id = 'never-committed'"),
	'0', 'the uncommitted push left no trace');
is($node->safe_psql('postgres', q{
	SELECT bool_and(gapless) FROM (
		SELECT p.id, bool_and(s.base_offset = coalesce(s.prev_end, -1) + 1) AND max(s.end_offset) = p.last_offset AS gapless
		  FROM queen.log_partitions p
		  JOIN (SELECT *, lag(end_offset) OVER (PARTITION BY partition_id ORDER BY base_offset) AS prev_end
		          FROM queen.log_segments) s ON s.partition_id = p.id
		 GROUP BY p.id, p.last_offset) g}),
	't', 'offsets are gapless and every allocator row matches its last segment');

# The allocator continues right after the last committed offset.
my $next = $node->safe_psql('postgres',
	"SELECT log_offset FROM queen.push('crash.q', '{\"after\": true}', 'p1', 'never-committed')");
my $last = $node->safe_psql('postgres',
	"SELECT max(log_offset) FROM queen.read('crash.q', 'p1', 0, 1000) WHERE transaction_id <> 'never-committed'");
is($next, $last + 1, 'the next push takes the next offset, with the rolled-back one reused');

# Dedup still knows what was committed before the crash.
is($node->safe_psql('postgres',
		"SELECT status FROM queen.push('crash.q', '{}', 'p1', 'single-1')"),
	'duplicate', 'a committed transactionId is still a duplicate after recovery');

$node->stop;
done_testing();
