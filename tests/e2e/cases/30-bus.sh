# shellcheck shell=bash
# The D-Bus API on the real user bus (taskferryd(8) "D-BUS"):
# activation by the first busctl call, tree/introspect, a task's Status through
# its transitions, TaskStateChanged/PropertiesChanged seen by a client,
# ListTasks, CancelTask, nothing secret on the bus, and no bus in a sandbox.
# Sourced by tests/e2e/run (helpers there).

bus_name=org.taskferry.Taskferry1
bus_mpath=/org/taskferry/Taskferry1
bus_miface=org.taskferry.Taskferry1.Manager
bus_tiface=org.taskferry.Taskferry1.Task
bus_act=$home/.local/share/dbus-1/services/$bus_name.service

# sd_bus_path_encode(3) of a task id, written out: [A-Za-z0-9] kept, other bytes _xx
bus_path_of() {
  local id=$1 out=$bus_mpath/task/ i c
  for ((i = 0; i < ${#id}; i++)); do
    c=${id:i:1}
    case "$c" in [A-Za-z0-9]) out+=$c ;; *) out+=$(printf '_%02x' "'$c") ;; esac
  done
  printf '%s\n' "$out"
}
bus_status() { as_user busctl --user get-property "$bus_name" "$1" "$bus_tiface" Status 2>/dev/null; }
# wait until task object $1 has Status $2 (30 s)
bus_wait_status() {
  local i
  for ((i = 0; i < 300; i++)); do
    [ "$(bus_status "$1")" = "s \"$2\"" ] && return 0
    sleep 0.1
  done
  die "$1 never reached Status $2" "$(bus_status "$1")"
}

step "D-Bus activation: with taskferry.service stopped, the first busctl call starts it"
act_src=$(find "$prefix" -path '*/dbus-1/services/*' -name "$bus_name.service" -type f | head -1)
[ -n "$act_src" ] || act_src=$src/units/$bus_name.service # before the install rules: the source file
[ -f "$act_src" ] || die "no D-Bus activation file $bus_name.service (under $prefix or $src/units)"
grep -qxF "SystemdService=taskferry.service" "$act_src" || die "$act_src does not name taskferry.service" "$(cat "$act_src")"
out=$(as_user bash -c "mkdir -p ${bus_act%/*} && cat >$bus_act" <"$act_src" 2>&1) || die "cannot install $bus_act" "$out"
out=$(as_user busctl --user call org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus ReloadConfig 2>&1) ||
  die "ReloadConfig of the user bus failed" "$out"
expect_eq "$(unit_state taskferry.service)" inactive "taskferry.service before the first busctl call"
expect_eq "$(daemon_pids)" "" "taskferryd processes before the first busctl call"
out=$(as_user busctl --user tree --list "$bus_name" 2>&1) || die "busctl --user tree $bus_name failed" "$out"
check_managed_daemon
expect_line "$out" "$bus_mpath" "busctl --user tree $bus_name"
expect_line "$out" "$(bus_path_of "$task")" "busctl --user tree $bus_name (the base steps' task)"
ok "busctl activated taskferry.service (pid $main_pid), whose tree lists the manager and the task"
expect_eq "$(unit_prop taskferry.service BusName)" "$bus_name" "taskferry.service BusName"
out=$(as_user busctl --user introspect "$bus_name" "$bus_mpath" 2>&1) || die "introspect $bus_mpath failed" "$out"
for m in "$bus_miface" org.freedesktop.DBus.ObjectManager .ListTasks .CancelTask .TaskStateChanged .Version; do
  grep -q -- "^$m " <<<"$out" || die "introspect $bus_mpath lacks $m" "$out"
done
expect_eq "$(as_user busctl --user get-property "$bus_name" "$bus_mpath" "$bus_miface" Version)" \
  "s \"$(as_user "$prefix/libexec/taskferryd" --version | cut -d' ' -f2)\"" "Manager.Version"
ok "the manager object shows $bus_miface and the object manager"

step "D-Bus: a task's Status follows queued -> running -> done, signals seen by a client"
mon_pid=$(as_user bash -c 'gdbus monitor --session --dest '"$bus_name"' >"$HOME/bus-monitor.out" 2>&1 </dev/null & echo $!') ||
  die "cannot start gdbus monitor"
for ((i = 0; i < 100; i++)); do
  as_user grep -q "is owned by" "$home/bus-monitor.out" 2>/dev/null && break
  sleep 0.1
done
as_user grep -q "is owned by" "$home/bus-monitor.out" || die "gdbus monitor did not start" "$(as_user cat "$home/bus-monitor.out" 2>&1)"
bus_secret_prompt=bus-e2e-prompt-6f0a
bus_secret_env=bus-e2e-env-value-91c2
out=$(printf 'sleep 3; echo %s > bus.txt\n' "$bus_secret_prompt" |
  as_user env BUS_E2E_SECRET="$bus_secret_env" taskferry dispatch --executor shell --directory "$repo" --prompt - 2>&1) ||
  die "taskferry dispatch failed" "$out"
bus_task=$(sed -n '/^id: /{s///p;q}' <<<"$out")
[ -n "$bus_task" ] || die "no task id in the dispatch output" "$out"
bus_tpath=$(bus_path_of "$bus_task")
seen=""
for ((i = 0; i < 600; i++)); do
  s=$(bus_status "$bus_tpath" || true)
  s=${s#s \"}
  s=${s%\"}
  case " $seen " in *" $s "*) ;; *) [ -z "$s" ] || seen="$seen $s" ;; esac
  [ "$s" = done ] && break
  sleep 0.05
done
seen=${seen# }
case "$seen" in "queued running done" | "running done") ok "get-property Status of $bus_task went: $seen" ;;
  *) die "get-property Status of $bus_task went '$seen', not queued -> running -> done" ;; esac
for tr in "'', 'queued'" "'queued', 'running'" "'running', 'done'"; do
  want="$bus_miface.TaskStateChanged ('$bus_task', objectpath '$bus_tpath', $tr)"
  for ((i = 0; i < 50; i++)); do as_user grep -qF "$want" "$home/bus-monitor.out" && break; sleep 0.1; done
  as_user grep -qF "$want" "$home/bus-monitor.out" || die "no signal $want" "$(as_user cat "$home/bus-monitor.out")"
  ok "TaskStateChanged ($tr)"
done
for s in queued running done; do
  want="$bus_tpath: org.freedesktop.DBus.Properties.PropertiesChanged ('$bus_tiface', {'Id': <'$bus_task'>, 'Status': <'$s'>"
  as_user grep -qF "$want" "$home/bus-monitor.out" || die "no PropertiesChanged with Status $s" "$(as_user cat "$home/bus-monitor.out")"
done
ok "PropertiesChanged for queued, running and done"

step "D-Bus: ListTasks and CancelTask"
out=$(sed 's/^id: //;t;d' <<<"$(as_user taskferry dispatch --executor shell --directory "$repo" --prompt 'sleep 120' 2>&1)")
bus_victim=$out
[ -n "$bus_victim" ] || die "taskferry dispatch (sleep 120) gave no id"
bus_vpath=$(bus_path_of "$bus_victim")
bus_wait_status "$bus_vpath" running
out=$(as_user busctl --user --json=short call "$bus_name" "$bus_mpath" "$bus_miface" ListTasks 2>&1) || die "ListTasks failed" "$out"
for row in "[\"$bus_task\",\"$bus_tpath\",\"done\"]" "[\"$bus_victim\",\"$bus_vpath\",\"running\"]"; do
  grep -qF "$row" <<<"$out" || die "ListTasks lacks $row" "$out"
done
ok "ListTasks lists both tasks with their paths and statuses"
out=$(as_user busctl --user call "$bus_name" "$bus_mpath" "$bus_miface" CancelTask s "$bus_victim" 2>&1) ||
  die "CancelTask $bus_victim failed" "$out"
bus_wait_status "$bus_vpath" cancelled
expect_line "$(as_user taskferry status "$bus_victim" 2>&1)" "status: cancelled" "taskferry status after CancelTask"
ok "CancelTask cancelled $bus_victim ($out)"

step "D-Bus: nothing secret on the bus, and no bus inside a sandbox"
out=$(as_user bash -c 'for p in $(busctl --user tree --list '"$bus_name"'); do busctl --user introspect '"$bus_name"' $p; done
  busctl --user call '"$bus_name $bus_mpath"' org.freedesktop.DBus.ObjectManager GetManagedObjects; cat "$HOME/bus-monitor.out"' 2>&1) ||
  die "cannot read the bus objects" "$out"
grep -qF "$bus_task" <<<"$out" || die "the dump of the bus objects lacks $bus_task" "$out"
! grep -qF "$bus_secret_prompt" <<<"$out" || die "the prompt is on the bus" "$(grep -F "$bus_secret_prompt" <<<"$out")"
! grep -qF "$bus_secret_env" <<<"$out" || die "an environment value is on the bus" "$(grep -F "$bus_secret_env" <<<"$out")"
ok "every property and signal seen: neither the prompt nor an env value"
out=$(as_user taskferry dispatch --executor shell --directory "$repo" --prompt \
  'echo addr=${DBUS_SESSION_BUS_ADDRESS:-none}; echo xdg=${XDG_RUNTIME_DIR:-none}
   test -e /run/user/$(id -u)/bus && echo runbus=visible || echo runbus=hidden
   busctl --address=unix:path=/run/user/$(id -u)/bus list >/dev/null 2>&1; echo busctl=$?' 2>&1) ||
  die "taskferry dispatch (bus probe) failed" "$out"
probe=$(sed -n '/^id: /{s///p;q}' <<<"$out")
out=$(as_user_t "$task_timeout" taskferry wait "$probe" 2>&1) || die "taskferry wait $probe failed" "$out"
out=$(as_user taskferry result "$probe" 2>&1) || die "taskferry result $probe failed" "$out"
for l in addr=none xdg=none runbus=hidden; do
  grep -qF "$l" <<<"$out" || die "the sandboxed bus probe did not say $l" "$out"
done
grep -qF "busctl=" <<<"$out" || die "the sandboxed bus probe did not run busctl" "$out"
! grep -qF "busctl=0" <<<"$out" || die "a sandboxed worker reached the user bus" "$out"
ok "a sandboxed worker has no bus address, no /run/user/$uid/bus, and cannot connect"

in_ct kill "$mon_pid" 2>/dev/null || true
as_user rm -f "$bus_act" "$home/bus-monitor.out"
as_user busctl --user call org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus ReloadConfig >/dev/null 2>&1 || true
out=$(sysu stop taskferry.service 2>&1) || die "systemctl --user stop taskferry.service failed" "$out"
expect_eq "$(sysu is-active taskferry.socket || true)" active "taskferry.socket at the end of the bus case"
