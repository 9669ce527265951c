#!/usr/bin/env bash
# avahi-netns.sh: owns the private D-Bus + Avahi pair the discovery tests run against, inside a
# network and mount namespace of their own, so no mDNS or DNS packet ever leaves it.
#
#   avahi-netns.sh start [--bus-only]  start them (--bus-only: the bus without avahi-daemon, for the
#                                   "daemon not running" test) and print `export CLAWVOICE_AVAHI_DIR=... CLAWVOICE_AVAHI_NS=...`
#   avahi-netns.sh exec CMD ARGS... run CMD inside the namespace, with DBUS_SYSTEM_BUS_ADDRESS on the private bus
#   avahi-netns.sh stop             kill everything it started and remove the directory
#
# Inside the namespace: only `lo`, up, with multicast on and a 224.0.0.0/4 route, so avahi-daemon
# does real mDNS on it. The mount namespace puts a tmpfs over /run (avahi-daemon's pid file and
# socket live in /run/avahi-daemon, a compiled-in path), an empty dir over /etc/avahi/services
# (no static services of the host) and our resolv.conf over /etc/resolv.conf: its one nameserver is
# tests/discovery/dns-stub.py on 127.0.0.1:53 inside the namespace, which serves the wide-area
# DNS-SD zone (openclaw.internal. by default) and logs every question it gets to $dir/dns-queries.log.
# Everything else lives in $CLAWVOICE_AVAHI_DIR (default: a fresh mktemp dir), never a fixed path.
# Needs root for unshare -n -m (an unprivileged user namespace cannot map avahi's user).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

close_inherited_fds() {
  local fd
  for fd in $(ls /proc/$BASHPID/fd); do
    [[ "$fd" -gt 2 ]] && eval "exec $fd>&-" 2>/dev/null || true
  done
}

fail() {
  echo "avahi-netns.sh: $*" >&2
  [[ -n "${dir:-}" ]] && tail -n 15 "$dir"/*.log >&2 2>/dev/null || true
  exit 1
}

start() {
  local bus_only=0
  [[ "${1:-}" == "--bus-only" ]] && bus_only=1
  local missing=""
  for tool in unshare nsenter ip dbus-daemon avahi-daemon avahi-publish python3; do
    command -v "$tool" >/dev/null || missing="$missing $tool"
  done
  [[ -z "$missing" ]] || fail "missing:$missing (make deps installs them)"
  # A user namespace is not enough: avahi-daemon chowns /run/avahi-daemon to its user, which an
  # unprivileged user namespace cannot map.
  [[ "$(id -u)" == 0 ]] || fail "needs root for its network and mount namespace (unshare -n -m); run the tests as root"
  dir="${CLAWVOICE_AVAHI_DIR:-$(mktemp -d /tmp/clawvoice-avahi.XXXXXX)}"
  local zone="${CLAWVOICE_WIDE_AREA_ZONE:-openclaw.internal.}"
  mkdir -p "$dir/services" "$dir/bus"
  chmod 755 "$dir"
  cat >"$dir/dbus.conf" <<XML
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>custom</type>
  <listen>unix:path=$dir/bus/system_bus_socket</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
XML
  cat >"$dir/avahi-daemon.conf" <<CONF
[server]
host-name=clawvoice-test
domain-name=local
use-ipv4=yes
use-ipv6=no
allow-interfaces=lo
enable-dbus=yes
ratelimit-interval-usec=1000000
ratelimit-burst=1000
[wide-area]
enable-wide-area=yes
[publish]
publish-hinfo=no
publish-workstation=no
[reflector]
[rlimits]
CONF
  echo "nameserver 127.0.0.1" >"$dir/resolv.conf"
  : >"$dir/dns-queries.log"

  # The holder: sets the namespace up, starts the three servers, then waits; its pid names the namespace.
  (
    close_inherited_fds
    exec setsid unshare --net --mount --propagation private -- bash -c '
      set -e
      dir="$1"; here="$2"; zone="$3"; bus_only="$4"
      ip link set lo up
      ip link set lo multicast on
      ip route add 224.0.0.0/4 dev lo
      mount -t tmpfs -o mode=755 tmpfs /run
      mkdir -p /run/avahi-daemon
      mount --bind "$dir/services" /etc/avahi/services
      mount --bind "$dir/resolv.conf" /etc/resolv.conf
      export DBUS_SYSTEM_BUS_ADDRESS="unix:path=$dir/bus/system_bus_socket"
      python3 "$here/dns-stub.py" --zone "$zone" --log "$dir/dns-queries.log" >>"$dir/dns-stub.log" 2>&1 &
      dbus-daemon --config-file="$dir/dbus.conf" --nofork --nopidfile >>"$dir/dbus.log" 2>&1 &
      for _ in $(seq 1 50); do [[ -S "$dir/bus/system_bus_socket" ]] && break; sleep 0.1; done
      if [[ "$bus_only" != 1 ]]; then
        # A simple command in the background, so $! is avahi-daemon itself (a test kills it).
        avahi-daemon -f "$dir/avahi-daemon.conf" --no-drop-root --no-chroot --no-rlimits --no-proc-title >>"$dir/avahi.log" 2>&1 &
        echo $! >"$dir/avahi.pid"
      fi
      trap "kill \$(jobs -p) 2>/dev/null; wait; exit 0" TERM INT
      wait
    ' holder "$dir" "$here" "$zone" "$bus_only" </dev/null >>"$dir/holder.log" 2>&1
  ) &
  echo $! >"$dir/holder.pid"

  # Ready when avahi-daemon answers on the private bus (avahi-browse through it) inside the namespace.
  for _ in $(seq 1 100); do
    if ! kill -0 "$(cat "$dir/holder.pid")" 2>/dev/null; then fail "the namespace holder exited; see $dir/holder.log"; fi
    if { [[ $bus_only == 1 ]] && [[ -S "$dir/bus/system_bus_socket" ]]; } || grep -q "Server startup complete" "$dir/avahi.log" 2>/dev/null; then
      echo "export CLAWVOICE_AVAHI_DIR=$dir"
      echo "export CLAWVOICE_AVAHI_NS=$(cat "$dir/holder.pid")"
      echo "export CLAWVOICE_AVAHI_BUS=unix:path=$dir/bus/system_bus_socket"
      return 0
    fi
    sleep 0.1
  done
  stop_dir >/dev/null 2>&1 || true
  fail "avahi-daemon did not start within 10 s; see $dir/avahi.log"
}

ns_pid() {
  dir="${CLAWVOICE_AVAHI_DIR:?set CLAWVOICE_AVAHI_DIR (eval the output of start)}"
  local pid
  pid="$(cat "$dir/holder.pid" 2>/dev/null || true)"
  [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || fail "no namespace running for $dir"
  echo "$pid"
}

run_in() {
  local pid
  pid="$(ns_pid)"
  dir="$CLAWVOICE_AVAHI_DIR"
  exec nsenter -t "$pid" -n -m -- env DBUS_SYSTEM_BUS_ADDRESS="unix:path=$dir/bus/system_bus_socket" "$@"
}

stop_dir() {
  dir="${CLAWVOICE_AVAHI_DIR:?set CLAWVOICE_AVAHI_DIR}"
  local pid
  pid="$(cat "$dir/holder.pid" 2>/dev/null || true)"
  # Every process in the namespace goes, with SIGKILL: a parent that spawned them with signals
  # blocked (Foundation.Process on Linux does) makes SIGTERM wait forever. Ours are exactly those
  # whose network namespace is the holder's; nothing outside it is touched.
  if [[ "$pid" =~ ^[0-9]+$ ]] && [[ -e "/proc/$pid/ns/net" ]]; then
    local ns p
    ns="$(readlink "/proc/$pid/ns/net" 2>/dev/null || true)"
    if [[ -n "$ns" && "$ns" != "$(readlink /proc/self/ns/net)" ]]; then
      for p in /proc/[0-9]*; do
        [[ "$(readlink "$p/ns/net" 2>/dev/null)" == "$ns" ]] && kill -9 "${p#/proc/}" 2>/dev/null || true
      done
    fi
    # Gone, or a zombie nobody reaps (a container's pid 1 may not): either way it holds nothing.
    for _ in $(seq 1 30); do
      kill -0 "$pid" 2>/dev/null || break
      grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null && break
      sleep 0.1
    done
  fi
  # The namespace dies with its last process; the directory is ours (mktemp or given).
  [[ "$dir" == /tmp/* ]] && rm -rf "$dir"
  true
}

case "${1:-}" in
  start) shift; start "$@" ;;
  exec) shift; run_in "$@" ;;
  stop) stop_dir ;;
  *) echo "usage: $0 start | exec CMD... | stop" >&2; exit 2 ;;
esac
