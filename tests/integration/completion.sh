#!/usr/bin/env bash
# Integration: bash completion (issue 16, item 8): commands, options,
# configuration and skill names from the mount -C names.
. "$(dirname "$0")/lib.sh"

COMPLETION=$SRC_ROOT/data/bash-completion/skillfs

# complete WORD...: what _skillfs offers for the last word of
# `skillfs WORD...`, sorted, one per line.
complete_line() {
	bash -c '
		source "$1"; shift
		COMP_WORDS=(skillfs "$@")
		COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
		_skillfs
		printf "%s\n" "${COMPREPLY[@]}"' _ "$COMPLETION" "$@" | sort
}

test_commands_and_options() {
	assert_eq "run
runs" "$(complete_line ru)" "commands"
	assert_eq "--skill" "$(complete_line run --sk)" "an option of run"
	assert_eq "--state" "$(complete_line runs --st)" "an option of runs"
	assert_eq "--foreground" "$(complete_line --fore)" "an option of the mount"
	# Every option --help prints is offered somewhere.
	local all o
	all=$(for c in "" run runs check; do complete_line $c -; done | sort -u)
	for o in $(help_options); do
		grep -qx -- "$o" <<<"$all" || fail "option $o is not completed"
	done
}

test_configurations_and_skills_from_the_mount() {
	mkdir -p "$T/skills/alpha-skill" "$T/skills/beta-skill"
	for s in alpha-skill beta-skill; do
		printf -- '---\nname: %s\ndescription: d\n---\nB.\n' "$s" >"$T/skills/$s/SKILL.md"
	done
	printf 'sources: [{path: skills}]\nconfigurations:\n  review: {skills: [alpha-skill]}\n  release: {skills: []}\n  other: {skills: []}\n' >"$T/config.yaml"
	start_mount -c "$T/config.yaml" --state "$T/state.db" || return
	assert_eq "release
review" "$(complete_line run -C "$MNT" --config re)" "configuration names"
	assert_eq "alpha-skill
beta-skill" "$(complete_line run -C "$MNT" --skill "")" "skill names"
	assert_eq "beta-skill" "$(SKILLFS_MOUNT=$MNT complete_line run --skill b)" "skills via SKILLFS_MOUNT"
	# -c takes a file, not a configuration name.
	complete_line -c "$T/conf" | grep -qx "$T/config.yaml" || fail "-c does not complete files"
}

run_tests
