#!/usr/bin/env bash
# Integration: `meson install` (issue 16, item 1; README "Install"): with
# DESTDIR it places every file (the binary, both man pages, the example
# config, demo model and skills, the system and user systemd units, the bash
# completion), and the installed binary mounts the installed example skills.
. "$(dirname "$0")/lib.sh"

: "${SKILLFS_BUILD_ROOT:?SKILLFS_BUILD_ROOT must name the build directory}"

DEST=$T/dest

install_all() {
	DESTDIR=$DEST meson install -C "$SKILLFS_BUILD_ROOT" --no-rebuild --quiet >"$T/install.log" 2>&1 ||
		{ cat "$T/install.log" >&2; fail "meson install failed"; return 1; }
	BIN=$(find "$DEST" -path '*/bin/skillfs' -type f | head -1)
	[ -n "$BIN" ] || { fail "no bin/skillfs installed"; return 1; }
	PREFIX=${BIN%/bin/skillfs} # $DEST + the prefix
}

test_every_file_is_placed() {
	install_all || return
	local f
	for f in lib/systemd/system/skillfs@.service lib/systemd/user/skillfs@.service \
		share/bash-completion/completions/skillfs share/skillfs/examples/config.yaml; do
		[ -f "$PREFIX/$f" ] || fail "not installed: $f"
	done
	if [ "${SKILLFS_MAN_PAGES:-}" = yes ] || [ -n "${CI:-}" ]; then
		for f in share/man/man1/skillfs.1 share/man/man5/skillfs.yaml.5; do
			[ -s "$PREFIX/$f" ] || fail "not installed: $f"
		done
	fi
	[ -x "$BIN" ] || fail "the binary is not executable"
	[ -x "$PREFIX/share/skillfs/examples/demo-model" ] || fail "demo-model is not executable"
	diff -r "$SRC_ROOT/examples/skills" "$PREFIX/share/skillfs/examples/skills" ||
		fail "the installed example skills differ from the tree's"
	# The units start the installed binary, in the foreground, Type=notify.
	for f in system user; do
		grep -qx "ExecStart=${PREFIX#"$DEST"}/bin/skillfs -f .* %f" "$PREFIX/lib/systemd/$f/skillfs@.service" ||
			fail "$f unit: ExecStart: $(grep ExecStart= "$PREFIX/lib/systemd/$f/skillfs@.service")"
		grep -qx "Type=notify" "$PREFIX/lib/systemd/$f/skillfs@.service" || fail "$f unit: not Type=notify"
		grep -qx 'ExecReload=kill -HUP $MAINPID' "$PREFIX/lib/systemd/$f/skillfs@.service" ||
			fail "$f unit: no reload by SIGHUP"
	done
	# systemd's own check of the system unit, pointed at the binary here.
	if command -v systemd-analyze >/dev/null; then
		sed "s|^ExecStart=[^ ]*|ExecStart=$BIN|" "$PREFIX/lib/systemd/system/skillfs@.service" \
			>"$T/skillfs@srv-skills.service"
		systemd-analyze verify --man=no "$T/skillfs@srv-skills.service" >"$T/verify.log" 2>&1 ||
			fail "systemd-analyze verify: $(cat "$T/verify.log")"
	fi
}

test_installed_binary_mounts_the_examples() {
	install_all || return
	local ex=$PREFIX/share/skillfs/examples
	"$BIN" check -c "$ex/config.yaml" >"$T/check.log" 2>&1 || fail "check of the installed config: $(cat "$T/check.log")"
	SKILLFS=$BIN start_mount -c "$ex/config.yaml" --state "$T/state/state.db" || return
	assert_eq "$(ls "$SRC_ROOT/examples/skills")" "$(ls "$MNT/skills")" "skills of the installed examples"
	cmp -s "$ex/skills/greet/SKILL.md" "$MNT/skills/greet/SKILL.md" || fail "greet/SKILL.md differs"
	# A run with the installed demo model (the config's ./demo-model).
	local out
	out=$(SKILLFS_MOUNT=$MNT "$BIN" run "hello" 2>"$T/run.err") || fail "run: $(cat "$T/run.err")"
	[ -n "$out" ] || fail "the installed demo model gave no result"
}

run_tests
