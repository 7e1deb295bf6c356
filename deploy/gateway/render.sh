#!/bin/sh
# render.sh writes the gateway's nginx.conf from nginx.conf.template beside it, into
# $GATEWAY_RUN_DIR (created when missing), and prints the file's path. Then start nginx
# with: nginx -e stderr -c "$GATEWAY_RUN_DIR/nginx.conf" (it stays in the foreground).
#
# Variables:
#   GATEWAY_UPSTREAM    the service's host:port (required), e.g. agent-context:5120
#   GATEWAY_LISTEN      nginx's listen address, default 8080 (port alone or host:port)
#   GATEWAY_RUN_DIR     pid file, temp files and the rendered config, default
#                       /tmp/agent-context-gateway
#   GATEWAY_WORKERS     worker processes, default auto
#   GATEWAY_USER        the workers' user when nginx starts as root (ignored otherwise);
#                       unset: no user directive, so the workers run as nginx's default
#   GATEWAY_GROUP       the workers' group, default the group named like GATEWAY_USER
#   GATEWAY_ACCESS_LOG  access log path, default /dev/stdout (or "off")
#   GATEWAY_ERROR_LOG   error log path, default stderr
set -eu

here="$(cd "$(dirname "$0")" && pwd)"
template="$here/nginx.conf.template"

: "${GATEWAY_UPSTREAM:?set GATEWAY_UPSTREAM to the service host:port}"
GATEWAY_LISTEN="${GATEWAY_LISTEN:-8080}"
GATEWAY_RUN_DIR="${GATEWAY_RUN_DIR:-/tmp/agent-context-gateway}"
GATEWAY_WORKERS="${GATEWAY_WORKERS:-auto}"
GATEWAY_USER="${GATEWAY_USER:-}"
GATEWAY_GROUP="${GATEWAY_GROUP:-}"
GATEWAY_ACCESS_LOG="${GATEWAY_ACCESS_LOG:-/dev/stdout}"
GATEWAY_ERROR_LOG="${GATEWAY_ERROR_LOG:-stderr}"

# Each value lands inside an nginx directive: refuse anything that could end the
# directive or start another (;, {, }, quotes, whitespace) or confuse sed (|, &, \).
for name in GATEWAY_UPSTREAM GATEWAY_LISTEN GATEWAY_RUN_DIR GATEWAY_WORKERS GATEWAY_USER \
	GATEWAY_GROUP GATEWAY_ACCESS_LOG GATEWAY_ERROR_LOG; do
	eval "value=\${$name}"
	case "$value" in
	*[!A-Za-z0-9._:/@+=\[\]-]*)
		printf 'render.sh: %s has a character a gateway value may not hold: %s\n' "$name" "$value" >&2
		exit 2
		;;
	esac
done
case "$GATEWAY_RUN_DIR" in
/*) ;;
*)
	printf 'render.sh: GATEWAY_RUN_DIR must be an absolute path, got %s\n' "$GATEWAY_RUN_DIR" >&2
	exit 2
	;;
esac

if [ -n "$GATEWAY_USER" ]; then
	user_line="user $GATEWAY_USER${GATEWAY_GROUP:+ $GATEWAY_GROUP};"
else
	user_line="# no user directive: the workers run as the user that starts nginx"
fi

mkdir -p "$GATEWAY_RUN_DIR"
out="$GATEWAY_RUN_DIR/nginx.conf"
sed \
	-e "s|@GATEWAY_USER_LINE@|$user_line|g" \
	-e "s|@GATEWAY_UPSTREAM@|$GATEWAY_UPSTREAM|g" \
	-e "s|@GATEWAY_LISTEN@|$GATEWAY_LISTEN|g" \
	-e "s|@GATEWAY_RUN_DIR@|$GATEWAY_RUN_DIR|g" \
	-e "s|@GATEWAY_WORKERS@|$GATEWAY_WORKERS|g" \
	-e "s|@GATEWAY_ACCESS_LOG@|$GATEWAY_ACCESS_LOG|g" \
	-e "s|@GATEWAY_ERROR_LOG@|$GATEWAY_ERROR_LOG|g" \
	"$template" >"$out.tmp"
if grep -n '@GATEWAY_[A-Z_]*@' "$out.tmp" >&2; then
	echo "render.sh: the template names a variable this script does not fill" >&2
	rm -f "$out.tmp"
	exit 2
fi
mv "$out.tmp" "$out"
echo "$out"
