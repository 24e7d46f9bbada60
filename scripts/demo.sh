#!/usr/bin/env bash
# make demo: from a fresh clone to requests served by the pods a load
# balancer gets. Builds the provider, starts the local control plane (built
# from Go modules on the first run, which takes minutes), creates a demo
# Service with pods in every interesting state, points the real terraform CLI
# at the provider build with a dev_overrides CLI configuration, applies
# examples/pools/haproxy, starts a real HAProxy on the backend it rendered and
# sends requests through it. Then the sync companion (terraform-provider-k8s
# sync) runs on the working directory, the demo adds a pod, and HAProxy
# answers from it without anyone running Terraform. Real traffic needs root and iproute2 (each pod
# gets a network namespace of its own) and HAProxy (installed from Debian
# packages when missing); elsewhere the demo prints the rendered backend and
# says what is missing.
# The cluster stays up afterwards; `make cluster-down` stops it. The pods'
# networks and HAProxy stop with the demo.
# bin/harness (tools/harness) does the cluster work; this is the story.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
say() { printf '\n==> %s\n' "$*"; }

work="$root/.cluster/demo"
# Why the demo cannot send real traffic here; empty when it can.
no_traffic=""
say "real traffic needs root, iproute2 and HAProxy (socat saves its servers' state across reloads)"
if [ "$(id -u)" != 0 ]; then
	no_traffic="not root (uid $(id -u)): pods get a network namespace each only as root"
elif ! command -v ip >/dev/null; then
	no_traffic="no ip command: install iproute2"
elif ! command -v haproxy >/dev/null; then
	if command -v apt-get >/dev/null; then
		echo "  HAProxy is missing: apt-get install haproxy socat"
		mkdir -p "$work"
		if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq haproxy socat; } >"$root/.cluster/apt.log" 2>&1; then
			no_traffic="apt-get install haproxy failed (log: .cluster/apt.log)"
		elif ! command -v haproxy >/dev/null; then
			no_traffic="haproxy is installed but not on PATH (Debian puts it in /usr/sbin)"
		fi
	else
		no_traffic="no haproxy and no apt-get to install it"
	fi
fi
if [ -z "$no_traffic" ]; then
	echo "  root, $(ip -V), $(haproxy -v | head -n 1)"
else
	echo "  no real traffic: $no_traffic; the demo stops at the rendered backend"
fi

# Background helpers (the pods' networks, HAProxy) stop with the demo.
helpers=()
stop_helpers() {
	for pid in "${helpers[@]}"; do kill "$pid" 2>/dev/null || true; done
	for pid in "${helpers[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap stop_helpers EXIT
# wait_for FILE PID WHAT: until FILE exists, while PID lives, for 3 minutes at most.
wait_for() {
	for _ in $(seq 1800); do
		[ -e "$1" ] && return 0
		kill -0 "$2" 2>/dev/null || { echo "$3 exited before it was ready" >&2; exit 1; }
		sleep 0.1
	done
	echo "$3 not ready after 3 minutes" >&2
	exit 1
}

say "building the provider (bin/terraform-provider-k8s)"
make --no-print-directory build harness

say "starting the local Kubernetes control plane (the first run builds it: ~7 min on 2 cores)"
bin/harness up
export KUBECONFIG="$root/.cluster/kubeconfig"

rm -rf "$work"
mkdir -p "$work"
if [ -z "$no_traffic" ]; then
	say "a dual-stack Service web in namespace demo, with pods in every state (a fake kubelet writes their status; each pod has a network namespace with its IPs and a server that answers with its name)"
	bin/harness demo -kubeconfig "$KUBECONFIG" -namespace demo -network -hold "$work/pods.serving" -add-pod "$work/add-pod" &
else
	say "a dual-stack Service web in namespace demo, with pods in every state (a fake kubelet writes their status)"
	bin/harness demo -kubeconfig "$KUBECONFIG" -namespace demo -hold "$work/pods.serving" -add-pod "$work/add-pod" &
fi
demo_pid="$!"
helpers+=("$demo_pid")
wait_for "$work/pods.serving" "$demo_pid" "bin/harness demo"

say "installing the provider for terraform with a dev_overrides CLI configuration"
cp examples/pools/haproxy/* "$work/"
# The example as it is shipped; its variables in a file, so that the
# companion's runs use them too. HAProxy runs in haproxy/ once it is started
# (bin/harness haproxy, below: master-worker, a runtime API socket and a
# server-state-file as examples/pools/haproxy/haproxy.cfg asks); until then
# the example only writes backend.cfg, as nothing runs to check or reload.
cat >"$work/terraform.tfvars" <<'HCL'
namespace          = "demo"
service            = "web"
port_name          = "http"
pool_file          = "backend.cfg"
check_command      = "test ! -s haproxy/haproxy.pid || haproxy -c -q -f haproxy/haproxy.cfg -f backend.cfg"
save_state_command = "test ! -s haproxy/haproxy.pid || echo 'show servers state' | socat stdio unix-connect:haproxy/admin.sock > haproxy/server-state"
reload_command     = "test ! -s haproxy/haproxy.pid || kill -USR2 \"$(cat haproxy/haproxy.pid)\""
HCL
cat >"$work/terraformrc" <<HCL
provider_installation {
  dev_overrides {
    "vigie/k8s" = "$root/bin"
  }
  direct {}
}
HCL
export TF_CLI_CONFIG_FILE="$work/terraformrc" TF_IN_AUTOMATION=1 CHECKPOINT_DISABLE=1
echo "  $TF_CLI_CONFIG_FILE"

say "terraform apply examples/pools/haproxy (the provider finds the cluster through \$KUBECONFIG)"
if ! terraform -chdir="$work" apply -auto-approve -input=false -no-color >"$work/apply.log" 2>&1; then
	cat "$work/apply.log"
	exit 1
fi
grep '^Apply complete' "$work/apply.log"

say "the pool a load balancer would get (ready pods only, each family, the pods' port, sorted)"
terraform -chdir="$work" output -json endpoints |
	jq -r '.[] | "  \(.address_type)  \(if .address_type == "IPv6" then "[\(.address)]" else .address end):\(.port)  pod=\(.pod)  node=\(.node_name)  zone=\(.zone)"'

say "rendered HAProxy backend (examples/pools/haproxy/backend.cfg.tftpl), written to backend.cfg by the apply (apply-pool.sh)"
cat "$work/backend.cfg"

# sync_demo: the companion on the working directory, a pod added, and what
# it changed (with traffic: curl through HAProxy; without: backend.cfg),
# with nobody running Terraform; then SIGTERM.
sync_demo() {
	say "the sync companion: terraform-provider-k8s sync -chdir=$work (settle window 500ms quiet, 2s at most; log: sync.log)"
	bin/terraform-provider-k8s sync -chdir="$work" -terraform=terraform -listen= \
		-settle-quiet=500ms -settle-max=2s 2>"$work/sync.log" &
	sync_pid="$!"
	helpers+=("$sync_pid")
	for _ in $(seq 600); do
		grep -q 'msg=watching' "$work/sync.log" && break
		kill -0 "$sync_pid" 2>/dev/null || { cat "$work/sync.log"; echo "the companion exited" >&2; exit 1; }
		sleep 0.1
	done
	grep 'msg=watching' "$work/sync.log" | sed 's/^/  /'

	say "a new pod, web-3, becomes ready (nobody runs terraform from here on)"
	touch "$work/add-pod"
	wait_for "$work/add-pod.done" "$demo_pid" "bin/harness demo"

	say "the companion sees the pool change, plans, and applies the saved plan (the example's apply-pool.sh writes backend.cfg, checks it with haproxy -c and reloads HAProxy)"
	for _ in $(seq 1200); do
		grep -q 'web-3' "$work/backend.cfg" && grep -q 'result=applied' "$work/sync.log" && break
		sleep 0.1
	done
	grep -E 'msg="(pool differs from state|run started|applying the saved plan|run ended)"' "$work/sync.log" | sed 's/^/  /'
	if ! grep -q 'web-3' "$work/backend.cfg"; then
		cat "$work/sync.log"
		echo "backend.cfg has no web-3 after 2 minutes" >&2
		exit 1
	fi
	if [ -n "$no_traffic" ]; then
		say "backend.cfg, re-rendered by the companion's run"
		cat "$work/backend.cfg"
	else
		say "requests through HAProxy: web-3 answers too"
		# The reload is done when the apply ends; a few requests at most.
		for _ in $(seq 100); do
			case "$(curl -sS --max-time 5 "http://127.0.0.1:$port/")" in "web-3 "*) break ;; esac
			sleep 0.1
		done
		for front in "127.0.0.1" "[::1]"; do
			for _ in 1 2 3; do
				printf '  curl http://%s:%s/  ->  %s\n' "$front" "$port" "$(curl -sS --max-time 5 "http://$front:$port/")"
			done
		done
	fi

	say "stopping the companion (SIGTERM: no new run, a running one finishes)"
	kill -TERM "$sync_pid"
	code=0
	wait "$sync_pid" || code=$?
	echo "  the companion exited $code"
}

if [ -n "$no_traffic" ]; then
	sync_demo
	echo
	echo "No real traffic ($no_traffic): above is the backend HAProxy would load."
	echo "The cluster is still running (kubeconfig: $KUBECONFIG). Stop it with: make cluster-down"
	exit 0
fi

say "HAProxy on that backend (master-worker; frontend on 127.0.0.1 and [::1])"
bin/harness haproxy -dir "$work/haproxy" -backend "$work/backend.cfg" -ready "$work/haproxy.port" &
helpers+=("$!")
wait_for "$work/haproxy.port" "$!" "bin/harness haproxy"
port="$(cat "$work/haproxy.port")"

say "requests through HAProxy: each ready pod answers in turn, reached over IPv4 and IPv6 (web-starting and web-stopping never)"
for front in "127.0.0.1" "[::1]"; do
	for _ in 1 2 3 4; do
		printf '  curl http://%s:%s/  ->  %s\n' "$front" "$port" "$(curl -sS --max-time 5 "http://$front:$port/")"
	done
done

sync_demo

echo
echo "The cluster is still running (kubeconfig: $KUBECONFIG). Stop it with: make cluster-down"
echo "The pods' networks and HAProxy stop now, with the demo."
