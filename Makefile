# lssar - build, test, install.  `make` builds build/liblssar.{a,so} and build/lssar.
# `make test` installs missing system packages (scripts/deps.sh), builds and runs the suite.
# `make demo` runs the main job (see README.md).

CC      ?= cc
PREFIX  ?= /usr/local
BUILD   := build
PKGS    := libcjson libpcre2-8 zlib

# OpenBLAS: Debian's OpenMP flavour, so a sgemm called inside our own OpenMP parallel regions runs
# on the calling thread instead of starting a second pool of spinning threads that fights ours
# for the cores. Fall back to whatever `pkg-config openblas` gives elsewhere.
MULTIARCH  := $(shell $(CC) -print-multiarch 2>/dev/null)
BLAS_DIR   := /usr/lib/$(MULTIARCH)/openblas-openmp
ifneq ($(wildcard $(BLAS_DIR)/libopenblas.so),)
BLAS_CFLAGS := -I/usr/include/$(MULTIARCH)/openblas-openmp
BLAS_LIBS   := -L$(BLAS_DIR) -Wl,-rpath,$(BLAS_DIR) -lopenblas
else
BLAS_CFLAGS := $(shell pkg-config --cflags openblas 2>/dev/null)
BLAS_LIBS   := $(shell pkg-config --libs openblas 2>/dev/null)
endif

# Flags for our own code; the user's CFLAGS come last so they can override optimisation.
PKG_CFLAGS := $(BLAS_CFLAGS) $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(BLAS_LIBS) $(shell pkg-config --libs $(PKGS) 2>/dev/null)
OPT     ?= -O3 -march=native
WARN    := -Wall -Wextra -Wno-unused-parameter -Wno-sign-compare
ALL_CFLAGS := -std=c11 -D_GNU_SOURCE -fPIC -fopenmp $(OPT) $(WARN) -Iinclude -Isrc $(PKG_CFLAGS) $(CFLAGS)
LIBS    := $(PKG_LIBS) -fopenmp -lmvec -lm -lpthread

LIB_SRC := $(sort $(shell find src -name '*.c' -not -path 'src/cli/*'))
CLI_SRC := $(sort $(wildcard src/cli/*.c))
TEST_SRC := $(sort $(wildcard tests/test_*.c))
BENCH_SRC := $(sort $(wildcard bench/*.c))

LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)
DEPS := $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d)

.PHONY: all lib test demo bench install clean deps
all: $(BUILD)/liblssar.a $(BUILD)/liblssar.so $(BUILD)/lssar

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/liblssar.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/liblssar.so: $(LIB_OBJ)
	$(CC) -shared -o $@ $^ $(LIBS)

$(BUILD)/lssar: $(CLI_OBJ) $(BUILD)/liblssar.a
	$(CC) -o $@ $(CLI_OBJ) $(BUILD)/liblssar.a $(LIBS)

$(BUILD)/tests/%: tests/%.c tests/harness.h $(BUILD)/liblssar.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(BUILD)/liblssar.a $(LIBS)

$(BUILD)/bench/%: bench/%.c $(BUILD)/liblssar.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(BUILD)/liblssar.a $(LIBS)

deps:
	@bash scripts/deps.sh

test: deps
	@$(MAKE) --no-print-directory all $(TEST_BIN)
	@bash tests/run.sh

bench: all $(BENCH_BIN)
	$(BUILD)/lssar bench --json $(BUILD)/bench.json

demo: deps
	@$(MAKE) --no-print-directory all
	@bash scripts/demo.sh

install: all
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 644 include/lssar.h $(DESTDIR)$(PREFIX)/include/lssar.h
	install -m 644 $(BUILD)/liblssar.a $(DESTDIR)$(PREFIX)/lib/liblssar.a
	install -m 755 $(BUILD)/liblssar.so $(DESTDIR)$(PREFIX)/lib/liblssar.so
	install -m 755 $(BUILD)/lssar $(DESTDIR)$(PREFIX)/bin/lssar
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(shell sed -n 's/^#define LSSAR_VERSION "\(.*\)"/\1/p' include/lssar.h)|' \
	    -e 's|@LIBS_PRIVATE@|$(LIBS)|' lssar.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/lssar.pc

clean:
	rm -rf $(BUILD)

-include $(DEPS)
