# shellcheck shell=bash
# Numbered steps for hack/setup.sh and the build scripts it runs: one line as a step starts
# (its number, what it builds, the version, a rough time on 2 cores), a heartbeat while it
# runs, one line when it ends with how long it took, and "cached" for a step with nothing
# to do. What the commands print (Go's downloads, the compilers, apt, pip) goes to one log
# file, named when the run starts; a failed step prints the last 40 lines of it.
#
# A script sources this file, calls steps_begin with its number of steps, then for each
# step either step_cached or step_run. A script run by another (setup.sh runs the build
# scripts) continues the caller's numbering and log: the state is in RESTARTER_STEPS_*.
#
#   RESTARTER_STEPS_HEARTBEAT  seconds between heartbeats (default 20)
#   RESTARTER_STEPS_LOG        the log file (default $RESTARTER_CACHE/logs/<name>-<time>.log)

# steps_begin NAME TOTAL: start a numbered run of TOTAL steps, unless a caller started one.
steps_begin() {
  local name="$1" total="$2"
  [[ -n "${RESTARTER_STEPS_COUNTER:-}" ]] && return 0
  local cache="${RESTARTER_CACHE:-$HOME/.cache/restarter}"
  export RESTARTER_STEPS_TOTAL="$total"
  export RESTARTER_STEPS_LOG="${RESTARTER_STEPS_LOG:-$cache/logs/$name-$(date -u +%Y%m%d-%H%M%S).log}"
  local logs
  logs="$(dirname "$RESTARTER_STEPS_LOG")"
  mkdir -p "$logs"
  # A week of logs is kept; a run that went well needs none of them.
  find "$logs" -maxdepth 1 -name '*.log*' -mtime +7 -delete 2>/dev/null || true
  : >>"$RESTARTER_STEPS_LOG"
  export RESTARTER_STEPS_COUNTER="$RESTARTER_STEPS_LOG.step" RESTARTER_STEPS_OWNER=$$
  echo 0 >"$RESTARTER_STEPS_COUNTER"
  local plural=s
  ((total == 1)) && plural=
  echo "$name: $total step$plural; what they print (downloads, compilers) goes to $RESTARTER_STEPS_LOG"
}

# steps_nested: true when this script's steps are part of a caller's run.
steps_nested() { [[ "${RESTARTER_STEPS_OWNER:-$$}" != "$$" ]]; }

_step_next() {
  local n
  n=$(($(cat "$RESTARTER_STEPS_COUNTER") + 1))
  echo "$n" >"$RESTARTER_STEPS_COUNTER"
  echo "[$n/$RESTARTER_STEPS_TOTAL]"
}

# "75 s" as "1 min 15 s".
_step_duration() {
  local seconds="$1"
  if ((seconds < 60)); then echo "$seconds s"; else echo "$((seconds / 60)) min $((seconds % 60)) s"; fi
}

# step_cached WHAT: a step that finds its result already built.
step_cached() {
  echo "$(_step_next) $1: cached"
}

# step_run WHAT ESTIMATE COMMAND...: run COMMAND (a function or a program) with its output in
# the log, reporting its start, a heartbeat and its end. ESTIMATE is a rough time on 2 cores
# with empty caches ("3 min"). On failure, prints the log's last 40 lines and exits with the
# command's status.
step_run() {
  local what="$1" estimate="$2"; shift 2
  local number started=$SECONDS beat=$SECONDS interval="${RESTARTER_STEPS_HEARTBEAT:-20}"
  number="$(_step_next)"
  echo "$number $what, ~$estimate on 2 cores"
  printf '\n== %s %s (%s)\n' "$number" "$what" "$(date -u +%T)" >>"$RESTARTER_STEPS_LOG"
  "$@" >>"$RESTARTER_STEPS_LOG" 2>&1 </dev/null &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 0.2
    if ((SECONDS - beat >= interval)) && kill -0 "$pid" 2>/dev/null; then
      beat=$SECONDS
      # The log's last line is the build's current phase: Go's last download, or with
      # `go build -v` the last package it compiled. Without Go's "go: " prefix, so that no
      # "go: downloading" line reaches the terminal.
      local phase
      phase="$(tail -n 1 "$RESTARTER_STEPS_LOG" | sed 's/^go: //' | cut -c1-100)"
      echo "$number $what: $(_step_duration $((SECONDS - started))) so far; now: $phase"
    fi
  done
  local status=0
  wait "$pid" || status=$?
  local took
  took="$(_step_duration $((SECONDS - started)))"
  if ((status != 0)); then
    {
      echo "$number $what: FAILED after $took (exit status $status); the last 40 lines of $RESTARTER_STEPS_LOG:"
      tail -n 40 "$RESTARTER_STEPS_LOG" | sed 's/^/    /'
    } >&2
    exit "$status"
  fi
  echo "$number $what: done in $took"
}
