#!/usr/bin/env bash
# Integration: configs/<cfg>/claude/, a ready `.claude` directory per
# configuration (DESIGN.md section 8; R2-R4, D1, D3): for a configuration
# of each policy, settings.json is valid JSON with exactly the expected
# allow, deny and defaultMode; it follows an edit within a second; skills/
# lists exactly the effective skills; warnings names what has no Claude
# Code equivalent; the directory copies whole; skillfs check --claude prints
# the same settings.
. "$(dirname "$0")/lib.sh"

make_skill() { # dir name allowed-tools|-
	mkdir -p "$1/$2"
	{
		echo "---"
		echo "name: $2"
		echo "description: skill $2"
		[ "$3" = "-" ] || echo "allowed-tools: $3"
		echo "---"
		echo "# $2"
	} >"$1/$2/SKILL.md"
}

setup() {
	rm -rf "$T/skills" "$T/copy" "$T/untar"
	make_skill "$T/skills" reviewer '"Read, Bash(git diff:*), WebFetch(domain:example.com)"'
	make_skill "$T/skills" data '[python, read]'
	make_skill "$T/skills" quiet '[]'
	make_skill "$T/skills" free -
	make_skill "$T/skills" helper -
	mkdir -p "$T/skills/helper/scripts"
	printf '#!/bin/sh\necho helped\n' >"$T/skills/helper/scripts/help.sh"
	chmod 0755 "$T/skills/helper/scripts/help.sh"
	make_skill "$T/skills" unused '[bash]'
	# Only read is registered: the Claude Code settings are not bounded
	# by what skillfs itself can run.
	cat >"$T/config.yaml" <<CFG
sources: [{path: skills, trust: first_party}]
tools: {registered: [read]}
configurations:
  review: {skills: [reviewer, data, helper]}
  empty: {skills: [quiet, free]}
  open: {skills: [free, helper]}
  solo: {skills: [reviewer, free]}
  capped: {skills: [reviewer, free], tools: [read, "Bash(git diff --stat:*)", write]}
  capped_open: {skills: [free, helper], tools: [grep]}
CFG
}

start() { start_mount -c "$T/config.yaml" --state "$T/state.db"; }

# Every name of the table Claude Code 2.1 is told of, but the note tools.
DENY_ALL="Agent AskUserQuestion Bash BashOutput CronCreate CronDelete CronList Edit EnterPlanMode
EnterWorktree ExitPlanMode ExitWorktree Glob Grep KillShell LSP ListMcpResourcesTool Monitor
NotebookEdit PowerShell REPL Read ReadMcpResourceTool ReportFindings ScheduleWakeup SendMessage
Task TaskOutput TaskStop WebFetch WebSearch Workflow Write"
NOTES="Skill TaskCreate TaskGet TaskList TaskUpdate TodoWrite ToolSearch"

# without LIST WORD...: LIST less the WORDs.
without() {
	local list=$1 w
	shift
	for w in $list; do
		case " $* " in *" $w "*) ;; *) printf '%s ' "$w" ;; esac
	done
}

# settings_is FILE ALLOW DENY MODE: FILE is one JSON object
# {"permissions": {"allow", "deny"[, "defaultMode"]}} and nothing else,
# allow and deny exactly the (blank-separated; a blank inside parentheses
# is part of the rule) names in that order, and defaultMode MODE ("-":
# absent). Prints what differs.
settings_is() {
	python3 - "$@" <<'PY'
import json, sys
def rules(text):
    out = []
    for w in text.split():
        if out and out[-1].count("(") > out[-1].count(")"):
            out[-1] += " " + w
        else:
            out.append(w)
    return out
path, allow, deny, mode = sys.argv[1], rules(sys.argv[2]), rules(sys.argv[3]), sys.argv[4]
try:
    j = json.load(open(path))
except Exception as e:
    sys.exit("%s is not JSON: %s" % (path, e))
want = {"allow": allow, "deny": deny}
if mode != "-":
    want["defaultMode"] = mode
if j != {"permissions": want}:
    sys.exit("%s:\n got  %s\n want %s" % (path, json.dumps(j), json.dumps({"permissions": want})))
PY
}

# Each policy (R2, R3): a declared list, declared empty, none declared.
test_settings_of_each_policy() {
	setup
	start || return
	local c=$MNT/configs
	settings_is "$c/review/claude/settings.json" \
		"Bash(git diff:*) Read $NOTES WebFetch(domain:*.example.com) WebFetch(domain:example.com)" \
		"$(without "$DENY_ALL" Bash Read WebFetch)" dontAsk || fail "review (a declared list)"
	settings_is "$c/empty/claude/settings.json" "$NOTES" "$DENY_ALL" dontAsk ||
		fail "empty (declared [] beside a skill declaring nothing)"
	settings_is "$c/open/claude/settings.json" \
		"AskUserQuestion Bash Edit Glob Grep Read $NOTES WebFetch Write" "" - ||
		fail "open (policy all)"
	grep -q "express no restriction" "$c/open/claude/warnings" ||
		fail "open's warnings: $(cat "$c/open/claude/warnings")"
	grep -q "express no restriction" "$c/review/claude/warnings" &&
		fail "review's warnings say no restriction"
	# skillfs's own list is bounded by the registered tools; this is not
	assert_eq read "$(cat "$c/review/allowed-tools")" "review's allowed-tools (registered: read)"
	assert_eq "settings.json skills warnings" "$(ls "$c/review/claude" | paste -sd' ')" "claude/ lists"
}

# The configuration's tool ceiling caps the settings as it caps
# allowed-tools (issue "Trust": configurations.<cfg>.tools): a ceiling
# pattern narrows a pattern it extends, a tool no skill grants stays out,
# and with policy all the ceiling is the list.
test_settings_are_capped_by_the_ceiling() {
	setup
	start || return
	local c=$MNT/configs
	settings_is "$c/capped/claude/settings.json" \
		"Bash(git diff --stat:*) Read $NOTES" \
		"$(without "$DENY_ALL" Bash Read)" dontAsk || fail "capped (a declared list)"
	settings_is "$c/capped_open/claude/settings.json" "Grep $NOTES" \
		"$(without "$DENY_ALL" Grep)" dontAsk || fail "capped_open (policy all, ceiling [grep])"
}

# An edit that removes the only declaring skill's grant of a tool shows
# within a second, and so does a config edit that leaves no declaring
# skill; stat sizes follow.
test_follows_edits_within_a_second() {
	setup
	start || return
	local s=$MNT/configs/solo/claude/settings.json
	grep -q '"Bash(git diff:\*)"' "$s" || fail "solo before: $(cat "$s")"
	sed -i 's/^allowed-tools: .*/allowed-tools: "Read, WebFetch(domain:example.com)"/' \
		"$T/skills/reviewer/SKILL.md"
	wait_for 1 settings_is "$s" "Read $NOTES WebFetch(domain:*.example.com) WebFetch(domain:example.com)" \
		"$(without "$DENY_ALL" Read WebFetch)" dontAsk 2>/dev/null ||
		{ settings_is "$s" x x x; fail "the edit did not show within 1 s"; }
	assert_eq "$(wc -c <"$s")" "$(stat -c %s "$s")" "size after the edit"
	# the only declaring skill disabled: no declaration, policy all
	sed -i 's/solo: {skills: \[reviewer, free\]}/solo: {skills: [{name: reviewer, enabled: false}, free]}/' \
		"$T/config.yaml"
	wait_for 1 settings_is "$s" "AskUserQuestion Bash Edit Glob Grep Read $NOTES WebFetch Write" "" - \
		2>/dev/null || { settings_is "$s" x x x; fail "disabling reviewer did not show within 1 s"; }
	assert_eq "free" "$(ls "$MNT/configs/solo/claude/skills" | paste -sd' ')" "solo's skills after"
	assert_eq "$(wc -c <"$s")" "$(stat -c %s "$s")" "size after the config edit"
}

# skills/ holds exactly the effective skills, each its source whole.
test_skills_are_the_effective_skills() {
	setup
	start || return
	local cfg
	for cfg in review empty open solo; do
		assert_eq "$(sort "$MNT/configs/$cfg/effective" | paste -sd' ')" \
			"$(ls "$MNT/configs/$cfg/claude/skills" | paste -sd' ')" "$cfg: claude/skills"
		assert_eq "$(ls "$MNT/configs/$cfg/skills" | paste -sd' ')" \
			"$(ls "$MNT/configs/$cfg/claude/skills" | paste -sd' ')" "$cfg: the same gate view"
	done
	assert_eq "data helper reviewer" "$(ls "$MNT/configs/review/claude/skills" | paste -sd' ')" "review"
	diff -r "$T/skills/helper" "$MNT/configs/review/claude/skills/helper" >/dev/null ||
		fail "helper differs from its source"
	assert_eq helped "$("$MNT/configs/review/claude/skills/helper/scripts/help.sh")" "a script runs"
	[ -e "$MNT/configs/review/claude/skills/unused" ] && fail "an unattached skill is there"
}

# What has no Claude Code equivalent is named, never widened.
test_warnings_name_python() {
	setup
	start || return
	local w=$MNT/configs/review/claude/warnings
	grep -q "^python: left out: .*(granted by 'data')" "$w" || fail "warnings: $(cat "$w")"
	grep -q "pre-approved" "$w" || fail "the WebFetch note is missing: $(cat "$w")"
	grep -q 'python' "$MNT/configs/review/claude/settings.json" && fail "python in settings.json"
	assert_eq "$(wc -c <"$w")" "$(stat -c %s "$w")" "warnings size"
}

# Read-only, sizes equal to bytes read, and cp -r and tar copy it whole.
test_copy_and_modes() {
	setup
	start || return
	local d=$MNT/configs/review/claude f
	assert_eq 555 "$(stat -c %a "$d")" "mode of claude/"
	assert_eq 555 "$(stat -c %a "$d/skills")" "mode of claude/skills"
	for f in settings.json warnings; do
		assert_eq 444 "$(stat -c %a "$d/$f")" "mode of $f"
		assert_eq "$(wc -c <"$d/$f")" "$(stat -c %s "$d/$f")" "size of $f"
	done
	expect_fail "Permission denied" sh -c "echo '{}' > '$d/settings.json'"
	expect_fail "Permission denied" touch "$d/settings.local.json"
	cp -r "$d" "$T/copy" || fail "cp -r failed"
	diff -r "$d" "$T/copy" >"$T/diff.out" 2>&1 || fail "cp -r differs: $(head -5 "$T/diff.out")"
	mkdir -p "$T/untar"
	tar -C "$MNT/configs/review" -cf - claude | tar -C "$T/untar" -xf - || fail "tar failed"
	diff -r "$d" "$T/untar/claude" >"$T/diff.out" 2>&1 || fail "tar differs: $(head -5 "$T/diff.out")"
	settings_is "$T/untar/claude/settings.json" \
		"Bash(git diff:*) Read $NOTES WebFetch(domain:*.example.com) WebFetch(domain:example.com)" \
		"$(without "$DENY_ALL" Bash Read WebFetch)" dontAsk || fail "the copy's settings"
}

# skillfs check --claude prints, for each configuration, the settings the
# mount shows, on one line; the report still ends with its count.
test_check_claude_prints_the_same() {
	setup
	start || return
	local out cfg
	out=$("$SKILLFS" check -c "$T/config.yaml" --claude 2>&1) || fail "check --claude failed: $out"
	for cfg in review empty open solo; do
		python3 - "$cfg" "$MNT/configs/$cfg/claude/settings.json" "$out" <<'PY' ||
import json, sys
cfg, path, out = sys.argv[1:]
key = "configuration %s: claude settings.json: " % cfg
lines = [l[len(key):] for l in out.splitlines() if l.startswith(key)]
if len(lines) != 1 or json.loads(lines[0]) != json.load(open(path)):
    sys.exit("check --claude for %s: %s" % (cfg, lines))
PY
			fail "check --claude differs for $cfg"
	done
	grep -q "^configuration review: claude warning: python: left out" <<<"$out" ||
		fail "no claude warning line: $out"
	assert_eq "errors: 0" "$(tail -1 <<<"$out")" "the last line"
	out=$("$SKILLFS" check -c "$T/config.yaml" 2>&1)
	grep -q "claude" <<<"$out" && fail "check without --claude prints claude lines"
	expect_fail "--claude is an option of skillfs check" "$SKILLFS" --claude -c "$T/config.yaml" "$MNT"
}

run_tests
