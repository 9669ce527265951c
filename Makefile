# clawvoice: `make demo` and `make test` are the only two commands a newcomer needs.
# Both install any missing Debian packages first (apt-get; root or sudo), then build and run.

SHELL := /bin/bash
.DEFAULT_GOAL := build

# Debian packages, checked one by one; only missing ones are installed (apt-get; root or sudo).
# Runtime: what the installed binary uses beyond the libraries the -dev packages below pull in
# (the .deb's own Depends come from packaging/runtime-depends). Build: the compiler's inputs.
# Test: the tests' peers, servers and tools, and what `make demo` runs (a private pulseaudio).
# Package: `make deb` and `make package-test`.
APT_RUNTIME := ca-certificates espeak-ng-data \
  gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-bad gstreamer1.0-nice
APT_BUILD := pkg-config libssl-dev libwebsockets-dev libsqlite3-dev libpulse-dev libogg-dev libsndfile1-dev libopus-dev libopusenc-dev libopusfile-dev \
  libmpg123-dev libespeak-ng-dev libspeexdsp-dev libevdev-dev libwebrtc-audio-processing-dev libopenblas-dev libsystemd-dev \
  libavahi-client-dev libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev libgstreamer-plugins-bad1.0-dev
APT_TEST := python3 python3-venv python3-pip systemd pulseaudio pulseaudio-utils opus-tools ffmpeg espeak-ng sox util-linux flite \
  alsa-utils avahi-daemon avahi-utils dbus-daemon iproute2 bsdutils
APT_DEMO := pulseaudio pulseaudio-utils
APT_PACKAGE := dpkg-dev lintian debootstrap espeak-ng python3
# Bench: the real recordings of the end-of-speech rows (one speaker's voice prompts and their transcript, 24 MB).
APT_BENCH := asterisk-core-sounds-en asterisk-core-sounds-en-wav
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
SWIFT_FLAGS ?=
PEER_VENV := tests/peer/.venv
# Seconds per fuzz target in `make test` (six targets: under a minute of fuzzing; depth comes from `make fuzz-long`).
FUZZ_SECONDS ?= 8
FUZZ_LONG_RUNS ?= 1000000

.PHONY: config-files build core-test deps deps-build deps-demo deps-package deb deb-depends package-test test demo peer-test fuzz fuzz-long release clean help soak bench install uninstall install-test

# make install: PREFIX defaults to ~/.local (sudo make install PREFIX=/usr/local works too).
# INSTALL_BUILD=debug installs the debug build instead (the install test uses it, to skip a release build).
PREFIX ?= $(HOME)/.local
DESTDIR ?=
INSTALL_BUILD ?= release
BINDIR := $(PREFIX)/bin
SHAREDIR := $(PREFIX)/share/clawvoice
UNITDIR := $(PREFIX)/share/systemd/user
MODEL_FILES := $(notdir $(wildcard models/*.json models/*.bin))
INSTALLED := $(BINDIR)/clawvoice $(addprefix $(SHAREDIR)/models/,$(MODEL_FILES)) $(SHAREDIR)/config.example.json5 \
  $(UNITDIR)/clawvoice.service

help:
	@echo "make demo    install what is missing, build, run clawvoice against a loopback gateway"
	@echo "make test    install what is missing, build, run every test (unit, integration, peer, fuzz)"
	@echo "make build   debug build;  make release: optimised build"
	@echo "make core-test   ClawvoiceCore's tests in a package with no C library (part of make test)"
	@echo "make config-files   rewrite config/clawvoice.json5 and docs/configuration.md's key reference from the settings table"
	@echo "make install [PREFIX=~/.local]   the release binary, wake models, systemd user unit, example config; make uninstall"
	@echo "              (installs only the runtime and build packages: APT_RUNTIME, APT_BUILD; make test adds APT_TEST)"
	@echo "make deb     the Debian package clawvoice_<version>_<arch>.deb;  make package-test: install and run it in a clean Debian 12 root"
	@echo "make bench   clawvoice-bench (release) on a private PulseAudio and the loopback gateway"
	@echo "make soak    the outbox kill -9 soak (SOAK_ROUNDS, default 500)"
	@echo "make fuzz    every libFuzzer target for FUZZ_SECONDS (8) each;  make fuzz-long: 10^6 inputs each"
	@echo 'make wake-model TRIGGER="hey claw"   train a wake-word model (about 26 min from a clean cache, 5-8 min with warm caches; models/README.md)'
	@echo 'make wake-eval-real                  the real-speech yardstick: alexa/jarvis heads trained from text on real people, beside two anchors (models/EVALUATION.md)'
	@echo 'make wake-eval-real-negatives        false wakes of the shipped heads on recorded human speech (Debian voice prompts, 2.4 h; models/EVALUATION.md)'
	@echo 'make wake-eval-stamps                the same on Tux Paint'"'"'s spoken stamp descriptions (13 languages, 3.5 h), and the stop word on real "stop"s'
	@echo 'make wake-eval-game-speech           the same on English conversation: a game'"'"'s voice acting (Flight of the Amazon Queen, 2.6 h held out)'
	@echo 'make wake-eval-enroll                enrollment measured with stand-in users (held-out flite voices), before and after (models/EVALUATION.md)'
	@echo 'make voice-model                     retrain the endpointer voice detector, models/voice.json (about 25 min)'

# $(call apt_ensure,PACKAGES): install those of PACKAGES that are missing.
define apt_ensure
@missing=""; for p in $(1); do \
  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
done; \
if [ -n "$$missing" ]; then \
  echo "make: installing Debian packages:$$missing"; \
  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
fi
endef

# Everything: runtime, build and test (make test, make bench).
deps:
	$(call apt_ensure,$(APT_RUNTIME) $(APT_BUILD) $(APT_TEST))

# What building and running need, nothing for the tests (make build, make release, make install).
deps-build:
	$(call apt_ensure,$(APT_RUNTIME) $(APT_BUILD))

deps-demo:
	$(call apt_ensure,$(APT_RUNTIME) $(APT_BUILD) $(APT_DEMO))

deps-package:
	$(call apt_ensure,$(APT_RUNTIME) $(APT_BUILD) $(APT_PACKAGE))

build: deps-build
	swift build $(SWIFT_FLAGS)

# The example config and docs/configuration.md's key reference, written from the settings table
# (Sources/NodeRuntime/ConfigSettings.swift); ConfigTableTests fails until they are rewritten.
config-files: build
	bin="$$(swift build $(SWIFT_FLAGS) --show-bin-path)/clawvoice"; \
	"$$bin" config --example > config/clawvoice.json5 && \
	"$$bin" config --docs docs/configuration.md > docs/configuration.md.new && mv docs/configuration.md.new docs/configuration.md

release: deps-build
	swift build -c release $(SWIFT_FLAGS)

demo: deps-demo build
	swift run $(SWIFT_FLAGS) clawvoice demo

$(PEER_VENV)/.ready: tests/peer/requirements.txt
	python3 -m venv $(PEER_VENV)
	$(PEER_VENV)/bin/pip install -q --disable-pip-version-check -r tests/peer/requirements.txt
	touch $@

peer-test: deps build $(PEER_VENV)/.ready
	$(PEER_VENV)/bin/python tests/peer/handshake_peer.py "$$(swift build $(SWIFT_FLAGS) --show-bin-path)/clawvoice"

fuzz: deps-build
	bash fuzz/run.sh $(FUZZ_SECONDS)

# Every fuzz target for FUZZ_LONG_RUNS inputs each (docs/hardening.md's figures); long, so niced.
fuzz-long: deps-build
	nice -n 10 bash fuzz/run.sh --runs $(FUZZ_LONG_RUNS)

# The Swift test run goes last so its summary closes the output. Audio tests run against
# private PulseAudio servers with null sinks (tests/audio/pulse-server.sh), never the desktop's.
# tests/swift-test.sh runs them side by side with the fuzz targets (`make fuzz`), then the
# real-time figures in three lanes, one test at a time in each; the Python peer's checks run beside
# round 1 from its start, and the core's tests without C (`make core-test`) compile niced beside
# it after the fuzz targets.
# Each phase says when it ended, counted from the start of the build.
test: deps $(PEER_VENV)/.ready
	@mkdir -p .build && date +%s >.build/test-started
	swift build --build-tests $(SWIFT_FLAGS)
	@echo "make test: built at $$(( $$(date +%s) - $$(cat .build/test-started) )) s"
	$(MAKE) --no-print-directory install-test
	bash tests/install/packages-test.sh
	bash tests/install/readme-test.sh
	@echo "make test: install tests done at $$(( $$(date +%s) - $$(cat .build/test-started) )) s"
	bin="$$(swift build $(SWIFT_FLAGS) --show-bin-path)"; \
	bash tests/swift-test.sh --fuzz $(FUZZ_SECONDS) --with-round-1 "$(PEER_VENV)/bin/python tests/peer/handshake_peer.py $$bin/clawvoice" \
	    --beside-round-1 "bash tests/core/without-c.sh $(SWIFT_FLAGS)" $(SWIFT_FLAGS)

# ClawvoiceCore and its tests in a package that declares no C library (issue 27: the core's
# tests run with none of the C libraries); about a minute of CPU from a clean tree, seconds after.
core-test:
	bash tests/core/without-c.sh $(SWIFT_FLAGS)

# The binary finds its models in ../share/clawvoice/models from its own real path; the unit
# runs the installed binary. `clawvoice service install` then enables it.
install: deps-build
	swift build -c $(INSTALL_BUILD) $(SWIFT_FLAGS)
	@bin="$$(swift build -c $(INSTALL_BUILD) $(SWIFT_FLAGS) --show-bin-path)/clawvoice"; set -e; \
	install -D -m 0755 "$$bin" "$(DESTDIR)$(BINDIR)/clawvoice"; \
	install -d -m 0755 "$(DESTDIR)$(SHAREDIR)/models" "$(DESTDIR)$(UNITDIR)"; \
	install -m 0644 models/*.json models/*.bin "$(DESTDIR)$(SHAREDIR)/models/"; \
	install -m 0644 config/clawvoice.json5 "$(DESTDIR)$(SHAREDIR)/config.example.json5"; \
	sed 's|^ExecStart=%h/.local/bin/clawvoice |ExecStart=$(BINDIR)/clawvoice |' config/clawvoice.service > "$(DESTDIR)$(UNITDIR)/clawvoice.service"; \
	chmod 0644 "$(DESTDIR)$(UNITDIR)/clawvoice.service"; \
	echo "installed $(BINDIR)/clawvoice, models in $(SHAREDIR)/models, $(UNITDIR)/clawvoice.service"; \
	echo "next: clawvoice pair <setup-code>, then clawvoice service install"

uninstall:
	@for f in $(addprefix $(DESTDIR),$(INSTALLED)); do [ -e "$$f" ] && rm -f "$$f" && echo "removed $$f"; done; \
	for d in "$(DESTDIR)$(SHAREDIR)/models" "$(DESTDIR)$(SHAREDIR)" "$(DESTDIR)$(UNITDIR)"; do rmdir "$$d" 2>/dev/null; done; \
	echo "state ($${XDG_STATE_HOME:-~/.local/state}/clawvoice) and config are kept; clawvoice service uninstall first if it was enabled"; true

# make install into a temp PREFIX: layout, the installed binary finds its models, systemd-analyze
# verify accepts the unit, make uninstall leaves nothing.
install-test: deps build
	bash tests/install/install-test.sh

# The Debian package: clawvoice_<version>_<arch>.deb here (packaging/build-deb.sh, docs/packaging.md).
deb: deps-package
	bash packaging/build-deb.sh

# Rewrite packaging/runtime-depends from what the release binary links (make deb checks it).
deb-depends: deps-package
	bash packaging/build-deb.sh --update-depends

# The .deb installed into a clean Debian 12 root made by debootstrap, then run there (needs root).
package-test: deb
	bash tests/package/package-test.sh

bench: deps
	$(call apt_ensure,$(APT_BENCH))
	swift run -c release $(SWIFT_FLAGS) clawvoice-bench

SOAK_ROUNDS ?= 500
soak: deps
	swift build --build-tests $(SWIFT_FLAGS)
	CLAWVOICE_SOAK_ROUNDS=$(SOAK_ROUNDS) swift test --skip-build $(SWIFT_FLAGS) --filter 'soak'

include models/training/Makefile.fragment

# make print-APT_BUILD and the like: a variable's value (tests/install/packages-test.sh reads the lists).
print-%:
	@echo '$($*)'

clean:
	rm -rf .build $(PEER_VENV) clawvoice_*.deb
