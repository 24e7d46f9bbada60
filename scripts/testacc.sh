#!/usr/bin/env bash
# Runs the acceptance tests (TestAcc*) with the real terraform and OpenTofu
# CLIs (the list is in scripts/acc-clis.sh) against a real cluster: the local
# control plane, which this script starts when it is not running and then
# stops again, or the cluster of K8S_TF_KUBECONFIG, in which case nothing is
# built or started.
#
# Usage: scripts/testacc.sh [both|terraform|tofu|matrix]   (default: both)
#
# Environment:
#   K8S_TF_KUBECONFIG  an existing cluster's kubeconfig (its current context
#                      must be allowed to create namespaces, nodes, pods,
#                      EndpointSlices, ServiceAccounts and RBAC objects)
#   TESTARGS           more arguments for go test (e.g. -run TestAccRBAC -v)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
which="${1:-both}"
case "$which" in both | terraform | tofu | matrix) ;; *)
	echo "usage: $0 [both|terraform|tofu|matrix]" >&2
	exit 2
	;;
esac

local_cluster=false
if [[ -z "${K8S_TF_KUBECONFIG:-}" ]]; then
	local_cluster=true
	up="$(scripts/cluster-up.sh)"
	echo "$up"
	if ! grep -q "already running" <<<"$up"; then
		# Started here, so stopped here: a test run leaves no processes behind.
		trap 'scripts/cluster-down.sh' EXIT
	fi
	export K8S_TF_KUBECONFIG="$root/.cluster/kubeconfig"
else
	scripts/cluster-up.sh
fi

# The CLIs get a configuration of the project's own, never the machine's
# (a missing one makes tofu print a warning where its version is parsed).
export TF_ACC=1 CHECKPOINT_DISABLE=1
export TF_CLI_CONFIG_FILE="$root/internal/provider/testdata/terraformrc"

list="$(scripts/acc-clis.sh "$which")"
mapfile -t clis <<<"$list"

for cli in "${clis[@]}"; do
	echo "== acceptance tests on $("$cli" version | head -n 1)"
	# shellcheck disable=SC2086 # TESTARGS is a list of words
	TF_ACC_TERRAFORM_PATH="$cli" go test -count=1 -timeout 30m -run '^TestAcc' ${TESTARGS:-} ./internal/provider/
done

# Last, with the local cluster only: stop its kube-apiserver process and check
# that a read fails, clearly and within its bound, on every CLI. The cluster is
# then restarted if it was running before this script.
if $local_cluster; then
	echo "== stopping kube-apiserver: reads must fail within their bound"
	pid="$(<.cluster/kube-apiserver.pid)"
	kill "$pid"
	# Gone, or a zombie waiting for init to reap it: either way its port is closed.
	for _ in $(seq 100); do
		stat="$(ps -o stat= -p "$pid" 2>/dev/null)" || break
		[[ "$stat" == Z* ]] && break
		sleep 0.1
	done
	for cli in "${clis[@]}"; do
		TF_ACC_TERRAFORM_PATH="$cli" K8S_TF_API_SERVER_STOPPED=1 \
			go test -count=1 -timeout 5m -run '^TestAccStoppedAPIServerFailsWithinItsBound$' -v ./internal/provider/
	done
	if [[ "$(trap -p EXIT)" == "" ]]; then
		env -u K8S_TF_KUBECONFIG scripts/cluster-up.sh
	fi
fi
