# Shared by the bench/ scripts: a throwaway cluster with the extension
# preloaded, in a scratch directory removed on exit.  Source after
# scripts/lib.sh, then call bench_cluster PORT, with any extra
# postgresql.conf lines on standard input.  Defines WORK and psql_b.

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
shared_preload_libraries = 'queen'
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

bench_reset_state() {	# empty the queues and checkpoint, so runs start alike
	psql_b <<'SQL'
SET client_min_messages = warning;
TRUNCATE queen.queues CASCADE;
TRUNCATE queen.log_txns;
CHECKPOINT;
SQL
}
