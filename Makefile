# Vitamin-E build. Plain GNU make, gcc (or clang), pthreads.
#   make            build the library, tools and (where cuda.h exists) the shim
#   make run        run ve-sim on its embedded default scenario
#   make test       build and run the tests of this build
#   make check      test + AddressSanitizer/UBSan + ThreadSanitizer builds (what CI runs)
#   make layering   the layer order of src/ over #include edges (tests/layering.sh)
#   make bench      CPU benchmarks, results under bench/results/
#   make install    tools, libve.so, headers, pkg-config file, man pages, the
#                   systemd unit and a config file (docs/operations.md);
#                   PREFIX (/usr/local), DESTDIR, BINDIR, LIBDIR, INCLUDEDIR,
#                   MANDIR, SYSCONFDIR (/etc), UNITDIR
#   make uninstall  removes what install put there (a config file is kept)
# Variables: BUILD=dir (default build), SAN=address,undefined|thread, CC, CUDA_HOME, OPT.

BUILD     ?= build
ifeq ($(origin CC),default)
CC := gcc
endif
OPT       ?= -O2
CUDA_HOME ?= /usr/local/cuda
SAN       ?=

WARN     := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
            -Wno-unused-parameter
CPPFLAGS := -Iinclude -Isrc -D_GNU_SOURCE -MMD -MP
CFLAGS   := -std=c11 $(OPT) -g -fPIC -pthread $(WARN) $(EXTRA_CFLAGS)
LDFLAGS  := -pthread $(EXTRA_LDFLAGS)
LDLIBS   := -lm -ldl -lrt

ifneq ($(SAN),)
CFLAGS  += -fsanitize=$(SAN) -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS += -fsanitize=$(SAN)
endif

HAVE_CUDA_H := $(wildcard $(CUDA_HOME)/include/cuda.h)

# What --version prints (src/util/version.h): the release, the commit (with
# -dirty for uncommitted changes; empty outside git) and the CUDA headers.
VERSION     := $(shell cat VERSION 2>/dev/null || echo 0.0.0)
SOMAJOR     := $(firstword $(subst ., ,$(VERSION)))
GIT_COMMIT  := $(shell c=$$(git rev-parse --short=12 HEAD 2>/dev/null) && \
		 { git diff --quiet HEAD -- 2>/dev/null || c=$$c-dirty; } && echo $$c)
CUDA_HDR_VERSION := $(if $(HAVE_CUDA_H),$(shell sed -n \
		 's/^\#define CUDA_VERSION \([0-9][0-9]*\).*/\1/p' $(CUDA_HOME)/include/cuda.h),0)

# The daemon's own sources (its main and config file) build the ved binary;
# everything else under src/, but for the CUDA parts, is the library.
DAEMON_SRC := $(wildcard src/ved/ved.c src/ved/config.c)
CORE_SRC := $(filter-out $(DAEMON_SRC),$(wildcard src/util/*.c src/core/*.c src/pool/*.c \
                       src/profile/*.c src/policy/*.c src/coord/*.c src/dispatch/*.c src/ipc/*.c \
                       src/ved/*.c src/runtime/*.c src/backend/sim*.c))
CORE_OBJ := $(CORE_SRC:%.c=$(BUILD)/obj/%.o)
LIB      := $(BUILD)/libvecore.a

TOOLS    := $(patsubst tools/%.c,$(BUILD)/%,$(wildcard tools/*.c))
DAEMON   := $(if $(DAEMON_SRC),$(BUILD)/ved)

UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
# The fault-injection suite (tests/fault): harness tests like the unit tests,
# plus programs and a stub driver that need cuda.h (below).
FAULT_SRC := $(wildcard tests/fault/test_*.c)
FAULT_BIN := $(FAULT_SRC:tests/fault/%.c=$(BUILD)/tests/%)
BENCH_SRC := $(wildcard bench/bench_*.c)
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)

# CUDA-dependent parts: the shim (libve.so), the CUDA backend, the fake driver
# and the tests that run programs under the shim against the fake driver.
ifneq ($(HAVE_CUDA_H),)
CUDA_CPPFLAGS := -I$(CUDA_HOME)/include
SHIM_SRC := $(wildcard src/shim/*.c) $(wildcard src/backend/cuda*.c)
SHIM_OBJ := $(SHIM_SRC:%.c=$(BUILD)/obj/%.o)
SHIM_LIB := $(if $(SHIM_SRC),$(BUILD)/libve.so)
FAKE_SRC := $(wildcard tests/fakecuda/*.c)
FAKE_LIB := $(if $(FAKE_SRC),$(BUILD)/fakecuda/libcuda.so.1)
SHIMT_SRC := $(wildcard tests/shim/test_*.c)
SHIMT_BIN := $(SHIMT_SRC:tests/shim/%.c=$(BUILD)/tests/%)
SHIMP_SRC := $(wildcard tests/shim/prog_*.c)
SHIMP_BIN := $(SHIMP_SRC:tests/shim/%.c=$(BUILD)/tests/%)
FAULTP_SRC := $(wildcard tests/fault/prog_*.c)
FAULTP_BIN := $(FAULTP_SRC:tests/fault/%.c=$(BUILD)/tests/%) $(BUILD)/fault/libcuda_old.so
endif

ALL := $(LIB) $(TOOLS) $(DAEMON) $(SHIM_LIB) $(FAKE_LIB)

.PHONY: all run test test-build check bench clean format fuzz layering install uninstall man
# Keep objects of chained rules (tests, tools): no rebuilds, no "rm" noise.
.SECONDARY:
all: $(ALL)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CUDA_CPPFLAGS) $(CFLAGS) -c $< -o $@

# Rewritten on every make, touched only when its text changes: version.o is
# rebuilt when the commit or the release changes, not otherwise.
BUILD_INFO := $(BUILD)/gen/ve_build_info.h
.PHONY: FORCE
FORCE:
$(BUILD_INFO): FORCE
	@mkdir -p $(dir $@)
	@printf '#define VE_BUILD_VERSION "%s"\n#define VE_BUILD_SONAME "libve.so.%s"\n#define VE_BUILD_COMMIT "%s"\n#define VE_BUILD_CUDA_HEADERS %s\n' \
		'$(VERSION)' '$(SOMAJOR)' '$(GIT_COMMIT)' '$(or $(CUDA_HDR_VERSION),0)' >$@.tmp
	@cmp -s $@.tmp $@ 2>/dev/null && rm -f $@.tmp || mv -f $@.tmp $@
$(BUILD)/obj/src/util/version.o: $(BUILD_INFO)
$(BUILD)/obj/src/util/version.o: CPPFLAGS += -I$(BUILD)/gen

$(LIB): $(CORE_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/%: $(BUILD)/obj/tools/%.o $(LIB)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/ved: $(patsubst %.c,$(BUILD)/obj/%.o,$(DAEMON_SRC)) $(LIB)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)

# The soak (tests/soak): its driver and its simulated-GPU client.
SOAK_BIN := $(BUILD)/tests/ve_soak $(BUILD)/tests/soak_client
$(SOAK_BIN): $(BUILD)/tests/%: $(BUILD)/obj/tests/soak/%.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/tests/test_fault_%: $(BUILD)/obj/tests/fault/test_fault_%.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/bench/%: $(BUILD)/obj/bench/%.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)

ifneq ($(HAVE_CUDA_H),)
$(BUILD)/libve.so: $(SHIM_OBJ) $(LIB) src/shim/libve.map
	$(CC) -shared $(LDFLAGS) -Wl,--version-script=src/shim/libve.map -Wl,-soname,libve.so.$(SOMAJOR) \
		$(SHIM_OBJ) $(LIB) -o $@ $(LDLIBS)
	@# A program linked against the build tree's libve.so asks for its soname.
	ln -sf libve.so $(BUILD)/libve.so.$(SOMAJOR)

$(BUILD)/fakecuda/libcuda.so.1: $(FAKE_SRC:%.c=$(BUILD)/obj/%.o)
	@mkdir -p $(dir $@)
	$(CC) -shared $(LDFLAGS) -Wl,-soname,libcuda.so.1 $^ -o $@ $(LDLIBS)
	ln -sf libcuda.so.1 $(BUILD)/fakecuda/libcuda.so

# Programs that run under the shim link against the fake libcuda by soname.
$(BUILD)/tests/prog_%: $(BUILD)/obj/tests/shim/prog_%.o $(FAKE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $< -o $@ -L$(BUILD)/fakecuda -lcuda $(LDLIBS)

# Fault programs link against libve.so itself, found next to the tests folder.
$(BUILD)/tests/prog_fault_%: $(BUILD)/obj/tests/fault/prog_fault_%.o $(SHIM_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $< -o $@ -L$(BUILD) -lve -Wl,-rpath,'$$ORIGIN/..' $(LDLIBS)

# ... except prog_fault_driver, a program of the fake driver like tests/shim's.
$(BUILD)/tests/prog_fault_driver: $(BUILD)/obj/tests/fault/prog_fault_driver.o $(FAKE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $< -o $@ -L$(BUILD)/fakecuda -lcuda $(LDLIBS)

# A driver too old for Vitamin-E (no cuGetProcAddress_v2).
$(BUILD)/fault/libcuda_old.so: tests/fault/olddrv.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O2 -fPIC -shared -Wall -Wextra -Werror $< -o $@

# Harness tests that drive the CUDA backend directly (against the fake driver).
CUDA_BACKEND_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard src/backend/cuda*.c))

$(BUILD)/tests/test_shim_%: $(BUILD)/obj/tests/shim/test_shim_%.o $(CUDA_BACKEND_OBJ) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)

# The shim's handle maps, tested on their own.
$(BUILD)/tests/test_shim_hmap: $(BUILD)/obj/src/shim/hmap.o
endif

# Checks of the tree itself, run once (in the plain build): the layer order
# of the sources (tests/layering.sh), public headers that compile alone
# (tests/public_headers.sh), every VE_* variable listed and documented
# (tests/knobs.sh) and the GPU-only single-file benchmarks compiling
# (tests/bench_build.sh). Each runs through a wrapper in the build's test
# folder, so the runner counts it like any test binary.
TREE_BIN := $(if $(SAN),,$(BUILD)/tests/test_layering $(BUILD)/tests/test_public_headers \
	$(BUILD)/tests/test_install $(BUILD)/tests/test_ved_ops $(BUILD)/tests/test_deploy \
	$(BUILD)/tests/test_cuda_api $(BUILD)/tests/test_knobs $(BUILD)/tests/test_bench_build)

$(BUILD)/tests/test_layering: tests/layering.sh
	@mkdir -p $(dir $@)
	@printf '#!/bin/sh\nexec "%s/tests/layering.sh"\n' "$(CURDIR)" >$@ && chmod +x $@

# Every stream- or graph-taking function of cuda.h classified (tools/cuda_api_table.py).
$(BUILD)/tests/test_cuda_api: tests/cuda_api.sh $(SHIM_LIB)
	@mkdir -p $(dir $@)
	@printf '#!/bin/sh\nexec "%s/tests/cuda_api.sh" "%s" "%s"\n' "$(CURDIR)" "$(CURDIR)" "$(CURDIR)/$(BUILD)" >$@ && chmod +x $@

$(BUILD)/tests/test_knobs: tests/knobs.sh
	@mkdir -p $(dir $@)
	@printf '#!/bin/sh\nexec "%s/tests/knobs.sh" "%s"\n' "$(CURDIR)" "$(CURDIR)" >$@ && chmod +x $@

$(BUILD)/tests/test_bench_build: tests/bench_build.sh
	@mkdir -p $(dir $@)
	@printf '#!/bin/sh\nexec "%s/tests/bench_build.sh" "%s"\n' "$(CURDIR)" "$(CURDIR)" >$@ && chmod +x $@

$(BUILD)/tests/test_public_headers: tests/public_headers.sh
	@mkdir -p $(dir $@)
	@printf '#!/bin/sh\nexec "%s/tests/public_headers.sh" "%s"\n' "$(CURDIR)" "$(CURDIR)" >$@ && chmod +x $@

# Operations (docs/operations.md), against this build: make install into a
# temporary tree, a ved run as a service with metrics, the deploy recipes.
$(BUILD)/tests/test_install: tests/install.sh
	@mkdir -p $(dir $@)
	@printf '#!/bin/sh\nexec "%s/tests/install.sh" "%s" "%s"\n' "$(CURDIR)" "$(CURDIR)" "$(abspath $(BUILD))" >$@ && chmod +x $@

$(BUILD)/tests/test_ved_ops: tests/ved_ops.sh
	@mkdir -p $(dir $@)
	@printf '#!/bin/sh\nexec "%s/tests/ved_ops.sh" "%s" "%s"\n' "$(CURDIR)" "$(CURDIR)" "$(abspath $(BUILD))" >$@ && chmod +x $@

$(BUILD)/tests/test_deploy: tests/deploy_check.sh
	@mkdir -p $(dir $@)
	@printf '#!/bin/sh\nexec "%s/tests/deploy_check.sh" "%s" "%s"\n' "$(CURDIR)" "$(CURDIR)" "$(abspath $(BUILD))" >$@ && chmod +x $@

# An external policy built from include/ alone (no -Isrc), which
# test_policy_ext loads with VE_POLICY=path.so.
$(BUILD)/tests/ext_policy.so: tests/policy/ext_policy.c include/ve/ve_policy.h include/ve/ve_pool.h
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O2 -fPIC -shared -Wall -Wextra -Werror -Iinclude $< -o $@

$(BUILD)/tests/test_policy_ext: | $(BUILD)/tests/ext_policy.so

# Policies that defer forever, per op and in grant mode (the bind deadline's tests).
$(BUILD)/fault/defer_policy.so: tests/fault/defer_policy.c include/ve/ve_policy.h include/ve/ve_pool.h
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O2 -fPIC -shared -Wall -Wextra -Werror -Iinclude $< -o $@

$(BUILD)/fault/nogrant_policy.so: tests/fault/defer_policy.c include/ve/ve_policy.h include/ve/ve_pool.h
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O2 -fPIC -shared -Wall -Wextra -Werror -DWITH_GRANT -Iinclude $< -o $@

FAULT_SO := $(BUILD)/fault/defer_policy.so $(BUILD)/fault/nogrant_policy.so

layering:
	@tests/layering.sh

# ve-sim --oracle end to end (tests/ve_sim.sh), in the plain and the
# address/undefined builds: the oracle's search and bound are C code those
# sanitizers should see too. ve-sim runs on one thread, so ThreadSanitizer has
# nothing to find there (and ran it for three minutes of the CI's time).
VESIM_TEST := $(BUILD)/tests/test_ve_sim
$(VESIM_TEST): tests/ve_sim.sh $(BUILD)/ve-sim
	@mkdir -p $(dir $@)
	@printf '#!/bin/sh\nexec "%s/tests/ve_sim.sh" "%s" "%s"\n' "$(CURDIR)" "$(CURDIR)" "$(abspath $(BUILD))" >$@ && chmod +x $@

TEST_BINS := $(TREE_BIN) $(UNIT_BIN) $(SHIMT_BIN) $(FAULT_BIN) $(if $(filter thread,$(SAN)),,$(VESIM_TEST))

# Everything the tests run, built and not run (a single test by hand: tests/run.sh BIN).
test-build: $(ALL) $(TEST_BINS) $(SHIMP_BIN) $(FAULTP_BIN) $(FAULT_SO) $(SOAK_BIN) $(BENCH_BIN)

test: test-build
	@VE_BUILD=$(BUILD) tests/run.sh --label "$(if $(SAN),[$(SAN)],[plain])" $(TEST_RUN_ARGS) $(TEST_BINS)

# CI entry point: three builds, one closing total line.
check:
	@rm -f $(BUILD)/.totals; mkdir -p $(BUILD)
	@$(MAKE) --no-print-directory test BUILD=$(BUILD) TEST_RUN_ARGS="--totals $(CURDIR)/$(BUILD)/.totals" || true
	@$(MAKE) --no-print-directory test BUILD=$(BUILD)/asan SAN=address,undefined OPT=-O1 \
		TEST_RUN_ARGS="--totals $(CURDIR)/$(BUILD)/.totals" || true
	@VE_TSAN=1 $(MAKE) --no-print-directory test BUILD=$(BUILD)/tsan SAN=thread OPT=-O1 \
		TEST_RUN_ARGS="--totals $(CURDIR)/$(BUILD)/.totals" || true
	@awk '{p+=$$1; f+=$$2; s+=$$3} END {printf "%d passed, %d failed, %d skipped\n", p, f, s; exit (f>0 || NR<3)}' $(BUILD)/.totals

run: $(BUILD)/ve-sim
	$(BUILD)/ve-sim

bench: $(BENCH_BIN)
	@for b in $(BENCH_BIN); do echo "== $$b"; $$b || exit 1; done

# libFuzzer over the IPC record decoder, the ved control messages and ved's
# engine (tests/fuzz/fuzz_records.c; docs/daemon.md, "Fuzzing"). Needs clang with
# libFuzzer (Debian: clang-14 + libclang-rt-14-dev). FUZZ_SECS bounds the run;
# the corpus persists in $(BUILD)/fuzz/corpus. CI runs the same target without
# libFuzzer through tests/unit/test_fuzz_records.c.
FUZZ_CC   ?= clang
FUZZ_SECS ?= 60
fuzz: $(BUILD)/fuzz/fuzz_records
	@mkdir -p $(BUILD)/fuzz/corpus
	$(BUILD)/fuzz/fuzz_records -max_total_time=$(FUZZ_SECS) -max_len=4096 -print_final_stats=1 \
		$(BUILD)/fuzz/corpus

$(BUILD)/fuzz/fuzz_records: tests/fuzz/fuzz_records.c $(CORE_SRC)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -Iinclude -Isrc -D_GNU_SOURCE -std=c11 -O1 -g -pthread \
		-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
		tests/fuzz/fuzz_records.c $(CORE_SRC) -o $@ $(LDLIBS)

# ------------------------------------------------------------------ install
# docs/operations.md, "Install". Paths follow the GNU conventions; DESTDIR
# stages the tree (packaging). ve-run finds libve.so in ../lib (or ../lib64)
# next to its bin/, so an installed tree works wherever it is.
PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
DATADIR    ?= $(PREFIX)/share
MANDIR     ?= $(DATADIR)/man
DOCDIR     ?= $(DATADIR)/doc/vitamin-e
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
SYSCONFDIR ?= /etc
UNITDIR    ?= $(PREFIX)/lib/systemd/system
INSTALL    ?= install
POLICY_ABI := $(shell sed -n 's/^\#define VE_POLICY_ABI_VERSION \([0-9]*\).*/\1/p' include/ve/ve_policy.h)

BINS      := $(TOOLS) $(DAEMON)
MAN_PAGES := $(patsubst $(BUILD)/%,$(BUILD)/man/%.1,$(BINS))
man_summary = $(or $(word 2,$(subst |, ,$(filter $(1)|%,$(MAN_SUMMARIES)))),a Vitamin-E tool)
MAN_SUMMARIES := ve-run|run_a_CUDA_program_under_Vitamin-E ved|the_Vitamin-E_daemon_for_one_GPU \
		 ve-ctl|control_a_running_ved ve-sim|replay_a_workload_on_the_simulated_GPU \
		 ve-profile|measure_scaling_profiles_of_a_program

$(BUILD)/man/%.1: $(BUILD)/% tools/mkman.sh
	@mkdir -p $(dir $@)
	tools/mkman.sh $< $* "$(subst _, ,$(call man_summary,$*))" >$@.tmp && mv -f $@.tmp $@

man: $(MAN_PAGES)

install: all man
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR)/ve \
		$(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(DOCDIR) \
		$(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSCONFDIR)/vitamin-e
	$(INSTALL) -m 0755 $(BINS) $(DESTDIR)$(BINDIR)/
ifneq ($(SHIM_LIB),)
	$(INSTALL) -m 0755 $(SHIM_LIB) $(DESTDIR)$(LIBDIR)/libve.so.$(VERSION)
	ln -sf libve.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libve.so.$(SOMAJOR)
	ln -sf libve.so.$(SOMAJOR) $(DESTDIR)$(LIBDIR)/libve.so
else
	@echo "install: no cuda.h at $(CUDA_HOME): libve.so was not built and is not installed" >&2
endif
	$(INSTALL) -m 0644 include/ve/*.h $(DESTDIR)$(INCLUDEDIR)/ve/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' \
		-e 's|@VERSION@|$(VERSION)|' -e 's|@POLICY_ABI@|$(POLICY_ABI)|' \
		deploy/pkgconfig/vitamin-e.pc.in >$(DESTDIR)$(PKGCONFIGDIR)/vitamin-e.pc
	$(INSTALL) -m 0644 $(MAN_PAGES) $(DESTDIR)$(MANDIR)/man1/
	$(INSTALL) -m 0644 README.md docs/*.md $(DESTDIR)$(DOCDIR)/
	for u in deploy/systemd/*.service; do \
		sed -e 's|/usr/local/bin/|$(BINDIR)/|g' -e 's|/etc/vitamin-e/|$(SYSCONFDIR)/vitamin-e/|g' \
			"$$u" >$(DESTDIR)$(UNITDIR)/$$(basename "$$u") || exit 1; \
	done
	@# A configuration already there is the administrator's: never overwritten.
	@if [ -e $(DESTDIR)$(SYSCONFDIR)/vitamin-e/ved.conf ]; then \
		echo "install: kept $(DESTDIR)$(SYSCONFDIR)/vitamin-e/ved.conf (the shipped one is deploy/ved.conf)"; \
	else $(INSTALL) -m 0644 deploy/ved.conf $(DESTDIR)$(SYSCONFDIR)/vitamin-e/ved.conf; fi

uninstall:
	rm -f $(addprefix $(DESTDIR)$(BINDIR)/,$(notdir $(BINS)))
	rm -f $(DESTDIR)$(LIBDIR)/libve.so $(DESTDIR)$(LIBDIR)/libve.so.$(SOMAJOR) \
		$(DESTDIR)$(LIBDIR)/libve.so.$(VERSION)
	rm -f $(addprefix $(DESTDIR)$(INCLUDEDIR)/ve/,$(notdir $(wildcard include/ve/*.h)))
	-rmdir $(DESTDIR)$(INCLUDEDIR)/ve 2>/dev/null
	rm -f $(DESTDIR)$(PKGCONFIGDIR)/vitamin-e.pc
	rm -f $(addprefix $(DESTDIR)$(MANDIR)/man1/,$(notdir $(MAN_PAGES)))
	rm -rf $(DESTDIR)$(DOCDIR)
	rm -f $(addprefix $(DESTDIR)$(UNITDIR)/,$(notdir $(wildcard deploy/systemd/*.service)))
	@echo "uninstall: $(DESTDIR)$(SYSCONFDIR)/vitamin-e/ved.conf is kept (remove it by hand)"

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
