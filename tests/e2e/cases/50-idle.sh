# shellcheck shell=bash
# shellcheck disable=SC2154 # $uid, $work, $repo, ...: the variables of tests/e2e/run
# e2e case: Type=notify fully (src/daemon/notify.h): the
# watchdog, STATUS= counts, and idle exit of the socket-activated daemon.
# Sourced by tests/e2e/run after its base steps; starts and ends with
# taskferry.socket active and taskferry.service stopped.

step "Type=notify: WatchdogSec=, STATUS= counts, idle exit (TASKFERRY_IDLE_EXIT_SEC=2) and re-activation"
expect_eq "$(unit_prop taskferry.service WatchdogUSec)" 30s "taskferry.service WatchdogUSec"
sysu set-environment TASKFERRY_IDLE_EXIT_SEC=2 || die "systemctl --user set-environment failed"
out=$(as_user taskferry list --all 2>&1) || die "taskferry list --all failed" "$out"
check_managed_daemon
idle_pid=$main_pid
# the keep-alives reach the manager: it would kill a daemon that sent none
# within WatchdogSec; here only that the daemon asked for them
idle_env=$(in_ct cat "/proc/$idle_pid/environ" | tr '\0' '\n') || die "cannot read the environment of pid $idle_pid"
grep -qx WATCHDOG_USEC=30000000 <<<"$idle_env" ||
  die "taskferryd (pid $idle_pid) did not get WATCHDOG_USEC=30000000 from its unit" "$(grep WATCHDOG <<<"$idle_env" || true)"
ok "the daemon runs with WATCHDOG_USEC=30000000 (sd_event_set_watchdog sends the keep-alives)"

# a task running longer than the idle time keeps the daemon, and the
# manager's StatusText follows the counts
out=$(as_user taskferry dispatch --executor shell --directory "$repo" --prompt 'sleep 4; echo idle > idle.txt' 2>&1) ||
  die "taskferry dispatch failed" "$out"
itask=$(sed -n '/^id: /{s///p;q}' <<<"$out")
[ -n "$itask" ] || die "no task id in the dispatch output" "$out"
status=""
for _ in $(seq 1 50); do
  status=$(unit_prop taskferry.service StatusText)
  case "$status" in "0 queued, 1 running, "*" tasks") break ;; esac
  sleep 0.1
done
case "$status" in "0 queued, 1 running, "*" tasks") ok "StatusText while $itask runs: $status" ;;
  *) die "StatusText does not show the running task: '$status'" ;; esac
sleep 3
expect_eq "$(unit_state taskferry.service)" active "taskferry.service 3 s into a 4 s task (idle exit 2 s)"
expect_eq "$(unit_prop taskferry.service MainPID)" "$idle_pid" "MainPID while the task runs"
out=$(as_user_t "$task_timeout" taskferry wait "$itask" --timeout "$((task_timeout - 10))s" 2>&1) ||
  die "taskferry wait $itask failed" "$out"
# the wait's connection closed: idle from here, gone 2 s later
state=""
for _ in $(seq 1 100); do
  state=$(unit_state taskferry.service)
  [ "$state" = inactive ] && break
  sleep 0.1
done
expect_eq "$state" inactive "taskferry.service after $itask settled and 2 s idle"
expect_eq "$(unit_prop taskferry.service Result)" success "taskferry.service Result after the idle exit"
expect_eq "$(unit_prop taskferry.service ExecMainCode)" 1 "ExecMainCode (exited, not killed)"
expect_eq "$(unit_prop taskferry.service ExecMainStatus)" 0 "ExecMainStatus of the idle exit"
expect_eq "$(unit_state taskferry.socket)" active "taskferry.socket after the idle exit"
expect_eq "$(in_ct stat -c '%F %a %U' "$sock")" "socket 600 $user" "the socket file after the idle exit"
expect_eq "$(daemon_pids)" "" "taskferryd processes after the idle exit"
in_ct journalctl --sync >/dev/null 2>&1 || true
idle_line=$(in_ct journalctl --no-pager -q -o json _UID="$uid" SYSLOG_IDENTIFIER=taskferryd _PID="$idle_pid" PRIORITY=6 |
  jq -r 'select(.MESSAGE | startswith("taskferryd: info: idle for 2 s, exiting")) | .MESSAGE')
[ -n "$idle_line" ] || die "no info line of the idle exit from pid $idle_pid in the journal"
ok "journal (PRIORITY=6): $idle_line"

# the next call re-activates it, and the task is still there
out=$(as_user taskferry status "$itask" 2>&1) || die "taskferry status $itask (re-activation) failed" "$out"
expect_line "$out" "status: done" "task $itask after re-activation"
expect_eq "$(unit_state taskferry.service)" active "taskferry.service after the next CLI call"
new_pid=$(unit_prop taskferry.service MainPID)
[ "$new_pid" != "$idle_pid" ] || die "MainPID $new_pid did not change across the idle exit"
ok "re-activated as pid $new_pid"
out=$(as_user taskferry reject "$itask" 2>&1) || die "taskferry reject $itask failed" "$out"

sysu unset-environment TASKFERRY_IDLE_EXIT_SEC || die "systemctl --user unset-environment failed"
out=$(sysu stop taskferry.service 2>&1) || die "systemctl --user stop taskferry.service failed" "$out"
expect_eq "$(unit_state taskferry.service)" inactive "taskferry.service at the end of the idle case"
expect_eq "$(unit_state taskferry.socket)" active "taskferry.socket at the end of the idle case"
