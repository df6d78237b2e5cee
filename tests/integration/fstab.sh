#!/usr/bin/env bash
# Integration: `mount -t fuse.skillfs CONFIG MOUNTPOINT -o OPTS` and an
# /etc/fstab line (through mount.fuse3, which runs `skillfs SOURCE
# MOUNTPOINT -o OPTS` and lets it daemonise) (issue 16, item 3; README
# "`mount`, `/etc/fstab` and systemd"). The options reach the daemon: state=, skills=,
# recursive=, allow_other; nofail, _netdev and x-systemd.* are mount(8)'s.
#
# mount(8) runs its helper with no PATH of its own, so mount.fuse3 finds
# `skillfs` on the default one: the test runs in a mount namespace of its
# own where a directory holding `skillfs` (this build's) is bound over
# /usr/local/sbin; nothing outside the namespace sees it.
if [ -z "${SKILLFS_FSTAB_NS:-}" ]; then
	if [ "$(id -u)" != 0 ]; then
		[ -n "${CI:-}" ] && { echo "mount -t needs root, which CI has" >&2; exit 1; }
		echo "SKIP: mount -t fuse.skillfs needs root"
		exit 77
	fi
	command -v mount.fuse3 >/dev/null || { echo "mount.fuse3 (package fuse3) is missing" >&2; exit 1; }
	SKILLFS_FSTAB_NS=1 exec unshare -m --propagation private bash "$0" "$@"
fi
. "$(dirname "$0")/lib.sh"

mkdir -p "$T/bin"
ln -s "$(readlink -f "$SKILLFS")" "$T/bin/skillfs"
mount --bind "$T/bin" /usr/local/sbin || { echo "cannot bind over /usr/local/sbin" >&2; exit 1; }

# setup: a config with skill "one", a -s style directory with "two" and a
# recursive one with "deep/three".
setup() {
	rm -rf "$T/cfg" "$T/extra" "$T/tree" "$T/db"
	mkdir -p "$T/cfg/skills/one" "$T/extra/two" "$T/tree/a/b/three" "$T/db"
	for s in cfg/skills/one extra/two tree/a/b/three; do
		printf -- '---\nname: %s\ndescription: d\n---\nBody.\n' "${s##*/}" >"$T/$s/SKILL.md"
	done
	printf 'sources: [{path: skills}]\nmodel: {provider: echo}\nconfigurations: {default: {skills: [one, two]}}\n' >"$T/cfg/config.yaml"
	mkdir -p "$MNT"
}

# check_mounted: the mount is up as a daemon (no -f) with every option.
check_mounted() {
	grep -qs " $MNT fuse.skillfs " /proc/self/mounts || { fail "not mounted: $(cat /proc/self/mounts | grep skillfs)"; return 1; }
	assert_eq "one
three
two" "$(ls "$MNT/skills")" "skills from the config, skills= and recursive="
	[ -f "$T/db/state.db" ] || fail "state= did not reach the daemon: $(ls "$T/db")"
	grep " $MNT fuse.skillfs " /proc/self/mounts | grep -q allow_other || fail "allow_other not set"
	# allow_other: runs/ is shared like /tmp (README "Other users").
	assert_eq 1777 "$(stat -c %a "$MNT/runs")" "runs/ mode under allow_other"
	local id
	id=$(cat "$MNT/runs/new") && mkdir "$MNT/runs/$id" && echo "hello" >"$MNT/runs/$id/prompt"
	assert_eq completed "$(cat "$MNT/runs/$id/wait")" "a run through the fstab mount ($(cat "$MNT/runs/$id/error" 2>/dev/null))"
	# The run is in the database that state= named.
	"$SKILLFS" runs --state "$T/db/state.db" | grep -q "^$id " || fail "the run is not in state="
}

# unmount: fusermount3 -u, then the daemon lets go of the database (its
# lock) within 5 s.
unmount() {
	fusermount3 -u "$MNT" || fail "fusermount3 -u failed"
	wait_for 5 flock -n "$T/db/state.db.lock" true || fail "the daemon did not exit after unmount"
	grep -qs " $MNT fuse" /proc/self/mounts && fail "still mounted"
	return 0
}

test_mount_t_fuse_skillfs() {
	setup
	mount -t fuse.skillfs "$T/cfg/config.yaml" "$MNT" \
		-o "state=$T/db/state.db,skills=$T/extra,recursive=$T/tree,allow_other,nofail,_netdev" ||
		{ fail "mount -t fuse.skillfs failed"; return; }
	check_mounted
	unmount
}

test_fstab_line() {
	setup
	printf '%s %s fuse.skillfs state=%s,skills=%s,recursive=%s,allow_other,nofail,_netdev,x-systemd.automount,noauto 0 0\n' \
		"$T/cfg/config.yaml" "$MNT" "$T/db/state.db" "$T/extra" "$T/tree" >"$T/fstab"
	mount -T "$T/fstab" "$MNT" || { fail "mount -T fstab MOUNTPOINT failed"; return; }
	check_mounted
	unmount
}

test_bad_option_is_refused() {
	setup
	local out rc=0
	out=$(mount -t fuse.skillfs "$T/cfg/config.yaml" "$MNT" -o "state=$T/db/state.db,no_such_option" 2>&1) || rc=$?
	[ "$rc" != 0 ] || fail "an unknown option was taken"
	grep -q "no_such_option" <<<"$out" || fail "the refusal does not name the option: $out"
	grep -qs " $MNT fuse" /proc/self/mounts && fail "mounted anyway"
	out=$("$SKILLFS" -f "$T/cfg/config.yaml" "$MNT" -o state= 2>&1) && fail "state= with no value was taken"
	grep -q "state= needs a value" <<<"$out" || fail "message: $out"
	out=$("$SKILLFS" -f -c "$T/cfg/config.yaml" "$T/cfg/config.yaml" "$MNT" 2>&1) && fail "two config files taken"
	grep -q "given twice" <<<"$out" || fail "message: $out"
	return 0
}

run_tests
