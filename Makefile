# The two commands of the README, and a few helpers. Everything goes through meson.
BUILD      ?= build
ASAN_BUILD ?= build-asan
INEC       := $(BUILD)/cli/inec

.PHONY: all deps build test test-fast run bench clean format

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
	@scripts/test-summary.sh $(BUILD) $(ASAN_BUILD)

# One build, no sanitizers: the quick loop while developing.
test-fast: build
	meson test -C $(BUILD) --print-errorlogs

run: build
	$(INEC) server

bench: build
	$(INEC) bench codec

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)

format:
	@git ls-files '*.c' '*.h' | xargs clang-format -i
