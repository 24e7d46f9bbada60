#!/usr/bin/env bash
# make demo: from a fresh clone to the pool members a load balancer would get.
# Builds the provider, starts the local control plane (built from Go modules
# on the first run, which takes minutes), creates a demo Service with pods in
# every interesting state, points the real terraform CLI at the provider build
# with a dev_overrides CLI configuration, and applies examples/pools/haproxy.
# The cluster stays up afterwards; `make cluster-down` stops it.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
say() { printf '\n==> %s\n' "$*"; }

say "building the provider (bin/terraform-provider-k8s)"
make --no-print-directory build

say "starting the local Kubernetes control plane (the first run builds it: ~7 min on 2 cores)"
env -u K8S_TF_KUBECONFIG scripts/cluster-up.sh
export KUBECONFIG="$root/.cluster/kubeconfig"
ns=demo

say "creating namespace $ns: a dual-stack Service web and pods in every state"
if kubectl get namespace "$ns" >/dev/null 2>&1; then
	# Pods on a node without a kubelet never finish terminating on their own.
	kubectl -n "$ns" delete pods --all --grace-period=0 --force >/dev/null 2>&1 || true
	kubectl delete namespace "$ns" --timeout=60s >/dev/null
fi
kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Node
metadata:
  name: demo-node
  labels: {topology.kubernetes.io/zone: demo-zone-a}
---
apiVersion: v1
kind: Namespace
metadata: {name: $ns}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: $ns}
spec:
  selector: {app: web}
  ipFamilyPolicy: PreferDualStack
  ipFamilies: [IPv4, IPv6]
  ports:
    - {name: http, port: 80, targetPort: 8080}
YAML

# pod NAME READY IPv4 IPv6: a pod on demo-node with the status a kubelet would
# report (there is none here).
pod() {
	kubectl -n "$ns" apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $1, labels: {app: web}}
spec:
  nodeName: demo-node
  containers: [{name: app, image: example.invalid/web:1, ports: [{name: http, containerPort: 8080}]}]
YAML
	kubectl -n "$ns" patch pod "$1" --subresource=status --type=merge -p "{\"status\": {
		\"phase\": \"Running\", \"podIP\": \"$3\", \"podIPs\": [{\"ip\": \"$3\"}, {\"ip\": \"$4\"}],
		\"conditions\": [{\"type\": \"Ready\", \"status\": \"$2\"}]}}" >/dev/null
	printf '  %-16s ready=%-5s %s %s\n' "$1" "$2" "$3" "$4"
}
pod web-1 True 10.244.0.10 fd00:10:244::10
pod web-2 True 10.244.0.9 fd00:10:244::9
pod web-starting False 10.244.0.11 fd00:10:244::11
pod web-stopping True 10.244.0.12 fd00:10:244::12
# Deleted with a grace period and no kubelet to confirm it, this pod stays
# terminating: Kubernetes marks it not ready.
kubectl -n "$ns" delete pod web-stopping --grace-period=300 --wait=false >/dev/null
echo "  web-stopping     deleted with a 300 s grace period: terminating"

say "waiting for the EndpointSlice controller"
for _ in $(seq 100); do
	ready="$(kubectl -n "$ns" get endpointslices -l kubernetes.io/service-name=web \
		-o jsonpath='{range .items[*].endpoints[*]}{.conditions.ready}{"\n"}{end}' | grep -c true || true)"
	[[ "$ready" == 4 ]] && break
	sleep 0.2
done
kubectl -n "$ns" get endpointslices -l kubernetes.io/service-name=web \
	-o custom-columns='SLICE:.metadata.name,TYPE:.addressType,ADDRESSES:.endpoints[*].addresses[0],READY:.endpoints[*].conditions.ready,TERMINATING:.endpoints[*].conditions.terminating'

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
	-var namespace="$ns" -var service=web -var port_name=http >"$work/apply.log" 2>&1; then
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
