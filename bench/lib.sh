# Shared by the bench/ scripts: a throwaway cluster with the extension
# preloaded, in a scratch directory removed on exit.  Source after
# scripts/lib.sh, then call bench_cluster PORT, with any extra
# postgresql.conf lines on standard input.  Defines WORK and psql_b.
# BENCH_PRELOAD= (empty) starts it without preloading the library.

bench_cluster() {	# bench_cluster <port>  (extra settings on stdin)
	BENCH_PORT_USED=$1
	WORK=$(mktemp -d /tmp/queen-bench.XXXXXX)
	$SUDO chown "$CLUSTER_USER" "$WORK"
	trap bench_cleanup EXIT

	as_cluster_user "$PG_BINDIR/initdb" -D "$WORK/data" -E UTF8 --locale=C.UTF-8 -A trust -U postgres >/dev/null
	{
		cat <<CONF
port = $BENCH_PORT_USED
listen_addresses = ''
unix_socket_directories = '$WORK'
shared_preload_libraries = '${BENCH_PRELOAD-queen}'
shared_buffers = 512MB
max_wal_size = 4GB
CONF
		cat
	} | as_cluster_user tee -a "$WORK/data/postgresql.conf" >/dev/null
	as_cluster_user "$PG_BINDIR/pg_ctl" -D "$WORK/data" -w -l "$WORK/log" start >/dev/null
}

bench_cleanup() {
	as_cluster_user "$PG_BINDIR/pg_ctl" -D "$WORK/data" -m immediate stop >/dev/null 2>&1 || true
	$SUDO rm -rf "$WORK"
}

psql_b() { as_cluster_user "$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -h "$WORK" -p "$BENCH_PORT_USED" -U postgres -d postgres "$@"; }

bench_wait_healthy() {	# bench_wait_healthy <http port>
	for _ in $(seq 1 120); do
		if perl -MHTTP::Tiny -e 'exit(HTTP::Tiny->new(timeout => 2)->get("http://127.0.0.1:$ARGV[0]/health")->{status} == 200 ? 0 : 1)' "$1"; then
			return 0
		fi
		sleep 0.5
	done
	echo "broker not healthy" >&2
	exit 1
}

# Run the SQL on stdin, again if PostgreSQL cancels it as a deadlock's victim:
# the broker's maintenance worker reads the queue tables in its own order, so
# a TRUNCATE of them can deadlock with it.  The SQL must be safe to repeat.
bench_psql_retry() {
	local sql attempt err
	sql=$(cat)
	for attempt in 1 2 3 4 5; do
		if err=$(psql_b 2>&1 >/dev/null <<<"$sql"); then
			return 0
		fi
		[[ $err == *"deadlock detected"* ]] || { echo "$err" >&2; return 1; }
		echo "bench: deadlock with the broker (attempt $attempt), trying again" >&2
	done
	echo "$err" >&2
	return 1
}

bench_reset_state() {	# empty the queues and checkpoint, so runs start alike
	bench_psql_retry <<'SQL'
SET client_min_messages = warning;
BEGIN;
TRUNCATE queen.queues CASCADE;
TRUNCATE queen.log_txns;
COMMIT;
CHECKPOINT;
SQL
}

# ---- measuring helpers (bench/run) ----

bench_http() {	# bench_http GET|POST <url> [body]: prints the body, fails on a non-2xx answer
	perl -MHTTP::Tiny -e '
		my ($m, $u, $b) = @ARGV;
		my $r = HTTP::Tiny->new(timeout => 10)->request($m, $u, defined $b ? { content => $b, headers => { "content-type" => "application/json" } } : {});
		print $r->{content};
		if (!$r->{success}) { print STDERR "$m $u: $r->{status} $r->{content}\n"; exit 1; }' "$@"
}

bench_broker_counters() {	# bench_broker_counters <http port>: "commits segments" of the broker so far
	bench_http GET "http://127.0.0.1:$1/metrics/prometheus" | perl -ne '
		$c = $1 if /^queen_bundles_committed_total (\d+)/;
		$s = $1 if /^queen_batches_fired_total\{op="push"\} (\d+)/;
		END { die "no broker counters in /metrics/prometheus\n" unless defined $c && defined $s; print "$c $s\n"; }'
}

bench_xact_commit() {	# committed transactions of the database so far (pg_stat_database)
	psql_b -tAc "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
}

# CPU clock ticks used so far by the cluster: "<broker> <postgres> <machine busy>
# <machine steal> <wall clock s>".  <broker> sums utime+stime of the postmaster's children whose
# title is "postgres: queen ..." (listener, shards, maintenance); <postgres> is the
# postmaster with its reaped children (cutime+cstime: backends that have exited)
# plus its live children; the machine figures come from /proc/stat.
bench_cpu_sample() {
	perl -MTime::HiRes -e '
		my $pm = $ARGV[0];
		sub stat_of { open(my $f, "<", "/proc/$_[0]/stat") or return; my $s = <$f>; $s =~ s/^.*\) //s; return split / /, $s; }
		my @p = stat_of($pm) or die "postmaster $pm is gone\n";
		my $total = $p[11] + $p[12] + $p[13] + $p[14];
		my $broker = 0;
		opendir(my $d, "/proc") or die;
		for my $pid (grep { /^\d+$/ } readdir $d) {
			my @s = stat_of($pid) or next;
			next unless $s[1] == $pm;
			$total += $s[11] + $s[12];
			open(my $c, "<", "/proc/$pid/cmdline") or next;
			my $cmd = <$c> // "";
			$broker += $s[11] + $s[12] if $cmd =~ /^postgres: (?:[^:\0]+: )?queen /;
		}
		open(my $st, "<", "/proc/stat") or die;
		my (undef, @cpu) = split " ", scalar <$st>;
		my $busy = $cpu[0] + $cpu[1] + $cpu[2] + $cpu[5] + $cpu[6];	# user nice system irq softirq
		printf "%d %d %d %d %.3f\n", $broker, $total, $busy, $cpu[7] // 0, Time::HiRes::time();' "$(head -1 "$WORK/data/postmaster.pid")"
}

bench_pgbench_latency() {	# bench_pgbench_latency <log prefix>: "p50_ms p99_ms count" of pgbench -l logs
	# a line: client_id transaction_no time_us script_no epoch epoch_us [schedule_lag_us];
	# with --rate, time includes the lag, which is taken out: what remains is the round trip
	perl -e '
		my @v;
		for my $f (glob("$ARGV[0].*")) {
			open(my $h, "<", $f) or die "$f: $!\n";
			while (<$h>) { my @c = split; push @v, $c[2] - ($c[6] // 0); }
		}
		die "no pgbench log lines under $ARGV[0]\n" unless @v;
		@v = sort { $a <=> $b } @v;
		my $q = sub { my $i = int($_[0] * @v + 0.999999) - 1; $i = 0 if $i < 0; return $v[$i] / 1000; };
		printf "%.3f %.3f %d\n", $q->(0.50), $q->(0.99), scalar @v;' "$1"
}

bench_timed() {	# bench_timed <file> command...: runs it, writes its CPU seconds (with children) to <file>
	perl -e '
		my $out = shift;
		my $rc = system(@ARGV);
		my @t = times;
		open(my $f, ">", $out) or die; printf $f "%.3f\n", $t[2] + $t[3];
		exit($rc == -1 ? 127 : $rc & 127 ? 128 + ($rc & 127) : $rc >> 8);' "$@"
}

bench_median() {	# the median of the numbers on stdin, one per line (blank lines skipped)
	awk 'NF' | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
