#!/usr/bin/env bash
# Integration: who sees a run when other users reach the mount (-o
# allow_other; issue "Confinement", item 7; DESIGN.md section 6, D10). The
# mount is root's; two unprivileged users make runs: each one's run is its
# own (0700, files 0600/0400, owned by its maker), the kernel checks the
# modes (default_permissions), and only the owner and root get in. Real ls,
# cat, stat, echo, mkdir, rmdir, run as those users with setpriv.
. "$(dirname "$0")/lib.sh"

OWNER=65534 # nobody
OTHER=65533 # a uid with no name: none is needed

# as_uid UID CMD...: CMD as user and group UID, with no other groups and
# no capabilities (a non-root uid keeps none across exec).
as_uid() {
	local u=$1
	shift
	setpriv --reuid="$u" --regid="$u" --clear-groups -- "$@"
}

# as_plain_root CMD...: CMD as uid 0 with every capability dropped (see
# runs.sh): the kernel's mode checks then apply to it as to anyone.
as_plain_root() {
	setpriv --bounding-set -all --inh-caps -all --securebits +noroot,+noroot_locked -- "$@"
}

# can_run_as_others: root (mounting with allow_other needs no fuse.conf
# entry then), and setpriv works here.
can_run_as_others() {
	[ "$(id -u)" = 0 ] && as_uid "$OTHER" true 2>/dev/null && as_plain_root true 2>/dev/null
}

setup_skills() {
	rm -rf "$T/skills" "$T/state"
	mkdir -p "$T/skills/shared"
	printf -- '---\nname: shared\ndescription: a skill everyone sees\n---\nBody.\n' \
		>"$T/skills/shared/SKILL.md"
	# The other users must reach the mount point inside the test directory.
	chmod 0711 "$T"
}

start_shared() { start_mount -s "$T/skills" --state "$T/state/state.db" "$@"; }

# mode_of PATH: "uid gid octal-mode" of PATH, as root sees it.
mode_of() { stat -c '%u %g %a' "$1"; }

test_allow_other_run_is_its_makers() {
	can_run_as_others || { echo "skip: needs root and setpriv" >&2; return 0; }
	setup_skills
	start_shared -o allow_other || return
	local runs=$MNT/runs
	# runs/ takes anyone's mkdir; the sticky bit keeps a run its owner's.
	assert_eq "0 0 1777" "$(mode_of "$runs")" "runs/ with allow_other"
	local id
	id=$(as_uid $OWNER cat "$runs/new") || { fail "the owner cannot read runs/new"; return; }
	as_uid $OWNER mkdir "$runs/$id" || { fail "an unprivileged user cannot make a run"; return; }
	assert_eq "$OWNER $OWNER 700" "$(mode_of "$runs/$id")" "the run directory"
	local f
	for f in prompt config skills ctl; do
		assert_eq "$OWNER $OWNER 600" "$(mode_of "$runs/$id/$f")" "writable $f"
	done
	for f in status wait input info.json transcript events messages.json; do
		assert_eq "$OWNER $OWNER 400" "$(mode_of "$runs/$id/$f")" "read-only $f"
	done

	# Another user sees the id, and the shared catalogue, but nothing of
	# the run itself. It is created: ctl, prompt, config would be writable
	# by its owner, so a refusal here is the owner check, not the state.
	as_uid $OTHER ls "$runs" | grep -qx "$id" || fail "another user cannot list runs/"
	assert_eq "$OWNER" "$(as_uid $OTHER stat -c %u "$runs/$id")" "another user stats the run directory"
	as_uid $OTHER cat "$runs/new" >/dev/null || fail "another user cannot read runs/new"
	as_uid $OTHER ls "$MNT/skills" | grep -qx shared || fail "another user cannot list skills/"
	as_uid $OTHER cat "$MNT/skills/shared/SKILL.md" | grep -q Body || fail "another user cannot read a skill"
	as_uid $OTHER ls "$MNT/configs/default" >/dev/null || fail "another user cannot list configs/"
	expect_fail "Permission denied" as_uid $OTHER ls "$runs/$id"
	expect_fail "Permission denied" as_uid $OTHER cat "$runs/$id/prompt"
	expect_fail "Permission denied" as_uid $OTHER cat "$runs/$id/status"
	expect_fail "Permission denied" as_uid $OTHER stat "$runs/$id/status"
	expect_fail "Permission denied" as_uid $OTHER timeout 5 cat "$runs/$id/wait"
	expect_fail "Permission denied" as_uid $OTHER sh -c "echo cancel > '$runs/$id/ctl'"
	expect_fail "Permission denied" as_uid $OTHER sh -c "echo injected > '$runs/$id/prompt'"
	expect_fail "Permission denied" as_uid $OTHER sh -c "echo default > '$runs/$id/config'"
	expect_fail "Permission denied" as_uid $OTHER truncate -s 0 "$runs/$id/prompt"
	expect_fail "Operation not permitted" as_uid $OTHER rmdir "$runs/$id"
	# uid 0 without its capabilities is no root: the modes apply to it.
	expect_fail "Permission denied" as_plain_root ls "$runs/$id"
	expect_fail "Permission denied" as_plain_root cat "$runs/$id/prompt"
	assert_eq created "$(cat "$runs/$id/status")" "nothing another user tried changed the run"
	assert_eq "" "$(cat "$runs/$id/prompt")" "the prompt is untouched"

	# The other user makes a run of its own, which the first cannot see.
	local mine
	mine=$(as_uid $OTHER cat "$runs/new") && as_uid $OTHER mkdir "$runs/$mine" ||
		{ fail "a second user cannot make a run"; return; }
	assert_eq "$OTHER $OTHER 700" "$(mode_of "$runs/$mine")" "the second user's run"
	expect_fail "Permission denied" as_uid $OWNER ls "$runs/$mine"
	expect_fail "Operation not permitted" as_uid $OWNER rmdir "$runs/$mine"

	# The owner uses its run: config, prompt, wait, result, ctl, rmdir.
	local out
	out=$(as_uid $OWNER sh -c '
		cd "$1" || exit 1
		echo default >config || exit 2
		echo "from the owner" >prompt || exit 3
		[ "$(cat wait)" = completed ] || exit 4
		grep -q "from the owner" result || exit 5
		ls | grep -qx result || exit 6
		echo cancel 2>/dev/null >ctl && exit 7
		echo done' _ "$runs/$id" 2>&1)
	assert_eq done "$out" "the owner makes, runs and reads its run"
	assert_eq "$OWNER $OWNER 400" "$(mode_of "$runs/$id/prompt")" "a started run's prompt"
	assert_eq "$OWNER $OWNER 400" "$(mode_of "$runs/$id/result")" "the result"
	expect_fail "Permission denied" as_uid $OTHER cat "$runs/$id/result"
	expect_fail "Permission denied" as_uid $OTHER cat "$runs/$id/wait"

	# Root gets into every run.
	ls "$runs/$id" | grep -qx result || fail "root cannot list the run"
	grep -q "from the owner" "$runs/$id/result" || fail "root cannot read the result"
	ls "$runs/$mine" >/dev/null || fail "root cannot list the second user's run"

	# The owner is kept across a remount; without allow_other the modes
	# are those of a mount only its user reaches, and the owner shows.
	stop_mount
	start_shared -o allow_other || return
	assert_eq "$OWNER $OWNER 700" "$(mode_of "$runs/$id")" "the owner after a remount"
	expect_fail "Permission denied" as_uid $OTHER cat "$runs/$id/result"
	stop_mount
	start_shared || return
	assert_eq "0 0 755" "$(mode_of "$runs")" "runs/ without allow_other"
	assert_eq "$OWNER $OWNER 555" "$(mode_of "$runs/$id")" "a run without allow_other"
	assert_eq "$OWNER $OWNER 444" "$(mode_of "$runs/$id/result")" "its result without allow_other"
	stop_mount
	start_shared -o allow_other || return

	as_uid $OWNER rmdir "$runs/$id" || fail "the owner cannot remove its run"
	[ ! -e "$runs/$id" ] || fail "the run is still there after its owner's rmdir"
	rmdir "$runs/$mine" || fail "root cannot remove another user's run"
	assert_eq new "$(ls "$runs")" "every run removed"
}

# Options given in several -o are all taken: the mount is shared when
# any of them says allow_other.
test_allow_other_in_a_later_o_counts() {
	can_run_as_others || { echo "skip: needs root and setpriv" >&2; return 0; }
	setup_skills
	start_shared -o noatime -o allow_other || return
	assert_eq "0 0 1777" "$(mode_of "$MNT/runs")" "runs/ with allow_other in a second -o"
	grep " $MNT fuse" /proc/self/mounts | grep -q allow_other || fail "the kernel did not get allow_other"
	local id
	id=$(as_uid $OWNER cat "$MNT/runs/new") && as_uid $OWNER mkdir "$MNT/runs/$id" ||
		{ fail "mkdir by an unprivileged user failed"; return; }
	expect_fail "Permission denied" as_uid $OTHER ls "$MNT/runs/$id"
}

run_tests
