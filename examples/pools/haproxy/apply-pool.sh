#!/bin/sh
# Delivers a rendered pool to a load balancer: run by the local-exec
# provisioner of main.tf, in the working directory of terraform, with
#   POOL_TEXT           the rendered configuration;
#   POOL_FILE           where the load balancer reads it;
#   CHECK_COMMAND       checks the whole configuration, POOL_FILE included
#                       (haproxy -c, nginx -t); run by sh;
#   SAVE_STATE_COMMAND  run before the reload, "" for none (HAProxy: the
#                       servers' health states into its server-state-file);
#   RELOAD_COMMAND      reloads the load balancer gracefully; run by sh.
#
# 1. Nothing to do when POOL_FILE already holds POOL_TEXT.
# 2. POOL_TEXT is written to a temporary file beside POOL_FILE and renamed
#    over it: the load balancer never reads half a file. The temporary
#    name starts with a dot and ends with no .cfg or .conf, so a directory
#    the load balancer loads (haproxy -f DIR, nginx include DIR/*.conf)
#    never takes it.
# 3. CHECK_COMMAND. When the load balancer refuses the configuration, the
#    previous POOL_FILE is put back (or the new one removed), nothing is
#    reloaded, and the script fails, which fails the apply: the load
#    balancer keeps serving the pool it has, and the next apply tries again.
# 4. SAVE_STATE_COMMAND, then RELOAD_COMMAND.
set -eu

: "${POOL_TEXT?}" "${POOL_FILE:?}" "${CHECK_COMMAND:?}" "${RELOAD_COMMAND:?}"
SAVE_STATE_COMMAND="${SAVE_STATE_COMMAND:-}"

if [ -f "$POOL_FILE" ] && printf '%s' "$POOL_TEXT" | cmp -s - "$POOL_FILE"; then
	echo "apply-pool: $POOL_FILE already holds this pool: no reload"
	exit 0
fi

case "$POOL_FILE" in
*/*) dir="${POOL_FILE%/*}" ;;
*) dir="." ;;
esac
base="${POOL_FILE##*/}"
tmp="$(mktemp "$dir/.$base.XXXXXX")"
previous=""
cleanup() {
	rm -f "$tmp"
	if [ -n "$previous" ]; then rm -f "$previous"; fi
}
trap cleanup EXIT
printf '%s' "$POOL_TEXT" >"$tmp"
chmod 0644 "$tmp"
if [ -f "$POOL_FILE" ]; then
	previous="$(mktemp "$dir/.$base.previous.XXXXXX")"
	cp -p "$POOL_FILE" "$previous"
fi
mv -f "$tmp" "$POOL_FILE"

if ! sh -c "$CHECK_COMMAND"; then
	if [ -n "$previous" ]; then
		mv -f "$previous" "$POOL_FILE"
		previous=""
	else
		rm -f "$POOL_FILE"
	fi
	echo "apply-pool: the load balancer refuses the new $POOL_FILE ($CHECK_COMMAND): the previous one is back, nothing reloaded" >&2
	exit 1
fi

if [ -n "$SAVE_STATE_COMMAND" ] && ! sh -c "$SAVE_STATE_COMMAND"; then
	# The reload goes on: servers then start as the load balancer starts
	# them, which is the state of a first start.
	echo "apply-pool: could not save the servers' state ($SAVE_STATE_COMMAND); reloading without it" >&2
fi

sh -c "$RELOAD_COMMAND"
echo "apply-pool: $POOL_FILE written, checked and reloaded"
