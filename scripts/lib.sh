# Shared by scripts/setup and scripts/test: where PostgreSQL lives and how to
# run things as the unprivileged user that owns clusters (PostgreSQL refuses
# to run as root).
PG_MAJOR=15
PG_BINDIR=/usr/lib/postgresql/$PG_MAJOR/bin
PGXS_DIR=/usr/lib/postgresql/$PG_MAJOR/lib/pgxs
REPO_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

if [ "$(id -u)" -eq 0 ]; then
	SUDO=""
else
	SUDO="sudo"
fi

# Run a command as the postgres user (or as ourselves when we are not root
# and QUEEN_CLUSTER_USER says so).
CLUSTER_USER=${QUEEN_CLUSTER_USER:-postgres}
as_cluster_user() {
	if [ "$(id -un)" = "$CLUSTER_USER" ]; then
		"$@"
	elif [ "$(id -u)" -eq 0 ]; then
		runuser -u "$CLUSTER_USER" -- "$@"
	else
		sudo -u "$CLUSTER_USER" -- "$@"
	fi
}

say() { printf '==> %s\n' "$*"; }
