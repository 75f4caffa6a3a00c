# Queen for PostgreSQL: PGXS build.
#
#   make && make install          build and install into the PostgreSQL found by pg_config
#   scripts/test                  run every test (see README.md)

EXTENSION = queen
MODULE_big = queen
# the install script of the current version is made from schema/*.sql, by
# concern, in file-name order; schema/upgrade/ holds the scripts of earlier
# versions as they shipped and the steps between versions (ALTER EXTENSION
# queen UPDATE), which t/095_upgrade.pl runs on rows the old code wrote
DATA_built = queen--1.2.sql
DATA = $(sort $(wildcard schema/upgrade/*.sql))
PGFILEDESC = "queen - partitioned, ordered, durable message queue"

# Two doors over one core (docs/ARCHITECTURE.md, "Source map"):
# src/core is the codec, validation and the log, src/sql the SQL functions,
# src/broker the HTTP broker's background workers: its runtime at the top,
# one folder per process kind below it (http, listener, shard, maintenance).
OBJS = \
	src/module.o \
	src/guc.o \
	$(patsubst %.c,%.o,$(sort $(wildcard src/core/*.c))) \
	$(patsubst %.c,%.o,$(sort $(wildcard src/sql/*.c))) \
	$(patsubst %.c,%.o,$(sort $(wildcard src/broker/*.c))) \
	$(patsubst %.c,%.o,$(sort $(wildcard src/broker/*/*.c)))

# xxHash: XXH3-128 of transactionIds; zstd: segment compression;
# http-parser: the broker's HTTP/1.1 request parsing; OpenSSL's libcrypto:
# AES-256-GCM of encrypted queues.
SHLIB_LINK += -lxxhash -lzstd -lhttp_parser -lcrypto -lm

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
INCLUDEDIR_SERVER := $(shell $(PG_CONFIG) --includedir-server)

# -isystem keeps warnings from PostgreSQL's own headers out of -Wextra,
# so any warning printed is ours.  Only src/core is on the include path of
# every file; src/broker is on the broker's alone (its files name another
# process's header by folder: "maintenance/spool.h"), so a core or SQL file that
# tried to include a broker header would not compile.
PG_CPPFLAGS = -isystem $(INCLUDEDIR_SERVER) -I$(srcdir)/src/core
PG_CFLAGS = -Wall -Wextra

# make SANITIZE=undefined (or address,undefined): queen.so built with those
# sanitizers (scripts/sanitize).  UBSan's runtime is an ordinary library
# queen.so loads into Debian's server; ASan's must be the server's own, so
# address takes a PostgreSQL built with it (scripts/build-asan-pg), named by
# PG_CONFIG, which scripts/sanitize explains.
ifdef SANITIZE
PG_CFLAGS += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer
SHLIB_LINK += -fsanitize=$(SANITIZE)
endif

REGRESS = setup modes configure schema codec push_body permit_law push_one push_items alloc pid_cache dedup read pop tenants rollback privileges failure_modes big_transaction untrusted_segments ack consume_tx consume_limits consume_sql replan dedup_runs streams retention admin stats encryption roles
REGRESS_OPTS = --load-extension=queen --load-extension=queen_test
TAP_TESTS = 1
ISOLATION = concurrent_push concurrent_provision statement_timeout dedup_cache delete_race created_at_order push_deadlock pop_consumers pop_lease_expiry pop_push_race ack_redelivery runs_race prelock_race pop_wait txn_lease_expiry retention_push pop_floor_horizon stats_horizon
ISOLATION_OPTS = --load-extension=queen

include $(PGXS)

src/broker/%.o src/broker/%.bc: override CPPFLAGS += -I$(srcdir)/src/broker

queen--1.2.sql: $(sort $(wildcard $(srcdir)/schema/*.sql))
	cat $^ > $@

# Every object depends on every header: few enough that precision is not
# worth a missed rebuild.
QUEEN_HEADERS = $(wildcard src/*/*.h src/broker/*/*.h)
$(OBJS): $(QUEEN_HEADERS)

# The test-only extension (test/): declarations of internal functions of
# queen.so that only the regression tests call, so that queen--1.2.sql,
# what a production database runs, has none.  scripts/test installs it;
# make install does not.  make installcheck needs it: make install-test.
install-test:
	$(MKDIR_P) '$(DESTDIR)$(datadir)/extension'
	$(INSTALL_DATA) $(srcdir)/test/queen_test.control $(srcdir)/test/queen_test--1.0.sql '$(DESTDIR)$(datadir)/extension/'

.PHONY: install-test

# The dashboard (web/, served by the broker at /; docs/OPERATIONS.md): plain
# files, no build step, installed flat under the share directory, where
# src/broker/listener/dashboard.c reads them.
DASHBOARD_FILES = $(sort $(wildcard $(srcdir)/web/*.html $(srcdir)/web/*.js $(srcdir)/web/*.css $(srcdir)/web/*.svg $(srcdir)/web/*.LICENSE))
install: install-dashboard
install-dashboard:
	$(MKDIR_P) '$(DESTDIR)$(datadir)/extension/queen_dashboard'
	rm -f '$(DESTDIR)$(datadir)/extension/queen_dashboard/'*
	$(if $(DASHBOARD_FILES),$(INSTALL_DATA) $(DASHBOARD_FILES) '$(DESTDIR)$(datadir)/extension/queen_dashboard/')

.PHONY: install-dashboard
