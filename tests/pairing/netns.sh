#!/usr/bin/env bash
# netns.sh: a network and mount namespace for the pairing tests' wrong addresses, so no packet
# of theirs ever leaves the machine.
#
#   netns.sh start          set it up; prints `export CLAWVOICE_PAIR_NS_DIR=...`
#   netns.sh exec CMD...    run CMD inside it
#   netns.sh stop           kill everything in it and remove the directory
#
# Inside: only `lo`, up; 192.0.2.0/24 (TEST-NET-1) has an `unreachable` route, so a connect
# there fails with "No route to host" at once; /etc/resolv.conf names 127.0.0.1, where
# tests/discovery/dns-stub.py answers NXDOMAIN for every name under pairing.test. (and REFUSED
# for the rest). Needs root (unshare -n -m).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

fail() { echo "netns.sh: $*" >&2; exit 1; }

start() {
  for tool in unshare nsenter ip python3; do command -v "$tool" >/dev/null || fail "missing $tool"; done
  [[ "$(id -u)" == 0 ]] || fail "needs root for its network and mount namespace (unshare -n -m)"
  dir="${CLAWVOICE_PAIR_NS_DIR:-$(mktemp -d /tmp/clawvoice-pairns.XXXXXX)}"
  chmod 755 "$dir"
  echo "nameserver 127.0.0.1" >"$dir/resolv.conf"
  : >"$dir/dns-queries.log"
  (
    for fd in $(ls /proc/$BASHPID/fd); do [[ "$fd" -gt 2 ]] && eval "exec $fd>&-" 2>/dev/null || true; done
    exec setsid unshare --net --mount --propagation private -- bash -c '
      set -e
      dir="$1"; here="$2"
      ip link set lo up
      ip route add unreachable 192.0.2.0/24
      mount --bind "$dir/resolv.conf" /etc/resolv.conf
      python3 "$here/../discovery/dns-stub.py" --zone pairing.test. --log "$dir/dns-queries.log" >>"$dir/dns-stub.log" 2>&1 &
      echo ready >"$dir/ready"
      trap "kill \$(jobs -p) 2>/dev/null; wait; exit 0" TERM INT
      wait
    ' holder "$dir" "$here" </dev/null >>"$dir/holder.log" 2>&1
  ) &
  echo $! >"$dir/holder.pid"
  for _ in $(seq 1 50); do
    if [[ -f "$dir/ready" ]] && nsenter -t "$(cat "$dir/holder.pid")" -n -- python3 -c '
import socket,sys
s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.settimeout(0.2)
s.sendto(bytes.fromhex("abcd01000001000000000000")+b"\x05probe\x07pairing\x04test\x00\x00\x01\x00\x01",("127.0.0.1",53))
s.recv(512)' 2>/dev/null; then
      echo "export CLAWVOICE_PAIR_NS_DIR=$dir"
      return 0
    fi
    sleep 0.1
  done
  stop_dir || true
  fail "the namespace did not come up within 5 s; see $dir/holder.log"
}

ns_pid() {
  dir="${CLAWVOICE_PAIR_NS_DIR:?set CLAWVOICE_PAIR_NS_DIR (eval the output of start)}"
  local pid
  pid="$(cat "$dir/holder.pid" 2>/dev/null || true)"
  [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || fail "no namespace running for $dir"
  echo "$pid"
}

stop_dir() {
  dir="${CLAWVOICE_PAIR_NS_DIR:?set CLAWVOICE_PAIR_NS_DIR}"
  local pid ns p
  pid="$(cat "$dir/holder.pid" 2>/dev/null || true)"
  # Everything whose network namespace is the holder's goes (SIGKILL: Foundation.Process children
  # may have signals blocked); nothing outside it is touched.
  if [[ "$pid" =~ ^[0-9]+$ ]] && [[ -e "/proc/$pid/ns/net" ]]; then
    ns="$(readlink "/proc/$pid/ns/net" 2>/dev/null || true)"
    if [[ -n "$ns" && "$ns" != "$(readlink /proc/self/ns/net)" ]]; then
      for p in /proc/[0-9]*; do
        [[ "$(readlink "$p/ns/net" 2>/dev/null)" == "$ns" ]] && kill -9 "${p#/proc/}" 2>/dev/null || true
      done
    fi
  fi
  [[ "$dir" == /tmp/* ]] && rm -rf "$dir"
  true
}

case "${1:-}" in
  start) start ;;
  exec) shift; exec nsenter -t "$(ns_pid)" -n -m -- "$@" ;;
  stop) stop_dir ;;
  *) echo "usage: $0 start | exec CMD... | stop" >&2; exit 2 ;;
esac
