# reload-agent: one GNU Makefile. `make` builds build/reload-agent.
# Sources are discovered: every .c in a top-level source folder (cmd/, run/,
# webhook/, inject/, actions/, kube/, net/, config/, watch/, hash/,
# yamldoc/, base/: SRC_DIRS; see
# docs/architecture.md) goes into build/libreload.a except cmd/main.c;
# each tests/test_*.c is one cmocka binary linked against that archive.

VERSION    ?= 0.1.0
GIT_COMMIT ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
PREFIX     ?= /usr/local
DESTDIR    ?=
BUILD      ?= build

CC       ?= cc

# ---- libraries and the link (issue 11, docs/lean.md) ----
# libcurl (HTTP/HTTPS, OpenSSL) and cJSON are built from Debian's source
# packages, at the installed versions, by scripts/build-curl.sh and
# scripts/build-cjson.sh, cached in build/<name>-<version>/. OpenSSL,
# libuv and http-parser are Debian's static archives. build/reload-agent is
# linked fully static (-static: glibc too; see docs/lean.md for
# getaddrinfo/NSS), not position-independent (STATIC=pie: -static-pie, with
# ASLR for the binary, at about 0.8 MiB more resident memory), and never in
# sanitizer builds (STATIC empty), which cannot be static. Tests, tools and
# fuzz targets link the same archives dynamically against glibc. libyaml
# (`inject` reads manifests with it) is Debian's static archive too.
DEPS_DIR   ?= build
CURL_VERSION := $(shell sh scripts/build-curl.sh --version 2>/dev/null)
CURL_DIR   := $(DEPS_DIR)/curl-$(CURL_VERSION)
CJSON_VERSION := $(shell sh scripts/build-cjson.sh --version 2>/dev/null)
CJSON_DIR  := $(DEPS_DIR)/cjson-$(CJSON_VERSION)
DEPS_STAMPS := $(CURL_DIR)/stamp $(CJSON_DIR)/stamp
PKG_CFLAGS := -I$(CURL_DIR)/include -I$(CJSON_DIR)/include -I$(CJSON_DIR)/include/cjson
PKG_LIBS   := $(CURL_DIR)/lib/libcurl.a $(CJSON_DIR)/lib/libcjson.a \
              -l:libssl.a -l:libcrypto.a -l:libuv_a.a -l:libhttp_parser.a -l:libyaml.a
STATIC     ?= $(if $(findstring -fsanitize,$(CFLAGS) $(LDFLAGS)),,1)
# The static link uses lld to lay out the functions the agent runs together
# (scripts/link-order.txt, made by scripts/link-order.py): far fewer of the
# binary's pages become resident (docs/lean.md, "Memory").
LINK_ORDER := scripts/link-order.txt
STATIC_LDFLAGS := $(if $(filter pie,$(STATIC)),-static-pie,-static) -fuse-ld=lld -Wl,--symbol-ordering-file=$(LINK_ORDER) \
                  -Wl,--no-warn-symbol-ordering
AGENT_LDFLAGS := -Wl,--gc-sections $(if $(STATIC),$(STATIC_LDFLAGS))
CMOCKA_LIBS := $(shell pkg-config --libs cmocka 2>/dev/null)

# CFLAGS/LDFLAGS are the user's (make asan sets them); the project's own
# flags live in RA_CFLAGS so a command-line CFLAGS cannot drop them.
CFLAGS   ?= -O2 -g
RA_CFLAGS := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -I. $(PKG_CFLAGS) \
            -ffunction-sections -fdata-sections \
            -DRA_VERSION='"$(VERSION)"' -DRA_GIT_COMMIT='"$(GIT_COMMIT)"'
LDLIBS   += $(PKG_LIBS) -lm -ldl -lpthread -lrt

SRC_DIRS := cmd run webhook sync inject actions kube net config watch hash yamldoc base
LIB_SRC  := $(filter-out cmd/main.c,$(wildcard $(SRC_DIRS:%=%/*.c)))
LIB_HDR  := $(wildcard $(SRC_DIRS:%=%/*.h))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
TEST_SRC := $(wildcard tests/test_*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
TOOL_SRC := $(wildcard tests/tools/*.c)
TOOL_BIN := $(TOOL_SRC:tests/tools/%.c=$(BUILD)/tools/%)
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/fuzz/%)
FUZZ_SECONDS ?= 240

.PHONY: static-deps all test links unit integration fuzz fuzz-replay asan install deps clean bench demo image-test fmt fmt-check levels fnlen e2e loadtest cluster-up cluster-down chart chart-tools chart-golden plugins bench-cluster

all: $(BUILD)/reload-agent $(TOOL_BIN)

$(BUILD)/obj/%.o: %.c $(LIB_HDR) | $(DEPS_STAMPS)
	@mkdir -p $(dir $@)
	$(CC) $(RA_CFLAGS) $(CFLAGS) -c -o $@ $<

$(BUILD)/libreload.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/reload-agent: $(BUILD)/obj/cmd/main.o $(BUILD)/libreload.a $(DEPS_STAMPS) $(LINK_ORDER)
	$(CC) $(RA_CFLAGS) $(CFLAGS) $(LDFLAGS) $(AGENT_LDFLAGS) -o $@ $(filter %.o %.a,$^) $(LDLIBS)

# The static libraries built from Debian source packages (see above).
$(CURL_DIR)/stamp: scripts/build-curl.sh scripts/debsrc.sh
	sh scripts/build-curl.sh $(CURL_DIR)
$(CJSON_DIR)/stamp: scripts/build-cjson.sh scripts/debsrc.sh
	sh scripts/build-cjson.sh $(CJSON_DIR)
static-deps: $(DEPS_STAMPS)

# The out-of-memory sweeps (tests/oomwrap.h) count and fail libc's
# allocations, not only cJSON's: their binaries are linked with the
# allocators wrapped, and the config parser's entry points (which abort on
# OOM by policy, docs/errors.md) wrapped to pause the counter.
OOM_WRAP  := -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup,--wrap=vasprintf \
             -Wl,--wrap=cfg_parse_args,--wrap=cfg_layer_from_annotations,--wrap=cfg_build
OOM_TESTS := test_transform test_admission test_buf
$(OOM_TESTS:%=$(BUILD)/tests/%): TEST_LDFLAGS := $(OOM_WRAP)

$(BUILD)/tests/%: tests/%.c $(BUILD)/libreload.a $(wildcard tests/*.h) $(DEPS_STAMPS)
	@mkdir -p $(dir $@)
	$(CC) $(RA_CFLAGS) $(CFLAGS) $(LDFLAGS) $(TEST_LDFLAGS) -o $@ $< $(BUILD)/libreload.a $(LDLIBS) $(CMOCKA_LIBS)

$(BUILD)/tools/%: tests/tools/%.c $(BUILD)/libreload.a $(DEPS_STAMPS)
	@mkdir -p $(dir $@)
	$(CC) $(RA_CFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libreload.a $(LDLIBS)

# libFuzzer targets: clang only. The library sources are compiled once with
# coverage instrumentation (-fsanitize=fuzzer-no-link) into their own
# archive, and each harness is linked against it with -fsanitize=fuzzer
# (which brings libFuzzer's main): one compile of the library for all the
# targets instead of one per target.
FUZZ_SAN    := -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_CFLAGS := -std=c11 -D_GNU_SOURCE -g -O1 -I. $(PKG_CFLAGS) $(FUZZ_SAN) \
               -DRA_VERSION='"$(VERSION)"' -DRA_GIT_COMMIT='"$(GIT_COMMIT)"'
FUZZ_OBJ := $(LIB_SRC:%.c=$(BUILD)/fuzzobj/%.o)
$(BUILD)/fuzzobj/%.o: %.c $(LIB_HDR) | $(DEPS_STAMPS)
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c -o $@ $<
$(BUILD)/fuzzobj/libfuzzreload.a: $(FUZZ_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(BUILD)/fuzz/%: tests/fuzz/%.c $(BUILD)/fuzzobj/libfuzzreload.a | $(DEPS_STAMPS)
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(BUILD)/fuzzobj/libfuzzreload.a $(LDLIBS)

deps:
	@sh tests/deps.sh
	@$(MAKE) --no-print-directory static-deps

unit: $(TEST_BIN)
	@sh tests/run_unit.sh $(TEST_BIN)

integration: $(BUILD)/reload-agent $(TOOL_BIN)
	python3 -m tests.integration.run --binary $(BUILD)/reload-agent --tools $(BUILD)/tools

fuzz-replay: $(FUZZ_BIN)
	@sh tests/fuzz/replay.sh $(BUILD)/fuzz

fuzz: $(FUZZ_BIN)
	@sh tests/fuzz/run.sh $(BUILD)/fuzz $(FUZZ_SECONDS)

test: deps chart-tools
	$(MAKE) all unit fuzz-replay integration chart plugins links

# Every relative link and #anchor of every Markdown file resolves
# (tests/linkcheck.py, GitHub's anchor rules; it checks itself first).
links:
	@python3 tests/linkcheck.py --self-test
	@python3 tests/linkcheck.py

# The Helm chart (charts/reload-agent): tests/chart/check.py runs helm lint
# --strict, compares `helm template` with its golden files and with
# `kustomize build` of manifests/webhook/ (no drift), offline. helm and
# kustomize (the version the cluster's kubectl embeds) are built once from
# the Go module proxy by tests/cluster/build.sh, cached in
# /var/cache/reload-agent/cluster (RA_CLUSTER_CACHE); Go 1.26 must be
# installed. chart-golden rewrites the golden files: review the diff.
chart-tools:
	@bash tests/cluster/build.sh helm
	@bash tests/cluster/build.sh kustomize
chart: chart-tools $(BUILD)/reload-agent
	python3 -m tests.chart.check --binary $(BUILD)/reload-agent
# The render plugins (plugins/: Helm post-renderer, kustomize KRM function)
# with the real helm and kustomize (tests/plugins/check.py).
plugins: chart-tools $(BUILD)/reload-agent
	python3 -m tests.plugins.check --binary $(BUILD)/reload-agent
chart-golden: chart-tools
	python3 -m tests.chart.check --update

asan: deps
	$(MAKE) BUILD=build-asan CC=clang \
	  CFLAGS="-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" \
	  LDFLAGS="-fsanitize=address,undefined" all unit integration

demo: deps
	$(MAKE) all
	sh scripts/demo.sh

# The local benches (tests/bench/): no cluster, minutes; each prints its
# figures against a baseline measured in the same run.
bench: deps
	$(MAKE) all
	python3 -m tests.bench.bench --binary $(BUILD)/reload-agent --tools $(BUILD)/tools
	python3 -m tests.bench.swapbench --binary $(BUILD)/reload-agent --tools $(BUILD)/tools
	python3 -m tests.bench.notifycost --binary $(BUILD)/reload-agent --tools $(BUILD)/tools
	python3 -m tests.bench.fleet --binary $(BUILD)/reload-agent --tools $(BUILD)/tools --agents 100
	python3 -m tests.bench.hashbench --binary $(BUILD)/reload-agent
	python3 -m tests.bench.stall --binary $(BUILD)/reload-agent
	python3 -m tests.bench.injectbench --binary $(BUILD)/reload-agent
	python3 -m tests.bench.syncbench --binary $(BUILD)/reload-agent
	python3 -m tests.bench.webhookbench --binary $(BUILD)/reload-agent
	python3 -m tests.bench.webhookworst --binary $(BUILD)/reload-agent
	python3 -m tests.bench.memory --binary $(BUILD)/reload-agent --tools $(BUILD)/tools

# The benches on the real cluster (tests/loadtest/, beside the load suite):
# root and the cluster's lock; over an hour in all (propagation 10 edits,
# fast sync 20 edits, about 30 minutes, the sync service 10 edits against 4
# of the kubelet's own, about 8 minutes, restart storms 2 trials, safe reload
# about 10 minutes). Each
# takes its own flags when run alone: python3 -m tests.loadtest.fastsync -h.
bench-cluster: deps
	$(MAKE) all
	python3 -m tests.loadtest.propagation --binary $(BUILD)/reload-agent
	python3 -m tests.loadtest.fastsync --binary $(BUILD)/reload-agent
	python3 -m tests.loadtest.syncservice --binary $(BUILD)/reload-agent
	python3 -m tests.loadtest.restartstorm --binary $(BUILD)/reload-agent
	python3 -m tests.loadtest.safereload --binary $(BUILD)/reload-agent

image-test: deps
	$(MAKE) all
	sh scripts/image-test.sh

# The real cluster (tests/cluster/, docs/kubernetes.md "The real cluster"): up.sh builds
# Kubernetes, etcd and containerd from the Go module proxy once (cached in
# /var/cache/reload-agent/cluster) and starts a single node; e2e runs
# tests/e2e/ on it, then stops it (E2E_KEEP=1 leaves it running, and the
# namespaces of failed tests). E2E_ARGS passes -k, -j to the runner.
cluster-up:
	bash tests/cluster/up.sh
cluster-down:
	bash tests/cluster/down.sh

e2e: deps
	$(MAKE) all
	@rc=0; python3 -m tests.e2e.run --binary $(BUILD)/reload-agent $(if $(E2E_KEEP),--keep) $(E2E_ARGS) || rc=$$?; \
	  if [ -z "$(E2E_KEEP)" ]; then bash tests/cluster/down.sh; fi; exit $$rc

# The load suite on the real cluster (tests/loadtest/, docs/performance.md
# "Under load, with the peers"): every scenario one after another, the peers measured beside us,
# results.md and results.json under build/loadtest/<UTC time>/. OLD=<git ref>
# adds the A/B runs against that build; LOADTEST_ARGS passes -k. The cluster
# is left running (make cluster-down stops it).
loadtest: deps
	$(MAKE) all
	python3 -m tests.loadtest.run --binary $(BUILD)/reload-agent $(if $(OLD),--old $(OLD)) $(LOADTEST_ARGS)

# The house format (.clang-format). fmt rewrites; fmt-check (CI) lists the
# files that differ and fails.
FMT_SRC := $(LIB_SRC) cmd/main.c $(LIB_HDR) $(TEST_SRC) $(wildcard tests/*.h) $(TOOL_SRC) $(FUZZ_SRC)
fmt:
	clang-format -i $(FMT_SRC)

fmt-check:
	@bad=$$(for f in $(FMT_SRC); do clang-format "$$f" | cmp -s - "$$f" || echo "$$f"; done); \
	if [ -n "$$bad" ]; then echo "not formatted (run make fmt):"; echo "$$bad"; exit 1; fi; \
	echo "fmt-check: $(words $(FMT_SRC)) files formatted"

# The folder levels (docs/architecture.md, "Folders and levels"): every
# #include "x/..." of the source folders against the table, which the
# script parses. CI runs it beside fmt-check.
levels:
	@sh scripts/levels.sh docs/architecture.md $(SRC_DIRS)

# No function of the source folders is 80 lines or longer (STYLE item 1,
# docs/architecture.md): scripts/fnlen.sh measures them as ctags does.
fnlen:
	@sh scripts/fnlen.sh $(SRC_DIRS)

install: $(BUILD)/reload-agent
	install -D -m 0755 $(BUILD)/reload-agent $(DESTDIR)$(PREFIX)/bin/reload-agent

clean:
	rm -rf build build-asan
