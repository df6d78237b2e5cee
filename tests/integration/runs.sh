#!/usr/bin/env bash
# Integration: runs through a real mount (DESIGN.md section 6, R3, R5-R8,
# D8-D10; issue "Runs"). Real echo (the bash builtin), cat, test, mkdir,
# rmdir, ls; the echo provider or the scripted tests/fake_model.
. "$(dirname "$0")/lib.sh"

: "${FAKE_MODEL:?FAKE_MODEL must name tests/fake_model}"

# make_skill DIR NAME ALLOWED: a skill; ALLOWED is the allowed-tools value
# or "-" for none.
make_skill() {
	mkdir -p "$1/$2"
	{
		echo "---"
		echo "name: $2"
		echo "description: test skill $2"
		[ "$3" = "-" ] || echo "allowed-tools: $3"
		echo "---"
		echo "Body of $2."
	} >"$1/$2/SKILL.md"
}

# write_config MODEL_YAML WORKERS: config.yaml with skills decl-a
# (read, write), decl-b (read), empty ([]), free (undeclared).
write_config() {
	rm -rf "$T/skills" "$T/state"
	mkdir -p "$T/skills"
	make_skill "$T/skills" decl-a "[read, write]"
	make_skill "$T/skills" decl-b "[read]"
	make_skill "$T/skills" empty "[]"
	make_skill "$T/skills" free -
	cat >"$T/config.yaml" <<CFG
sources: [{path: skills, trust: first_party}]
model: $1
runs: {workers: $2, prompt_max_bytes: 4096}
configurations:
  default: {skills: [decl-a, decl-b, free]}
  locked: {skills: [empty, free]}
  open: {skills: [free]}
CFG
}

echo_model='{provider: echo}'
start_with() { start_mount -c "$T/config.yaml" --state "$T/state/state.db"; }

new_run() { # -> prints the id of a fresh, created run
	local id
	id=$(cat "$MNT/runs/new") || return 1
	mkdir "$MNT/runs/$id" || return 1
	echo "$id"
}

test_echo_run_reads_result() {
	write_config "$echo_model" 2
	start_with || return
	assert_eq "new" "$(ls "$MNT/runs")" "runs/ holds only new before any run"
	local a b id
	a=$(cat "$MNT/runs/new")
	b=$(cat "$MNT/runs/new")
	assert_eq "new" "$(ls "$MNT/runs")" "reading runs/new created something"
	[ "$a" != "$b" ] || fail "two reads of runs/new gave the same id $a"
	assert_eq "$(stat -c %s "$MNT/runs/new")" "$(printf '%s\n' "$a" | wc -c)" "runs/new size"
	mkdir "$MNT/runs/$a" || fail "mkdir of the id runs/new offered failed"
	rmdir "$MNT/runs/$a"
	id=$(new_run) || { fail "mkdir failed"; return; }
	[ "$(cat "$MNT/runs/new")" != "$id" ] || fail "runs/new offers a taken id"
	# Scripts starting runs side by side each get their own id.
	local made
	made=$(seq 1 16 | xargs -P 8 -I{} sh -c 'id=$(cat "$1/runs/new") && mkdir "$1/runs/$id" && echo ok' _ "$MNT" |
		grep -c ok)
	assert_eq 16 "$made" "runs made by 16 scripts at once"
	assert_eq created "$(cat "$MNT/runs/$id/status")" "status after mkdir"
	echo "hello skillfs" >"$MNT/runs/$id/prompt"
	assert_eq completed "$(cat "$MNT/runs/$id/wait")" "wait returns the final status"
	assert_eq completed "$(cat "$MNT/runs/$id/status")" "status"
	grep -q "hello skillfs" "$MNT/runs/$id/result" || fail "result lacks the prompt: $(cat "$MNT/runs/$id/result")"
	grep -q "read" "$MNT/runs/$id/result" || fail "echo did not state the offered tools"
	[ ! -e "$MNT/runs/$id/error" ] || fail "error file on a completed run"
	assert_eq "$(printf 'read\nwrite')" "$(cat "$MNT/runs/$id/allowed-tools")" "stored allow-list (R6)"
	grep -q "hello skillfs" "$MNT/runs/$id/transcript" || fail "transcript lacks the prompt"
	python3 -m json.tool "$MNT/runs/$id/messages.json" >/dev/null || fail "messages.json is not JSON"
	python3 - "$MNT/runs/$id/info.json" <<'PY' || fail "info.json: $(cat "$MNT/runs/$id/info.json")"
import json, sys
i = json.load(open(sys.argv[1]))
assert i["state"] == "completed" and i["config"] == "default", i
assert i["mode"] == "inline" and i["model"] == "echo", i
assert i["messages"] == 3 and i["allow_list_stored"] is True, i
PY
	while read -r line; do
		python3 -c 'import json,sys; json.loads(sys.argv[1])' "$line" || fail "events line not JSON: $line"
	done <"$MNT/runs/$id/events"
	local f
	for f in "$MNT/runs/$id"/*; do
		[ "$(basename "$f")" = wait ] && continue
		assert_eq "$(wc -c <"$f")" "$(stat -c %s "$f")" "stat size of $(basename "$f")"
	done
}

# as_plain_user CMD...: runs CMD with no privileges: root's capabilities
# (which bypass the mode bits default_permissions checks) are dropped.
as_plain_user() {
	if [ "$(id -u)" != 0 ]; then
		"$@"
		return
	fi
	setpriv --bounding-set -all --inh-caps -all --securebits +noroot,+noroot_locked -- "$@"
}

test_user_without_privileges_makes_runs() {
	write_config "$echo_model" 2
	start_with || return
	as_plain_user true || { fail "cannot drop privileges with setpriv"; return; }
	local out
	out=$(as_plain_user bash -c '
		cd "$1/runs" || exit 1
		id=$(cat new) || exit 1
		mkdir "$id" || exit 2
		echo "from a plain user" >"$id/prompt" || exit 3
		[ "$(cat "$id/wait")" = completed ] || exit 4
		echo again 2>/dev/null >"$id/prompt" && exit 5
		rmdir "$id" || exit 6
		[ ! -e "$id" ] || exit 7
		echo done' _ "$MNT" 2>&1)
	assert_eq done "$out" "a user without privileges makes, runs and removes a run"
}

test_R3_declared_empty_gives_plain_completion() {
	write_config "$echo_model" 2
	start_with || return
	local id
	id=$(new_run) || { fail "mkdir failed"; return; }
	echo locked >"$MNT/runs/$id/config"
	echo "no tools please" >"$MNT/runs/$id/prompt"
	assert_eq completed "$(cat "$MNT/runs/$id/wait")" "wait"
	assert_eq 0 "$(stat -c %s "$MNT/runs/$id/allowed-tools")" "stored list is empty"
	grep -q "tools offered: none" "$MNT/runs/$id/result" ||
		fail "a [] configuration must be a plain completion: $(cat "$MNT/runs/$id/result")"
}

test_R7_queued_run_list_shrinks_never_grows() {
	printf '[{"sleep_ms": 1500, "dump_request": true}]\n' >"$T/script.json"
	write_config "{provider: command, command: [$FAKE_MODEL, $T/script.json], timeout: 30}" 1
	start_with || return
	local first second
	first=$(new_run) && second=$(new_run) || { fail "mkdir failed"; return; }
	echo "occupy the only worker" >"$MNT/runs/$first/prompt"
	wait_for 2 grep -qx running "$MNT/runs/$first/status" || fail "first run not running"
	echo "queued behind" >"$MNT/runs/$second/prompt"
	assert_eq queued "$(cat "$MNT/runs/$second/status")" "second run waits in the queue"
	assert_eq "$(printf 'read\nwrite')" "$(cat "$MNT/runs/$second/allowed-tools")" "stored at enqueue"
	# While it waits: the skill granting write goes, and another skill now
	# declares bash too.
	rm -rf "$T/skills/decl-a"
	sed -i 's/^allowed-tools: .*/allowed-tools: [read, bash]/' "$T/skills/decl-b/SKILL.md"
	wait_for 2 grep -qx 'bash' "$MNT/configs/default/allowed-tools" || fail "config did not reload"
	assert_eq completed "$(cat "$MNT/runs/$second/wait")" "second run"
	local res=$MNT/runs/$second/result
	grep -Eq '"name": ?"read"' "$res" || fail "read must stay offered: $(head -c 400 "$res")"
	grep -Eq '"name": ?"write"' "$res" && fail "write was removed while queued but still offered"
	grep -Eq '"name": ?"bash"' "$res" && fail "bash was added while queued: a wait must never widen"
	return 0
}

test_bad_writes_get_errno() {
	write_config "$echo_model" 2
	start_with || return
	local id
	id=$(new_run) || { fail "mkdir failed"; return; }
	expect_fail "Invalid argument" bash -c "echo no-such-config > '$MNT/runs/$id/config'"
	assert_eq default "$(cat "$MNT/runs/$id/config")" "a refused config write changes nothing"
	expect_fail "Invalid argument" bash -c "echo no-such-skill > '$MNT/runs/$id/skills'"
	expect_fail "File too large" bash -c "printf '%5000s' x > '$MNT/runs/$id/prompt'"
	assert_eq created "$(cat "$MNT/runs/$id/status")" "an oversized prompt starts nothing"
	echo open >"$MNT/runs/$id/config"
	echo free >"$MNT/runs/$id/skills"
	echo "go" >"$MNT/runs/$id/prompt"
	cat "$MNT/runs/$id/wait" >/dev/null
	expect_fail "Permission denied" bash -c "echo again > '$MNT/runs/$id/prompt'"
	# Opened to append or to read and write (no O_TRUNC): the open itself
	# is refused, as the mode bits say, for root too.
	python3 - "$MNT/runs/$id" <<'PY' || fail "a started run's prompt or result was opened to write"
import errno, os, sys
for name in ("prompt", "config", "result", "status"):
    for flags in (os.O_WRONLY | os.O_APPEND, os.O_RDWR):
        try:
            os.close(os.open(f"{sys.argv[1]}/{name}", flags))
        except OSError as e:
            assert e.errno == errno.EACCES, (name, e)
        else:
            raise SystemExit(f"{name} opened with flags {flags}")
PY
	expect_fail "Permission denied" bash -c "echo default > '$MNT/runs/$id/config'"
	expect_fail "Permission denied" bash -c "echo free > '$MNT/runs/$id/skills'"
	expect_fail "Permission denied" bash -c "echo x > '$MNT/runs/$id/status'"
	expect_fail "Invalid argument" mkdir "$MNT/runs/bad:id"
	expect_fail "Invalid argument" mkdir "$MNT/runs/has space"
	expect_fail "Invalid argument" mkdir "$MNT/runs/$(printf 'x%.0s' $(seq 1 65))"
	expect_fail "File exists" mkdir "$MNT/runs/$id"
	expect_fail "Permission denied" bash -c "echo cancel > '$MNT/runs/$id/ctl'"
	local other
	other=$(new_run) || return
	expect_fail "Invalid argument" bash -c "echo explode > '$MNT/runs/$other/ctl'"
	assert_eq created "$(cat "$MNT/runs/$other/status")" "a refused ctl write changes nothing"
	assert_eq open "$(cat "$MNT/runs/$id/config")" "config kept"
	assert_eq free "$(cat "$MNT/runs/$id/skills")" "forced skills kept"
}

test_rmdir_and_cancel() {
	printf '[{"sleep_ms": 3000}]\n' >"$T/script.json"
	write_config "{provider: command, command: [$FAKE_MODEL, $T/script.json], timeout: 30}" 1
	start_with || return
	local busy queued
	busy=$(new_run) && queued=$(new_run) || { fail "mkdir failed"; return; }
	echo "slow" >"$MNT/runs/$busy/prompt"
	echo "next" >"$MNT/runs/$queued/prompt"
	# A reader given up on (a signal) is released at once, leaving nothing
	# behind (the sanitizer build checks for leaks at unmount).
	timeout 0.3 cat "$MNT/runs/$busy/wait" >/dev/null
	assert_eq 124 "$?" "an interrupted wait reader is released by its signal"
	expect_fail "Device or resource busy" rmdir "$MNT/runs/$busy"
	echo cancel >"$MNT/runs/$queued/ctl"
	assert_eq cancelled "$(cat "$MNT/runs/$queued/wait")" "cancelled while queued"
	echo cancel >"$MNT/runs/$busy/ctl"
	assert_eq cancelled "$(timeout 5 cat "$MNT/runs/$busy/wait")" "cancelled while running"
	rmdir "$MNT/runs/$busy" || fail "rmdir of a finished run failed"
	[ ! -e "$MNT/runs/$busy" ] || fail "run still there after rmdir"
	ls "$MNT/runs" | grep -qx "$busy" && fail "removed run still listed"
	return 0
}

test_result_appears_for_polling_scripts() {
	printf '[{"sleep_ms": 600}]\n' >"$T/script.json"
	write_config "{provider: command, command: [$FAKE_MODEL, $T/script.json], timeout: 30}" 1
	start_with || return
	local id
	id=$(new_run) || { fail "mkdir failed"; return; }
	echo "poll me" >"$MNT/runs/$id/prompt"
	[ ! -e "$MNT/runs/$id/result" ] || fail "result exists before the run ends"
	local n=0
	until test -e "$MNT/runs/$id/result"; do
		n=$((n + 1))
		[ $n -lt 500 ] || { fail "result never appeared to test -e"; return; }
		sleep 0.02
	done
	grep -q "echo: poll me" "$MNT/runs/$id/result" || fail "result: $(cat "$MNT/runs/$id/result")"
	# poll() on status wakes when the run settles
	local id2
	id2=$(new_run) || return
	echo "poll status" >"$MNT/runs/$id2/prompt"
	python3 - "$MNT/runs/$id2/status" <<'PY' || fail "poll() on status did not report the settled run"
import select, sys, time
f = open(sys.argv[1], "rb")
p = select.poll()
p.register(f, select.POLLIN)
t = time.time()
while time.time() - t < 10:
    if p.poll(10000):
        f.seek(0)
        if f.read().strip() == b"completed":
            sys.exit(0)
    with open(sys.argv[1], "rb") as g:
        if g.read().strip() == b"completed":
            sys.exit(0)
sys.exit(1)
PY
}

# Names under runs/ are cached by the kernel (they live as long as their
# directory) and run directories cache their attributes until a state
# change: what a script sees must still follow every change.
test_cached_names_follow_changes() {
	write_config "$echo_model" 1
	start_with || return
	local id
	id=$(new_run) || { fail "mkdir failed"; return; }
	assert_eq 644 "$(stat -c %a "$MNT/runs/$id/prompt")" "prompt writable while created"
	ls "$MNT/runs/$id" | grep -qx result && fail "result listed before the run"
	echo "first" >"$MNT/runs/$id/prompt"
	assert_eq completed "$(cat "$MNT/runs/$id/wait")" "first run"
	assert_eq 444 "$(stat -c %a "$MNT/runs/$id/prompt")" "prompt read-only once started"
	ls "$MNT/runs/$id" | grep -qx result || fail "result not listed after the run: $(ls "$MNT/runs/$id")"
	assert_eq "$(wc -c <"$MNT/runs/$id/result")" "$(stat -c %s "$MNT/runs/$id/result")" \
		"stat size of result equals the bytes read"
	rmdir "$MNT/runs/$id" || { fail "rmdir failed"; return; }
	[ ! -e "$MNT/runs/$id/status" ] || fail "status of a removed run still there"
	mkdir "$MNT/runs/$id" || { fail "mkdir of a reused id failed"; return; }
	assert_eq created "$(cat "$MNT/runs/$id/status")" "a reused id is a new run"
	assert_eq 644 "$(stat -c %a "$MNT/runs/$id/prompt")" "the new run's prompt is writable"
	[ ! -e "$MNT/runs/$id/result" ] || fail "the old result shows in the new run"
	ls "$MNT/runs/$id" | grep -qx result && fail "the old result is listed in the new run"
	echo "second" >"$MNT/runs/$id/prompt"
	assert_eq completed "$(cat "$MNT/runs/$id/wait")" "second run"
	grep -q "echo: second" "$MNT/runs/$id/result" || fail "second result: $(cat "$MNT/runs/$id/result")"
	return 0
}

# A run file is rendered once per open and again only when the run
# changes: a big result read in small pieces equals one read and its stat
# size, and a file kept open shows the run as it is now.
test_open_run_file_follows_the_run() {
	python3 -c 'import json; print(json.dumps([{"reply": {"role": "assistant", "content": "y" * 300000}}]))' \
		>"$T/script.json"
	write_config "{provider: command, command: [$FAKE_MODEL, $T/script.json], timeout: 30}" 1
	start_with || return
	local id
	id=$(new_run) || { fail "mkdir failed"; return; }
	python3 - "$MNT/runs/$id" <<'PY' || fail "an open run file did not follow the run"
import os, sys
d = sys.argv[1]
fd = os.open(f"{d}/status", os.O_RDONLY)
assert os.pread(fd, 100, 0) == b"created\n", os.pread(fd, 100, 0)
with open(f"{d}/prompt", "w") as f:
    f.write("big answer\n")
with open(f"{d}/wait") as f:
    assert f.read() == "completed\n"
got = os.pread(fd, 100, 0)
assert got == b"completed\n", got
os.close(fd)
PY
	python3 - "$MNT/runs/$id/result" <<'PY' || fail "result read in pieces differs"
import os, sys
p = sys.argv[1]
whole = open(p, "rb").read()
assert whole == b"y" * 300000 + b"\n", len(whole)
assert os.stat(p).st_size == len(whole), os.stat(p).st_size
fd = os.open(p, os.O_RDONLY)
parts = []
while True:
    b = os.read(fd, 1000)
    if not b:
        break
    parts.append(b)
os.close(fd)
assert b"".join(parts) == whole, len(b"".join(parts))
PY
	[ "$(wc -c <"$MNT/runs/$id/transcript")" -gt 300000 ] || fail "transcript lacks the answer"
	return 0
}

# A skill run as a sub-agent shows under runs/<id>/subagents/<chat>/ with
# its transcript, messages, state, result and the tools it was offered.
test_subagent_files() {
	rm -rf "$T/skills" "$T/state"
	mkdir -p "$T/skills"
	make_skill "$T/skills" helper "[read, run_skill]"
	make_skill "$T/skills" free -
	cat >"$T/script.json" <<'JSON'
{"main": [{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
           "function": {"name": "run_skill", "arguments": "{\"name\": \"helper\", \"arguments\": \"look\"}"}}]},
          {"role": "assistant", "content": "main done"}],
 "skill-": [{"role": "assistant", "content": "helper done"}]}
JSON
	cat >"$T/config.yaml" <<CFG
sources: [{path: skills, trust: first_party}]
model: {provider: command, command: [$FAKE_MODEL, $T/script.json], timeout: 30}
skills: {execution_mode: subagent}
configurations:
  default: {skills: [helper, free]}
CFG
	start_with || return
	local id chat
	id=$(new_run) || { fail "mkdir failed"; return; }
	echo "use the helper" >"$MNT/runs/$id/prompt"
	assert_eq completed "$(cat "$MNT/runs/$id/wait")" "the run"
	ls "$MNT/runs/$id" | grep -qx subagents || { fail "no subagents/ in $(ls "$MNT/runs/$id")"; return; }
	chat=$(ls "$MNT/runs/$id/subagents")
	case $chat in skill-helper-*) ;; *) fail "sub-agent chat: '$chat'"; return ;; esac
	assert_eq "messages.json result state tools transcript" \
		"$(ls "$MNT/runs/$id/subagents/$chat" | tr '\n' ' ' | sed 's/ $//')" "sub-agent files"
	assert_eq completed "$(cat "$MNT/runs/$id/subagents/$chat/state")" "sub-agent state"
	assert_eq "helper done" "$(cat "$MNT/runs/$id/subagents/$chat/result")" "sub-agent result"
	assert_eq read "$(cat "$MNT/runs/$id/subagents/$chat/tools")" "sub-agent tools"
	grep -q "main done" "$MNT/runs/$id/result" || fail "result: $(cat "$MNT/runs/$id/result")"
	return 0
}

test_fifty_runs_four_workers() {
	write_config "$echo_model" 4
	start_with || return
	local ids=() i id
	for i in $(seq 1 50); do
		id=$(new_run) || { fail "mkdir $i failed"; return; }
		ids+=("$id")
	done
	local writers=()
	for i in "${!ids[@]}"; do
		echo "run number $i" >"$MNT/runs/${ids[$i]}/prompt" &
		writers+=($!)
	done
	wait "${writers[@]}"
	# Scripts side by side, each listing its run as soon as wait returns:
	# the result is listed then (the kernel's cached listing is dropped
	# before the waiters are answered).
	local missed
	missed=$(for i in 1 2 3; do
		(
			for _ in $(seq 1 40); do
				id=$(cat "$MNT/runs/new") && mkdir "$MNT/runs/$id" || exit 1
				ls "$MNT/runs/$id" >/dev/null
				echo p >"$MNT/runs/$id/prompt"
				cat "$MNT/runs/$id/wait" >/dev/null
				ls "$MNT/runs/$id" | grep -qx result || echo missed
			done
		) &
	done | grep -c missed)
	assert_eq 0 "$missed" "runs listed without their result right after wait"
	for i in "${!ids[@]}"; do
		assert_eq completed "$(timeout 30 cat "$MNT/runs/${ids[$i]}/wait")" "run $i"
		grep -q "echo: run number $i\$" "$MNT/runs/${ids[$i]}/result" ||
			fail "run $i result: $(cat "$MNT/runs/${ids[$i]}/result")"
	done
}

test_hundred_waiters_do_not_stall_the_mount() {
	printf '[{"sleep_ms": 4000}]\n' >"$T/script.json"
	write_config "{provider: command, command: [$FAKE_MODEL, $T/script.json], timeout: 30}" 1
	start_with || return
	local id i
	id=$(new_run) || return
	echo "slow" >"$MNT/runs/$id/prompt"
	local readers=()
	for i in $(seq 1 100); do
		cat "$MNT/runs/$id/wait" >"$T/w.$i" 2>&1 &
		readers+=($!)
	done
	sleep 0.5
	local s e
	s=$(date +%s%N)
	ls "$MNT/skills" >/dev/null && cat "$MNT/skills/decl-a/SKILL.md" >/dev/null && ls "$MNT/runs" >/dev/null &&
		cat "$MNT/runs/$id/status" >/dev/null || fail "mount did not answer with 100 blocked readers"
	e=$(date +%s%N)
	[ $(((e - s) / 1000000)) -lt 500 ] || fail "mount took $(((e - s) / 1000000)) ms with 100 blocked readers"
	assert_eq running "$(cat "$MNT/runs/$id/status")" "the run is still going while they wait"
	wait "${readers[@]}"
	for i in $(seq 1 100); do
		[ "$(cat "$T/w.$i")" = completed ] || { fail "reader $i got: $(cat "$T/w.$i")"; break; }
	done
}

test_sigterm_with_blocked_readers() {
	printf '[{"sleep_ms": 10000}]\n' >"$T/script.json"
	write_config "{provider: command, command: [$FAKE_MODEL, $T/script.json], timeout: 30}" 1
	start_with || return
	local id i
	id=$(new_run) || return
	echo "slow" >"$MNT/runs/$id/prompt"
	local pids=()
	for i in $(seq 1 20); do
		cat "$MNT/runs/$id/wait" >"$T/r.$i" 2>&1 &
		pids+=($!)
	done
	sleep 0.3
	local s e
	s=$(date +%s%N)
	kill -TERM "$DAEMON_PID"
	for _ in $(seq 1 100); do kill -0 "$DAEMON_PID" 2>/dev/null || break; sleep 0.02; done
	e=$(date +%s%N)
	kill -0 "$DAEMON_PID" 2>/dev/null && fail "daemon still alive 2 s after SIGTERM"
	[ $(((e - s) / 1000000)) -lt 2000 ] || fail "SIGTERM took $(((e - s) / 1000000)) ms"
	local ok=0
	for i in "${!pids[@]}"; do
		if wait "${pids[$i]}"; then ok=$((ok + 1)); fi
	done
	assert_eq 0 "$ok" "every blocked reader must get an error"
	grep -qs " $MNT fuse" /proc/self/mounts && fail "still mounted after SIGTERM"
	return 0
}

test_sigkill_mid_run_then_remount_completes() {
	cat >"$T/script.json" <<'JSON'
[{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
  "function": {"name": "write", "arguments": "{\"path\": \"a.txt\", \"content\": \"hi\"}"}}]},
 {"sleep_ms": 3000, "role": "assistant", "content": "finished after the crash"}]
JSON
	write_config "{provider: command, command: [$FAKE_MODEL, $T/script.json], timeout: 30}" 1
	start_with || return
	local id
	id=$(new_run) || return
	echo "crash me" >"$MNT/runs/$id/prompt"
	wait_for 5 grep -q '"role": "tool"' "$MNT/runs/$id/messages.json" || fail "tool step not committed"
	sleep 0.3
	kill -KILL "$DAEMON_PID"
	wait "$DAEMON_PID" 2>/dev/null
	DAEMON_PID=
	fusermount3 -uz "$MNT" 2>/dev/null
	start_with || return
	assert_eq completed "$(timeout 20 cat "$MNT/runs/$id/wait")" "resumed run"
	assert_eq "finished after the crash" "$(cat "$MNT/runs/$id/result")" "result"
	python3 - "$MNT/runs/$id/messages.json" <<'PY' || fail "messages lost or duplicated: $(cat "$MNT/runs/$id/messages.json")"
import json, sys
m = json.load(open(sys.argv[1]))
roles = [x["role"] for x in m]
assert roles == ["system", "user", "assistant", "tool", "assistant"], roles
PY
}

# Once the writer's `echo > prompt` returns, the run is queued and stored:
# a status read right after it never says created, and a crash right
# after it loses nothing.
test_closed_prompt_is_queued_and_stored() {
	printf '[{"sleep_ms": 50}]\n' >"$T/script.json"
	write_config "{provider: command, command: [$FAKE_MODEL, $T/script.json], timeout: 30}" 1
	start_with || return
	local ids= i id
	for i in $(seq 1 60); do
		id=$(new_run) || return
		ids="$ids $id"
	done
	local seen
	seen=$(for id in $ids; do
		(echo "p" >"$MNT/runs/$id/prompt"; cat "$MNT/runs/$id/status") &
	done | sort | uniq -c)
	case "$seen" in *created*) fail "a status read after the prompt's close said created: $seen" ;; esac
	id=$(new_run) || return
	echo "just closed" >"$MNT/runs/$id/prompt"
	kill -KILL "$DAEMON_PID"
	wait "$DAEMON_PID" 2>/dev/null
	DAEMON_PID=
	fusermount3 -uz "$MNT" 2>/dev/null
	start_with || return
	assert_eq "just closed" "$(cat "$MNT/runs/$id/prompt")" "the prompt after a crash"
	[ "$(cat "$MNT/runs/$id/status")" != created ] || fail "the run went back to created after a crash"
}

test_config_gone_before_enqueue_fails_clearly() {
	write_config "$echo_model" 1
	start_with || return
	local id
	id=$(new_run) || return
	echo open >"$MNT/runs/$id/config"
	sed -i '/^  open:/d' "$T/config.yaml"
	wait_for 1 test ! -e "$MNT/configs/open" || fail "config did not reload"
	echo "too late" >"$MNT/runs/$id/prompt"
	assert_eq failed "$(cat "$MNT/runs/$id/wait")" "run of a vanished configuration"
	grep -q "configuration 'open'" "$MNT/runs/$id/error" || fail "error: $(cat "$MNT/runs/$id/error")"
}

test_approval_and_question_through_files() {
	cat >"$T/script.json" <<'JSON'
[{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
  "function": {"name": "bash", "arguments": "{\"command\": \"echo approved-run > out.txt\"}"}}]},
 {"role": "assistant", "content": null, "tool_calls": [{"id": "c2", "type": "function",
  "function": {"name": "ask_user", "arguments": "{\"question\": \"Which colour?\"}"}}]},
 {"role": "assistant", "content": "done"}]
JSON
	write_config "{provider: command, command: [$FAKE_MODEL, $T/script.json], timeout: 30}" 1
	sed -i 's/^runs:/tools: {approval: [bash]}\nruns:/' "$T/config.yaml"
	start_with || return
	local id
	id=$(new_run) || return
	echo open >"$MNT/runs/$id/config"
	echo "needs a person" >"$MNT/runs/$id/prompt"
	assert_eq waiting_for_approval "$(cat "$MNT/runs/$id/wait")" "wait returns when a person is needed"
	grep -q "approval: bash" "$MNT/runs/$id/pending" || fail "pending: $(cat "$MNT/runs/$id/pending")"
	expect_fail "Permission denied" bash -c "echo blue > '$MNT/runs/$id/input'"
	echo approve >"$MNT/runs/$id/ctl"
	assert_eq waiting_for_input "$(cat "$MNT/runs/$id/wait")" "then the question"
	grep -q "Which colour?" "$MNT/runs/$id/pending" || fail "pending: $(cat "$MNT/runs/$id/pending")"
	# Refused by the write itself: bash's echo does not see an error at close.
	expect_fail "Invalid argument" bash -c "printf 'bl\\xffue\\n' > '$MNT/runs/$id/input'"
	assert_eq waiting_for_input "$(cat "$MNT/runs/$id/status")" "a refused answer changes nothing"
	assert_eq 0 "$(stat -c %s "$MNT/runs/$id/input")" "input before an answer is empty"
	# An answer cut short by a refused write is not sent.
	python3 - "$MNT/runs/$id/input" <<'PY' || fail "the second write of a bad answer was not refused"
import errno, os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_TRUNC)
os.write(fd, b"good part\n")
try:
    os.write(fd, b"bad\xff\n")
except OSError as e:
    assert e.errno == errno.EINVAL, e
else:
    raise SystemExit("accepted")
os.close(fd)
PY
	sleep 0.2
	assert_eq waiting_for_input "$(cat "$MNT/runs/$id/status")" "an answer cut short is not sent"
	echo blue >"$MNT/runs/$id/input"
	assert_eq completed "$(cat "$MNT/runs/$id/wait")" "after the answer"
	[ ! -e "$MNT/runs/$id/pending" ] || fail "pending left after the run ended"
	grep -q "blue" "$MNT/runs/$id/messages.json" || fail "the answer did not reach the model"
	grep -q '"type":"tool_call"' "$MNT/runs/$id/events" || fail "no tool_call event"
}

# The run starts when the last writer closes the prompt: a shell closes a
# copy of the descriptor in each command of `{ ...; } > prompt`.
test_prompt_written_by_several_commands() {
	write_config "$echo_model" 2
	start_with || return
	local id
	id=$(new_run) || return
	printf 'body line %s\n' 1 2 3 >"$T/body.txt"
	{
		echo "Header:"
		cat "$T/body.txt"
		sh -c 'sleep 0.2; echo middle'
		echo "Footer"
	} >"$MNT/runs/$id/prompt" || fail "writing the prompt failed"
	assert_eq completed "$(cat "$MNT/runs/$id/wait")" "the run ends"
	local want
	want=$(printf 'Header:\nbody line 1\nbody line 2\nbody line 3\nmiddle\nFooter')
	grep -qF "Footer" "$MNT/runs/$id/result" || fail "the run started before the prompt was whole: $(cat "$MNT/runs/$id/result")"
	python3 - "$MNT/runs/$id/messages.json" "$want" <<'PY' || fail "the model got another prompt"
import json, sys
msgs = json.load(open(sys.argv[1]))
users = [m["content"] for m in msgs if m["role"] == "user"]
assert users == [sys.argv[2] + "\n"], users
PY
	# A second descriptor that may write, closed first, starts nothing.
	id=$(new_run) || return
	python3 - "$MNT/runs/$id" <<'PY' || fail "a close of one of two writers started the run"
import os, sys, time
d = sys.argv[1]
a = os.open(f"{d}/prompt", os.O_WRONLY | os.O_TRUNC)
os.write(a, b"first half, ")
b = os.open(f"{d}/prompt", os.O_RDWR)
os.close(b)
time.sleep(0.1)
assert open(f"{d}/status").read() == "created\n", open(f"{d}/status").read()
os.write(a, b"second half\n")
os.close(a)
PY
	assert_eq completed "$(cat "$MNT/runs/$id/wait")" "the last close starts the run"
	grep -qF "first half, second half" "$MNT/runs/$id/result" || fail "result: $(cat "$MNT/runs/$id/result")"
}

test_prompt_and_skills_edits_are_whole() {
	write_config "$echo_model" 2
	start_with || return
	local id
	id=$(new_run) || return
	# A write past the end would leave NUL bytes: refused, not cut short.
	python3 - "$MNT/runs/$id/prompt" <<'PY' || fail "a write past the end was not refused with EINVAL"
import errno, os, sys
fd = os.open(sys.argv[1], os.O_WRONLY)
os.write(fd, b"hello")
try:
    os.pwrite(fd, b"world", 10)
except OSError as e:
    assert e.errno == errno.EINVAL, e
else:
    raise SystemExit("pwrite past the end succeeded")
os.close(fd)
PY
	assert_eq created "$(cat "$MNT/runs/$id/status")" "a refused prompt starts nothing"
	# After a refusal, the prompt written again from its start runs.
	expect_fail "File too large" bash -c "printf '%5000s' x > '$MNT/runs/$id/prompt'"
	echo "small" >>"$MNT/runs/$id/prompt"
	assert_eq completed "$(cat "$MNT/runs/$id/wait")" "a prompt written again after a refusal runs"
	grep -q small "$MNT/runs/$id/result" || fail "result: $(cat "$MNT/runs/$id/result")"
	# Emptying skills clears the forced skills.
	id=$(new_run) || return
	echo free >"$MNT/runs/$id/skills"
	: >"$MNT/runs/$id/skills"
	assert_eq "" "$(cat "$MNT/runs/$id/skills")" "skills after truncating"
	exec 7<"$MNT/runs/$id/skills"
	echo free >"$MNT/runs/$id/skills"
	truncate -s 0 "$MNT/runs/$id/skills"
	assert_eq "" "$(cat <&7)" "an open skills file reads what truncate left"
	exec 7<&-
	echo go >"$MNT/runs/$id/prompt"
	cat "$MNT/runs/$id/wait" >/dev/null
	python3 - "$MNT/runs/$id/info.json" <<'PY' || fail "info.json: $(cat "$MNT/runs/$id/info.json")"
import json, sys
i = json.load(open(sys.argv[1]))
assert i["forced_skills"] == [], i
PY
}

test_removed_run_id_comes_back_fresh() {
	write_config "$echo_model" 2
	start_with || return
	local id
	id=$(new_run) || return
	rmdir "$MNT/runs/$id" || { fail "rmdir of a created run failed"; return; }
	[ "$(cat "$MNT/runs/new")" != "$id" ] || fail "runs/new offers the id of a removed run"
	# The same name made again while something holds the old directory.
	mkdir "$MNT/runs/$id" || { fail "mkdir again failed"; return; }
	exec 6<"$MNT/runs/$id/status"
	rmdir "$MNT/runs/$id" || fail "rmdir with a file open failed"
	mkdir "$MNT/runs/$id" || fail "mkdir with the old one still open failed"
	assert_eq created "$(cat "$MNT/runs/$id/status")" "the new run's status"
	[ "$(cat <&6 2>/dev/null)" != created ] || fail "a descriptor of the removed run reads the new one"
	# A writer of the removed run does not reach the new run either.
	python3 - "$MNT/runs" "$id" <<'PY' || fail "a writer of a removed run reached the new run"
import os, sys
runs, rid = sys.argv[1], sys.argv[2]
fd = os.open(f"{runs}/{rid}/prompt", os.O_WRONLY)
os.rmdir(f"{runs}/{rid}")
os.mkdir(f"{runs}/{rid}")
try:
    os.pwrite(fd, b"injected\n", 0)
except OSError:
    pass
os.close(fd)
assert open(f"{runs}/{rid}/prompt").read() == "", "injected"
assert open(f"{runs}/{rid}/status").read() == "created\n"
PY
	echo "again" >"$MNT/runs/$id/prompt" || fail "writing the new run's prompt failed"
	assert_eq completed "$(cat "$MNT/runs/$id/wait")" "the new run completes"
	exec 6<&-
}

# Section 6: an id is 1-64 characters. A longer name is no run: never the
# run of its first 64 characters (issue "Confinement", item 6b).
test_overlong_id_names_no_run() {
	write_config "$echo_model" 2
	start_with || return
	local id64 id65
	id64=$(printf 'a%.0s' $(seq 1 64))
	id65=${id64}b
	mkdir "$MNT/runs/$id64" || { fail "mkdir of a 64-character id failed"; return; }
	assert_eq created "$(cat "$MNT/runs/$id64/status")" "the 64-character run"
	expect_fail "No such file or directory" stat "$MNT/runs/$id65"
	expect_fail "No such file or directory" ls "$MNT/runs/$id65"
	expect_fail "No such file or directory" stat "$MNT/runs/$id65/status"
	expect_fail "No such file or directory" cat "$MNT/runs/$id65/status"
	expect_fail "No such file or directory" bash -c "echo cancel > '$MNT/runs/$id65/ctl'"
	expect_fail "No such file or directory" bash -c "echo injected > '$MNT/runs/$id65/prompt'"
	expect_fail "No such file or directory" rmdir "$MNT/runs/$id65"
	expect_fail "No such file or directory" stat "$MNT/runs/${id64}${id64}"
	expect_fail "Invalid argument" mkdir "$MNT/runs/$id65"
	assert_eq "" "$(cat "$MNT/runs/$id64/prompt")" "nothing reached the 64-character run"
	assert_eq created "$(cat "$MNT/runs/$id64/status")" "the 64-character run is untouched"
	assert_eq "$(printf '%s\nnew' "$id64")" "$(ls "$MNT/runs")" "runs/ lists the one run"
	rmdir "$MNT/runs/$id64" || fail "rmdir of the 64-character run failed"
}

# A command model's program is started ahead of its request (at a run's
# start, and after a reply with tool calls): each one is fed by the turn it
# was started for, or killed and reaped when that turn never comes.
test_model_programs_started_ahead_are_used_or_ended() {
	cat >"$T/script.json" <<'JSON'
[{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
  "function": {"name": "bash", "arguments": "{\"command\": \"true\"}"}}]},
 {"role": "assistant", "content": "done"}]
JSON
	write_config "{provider: command, command: [$FAKE_MODEL, $T/script.json], timeout: 30}" 1
	sed -i 's/^runs:/tools: {approval: [bash]}\nruns:/' "$T/config.yaml"
	local started=$T/started.pids
	: >"$started"
	FAKE_MODEL_STARTED=$started start_with || return
	local a b pid
	# Two turns, the call denied (bash is not offered): two programs.
	a=$(new_run) || return
	echo locked >"$MNT/runs/$a/config"
	echo "two turns" >"$MNT/runs/$a/prompt"
	assert_eq completed "$(cat "$MNT/runs/$a/wait")" "the two-turn run"
	grep -q tool_denied "$MNT/runs/$a/events" || fail "the call was not denied"
	assert_eq 2 "$(wc -l <"$started")" "programs started for a two-turn run"
	# Paused for an approval: the program started for the next turn ends.
	b=$(new_run) || return
	echo open >"$MNT/runs/$b/config"
	echo "needs approval" >"$MNT/runs/$b/prompt"
	assert_eq waiting_for_approval "$(cat "$MNT/runs/$b/wait")" "the run that needs approval"
	# The first turn's program, and maybe the next one's: killed as the
	# run paused, it may not have got as far as noting its start.
	local n
	n=$(wc -l <"$started")
	[ "$n" -ge 3 ] && [ "$n" -le 4 ] || fail "programs started up to the pause: $n"
	for pid in $(cat "$started"); do
		for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.02; done
		kill -0 "$pid" 2>/dev/null && fail "model program $pid still there (running or unreaped) while the run waits"
	done
	echo deny >"$MNT/runs/$b/ctl"
	assert_eq completed "$(cat "$MNT/runs/$b/wait")" "the run after the denial"
	assert_eq $((n + 1)) "$(wc -l <"$started")" "programs started for the last turn"
	# A prompt opened for writing gets its run's first program started
	# while it is written; the run uses that one.
	local c d before
	c=$(new_run) && d=$(new_run) || return
	echo locked >"$MNT/runs/$c/config"
	echo locked >"$MNT/runs/$d/config"
	before=$(wc -l <"$started")
	exec 7>"$MNT/runs/$c/prompt"
	for _ in $(seq 200); do [ "$(wc -l <"$started")" -gt "$before" ] && break; sleep 0.01; done
	assert_eq $((before + 1)) "$(wc -l <"$started")" "a program started while the prompt is open"
	echo "held open" >&7
	exec 7>&-
	assert_eq completed "$(cat "$MNT/runs/$c/wait")" "the run of the held prompt"
	assert_eq $((before + 2)) "$(wc -l <"$started")" "its first turn used that program"
	# Kept open past its wait (3 s), the prompt's program is ended; the
	# run, once written, starts its own.
	exec 7>"$MNT/runs/$d/prompt"
	for _ in $(seq 200); do [ "$(wc -l <"$started")" -gt $((before + 2)) ] && break; sleep 0.01; done
	pid=$(tail -n 1 "$started")
	assert_eq $((before + 3)) "$(wc -l <"$started")" "a program started for the second held prompt"
	kill -0 "$pid" 2>/dev/null || fail "the waiting program $pid ended early"
	sleep 3.5
	kill -0 "$pid" 2>/dev/null && fail "the program $pid waited past its time (running or unreaped)"
	echo "late" >&7
	exec 7>&-
	assert_eq completed "$(cat "$MNT/runs/$d/wait")" "the run of the prompt kept open"
	assert_eq $((before + 5)) "$(wc -l <"$started")" "the late run started its own programs"
	return 0
}

# Issue "Nothing acknowledged is lost": a close of prompt that the store
# could not take (the database locked by another process past the busy
# timeout) fails with EAGAIN, the run stays created, and the same command
# starts it once the lock is gone.
test_prompt_close_fails_when_the_store_cannot_commit() {
	python3 -c 'import sqlite3' 2>/dev/null || { echo "  (no python3 sqlite3: skipped)"; return 0; }
	write_config "$echo_model" 1
	start_with || return
	local id
	id=$(new_run) || return
	python3 - "$T/state/state.db" "$T/locked" <<'PY' &
import sqlite3, sys, time, os
c = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=10)
c.execute("BEGIN EXCLUSIVE")
open(sys.argv[2], "w").close()
time.sleep(9)
c.execute("ROLLBACK")
PY
	local locker=$!
	wait_for 5 test -e "$T/locked" || { fail "the locker did not take the lock"; kill $locker; return; }
	# python reports what close() says (bash's echo ignores it, as many
	# programs do: the writer of a prompt should check its close).
	python3 - "$MNT/runs/$id/prompt" <<'PY' || fail "the close of prompt did not fail with EAGAIN"
import errno, os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_TRUNC)
os.write(fd, b"hello\n")
try:
    os.close(fd)
except OSError as e:
    assert e.errno == errno.EAGAIN, e
else:
    raise SystemExit("the close succeeded")
PY
	assert_eq created "$(cat "$MNT/runs/$id/status")" "the run stays created"
	wait $locker
	echo 'hello' >"$MNT/runs/$id/prompt" || fail "the repeated write failed"
	assert_eq completed "$(cat "$MNT/runs/$id/wait")" "the repeated write starts the run"
}

run_tests
