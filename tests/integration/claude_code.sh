#!/usr/bin/env bash
# Integration with the real Claude Code (DESIGN.md section 8,
# configs/<cfg>/claude/; R5 as Claude Code enforces it): `claude -p` runs
# against a loopback stand-in for the Anthropic Messages API
# (tests/messages_api_stub.py) that answers with scripted tool calls, under
# the settings of a mounted configuration, used both ways the README gives
# (a project's .claude linked to configs/<cfg>/claude, and --settings).
# A call the skills grant (Bash(touch granted:*)) runs; one outside the
# pattern is refused; a tool granted to none (Read) is not even offered.
# Runs only where Claude Code is installed: without `claude` on PATH it
# skips (exit 77). Nothing here installs it, and the build never needs it.
. "$(dirname "$0")/lib.sh"

if ! command -v claude >/dev/null 2>&1; then
	echo "SKIP: claude (Claude Code) is not on PATH"
	exit 77
fi

STUB_PID=
stop_stub() {
	[ -z "$STUB_PID" ] || { kill "$STUB_PID" 2>/dev/null; wait "$STUB_PID" 2>/dev/null; }
	STUB_PID=
}
trap 'stop_stub; cleanup' EXIT

setup() {
	rm -rf "$T/skills" "$T/proj" "$T/home" "$T/requests.jsonl"
	mkdir -p "$T/skills/toucher" "$T/proj" "$T/home"
	cat >"$T/skills/toucher/SKILL.md" <<'MD'
---
name: toucher
description: Touches the file named granted, and nothing else.
allowed-tools: "Bash(touch granted:*)"
---
# toucher
Run `touch granted`.
MD
	cat >"$T/config.yaml" <<CFG
sources: [{path: skills, trust: first_party}]
configurations:
  main: {skills: [toucher]}
CFG
	# One tool call per turn: granted, outside the pattern, not granted.
	cat >"$T/script.json" <<JSON
[{"name": "Bash", "input": {"command": "touch granted", "description": "granted"}},
 {"name": "Bash", "input": {"command": "touch refused", "description": "refused"}},
 {"name": "Read", "input": {"file_path": "$T/config.yaml"}}]
JSON
}

start_stub() {
	python3 "$SRC_ROOT/tests/messages_api_stub.py" "$T/requests.jsonl" "$T/script.json" \
		>"$T/stub.port" 2>"$T/stub.err" &
	STUB_PID=$!
	wait_for 5 test -s "$T/stub.port" || { fail "the stub did not start: $(cat "$T/stub.err")"; return 1; }
}

# run_claude ARGS...: claude -p in $T/proj with its own home, talking only
# to the stub.
run_claude() {
	(cd "$T/proj" && HOME=$T/home XDG_CONFIG_HOME=$T/home/.config \
		ANTHROPIC_BASE_URL="http://127.0.0.1:$(cat "$T/stub.port")" \
		ANTHROPIC_API_KEY=sk-ant-test-dummy CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
		DISABLE_AUTOUPDATER=1 timeout 180 claude -p "touch the files" "$@" \
		>"$T/claude.out" 2>"$T/claude.err")
}

# check_outcome: the granted call ran, the others were refused, as the
# requests the stub got show.
check_outcome() {
	[ -e "$T/proj/granted" ] || fail "the granted call did not run: $(cat "$T/claude.out" "$T/claude.err")"
	[ -e "$T/proj/refused" ] && fail "the call outside the pattern ran"
	python3 - "$T/requests.jsonl" <<'PY' || fail "the requests show otherwise"
import json, sys
reqs = [json.loads(l)["request"] for l in open(sys.argv[1])]
main = [r for r in reqs if r.get("tools")]
if not main:
    sys.exit("no request offered tools")
offered = {t.get("name") for t in main[-1]["tools"]}
results = {}
for m in main[-1]["messages"]:
    if m["role"] == "user" and isinstance(m["content"], list):
        for b in m["content"]:
            if b.get("type") == "tool_result":
                c = b.get("content")
                results[b["tool_use_id"]] = (b.get("is_error"), c if isinstance(c, str) else json.dumps(c))
bad = []
if "Bash" not in offered:
    bad.append("Bash is not offered: %s" % sorted(offered))
for t in ("Read", "Write", "Edit", "WebFetch", "WebSearch", "NotebookEdit"):
    if t in offered:
        bad.append("%s is offered" % t)
if set(results) != {"toolu_00", "toolu_01", "toolu_02"}:
    bad.append("tool results: %s" % sorted(results))
else:
    if results["toolu_00"][0]:
        bad.append("the granted call failed: %s" % results["toolu_00"][1])
    if not results["toolu_01"][0] or "denied" not in results["toolu_01"][1].lower():
        bad.append("the call outside the pattern was not refused: %s" % (results["toolu_01"],))
    if not results["toolu_02"][0]:
        bad.append("Read was not refused: %s" % (results["toolu_02"],))
if bad:
    sys.exit("\n".join(bad))
PY
}

# trust_project: what accepting Claude Code's trust dialog for $T/proj
# once records; until then it ignores the allow rules of the project's
# .claude/settings.json (its deny rules and defaultMode still apply).
trust_project() {
	python3 - "$T/home/.claude.json" "$T/proj" <<'PY'
import json, sys
json.dump({"projects": {sys.argv[2]: {"hasTrustDialogAccepted": True}}}, open(sys.argv[1], "w"))
PY
}

# The README's first way: the project's .claude is configs/<cfg>/claude.
# Untrusted, the project's allow rules are ignored and everything is
# refused (fail closed); trusted, the granted call runs.
test_linked_dot_claude() {
	setup
	start_mount -c "$T/config.yaml" --state "$T/state.db" || return
	ln -s "$MNT/configs/main/claude" "$T/proj/.claude"
	start_stub || return
	run_claude || fail "claude -p exited $?: $(tail -5 "$T/claude.err")"
	[ -e "$T/proj/granted" ] && fail "an untrusted project's allow rule was used"
	grep -q "has not been trusted" "$T/claude.err" || fail "no word of trust: $(cat "$T/claude.err")"
	stop_stub
	rm -f "$T/requests.jsonl"
	trust_project
	start_stub || return
	run_claude || fail "claude -p exited $?: $(tail -5 "$T/claude.err")"
	check_outcome
	# the gate view's skill reached the model through .claude/skills
	grep -q -- '- toucher: Touches the file' "$T/requests.jsonl" || fail "the skill toucher was not listed to the model"
	stop_stub
}

# The README's second way: --settings MOUNT/configs/<cfg>/claude/settings.json.
test_settings_flag() {
	setup
	start_mount -c "$T/config.yaml" --state "$T/state.db" || return
	start_stub || return
	run_claude --settings "$MNT/configs/main/claude/settings.json" ||
		fail "claude -p exited $?: $(tail -5 "$T/claude.err")"
	check_outcome
	stop_stub
}

run_tests
