#!/usr/bin/env bash
# Integration: the tools that do real work (python, terminal, glob, grep)
# through a real mount: a scripted model (tests/fake_model) uses each for a
# job, and each test checks the outcome on the host.
. "$(dirname "$0")/lib.sh"

: "${FAKE_MODEL:?FAKE_MODEL must name tests/fake_model}"

require_bwrap

# Whether the sandbox's PATH (not this shell's) has the program.
in_sandbox_path() {
	PATH=/usr/local/bin:/usr/bin:/bin command -v "$1" >/dev/null 2>&1
}

# write_config EXTRA_TOOLS_YAML: one skill "free" (no allowed-tools) and
# one "gitlog" (allowed-tools: Terminal(git log:*)); configurations open
# and log.
write_config() {
	rm -rf "$T/skills" "$T/state"
	mkdir -p "$T/skills/free" "$T/skills/gitlog"
	printf -- '---\nname: free\ndescription: free skill\n---\nBody.\n' >"$T/skills/free/SKILL.md"
	printf -- '---\nname: gitlog\ndescription: log only\nallowed-tools: "Terminal(git log:*)"\n---\nLog.\n' \
		>"$T/skills/gitlog/SKILL.md"
	cat >"$T/config.yaml" <<CFG
sources: [{path: skills, trust: first_party}]
model: {provider: command, command: [$FAKE_MODEL, $T/script.json], timeout: 30}
tools: {limits: {python: {timeout: 10}, terminal: {timeout: 10}}$1}
runs: {workers: 2}
configurations:
  open: {skills: [free]}
  log: {skills: [gitlog]}
CFG
}

start_with() {
	start_mount -c "$T/config.yaml" --state "$T/state/state.db"
}

# calls CONFIG CALLS_JSON: one run whose model makes the calls, a JSON list
# of [tool, arguments] pairs, one per turn, then answers "done". OUT gets
# each tool result followed by a line "=====", RUN_ID the run, WS its
# workspace.
calls() {
	local -a a
	mapfile -t a < <(python3 -c 'import json, sys
for tool, args in json.loads(sys.argv[1]):
    print(tool); print(json.dumps(args))' "$2")
	script_calls "${a[@]}" && start_run "$1" go || return 1
	WS=$T/state/workspaces/$RUN_ID
	finish_run "====="
}

# result N: the Nth tool result (from 1) of the last run.
result() {
	awk -v n="$1" 'BEGIN { RS = "=====\n" } NR == n { printf "%s", $0 }' <<<"$OUT"
}

denied_count() {
	grep -o '"type":"tool_denied"' "$MNT/runs/$RUN_ID/events" | wc -l
}

test_tools_file_lists_them_available() {
	write_config ""
	start_with || return
	local t
	for t in glob grep terminal; do
		grep -qx "$t" "$MNT/tools" || fail "$t not available: $(cat "$MNT/tools")"
		grep -qx "$t" "$MNT/configs/open/allowed-tools" || fail "$t not offered"
	done
	if in_sandbox_path python3; then
		grep -qx python "$MNT/tools" || fail "python not available: $(cat "$MNT/tools")"
	else
		grep -q "^python unavailable: python3 not found in the sandbox's PATH" "$MNT/tools" ||
			fail "python: $(cat "$MNT/tools")"
		grep -qx python "$MNT/configs/open/allowed-tools" && fail "python offered without python3"
	fi
	grep -q "not available in this version" "$MNT/tools" && fail "a stub is listed"
	! grep -Eq '^(glob|grep|terminal|python) ' "$MNT/tools" || fail "tools: $(cat "$MNT/tools")"
}

# R13: a sub-agent's default tools include python when the python tool can
# run, which depends on the sandbox's PATH, not the daemon's: a daemon whose
# own PATH has no python3 still offers it.
test_subagent_default_tools_follow_the_sandbox_path() {
	in_sandbox_path python3 || { echo "  (no python3 in the sandbox's PATH: skipped)"; return 0; }
	# bwrap named by its path (the tools' user must reach it), and a PATH
	# for the daemon with fusermount only.
	write_config ", sandbox_program: $(command -v bwrap)"
	local bin=$T/daemon-bin p
	mkdir -p "$bin"
	for p in fusermount3 fusermount; do
		command -v "$p" >/dev/null && ln -sf "$(command -v "$p")" "$bin/$p"
	done
	# The daemon alone gets that PATH (the wrapper execs it, same pid).
	printf '#!/bin/sh\nPATH=%s exec %s "$@"\n' "$bin" "$SKILLFS" >"$T/skillfs-path"
	chmod +x "$T/skillfs-path"
	local real=$SKILLFS
	SKILLFS=$T/skillfs-path start_with
	local rc=$?
	SKILLFS=$real
	[ $rc = 0 ] || return
	grep -q '^tools: .*python' "$MNT/skills/free/mode" || fail "mode: $(cat "$MNT/skills/free/mode")"
	grep -qx python "$MNT/tools" || fail "tools: $(cat "$MNT/tools")"
}

test_python_computes_from_a_workspace_file() {
	in_sandbox_path python3 || { echo "  (no python3 in the sandbox's PATH: skipped)"; return 0; }
	write_config ""
	start_with || return
	calls open '[
	  ["write", {"path": "data/numbers.csv", "content": "name,n\na,3\nb,4\nc,35\n"}],
	  ["python", {"code": "import csv\nrows = list(csv.DictReader(open(\"data/numbers.csv\")))\nprint(\"sum\", sum(int(r[\"n\"]) for r in rows))"}],
	  ["write", {"path": "stats.py", "content": "import sys\nvals = [int(l.split(\",\")[1]) for l in open(sys.argv[1]).read().split()[1:]]\nprint(\"max\", max(vals))\nopen(\"max.txt\", \"w\").write(str(max(vals)))\n"}],
	  ["python", {"path": "stats.py", "args": ["data/numbers.csv"]}],
	  ["python", {"path": "../../state.db"}]
	]' || return
	assert_eq $'sum 42\n[exit 0]' "$(result 2)" "python code"
	assert_eq $'max 35\n[exit 0]' "$(result 4)" "python path with args"
	assert_eq 35 "$(cat "$WS/max.txt")" "the script wrote into the workspace"
	case "$(result 5)" in *"path escapes the workspace"*) ;; *) fail "escape: $(result 5)" ;; esac
}

test_terminal_runs_git_log_and_refuses_rm() {
	in_sandbox_path git || { echo "  (no git in the sandbox's PATH: skipped)"; return 0; }
	write_config ""
	start_with || return
	calls open '[
	  ["write", {"path": "notes.txt", "content": "keep me\n"}],
	  ["terminal", {"command": "git init -q"}],
	  ["terminal", {"command": ["git", "-c", "user.name=Test", "-c", "user.email=t@example.com", "add", "notes.txt"]}],
	  ["terminal", {"command": ["git", "-c", "user.name=Test", "-c", "user.email=t@example.com", "commit", "-q", "-m", "first commit"]}],
	  ["terminal", {"command": "git log --format=%s"}],
	  ["terminal", {"command": "rm -rf notes.txt .git"}],
	  ["terminal", {"command": ["/bin/rm", "notes.txt"]}],
	  ["terminal", {"command": "ls; rm notes.txt"}]
	]' || return
	assert_eq $'first commit\n[exit 0]' "$(result 5)" "git log"
	case "$(result 6)" in *"'rm' is not a program terminal may run"*"ls, cat, head"*) ;;
	*) fail "rm: $(result 6)" ;; esac
	case "$(result 7)" in *"'/bin/rm' is not a program terminal may run"*) ;; *) fail "/bin/rm: $(result 7)" ;; esac
	case "$(result 8)" in *"shell syntax ';'"*) ;; *) fail "shell syntax: $(result 8)" ;; esac
	assert_eq "keep me" "$(cat "$WS/notes.txt")" "rm was refused"
	[ -d "$WS/.git" ] || fail "the repository is gone"
	# The commit is there on the host too.
	assert_eq "first commit" "$(git -c safe.directory="*" -C "$WS" log --format=%s 2>&1)" "git log on the host"
}

test_terminal_patterned_grant() {
	in_sandbox_path git || { echo "  (no git in the sandbox's PATH: skipped)"; return 0; }
	write_config ""
	start_with || return
	assert_eq "terminal(git log:*)" "$(cat "$MNT/configs/log/allowed-tools")" "the grant"
	calls log '[
	  ["terminal", {"command": ["git", "log", "-1"]}],
	  ["terminal", {"command": "git log -1"}],
	  ["terminal", {"command": ["git", "init"]}],
	  ["terminal", {"command": ["git log", "-1"]}],
	  ["terminal", {"command": "git init"}]
	]' || return
	case "$(result 1)" in *"not a git repository"*"[exit 128]"*) ;; *) fail "array: $(result 1)" ;; esac
	case "$(result 2)" in *"not a git repository"*"[exit 128]"*) ;; *) fail "string: $(result 2)" ;; esac
	local i
	for i in 3 4 5; do
		case "$(result $i)" in *"not admitted by the patterns"*) ;; *) fail "call $i: $(result $i)" ;; esac
	done
	assert_eq 3 "$(denied_count)" "denied calls"
	[ ! -e "$WS/.git" ] || fail "git init ran"
}

test_glob_and_grep_find_files() {
	write_config ""
	start_with || return
	calls open '[
	  ["write", {"path": "src/main.c", "content": "int main(void)\n{\n\treturn answer();\n}\n"}],
	  ["write", {"path": "src/lib/answer.c", "content": "int answer(void) { return 42; }\n"}],
	  ["write", {"path": "README", "content": "The answer is here.\n"}],
	  ["glob", {"pattern": "**/*.c"}],
	  ["grep", {"pattern": "answer\\(", "glob": "*.c"}],
	  ["grep", {"pattern": "THE ANSWER", "ignore_case": true}],
	  ["glob", {"pattern": "*", "path": "/workspace/src"}],
	  ["grep", {"pattern": "root", "path": "../../.."}]
	]' || return
	assert_eq $'src/lib/answer.c\nsrc/main.c' "$(result 4)" "glob"
	assert_eq $'src/lib/answer.c:1: int answer(void) { return 42; }\nsrc/main.c:3: \treturn answer();' \
		"$(result 5)" "grep"
	assert_eq "README:1: The answer is here." "$(result 6)" "grep -i"
	assert_eq $'src/lib/\nsrc/main.c' "$(result 7)" "glob in /workspace/src"
	case "$(result 8)" in *"path escapes the workspace"*) ;; *) fail "grep escape: $(result 8)" ;; esac
}

test_terminal_without_programs_is_not_offered() {
	write_config ", terminal: {commands: []}"
	start_with || return
	grep -qx "terminal unavailable: tools.terminal.commands is empty" "$MNT/tools" ||
		fail "tools: $(cat "$MNT/tools")"
	grep -qx terminal "$MNT/configs/open/allowed-tools" && fail "terminal offered without programs"
	stop_mount
	write_config ", terminal: {commands: [no-such-program-xyz, ls]}"
	start_with || return
	grep -qx terminal "$MNT/tools" || fail "terminal with ls: $(cat "$MNT/tools")"
	grep -q "tools.terminal.commands: no-such-program-xyz: not found in the sandbox's PATH" \
		"$DAEMON_LOG" || fail "no warning for a missing program: $(cat "$DAEMON_LOG")"
}

run_tests
