# `make test` and `make demo` each create .venv on first use and install feedkv with its
# pinned dependencies; later runs reinstall only when pyproject.toml changed.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.feedkv-installed
# psql (Debian's postgresql-client) and pgbench (Debian's postgresql) are real clients the
# SQL port's tests drive; prometheus (Debian's) scrapes a node in the metrics tests;
# chromium (Debian's) loads the admin page in its headless browser test
APT_GET := $(if $(filter 0,$(shell id -u)),apt-get,sudo apt-get)
# Install a Debian package (refreshing the package lists when the first try fails); a
# package that cannot be installed leaves the tests that drive it skipped, saying why.
apt_install = { $(APT_GET) install -y -qq $(1) || { $(APT_GET) update -qq && $(APT_GET) install -y -qq $(1); } || echo "make: could not install $(1): the tests that need it are skipped"; }

# Google's Pub/Sub emulator (a Java server) serves the gcpubsub:// sink's tests
PUBSUB_EMULATOR := /usr/lib/google-cloud-sdk/platform/pubsub-emulator/bin/cloud-pubsub-emulator

# Azurite (the npm registry's Azure Storage emulator) serves Blob Storage to the azure://
# sink's tests, from a cache directory of the repository's own (npm from apt when missing)
AZURITE_VERSION := 3.35.0
AZURITE := .cache/azurite/node_modules/.bin/azurite-blob

.PHONY: test demo demo-cluster lint bench clean proto

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "feedkv needs Python 3.11 or newer; set PYTHON=/path/to/python3.11")'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@$(BIN)/python -c 'from feedkv.spark.java import java_home; java_home()' 2>/dev/null \
		|| $(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev,java]'
	@command -v psql >/dev/null 2>&1 || $(call apt_install,postgresql-client)
	@command -v pgbench >/dev/null 2>&1 || $(call apt_install,postgresql)
	@command -v prometheus >/dev/null 2>&1 || $(call apt_install,prometheus)
	@command -v chromium >/dev/null 2>&1 || $(call apt_install,chromium)
	@command -v etcd >/dev/null 2>&1 || $(call apt_install,etcd-server)
	@test -x $(PUBSUB_EMULATOR) || $(call apt_install,google-cloud-cli-pubsub-emulator)
	@touch $(STAMP)

$(AZURITE):
	@command -v npm >/dev/null 2>&1 || $(call apt_install,npm)
	npm install --silent --no-audit --no-fund --prefix .cache/azurite azurite@$(AZURITE_VERSION)

lint: $(STAMP)
	$(BIN)/ruff check feedkv tests bench
	$(BIN)/ruff format --check feedkv tests bench
	$(BIN)/mypy

# NB: three workers on two cores: much of the suite waits (on node subprocesses, fsync);
# slow tests start first, and those on the shared Spark session share a worker
# (tests/conftest.py); --no-loadscope-reorder keeps that order (xdist would otherwise
# hand out the groups first, the largest first, ahead of the isolated and slow tests)
test: lint $(AZURITE)
	$(BIN)/pytest -q -n 3 --dist loadgroup --no-loadscope-reorder

demo: $(STAMP)
	$(BIN)/feedkv demo

# The demo on a local cluster of three node processes, moving ranges while the job runs
demo-cluster: $(STAMP)
	$(BIN)/feedkv demo --nodes 3 --store demo-cluster-data

bench: $(STAMP)
	$(BIN)/feedkv bench storage

proto: $(STAMP)
	$(BIN)/python -m grpc_tools.protoc -I feedkv/kv/proto --python_out=feedkv/kv/proto \
		--pyi_out=feedkv/kv/proto feedkv/kv/proto/feedkv.proto
	$(BIN)/python -m grpc_tools.protoc -I feedkv/changefeed/proto \
		--python_out=feedkv/changefeed/proto --pyi_out=feedkv/changefeed/proto \
		feedkv/changefeed/proto/changefeed.proto

clean:
	rm -rf $(VENV) demo-data demo-cluster-data .cache
