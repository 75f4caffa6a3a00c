# Helpers for the broker's TAP tests: a preloaded cluster with the HTTP
# broker on a free port, a small HTTP client, raw socket exchanges and
# polling with a deadline (background workers act asynchronously, so tests
# wait for a state instead of sleeping and hoping).
package QueenHTTP;

use strict;
use warnings;

use Exporter 'import';
use HTTP::Tiny;
use IO::Socket::INET;
use IO::Select;
use IPC::Run;
use JSON::PP;
use Time::HiRes qw(time sleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

our @EXPORT = qw(start_broker set_max_connections http_request http_json push_items wait_for
  wait_healthy raw_exchange metric log_crashes broker_conf verify_results gapless
  run_load load_start load_finish stored_frames stored_count buffer_status set_maintenance
  get_maintenance spool_files process_alive last_listener_pid
  verify_acknowledged send_request read_response shard_of
  shards_waiting_on_lock hold_partition_lock segments_per_transaction pop ack_batch
  set_test_fault test_fault_fired retain_away);

my $json = JSON::PP->new->canonical;

# Settings of the broker under test; extra lines may be added by the caller.
sub broker_conf
{
	my (%opt) = @_;
	my $port = $opt{http_port};
	my $shards = $opt{shards} // 4;
	my $db = $opt{database} // 'postgres';
	return <<"CONF" . ($opt{extra} // '');
shared_preload_libraries = 'queen'
max_worker_processes = 32
queen.database = '$db'
queen.http_port = $port
queen.http_listen_address = '127.0.0.1'
queen.fusion_shards = $shards
CONF
}

# A started cluster with the broker; the extension is created unless asked not to.
sub start_broker
{
	my (%opt) = @_;
	my $node = PostgreSQL::Test::Cluster->new($opt{name} // 'broker');
	$node->init(extra => [ '--encoding=UTF8', '--locale=C' ]);
	my $port = PostgreSQL::Test::Cluster::get_free_port();
	$node->append_conf('postgresql.conf',
		broker_conf(%opt, http_port => $port));
	$node->start;
	unless ($opt{no_extension})
	{
		my $db = $opt{database} // 'postgres';
		$node->safe_psql($db, 'CREATE EXTENSION queen');
		wait_healthy($port, 60) or die "broker did not become healthy: "
		  . broker_state($node, $port);
	}
	return ($node, $port);
}

# What a broker that did not become healthy was doing, for the failure
# message: its /health answer and its workers' rows of pg_stat_activity.
sub broker_state
{
	my ($node, $port) = @_;
	my ($status, $body) = http_request($port, 'GET', '/health');
	my $workers = $node->safe_psql('postgres',
		q{SELECT string_agg(format('%s pid %s %s/%s %s', backend_type, pid, wait_event_type, wait_event, state), '; ' ORDER BY backend_type, pid)
		    FROM pg_stat_activity WHERE backend_type LIKE 'queen%'});
	my $pm = $node->{_pid} // 0;
	my $ps = `ps -o pid,stat,wchan:24,args --ppid $pm 2>&1`;
	# where each broker worker is, when gdb is there to ask
	my $stacks = '';
	if (system('command -v gdb >/dev/null 2>&1') == 0)
	{
		for my $pid (split /\s+/, `pgrep -P $pm -f '^postgres: .*queen' 2>/dev/null`)
		{
			next unless $pid;
			my $bt = `gdb -p $pid -batch -ex bt 2>/dev/null | grep '^#'`;
			$stacks .= "pid $pid:\n$bt";
		}
	}
	return "health $status $body; workers: $workers; processes:\n$ps$stacks";
}

# (status, body, headers) of one request on a fresh connection.
sub http_request
{
	my ($port, $method, $path, $body, $headers) = @_;
	my $ua = HTTP::Tiny->new(timeout => 60, keep_alive => 0);
	my %args = (headers => $headers // {});
	if (defined $body)
	{
		$args{content} = $body;
		$args{headers}{'Content-Type'} //= 'application/json';
	}
	my $r = $ua->request($method, "http://127.0.0.1:$port$path", \%args);
	return ($r->{status}, $r->{content}, $r->{headers});
}

# (status, decoded JSON or undef)
sub http_json
{
	my ($port, $method, $path, $data) = @_;
	my $body = ref $data ? $json->encode($data) : $data;
	my ($status, $content) = http_request($port, $method, $path, $body);
	my $decoded = eval { $json->decode($content) };
	return ($status, $decoded, $content);
}

# POST /api/v1/push with these items; returns (status, results arrayref)
sub push_items
{
	my ($port, @items) = @_;
	my ($status, $decoded) =
	  http_json($port, 'POST', '/api/v1/push', { items => \@items });
	return ($status, $decoded);
}

# Poll $check until it returns true or $timeout seconds pass.
sub wait_for
{
	my ($check, $timeout) = @_;
	my $deadline = time + ($timeout // 60);
	while (time < $deadline)
	{
		return 1 if $check->();
		sleep 0.05;
	}
	return $check->() ? 1 : 0;
}

sub wait_healthy
{
	my ($port, $timeout) = @_;
	return wait_for(
		sub {
			my ($s) = http_request($port, 'GET', '/health');
			return $s == 200;
		},
		$timeout);
}

# Send raw bytes, optionally close our side, and read until the server
# closes or $timeout passes.  Returns what the server sent.
sub raw_exchange
{
	my ($port, $bytes, %opt) = @_;
	my $sock = IO::Socket::INET->new(
		PeerAddr => '127.0.0.1',
		PeerPort => $port,
		Proto => 'tcp') or die "connect: $!";
	$sock->autoflush(1);
	print $sock $bytes if length $bytes;
	shutdown($sock, 1) if $opt{half_close};
	return '' if $opt{abort};
	my $sel = IO::Select->new($sock);
	my $out = '';
	my $deadline = time + ($opt{timeout} // 10);
	while (time < $deadline)
	{
		last unless $sel->can_read($deadline - time);
		my $n = sysread($sock, my $buf, 65536);
		last unless $n;
		$out .= $buf;
		last if $opt{until} && $out =~ $opt{until};
	}
	close $sock;
	return $out;
}

# Set queen.http_max_connections and wait until the listener applied it.
sub set_max_connections
{
	my ($node, $n) = @_;
	my $before = () = slurp_file($node->logfile) =~ /listener \(reloaded\)/g;
	$node->append_conf('postgresql.conf', "queen.http_max_connections = $n\n");
	$node->reload;
	return wait_for(sub { (() = slurp_file($node->logfile) =~ /listener \(reloaded\)/g) > $before });
}

# Value of one metric line (exact name with labels) from /metrics/prometheus.
sub metric
{
	my ($port, $name) = @_;
	my ($s, $body) = http_request($port, 'GET', '/metrics/prometheus');
	return undef unless $s == 200;
	for my $line (split /\n/, $body)
	{
		next if $line =~ /^#/;
		my ($k, $v) = $line =~ /^(\S+)\s+(\S+)$/ or next;
		return $v if $k eq $name;
	}
	return undef;
}

# Lines of the server log that show a worker crashing or exiting badly.
sub log_crashes
{
	my ($node) = @_;
	my $log = slurp_file($node->logfile);
	return grep { /terminated by signal|exited with exit code [^01]|server process .* was terminated|PANIC/ }
	  split /\n/, $log;
}

# Run bench/queen-load (path in QUEEN_LOAD) against the broker on $port to
# completion; returns its JSON summary, decoded.
sub run_load
{
	my ($port, @args) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run([ $ENV{QUEEN_LOAD}, '--port', $port, @args ], '>', \$out, '2>', \$err)
	  or die "queen-load failed: $err";
	return $json->decode($out);
}

# Start bench/queen-load against the broker on $port in the background
# (a 120 s hard stop unless @args give another --timeout); load_finish
# waits for it.  $name labels its assertion and its summary.
sub load_start
{
	my ($port, $name, @args) = @_;
	my %run = (name => $name, out => '', err => '');
	$run{h} = IPC::Run::start([ $ENV{QUEEN_LOAD}, '--port', $port, '--timeout', 120, @args ],
		'>', \$run{out}, '2>', \$run{err});
	return \%run;
}

# Wait for a load_start run; asserts it ended with a summary, which it returns decoded.
sub load_finish
{
	my ($run) = @_;
	IPC::Run::finish($run->{h});
	my $summary = eval { $json->decode($run->{out}) };
	ok($summary, "$run->{name} completed") or diag("queen-load: $run->{err}");
	diag("$run->{name}: $run->{out}");
	return $summary // {};
}

# Check a bench/queen-load --results file against the tables: returns
# (items answered queued, of those not stored exactly once, of those stored
# under another message id, stored items never answered queued, items
# answered neither queued nor duplicate).
sub verify_results
{
	my ($node, $file, $queue) = @_;
	my $sql = qq{
		CREATE TEMP TABLE answered (txn text, status text, mid uuid, part text);
		COPY answered FROM '$file';
		WITH stored AS (
			SELECT p.name AS part, f.transaction_id AS txn, f.message_id AS mid
			  FROM queen.log_segments s
			  JOIN queen.log_partitions p ON p.id = s.partition_id
			  JOIN queen.queues q ON q.id = p.queue_id,
			  LATERAL queen.unpack_frames(s.blob) f
			 WHERE q.name = '$queue')
		SELECT (SELECT count(*) FROM answered WHERE status = 'queued'),
		       (SELECT count(*) FROM answered a WHERE status = 'queued'
		           AND (SELECT count(*) FROM stored s WHERE s.txn = a.txn AND s.part = a.part) <> 1),
		       (SELECT count(*) FROM answered a WHERE status = 'queued'
		           AND NOT EXISTS (SELECT 1 FROM stored s WHERE s.txn = a.txn AND s.mid = a.mid)),
		       (SELECT count(*) FROM stored s WHERE NOT EXISTS
		           (SELECT 1 FROM answered a WHERE a.txn = s.txn AND a.status = 'queued')),
		       (SELECT count(*) FROM answered WHERE status NOT IN ('queued', 'duplicate'))
	};
	return split /\|/, $node->safe_psql('postgres', $sql);
}

# Partitions of a queue whose segments are not contiguous from offset 0 up
# to last_offset (0 when every partition is gapless).
sub gapless
{
	my ($node, $queue) = @_;
	return $node->safe_psql('postgres', qq{
		SELECT count(*) FROM (
			SELECT p.id, p.last_offset,
			       sum(s.end_offset - s.base_offset + 1) AS n,
			       bool_and(s.base_offset = coalesce(s.prev_end, -1) + 1) AS contiguous
			  FROM queen.log_partitions p
			  JOIN queen.queues q ON q.id = p.queue_id
			  JOIN (SELECT *, lag(end_offset) OVER (PARTITION BY partition_id ORDER BY base_offset) AS prev_end
			          FROM queen.log_segments) s ON s.partition_id = p.id
			 WHERE q.name = '$queue'
			 GROUP BY p.id, p.last_offset) x
		 WHERE NOT contiguous OR n <> last_offset + 1});
}


# ---- spool, maintenance mode and crash helpers ---------------------------------

# Every message stored for a queue, one [partition, transaction_id,
# message_id] per frame, in partition and offset order.
sub stored_frames
{
	my ($node, $queue) = @_;
	my $out = $node->safe_psql('postgres', qq{
		SELECT p.name, f.transaction_id, f.message_id
		  FROM queen.log_segments s
		  JOIN queen.log_partitions p ON p.id = s.partition_id
		  JOIN queen.queues q ON q.id = p.queue_id,
		  LATERAL queen.unpack_frames(s.blob) f
		 WHERE q.name = '$queue'
		 ORDER BY p.name, s.base_offset, f.idx});
	return map { [ split /\|/, $_, -1 ] } grep { length } split /\n/, $out;
}

# Number of messages stored for a queue, from the segments' offset ranges
# (cheap enough to poll under load).
sub stored_count
{
	my ($node, $queue) = @_;
	return $node->safe_psql('postgres', qq{
		SELECT coalesce(sum(s.end_offset - s.base_offset + 1), 0)
		  FROM queen.log_segments s
		  JOIN queen.log_partitions p ON p.id = s.partition_id
		  JOIN queen.queues q ON q.id = p.queue_id
		 WHERE q.name = '$queue'});
}

# Retain a partition's segments up to offset $upto away as retention's step
# does (src/core/retention.c; qtest.retain in sql/setup for the regression
# tests): they go, the hashes the dedup window still needs move to log_txns,
# log_start moves past them.
sub retain_away
{
	my ($node, $queue, $partition, $upto) = @_;
	$node->safe_psql('postgres', qq{
		WITH p AS (SELECT p.id, p.txns_start FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
					WHERE q.name = '$queue' AND p.name = '$partition'),
		     d AS (DELETE FROM queen.log_segments s USING p
					WHERE s.partition_id = p.id AND s.base_offset <= $upto
				   RETURNING s.partition_id, s.base_offset, s.end_offset, s.created_at, s.hashes, p.txns_start),
		     m AS (INSERT INTO queen.log_txns
				   SELECT partition_id, base_offset, end_offset, created_at, hashes FROM d
					WHERE hashes IS NOT NULL AND end_offset >= txns_start)
		UPDATE queen.log_partitions l SET log_start = GREATEST(l.log_start, (SELECT max(end_offset) + 1 FROM d))
		  FROM p WHERE l.id = p.id});
}

# GET $path's JSON object, or undef when it does not answer 200 with one.
sub get_object
{
	my ($port, $path) = @_;
	my ($s, $d) = http_json($port, 'GET', $path);
	return ($s == 200 && ref $d eq 'HASH') ? $d : undef;
}

# GET /api/v1/status/buffers decoded, or undef.
sub buffer_status { return get_object($_[0], '/api/v1/status/buffers'); }

# POST /api/v1/system/maintenance {"enabled": <bool>}: (status, decoded, raw).
sub set_maintenance
{
	my ($port, $on) = @_;
	return http_json($port, 'POST', '/api/v1/system/maintenance',
		'{"enabled":' . ($on ? 'true' : 'false') . '}');
}

# GET /api/v1/system/maintenance decoded, or undef.
sub get_maintenance { return get_object($_[0], '/api/v1/system/maintenance'); }

# Names of the plain files in $dir matching $re (none if $dir is missing).
sub spool_files
{
	my ($dir, $re) = @_;
	opendir(my $dh, $dir) or return ();
	my @names = sort grep { -f "$dir/$_" && (!defined $re || $_ =~ $re) } readdir $dh;
	closedir $dh;
	return @names;
}

# Is $pid a live process (a zombie nobody reaps counts as gone)?
sub process_alive
{
	my ($pid) = @_;
	open(my $fh, '<', "/proc/$pid/stat") or return 0;
	my $line = <$fh>;
	close $fh;
	return 0 unless defined $line;
	my ($state) = $line =~ /^\d+ \(.*\) (\S)/s;
	return defined $state && $state ne 'Z' && $state ne 'X';
}

# Pid of the newest listener $index, from its "listening on" log line
# (listeners hold no database connection, so pg_stat_activity lacks them).
sub last_listener_pid
{
	my ($node, $index) = @_;
	$index //= 0;
	my $pid;
	for (split /\n/, slurp_file($node->logfile))
	{
		$pid = $1 if /\[(\d+)\] LOG:  queen listener $index: listening on/;
	}
	return $pid;
}

# Check a bench/queen-load --results file of a run that may have seen
# crashes against the tables.  Returns a hash reference of counts:
#   answered            result lines (items of requests answered 2xx)
#   queued, buffered, failed, duplicate, other   answers by status
#   acked_not_once      items answered queued or buffered whose
#                       (transactionId, partition) is not stored exactly once
#   acked_wrong_id      of those, not stored under the message id answered
#   failed_stored       items answered failed that are stored
#   txn_stored_twice    transactionIds stored more than once in the queue
#   stored              messages stored in the queue
#   unanswered_stored   stored messages whose transactionId got no answer
#                       (their request's connection broke)
sub verify_acknowledged
{
	my ($node, $file, $queue) = @_;
	my @cols = qw(answered queued buffered failed duplicate other
	  acked_not_once acked_wrong_id failed_stored txn_stored_twice stored
	  unanswered_stored);
	my $sql = qq{
		CREATE TEMP TABLE answered (txn text, status text, mid uuid, part text);
		COPY answered FROM '$file';
		CREATE TEMP TABLE stored AS
			SELECT p.name AS part, f.transaction_id AS txn, f.message_id AS mid
			  FROM queen.log_segments s
			  JOIN queen.log_partitions p ON p.id = s.partition_id
			  JOIN queen.queues q ON q.id = p.queue_id,
			  LATERAL queen.unpack_frames(s.blob) f
			 WHERE q.name = '$queue';
		ANALYZE answered;
		ANALYZE stored;
		WITH per AS (
			SELECT txn, part, count(*) AS n, array_agg(mid) AS mids
			  FROM stored GROUP BY txn, part),
		a AS (
			SELECT a.status, a.mid, coalesce(per.n, 0) AS n, per.mids,
			       a.status IN ('queued', 'buffered') AS acked
			  FROM answered a LEFT JOIN per USING (txn, part))
		SELECT count(*),
		       count(*) FILTER (WHERE status = 'queued'),
		       count(*) FILTER (WHERE status = 'buffered'),
		       count(*) FILTER (WHERE status = 'failed'),
		       count(*) FILTER (WHERE status = 'duplicate'),
		       count(*) FILTER (WHERE status NOT IN ('queued', 'buffered', 'failed', 'duplicate')),
		       count(*) FILTER (WHERE acked AND n <> 1),
		       count(*) FILTER (WHERE acked AND NOT coalesce(mid = ANY (mids), false)),
		       count(*) FILTER (WHERE status = 'failed' AND n > 0),
		       (SELECT count(*) FROM (SELECT txn FROM stored GROUP BY txn HAVING count(*) > 1) d),
		       (SELECT count(*) FROM stored),
		       (SELECT count(*) FROM stored s WHERE NOT EXISTS
		           (SELECT 1 FROM answered x WHERE x.txn = s.txn))
		  FROM a
	};
	my %r;
	@r{@cols} = split /\|/, $node->safe_psql('postgres', $sql);
	return \%r;
}


# ---- requests left in flight, and the shard that owns a partition --------------

# Send one request on a fresh connection ("Connection: close") without
# waiting for its answer; read_response collects it later.  Returns the socket.
sub send_request
{
	my ($port, $method, $path, $data) = @_;
	my $body = !defined $data ? '' : ref $data ? $json->encode($data) : $data;
	my $sock = IO::Socket::INET->new(
		PeerAddr => '127.0.0.1',
		PeerPort => $port,
		Proto => 'tcp') or die "connect: $!";
	$sock->autoflush(1);
	print $sock "$method $path HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
	  . "Content-Type: application/json\r\nContent-Length: " . length($body) . "\r\n\r\n" . $body;
	return $sock;
}

# The answer to send_request's request: (status, decoded JSON body or undef,
# raw body); the status is undef if the server closed or $timeout seconds
# passed without a complete answer.
sub read_response
{
	my ($sock, $timeout) = @_;
	my $sel = IO::Select->new($sock);
	my $out = '';
	my $deadline = time + ($timeout // 60);
	while (time < $deadline)
	{
		last unless $sel->can_read($deadline - time);
		my $n = sysread($sock, my $buf, 65536);
		last unless $n;
		$out .= $buf;
	}
	close $sock;
	my ($head, $body) = split /\r\n\r\n/, $out, 2;
	my ($status) = ($head // '') =~ m{^HTTP/1\.\d (\d{3}) };
	my ($length) = ($head // '') =~ /^Content-Length: (\d+)\r?$/mi;
	# a 204 has no body and no length for one (RFC 9110)
	$length = 0 if defined $status && $status == 204 && !defined $length;
	return (undef, undef, $out)
	  unless defined $status && defined $length && length($body) == $length;
	my $decoded = eval { $json->decode($body) };
	return ($status, $decoded, $body);
}

# The fusion shard that owns (queue, partition) among $nshards: FNV-1a 64 of
# tenant bytes, queue, 0x1F, partition, as queen_shard_of (src/broker/worker.c).
sub shard_of
{
	my ($queue, $partition, $nshards, $tenant) = @_;
	require Math::BigInt;
	($tenant //= '00000000-0000-0000-0000-000000000001') =~ s/-//g;
	my $mask = Math::BigInt->from_hex('ffffffffffffffff');
	my $prime = Math::BigInt->from_hex('100000001b3');
	my $h = Math::BigInt->from_hex('cbf29ce484222325');
	for my $c (unpack 'C*', pack('H*', $tenant) . $queue . "\x1f" . $partition)
	{
		$h->bxor($c)->bmul($prime)->band($mask);
	}
	return $h->bmod($nshards)->numify;
}

# A background session that holds the row lock of $queue's partition
# $partition, in an open transaction, until its caller sends COMMIT.
sub hold_partition_lock
{
	my ($node, $queue, $partition) = @_;
	my $s = $node->background_psql('postgres');
	$s->query_safe('BEGIN');
	$s->query_safe(qq{
		SELECT 1 FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
		 WHERE q.name = '$queue' AND p.name = '$partition' FOR UPDATE OF p});
	return $s;
}

# Number of fusion shards waiting for a heavyweight lock (a row lock that a
# test's own session holds), to know a bundle has stopped on it.
sub shards_waiting_on_lock
{
	my ($node) = @_;
	return $node->safe_psql('postgres', q{
		SELECT count(*) FROM pg_stat_activity
		 WHERE backend_type = 'queen shard' AND wait_event_type = 'Lock'});
}

# How many partitions each transaction that wrote to $queue committed, most
# first: the segments of one bundle share their xmin.
sub segments_per_transaction
{
	my ($node, $queue, $partition_like) = @_;
	$partition_like //= '%';
	my $out = $node->safe_psql('postgres', qq{
		SELECT count(*) FROM queen.log_segments s
		  JOIN queen.log_partitions p ON p.id = s.partition_id
		  JOIN queen.queues q ON q.id = p.queue_id
		 WHERE q.name = '$queue' AND p.name LIKE '$partition_like'
		 GROUP BY s.xmin::text ORDER BY 1 DESC});
	return map { $_ + 0 } grep { length } split /\n/, $out;
}

# ---- consumption ----------------------------------------------------------------

# GET a pop route: (status, decoded body or undef, raw body, headers).
sub pop
{
	my ($port, $path) = @_;
	my ($status, $content, $headers) = http_request($port, 'GET', $path);
	my $decoded = eval { $json->decode($content) };
	return ($status, $decoded, $content, $headers);
}

# POST /api/v1/ack/batch for these acknowledgments: (status, decoded answer).
sub ack_batch
{
	my ($port, $group, @acks) = @_;
	my %body = (acknowledgments => \@acks);
	$body{consumerGroup} = $group if defined $group;
	my ($status, $decoded) = http_json($port, 'POST', '/api/v1/ack/batch', \%body);
	return ($status, $decoded);
}

# ---- test faults (queen.test_fault, worker.c) ----------------------------------

# Arm a test fault (or disarm with ''); the shards see it after the reload.
sub set_test_fault
{
	my ($node, $fault) = @_;
	$node->safe_psql('postgres', "ALTER SYSTEM SET queen.test_fault = '$fault'");
	$node->reload;
}

# How many times the server log says the fault fired.
sub test_fault_fired
{
	my ($node, $fault) = @_;
	my $n = () = slurp_file($node->logfile) =~ /queen\.test_fault "\Q$fault\E" fires/g;
	return $n;
}

# base64url without padding (JWT parts)
sub b64url
{
	require MIME::Base64;
	my $v = MIME::Base64::encode_base64($_[0], '');
	$v =~ tr{+/}{-_};
	$v =~ s/=+$//;
	return $v;
}

# An HS256 JWT of these claims, expiring in five minutes (for QueenHTTP::jwt_hs256).
sub jwt_hs256
{
	my ($secret, $claims) = @_;
	require Digest::SHA;
	my $h = b64url($json->encode({ alg => 'HS256', typ => 'JWT' }));
	my $c = b64url($json->encode({ exp => time + 300, %$claims }));
	return "$h.$c." . b64url(Digest::SHA::hmac_sha256("$h.$c", $secret));
}

1;
