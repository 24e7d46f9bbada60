#!/usr/bin/env bash
# Stops the local control plane started by scripts/cluster-up.sh and deletes
# its state (<repo>/.cluster/). Safe to run when nothing is running.
#
# Only the PIDs recorded in .cluster/*.pid are signalled, and only while their
# command line still names .cluster/, so a recycled PID is never hit.
#
# Environment:
#   K8S_TF_KUBECONFIG  irrelevant here: an external cluster is never touched;
#                      only local state, if any, is cleaned up.
#
# --keep-state  stop the processes but keep .cluster/ (used by cluster-up.sh
#               when it retries a start).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
state="$root/.cluster"
keep=false
[[ "${1:-}" == --keep-state ]] && keep=true

# Same lock as cluster-up.sh (see there); already held when it calls us.
if [[ -z "${K8S_TF_CLUSTER_LOCKED:-}" ]]; then
	exec 8<"$root/scripts/cluster-up.sh"
	flock 8
fi

# Mirror of ours() in cluster-up.sh. Zombies count as gone: the daemons are
# orphans whose reaping is up to init (lazy on some VMs), and a zombie holds
# no port or file.
ours() {
	local pid="$1" stat
	stat="$(ps -o stat= -p "$pid" 2>/dev/null)" || return 1
	[[ "$stat" != Z* ]] || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$state/"
}

pids=()
# Controller-manager first, etcd last: clients go before their backend, so
# nothing logs a storm of connection errors while shutting down.
for c in kube-controller-manager kube-apiserver etcd; do
	f="$state/$c.pid"
	[[ -s "$f" ]] || continue
	pid="$(<"$f")"
	if ours "$pid"; then
		kill -TERM "$pid" 2>/dev/null || true
		pids+=("$pid")
	fi
done

# Graceful stop normally takes well under a second; past the deadline a
# wedged daemon is killed outright so down never hangs a test run.
deadline=$((SECONDS + 15))
for pid in "${pids[@]}"; do
	while ours "$pid"; do
		if ((SECONDS >= deadline)); then
			kill -KILL "$pid" 2>/dev/null || true
			sleep 0.2
			break
		fi
		sleep 0.1
	done
done

if ((${#pids[@]})); then
	echo "stopped ${#pids[@]} process(es)"
else
	echo "no cluster process running"
fi

if ! $keep && [[ -e "$state" ]]; then
	rm -rf "$state"
	echo "removed $state"
fi
