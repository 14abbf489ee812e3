# shellcheck shell=bash
# shellcheck disable=SC2154,SC2016  # sourced by tests/e2e/run, which sets home, repo, uid, ...
# The env file under a real user manager (taskferryd(8)
# ENVIRONMENT FILE): TASKFERRY_ENV_FILE set in the manager's environment;
# a 0644 file makes taskferry.service fail to start and the CLI says why; a
# 0600 file's key reaches a worker whose dispatching CLI does not have it; a
# rename over the file reaches the next dispatch without a restart; config.json's
# envFile works the same (what a timer job relies on); the key never shows in
# the journal. Sourced by tests/e2e/run.

ef_dir=$home/.config/taskferry
ef=$ef_dir/env
ef_key=sk-e2e-envfile-5c1d9b7a3e
ef_key2=sk-e2e-envfile-rotated-82f4
ef_hash() { printf %s "$1" | sha256sum | cut -c1-16; }

# dispatch a shell task in $repo that prints the hash of $TF_E2E_KEY; sets ef_got
# to its message (never call it in a $(...) or a condition: die must end the run)
ef_run_worker() {
  local out id
  out=$(as_user taskferry dispatch --executor shell --directory "$repo" \
    --prompt 'printf %s "$TF_E2E_KEY" | sha256sum | cut -c1-16' 2>&1) || die "taskferry dispatch failed" "$out"
  id=$(sed -n '/^id: /{s///p;q}' <<<"$out")
  [ -n "$id" ] || die "no task id in the dispatch output" "$out"
  out=$(as_user_t "$task_timeout" taskferry wait "$id" --timeout "$((task_timeout - 10))s" 2>&1) ||
    die "taskferry wait $id failed" "$out"
  out=$(as_user taskferry result "$id" --json 2>&1) || die "taskferry result $id failed" "$out"
  ef_got=$(jq -r .message <<<"$out" | tr -d '\n') || die "no message in the result of $id" "$out"
}

# =========================================================================
step "env file: a 0644 file makes taskferry.service fail to start, the CLI says why"
# the keys go through stdin, never a command line (runuser logs its command line)
out=$(as_user bash -c "mkdir -p '$ef_dir' && cat > '$ef' && chmod 644 '$ef'" <<<"export TF_E2E_KEY=$ef_key" 2>&1) ||
  die "cannot write $ef" "$out"
out=$(sysu set-environment "TASKFERRY_ENV_FILE=$ef" 2>&1) || die "systemctl --user set-environment failed" "$out"
if out=$(sysu start taskferry.service 2>&1); then
  die "taskferry.service started with a 0644 env file" "$out"
fi
# exit 78 (EX_CONFIG): RestartPreventExitStatus= keeps systemd from retrying
deadline=$((SECONDS + 30))
while [ "$(unit_state taskferry.service)" != failed ]; do
  [ "$SECONDS" -lt "$deadline" ] || die "taskferry.service never ended failed (ActiveState $(unit_state taskferry.service))"
  sleep 0.3
done
expect_eq "$(unit_state taskferry.service)" failed "taskferry.service ActiveState with a 0644 env file"
expect_eq "$(unit_prop taskferry.service ExecMainStatus)" 78 "taskferry.service ExecMainStatus (EX_CONFIG)"
expect_eq "$(unit_prop taskferry.service NRestarts)" 0 "taskferry.service NRestarts (a broken file is not retried)"
ok "systemctl --user start taskferry.service failed"
sysu reset-failed taskferry.service >/dev/null 2>&1 || true
[ "$(unit_state taskferry.socket)" = active ] || { sysu reset-failed taskferry.socket; sysu start taskferry.socket; } >/dev/null 2>&1
if out=$(as_user taskferry list 2>&1); then
  die "taskferry list succeeded with a 0644 env file" "$out"
fi
grep -qF "daemon boot failed: " <<<"$out" || die "the CLI does not say the daemon's start failed" "$out"
grep -qF "readable by group or other (mode 0644)" <<<"$out" || die "the CLI does not give the reason" "$out"
grep -qF "chmod 600" <<<"$out" || die "the CLI does not suggest chmod 600" "$out"
ok "taskferry list: $(grep -F 'daemon boot failed' <<<"$out" | head -n 1)"
jout=$(in_ct journalctl --no-pager -q _UID="$uid" 2>&1 || true)
grep -qF "readable by group or other" <<<"$jout" || die "the journal does not say why taskferry.service failed" "$(tail -n 20 <<<"$jout")"
ok "the journal says why"

# =========================================================================
step "env file: mode 0600, the key reaches a worker (the CLI's environment has none)"
sysu reset-failed taskferry.service taskferry.socket >/dev/null 2>&1 || true
out=$(sysu start taskferry.socket 2>&1) || die "systemctl --user start taskferry.socket failed" "$out"
out=$(as_user chmod 600 "$ef" 2>&1) || die "chmod 600 $ef failed" "$out"
out=$(as_user env)
! grep -q '^TF_E2E_KEY=' <<<"$out" || die "the test's CLI environment has TF_E2E_KEY"
ef_run_worker
expect_eq "$ef_got" "$(ef_hash "$ef_key")" "hash of the worker's TF_E2E_KEY"
check_managed_daemon
ef_pid=$main_pid

# =========================================================================
step "env file: a rename over the file reaches the next dispatch, same daemon"
out=$(as_user bash -c "umask 077; cat > '$ef.tmp' && mv -f '$ef.tmp' '$ef'" <<<"TF_E2E_KEY=$ef_key2" 2>&1) ||
  die "cannot replace $ef" "$out"
deadline=$((SECONDS + 10))
while :; do
  ef_run_worker
  [ "$ef_got" != "$(ef_hash "$ef_key2")" ] || break
  [ "$SECONDS" -lt "$deadline" ] || die "the rotated key never reached a worker (got $ef_got)"
  sleep 0.5
done
ok "the worker sees the rotated key"
expect_eq "$(unit_prop taskferry.service MainPID)" "$ef_pid" "taskferry.service MainPID (no restart)"

# =========================================================================
step "env file: config.json's envFile (a timer job's daemon has no TASKFERRY_ENV_FILE)"
out=$(sysu stop taskferry.service 2>&1) || die "systemctl --user stop taskferry.service failed" "$out"
out=$(sysu unset-environment TASKFERRY_ENV_FILE 2>&1) || die "systemctl --user unset-environment failed" "$out"
ef_cfg=$ef_dir/config.json
ef_cfg_saved=
if in_ct test -e "$ef_cfg"; then
  ef_cfg_saved=$(in_ct cat "$ef_cfg")
fi
out=$(as_user bash -c "printf '{\"envFile\": \"%s\"}\n' '$ef' > '$ef_cfg'" 2>&1) || die "cannot write $ef_cfg" "$out"
ef_run_worker
expect_eq "$ef_got" "$(ef_hash "$ef_key2")" "hash of the worker's TF_E2E_KEY (envFile in config.json)"

# =========================================================================
step "env file: the keys are not in the journal, and clean up"
jout=$(in_ct journalctl --no-pager -q -o verbose 2>&1 || true)
! grep -qF "$ef_key" <<<"$jout" || die "the journal holds the env file's first key" "$(grep -F "$ef_key" <<<"$jout")"
! grep -qF "$ef_key2" <<<"$jout" || die "the journal holds the env file's rotated key" "$(grep -F "$ef_key2" <<<"$jout")"
ok "neither key is in the journal"
out=$(sysu stop taskferry.service 2>&1) || die "systemctl --user stop taskferry.service failed" "$out"
if [ -n "$ef_cfg_saved" ]; then
  as_user bash -c "cat > '$ef_cfg'" <<<"$ef_cfg_saved" || die "cannot restore $ef_cfg"
else
  as_user rm -f "$ef_cfg" || die "cannot remove $ef_cfg"
fi
as_user rm -f "$ef" || die "cannot remove $ef"
sysu reset-failed taskferry.service >/dev/null 2>&1 || true
expect_eq "$(sysu is-active taskferry.socket || true)" active "taskferry.socket at the end"
expect_eq "$(unit_state taskferry.service)" inactive "taskferry.service at the end"
