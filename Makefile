# Vitamin-E build. Plain GNU make, gcc (or clang), pthreads.
#   make            build the library, tools and (where cuda.h exists) the shim
#   make run        run ve-sim on its embedded default scenario
#   make test       build and run the tests of this build
#   make check      test + AddressSanitizer/UBSan + ThreadSanitizer builds (what CI runs)
#   make layering   the layer order of src/ over #include edges (tests/layering.sh)
#   make bench      CPU benchmarks, results under bench/results/
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

.PHONY: all run test check bench clean format fuzz layering
# Keep objects of chained rules (tests, tools): no rebuilds, no "rm" noise.
.SECONDARY:
all: $(ALL)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CUDA_CPPFLAGS) $(CFLAGS) -c $< -o $@

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
	$(CC) -shared $(LDFLAGS) -Wl,--version-script=src/shim/libve.map -Wl,-soname,libve.so \
		$(SHIM_OBJ) $(LIB) -o $@ $(LDLIBS)

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
endif

# Checks of the tree itself, run once (in the plain build): the layer order
# of the sources (tests/layering.sh), public headers that compile alone
# (tests/public_headers.sh) and every VE_* variable listed and documented
# (tests/knobs.sh). Each runs through a wrapper in the build's test
# folder, so the runner counts it like any test binary.
TREE_BIN := $(if $(SAN),,$(BUILD)/tests/test_layering $(BUILD)/tests/test_public_headers \
	$(BUILD)/tests/test_knobs)

$(BUILD)/tests/test_layering: tests/layering.sh
	@mkdir -p $(dir $@)
	@printf '#!/bin/sh\nexec "%s/tests/layering.sh"\n' "$(CURDIR)" >$@ && chmod +x $@

$(BUILD)/tests/test_knobs: tests/knobs.sh
	@mkdir -p $(dir $@)
	@printf '#!/bin/sh\nexec "%s/tests/knobs.sh" "%s"\n' "$(CURDIR)" "$(CURDIR)" >$@ && chmod +x $@

$(BUILD)/tests/test_public_headers: tests/public_headers.sh
	@mkdir -p $(dir $@)
	@printf '#!/bin/sh\nexec "%s/tests/public_headers.sh" "%s"\n' "$(CURDIR)" "$(CURDIR)" >$@ && chmod +x $@

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

TEST_BINS := $(TREE_BIN) $(UNIT_BIN) $(SHIMT_BIN) $(FAULT_BIN)

test: $(ALL) $(TEST_BINS) $(SHIMP_BIN) $(FAULTP_BIN) $(FAULT_SO) $(SOAK_BIN) $(BENCH_BIN)
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

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
