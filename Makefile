# kgate: cross-architecture kernel regression gate.
# 'make help' lists the targets. Everything built goes under build/.

PY     := /usr/bin/python3
KGATE  := $(PY) tools/kgate.py
# Targets or groups to run (see 'make list'); empty means the default group
# (the eight of the design card), 'all' all twelve.
ARCH   ?=
# Jobs at once for 'make run'.
PARALLEL ?= 2
# 'make run' and 'make submit': run each job this many times (runs that
# disagree make it flaky, exit 6).
REPEAT ?= 1
# 'make run', 'make soak' and 'make submit' with DEBUG=1: also the debug
# kernel (KASAN, lockdep, ...) of the kernel under test, where the
# target has one.
DEBUG ?=
DEBUG_FLAG := $(if $(filter-out 0,$(DEBUG)),--debug)
# The LAVA lab: lavacli identity, the URL its workers fetch artifacts
# from (what 'make serve' serves), and the lab's device type.
LAB      ?= default
BASE_URL ?=
DEVICE_TYPE ?= qemu
# 'make mutants': only these mutants (names or numbers, e.g. 04 17); empty: all.
MUTANT ?=
# 'make mutants': only these suites of suites/gate.yaml (e.g. fuzz); empty: all.
SUITE ?=
# 'make fuzz': the first seed and the sequences per family (N, default 1000).
SEED ?=
# 'make bisect': the candidate series (a folder of patches) to bisect,
# or a git tree and the ends of its commits to bisect.
PATCHES ?=
SOURCE ?=
GOOD ?=
BAD ?= HEAD
# 'make compare': baseline and new run (folders or results.json).
BASE ?=
NEW ?=
RUN ?=
# 'make lab-up': lava-workers to start, each with devices of its own.
WORKERS ?= 1
BIND ?= 127.0.0.1
PORT ?= 8011

.PHONY: help deps list source kernel rootfs jobs golden run matrix compare baseline soak mutants fuzz bisect serve submit collect lab-up lab-down check test checkpatch clean distclean

help:
	@echo "make deps        install every Debian package used (root; idempotent)"
	@echo "make run         build what is missing, run fixed + known-bad jobs with lava-run,"
	@echo "                 print the matrix of the default eight targets (ARCH=x86_64 for one,"
	@echo "                 ARCH=all for all twelve, ARCH=extra for the other four; exit 0 = gate passed;"
	@echo "                 REPEAT=3 runs each job 3 times: runs that disagree are flaky, exit 6)"
	@echo "                 DEBUG=1 also runs the debug kernel (KASAN, lockdep, ...) of the fixed"
	@echo "                 one, on x86_64, arm64, arm and ppc (the targets that have one)"
	@echo "make matrix      print the matrix of the latest run"
	@echo "make baseline    save the latest run as the baseline (RUN= another run folder)"
	@echo "make compare     compare the latest run (NEW=) with the baseline (BASE=); exit 1 if worse"
	@echo "make soak        run the matrix N=3 times, list any result that changed (exit 1 if one did)"
	@echo "make mutants     the mutation check: each kernel/mutants patch as the candidate kernel"
	@echo "                 (ARCH=, default x86_64; MUTANT=04 17 for some; SUITE=fuzz for one"
	@echo "                 suite alone); exit 1 if one passed"
	@echo "make fuzz        the random sequences alone on the fixed kernel (ARCH=, SEED=1,"
	@echo "                 N=1000 per family); exit 0 = every sequence agreed"
	@echo "make bisect      name the patch of a candidate series after which the gate fails"
	@echo "                 (PATCHES=DIR, or SOURCE=git tree GOOD=rev BAD=rev; ARCH=;"
	@echo "                 exit 0 = culprit named and verified)"
	@echo "make serve       serve the artifacts over http for a LAVA lab (BIND=, PORT=)"
	@echo "make submit      submit the jobs to a LAVA lab and collect the results"
	@echo "                 (LAB=lavacli identity, BASE_URL=artifact URL, DEVICE_TYPE=, ARCH=)"
	@echo "make collect     collect the latest submitted run again"
	@echo "make lab-up      start a real LAVA server + worker on this machine (WORKERS=2: two"
	@echo "                 workers, each with its own devices); lab-down stops it"
	@echo "make list        print the targets"
	@echo "make kernel      build the kernels of ARCH (default x86_64), both variants"
	@echo "make rootfs      build the initramfs of ARCH (default x86_64)"
	@echo "make jobs        render and validate the LAVA jobs of ARCH (default x86_64)"
	@echo "make golden      render every job and device again into tests/data/golden (a change"
	@echo "                 meant: review and commit the diff; make check compares them)"
	@echo "make check       the project's tests (unit, native, checkpatch, end to end, LAVA lab)"
	@echo "make test        the tooling's unit and property tests alone (about a minute)"
	@echo "make checkpatch  scripts/checkpatch.pl on the kernel patches and the C tests"
	@echo "make selftest-patch  write the backlog test as a patch for the kernel's selftests/net"
	@echo "                 (build/selftest/0001-selftests-net-add-tcp-backlog-coalescing-test.patch)"
	@echo "make selftest-check  apply that patch to a copy of the kernel tree, build it with"
	@echo "                 net/Makefile, run it (root), checkpatch --strict it"
	@echo "make clean       remove build outputs and runs, keep the kernel source and ccache"
	@echo "make distclean   remove all of build/"

deps:
	sh tools/deps.sh

list:
	@$(KGATE) list

source:
	@$(KGATE) source

kernel:
	$(KGATE) kernel $(or $(ARCH),x86_64)

rootfs:
	$(KGATE) rootfs $(or $(ARCH),x86_64)

jobs:
	$(KGATE) jobs $(or $(ARCH),x86_64)

golden:
	$(KGATE) golden --update

run:
	$(KGATE) run --parallel $(PARALLEL) --repeat $(REPEAT) $(DEBUG_FLAG) $(ARCH)

matrix:
	@$(KGATE) matrix

baseline:
	@$(KGATE) baseline $(RUN)

compare:
	@$(KGATE) compare $(BASE) $(NEW)

soak:
	$(KGATE) soak --parallel $(PARALLEL) $(DEBUG_FLAG) $(or $(N),3) $(ARCH)

mutants:
	$(KGATE) mutants --parallel $(PARALLEL) $(foreach m,$(MUTANT),--mutant $(m)) $(foreach s,$(SUITE),--suite $(s)) $(ARCH)

# The fuzz suite alone on the fixed kernel: N sequences per family from
# SEED; the test action may take N/150 + 3 minutes (arm under TCG plays
# about 5 sequences a second).
fuzz:
	$(KGATE) run --suite fuzz --variant fixed --parallel $(PARALLEL) \
		--args "backlog_fuzz=--seed $(or $(SEED),1) --count $(or $(N),1000) --budget $$(( ($(or $(N),1000) / 150 + 1) * 60 ))" \
		--test-timeout $$(( $(or $(N),1000) / 150 + 3 )) $(ARCH)

bisect:
ifneq ($(SOURCE),)
	$(KGATE) bisect --parallel $(PARALLEL) --source $(SOURCE) --good $(GOOD) --bad $(BAD) $(ARCH)
else
	@test -n "$(PATCHES)" || { echo "make bisect PATCHES=DIR [ARCH=...], or SOURCE=TREE GOOD=REV BAD=REV"; exit 2; }
	$(KGATE) bisect --parallel $(PARALLEL) --patches $(PATCHES) $(ARCH)
endif

serve:
	$(KGATE) serve --bind $(BIND) --port $(PORT) $(ARCH)

submit:
	@test -n "$(BASE_URL)" || { echo "make submit: set BASE_URL= (where the lab fetches build/serve)"; exit 2; }
	$(KGATE) submit -i $(LAB) --base-url $(BASE_URL) --device-type $(DEVICE_TYPE) --repeat $(REPEAT) $(DEBUG_FLAG) $(ARCH)

# The identity recorded at submit, unless LAB= is given on purpose.
collect:
	$(KGATE) collect $(if $(filter command line environment,$(origin LAB)),-i $(LAB))

lab-up:
	sh tools/lab-local.sh up $(WORKERS)

lab-down:
	sh tools/lab-local.sh down

check:
	sh tests/e2e/check.sh

# The tooling's unit and property tests alone (fewer examples, no native
# build of the guest programs, no kernel source, no QEMU): about a minute.
test:
	KGATE_HYPOTHESIS=quick KGATE_SKIP_NATIVE=1 $(PY) -m pytest -q tests/unit/

checkpatch:
	sh tests/e2e/checkpatch.sh

.PHONY: selftest-patch selftest-check

selftest-patch:
	@$(KGATE) selftest-patch

selftest-check:
	$(KGATE) selftest-check

clean:
	rm -rf build/kernels build/rootfs build/busybox build/tests build/native build/runs build/logs build/serve
	rm -f jobs/*.yaml
	rm -rf jobs/devices jobs/lab

distclean: clean
	rm -rf build
