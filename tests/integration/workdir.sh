#!/usr/bin/env bash
# Integration: a run's project directory (runs/<id>/workdir under
# runs.workdir_roots) and its skills' own files at /skills/<name> (issue
# "Tools that do real work", items 6 and 7). A scripted model
# (tests/fake_model) does the job through a real mount; each test asserts
# what the host sees.
. "$(dirname "$0")/lib.sh"

: "${FAKE_MODEL:?FAKE_MODEL must name tests/fake_model}"

require_bwrap

# The user the sandboxed tools run as: nobody when the daemon is root.
if [ "$(id -u)" = 0 ]; then TOOLS_UID=65534; else TOOLS_UID=$(id -u); fi

# write_config [ROOTS_YAML]: the skill "hello" (a script in scripts/, the
# usual published layout) and runs.workdir_roots ROOTS_YAML (default: the
# test's projects directory).
write_config() {
	rm -rf "$T/skills" "$T/state"
	mkdir -p "$T/skills/hello/scripts" "$T/projects"
	printf -- '---\nname: hello\ndescription: greets\ninline: true\n---\nRun `scripts/hello.sh` and report its output.\n' \
		>"$T/skills/hello/SKILL.md"
	printf '#!/bin/sh\necho "hello from the skill, in $(pwd)"\n' >"$T/skills/hello/scripts/hello.sh"
	chmod 0755 "$T/skills/hello" "$T/skills/hello/scripts" "$T/skills/hello/scripts/hello.sh"
	chmod 0644 "$T/skills/hello/SKILL.md"
	cat >"$T/config.yaml" <<CFG
sources: [{path: skills, trust: first_party}]
model: {provider: command, command: [$FAKE_MODEL, $T/script.json], timeout: 30}
tools: {limits: {bash: {timeout: 10}}}
runs: {workers: 2, workdir_roots: ${1:-[projects]}}
configurations:
  open: {skills: [hello]}
CFG
}

# bash_args COMMAND: the arguments of a bash call.
bash_args() {
	json_args command "$1"
}

# go [WORKDIR]: one run of configuration open (with WORKDIR written
# first); RUN_ID names it, OUT gets its tool results, each followed by a
# line "---".
go() {
	start_run open go "" "${1:-}" && finish_run "---"
}

start_with() {
	start_mount -c "$T/config.yaml" --state "$T/state/state.db"
}

# refused RUN PATH WHY: writing PATH to the run's workdir fails with
# EINVAL, the run's events say WHY, and the file stays empty.
refused() {
	local out
	if out=$(echo "$2" 2>&1 >"$MNT/runs/$1/workdir"); then
		fail "workdir $2 was accepted"
		return 1
	fi
	case "$out" in *"Invalid argument"*) ;; *) fail "workdir $2: $out" ;; esac
	grep '"type":"workdir_refused"' "$MNT/runs/$1/events" | tail -1 | grep -qF "$3" ||
		fail "workdir $2: the events do not say '$3': $(tail -2 "$MNT/runs/$1/events")"
	assert_eq "" "$(cat "$MNT/runs/$1/workdir")" "workdir after refusing $2"
}

test_workdir_is_off_without_roots() {
	write_config "[]"
	start_with || return
	mkdir "$MNT/runs/r1" || return
	refused r1 "$T/projects" "runs.workdir_roots is empty: workdir is off"
}

test_workdir_writes_are_checked() {
	write_config
	mkdir -p "$T/outside" "$T/projects/app"
	echo x >"$T/projects/notes.txt"
	ln -s "$T/outside" "$T/projects/escape"
	start_with || return
	mkdir "$MNT/runs/r1" || return
	refused r1 "$T/outside" "is not under runs.workdir_roots"
	refused r1 "$T/projects/notes.txt" "is not a directory"
	refused r1 "$T/projects/escape" "which is not under runs.workdir_roots"
	refused r1 "$T/projects/missing" "no such directory"
	refused r1 "projects/app" "must be an absolute path"
	# Taken resolved, shown in the file and in info.json.
	echo "$T/projects/./app/" >"$MNT/runs/r1/workdir" || fail "a workdir under the root was refused"
	assert_eq "$T/projects/app" "$(cat "$MNT/runs/r1/workdir")" "the workdir as stored"
	python3 - "$MNT/runs/r1/info.json" "$T/projects/app" <<'PY' || fail "info.json: $(cat "$MNT/runs/r1/info.json")"
import json, sys
assert json.load(open(sys.argv[1]))["workdir"] == sys.argv[2]
PY
	# Read-only once the run started.
	script_calls
	echo go >"$MNT/runs/r1/prompt"
	cat "$MNT/runs/r1/wait" >/dev/null
	expect_fail "Permission denied" sh -c "echo $T/projects >'$MNT/runs/r1/workdir'"
}

# What skillfs keeps to itself is never a workdir, even under a root: the
# skill sources (a model could widen its own grants), the state directory
# (other runs), and a directory holding the mount (the tools could drive
# runs and approve their own calls).
test_workdir_never_reaches_skillfs_itself() {
	write_config "[.]"
	mkdir -p "$T/free"
	start_with || return
	mkdir "$MNT/runs/r1" || return
	refused r1 "$T/skills" "which skillfs keeps to itself"
	refused r1 "$T/skills/hello" "which skillfs keeps to itself"
	refused r1 "$T/state" "which skillfs keeps to itself"
	refused r1 "$T" "which skillfs keeps to itself"
	refused r1 "$MNT" "is in or holds the skillfs mount"
	refused r1 "$MNT/runs" "is in or holds the skillfs mount"
	echo "$T/free" >"$MNT/runs/r1/workdir" || fail "a free directory under the root was refused"
}

# A run in a git repository the test made: bash runs git log there and
# sees the commit, and a file it writes lands in the project on the host;
# the workspace stays the scratch place.
test_run_works_in_a_git_repository() {
	command -v git >/dev/null || { echo "  (no git: skipped)"; return 0; }
	write_config
	local repo=$T/projects/repo
	mkdir -p "$repo"
	git -C "$repo" init -q &&
		echo "first" >"$repo/README" &&
		git -C "$repo" add README &&
		git -C "$repo" -c user.name=Tester -c user.email=t@example.com commit -qm "the first commit" ||
		{ fail "cannot make the test repository"; return; }
	# The tools run as $TOOLS_UID: the project must be theirs to write.
	chown -R "$TOOLS_UID" "$repo"
	start_with || return
	script_calls bash "$(bash_args 'pwd; git log --oneline; echo from-run > fromrun.txt; echo scratch > /workspace/s.txt; echo HOME=$HOME')" \
		write '{"path": "written.txt", "content": "by the write tool\n"}' \
		read '{"path": "README"}'
	go "$repo" || return
	case "$OUT" in
	"/workdir"*"the first commit"*"HOME=/workspace"*"[exit 0]"*) ;;
	*) fail "git log in the workdir: $OUT" ;;
	esac
	case "$OUT" in *"---"*"wrote"*"---"*"first"*) ;; *) fail "write/read in the workdir: $OUT" ;; esac
	assert_eq "from-run" "$(cat "$repo/fromrun.txt" 2>/dev/null)" "the file bash wrote in the workdir"
	assert_eq "by the write tool" "$(cat "$repo/written.txt" 2>/dev/null)" "the file the write tool wrote"
	assert_eq "scratch" "$(cat "$T/state/workspaces/$RUN_ID/s.txt" 2>/dev/null)" "the workspace stays scratch"
	[ ! -e "$T/state/workspaces/$RUN_ID/fromrun.txt" ] || fail "the workdir's file landed in the workspace"
	python3 - "$MNT/runs/$RUN_ID/info.json" "$repo" <<'PY' || fail "info.json of the run"
import json, sys
assert json.load(open(sys.argv[1]))["workdir"] == sys.argv[2]
PY
	# Removing the run leaves the project alone.
	rmdir "$MNT/runs/$RUN_ID" || fail "rmdir of the finished run"
	[ -e "$repo/README" ] && [ -e "$repo/fromrun.txt" ] || fail "removing the run touched the project"
}

# A workdir whose roots were taken away since it was written is refused
# when the run starts.
test_workdir_checked_again_at_start() {
	write_config
	mkdir -p "$T/projects/app"
	start_with || return
	mkdir "$MNT/runs/r1" || return
	echo open >"$MNT/runs/r1/config"
	echo "$T/projects/app" >"$MNT/runs/r1/workdir" || { fail "workdir refused"; return; }
	stop_mount
	sed -i 's|workdir_roots: \[projects\]|workdir_roots: [elsewhere]|' "$T/config.yaml"
	start_with || return
	script_calls
	echo go >"$MNT/runs/r1/prompt"
	assert_eq failed "$(cat "$MNT/runs/r1/wait")" "a run whose workdir left the roots"
	grep -q "is not under runs.workdir_roots" "$MNT/runs/r1/error" ||
		fail "error: $(cat "$MNT/runs/r1/error")"
}

# The skill says "run scripts/hello.sh": the text the model gets names its
# base directory, and the script runs from there (exec bit kept); writes
# into the skill's directory are refused, by bash and by the write tool,
# and the source stays as it was.
test_skill_script_runs_and_skill_files_are_read_only() {
	write_config
	start_with || return
	local before
	before=$(cd "$T/skills" && find . -type f -exec sha256sum {} + | sort)
	script_calls run_skill '{"name": "hello"}' \
		bash "$(bash_args '/skills/hello/scripts/hello.sh')" \
		bash "$(bash_args 'echo x > /skills/hello/x; echo rc=$?; rm /skills/hello/SKILL.md; echo rc=$?; ls /skills')" \
		write '{"path": "/skills/hello/x", "content": "x"}' \
		read '{"path": "/skills/hello/scripts/hello.sh"}'
	go || return
	case "$OUT" in
	"Base directory of this skill: /skills/hello (read-only"*"Run \`scripts/hello.sh\`"*) ;;
	*) fail "the skill's text: $OUT" ;;
	esac
	case "$OUT" in *"hello from the skill, in /workspace"*"[exit 0]"*) ;; *) fail "the script: $OUT" ;; esac
	case "$OUT" in *"Read-only file system"*"rc=1"*"rc=1"*"hello"*) ;; *) fail "bash write: $OUT" ;; esac
	case "$OUT" in *"write: skill files are read-only: /skills/hello/x"*) ;; *) fail "write tool: $OUT" ;; esac
	case "$OUT" in *'echo "hello from the skill'*) ;; *) fail "read of the script: $OUT" ;; esac
	assert_eq "$before" "$(cd "$T/skills" && find . -type f -exec sha256sum {} + | sort)" \
		"the skill's source changed"
	[ -x "$T/skills/hello/scripts/hello.sh" ] || fail "the script lost its exec bit"
}

# glob, grep, python and terminal work on the workdir and read a skill's
# files (issue "Tools that do real work", checks of items 1, 2, 5, 6, 7).
test_file_and_process_tools_in_workdir_and_skills() {
	command -v git >/dev/null || { echo "  (no git: skipped)"; return 0; }
	write_config
	local repo=$T/projects/work
	mkdir -p "$repo/src"
	printf '3\n4\n5\n' >"$repo/numbers.txt"
	echo 'int main(void) { return 0; } /* needle */' >"$repo/src/main.c"
	git -C "$repo" init -q && git -C "$repo" add . &&
		git -C "$repo" -c user.name=Tester -c user.email=t@example.com commit -qm "seeded by the test" ||
		{ fail "cannot make the test repository"; return; }
	chown -R "$TOOLS_UID" "$repo"
	start_with || return
	script_calls glob '{"pattern": "**/*.c"}' \
		grep '{"pattern": "needle"}' \
		glob '{"pattern": "scripts/*", "path": "/skills/hello"}' \
		grep '{"pattern": "hello from", "path": "/skills/hello"}' \
		python '{"code": "print(sum(int(x) for x in open(\"numbers.txt\")))"}' \
		python '{"path": "/skills/hello/scripts/hello.sh"}' \
		terminal '{"command": "git log --oneline"}' \
		terminal '{"command": ["rm", "-rf", "."]}'
	go "$repo" || return
	local -a r
	local i
	for i in 0 1 2 3 4 5 6 7; do
		r[i]=$(python3 - "$MNT/runs/$RUN_ID/messages.json" "$i" <<'PY'
import json, sys
tools = [m["content"] for m in json.load(open(sys.argv[1])) if m.get("role") == "tool"]
print(tools[int(sys.argv[2])] if int(sys.argv[2]) < len(tools) else "(no result)")
PY
)
	done
	case "${r[0]}" in *"src/main.c"*) ;; *) fail "glob in the workdir: ${r[0]}" ;; esac
	case "${r[1]}" in *"src/main.c:1:"*needle*) ;; *) fail "grep in the workdir: ${r[1]}" ;; esac
	case "${r[2]}" in *"scripts/hello.sh"*) ;; *) fail "glob in a skill: ${r[2]}" ;; esac
	case "${r[3]}" in *"hello.sh:2:"*"hello from the skill"*) ;; *) fail "grep in a skill: ${r[3]}" ;; esac
	case "${r[4]}" in "12"*"[exit 0]"*) ;; *) fail "python on a workdir file: ${r[4]}" ;; esac
	case "${r[5]}" in *"[exit "*) ;; *) fail "python on a skill file: ${r[5]}" ;; esac
	case "${r[6]}" in *"seeded by the test"*"[exit 0]"*) ;; *) fail "terminal git log: ${r[6]}" ;; esac
	case "${r[7]}" in *"terminal: "*"rm"*) ;; *) fail "terminal rm: ${r[7]}" ;; esac
	[ -e "$repo/numbers.txt" ] || fail "terminal rm removed the project"
}

run_tests
