#!/usr/bin/env bash
# make demo: from a fresh clone to the pool members a load balancer would get.
# Builds the provider, starts the local control plane (built from Go modules
# on the first run, which takes minutes), creates a demo Service with pods in
# every interesting state, points the real terraform CLI at the provider build
# with a dev_overrides CLI configuration, and applies examples/pools/haproxy.
# The cluster stays up afterwards; `make cluster-down` stops it.
# bin/harness (tools/harness) does the cluster work; this is the story.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
say() { printf '\n==> %s\n' "$*"; }

say "building the provider (bin/terraform-provider-k8s)"
make --no-print-directory build harness

say "starting the local Kubernetes control plane (the first run builds it: ~7 min on 2 cores)"
bin/harness up
export KUBECONFIG="$root/.cluster/kubeconfig"

say "a dual-stack Service web in namespace demo, with pods in every state (a fake kubelet writes their status)"
bin/harness demo -kubeconfig "$KUBECONFIG" -namespace demo

say "installing the provider for terraform with a dev_overrides CLI configuration"
work="$root/.cluster/demo"
rm -rf "$work"
mkdir -p "$work"
cp examples/pools/haproxy/* "$work/"
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
if ! terraform -chdir="$work" apply -auto-approve -input=false -no-color \
	-var namespace=demo -var service=web -var port_name=http >"$work/apply.log" 2>&1; then
	cat "$work/apply.log"
	exit 1
fi
grep '^Apply complete' "$work/apply.log"

say "the pool a load balancer would get (ready pods only, each family, the pods' port, sorted)"
terraform -chdir="$work" output -json endpoints |
	jq -r '.[] | "  \(.address_type)  \(if .address_type == "IPv6" then "[\(.address)]" else .address end):\(.port)  pod=\(.pod)  node=\(.node_name)  zone=\(.zone)"'

say "rendered HAProxy backend (examples/pools/haproxy/backend.cfg.tftpl)"
terraform -chdir="$work" output -raw haproxy_backend

echo
echo "The cluster is still running (kubeconfig: $KUBECONFIG). Stop it with: make cluster-down"
