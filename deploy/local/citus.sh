#!/usr/bin/env bash
# citus.sh installs the Citus extension for Postgres PG_MAJOR when it is missing and
# CITUS_TARBALL names a Citus source tarball (the tarball comes from the caller: no
# package registry reachable from our machines ships Citus, and its AGPL code is never
# part of this repository). Citus already installed, from packages or an earlier build,
# is accepted as is; without CITUS_TARBALL and without Citus it does nothing, because
# only the Citus tests (`make test/citus`) need it. Idempotent and silent when present.
set -euo pipefail

PG_MAJOR="${PG_MAJOR:-15}"
CITUS_TARBALL="${CITUS_TARBALL:-}"
BUILD_DIR="${CITUS_BUILD_DIR:-/tmp/agent-context-citus}"
PG_CONFIG="/usr/lib/postgresql/${PG_MAJOR}/bin/pg_config"

log() { printf 'setup: %s\n' "$*" >&2; }

sudo_cmd() {
	if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

citus_installed() {
	local sharedir pkglibdir
	sharedir="$("$PG_CONFIG" --sharedir 2>/dev/null || echo "/usr/share/postgresql/${PG_MAJOR}")"
	pkglibdir="$("$PG_CONFIG" --pkglibdir 2>/dev/null || echo "/usr/lib/postgresql/${PG_MAJOR}/lib")"
	[ -f "${sharedir}/extension/citus.control" ] && [ -f "${pkglibdir}/citus.so" ]
}

citus_installed && exit 0
[ -n "$CITUS_TARBALL" ] || exit 0
[ -f "$CITUS_TARBALL" ] || { log "CITUS_TARBALL=${CITUS_TARBALL}: no such file"; exit 1; }

# Citus's configure requires the compression, Kerberos, TLS and curl headers.
deps=(build-essential "postgresql-server-dev-${PG_MAJOR}" libzstd-dev liblz4-dev libkrb5-dev libssl-dev libcurl4-openssl-dev)
missing=()
for pkg in "${deps[@]}"; do
	dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
	log "installing Citus's build dependencies: ${missing[*]}"
	sudo_cmd apt-get update -qq
	sudo_cmd env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

log "building Citus from ${CITUS_TARBALL} (a few minutes)"
rm -rf "$BUILD_DIR"
mkdir -p "$BUILD_DIR/src"
tar -xzf "$CITUS_TARBALL" -C "$BUILD_DIR/src" --strip-components=1
# The build's output (pgxs warns about Citus's own targets) is shown only on failure.
build_log="$BUILD_DIR/build.log"
if ! (
	cd "$BUILD_DIR/src"
	./configure PG_CONFIG="$PG_CONFIG"
	make -j"$(nproc)"
	sudo_cmd make install
) >"$build_log" 2>&1; then
	tail -n 40 "$build_log" >&2
	log "building Citus failed (the whole log: ${build_log})"
	exit 1
fi
rm -rf "$BUILD_DIR"
citus_installed || { log "Citus build finished but the extension is not installed"; exit 1; }
log "Citus installed"
