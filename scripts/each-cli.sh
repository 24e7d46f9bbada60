#!/usr/bin/env bash
# each-cli.sh HARNESS "CLIS" WHAT -- COMMAND...
#
# Runs COMMAND once for each CLI of CLIS (names that `HARNESS cli` knows),
# all at the same time, each with TF_ACC_TERRAFORM_PATH set to that CLI. The
# acceptance suites mostly wait (settle windows, Lease durations, rollouts),
# and each run starts a control plane of its own, so the CLIs' runs overlap
# instead of queueing. Each run's output goes to a file of its own, printed
# whole when the run ends, so that the CI log reads one suite at a time.
# EACH_CLI_SERIAL=1 runs them one after the other, printing as they go.
# Exits non-zero when any run failed.
set -euo pipefail

harness=$1 clis=$2 what=$3
shift 3
[ "${1:-}" = -- ] && shift

# Resolve (and build, the first time) every CLI before starting any run.
declare -a names paths
for cli in $clis; do
	names+=("$cli")
	paths+=("$("$harness" cli "$cli")")
done

if [ "${EACH_CLI_SERIAL:-}" = 1 ]; then
	for i in "${!names[@]}"; do
		echo "== $what on $("${paths[$i]}" version | sed -n 1p)"
		TF_ACC_TERRAFORM_PATH="${paths[$i]}" "$@"
	done
	exit 0
fi

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
declare -a pids starts
for i in "${!names[@]}"; do
	echo "== $what on $("${paths[$i]}" version | sed -n 1p): started $(date -u +%T)"
	starts+=("$(date +%s)")
	TF_ACC_TERRAFORM_PATH="${paths[$i]}" "$@" >"$logs/$i.log" 2>&1 &
	pids+=("$!")
done

failed=0
for i in "${!names[@]}"; do
	rc=0
	wait "${pids[$i]}" || rc=$?
	echo "== $what on ${names[$i]}: exit $rc after $(($(date +%s) - starts[i])) s"
	cat "$logs/$i.log"
	if [ "$rc" != 0 ]; then
		failed=1
	fi
done
exit "$failed"
