# shellcheck shell=bash
# shellcheck disable=SC2154 # $uid, $work, $repo, ...: the variables of tests/e2e/run
# e2e case: journald reports (src/daemon/journal.h, macro.h's
# log priorities). Sourced by tests/e2e/run after its base steps; starts and
# ends with taskferry.socket active and taskferry.service stopped.

journal_msgid=4dce0313cbcf459bbccb6c78dc414922
# the entries of MESSAGE_ID for one task, as JSON lines (journalctl -o json)
journal_entries() {
  in_ct journalctl --sync >/dev/null 2>&1 || true
  in_ct journalctl --no-pager -q -o json _UID="$uid" MESSAGE_ID="$journal_msgid" TASKFERRY_TASK_ID="$1" || true
}

step "journal: one structured entry per task state change, priorities on the daemon's stderr, no secrets"
# The secrets never appear on a command line (runuser and the user manager
# log command lines): written here, on the host side of the bound \$work, and
# read by the user's shell from there.
jdir=$work/journal-case
mkdir -p "$jdir"
chmod 0755 "$jdir"
journal_secret_prompt="tf-e2e-secret-prompt-$RANDOM$RANDOM$RANDOM"
journal_secret_env="tf-e2e-secret-env-$RANDOM$RANDOM$RANDOM"
# the worker fails unless the caller's env reached it, so the value is really in play
# shellcheck disable=SC2016 # $TF_E2E_TOKEN is the worker's
printf '# %s\n[ -n "$TF_E2E_TOKEN" ] && echo journal > journal.txt\n' "$journal_secret_prompt" >"$jdir/prompt"
printf '%s' "$journal_secret_env" >"$jdir/token"
chmod 0644 "$jdir/prompt" "$jdir/token"
out=$(as_user bash -c "TF_E2E_TOKEN=\$(cat '$jdir/token') taskferry dispatch --executor shell --directory '$repo' --prompt - <'$jdir/prompt'" 2>&1) ||
  die "taskferry dispatch (prompt on stdin) failed" "$out"
jtask=$(sed -n '/^id: /{s///p;q}' <<<"$out")
[ -n "$jtask" ] || die "no task id in the dispatch output" "$out"
out=$(as_user_t "$task_timeout" taskferry wait "$jtask" --timeout "$((task_timeout - 10))s" 2>&1) ||
  die "taskferry wait $jtask failed" "$out"
out=$(as_user taskferry status "$jtask" 2>&1) || die "taskferry status $jtask failed" "$out"
expect_line "$out" "status: done" "task $jtask (it saw TF_E2E_TOKEN)"
expect_line "$out" "changesetStatus: pending" "task $jtask changeset"
out=$(as_user taskferry reject "$jtask" 2>&1) || die "taskferry reject $jtask failed" "$out"
expect_line "$out" "changesetStatus: rejected" "taskferry reject"

# every transition, in order, with its fields
# (the overlay is set up, changeset none → pending, before the worker runs)
want="queued||none|
queued|queued|pending|none
running|queued|pending|pending
done|running|pending|pending
done|done|rejected|pending"
got=""
for _ in $(seq 1 50); do
  got=$(journal_entries "$jtask" | jq -r '[.TASKFERRY_STATUS, (.TASKFERRY_OLD_STATUS // ""), .TASKFERRY_CHANGESET, (.TASKFERRY_OLD_CHANGESET // "")] | join("|")')
  [ "$got" = "$want" ] && break
  sleep 0.2
done
[ "$got" = "$want" ] || die "journal entries of $jtask (status|old|changeset|old changeset) are not one per transition" \
  "expected:" "$want" "got:" "$got" "$(journal_entries "$jtask")"
ok "journalctl _UID=$uid MESSAGE_ID=$journal_msgid: 5 entries, queued, changeset pending, → running → done, changeset → rejected"
done_entry=$(journal_entries "$jtask" | jq -c 'select(.TASKFERRY_STATUS == "done" and .TASKFERRY_OLD_STATUS == "running")')
for kv in "MESSAGE=task $jtask: running → done (exit 0)" PRIORITY=6 SYSLOG_IDENTIFIER=taskferryd \
          "TASKFERRY_TASK_ID=$jtask" TASKFERRY_EXECUTOR=shell TASKFERRY_EXIT_CODE=0 _UID="$uid"; do
  expect_eq "$(jq -r --arg k "${kv%%=*}" '.[$k] // "(absent)"' <<<"$done_entry")" "${kv#*=}" "the done entry's ${kv%%=*}"
done
# the scope lane's unit, when the task has one, is on the entry as well
unit=$(as_user taskferry status "$jtask" --full --json | jq -r ".unit // empty" || true)
if [ -n "$unit" ]; then
  expect_eq "$(jq -r '.TASKFERRY_UNIT // "(absent)"' <<<"$done_entry")" "$unit" "the done entry's TASKFERRY_UNIT"
else
  expect_eq "$(jq -r '.TASKFERRY_UNIT // "(absent)"' <<<"$done_entry")" "(absent)" "TASKFERRY_UNIT of a task without a unit"
fi
fields=$(jq -r 'keys[] | select(startswith("TASKFERRY_"))' <<<"$done_entry" | tr '\n' ' ')
ok "fields of the done entry: $fields"

# the daemon's own diagnostics through the stream, with their priority: a
# --no-overlay dispatch into a sandbox warns
out=$(as_user taskferry dispatch --executor shell --directory "$repo" --no-overlay --prompt 'true' 2>&1) ||
  die "taskferry dispatch --no-overlay failed" "$out"
wtask=$(sed -n '/^id: /{s///p;q}' <<<"$out")
as_user_t "$task_timeout" taskferry wait "$wtask" --timeout "$((task_timeout - 10))s" >/dev/null 2>&1 ||
  die "taskferry wait $wtask failed"
in_ct journalctl --sync >/dev/null 2>&1 || true
warn=$(in_ct journalctl --no-pager -q -o json _UID="$uid" SYSLOG_IDENTIFIER=taskferryd _TRANSPORT=stdout PRIORITY=4 |
  jq -r --arg t "$wtask" 'select(.MESSAGE | contains("overlay disabled -- writes of task " + $t)) | .MESSAGE')
[ -n "$warn" ] || die "no PRIORITY=4 stream entry for the overlay warning of $wtask" \
  "$(in_ct journalctl --no-pager -q -o json _UID="$uid" SYSLOG_IDENTIFIER=taskferryd _TRANSPORT=stdout | jq -c '{PRIORITY, MESSAGE}' | tail -n 20)"
case "$warn" in "<"*) die "the <N> prefix was not parsed by journald: $warn" ;; esac
ok "stderr warning filed at PRIORITY=4: $warn"

# journalctl -x explains the entry from the installed catalog
catalog=$(find "$prefix" -name taskferry.catalog -type f)
[ -n "$catalog" ] || die "no taskferry.catalog installed under $prefix"
# The container's /usr (catalog dirs) is the host's, read-only, but its /var
# is its own: build the database from a root holding the system's catalogs
# plus ours (journalctl --root=R --update-catalog, what a package's
# post-install step runs against /), then put it where journalctl -x reads it.
catroot=$work/catalog-root
mkdir -p "$catroot/usr/lib/systemd/catalog"
cp /usr/lib/systemd/catalog/*.catalog "$catroot/usr/lib/systemd/catalog/" 2>/dev/null || true
cp "$catalog" "$catroot/usr/lib/systemd/catalog/"
if in_ct test -w /usr/lib/systemd/catalog; then
  if ! in_ct cp "$catalog" /usr/lib/systemd/catalog/ || ! in_ct journalctl --update-catalog; then
    die "journalctl --update-catalog failed"
  fi
  ok "installed $catalog into the container's /usr/lib/systemd/catalog, journalctl --update-catalog"
else
  out=$(in_ct journalctl --root="$catroot" --update-catalog 2>&1) || die "journalctl --root=$catroot --update-catalog failed" "$out"
  in_ct install -D -m 0644 "$catroot/var/lib/systemd/catalog/database" /var/lib/systemd/catalog/database ||
    die "cannot install the catalog database into the container's /var/lib/systemd/catalog"
  ok "catalog database built from $catalog (journalctl --root --update-catalog; the container's /usr is read-only)"
fi
expect_eq "$(in_ct journalctl --list-catalog "$journal_msgid" | awk '{print $1}')" "$journal_msgid" "journalctl --list-catalog"
out=$(in_ct journalctl --no-pager -q -x _UID="$uid" MESSAGE_ID="$journal_msgid" TASKFERRY_TASK_ID="$jtask" TASKFERRY_STATUS=done TASKFERRY_OLD_STATUS=running)
grep -qF "Subject: taskferry task $jtask is now done" <<<"$out" || die "journalctl -x shows no catalog text for the entry" "$out"
grep -qF "Defined-By: taskferry" <<<"$out" || die "journalctl -x: no Defined-By: taskferry" "$out"
grep -qF "(executor shell, model" <<<"$out" || die "journalctl -x: the body's @TASKFERRY_EXECUTOR@ is not filled in" "$out"
ok "journalctl -x: Subject: taskferry task $jtask is now done (Defined-By: taskferry)"

# the check gate: one entry per start and end, its own MESSAGE_ID, and never
# the check's output; it runs in the task's scope under the user manager
check_msgid=$(sed -n 's/^#define JOURNAL_TASK_CHECK_MESSAGE_ID "\(.*\)"$/\1/p' "$src/src/daemon/systemd/journal.h")
[ -n "$check_msgid" ] || die "no JOURNAL_TASK_CHECK_MESSAGE_ID in journal.h"
# the check prints a marker it holds in a file (no command line carries it)
journal_check_out="tf-e2e-check-output-$RANDOM$RANDOM"
printf 'check = "sh ./check.sh"\n' >"$jdir/gate.toml"
printf 'echo %s; exit 3\n' "$journal_check_out" >"$jdir/check.sh"
chmod 0644 "$jdir/gate.toml" "$jdir/check.sh"
out=$(as_user bash -c "set -e; git init -q gated; cd gated; git config user.email e2e@example.invalid
  git config user.name 'taskferry e2e'; cp '$jdir/gate.toml' .taskferry.toml; cp '$jdir/check.sh' check.sh
  git add .taskferry.toml check.sh; git commit -qm gate" 2>&1) || die "cannot create the gated repository" "$out"
out=$(as_user taskferry dispatch --executor shell --directory "$home/gated" --prompt 'echo x > added.txt' 2>&1) ||
  die "taskferry dispatch (gated) failed" "$out"
gtask=$(sed -n '/^id: /{s///p;q}' <<<"$out")
[ -n "$gtask" ] || die "no task id in the dispatch output" "$out"
check=""
for _ in $(seq 1 150); do
  check=$(as_user taskferry status "$gtask" --full --json | jq -r '.checkStatus // empty' || true)
  [ "$check" = failed ] && break
  sleep 0.2
done
[ "$check" = failed ] || die "the check gate of $gtask did not end failed (checkStatus: $check)" \
  "$(as_user taskferry status "$gtask" --full 2>&1 || true)"
got=""
for _ in $(seq 1 50); do
  in_ct journalctl --sync >/dev/null 2>&1 || true
  got=$(in_ct journalctl --no-pager -q -o json _UID="$uid" MESSAGE_ID="$check_msgid" TASKFERRY_TASK_ID="$gtask" |
    jq -r '[.TASKFERRY_CHECK_STATUS, (.TASKFERRY_CHECK_EXIT_CODE // "")] | join("|")' || true)
  [ "$got" = "running|
failed|3" ] && break
  sleep 0.2
done
[ "$got" = "running|
failed|3" ] || die "journal entries of $gtask's check gate (status|exit) are not running, then failed with 3" "got:" "$got"
ok "journalctl MESSAGE_ID=$check_msgid: the check gate of $gtask running, then failed (exit 3)"
out=$(as_user taskferry accept "$gtask" 2>&1) && die "accept of a changeset whose check failed succeeded" "$out"
grep -qF "command: sh ./check.sh (from .taskferry.toml)" <<<"$out" && grep -qF "$journal_check_out" <<<"$out" ||
  die "accept's refusal does not name the check and its output" "$out"
out=$(as_user taskferry reject "$gtask" 2>&1) || die "taskferry reject $gtask failed" "$out"
ok "accept refused the failed gate; rejected"

# nothing secret anywhere in the journal (every field of every entry)
in_ct journalctl --sync >/dev/null 2>&1 || true
whole=$work/journal-export
in_ct journalctl --no-pager -o export >"$whole" || die "journalctl -o export failed"
grep -qF "$jtask" "$whole" || die "the exported journal does not even name $jtask (export broken?)"
if grep -aqF "$journal_secret_prompt" "$whole"; then
  die "the task's prompt is in the journal" "$(grep -aF "$journal_secret_prompt" "$whole" | head -n 5)"
fi
if grep -aqF "tf-e2e-check-output-" "$whole"; then
  die "the check gate's output is in the journal" "$(grep -aF "tf-e2e-check-output-" "$whole" | head -n 5)"
fi
if grep -aqF "$journal_secret_env" "$whole"; then
  die "an environment value of the task is in the journal" "$(grep -aF "$journal_secret_env" "$whole" | head -n 5)"
fi
ok "the whole journal ($(wc -c <"$whole") bytes exported) holds neither the prompt, the env value nor a check's output"
rm -f "$whole"

out=$(sysu stop taskferry.service 2>&1) || die "systemctl --user stop taskferry.service failed" "$out"
expect_eq "$(unit_state taskferry.socket)" active "taskferry.socket at the end of the journal case"
