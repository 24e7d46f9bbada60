#!/usr/bin/env bash
# make bench: measures the provider against its performance targets and
# writes the numbers as Markdown (bench/results.md; bench/README.md says what
# they mean). Measured, not asserted in tests: a timing bound in a test fails
# on a busy CI machine and proves nothing on a fast one.
#
# It builds the provider release-style (as .goreleaser.yml does), starts the
# local control plane with an audit log (a cluster already running is used as
# it is and left running), creates 100 Services with 10 ready pods each, and
# runs the real terraform CLI against them through a dev_overrides CLI
# configuration of its own:
#   - terraform plan with 1, 10 and 100 data sources, -parallelism=10, and
#     with 300 (each Service three times), past the client's rate limit burst,
#   - terraform validate of the 100 and, for reference, of an empty configuration,
#   - the peak RSS of every provider process that the plan of 100 starts,
#   - the provider's API requests as the API server's audit log recorded them,
# then reports the size of the binary and what takes it, and runs the Go
# benchmarks of the rules (internal/endpoints). Times are medians of
# K8S_TF_BENCH_RUNS runs, after one untimed run of each command.
#
# Environment:
#   K8S_TF_BENCH_RUNS  timed runs of each command (default 7)
#   K8S_TF_BENCH_OUT   the Markdown file written (default bench/results.md)
#   K8S_TF_CACHE       control plane binary cache, see scripts/cluster-build.sh
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# EPOCHREALTIME and printf use the locale's decimal point.
export LC_ALL=C
runs="${K8S_TF_BENCH_RUNS:-7}"
out="${K8S_TF_BENCH_OUT:-bench/results.md}"
namespace=bench
sizes=(1 10 100)
say() { printf '\n==> %s\n' "$*" >&2; }

for tool in terraform jq; do
	command -v "$tool" >/dev/null || { echo "bench: $tool is required" >&2; exit 1; }
done

work="$(mktemp -d -t k8s-tf-bench.XXXXXX)"
started=false
fixture=false
kubeconfig="$root/.cluster/kubeconfig"
cleanup() {
	if $started; then
		scripts/cluster-down.sh >/dev/null 2>&1 || true
	elif $fixture; then
		# A cluster that was running before is left as it was found.
		"$work/benchfixture" delete -kubeconfig "$kubeconfig" -namespace "$namespace" >/dev/null 2>&1 || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT
load_start="$(cut -d' ' -f1-3 /proc/loadavg)"

say "building the provider release-style (CGO_ENABLED=0 -trimpath -ldflags '-s -w') and the fixture tool"
provider_dir="$work/provider"
provider="$provider_dir/terraform-provider-k8s"
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$provider" .
# Same build with its symbol table, for what takes the bytes.
CGO_ENABLED=0 go build -trimpath -o "$work/unstripped" .
go build -o "$work/benchfixture" ./internal/benchfixture

say "starting the local control plane with an audit log"
up="$(env -u K8S_TF_KUBECONFIG K8S_TF_AUDIT=1 scripts/cluster-up.sh)"
echo "$up" >&2
grep -q "already running" <<<"$up" || started=true
audit="$root/.cluster/audit.log"
[[ -f "$audit" ]] || echo "the running cluster has no audit log (started without K8S_TF_AUDIT=1): requests are not counted" >&2

say "fixture: 100 Services x 10 ready pods in namespace $namespace"
fixture=true
"$work/benchfixture" create -kubeconfig "$kubeconfig" -namespace "$namespace" -services 100 -pods 10 >&2

# One configuration per size: a data source per Service, and an output that
# sums their endpoints, so every run also checks what was read.
config() { # dir n
	mkdir -p "$1"
	{
		printf 'terraform {\n  required_providers {\n    k8s = { source = "vigie/k8s" }\n  }\n}\n\nprovider "k8s" {}\n'
		for ((i = 0; i < $2; i++)); do
			printf '\ndata "k8s_ready_endpoints" "svc_%03d" {\n  namespace = "%s"\n  service   = "svc-%03d"\n  port_name = "http"\n}\n' "$i" "$namespace" $((i % 100))
		done
		printf '\noutput "ready_endpoints" {\n  value = sum([\n'
		for ((i = 0; i < $2; i++)); do
			printf '    length(data.k8s_ready_endpoints.svc_%03d.endpoints),\n' "$i"
		done
		printf '  ])\n}\n'
	} >"$1/main.tf"
}
for n in "${sizes[@]}" 300; do
	config "$work/tf/$n" "$n"
done
mkdir -p "$work/tf/empty"
echo 'terraform {}' >"$work/tf/empty/main.tf"

# The CLI gets this configuration and nothing of the machine's or the
# environment's: no plugin cache, no logging, no version pin of the test
# framework.
rc() { # file provider_dir
	printf 'provider_installation {\n  dev_overrides {\n    "vigie/k8s" = "%s"\n  }\n  direct {}\n}\n' "$2" >"$1"
}
rc "$work/terraformrc" "$provider_dir"
# A provider that reports its peak RSS: Terraform starts whatever it finds
# under the provider's name in the override directory.
mkdir -p "$work/rss"
printf '#!/usr/bin/env bash\nexec %q rss-wrap %q %q\n' "$work/benchfixture" "$work/rss.log" "$provider" \
	>"$work/rss/terraform-provider-k8s"
chmod +x "$work/rss/terraform-provider-k8s"
rc "$work/terraformrc-rss" "$work/rss"
unset TF_LOG TF_LOG_CORE TF_LOG_PROVIDER TF_LOG_PATH TF_PLUGIN_CACHE_DIR TF_DATA_DIR TF_ACC_TERRAFORM_VERSION \
	TF_CLI_ARGS TF_CLI_ARGS_plan TF_CLI_ARGS_validate
export TF_CLI_CONFIG_FILE="$work/terraformrc" TF_IN_AUTOMATION=1 CHECKPOINT_DISABLE=1 KUBECONFIG="$kubeconfig"

# timed FILE COMMAND...: runs COMMAND (output in $work/last.log), fails with
# its output if it fails, and appends its wall time in seconds to FILE.
timed() {
	local file="$1" start end
	shift
	# Microseconds, read without forking: a fork costs about as much as the
	# shortest command timed here.
	start="${EPOCHREALTIME/./}"
	if ! "$@" >"$work/last.log" 2>&1; then
		cat "$work/last.log" >&2
		echo "bench: failed: $*" >&2
		return 1
	fi
	end="${EPOCHREALTIME/./}"
	printf '%d.%06d\n' $(((end - start) / 1000000)) $(((end - start) % 1000000)) >>"$file"
}
plan() { # n
	terraform -chdir="$work/tf/$1" plan -input=false -lock=false -parallelism=10 -no-color
}
check_plan() { # n: the plan read every endpoint of every Service
	grep -q "ready_endpoints = $(($1 * 10))\$" "$work/last.log" || {
		cat "$work/last.log" >&2
		echo "bench: the plan of $1 did not read $(($1 * 10)) endpoints" >&2
		return 1
	}
}
validate() { # dir
	terraform -chdir="$work/tf/$1" validate -no-color
}
lines() { if [[ -f "$audit" ]]; then wc -l <"$audit"; else echo 0; fi; }

say "warm-up: one untimed run of each command"
mkdir -p "$work/t"
for n in "${sizes[@]}"; do
	timed /dev/null plan "$n"
	check_plan "$n"
done
timed /dev/null validate 100
timed /dev/null validate empty

say "terraform plan, $runs runs of each size (interleaved, so that a busy moment hits all sizes alike)"
audit_from="$(lines)"
for ((r = 1; r <= runs; r++)); do
	for n in "${sizes[@]}"; do
		timed "$work/t/plan-$n" plan "$n"
		check_plan "$n"
	done
	echo "  run $r: $(for n in "${sizes[@]}"; do printf '%s=%ss ' "$n" "$(tail -n 1 "$work/t/plan-$n")"; done)" >&2
done
# The audit backend writes each event when its request completes; give the
# last ones a moment.
sleep 1
audit_to="$(lines)"
reads=$((runs * (1 + 10 + 100)))

say "terraform plan of 300 data sources, $runs runs"
# 600 requests from one provider process: more than the burst of its
# client-side rate limiter. The audit log shows the rate they arrive at.
timed /dev/null plan 300
check_plan 300
from="$(lines)"
for ((r = 1; r <= runs; r++)); do
	timed "$work/t/plan-300" plan 300
	check_plan 300
	if ((r == 1)); then
		sleep 1
		to="$(lines)"
	fi
done
per_second="not measured (no audit log)"
if [[ -f "$audit" ]]; then
	per_second="$(awk -v from="$from" -v to="$to" 'NR > from && NR <= to' "$audit" |
		jq -r 'select(.userAgent | startswith("terraform-provider-k8s")) | .requestReceivedTimestamp[0:19]' |
		sort | uniq -c | awk '{ print $1 }' | paste -sd, | sed 's/,/, /g')"
fi

say "terraform validate, $runs runs"
for ((r = 1; r <= runs; r++)); do
	timed "$work/t/validate-100" validate 100
	timed "$work/t/validate-empty" validate empty
done

say "provider peak RSS, $runs plans of 100"
: >"$work/rss-plans"
for ((r = 1; r <= runs; r++)); do
	rm -f "$work/rss.log"
	TF_CLI_CONFIG_FILE="$work/terraformrc-rss" timed /dev/null plan 100
	check_plan 100
	# One line per plan: the number of provider processes, then each one's
	# peak in KiB, in the order they ended.
	awk '{ k = k " " $1 } END { print NR k }' "$work/rss.log" >>"$work/rss-plans"
	if ((r == 1)); then cp "$work/rss.log" "$work/rss-first.log"; fi
done
rm -f "$work/rss.log"
TF_CLI_CONFIG_FILE="$work/terraformrc-rss" timed /dev/null validate 100
validate_starts="$(wc -l <"$work/rss.log")"

# The request lines of the provider in the audit log, from the timed plans.
if [[ -f "$audit" ]]; then
	awk -v from="$audit_from" -v to="$audit_to" 'NR > from && NR <= to' "$audit" |
		jq -r 'select(.userAgent | startswith("terraform-provider-k8s")) |
			[.verb, (.objectRef.resource // "-"), (.responseStatus.code | tostring), (.requestURI | sub("\\?.*"; ""))] | @tsv' \
			>"$work/requests.tsv"
fi

if $started; then
	say "stopping the control plane this script started"
	scripts/cluster-down.sh >&2
	started=false
	fixture=false
fi

say "binary size"
size_bytes="$(stat -c %s "$provider")"
"$work/benchfixture" sizes "$work/unstripped" >"$work/sizes.md"
# Marginal sizes: the same build flags on programs that link only a part of
# the provider, in a copy of the module so that versions are the provider's.
floor="$work/floor"
mkdir -p "$floor/framework" "$floor/api"
cp go.mod go.sum "$floor/"
sed -i '1s/.*/module benchfloor/' "$floor/go.mod"
cat >"$floor/framework/main.go" <<'EOF'
package main

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
)

func main() {
	_ = providerserver.Serve(context.Background(), func() provider.Provider { return nil }, providerserver.ServeOpts{Address: "vigie/k8s"})
}
EOF
sed 's|^import (|import (\n\t_ "k8s.io/api/discovery/v1"|' "$floor/framework/main.go" >"$floor/api/main.go"
for p in framework api; do
	(cd "$floor" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$work/floor-$p" "./$p")
done
floor_framework="$(stat -c %s "$work/floor-framework")"
floor_api="$(stat -c %s "$work/floor-api")"

say "Go benchmarks of the rules (internal/endpoints), -count=5"
go test -run=NONE -bench=. -benchmem -count=5 ./internal/endpoints/ | tee "$work/gobench.txt" >&2
load_end="$(cut -d' ' -f1-3 /proc/loadavg)"

# ---- report ----------------------------------------------------------------

median() { sort -g "$1" | awk '{ v[NR] = $1 } END { printf "%.3f\n", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
minmax() { sort -g "$1" | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.3f–%.3f", lo, hi }'; }
calc() { awk "BEGIN { printf \"$1\", $2 }"; } # FORMAT EXPRESSION
# verdict VALUE LIMIT UNIT: pass/miss with the margin; lower is better.
verdict() {
	awk -v v="$1" -v l="$2" -v u="$3" 'BEGIN {
		if (v <= l) printf "**pass** (%.0f %% under)", (l - v) / l * 100
		else printf "**miss** by %.2f%s (%.0f %% over)", v - l, u, (v - l) / l * 100
	}'
}

med_plan_1="$(median "$work/t/plan-1")"
med_plan_100="$(median "$work/t/plan-100")"
med_validate_100="$(median "$work/t/validate-100")"
med_validate_empty="$(median "$work/t/validate-empty")"
ratio="$(calc %.1f "$med_plan_100 / $med_plan_1")"
# Per plan: the largest peak of its provider processes.
awk '{ m = 0; for (i = 2; i <= NF; i++) if ($i > m) m = $i; print m / 1024 }' "$work/rss-plans" >"$work/t/rss"
med_rss="$(median "$work/t/rss")"
starts="$(awk '{ print $1 }' "$work/rss-plans" | sort -u | paste -sd/)"
one_plan="$(awk '{ printf "%s%.1f MiB in %d ms", (NR > 1 ? ", " : ""), $1 / 1024, $2 }' "$work/rss-first.log")"
size_mb="$(calc %.2f "$size_bytes / 1e6")"
size_mib="$(calc %.2f "$size_bytes / 1048576")"

# Go benchmark medians: name -> ns/op, B/op, allocs/op.
awk '/^Benchmark/ {
	name = $1; sub(/-[0-9]+$/, "", name)
	for (i = 3; i < NF; i++) {
		if ($(i + 1) == "ns/op") ns[name] = ns[name] " " $i
		if ($(i + 1) == "B/op") by[name] = by[name] " " $i
		if ($(i + 1) == "allocs/op") al[name] = al[name] " " $i
	}
}
function med(s,   a, n, i, j, t) {
	n = split(s, a, " ")
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
	return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
END { for (k in ns) print k, med(ns[k]), med(by[k]), med(al[k]) }' "$work/gobench.txt" | sort -t= -k1,1 -k2n >"$work/gobench-med"
bench_ns() { awk -v k="BenchmarkReady/endpoints=$1" '$1 == k { print $2 }' "$work/gobench-med"; }
ns_1k="$(bench_ns 1000)"
ns_10k="$(bench_ns 10000)"
ns_100k="$(bench_ns 100000)"
growth_1="$(calc %.1f "$ns_10k / $ns_1k")"
growth_2="$(calc %.1f "$ns_100k / $ns_10k")"
# n log n from 1k to 10k is 10 x log(10^4)/log(10^3); from 10k to 100k, 10 x 5/4.
nlogn_1="$(calc %.1f "10 * 4 / 3")"
nlogn_2="$(calc %.1f "10 * 5 / 4")"
growth_verdict="$(awk -v a="$growth_1" -v b="$growth_2" -v x="$nlogn_1" -v y="$nlogn_2" 'BEGIN {
	printf "%s (1k → 10k: %s; 10k → 100k: %s)", (a <= x && b <= y) ? "**pass**" : "**miss**",
		a <= x ? "within" : sprintf("%.0f %% over", (a / x - 1) * 100), b <= y ? "within" : sprintf("%.0f %% over", (b / y - 1) * 100)
}')"

requests_summary="not measured (no audit log)"
requests_verdict="not measured"
if [[ -f "$work/requests.tsv" ]]; then
	others="$(awk -F'\t' '!(($1 == "get" && $2 == "services") || ($1 == "list" && $2 == "endpointslices"))' "$work/requests.tsv" | wc -l)"
	gets="$(awk -F'\t' '$1 == "get" && $2 == "services"' "$work/requests.tsv" | wc -l)"
	lists="$(awk -F'\t' '$1 == "list" && $2 == "endpointslices"' "$work/requests.tsv" | wc -l)"
	requests_summary="$(calc "%.2f get services + %.2f list endpointslices + %.2f other" "$gets / $reads, $lists / $reads, $others / $reads")"
	if ((gets == reads && lists == reads && others == 0)); then
		requests_verdict="**pass**"
	else
		requests_verdict="**miss**"
	fi
fi

{
	echo "# make bench results"
	echo
	echo "Written by \`make bench\` (scripts/bench.sh) on $(date -u +%Y-%m-%d); see [README.md](README.md) for what each number means."
	echo
	echo "Machine: $(nproc) cores ($(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)), $(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo) memory, Linux $(uname -r); $(go version | awk '{ print $3 }'), terraform $(terraform version -json | jq -r .terraform_version); load average (1, 5, 15 min) $load_start at the start, $load_end at the end."
	echo
	echo "## Targets"
	echo
	echo "| measurement | measured | target | verdict |"
	echo "|---|---:|---:|---|"
	echo "| \`terraform plan\`, 100 data sources (median of $runs) | $med_plan_100 s | ≤ 1.28 s (0.4 × 3.2 s) | $(verdict "$med_plan_100" 1.28 " s") |"
	echo "| plan time, 100 data sources / 1 | $ratio× | — | |"
	echo "| \`terraform plan\`, 300 data sources (median of $runs) | $(median "$work/t/plan-300") s | — | beyond the targets: see below |"
	echo "| \`terraform validate\`, 100 data sources (median of $runs) | $med_validate_100 s | ≤ 0.39 s (0.3 × 1.3 s) | $(verdict "$med_validate_100" 0.39 " s") |"
	echo "| provider peak RSS, plan of 100 (median of $runs plans) | $(calc %.1f "$med_rss") MiB | ≤ 45 MiB | $(verdict "$med_rss" 45 " MiB") |"
	echo "| release binary (linux/amd64) | $size_mb MB ($size_mib MiB) | ≤ 26 MB | $(verdict "$size_mb" 26 " MB") |"
	echo "| API requests per data source read | $requests_summary | 1 get services + 1 list endpointslices | $requests_verdict |"
	echo "| \`Ready\`, 10k endpoints (median of 5) | $(calc %.2f "$ns_10k / 1e6") ms | < 5 ms | $(verdict "$(calc %.4f "$ns_10k / 1e6")" 5 " ms") |"
	echo "| \`Ready\` growth 1k → 10k → 100k | ${growth_1}×, ${growth_2}× | ≤ n log n: ${nlogn_1}×, ${nlogn_2}× | $growth_verdict |"
	echo
	echo "## terraform (wall time, s; $runs timed runs after one untimed)"
	echo
	echo "| command | median | min–max |"
	echo "|---|---:|---:|"
	for n in "${sizes[@]}"; do
		plural=s
		((n > 1)) || plural=
		echo "| \`terraform plan -parallelism=10\`, $n data source$plural | $(median "$work/t/plan-$n") | $(minmax "$work/t/plan-$n") |"
	done
	echo "| \`terraform plan -parallelism=10\`, 300 data sources (each Service three times) | $(median "$work/t/plan-300") | $(minmax "$work/t/plan-300") |"
	echo "| \`terraform validate\`, 100 data sources | $med_validate_100 | $(minmax "$work/t/validate-100") |"
	echo "| \`terraform validate\`, empty configuration (the bare CLI) | $med_validate_empty | $(minmax "$work/t/validate-empty") |"
	echo
	echo "## Provider processes"
	echo
	echo "Terraform started the provider $starts times per plan and $validate_starts times per validate. Peak RSS and lifetime of each provider process of the first plan of 100, in the order they ended: $one_plan. The target applies to the largest: the last process is the one that configures the client and reads."
	echo
	echo "## API requests at the API server"
	echo
	if [[ -f "$work/requests.tsv" ]]; then
		echo "Audit log lines with a user agent starting with \`terraform-provider-k8s\`, during the $((runs * 3)) timed plans: $reads data source reads (each plan reads each of its data sources once)."
		echo
		echo "| verb | resource | HTTP code | requests | per read |"
		echo "|---|---|---|---:|---:|"
		awk -F'\t' '{ c[$1 "\t" $2 "\t" $3]++ } END { for (k in c) print c[k] "\t" k }' "$work/requests.tsv" | sort -rn |
			while IFS=$'\t' read -r count verb resource code; do
				echo "| $verb | $resource | $code | $count | $(calc %.2f "$count / $reads") |"
			done
		echo
		# Discovery (/api, /apis, their group and version documents) and the
		# OpenAPI documents are what a full client-go clientset may fetch.
		discovery="$(awk -F'\t' '$4 ~ /^\/(openapi|version)/ || $4 ~ /^\/apis?\/?$/ || $4 ~ /^\/api\/[^\/]+\/?$/ || $4 ~ /^\/apis\/[^\/]+(\/[^\/]+)?\/?$/' "$work/requests.tsv" | wc -l)"
		echo "Requests for discovery or OpenAPI paths (/api, /apis, /openapi, /version): $discovery."
		echo
		echo "Provider requests received in each second of one plan of 300 data sources (600 requests): $per_second."
	else
		echo "Not measured: the cluster was already running without an audit log. Stop it (make cluster-down) and run make bench again."
	fi
	echo
	echo "## Binary"
	echo
	echo "The release build (\`CGO_ENABLED=0 go build -trimpath -ldflags \"-s -w\"\`, as .goreleaser.yml) is $size_bytes bytes. The same flags on a provider that serves nothing (terraform-plugin-framework alone) give $(calc %.2f "$floor_framework / 1e6") MB, and with the Kubernetes API types it reads (\`k8s.io/api/discovery/v1\`, which imports \`core/v1\`) $(calc %.2f "$floor_api / 1e6") MB: the types add $(calc %.2f "($floor_api - $floor_framework) / 1e6") MB, client-go's REST client, kubeconfig loading and the provider's own code the remaining $(calc %.2f "($size_bytes - $floor_api) / 1e6") MB."
	echo
	echo "Bytes of the unstripped build by module and package (code, and data in symbols; the function tables of .gopclntab grow with the code):"
	echo
	cat "$work/sizes.md"
	echo
	echo "## Rules: \`go test -run=NONE -bench=. -benchmem -count=5 ./internal/endpoints/\`"
	echo
	echo "Medians of 5. Endpoints in slices of 100 with a tenth repeated from the previous slice, mixed conditions; the default query, and the one that includes serving terminating endpoints. Growth is the time over that of the size ten times smaller."
	echo
	echo "| benchmark | ns/op | ms/op | B/op | allocs/op | growth |"
	echo "|---|---:|---:|---:|---:|---:|"
	prev="" family=""
	while read -r name ns bytes allocs; do
		growth="—"
		[[ "${name%%/*}" == "$family" ]] && growth="$(calc %.1f× "$ns / $prev")"
		echo "| $name | $(calc %.0f "$ns") | $(calc %.2f "$ns / 1e6") | $(calc %.0f "$bytes") | $(calc %.0f "$allocs") | $growth |"
		prev="$ns" family="${name%%/*}"
	done <"$work/gobench-med"
} >"$work/results.md"

mkdir -p "$(dirname "$out")"
cp "$work/results.md" "$out"
say "results (also in $out)"
cat "$out"
