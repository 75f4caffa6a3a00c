# Shared by scripts/setup and scripts/test: where PostgreSQL lives and how to
# run things as the unprivileged user that owns clusters (PostgreSQL refuses
# to run as root).
PG_MAJOR=15
# QUEEN_PG_CONFIG names another installation of PostgreSQL 15 (a relocated
# copy, say), so that two working copies can build, install and test at once
# without installing into each other's server.
if [ -n "${QUEEN_PG_CONFIG:-}" ]; then
	PG_BINDIR=$("$QUEEN_PG_CONFIG" --bindir)
	PGXS_DIR=$(dirname "$(dirname "$(dirname "$("$QUEEN_PG_CONFIG" --pgxs)")")")
	export PG_CONFIG=$QUEEN_PG_CONFIG
else
	PG_BINDIR=/usr/lib/postgresql/$PG_MAJOR/bin
	PGXS_DIR=/usr/lib/postgresql/$PG_MAJOR/lib/pgxs
fi
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

# Install the built extension.  Files are staged first, and only those that
# differ from what is installed are replaced, each by a rename: a process
# that loads queen.so at that moment (a session of a running cluster, or of
# another copy of the test suite installing the same files) sees the old
# file or the new one, never a missing or half-written one.  The arguments
# are the make targets (default: install).
install_extension() {
	local stage rel rc=0
	stage=$(mktemp -d /tmp/queen-install.XXXXXX)
	if make -C "$REPO_DIR" -s "${@:-install}" DESTDIR="$stage" >/dev/null; then
		while IFS= read -r rel; do
			rel=${rel#.}
			cmp -s "$stage$rel" "$rel" && continue
			if ! $SUDO install -D -m "$(stat -c %a "$stage$rel")" "$stage$rel" "$rel.new.$$" ||
				! $SUDO mv -f "$rel.new.$$" "$rel"; then
				rc=1
				break
			fi
		done < <(cd "$stage" && find . -type f)
	else
		rc=1
	fi
	rm -rf "$stage"
	return $rc
}
