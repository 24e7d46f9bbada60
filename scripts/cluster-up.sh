#!/usr/bin/env bash
# Starts a throwaway Kubernetes control plane (etcd, kube-apiserver,
# kube-controller-manager; no nodes, no kubelet, no containers) on 127.0.0.1
# for acceptance tests and demos. Binaries come from scripts/cluster-build.sh.
#
# Everything lives in <repo>/.cluster/ (git-ignored): certs and keys, etcd
# data, logs, pid files and
#   .cluster/kubeconfig   contexts: admin (current; group system:masters),
#                         reader, no-list, no-get (token users with no RBAC
#                         rights; tests grant them what they need), and
#                         cert-user (client certificate, no RBAC rights)
#   .cluster/ca.crt       CA of the serving cert and of client certs
#   .cluster/server       API server URL
#   .cluster/admin.token  bearer token of admin (also <user>.token for the rest)
#   .cluster/cert-user.crt, .cluster/cert-user.key
#   .cluster/env          sourceable: KUBECONFIG, K8S_TF_SERVER, ...
#
# Running it while the cluster is up and healthy does nothing; a cluster found
# half-dead is torn down and started afresh (state is disposable).
# scripts/cluster-down.sh stops it and removes .cluster/.
#
# Environment:
#   K8S_TF_KUBECONFIG  use an existing cluster instead: nothing is built or
#                      started, the script only checks that the cluster
#                      behind that kubeconfig answers (needs kubectl).
#   K8S_TF_CACHE       binary cache root, see scripts/cluster-build.sh
#   K8S_TF_AUDIT       1: a cluster started by this call writes a Metadata-
#                      level audit log to .cluster/audit.log, one line per
#                      request (scripts/bench.sh counts the provider's
#                      requests there). A cluster already running is kept as
#                      it is, with or without one.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
state="$root/.cluster"

if [[ -n "${K8S_TF_KUBECONFIG:-}" ]]; then
	# The external kubeconfig may use any auth (exec plugins, OIDC, ...), so
	# only kubectl can talk to it in general. /version is readable by any
	# authenticated or anonymous user, so it works whatever identity is used.
	if ! out="$(kubectl --kubeconfig "$K8S_TF_KUBECONFIG" --request-timeout=10s get --raw /version 2>&1)"; then
		echo "K8S_TF_KUBECONFIG=$K8S_TF_KUBECONFIG: cluster does not answer:" >&2
		echo "$out" >&2
		exit 1
	fi
	server="$(kubectl --kubeconfig "$K8S_TF_KUBECONFIG" config view --minify -o 'jsonpath={.clusters[0].cluster.server}')"
	version="$(sed -n 's/.*"gitVersion": *"\([^"]*\)".*/\1/p' <<<"$out")"
	echo "using existing cluster (K8S_TF_KUBECONFIG), nothing started"
	echo "kubeconfig: $K8S_TF_KUBECONFIG"
	echo "API server: $server (${version:-unknown version})"
	exit 0
fi

# Parallel callers (go test runs packages in parallel, each may call this)
# must not start two clusters into one state dir: up and down are serialised
# by a lock on this file, which, unlike .cluster/, is never deleted. The
# internal calls to cluster-down.sh inherit the lock through the env var.
if [[ -z "${K8S_TF_CLUSTER_LOCKED:-}" ]]; then
	exec 8<"${BASH_SOURCE[0]}"
	flock 8
	export K8S_TF_CLUSTER_LOCKED=1
fi

for tool in openssl curl; do
	command -v "$tool" >/dev/null || { echo "cluster-up: $tool is required" >&2; exit 1; }
done

components=(etcd kube-apiserver kube-controller-manager)

# A PID counts as ours only if it is alive (not a zombie: a daemon that died
# stays one until its parent, often an init that reaps lazily, collects it)
# and its command line names our state dir, so that a recycled PID is never
# mistaken for the cluster.
ours() {
	local pid="$1" stat
	stat="$(ps -o stat= -p "$pid" 2>/dev/null)" || return 1
	[[ "$stat" != Z* ]] || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$state/"
}

running() {
	local c
	for c in "${components[@]}"; do
		[[ -s "$state/$c.pid" ]] && ours "$(<"$state/$c.pid")" || return 1
	done
}

api() { # path [curl args...]: GET as admin, fail on HTTP errors
	local path="$1"
	shift
	curl -fsS --max-time 5 --cacert "$state/ca.crt" \
		-H "Authorization: Bearer $(<"$state/admin.token")" "$@" "$(<"$state/server")$path"
}

summary() {
	echo "kubeconfig: $state/kubeconfig"
	echo "API server: $(<"$state/server")"
}

if running && api /readyz >/dev/null 2>&1; then
	echo "cluster already running"
	summary
	exit 0
fi

# Build (or find cached) binaries before touching any running state, so a
# failing build leaves a working cluster alone.
bin="$("$root/scripts/cluster-build.sh" | tail -n 1)"

if [[ -e "$state" ]]; then
	echo "cleaning up stale cluster state" >&2
	"$root/scripts/cluster-down.sh" >/dev/null
fi
mkdir -p "$state"
chmod 700 "$state"

echo "generating certificates and credentials" >&2
# EC P-256 keys: generating them is instant, unlike RSA.
ssl() { openssl "$@" 2>>"$state/openssl.log"; }
newkey() { ssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"; }
sign() { # name subject extensions: issue $state/name.crt from the cluster CA
	newkey "$state/$1.key"
	ssl req -new -key "$state/$1.key" -subj "$2" -out "$state/$1.csr"
	ssl x509 -req -in "$state/$1.csr" -CA "$state/ca.crt" -CAkey "$state/ca.key" \
		-CAcreateserial -days 365 -extfile <(printf '%s\n' "$3") -out "$state/$1.crt"
	rm -f "$state/$1.csr"
}
newkey "$state/ca.key"
ssl req -x509 -new -key "$state/ca.key" -subj "/CN=terraform-provider-k8s local CA" -days 3650 \
	-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
	-out "$state/ca.crt"
sign apiserver "/CN=kube-apiserver" "$(printf '%s\n' \
	"basicConstraints=critical,CA:FALSE" "keyUsage=critical,digitalSignature" \
	"extendedKeyUsage=serverAuth" \
	"subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:10.96.0.1")"
# Plain user: no O= (no groups) so RBAC starts it with nothing but what
# system:authenticated gets.
sign cert-user "/CN=cert-user" "$(printf '%s\n' \
	"basicConstraints=critical,CA:FALSE" "keyUsage=critical,digitalSignature" \
	"extendedKeyUsage=clientAuth")"
# Service-account token signing pair; the apiserver verifies with the public
# half and the token controller would sign with the private one.
newkey "$state/sa.key"
ssl pkey -in "$state/sa.key" -pubout -out "$state/sa.pub"

if [[ "${K8S_TF_AUDIT:-}" == 1 ]]; then
	# Metadata level: who asked for what, and the answer's code, no bodies.
	# RequestReceived is omitted so that each request is one line.
	cat >"$state/audit-policy.yaml" <<'EOF'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
EOF
fi

# Static tokens. admin is in system:masters (bypasses RBAC); the others are
# plain users so that tests can grant them exactly the rights they check.
users=(admin reader no-list no-get)
: >"$state/tokens.csv"
for u in "${users[@]}"; do
	openssl rand -hex 24 >"$state/$u.token"
	line="$(<"$state/$u.token"),$u,$u"
	# A fourth column, even "", would add a group (the empty one).
	[[ "$u" == admin ]] && line+=',"system:masters"'
	echo "$line" >>"$state/tokens.csv"
done

# Ports: chosen at random below the kernel's ephemeral range (32768+ on Linux)
# so that outgoing connections cannot be holding them, skipping any already
# listening. There is still a window between the check and the bind, so a
# start that fails on a taken port is retried with fresh ports.
listening() {
	if command -v ss >/dev/null; then
		[[ -n "$(ss -Htln "sport = :$1")" ]]
	else
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
	fi
}
pick_ports() {
	local p picked=()
	while ((${#picked[@]} < $1)); do
		p=$((20000 + RANDOM % 12000))
		[[ " ${picked[*]} " == *" $p "* ]] && continue
		listening "$p" && continue
		picked+=("$p")
	done
	echo "${picked[@]}"
}

write_kubeconfig() { # file server
	local ca
	ca="$(base64 -w0 <"$state/ca.crt")"
	{
		cat <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: $2
    certificate-authority-data: $ca
contexts:
EOF
		for u in "${users[@]}" cert-user; do
			printf -- '- name: %s\n  context:\n    cluster: local\n    user: %s\n' "$u" "$u"
		done
		echo "current-context: admin"
		echo "users:"
		for u in "${users[@]}"; do
			printf -- '- name: %s\n  user:\n    token: %s\n' "$u" "$(<"$state/$u.token")"
		done
		printf -- '- name: cert-user\n  user:\n    client-certificate-data: %s\n    client-key-data: %s\n' \
			"$(base64 -w0 <"$state/cert-user.crt")" "$(base64 -w0 <"$state/cert-user.key")"
	} >"$1"
	chmod 600 "$1"
}

start() { # name args...: run detached, in its own session so that signals
	# aimed at the caller's terminal or job never reach it; the inner shell
	# records its own PID, which exec hands on to the daemon. 8<&-: a daemon
	# must not inherit the up/down lock, or it would hold it for its lifetime.
	local name="$1"
	shift
	rm -f "$state/$name.pid"
	# shellcheck disable=SC2016 # expanded by the inner shell, on purpose
	setsid bash -c 'echo $$ >"$0"; exec "$@"' "$state/$name.pid" "$bin/$name" "$@" \
		</dev/null >>"$state/$name.log" 2>&1 8<&- &
	local deadline=$((SECONDS + 5))
	until [[ -s "$state/$name.pid" ]]; do
		((SECONDS < deadline)) || { echo "cluster-up: $name did not start" >&2; return 1; }
		sleep 0.05
	done
}

wait_for() { # name timeout_s check...: 0 when ready, 1 on timeout, 2 if it died
	local name="$1" deadline=$((SECONDS + $2)) pid
	shift 2
	pid="$(<"$state/$name.pid")"
	until "$@" >/dev/null 2>&1; do
		ours "$pid" || return 2
		((SECONDS < deadline)) || return 1
		sleep 0.2
	done
}

# Starts the three daemons; returns 3 if one died (a lost port race is the
# retryable case). Called in a || list, so set -e is off here: every step
# that can fail returns explicitly.
launch() {
	local etcd_port peer_port api_port kcm_port rc
	read -r etcd_port peer_port api_port kcm_port <<<"$(pick_ports 4)"
	local server="https://127.0.0.1:$api_port"
	echo "$server" >"$state/server"
	write_kubeconfig "$state/kubeconfig" "$server"
	cp "$state/kubeconfig" "$state/kcm.kubeconfig"
	echo "ports: etcd $etcd_port (peer $peer_port), kube-apiserver $api_port, kube-controller-manager $kcm_port" >"$state/ports"

	echo "starting etcd on 127.0.0.1:$etcd_port" >&2
	# --unsafe-no-fsync: the data is thrown away anyway, and fsync latency on
	# shared CI disks is the usual cause of etcd (and so apiserver) timeouts.
	start etcd --name=local --data-dir="$state/etcd" \
		--listen-client-urls="http://127.0.0.1:$etcd_port" \
		--advertise-client-urls="http://127.0.0.1:$etcd_port" \
		--listen-peer-urls="http://127.0.0.1:$peer_port" \
		--initial-advertise-peer-urls="http://127.0.0.1:$peer_port" \
		--initial-cluster="local=http://127.0.0.1:$peer_port" \
		--unsafe-no-fsync --log-level=warn || return 1
	rc=0
	wait_for etcd 30 curl -fsS --max-time 2 "http://127.0.0.1:$etcd_port/health" || rc=$?
	((rc == 0)) || return $((rc == 2 ? 3 : 1))

	# Off by default: the log grows with every request of the controllers too.
	local audit=()
	if [[ "${K8S_TF_AUDIT:-}" == 1 ]]; then
		audit=(--audit-policy-file="$state/audit-policy.yaml" --audit-log-path="$state/audit.log")
	fi

	echo "starting kube-apiserver on $server" >&2
	# --endpoint-reconciler-type=none: the default reconciler would publish
	# 127.0.0.1 as the endpoint of the "kubernetes" Service, which Endpoints
	# validation rejects (loopback), and it would keep retrying.
	# Dual-stack service range: lets tests create IPv4+IPv6 Services.
	start kube-apiserver \
		--bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$api_port" \
		--cert-dir="$state/apiserver-certs" \
		--etcd-servers="http://127.0.0.1:$etcd_port" \
		--endpoint-reconciler-type=none \
		--tls-cert-file="$state/apiserver.crt" --tls-private-key-file="$state/apiserver.key" \
		--client-ca-file="$state/ca.crt" --token-auth-file="$state/tokens.csv" \
		--authorization-mode=RBAC \
		--service-account-issuer=https://kubernetes.default.svc \
		--service-account-key-file="$state/sa.pub" \
		--service-account-signing-key-file="$state/sa.key" \
		--service-cluster-ip-range=10.96.0.0/16,fd00:10:96::/112 \
		--allow-privileged=true "${audit[@]}" || return 1
	rc=0
	wait_for kube-apiserver 90 api /readyz || rc=$?
	((rc == 0)) || return $((rc == 2 ? 3 : 1))

	echo "starting kube-controller-manager (healthz on 127.0.0.1:$kcm_port)" >&2
	# Only the controllers that give API objects their server-side behaviour
	# without nodes: EndpointSlices from Services+Pods, mirrored slices from
	# hand-made Endpoints, namespace deletion, default ServiceAccounts and
	# garbage collection of ownerReferences. No leader election: one replica.
	# The client CA is given directly (skip-lookup): otherwise it keeps asking
	# the cluster for a front-proxy CA that this apiserver does not have.
	start kube-controller-manager \
		--kubeconfig="$state/kcm.kubeconfig" \
		--authentication-kubeconfig="$state/kcm.kubeconfig" \
		--authorization-kubeconfig="$state/kcm.kubeconfig" \
		--authentication-skip-lookup=true --client-ca-file="$state/ca.crt" \
		--bind-address=127.0.0.1 --secure-port="$kcm_port" \
		--cert-dir="$state/kcm-certs" \
		--controllers=endpointslice-controller,endpointslice-mirroring-controller,namespace-controller,serviceaccount-controller,garbage-collector-controller \
		--leader-elect=false \
		--root-ca-file="$state/ca.crt" || return 1
	rc=0
	wait_for kube-controller-manager 60 \
		curl -fsSk --max-time 2 "https://127.0.0.1:$kcm_port/healthz" || rc=$?
	((rc == 0)) || return $((rc == 2 ? 3 : 1))
	# Ready for tests means the controllers have acted: the default
	# ServiceAccount is what pod admission waits for.
	rc=0
	wait_for kube-controller-manager 60 api /api/v1/namespaces/default/serviceaccounts/default || rc=$?
	((rc == 0)) || return $((rc == 2 ? 3 : 1))
}

start_time=$SECONDS
for attempt in 1 2 3; do
	rc=0
	launch || rc=$?
	((rc == 0)) && break
	# A daemon died: retry only if it was a port race, otherwise show why.
	if ((rc == 3)) && grep -qi 'address already in use' "$state"/*.log 2>/dev/null && ((attempt < 3)); then
		echo "a port was taken meanwhile; retrying with other ports" >&2
		"$root/scripts/cluster-down.sh" --keep-state >/dev/null
		rm -rf "$state/etcd" "$state"/*.log
		continue
	fi
	echo "cluster-up: failed to start (logs in $state):" >&2
	for c in "${components[@]}"; do
		[[ -s "$state/$c.log" ]] && { echo "--- $c.log (tail)" >&2; tail -n 15 "$state/$c.log" >&2; }
	done
	"$root/scripts/cluster-down.sh" --keep-state >/dev/null || true
	exit 1
done

cat >"$state/env" <<EOF
export KUBECONFIG='$state/kubeconfig'
export K8S_TF_SERVER='$(<"$state/server")'
export K8S_TF_CA_FILE='$state/ca.crt'
export K8S_TF_ADMIN_TOKEN_FILE='$state/admin.token'
EOF

echo "cluster ready in $((SECONDS - start_time)) s"
summary
