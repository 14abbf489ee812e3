# shellcheck shell=bash
# shellcheck disable=SC2154 # $prefix, $home, $task_timeout, ...: set by tests/e2e/run
# shellcheck disable=SC2016 # bash -c '...' scripts expand inside the container
# 70-jobs: timer jobs (taskferry-jobs(5)). Sourced by
# tests/e2e/run after its base steps, with its helpers in scope; starts and
# ends with taskferry.socket active and taskferry.service stopped.
#
# taskferry-job@demo.service, started by the user manager (its minimal
# environment), dispatches ~/.config/taskferry/jobs/demo.toml as an ordinary
# task: listed, done, changeset pending, the repo untouched. The timer
# enables and shows in list-timers and `taskferry job list`. Then the
# credentials: a job whose shell prompt needs DEMO_KEY, which is only in the
# daemon's env file (config.json envFile, 0600), fired by its timer (a
# drop-in schedule every few seconds) ends done.

job_timeout=90 # s, for a timer to fire / a job's task to settle

# job_last <name>: the lastTask of `taskferry job list --json` for the job ('' if none)
job_last() {
  local out
  out=$(as_user taskferry job list --json 2>&1) || die "taskferry job list --json failed" "$out"
  # rows are {"name":"<n>",...,"lastTask":"<id>"|null,...}: the row of $1
  printf '%s\n' "${out//\},\{/$'}\n{'}" | grep -F "\"name\":\"$1\"" | sed -n 's/.*"lastTask":"\([^"]*\)".*/\1/p' || true
}
# job_settled <task id>: wait, then print `taskferry status <id>` (lean)
job_settled() {
  local out
  out=$(as_user_t "$task_timeout" taskferry wait "$1" --timeout "$((task_timeout - 10))s" 2>&1) ||
    die "taskferry wait $1 failed" "$out" "$(as_user taskferry status "$1" --full 2>&1 || true)"
  as_user taskferry status "$1" 2>&1 || die "taskferry status $1 failed"
}
# job_write <name> <toml text>: ~/.config/taskferry/jobs/<name>.toml (0600)
job_write() {
  local out
  out=$(as_user bash -c 'set -e; umask 077; mkdir -p ~/.config/taskferry/jobs; cat > ~/.config/taskferry/jobs/"$1".toml' \
    _ "$1" <<<"$2" 2>&1) || die "cannot write the job file $1.toml" "$out"
}

# =========================================================================
step "timer jobs: link taskferry-job@.service and taskferry-job@.timer"
job_service_unit=$(find "$prefix" -name 'taskferry-job@.service' -type f)
job_timer_unit=$(find "$prefix" -name 'taskferry-job@.timer' -type f)
[ "$(printf '%s\n' "$job_service_unit" | grep -c .)" -eq 1 ] ||
  die "expected one installed taskferry-job@.service under $prefix, found: '$job_service_unit'"
[ "$(printf '%s\n' "$job_timer_unit" | grep -c .)" -eq 1 ] ||
  die "expected one installed taskferry-job@.timer under $prefix, found: '$job_timer_unit'"
expect_eq "$(sed -n 's/^ExecStart=//p' "$job_service_unit")" "$prefix/bin/taskferry job run %i" \
  "ExecStart of the installed taskferry-job@.service"
out=$(sysu link "$job_service_unit" "$job_timer_unit" 2>&1) || die "systemctl --user link of the job units failed" "$out"
sysu daemon-reload || die "systemctl --user daemon-reload failed"
expect_eq "$(unit_prop taskferry-job@demo.service LoadState)" loaded "taskferry-job@demo.service LoadState"
expect_eq "$(unit_prop taskferry-job@demo.timer LoadState)" loaded "taskferry-job@demo.timer LoadState"

# =========================================================================
step "systemctl --user start taskferry-job@demo.service dispatches the demo job (an ordinary task)"
jobrepo=$home/jobrepo
out=$(as_user bash -c 'set -e; git init -q jobrepo; cd jobrepo; git config user.email e2e@example.invalid
  git config user.name "taskferry e2e"; echo base >README; git add README; git commit -qm initial' 2>&1) ||
  die "cannot create the git repository $jobrepo" "$out"
job_write demo 'directory = "~/jobrepo"
executor = "shell"
prompt = """
echo from-the-timer-job > job.txt
"""'
out=$(sysu start taskferry-job@demo.service 2>&1) ||
  die "systemctl --user start taskferry-job@demo.service failed" "$out" \
    "$(in_ct journalctl --no-pager -q -n 30 _SYSTEMD_USER_UNIT=taskferry-job@demo.service + USER_UNIT=taskferry-job@demo.service 2>&1 || true)"
expect_eq "$(unit_prop taskferry-job@demo.service Result)" success "taskferry-job@demo.service Result"
expect_eq "$(unit_prop taskferry-job@demo.service ExecMainStatus)" 0 "taskferry-job@demo.service ExecMainStatus"
demo_task=$(job_last demo)
[ -n "$demo_task" ] || die "taskferry job list names no last task of demo" "$(as_user taskferry job list 2>&1 || true)"
ok "the job dispatched $demo_task"
out=$(as_user taskferry list --all 2>&1) || die "taskferry list --all failed" "$out"
# a table row while every row has the same keys, an item of a list once one
# has a key the others lack (a check verdict, a failure reason): TOON's two forms
grep -qE "^  $demo_task,|^  - id: $demo_task\$" <<<"$out" || die "taskferry list --all does not show $demo_task" "$out"
ok "taskferry list --all shows $demo_task"
out=$(job_settled "$demo_task")
expect_line "$out" "status: done" "status of the demo job's task"
expect_line "$out" "job: demo" "the task's job"
expect_line "$out" "changesetStatus: pending" "the demo job's changeset (held for the user)"
expect_line "$(as_user taskferry status "$demo_task" --full 2>&1)" "directory: $jobrepo" "the task's directory"
in_ct test ! -e "$jobrepo/job.txt" || die "the job's worker wrote into the repository directly"
out=$(as_user taskferry diff "$demo_task" 2>&1) || die "taskferry diff $demo_task failed" "$out"
expect_line "$out" "+from-the-timer-job" "the demo job's patch"
# the job service's stdout is the journal: the prompt must not be there
journal=$(in_ct journalctl --no-pager -q -o cat 2>&1) || die "journalctl failed" "$journal"
grep -qF "echo from-the-timer-job" <<<"$journal" && die "the demo job's prompt is in the journal" \
  "$(grep -F "echo from-the-timer-job" <<<"$journal")"
grep -qF "id: $demo_task" <<<"$journal" || die "the journal does not have the job service's output (id: $demo_task)"
ok "the journal has the job service's output (id: $demo_task) but not the prompt"

# =========================================================================
step "systemctl --user enable --now taskferry-job@demo.timer: listed, enabled, in taskferry job list"
out=$(sysu enable --now taskferry-job@demo.timer 2>&1) || die "systemctl --user enable --now taskferry-job@demo.timer failed" "$out"
expect_eq "$(sysu is-enabled taskferry-job@demo.timer 2>&1 || true)" enabled "systemctl --user is-enabled taskferry-job@demo.timer"
expect_eq "$(unit_state taskferry-job@demo.timer)" active "taskferry-job@demo.timer ActiveState"
out=$(sysu list-timers --all --no-pager 2>&1) || die "systemctl --user list-timers failed" "$out"
grep -q 'taskferry-job@demo\.timer *taskferry-job@demo\.service' <<<"$out" ||
  die "systemctl --user list-timers does not show taskferry-job@demo.timer" "$out"
ok "list-timers: $(grep -F 'taskferry-job@demo.timer' <<<"$out" | tr -s ' ')"
out=$(as_user taskferry job list 2>&1) || die "taskferry job list failed" "$out"
grep -qF 'active (enabled)' <<<"$out" || die "taskferry job list does not show the timer active (enabled)" "$out"
grep -qF "$demo_task" <<<"$out" || die "taskferry job list does not show the last task $demo_task" "$out"
ok "taskferry job list shows the timer active (enabled) and the last task"
out=$(as_user taskferry job list --json 2>&1)
grep -q '"nextRun":"20[0-9-]*T[0-9:.]*Z"' <<<"$out" || die "taskferry job list --json has no nextRun for the enabled timer" "$out"
ok "taskferry job list --json has the timer's nextRun"
out=$(sysu disable --now taskferry-job@demo.timer 2>&1) || die "systemctl --user disable --now taskferry-job@demo.timer failed" "$out"

# =========================================================================
step "credentials: a timer-fired job (minimal env) gets DEMO_KEY from the daemon's env file only"
# the key lives only in the env file (0600), named by config.json's envFile
out=$(as_user bash -c 'set -e; umask 077; mkdir -p ~/.config/taskferry
  printf "DEMO_KEY=secret\n" > ~/.config/taskferry/env
  printf "{\"envFile\": \"%s/.config/taskferry/env\"}\n" "$HOME" > ~/.config/taskferry/config.json
  stat -c %a ~/.config/taskferry/env' 2>&1) || die "cannot write the env file and config.json" "$out"
expect_eq "$out" 600 "mode of the env file"
# neither the user manager nor the CLI has it
manager_env=$(sysu show-environment 2>&1) || die "systemctl --user show-environment failed" "$manager_env"
! grep -q '^DEMO_KEY=' <<<"$manager_env" || die "DEMO_KEY is in the user manager's environment"
# the daemon reads config.json at its start: the next request starts a fresh one
sysu stop taskferry.service || die "systemctl --user stop taskferry.service failed"
job_write cred 'directory = "~/jobrepo"
executor = "shell"
prompt = "[ \"$DEMO_KEY\" = secret ] && echo key-seen > cred.txt"'
# fire from the timer, every 5 s by a drop-in (the default is daily)
out=$(as_user bash -c 'set -e; d=~/.config/systemd/user/taskferry-job@cred.timer.d; mkdir -p "$d"
  printf "[Timer]\nOnCalendar=\nOnCalendar=*:*:0/5\nAccuracySec=1s\n" > "$d/schedule.conf"' 2>&1) ||
  die "cannot write the timer drop-in" "$out"
sysu daemon-reload || die "systemctl --user daemon-reload failed"
out=$(sysu start taskferry-job@cred.timer 2>&1) || die "systemctl --user start taskferry-job@cred.timer failed" "$out"
cred_task=""
deadline=$((SECONDS + job_timeout))
while [ -z "$cred_task" ] && [ "$SECONDS" -lt "$deadline" ]; do
  sleep 1
  cred_task=$(job_last cred)
done
out=$(sysu stop taskferry-job@cred.timer 2>&1) || die "systemctl --user stop taskferry-job@cred.timer failed" "$out"
[ -n "$cred_task" ] || die "taskferry-job@cred.timer did not dispatch the cred job within ${job_timeout}s" \
  "$(sysu status taskferry-job@cred.timer taskferry-job@cred.service --no-pager 2>&1 || true)"
ok "the timer dispatched $cred_task"
expect_eq "$(unit_prop taskferry-job@cred.service Result)" success "taskferry-job@cred.service Result"
out=$(job_settled "$cred_task")
grep -qxF "status: done" <<<"$out" ||
  die "the cred job's task is not done: its worker did not see DEMO_KEY=secret, which only the daemon's env file (config.json envFile) holds — is the env file loaded by this daemon?" \
    "$out" "$(as_user taskferry status "$cred_task" --full 2>&1 || true)"
expect_line "$out" "status: done" "status of the cred job's task (the worker saw DEMO_KEY)"
out=$(as_user taskferry diff "$cred_task" 2>&1) || die "taskferry diff $cred_task failed" "$out"
expect_line "$out" "+key-seen" "the cred job's patch"

# leave things as found: no env file, no config, no job units running, the daemon stopped
out=$(as_user bash -c 'rm -f ~/.config/taskferry/env ~/.config/taskferry/config.json
  rm -rf ~/.config/systemd/user/taskferry-job@cred.timer.d' 2>&1) || die "cleanup failed" "$out"
sysu daemon-reload || die "systemctl --user daemon-reload failed"
sysu stop taskferry.service || die "systemctl --user stop taskferry.service failed"
expect_eq "$(sysu is-active taskferry.socket || true)" active "taskferry.socket after the jobs case"
