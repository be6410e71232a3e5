# The two commands of the README, and a few helpers. Everything goes through meson.
BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 5
INEC       := $(BUILD)/cli/inec

.PHONY: all deps build test test-fast fuzz chaos run bench clean format

all: build

deps:
	@scripts/deps.sh

build: deps
	@[ -f $(BUILD)/build.ninja ] || meson setup $(BUILD) --buildtype=debugoptimized
	@meson compile -C $(BUILD)

# The whole suite twice: an optimised build, then ASan+UBSan (UB aborts the test).
test: build
	meson test -C $(BUILD) --print-errorlogs
	@[ -f $(ASAN_BUILD)/build.ninja ] || meson setup $(ASAN_BUILD) --buildtype=debug \
		-Db_sanitize=address,undefined -Db_lundef=false \
		-Dc_args=-fno-sanitize-recover=all
	@meson compile -C $(ASAN_BUILD)
	meson test -C $(ASAN_BUILD) --print-errorlogs
	@if command -v clang >/dev/null; then $(MAKE) --no-print-directory fuzz; fi
	@scripts/test-summary.sh $(BUILD) $(ASAN_BUILD) $(wildcard $(FUZZ_BUILD))

# One build, no sanitizers: the quick loop while developing.
test-fast: build
	meson test -C $(BUILD) --print-errorlogs

# Each libFuzzer target of fuzz/ for FUZZ_SECONDS (clang; ASan+UBSan): part of
# `make test`; `make fuzz FUZZ_SECONDS=3600` for a long run. Warnings are gcc's
# job (-Werror in the builds above); here clang only has to build the targets.
fuzz: deps
	@[ -f $(FUZZ_BUILD)/build.ninja ] || CC=clang meson setup $(FUZZ_BUILD) \
		--buildtype=debugoptimized -Dfuzz=true -Db_sanitize=address,undefined \
		-Db_lundef=false -Dc_args=-fno-sanitize-recover=all -Dwerror=false
	@meson compile -C $(FUZZ_BUILD)
	FUZZ_SECONDS=$(FUZZ_SECONDS) meson test -C $(FUZZ_BUILD) --suite fuzz --print-errorlogs

# The chaos harness (tests/chaos/chaos.py) for SECONDS, seeded (SEED=N to replay
# a schedule; random otherwise, printed), report in chaos-report.json; ASAN=1 runs
# the ASan+UBSan build. CHAOS_ARGS passes more (--inject-fault, --strict, ...).
SECONDS ?= 60
chaos: build
	@if [ -n "$(ASAN)" ]; then \
		[ -f $(ASAN_BUILD)/build.ninja ] || meson setup $(ASAN_BUILD) --buildtype=debug \
			-Db_sanitize=address,undefined -Db_lundef=false \
			-Dc_args=-fno-sanitize-recover=all; \
		meson compile -C $(ASAN_BUILD); fi
	python3 tests/chaos/chaos.py $(if $(ASAN),$(ASAN_BUILD),$(BUILD))/cli/inec \
		--seconds $(SECONDS) $(if $(SEED),--seed $(SEED)) --report chaos-report.json $(CHAOS_ARGS)

run: build
	$(INEC) server

bench: build
	$(INEC) bench codec

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)

format:
	@git ls-files '*.c' '*.h' | xargs clang-format -i
