#!/usr/bin/env bash
# Integration: confinement (DESIGN.md section 7, D3; issue "Confinement").
# A scripted model (tests/fake_model) tries what a prompt-injected model
# would, through a real mount: every attempt must fail or be contained, and
# each test asserts the exact outcome on the host.
. "$(dirname "$0")/lib.sh"

: "${FAKE_MODEL:?FAKE_MODEL must name tests/fake_model}"

require_bwrap

SECRET=skillfs-secret-$$-$RANDOM

# write_config EXTRA_TOOLS_YAML: one skill "free" (no allowed-tools) and one
# "gitdiff" (allowed-tools: Bash(git diff:*)); configurations open and diff.
write_config() {
	rm -rf "$T/skills" "$T/state"
	mkdir -p "$T/skills/free" "$T/skills/gitdiff"
	printf -- '---\nname: free\ndescription: free skill\n---\nBody.\n' >"$T/skills/free/SKILL.md"
	printf -- '---\nname: gitdiff\ndescription: diff only\nallowed-tools: "Bash(git diff:*)"\n---\nDiff.\n' \
		>"$T/skills/gitdiff/SKILL.md"
	cat >"$T/config.yaml" <<CFG
sources: [{path: skills, trust: first_party}]
model: {provider: command, command: [$FAKE_MODEL, $T/script.json], timeout: 30}
tools: {limits: {bash: {timeout: 5}}$1}
runs: {workers: 2}
configurations:
  open: {skills: [free]}
  diff: {skills: [gitdiff]}
CFG
}

start_with() {
	# The daemon's environment holds a secret a tool must never see.
	SKILLFS_TEST_API_KEY=$SECRET start_mount -c "$T/config.yaml" --state "$T/state/state.db"
}

# call CONFIG COMMAND: one run whose model makes one bash call of COMMAND
# and then answers "done"; OUT gets the tool's result text, RUN_ID the run.
call() {
	script_calls bash "$(json_args command "$2")" && start_run "$1" go && finish_run
}

# denied: the last run's call was refused by the allow-list (R5).
denied() {
	grep -q '"type":"tool_denied"' "$MNT/runs/$RUN_ID/events"
}

test_secrets_are_out_of_reach() {
	write_config ""
	start_with || return
	local out
	call open 'cat /etc/shadow; echo "rc=$?"' || return
	out=$OUT
	case "$out" in *"No such file or directory"*"rc=1"*) ;; *) fail "shadow: $out" ;; esac
	[ -r /etc/shadow ] && grep -q "$(head -c 20 /etc/shadow)" <<<"$out" && fail "shadow content leaked"
	call open 'cat /proc/1/environ /proc/$PPID/environ /proc/self/environ | tr "\0" "\n"; env; echo end' || return
	out=$OUT
	case "$out" in *"$SECRET"*) fail "the daemon's secret leaked: $out" ;; esac
	case "$out" in *SKILLFS_TEST_API_KEY*) fail "the daemon's variable leaked" ;; esac
	case "$out" in *"PATH=/usr/local/bin:/usr/bin:/bin"*"end"*) ;; *) fail "env: $out" ;; esac
	if command -v python3 >/dev/null; then
		call open "python3 -c 'import os; print(sorted(os.environ)); open(\"/etc/shadow\")'" || return
	out=$OUT
		case "$out" in *FileNotFoundError*) ;; *) fail "python shadow: $out" ;; esac
		case "$out" in *SKILLFS_TEST_API_KEY*) fail "python sees the daemon's variable" ;; esac
	fi
	call open 'ls /root /home 2>&1; echo rc=$?' || return
	out=$OUT
	case "$out" in *"No such file or directory"*) ;; *) fail "/root or /home visible: $out" ;; esac
}

test_writes_stay_in_the_workspace() {
	write_config ""
	start_with || return
	local before out
	before=$(sha256sum "$T/skills/free/SKILL.md")
	call open "echo x > $T/outside.txt; echo x >> $T/skills/free/SKILL.md; touch /usr/x /etc/x /x; \
echo kept > inside.txt; ls $MNT $T/state $T/skills 2>&1 | head -3; echo end" || return
	out=$OUT
	[ ! -e "$T/outside.txt" ] || fail "a file was written outside the workspace"
	assert_eq "$before" "$(sha256sum "$T/skills/free/SKILL.md")" "a skill source was changed"
	[ ! -e /usr/x ] && [ ! -e /x ] || fail "a system directory was written"
	assert_eq kept "$(cat "$T/state/workspaces/$RUN_ID/inside.txt")" "the workspace is writable"
	case "$out" in *"No such file or directory"*end*) ;; *) fail "mount/state/sources visible: $out" ;; esac
	[ "$(stat -c %a "$T/state/workspaces/$RUN_ID")" = 700 ] || fail "workspace mode $(stat -c %a "$T/state/workspaces/$RUN_ID")"
	# A 1 GiB file: stopped by the file-size limit, and /tmp by its size.
	call open 'head -c 1G /dev/zero > big; echo "rc=$?"; head -c 1G /dev/zero > /tmp/big; echo "tmp=$?"' || return
	out=$OUT
	case "$out" in *"rc=1"*"tmp=1"*) ;; *) fail "1 GiB write: $out" ;; esac
	local size
	size=$(stat -c %s "$T/state/workspaces/$RUN_ID/big")
	[ "$size" -le $((64 << 20)) ] || fail "the workspace file grew to $size bytes"
}

# The same attempts from Python code (python3 run by bash in the sandbox).
test_python_attempts_are_contained() {
	command -v python3 >/dev/null || { echo "  (no python3: skipped)"; return 0; }
	write_config ""
	start_with || return
	local py
	py=$(cat <<PY
import os, signal, socket, subprocess
for path in ["$T/py-outside.txt", "/usr/py-x", "$T/skills/free/py.txt"]:
    try:
        open(path, "w").write("x"); print("WROTE", path)
    except OSError as e:
        print("refused", type(e).__name__)
try:
    os.kill($DAEMON_PID, signal.SIGKILL); print("KILLED")
except OSError as e:
    print("kill refused", e.errno)
s = socket.socket()
try:
    s.settimeout(2); s.connect(("127.0.0.1", 22)); print("CONNECTED")
except OSError as e:
    print("connect refused", e.errno)
if os.fork() == 0:
    os.setsid(); subprocess.Popen(["sleep", "778"]); os._exit(0)
print("env", sorted(k for k in os.environ))
PY
)
	call open "python3 -c '$(printf %s "$py" | sed "s/'/'\\\\''/g")'" || return
	case "$OUT" in *WROTE* | *KILLED* | *CONNECTED*) fail "python got out: $OUT" ;; esac
	case "$OUT" in *"kill refused 3"*) ;; *) fail "python kill: $OUT" ;; esac
	case "$OUT" in *SKILLFS_TEST_API_KEY*) fail "python sees the daemon's variable" ;; esac
	[ ! -e "$T/py-outside.txt" ] && [ ! -e "$T/skills/free/py.txt" ] || fail "python wrote outside"
	kill -0 "$DAEMON_PID" || fail "python killed the daemon"
	sleep 0.2
	[ "$(pgrep -fc '[s]leep 778')" = 0 ] || fail "a python child outlived its call"
}

test_network_off_unless_configured() {
	local port=$((20000 + RANDOM % 20000))
	python3 - "$port" >"$T/server.log" 2>&1 <<'PY' &
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(8); s.settimeout(30)
end = time.time() + 30
while time.time() < end:
    try:
        c, _ = s.accept(); c.sendall(b"hello-from-host\n"); c.close()
    except socket.timeout:
        break
PY
	local server=$!
	sleep 0.3
	write_config ""
	start_with || { kill $server; return; }
	local out
	call open "exec 3<>/dev/tcp/127.0.0.1/$port && head -1 <&3; echo rc=\$?" || { kill $server; return; }
	out=$OUT
	case "$out" in *hello-from-host*) fail "connected with tools.network false: $out" ;; *rc=1*) ;; *) fail "network off: $out" ;; esac
	stop_mount
	write_config ", network: true"
	start_with || { kill $server; return; }
	call open "exec 3<>/dev/tcp/127.0.0.1/$port && head -1 <&3; echo rc=\$?" || { kill $server; return; }
	out=$OUT
	case "$out" in *hello-from-host*rc=0*) ;; *) fail "network on: $out" ;; esac
	kill $server 2>/dev/null
	wait $server 2>/dev/null
}

test_processes_are_contained() {
	write_config ""
	start_with || return
	local out
	call open "kill -9 $DAEMON_PID; echo rc=\$?; kill -9 -1; echo after" || return
	out=$OUT
	case "$out" in *"No such process"*"rc=1"*) ;; *) fail "kill the daemon: $out" ;; esac
	kill -0 "$DAEMON_PID" || { fail "the daemon was killed"; return; }
	call open 'setsid sleep 777 >/dev/null 2>&1 & echo started' || return
	out=$OUT
	case "$out" in *started*"[exit 0]"*) ;; *) fail "background: $out" ;; esac
	sleep 0.2
	[ "$(pgrep -fc '[s]leep 777')" = 0 ] || fail "a process outlived its call"
	# A fork bomb: the call ends at its timeout; the mount answers meanwhile.
	python3 - >"$T/script.json" <<'PY'
import json
print(json.dumps([
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "bash",
         "arguments": json.dumps({"command": "b(){ b|b& }; b"})}}]},
    {"role": "assistant", "content": "done"}]))
PY
	RUN_ID=$(cat "$MNT/runs/new") && mkdir "$MNT/runs/$RUN_ID" || return
	echo open >"$MNT/runs/$RUN_ID/config"
	echo go >"$MNT/runs/$RUN_ID/prompt"
	sleep 1
	local t0 t1
	t0=$(date +%s%N)
	cat "$MNT/README" >/dev/null && ls "$MNT/skills" >/dev/null || fail "the mount did not answer during a fork bomb"
	t1=$(date +%s%N)
	[ $(((t1 - t0) / 1000000)) -lt 2000 ] || fail "the mount took $(((t1 - t0) / 1000000)) ms during a fork bomb"
	assert_eq completed "$(cat "$MNT/runs/$RUN_ID/wait")" "the fork-bomb run ends"
	# It ends by its timeout or by giving up on fork; either way it ended.
	grep -Eq 'timed out after 5 s|\[exit [0-9]+\]|killed by signal' "$MNT/runs/$RUN_ID/messages.json" ||
		fail "the fork bomb's call has no end: $(tail -c 300 "$MNT/runs/$RUN_ID/messages.json")"
	sleep 0.5
	[ "$(pgrep -c -u 65534 -f 'bash -c b')" = 0 ] || fail "fork-bomb processes outlived the call"
}

test_D3_patterns_mean_what_they_say() {
	write_config ""
	start_with || return
	assert_eq "bash(git diff:*)" "$(cat "$MNT/configs/diff/allowed-tools")" "the grant"
	local out ws
	call diff "git difftool -y -x 'touch pwned' --no-index a b" || return
	out=$OUT
	denied || fail "git difftool was admitted by git diff: $out"
	[ ! -e "$T/state/workspaces/$RUN_ID/pwned" ] || fail "difftool ran a command"
	# Admitted, and contained: the sandbox has no /etc/shadow.
	call diff "git diff --no-index /etc/shadow /dev/null" || return
	out=$OUT
	denied && fail "git diff --no-index was refused"
	case "$out" in *"[exit "*) ;; *) fail "git diff --no-index: $out" ;; esac
	[ -r /etc/shadow ] && grep -q "$(head -c 12 /etc/shadow)" <<<"$out" && fail "shadow read through git diff"
	call diff "git diff --stat" || return
	out=$OUT
	denied && fail "git diff --stat was refused"
	case "$out" in *"[exit "*) ;; *) fail "git diff --stat did not run: $out" ;; esac
	call diff "git diff --no-index 'a b' \"c d\"" || return
	out=$OUT
	denied && fail "quoted arguments were refused"
	case "$out" in *"a b"*) ;; *) fail "quoted arguments were not passed whole: $out" ;; esac
	local cmd
	for cmd in 'git diff $(touch pwned)' 'git diff `touch pwned`' 'git diff; touch pwned' \
		$'git diff\ntouch pwned' 'git diff && touch pwned' 'git diff *' 'git diff > pwned' \
		'git diff | touch pwned'; do
		call diff "$cmd" || return
	out=$OUT
		ws=$T/state/workspaces/$RUN_ID
		denied || fail "'$cmd' was admitted: $out"
		[ ! -e "$ws/pwned" ] || fail "'$cmd' ran a shell"
	done
}

test_without_bubblewrap_bash_is_not_registered() {
	write_config ", sandbox_program: /nonexistent/bwrap"
	start_with || return
	grep -q '^bash unavailable: tools.sandbox_program /nonexistent/bwrap' "$MNT/tools" ||
		fail "tools: $(cat "$MNT/tools")"
	grep -qx 'read' "$MNT/tools" || fail "read should stay available"
	grep -q '^bash$' "$MNT/configs/open/allowed-tools" && fail "bash offered without a sandbox"
	grep -q "tool 'bash' is not available" "$DAEMON_LOG" || fail "the log does not say why"
	stop_mount
	# bwrap missing from PATH (a PATH that keeps what the test needs).
	local bin=$T/bin
	mkdir -p "$bin"
	write_config ""
	out=$(PATH=$bin "$SKILLFS" check -c "$T/config.yaml" 2>&1)
	case "$out" in *"tool 'bash' is not available: bubblewrap (bwrap) not found on PATH"*) ;;
	*) fail "skillfs check: $out" ;; esac
	# The explicit opt-out: warned, and marked in tools.
	write_config ", sandbox: none"
	start_with || return
	grep -qx 'bash (no sandbox)' "$MNT/tools" || fail "tools: $(cat "$MNT/tools")"
	grep -q 'WITHOUT a sandbox' "$DAEMON_LOG" || fail "no warning for tools.sandbox: none"
}

test_planted_workspace_is_refused() {
	write_config ""
	start_with || return
	local id
	mkdir -p "$T/elsewhere"
	for kind in link file dir; do
		id=$(cat "$MNT/runs/new") && mkdir "$MNT/runs/$id" || return
		mkdir -p "$T/state/workspaces"
		case $kind in
		link) ln -s "$T/elsewhere" "$T/state/workspaces/$id" ;;
		file) echo x >"$T/state/workspaces/$id" ;;
		dir) mkdir "$T/state/workspaces/$id" && chown 12345:12345 "$T/state/workspaces/$id" ;;
		esac
		echo '[{"role": "assistant", "content": "done"}]' >"$T/script.json"
		echo open >"$MNT/runs/$id/config"
		echo go >"$MNT/runs/$id/prompt"
		assert_eq failed "$(cat "$MNT/runs/$id/wait")" "a planted workspace ($kind) fails the run"
		case $kind in
		link | file) grep -q "exists but is not a directory" "$MNT/runs/$id/error" ;;
		dir) grep -q "not a directory owned by uid" "$MNT/runs/$id/error" ;;
		esac || fail "$kind: error says: $(cat "$MNT/runs/$id/error")"
	done
	[ -z "$(ls -A "$T/elsewhere")" ] || fail "something was written through the planted link"
	# A run id longer than the limit names no run, not a shorter one.
	id=$(printf 'a%.0s' $(seq 64))
	mkdir "$MNT/runs/$id" || { fail "mkdir of a 64-character id"; return; }
	expect_fail "No such file or directory" stat "$MNT/runs/${id}b"
}

run_tests
