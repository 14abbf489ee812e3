# shellcheck shell=bash
# 20-scope: every worker in its own transient scope unit (taskferryd(8)
# "Resource limits"). Sourced by tests/e2e/run after its base
# steps, with its helpers in scope; starts and ends with taskferry.socket
# active and taskferry.service stopped.

scope_wait_s=30

# scope_of <task id>: the task's scope unit name
scope_of() { printf 'taskferry-task-%s.scope' "$1"; }
# dispatch_shell <extra flags...> with the prompt on stdin (never argv: runuser
# logs its command line); prints the task id
dispatch_shell() {
  local prompt=$1 out id
  shift
  out=$(as_user taskferry dispatch --executor shell --directory "$repo" --prompt - "$@" <<<"$prompt" 2>&1) ||
    die "taskferry dispatch $* failed" "$out"
  id=$(sed -n '/^id: /{s///p;q}' <<<"$out")
  [ -n "$id" ] || die "no task id in the dispatch output" "$out"
  printf '%s\n' "$id"
}
# wait_scope_active <task id>: its scope is active (the child was held until it was)
wait_scope_active() {
  local u i st=""
  u=$(scope_of "$1")
  for ((i = 0; i < scope_wait_s * 5; i++)); do
    st=$(unit_prop "$u" ActiveState 2>/dev/null || true)
    [ "$st" = active ] && { ok "$u is active"; return 0; }
    sleep 0.2
  done
  die "$u did not become active within ${scope_wait_s}s (ActiveState '$st')" \
    "$(as_user taskferry status "$1" --full 2>&1 || true)" "$(sysu status "$u" --no-pager 2>&1 || true)"
}
# status_field <task id> <key>: one line of `status --full`
status_field() { as_user taskferry status "$1" --full 2>/dev/null | sed -n "s/^$2: //p" | head -n 1; }
# cgroup_procs <task id>: the pids in its scope's cgroup (container pid namespace), space-separated
cgroup_procs() {
  local cg
  cg=$(unit_prop "$(scope_of "$1")" ControlGroup 2>/dev/null || true)
  [ -n "$cg" ] || return 0
  in_ct cat "/sys/fs/cgroup$cg/cgroup.procs" 2>/dev/null | tr '\n' ' ' | sed 's/ $//' || true
}
# wait_done <task id> <expected status>
wait_settled() {
  local out
  out=$(as_user_t "$task_timeout" taskferry wait "$1" --timeout "$((task_timeout - 10))s" 2>&1) ||
    die "taskferry wait $1 failed" "$out" "$(as_user taskferry status "$1" --full 2>&1 || true)"
  expect_eq "$(status_field "$1" status)" "$2" "status of $1"
}
# no_pid_alive <what> <pids...>: none of the pids runs any more (waits up to 10 s)
no_pid_alive() {
  local what=$1 i p alive
  shift
  for ((i = 0; i < 50; i++)); do
    alive=""
    for p in "$@"; do in_ct kill -0 "$p" 2>/dev/null && alive="$alive $p"; done
    [ -z "$alive" ] && { ok "$what: none of $* runs any more"; return 0; }
    sleep 0.2
  done
  die "$what: still running:$alive" "$(for p in $alive; do in_ct cat "/proc/$p/cmdline" 2>/dev/null | tr '\0' ' '; echo; done)"
}

# =========================================================================
step "scope: taskferry.slice linked, limits from config.json, doctor says they are enforced"
slice_unit=$(find "$prefix" -name taskferry.slice -type f | head -n 1)
if [ -z "$slice_unit" ]; then
  # not installed by this tree's install rules yet: the source file, copied
  # where the container sees it
  install -D -m 0644 "$src/units/taskferry.slice" "$prefix/lib/systemd/user/taskferry.slice"
  slice_unit=$prefix/lib/systemd/user/taskferry.slice
fi
out=$(sysu link "$slice_unit" 2>&1) || die "systemctl --user link $slice_unit failed" "$out"
sysu daemon-reload || die "systemctl --user daemon-reload failed"
expect_eq "$(unit_prop taskferry.slice LoadState)" loaded "taskferry.slice LoadState"
out=$(as_user bash -c 'mkdir -p ~/.config/taskferry &&
  printf "{\"taskMemoryMax\": \"1G\", \"taskTasksMax\": 512, \"taskCpuWeight\": 50}\n" > ~/.config/taskferry/config.json' 2>&1) ||
  die "cannot write config.json" "$out"
out=$(as_user taskferry doctor 2>&1) || die "taskferry doctor failed" "$out"
grep -q "resource limits are not held by a systemd scope" <<<"$out" && die "doctor says limits are not held by a scope under a user manager" "$out"
ok "doctor does not warn about resource limits"
out=$(as_user taskferry doctor --json 2>&1) || die "taskferry doctor --json failed" "$out"
grep -q '"resourceLimits":{"enforced":true' <<<"$(tr -d ' \n' <<<"$out")" ||
  die "doctor --json: resourceLimits.enforced is not true" "$out"
ok "doctor --json: resourceLimits.enforced true"

# =========================================================================
step "scope: a worker runs in taskferry-task-<id>.scope with its limits; /proc/self/cgroup names it"
cgfile=$home/scope-cgroup.txt
as_user rm -f "$cgfile"
# unsandboxed, so that the worker's own /proc/self/cgroup is the host's view
# (bwrap's cgroup namespace shows "0::/")
t1=$(dispatch_shell "cat /proc/self/cgroup > $cgfile; sleep 600" --no-sandbox --memory-max 256M --tasks-max 300)
ok "dispatched $t1 (--no-sandbox --memory-max 256M --tasks-max 300)"
wait_scope_active "$t1"
u1=$(scope_of "$t1")
out=$(sysu show "$u1" -p MemoryMax -p TasksMax -p MemoryHigh -p CPUWeight -p Slice 2>&1) || die "systemctl --user show $u1 failed" "$out"
expect_line "$out" "MemoryMax=268435456" "systemctl --user show $u1"
expect_line "$out" "TasksMax=300" "systemctl --user show $u1"
expect_line "$out" "MemoryHigh=$((268435456 / 10 * 9))" "systemctl --user show $u1"
expect_line "$out" "CPUWeight=50" "systemctl --user show $u1 (config taskCpuWeight)"
expect_line "$out" "Slice=taskferry.slice" "systemctl --user show $u1"
for ((i = 0; i < 50; i++)); do in_ct test -s "$cgfile" && break; sleep 0.2; done
cg=$(in_ct cat "$cgfile" 2>/dev/null || true)
grep -q "^0::/user.slice/user-$uid.slice/user@$uid.service/taskferry.slice/$u1\$" <<<"$cg" ||
  die "the worker's /proc/self/cgroup does not name $u1" "$cg"
ok "the worker's /proc/self/cgroup: $(grep '^0::' <<<"$cg")"
expect_eq "$(status_field "$t1" unit)" "$u1" "status --full unit"
expect_eq "$(status_field "$t1" memoryMax)" 268435456 "status --full memoryMax"
expect_eq "$(status_field "$t1" tasksMax)" 300 "status --full tasksMax"

# a sandboxed one gets the config's defaults; bwrap's worker is in the scope
# too. It sees the cgroup tree only read-only (/sys is a read-only bind, and
# its cgroup namespace is rooted at its scope): it cannot move itself into
# taskferry.service's cgroup, the slice or the root, nor reach the user
# manager's or the bus's sockets to ask systemd to kill another scope.
t2=$(dispatch_shell 'for f in /sys/fs/cgroup/cgroup.procs /sys/fs/cgroup/user.slice/*/*/cgroup.procs /sys/fs/cgroup/user.slice/*/*/taskferry.slice/cgroup.procs /sys/fs/cgroup/user.slice/*/*/*/taskferry.service/cgroup.procs /sys/fs/cgroup/user.slice/*/*/taskferry.service/cgroup.procs; do [ -e "$f" ] && { echo $$ > "$f"; } 2>/dev/null && echo "moved via $f"; done; for f in "$XDG_RUNTIME_DIR/bus" "$XDG_RUNTIME_DIR/systemd/private" /run/user/*/bus /run/dbus/system_bus_socket; do [ -e "$f" ] && echo "reach $f"; done; grep "^0::" /proc/self/cgroup; echo probe-done; sleep 600')
wait_scope_active "$t2"
u2=$(scope_of "$t2")
out=$(sysu show "$u2" -p MemoryMax -p TasksMax 2>&1) || die "systemctl --user show $u2 failed" "$out"
expect_line "$out" "MemoryMax=1073741824" "systemctl --user show $u2 (config taskMemoryMax 1G)"
expect_line "$out" "TasksMax=512" "systemctl --user show $u2 (config taskTasksMax)"
for ((i = 0; i < 50; i++)); do
  pid2=$(status_field "$t2" pid)
  case "$pid2" in '' | null) sleep 0.2 ;; *) break ;; esac
done
case "$pid2" in '' | null | *[!0-9]*) die "task $t2 has no worker pid ('$pid2')" ;; esac
cg=$(in_ct cat "/proc/$pid2/cgroup" 2>/dev/null || true)
grep -q "/taskferry.slice/$u2\$" <<<"$cg" || die "the sandboxed worker (pid $pid2) is not in $u2" "$cg"
ok "the sandboxed worker (pid $pid2) runs in $u2"
log2=$home/.local/state/taskferry/logs/$t2.ndjson
for ((i = 0; i < 50; i++)); do grep -q probe-done <<<"$(in_ct cat "$log2" 2>/dev/null || true)" && break; sleep 0.2; done
probe=$(in_ct cat "$log2" 2>/dev/null || true)
grep -q probe-done <<<"$probe" || die "the sandboxed worker's probe did not finish" "$probe"
grep -q "reach \|moved via " <<<"$probe" && die "the sandboxed worker left its scope or reaches a manager socket" "$probe"
grep -q "0::/" <<<"$probe" || die "the sandboxed worker's /proc/self/cgroup was not logged" "$probe"
grep -q "0::/user.slice" <<<"$probe" && die "the sandboxed worker sees the cgroup tree above its scope" "$probe"
cg=$(in_ct cat "/proc/$pid2/cgroup" 2>/dev/null || true)
grep -q "/taskferry.slice/$u2\$" <<<"$cg" || die "after its probe the sandboxed worker (pid $pid2) is no longer in $u2" "$cg"
ok "the sandboxed worker cannot move out of $u2, reaches no manager socket, sees its own cgroup as 0::/"

# a nested limit above the parent's is refused (the same check a worker's
# nested dispatch meets; here from the outside it is just the minimum)
out=$(as_user taskferry dispatch --executor shell --directory "$repo" --prompt - --memory-max 1M <<<"true" 2>&1) &&
  die "dispatch --memory-max 1M was accepted" "$out"
grep -q "memoryMax must be at least" <<<"$out" || die "dispatch --memory-max 1M: unexpected error" "$out"
ok "dispatch --memory-max 1M refused: $(head -n 1 <<<"$out")"

for t in "$t1" "$t2"; do
  out=$(as_user taskferry cancel "$t" 2>&1) || die "taskferry cancel $t failed" "$out"
done
wait_settled "$t1" cancelled
wait_settled "$t2" cancelled

# =========================================================================
step "scope: cancel leaves no process of the cgroup, a setsid() daemon that ignores SIGTERM included"
t3=$(dispatch_shell "setsid sh -c 'trap \"\" TERM; while :; do sleep 1; done' </dev/null >/dev/null 2>&1 & sleep 600" --no-sandbox)
wait_scope_active "$t3"
for ((i = 0; i < 50; i++)); do
  procs=$(cgroup_procs "$t3")
  [ "$(wc -w <<<"$procs")" -ge 4 ] && break # shim, sh, sleep 600, the daemon (and its sleep)
  sleep 0.2
done
[ "$(wc -w <<<"$procs")" -ge 4 ] || die "the scope of $t3 holds too few processes: '$procs'"
sessions=$(for p in $procs; do in_ct ps -o sid= -p "$p" 2>/dev/null || true; done | sort -u | wc -l)
[ "$sessions" -ge 2 ] || die "no setsid() process in the scope of $t3 (pids $procs)"
ok "scope of $t3 holds $procs (in $sessions sessions)"
out=$(as_user taskferry cancel "$t3" 2>&1) || die "taskferry cancel $t3 failed" "$out"
wait_settled "$t3" cancelled
# shellcheck disable=SC2086 # a list of pids
no_pid_alive "after cancel of $t3" $procs
left=$(cgroup_procs "$t3")
[ -z "$left" ] || die "the scope of $t3 still holds $left"
ok "the scope of $t3 is empty or gone ($(unit_prop "$(scope_of "$t3")" ActiveState || true))"

# =========================================================================
step "scope: systemctl --user restart taskferry.service re-adopts running workers by their unit"
check_managed_daemon
old_pid=$main_pid
t4=$(dispatch_shell "sleep 8; echo adopted > adopted.txt")
t5=$(dispatch_shell "setsid sh -c 'trap \"\" TERM; while :; do sleep 1; done' </dev/null >/dev/null 2>&1 & sleep 600" --no-sandbox)
wait_scope_active "$t4"
wait_scope_active "$t5"
for ((i = 0; i < 50; i++)); do
  procs5=$(cgroup_procs "$t5")
  [ "$(wc -w <<<"$procs5")" -ge 4 ] && break
  sleep 0.2
done
out=$(sysu restart taskferry.service 2>&1) || die "systemctl --user restart taskferry.service failed" "$out"
check_managed_daemon
[ "$main_pid" != "$old_pid" ] || die "MainPID $main_pid did not change across the restart"
for t in "$t4" "$t5"; do
  expect_eq "$(status_field "$t" status)" running "status of $t after the restart"
  expect_eq "$(status_field "$t" unit)" "$(scope_of "$t")" "unit of $t after the restart"
  expect_eq "$(unit_prop "$(scope_of "$t")" ActiveState)" active "$(scope_of "$t") after the restart"
done
wait_settled "$t4" done
expect_eq "$(status_field "$t4" exitCode)" 0 "exitCode of the re-adopted $t4"
out=$(as_user taskferry cancel "$t5" 2>&1) || die "taskferry cancel $t5 (after the restart) failed" "$out"
wait_settled "$t5" cancelled
# shellcheck disable=SC2086 # a list of pids
no_pid_alive "after cancel of the re-adopted $t5 (kill by unit)" $procs5
as_user taskferry reject "$t4" >/dev/null 2>&1 || true

# =========================================================================
step "scope: a worker allocating past --memory-max 64M ends crashed/oom_killed, the daemon and another task carry on"
ucg=/sys/fs/cgroup/user.slice/user-$uid.slice/user@$uid.service
ctrl=$(in_ct cat "$ucg/taskferry.slice/cgroup.controllers" 2>/dev/null || in_ct cat "$ucg/cgroup.controllers" 2>/dev/null || true)
if ! grep -qw memory <<<"$ctrl"; then
  echo "   SKIP: the memory controller is not delegated to user@$uid.service here (cgroup.controllers: '${ctrl}'); the kernel enforces no MemoryMax (the oom_killed mapping is unit-tested: tests/unit/test-scope.c)"
else
  check_managed_daemon
  pid_before=$main_pid
  other=$(dispatch_shell "sleep 5; echo fine > fine.txt")
  hog=$(dispatch_shell "head -c 1G /dev/zero | tail > /dev/null" --no-sandbox --memory-max 64M)
  wait_settled "$hog" crashed
  expect_eq "$(status_field "$hog" failureReason)" oom_killed "failureReason of $hog"
  detail=$(status_field "$hog" failureDetail)
  grep -q "MemoryMax=64.0 MiB" <<<"$detail" || die "failureDetail of $hog does not name the limit" "$detail"
  ok "failureDetail: $detail"
  wait_settled "$other" done
  expect_eq "$(unit_prop taskferry.service MainPID)" "$pid_before" "taskferry.service MainPID (the daemon carried on)"
  as_user taskferry reject "$other" >/dev/null 2>&1 || true
fi

out=$(sysu stop taskferry.service 2>&1) || die "systemctl --user stop taskferry.service failed" "$out"
as_user rm -f "$home/.config/taskferry/config.json" "$cgfile"
expect_eq "$(sysu is-active taskferry.socket || true)" active "taskferry.socket at the end of 20-scope"
