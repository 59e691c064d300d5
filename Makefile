# kgate: cross-architecture kernel regression gate.
# 'make help' lists the targets. Everything built goes under build/.

PY     := /usr/bin/python3
KGATE  := $(PY) tools/kgate.py
# Targets to run (see 'make list'); empty means all of them.
ARCH   ?=
# Jobs at once for 'make run'.
PARALLEL ?= 2

.PHONY: help deps list source kernel rootfs jobs run matrix check checkpatch clean distclean

help:
	@echo "make deps        install every Debian package used (root; idempotent)"
	@echo "make run         build what is missing, run fixed + known-bad jobs with lava-run,"
	@echo "                 print the matrix (ARCH=x86_64 for one target; exit 0 = gate passed)"
	@echo "make matrix      print the matrix of the latest run"
	@echo "make list        print the targets"
	@echo "make kernel      build the kernels of ARCH (default x86_64), both variants"
	@echo "make rootfs      build the initramfs of ARCH (default x86_64)"
	@echo "make jobs        render and validate the LAVA jobs of ARCH (default x86_64)"
	@echo "make check       the project's tests (unit, native, checkpatch, x86_64 end to end)"
	@echo "make checkpatch  scripts/checkpatch.pl on the kernel patches and the C tests"
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

run:
	$(KGATE) run --parallel $(PARALLEL) $(ARCH)

matrix:
	@$(KGATE) matrix

check:
	sh tests/check.sh

checkpatch:
	sh tests/checkpatch.sh

clean:
	rm -rf build/kernels build/rootfs build/busybox build/tests build/native build/runs build/logs
	rm -f jobs/*.yaml
	rm -rf jobs/devices

distclean: clean
	rm -rf build
