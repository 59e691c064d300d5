#!/bin/sh
# make check: the project's own tests, in order of cost. Each step
# prints its own output; the last line counts the steps.
#  1. pkt unit tests (native)           4. the benchmark on this machine's
#  2. checkpatch on patches and tests      kernel, in its own netns
#  3. backlog test on this machine's    5. tooling unit tests (pytest),
#     kernel, in its own netns             the golden rendered jobs
#                                       6. end to end, both variants, on
#                                          x86_64 and on big-endian mips
#  4a. random sequences on this machine's kernel, held and unheld
#  4b. the selftest patch applied to a copy of the kernel tree, built
#     with its net/Makefile, run, checkpatch --strict
#  7. bad days on x86_64 guests: panic, corrupt artifact, hang, Ctrl-C
#  8. the x86_64 jobs on a real LAVA server with two workers
#     (tools/lab-local.sh up 2), submitted and collected with lavacli:
#     same verdicts as step 6, the two jobs at once on different workers
#  9. bisect: tests/e2e/bisect/culprit-7 (12 patches) on x86_64 names patch 7
# 10. debug kernel: x86_64's fixed kernel and its debug twin (KASAN,
#     lockdep, ...) pass with clean logs; mutants 23 (a WARN_ON, plain
#     kernel) and 24 (a use-after-free, debug kernel) are caught
set -u
cd "$(dirname "$0")/../.."
PY=/usr/bin/python3
native=build/native
pass=0
fail=0
failed=""

step() {
	name=$1
	shift
	echo "=== check: $name"
	if "$@"; then
		pass=$((pass + 1))
		echo "=== check: $name: ok"
	else
		fail=$((fail + 1))
		failed="$failed $name"
		echo "=== check: $name: FAILED"
	fi
}

build_native() {
	# The same compiler flags as the guests' (tools/kgate/rootfs.py),
	# with the kernel tree's kselftest harness.
	$PY tools/kgate.py native "$native" > /dev/null
}

native_backlog() {
	# The host kernel has the upstream fix: every case must pass. Its
	# lack of the kgate sysctl is only reported (a '#' line).
	"$native/backlog_coalesce" --repeat 3 > "$native/backlog.tap"
	rc=$?
	grep -v '^ok \|^#  *RUN \|^#  *OK ' "$native/backlog.tap"
	[ "$rc" = 0 ]
}

native_fuzz() {
	# Random sequences on the host kernel, held against unheld (it has
	# no kgate sysctl): every one must agree and merge only where the
	# rules allow.
	"$native/backlog_fuzz" --count 500 --regressions guest/fuzz-regressions > "$native/fuzz.tap"
	rc=$?
	grep -v '^ok \|^#  *RUN \|^#  *OK \|^# fuzz: seg' "$native/fuzz.tap"
	[ "$rc" = 0 ]
}

native_bench() {
	# The host kernel has no kgate sysctl: only the 'on' figures. Every
	# byte must arrive intact; whether the bulk runs used the backlog
	# depends on the host's scheduling (exit 4, inconclusive, is fine).
	"$native/backlog_bench" --reps 3 --bulk-bytes 4M > "$native/bench.tap"
	rc=$?
	grep -v '^# kgate-measure' "$native/bench.tap" | grep -v '^# \(bulk\|drain\) run'
	[ "$rc" = 0 ] || [ "$rc" = 4 ]
}

end_to_end() {
	$PY tools/kgate.py run --parallel 2 "$@"
}

if ! build_native; then
	echo "check: building the native tests failed"
	echo "check: 0 passed, 1 failed"
	exit 1
fi
step pkt-unit "$native/test_pkt"
step checkpatch sh tests/e2e/checkpatch.sh
step native-backlog native_backlog
step native-bench native_bench
step native-fuzz native_fuzz
# The test as it goes upstream: patch, kernel's own net/Makefile, run.
step selftest-upstream $PY tools/kgate.py selftest-check
step tooling env KGATE_NATIVE_TEST="$native/backlog_coalesce" \
	KGATE_NATIVE_BENCH="$native/backlog_bench" \
	KGATE_NATIVE_FAULTS="$native/backlog_coalesce_faults" \
	KGATE_NATIVE_FUZZ="$native/backlog_fuzz" \
	KGATE_NATIVE_FUZZ_FAULTS="$native/backlog_fuzz_faults" $PY -m pytest -q tests/unit/
step end-to-end end_to_end x86_64 mips

lab_end_to_end() {
	# The x86_64 jobs through a real LAVA server and two workers (started
	# here, stopped after): the verdicts collected with lavacli must be
	# the local run's, and the two jobs must have run at once, each on a
	# worker of its own.
	local_run=$e2e_run
	if [ -z "$local_run" ] || [ ! -f "$local_run/results.json" ]; then
		echo "lab-end-to-end: no local end-to-end results to compare with"
		return 1
	fi
	if ! sh tools/lab-local.sh up 2; then
		sh tools/lab-local.sh down
		return 1
	fi
	eval "$(sh tools/lab-local.sh env | sed 's/^/export /')"
	$PY tools/kgate.py submit -i "$KGATE_LAB_IDENTITY" --base-url "$KGATE_LAB_BASE_URL" \
		--timeout 600 x86_64
	rc=$?
	sh tools/lab-local.sh down
	[ "$rc" = 0 ] || return 1
	$PY -c 'import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
sys.path.insert(0, "tools")
from kgate.results import verdict_differences
from kgate.lab import side_by_side
diff = verdict_differences(a, b)
print("\n".join(diff) or "lab verdicts = local verdicts")
for j in b["jobs"]:
    print("%s/%s: job %s on %s (%s), %s to %s" % tuple(j.get(k) for k in (
        "target", "variant", "lava_job", "lava_device", "lava_worker", "lava_start", "lava_end")))
pairs = side_by_side(b["jobs"])
print(f"{len(pairs)} pair(s) of jobs ran at once on different workers")
sys.exit(1 if diff or not pairs else 0)' "$local_run/results.json" build/runs/latest/results.json
}

# The local run the lab's verdicts must match (the bad days add runs).
e2e_run=$(readlink -f build/runs/latest 2>/dev/null || true)
step bad-days env KGATE_E2E=1 $PY -m pytest -q tests/e2e/test_bad_days.py
step lab-end-to-end lab_end_to_end

bisect_demo() {
	# The README's demo: 12 patches on kernel/patches, the 7th brings
	# back a Linux 5.0 rule; bisect must name it, verified, on x86_64.
	$PY tools/kgate.py bisect --patches tests/e2e/bisect/culprit-7 x86_64 > build/bisect-demo.txt
	rc=$?
	cat build/bisect-demo.txt
	[ "$rc" = 0 ] &&
		grep -q '^First failing patch (7/12): tests/e2e/bisect/culprit-7/0007-' build/bisect-demo.txt
}
step bisect-demo bisect_demo

debug_kernel() {
	$PY tools/kgate.py run --parallel 2 --debug --variant fixed x86_64 || return 1
	$PY tools/kgate.py mutants --mutant 23 --mutant 24 x86_64
}
step debug-kernel debug_kernel

[ "$fail" = 0 ] || echo "check: failed:$failed"
echo "check: $pass passed, $fail failed"
[ "$fail" = 0 ]
