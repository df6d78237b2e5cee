#!/usr/bin/env bash
# Integration: `skillfs run` and `skillfs runs` (issue 16, item 5; README
# "From the command line: skillfs run and skillfs runs"): a run made through the mount's files,
# its transcript shown on stderr as it grows, the result on stdout, and the
# exit status 0 completed, 1 failed, 2 cancelled, 3 waiting for a person.
. "$(dirname "$0")/lib.sh"

: "${FAKE_MODEL:?FAKE_MODEL must name tests/fake_model}"

# setup MODEL_YAML [EXTRA_TOP_LEVEL_YAML]: config.yaml with one skill and
# the configurations default and other, and a mount of it.
setup() {
	rm -rf "$T/state"
	mkdir -p "$T/skills/note" "$T/work"
	printf -- '---\nname: note\ndescription: a note\n---\nBody.\n' >"$T/skills/note/SKILL.md"
	echo "hello from a file" >"$T/work/a.txt"
	cat >"$T/config.yaml" <<CFG
sources: [{path: skills, trust: first_party}]
model: $1
tools: {registered: [read, write, ask_user]${2:-}}
runs: {workers: 1, workdir_roots: [$T/work]}
configurations:
  default: {skills: [note]}
  other: {skills: []}
CFG
	start_mount -c "$T/config.yaml" --state "$T/state/state.db"
}

scripted() { echo "{provider: command, command: [$FAKE_MODEL, $T/script.json], timeout: 30}"; }

# run_id_of STDERR_FILE: the id `skillfs run` said it started.
run_id_of() { sed -n 's/^skillfs run: run \([^ ]*\) started.*/\1/p' "$1" | head -1; }

test_echo_run_prints_result_and_exits_0() {
	setup '{provider: echo}' || return
	local out rc=0
	out=$("$SKILLFS" run -C "$MNT" --config other "say" "hello" 2>"$T/err") || rc=$?
	assert_eq 0 "$rc" "exit status of a completed run ($(cat "$T/err"))"
	grep -q '^echo: say hello$' <<<"$out" || fail "result not on stdout: [$out]"
	local id
	id=$(run_id_of "$T/err")
	[ -n "$id" ] || fail "no run id on stderr: $(cat "$T/err")"
	assert_eq other "$(cat "$MNT/runs/$id/config")" "--config reached the run"
	# The result is the run's result file, byte for byte.
	assert_eq "$(cat "$MNT/runs/$id/result")" "$out" "stdout is runs/<id>/result"
	# The prompt from standard input, -C from SKILLFS_MOUNT, and the current
	# directory inside the mount.
	out=$(echo "from stdin" | SKILLFS_MOUNT=$MNT "$SKILLFS" run - 2>/dev/null) ||
		fail "run with the prompt on stdin failed"
	grep -q '^echo: from stdin$' <<<"$out" || fail "stdin prompt: [$out]"
	out=$(cd "$MNT/skills" && "$SKILLFS" run "from inside" 2>/dev/null) ||
		fail "run from a directory in the mount failed"
	grep -q '^echo: from inside$' <<<"$out" || fail "cwd mount: [$out]"
	# --skill and --workdir are written before the prompt.
	out=$("$SKILLFS" run -C "$MNT" --config other --skill note --workdir "$T/work" x 2>"$T/err") ||
		fail "run with --skill and --workdir failed: $(cat "$T/err")"
	id=$(run_id_of "$T/err")
	assert_eq note "$(cat "$MNT/runs/$id/skills")" "--skill reached the run"
	assert_eq "$T/work" "$(cat "$MNT/runs/$id/workdir")" "--workdir reached the run"
}

test_refused_write_exits_4_and_leaves_no_run() {
	setup '{provider: echo}' || return
	local before rc=0
	before=$(ls "$MNT/runs" | wc -l)
	"$SKILLFS" run -C "$MNT" --config no-such-config hi >/dev/null 2>"$T/err" || rc=$?
	assert_eq 4 "$rc" "exit status when the mount refuses the configuration"
	grep -q "no-such-config" "$T/err" || fail "the refusal does not name the value: $(cat "$T/err")"
	assert_eq "$before" "$(ls "$MNT/runs" | wc -l)" "a refused run was left behind"
	rc=0
	"$SKILLFS" run -C "$T" hi >/dev/null 2>"$T/err" || rc=$?
	assert_eq 4 "$rc" "exit status for a directory that is not a mount"
	grep -q "not a skillfs mount" "$T/err" || fail "message: $(cat "$T/err")"
}

test_failing_model_exits_1_with_error() {
	echo '[{"stderr": "the model broke down", "exit": 3}]' >"$T/script.json"
	setup "$(scripted)" || return
	local out rc=0
	out=$("$SKILLFS" run -C "$MNT" "do it" 2>"$T/err") || rc=$?
	assert_eq 1 "$rc" "exit status of a failed run"
	[ -z "$out" ] || fail "a failed run printed on stdout: [$out]"
	grep -q "failed: .*the model broke down" "$T/err" || fail "error not on stderr: $(cat "$T/err")"
}

test_approval_exits_3_with_pending() {
	echo '[{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
	  "function": {"name": "read", "arguments": "{\"path\": \"/workdir/a.txt\"}"}}]},
	  {"role": "assistant", "content": "done"}]' >"$T/script.json"
	setup "$(scripted)" ", approval: [read]" || return
	local out rc=0 id
	out=$("$SKILLFS" run -C "$MNT" --workdir "$T/work" "read it" 2>"$T/err") || rc=$?
	assert_eq 3 "$rc" "exit status of a run waiting for approval ($(cat "$T/err"))"
	grep -q "approval: read" <<<"$out" || fail "pending not printed: [$out]"
	id=$(run_id_of "$T/err")
	grep -qF "echo approve > $MNT/runs/$id/ctl" <<<"$out" || fail "no command to answer: [$out]"
	# The command it printed works.
	echo approve >"$MNT/runs/$id/ctl"
	assert_eq completed "$(cat "$MNT/runs/$id/wait")" "the run after the printed approve"
}

test_progress_shows_before_the_run_ends() {
	# Turn 1 calls read; turn 2 takes 4 s: the call and its result must be
	# on stderr while the run still runs.
	echo '[{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
	  "function": {"name": "read", "arguments": "{\"path\": \"/workdir/a.txt\"}"}}]},
	  {"sleep_ms": 4000, "role": "assistant", "content": "all done"}]' >"$T/script.json"
	setup "$(scripted)" || return
	"$SKILLFS" run -C "$MNT" --workdir "$T/work" "read it" >"$T/out" 2>"$T/err" &
	local pid=$! seen=0 id
	for _ in $(seq 1 150); do
		if grep -q "hello from a file" "$T/err"; then
			seen=1
			break
		fi
		sleep 0.02
	done
	id=$(run_id_of "$T/err")
	if [ "$seen" = 1 ]; then
		assert_eq running "$(cat "$MNT/runs/$id/status")" "the run when its progress showed"
		grep -q "→ read" "$T/err" || fail "the call is not shown: $(cat "$T/err")"
	else
		fail "no progress on stderr within 3 s: $(cat "$T/err")"
	fi
	local rc=0
	wait "$pid" || rc=$?
	assert_eq 0 "$rc" "exit status"
	assert_eq "all done" "$(cat "$T/out")" "result"
	# Each step once: the tool result line is not repeated.
	assert_eq 1 "$(grep -c "hello from a file" "$T/err")" "a transcript line shown twice"
	# Not a terminal: no spinner.
	grep -q $'\r' "$T/err" && fail "spinner output on a non-terminal"
	return 0
}

test_sigint_cancels_and_exits_2() {
	echo '[{"sleep_ms": 20000, "role": "assistant", "content": "late"}]' >"$T/script.json"
	setup "$(scripted)" || return
	"$SKILLFS" run -C "$MNT" "wait" >"$T/out" 2>"$T/err" &
	local pid=$! id=
	for _ in $(seq 1 100); do
		id=$(run_id_of "$T/err")
		[ -n "$id" ] && [ "$(cat "$MNT/runs/$id/status" 2>/dev/null)" = running ] && break
		sleep 0.05
	done
	kill -INT "$pid"
	local rc=0
	wait "$pid" || rc=$?
	assert_eq 2 "$rc" "exit status after SIGINT"
	assert_eq cancelled "$(cat "$MNT/runs/$id/status")" "the run after SIGINT"
}

test_runs_lists_from_mount_and_state() {
	setup '{provider: echo}' || return
	"$SKILLFS" run -C "$MNT" "first prompt line" >/dev/null 2>&1 || fail "run 1"
	printf 'second one\nmore lines\n' | "$SKILLFS" run -C "$MNT" --config other >/dev/null 2>&1 ||
		fail "run 2"
	local out
	out=$("$SKILLFS" runs -C "$MNT") || fail "skillfs runs failed"
	assert_eq 3 "$(wc -l <<<"$out")" "header and two runs: [$out]"
	grep -qE '^ID +STATE +CONFIG +AGE +PROMPT$' <<<"$out" || fail "header: [$out]"
	grep -qE ' completed +default +[0-9]+s +first prompt line$' <<<"$out" || fail "run 1: [$out]"
	grep -qE ' completed +other +[0-9]+s +second one$' <<<"$out" || fail "run 2: [$out]"
	# Oldest first.
	[ "$(sed -n 2p <<<"$out" | grep -c first)" = 1 ] || fail "order: [$out]"
	# The same from the database, read-only, while the mount holds it.
	local db
	db=$("$SKILLFS" runs --state "$T/state/state.db") || fail "runs --state failed"
	assert_eq "$(awk '{print $1, $2, $3, $5, $6}' <<<"$out")" \
		"$(awk '{print $1, $2, $3, $5, $6}' <<<"$db")" "runs --state"
	local rc=0
	"$SKILLFS" runs --state "$T/nothing.db" >/dev/null 2>&1 || rc=$?
	assert_eq 4 "$rc" "runs --state of a missing file"
	[ ! -e "$T/nothing.db" ] || fail "runs --state made a database"
}

run_tests
