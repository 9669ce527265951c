#!/usr/bin/env bash
# pulse-server.sh: owns the private PulseAudio server the audio tests run against.
#
#   pulse-server.sh start   start it (idempotent) and print `export PULSE_SERVER=...` for eval
#   pulse-server.sh stop    kill it and remove its socket and pid file
#   pulse-server.sh env     print the exports without starting anything
#
# The server loads nothing but a native-protocol socket and two null sinks:
#   cv_speaker  48 kHz stereo, the default sink: what clawvoice plays lands on its monitor
#   cv_mic      16 kHz mono; its monitor cv_mic.monitor is the default source (the "microphone"),
#               so a test plays into cv_mic and clawvoice records what it played.
# norewinds=1: a null sink's monitor hears what the sink rendered, and a rewind (which lets a new
# stream cut in early) re-renders audio the monitor already got, so the first ~15 ms of a new
# stream would never reach it. Without rewinds the monitor is what a sound card would play.
# Everything lives under $CLAWVOICE_PULSE_DIR (default /tmp/clawvoice-pulse-$UID), so it never
# touches a desktop session's server and several directories can run side by side.
set -euo pipefail

dir="${CLAWVOICE_PULSE_DIR:-/tmp/clawvoice-pulse-$(id -u)}"
socket="$dir/native"
pidfile="$dir/pulseaudio.pid"
server="unix:$socket"

print_env() {
  echo "export PULSE_SERVER=$server"
  echo "export CLAWVOICE_PULSE_DIR=$dir"
}

# Long-lived children must not keep the caller's descriptors: this script's lock, and any pipe or
# socket a parent uses to notice that the script ended (Swift's Foundation.Process on Linux waits
# for a socketpair to close, and would wait forever on a server that inherited it).
close_inherited_fds() {
  local fd
  for fd in $(ls /proc/$BASHPID/fd); do
    [[ "$fd" -gt 2 ]] && eval "exec $fd>&-" 2>/dev/null || true
  done
}

# The pid is ours only if that process is a pulseaudio whose command line names our socket:
# after a crash or a reboot the number may belong to something else.
our_pid() {
  [[ -f "$pidfile" ]] || return 1
  local pid
  pid="$(cat "$pidfile" 2>/dev/null || true)"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  [[ -r "/proc/$pid/cmdline" ]] || return 1
  tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -q "pulseaudio.*$dir/" || return 1
  echo "$pid"
}

# A null sink that nobody records with low latency renders up to 2 s ahead of the clock, so the
# first sound after a quiet spell would reach its monitor up to 2 s late. Real sound cards do not
# do that. A "keeper" (pacat recording the monitor with 10 ms latency, into /dev/null) holds each
# sink to small blocks, and a suspend/resume resets the sink's clock to now.
keepers_alive() {
  [[ -f "$dir/keepers.pid" ]] || return 1
  local pid
  for pid in $(cat "$dir/keepers.pid"); do
    tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -q "pacat.*clawvoice-test-keeper" || return 1
  done
}

start_keepers() {
  stop_keepers
  local sink
  for sink in cv_speaker cv_mic; do
    ( close_inherited_fds; PULSE_SERVER="$server" exec setsid pacat --record --raw --latency-msec=10 \
        --device="$sink.monitor" --client-name=clawvoice-test-keeper </dev/null >/dev/null 2>>"$dir/keepers.log" ) &
    echo $! >>"$dir/keepers.pid"
  done
  sleep 0.2
  for sink in cv_speaker cv_mic; do
    PULSE_SERVER="$server" pactl suspend-sink "$sink" 1 && PULSE_SERVER="$server" pactl suspend-sink "$sink" 0
  done
}

stop_keepers() {
  if [[ -f "$dir/keepers.pid" ]]; then
    local pid
    for pid in $(cat "$dir/keepers.pid"); do
      if tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -q "pacat.*clawvoice-test-keeper"; then
        kill "$pid" 2>/dev/null || true
      fi
    done
  fi
  rm -f "$dir/keepers.pid"
}

# Answering is not enough: a test may have unloaded a sink. Both must be there.
healthy() {
  local sinks
  sinks="$(PULSE_SERVER="$server" timeout 2 pactl list short sinks 2>/dev/null)" || return 1
  grep -qw cv_speaker <<<"$sinks" && grep -qw cv_mic <<<"$sinks"
}

start() {
  mkdir -p "$dir/runtime" "$dir/config" "$dir/state"
  chmod 700 "$dir" "$dir/runtime"
  if pid="$(our_pid)" && healthy; then
    keepers_alive || start_keepers
    print_env
    return 0
  fi
  # A live but unresponsive or damaged server, or a stale socket and pid file left by kill -9: clear them.
  if pid="$(our_pid)"; then
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$socket" "$pidfile"

  stop_keepers
  cat >"$dir/server.pa" <<PA
load-module module-native-protocol-unix auth-anonymous=1 socket=$socket
load-module module-null-sink sink_name=cv_speaker rate=48000 channels=2 norewinds=1 sink_properties=device.description=clawvoice-test-speaker
load-module module-null-sink sink_name=cv_mic rate=16000 channels=1 norewinds=1 sink_properties=device.description=clawvoice-test-mic
set-default-sink cv_speaker
set-default-source cv_mic.monitor
PA

  # -n: no default.pa, so no hardware, no suspend-on-idle, no other modules.
  # Its own XDG dirs keep it away from any user session's socket, cookie and state.
  (
    close_inherited_fds
    export XDG_RUNTIME_DIR="$dir/runtime" XDG_CONFIG_HOME="$dir/config" XDG_STATE_HOME="$dir/state" HOME="$dir"
    unset PULSE_SERVER
    exec setsid pulseaudio -n -F "$dir/server.pa" --daemonize=no --exit-idle-time=-1 \
      --use-pid-file=no --realtime=no --high-priority=no --disable-shm=yes \
      --log-target=file:"$dir/pulseaudio.log" --log-level=warning \
      </dev/null >>"$dir/pulseaudio.out" 2>&1
  ) &
  echo $! >"$pidfile"

  for _ in $(seq 1 50); do
    if healthy; then
      start_keepers
      print_env
      return 0
    fi
    # Alive is enough here: until the subshell execs, its command line still says bash.
    if ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then break; fi
    sleep 0.1
  done
  echo "pulse-server.sh: pulseaudio did not answer on $socket within 5 s; see $dir/pulseaudio.log" >&2
  tail -n 20 "$dir/pulseaudio.log" "$dir/pulseaudio.out" >&2 2>/dev/null || true
  stop >/dev/null 2>&1 || true
  return 1
}

stop() {
  stop_keepers
  if pid="$(our_pid)"; then
    kill "$pid" 2>/dev/null || true
    # our_pid, not kill -0: a dead server nobody reaped yet is a zombie with an empty cmdline.
    for _ in $(seq 1 30); do
      our_pid >/dev/null || break
      sleep 0.1
    done
    if our_pid >/dev/null; then kill -9 "$pid" 2>/dev/null || true; fi
  fi
  rm -f "$socket" "$pidfile"
}

# Two test processes may call start at once: serialise start and stop on a lock file.
lock() {
  mkdir -p "$dir"
  exec 9>"$dir/lock"
  flock -w 10 9
}

case "${1:-}" in
  start) lock; start ;;
  stop) lock; stop ;;
  env) print_env ;;
  *) echo "usage: $0 start|stop|env" >&2; exit 2 ;;
esac
