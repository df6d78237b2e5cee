#!/usr/bin/env bash
# Integration: the man pages (issue 16, item 2): skillfs(1) and
# skillfs.yaml(5) render with `man --warnings` and nothing to say, and they
# cannot drift from the program: every option `skillfs --help` prints is in
# skillfs(1), and every key the config parser reads (its own tables, as
# tests/config_keys prints them) is in skillfs.yaml(5).
. "$(dirname "$0")/lib.sh"

: "${CONFIG_KEYS:?CONFIG_KEYS must name tests/config_keys}"
: "${SKILLFS_BUILD_ROOT:?SKILLFS_BUILD_ROOT must name the build directory}"
PAGE1=$SRC_ROOT/doc/skillfs.1.scd
PAGE5=$SRC_ROOT/doc/skillfs.yaml.5.scd

test_pages_render_without_warnings() {
	if [ "${SKILLFS_MAN_PAGES:-}" != yes ]; then
		[ -n "${CI:-}" ] && { fail "scdoc is missing under CI (scripts/deps installs it)"; return; }
		echo "SKIP: scdoc is not installed: no man pages built"
		return
	fi
	command -v man >/dev/null || { fail "man (package man-db) is missing"; return; }
	local p out
	for p in skillfs.1 skillfs.yaml.5; do
		[ -s "$SKILLFS_BUILD_ROOT/$p" ] || { fail "$p was not built"; continue; }
		out=$(MANWIDTH=80 man --warnings -E UTF-8 -l "$SKILLFS_BUILD_ROOT/$p" 2>&1 >/dev/null)
		[ -z "$out" ] || fail "man --warnings $p: $out"
		MANWIDTH=80 man -E UTF-8 -l "$SKILLFS_BUILD_ROOT/$p" 2>/dev/null | grep -q '^NAME' ||
			fail "$p does not render"
	done
}

test_every_help_option_is_in_skillfs_1() {
	local help opts o n=0
	help=$("$SKILLFS" --help) || { fail "--help failed"; return; }
	opts=$(help_options)
	# The -o options skillfs takes itself (state=DB ...).
	opts+=$'\n'$(grep -oE '\b(state|skills|recursive)=' <<<"$help" | sort -u)
	for o in $opts; do
		n=$((n + 1))
		grep -qF -- "*$o*" "$PAGE1" || fail "skillfs(1) does not document $o"
	done
	[ "$n" -ge 15 ] || fail "only $n options found in --help: the test reads it wrong"
	# The subcommands too.
	for o in check run runs; do
		grep -qF "*skillfs $o*" "$PAGE1" || fail "skillfs(1) does not document skillfs $o"
	done
}

test_every_config_key_is_in_skillfs_yaml_5() {
	local keys k n=0
	keys=$("$CONFIG_KEYS") || { fail "config_keys failed"; return; }
	for k in $keys; do
		n=$((n + 1))
		grep -qF -- "*$k*" "$PAGE5" || fail "skillfs.yaml(5) does not document $k"
	done
	[ "$n" -ge 40 ] || fail "only $n keys: config_keys reads the parser wrong"
	# The test sees a key the parser does not know: a page entry alone
	# does not make it pass.
	grep -qx "runs.budget.model_calls" <<<"$keys" || fail "config_keys lacks runs.budget.model_calls"
	grep -qx "no.such.key" <<<"$keys" && fail "config_keys lists a made-up key"
	return 0
}

run_tests
