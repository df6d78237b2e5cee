#!/usr/bin/env bash
# Integration: learn_skill through a real mount (DESIGN.md section 7,
# sources[].writable) and approvals inside sub-agents (section 6). A
# scripted model (tests/fake_model) makes the calls.
. "$(dirname "$0")/lib.sh"

: "${FAKE_MODEL:?FAKE_MODEL must name tests/fake_model}"

# write_config EXTRA_TOOLS_YAML [EXTRA_YAML]: source skills (writable) with "helper"
# (grants run_skill, learn_skill and read), "free" (declares nothing) and
# "asker" (a sub-agent with bash); configurations work, open and ask.
write_config() {
	rm -rf "$T/skills" "$T/state"
	mkdir -p "$T/skills/helper" "$T/skills/free" "$T/skills/asker"
	printf -- '---\nname: helper\ndescription: helps\nallowed-tools: [run_skill, learn_skill, read]\n---\nHelp.\n' \
		>"$T/skills/helper/SKILL.md"
	printf -- '---\nname: free\ndescription: free skill\n---\nBody.\n' >"$T/skills/free/SKILL.md"
	printf -- '---\nname: asker\ndescription: runs a command\ntools: [bash]\ninline: false\n---\nRun it.\n' \
		>"$T/skills/asker/SKILL.md"
	cat >"$T/config.yaml" <<CFG
sources: [{path: skills, trust: community, writable: true}]
model: {provider: command, command: [$FAKE_MODEL, $T/script.json], timeout: 30}
tools: {limits: {bash: {timeout: 5}}$1}
runs: {workers: 2}
${2:-}
configurations:
  work: {skills: [helper]}
  open: {skills: [free]}
  ask: {skills: [asker]}
CFG
}

start_with() {
	start_mount -c "$T/config.yaml" --state "$T/state/state.db"
}

test_learned_skill_shows_and_a_later_run_uses_it() {
	write_config ""
	start_with || return
	local args out
	args='{"name": "greeter", "description": "Greets: say \"hi\"", "body": "Say hello to $ARGUMENTS.", "allowed_tools": ["Read"], "files": {"scripts/hello.sh": "#!/bin/sh\necho hello\n"}}'
	script_calls learn_skill "$args" learn_skill '{"name": "free", "description": "d", "body": "b"}' \
		learn_skill '{"name": "wide", "description": "d", "body": "b", "allowed_tools": ["bash"]}'
	start_run work "learn a greeter" || return
	assert_eq completed "$(cat "$MNT/runs/$RUN_ID/wait")" "the learning run"
	out=$(tool_results "$MNT/runs/$RUN_ID/messages.json")
	case "$out" in *"learned skill 'greeter'"*) ;; *) fail "learn_skill: $out" ;; esac
	case "$out" in *"a skill named 'free' exists already"*) ;; *) fail "existing name: $out" ;; esac
	case "$out" in *"item 'bash' names a tool this run is not allowed"*) ;;
	*) fail "wider allowed-tools: $out" ;; esac
	# The watcher sees the rename: the skill is listed within a second.
	wait_for 1 test -e "$MNT/skills/greeter/SKILL.md" || { fail "skills/greeter did not appear"; return; }
	assert_file_eq "$T/skills/greeter/SKILL.md" "$MNT/skills/greeter/SKILL.md"
	assert_eq "Greets: say \"hi\"" "$(cat "$MNT/skills/greeter/description")" "description"
	assert_eq "Read" "$(cat "$MNT/skills/greeter/allowed-tools")" "allowed-tools (as written)"
	assert_eq "echo hello" "$(tail -n 1 "$MNT/skills/greeter/files/scripts/hello.sh")" "its script"
	[ -x "$T/skills/greeter/scripts/hello.sh" ] || fail "the script is not executable"
	python3 - "$MNT/skills/greeter/skill.json" <<'PY' || fail "skill.json: $(cat "$MNT/skills/greeter/skill.json")"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["valid"] and j["trust"] == "community", j
PY
	[ -z "$(ls -A "$T/skills" | grep '^\.')" ] || fail "a temporary directory was left: $(ls -A "$T/skills")"
	[ ! -e "$MNT/skills/wide" ] || fail "the refused skill was written"
	# A later run forced onto it runs it (inline: its base directory, then
	# its body, is the result).
	script_calls run_skill '{"name": "greeter", "arguments": "Ann"}'
	start_run work "greet Ann" greeter || return
	assert_eq completed "$(cat "$MNT/runs/$RUN_ID/wait")" "the run using it"
	assert_eq "Base directory of this skill: /skills/greeter (read-only; its scripts/ and references/ are there)
Say hello to Ann." "$(tool_results "$MNT/runs/$RUN_ID/messages.json" | grep -v '^$')" "run_skill on it"
	# Alone, it declares allowed-tools: [read]: a run gets read, never all.
	script_calls read '{"path": "x"}'
	start_run open "try" greeter || return
	assert_eq completed "$(cat "$MNT/runs/$RUN_ID/wait")" "the run of open + greeter"
	assert_eq "read" "$(cat "$MNT/runs/$RUN_ID/allowed-tools")" "the learned skill narrows the run"
}

test_learned_skill_needs_a_writable_source() {
	write_config ""
	sed -i 's/, writable: true//' "$T/config.yaml"
	start_with || return
	script_calls learn_skill '{"name": "greeter", "description": "d", "body": "b"}'
	start_run work "learn" || return
	assert_eq completed "$(cat "$MNT/runs/$RUN_ID/wait")" "the run"
	assert_eq "learn_skill: no source is writable (sources[].writable)" \
		"$(tool_results "$MNT/runs/$RUN_ID/messages.json")" "the refusal"
	[ ! -e "$T/skills/greeter" ] || fail "a skill was written"
}

# ask_script COMMAND: the main chat runs asker; its sub-agent makes one
# bash call of COMMAND and answers "sub done".
ask_script() {
	python3 - "$1" >"$T/script.json" <<'PY'
import json, sys
call = lambda i, name, args: {"role": "assistant", "content": None, "tool_calls": [
    {"id": i, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]}
print(json.dumps({
    "main": [call("m1", "run_skill", {"name": "asker"}), {"role": "assistant", "content": "done"}],
    "skill-asker-": [call("s1", "bash", {"command": sys.argv[1]}),
                     {"role": "assistant", "content": "sub done"}]}))
PY
}

need_bwrap() {
	command -v bwrap >/dev/null 2>&1 && return 0
	[ -n "${CI:-}" ] && { fail "bubblewrap is missing under CI"; return 1; }
	echo "  (no bubblewrap: skipped)"
	return 1
}

# subagent_chat: the one sub-agent chat id of RUN_ID.
subagent_chat() {
	ls "$MNT/runs/$RUN_ID/subagents"
}

test_subagent_approval_pauses_then_approve_runs_it() {
	need_bwrap || return 0
	write_config ", approval: [bash]" "skills: {execution_mode: subagent}"
	start_with || return
	ask_script "echo approved >> sub.txt"
	start_run ask "run asker" || return
	assert_eq waiting_for_approval "$(cat "$MNT/runs/$RUN_ID/wait")" "a sub-agent's approval call"
	local chat
	chat=$(subagent_chat)
	case "$chat" in skill-asker-*) ;; *) fail "sub-agent chat: [$chat]"; return ;; esac
	grep -q "approval: bash" "$MNT/runs/$RUN_ID/pending" || fail "pending: $(cat "$MNT/runs/$RUN_ID/pending")"
	grep -qx "in sub-agent: $chat" "$MNT/runs/$RUN_ID/pending" ||
		fail "pending does not name the sub-agent: $(cat "$MNT/runs/$RUN_ID/pending")"
	[ ! -e "$T/state/workspaces/$RUN_ID/sub.txt" ] || fail "ran before the approval"
	echo approve >"$MNT/runs/$RUN_ID/ctl"
	assert_eq completed "$(cat "$MNT/runs/$RUN_ID/wait")" "after approve"
	assert_eq approved "$(cat "$T/state/workspaces/$RUN_ID/sub.txt")" "the call ran once"
	assert_eq "sub done" "$(cat "$MNT/runs/$RUN_ID/subagents/$chat/result")" "the sub-agent finished"
	assert_eq "sub done" "$(tool_results "$MNT/runs/$RUN_ID/messages.json")" "its answer reached the main chat"
	assert_eq done "$(cat "$MNT/runs/$RUN_ID/result")" "the run's result"
}

test_subagent_approval_deny_is_an_error_result() {
	need_bwrap || return 0
	write_config ", approval: [bash]" "skills: {execution_mode: subagent}"
	start_with || return
	ask_script "echo denied > sub.txt"
	start_run ask "run asker" || return
	assert_eq waiting_for_approval "$(cat "$MNT/runs/$RUN_ID/wait")" "a sub-agent's approval call"
	local chat
	chat=$(subagent_chat)
	echo deny >"$MNT/runs/$RUN_ID/ctl"
	assert_eq completed "$(cat "$MNT/runs/$RUN_ID/wait")" "after deny"
	[ ! -e "$T/state/workspaces/$RUN_ID/sub.txt" ] || fail "a denied call ran"
	case "$(tool_results "$MNT/runs/$RUN_ID/subagents/$chat/messages.json")" in
	*"denied by the user"*) ;;
	*) fail "the sub-agent's result: $(tool_results "$MNT/runs/$RUN_ID/subagents/$chat/messages.json")" ;;
	esac
	grep -q "\"type\":\"approval_denied\",\"chat_id\":\"$chat\"" "$MNT/runs/$RUN_ID/events" ||
		fail "no approval_denied event for the sub-agent"
}

run_tests
