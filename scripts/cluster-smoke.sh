#!/usr/bin/env bash
# End-to-end check of the local control plane from scripts/cluster-up.sh,
# through kubectl only: version stamping, the identities in the kubeconfig,
# and the server-side behaviour the provider's tests rely on (EndpointSlices
# for selector, dual-stack and selector-less Services, terminating endpoints,
# garbage collection, namespace deletion). There is no kubelet, so the script
# plays its part: it creates a Node and writes pod status itself.
#
# Meant for the local cluster only (it creates a fake Node); uses
# .cluster/kubeconfig unless KUBECONFIG is set. Leaves nothing behind.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export KUBECONFIG="${KUBECONFIG:-$root/.cluster/kubeconfig}"
ns="smoke-$RANDOM"
node="smoke-node-$RANDOM"
k() { kubectl --request-timeout=20s "$@"; }
ok() { echo "ok: $*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

cleanup() {
	# No kubelet ever confirms a pod's termination: force the pod away, or
	# namespace deletion would wait on it for ever.
	k -n "$ns" delete pod --all --grace-period=0 --force >/dev/null 2>&1 || true
	k delete node "$node" --ignore-not-found >/dev/null 2>&1 || true
	k delete namespace "$ns" --ignore-not-found --wait=false >/dev/null 2>&1 || true
}
trap cleanup EXIT

# Polls "$@" until its output equals $want (controllers are asynchronous).
expect() { # description want cmd...
	local desc="$1" want="$2" got="" deadline=$((SECONDS + 30))
	shift 2
	while ((SECONDS < deadline)); do
		got="$("$@" 2>&1)" || true
		[[ "$got" == "$want" ]] && { ok "$desc"; return; }
		sleep 0.5
	done
	fail "$desc: want [$want], got [$got]"
}

slices() { # service: "<addressType> <address>=<ready>/<serving>/<terminating>" per line, sorted
	k -n "$ns" get endpointslices -l "kubernetes.io/service-name=$1" -o \
		jsonpath='{range .items[*]}{.addressType}{range .endpoints[*]}{" "}{.addresses[0]}{"="}{.conditions.ready}{"/"}{.conditions.serving}{"/"}{.conditions.terminating}{end}{"\n"}{end}' |
		sed '/^$/d' | sort
}

version="$(k get --raw /version | sed -n 's/.*"gitVersion": *"\([^"]*\)".*/\1/p')"
[[ "$version" == v1.34.3 ]] || fail "server version is [$version], want v1.34.3"
ok "server reports $version"

expect "reader is a plain authenticated user" "Forbidden" \
	bash -c "kubectl --context reader get pods -n default 2>&1 | grep -o Forbidden | head -n1"
expect "cert-user authenticates with its client certificate" "cert-user" \
	k --context cert-user auth whoami -o 'jsonpath={.status.userInfo.username}'
expect "admin is in system:masters" "yes" k auth can-i '*' '*' --all-namespaces

k create namespace "$ns" >/dev/null
expect "default ServiceAccount created in new namespace" "default" \
	k -n "$ns" get serviceaccount default -o 'jsonpath={.metadata.name}'

k apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $node
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: $ns}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: web-ds, namespace: $ns}
spec:
  ipFamilyPolicy: RequireDualStack
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Pod
metadata: {name: web-0, namespace: $ns, labels: {app: web}}
spec:
  nodeName: $node
  containers: [{name: web, image: registry.invalid/none, ports: [{containerPort: 8080}]}]
EOF
expect "dual-stack Service gets an IPv4 and an IPv6 cluster IP" "IPv4 IPv6" \
	k -n "$ns" get service web-ds -o 'jsonpath={.spec.ipFamilies[*]}'

# What a kubelet would report for a started, ready pod (addresses from the
# documentation ranges: these are API data only, nothing connects to them).
k -n "$ns" patch pod web-0 --subresource=status --type=merge -p '{
  "status": {
    "phase": "Running",
    "podIP": "10.244.0.5",
    "podIPs": [{"ip": "10.244.0.5"}, {"ip": "fd00:10:244::5"}],
    "conditions": [
      {"type": "Ready", "status": "True"},
      {"type": "ContainersReady", "status": "True"}
    ]
  }
}' >/dev/null
expect "EndpointSlice of web has the ready pod" "IPv4 10.244.0.5=true/true/false" slices web
expect "dual-stack Service gets an IPv4 and an IPv6 slice" \
	"$(printf '%s\n' "IPv4 10.244.0.5=true/true/false" "IPv6 fd00:10:244::5=true/true/false")" slices web-ds

k apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Service
metadata: {name: ext, namespace: $ns}
spec:
  ports: [{name: http, port: 80}]
---
apiVersion: v1
kind: Endpoints
metadata: {name: ext, namespace: $ns}
subsets:
- addresses: [{ip: 192.0.2.10}]
  ports: [{name: http, port: 80}]
EOF
# The mirroring controller copies readiness only (no serving/terminating).
expect "hand-made Endpoints are mirrored to an EndpointSlice" \
	"endpointslicemirroring-controller.k8s.io IPv4 192.0.2.10=true//" \
	bash -c "kubectl -n $ns get endpointslices -l kubernetes.io/service-name=ext -o \
		jsonpath='{range .items[*]}{.metadata.labels.endpointslice\.kubernetes\.io/managed-by} {.addressType} {.endpoints[0].addresses[0]}={.endpoints[0].conditions.ready}/{.endpoints[0].conditions.serving}/{.endpoints[0].conditions.terminating}{end}'"

# Garbage collector: a dependent goes when its owner does.
k -n "$ns" create configmap owner >/dev/null
uid="$(k -n "$ns" get configmap owner -o 'jsonpath={.metadata.uid}')"
k apply -f - >/dev/null <<EOF
apiVersion: v1
kind: ConfigMap
metadata:
  name: dependent
  namespace: $ns
  ownerReferences: [{apiVersion: v1, kind: ConfigMap, name: owner, uid: $uid}]
EOF
k -n "$ns" delete configmap owner >/dev/null
expect "garbage collector deletes the dependent" "" \
	k -n "$ns" get configmap dependent --ignore-not-found -o name

# Graceful deletion: without a kubelet the pod stays terminating, which is
# exactly the state whose endpoint conditions we want to see.
k -n "$ns" delete pod web-0 --grace-period=300 --wait=false >/dev/null
expect "deleted pod stays terminating" "yes" \
	bash -c "kubectl -n $ns get pod web-0 -o jsonpath='{.metadata.deletionTimestamp}' | grep -q . && echo yes"
expect "terminating pod's endpoint is ready=false, terminating=true" \
	"IPv4 10.244.0.5=false/true/true" slices web

cleanup
trap - EXIT
expect "namespace controller deletes the namespace" "" \
	k get namespace "$ns" --ignore-not-found -o name
echo "cluster smoke test passed"
