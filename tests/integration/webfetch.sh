#!/usr/bin/env bash
# Integration: the webfetch tool through a real mount. A scripted model
# (tests/fake_model) fetches from a loopback HTTP server this script starts
# (tests/webfetch_server.py): an HTML page's text lands in the run's
# messages.json, a redirect is followed, the size caps cut the text, a
# loopback address is refused unless tools.webfetch.allow_private, and
# WebFetch(domain:HOST) holds the URL and every redirect to that host.
. "$(dirname "$0")/lib.sh"

: "${FAKE_MODEL:?FAKE_MODEL must name tests/fake_model}"

command -v python3 >/dev/null 2>&1 || {
	[ -n "${CI:-}" ] && { echo "python3 is missing under CI" >&2; exit 1; }
	echo "SKIP: python3 (for the loopback server) is not installed"
	exit 77
}

SERVER_PID=
stop_server() {
	[ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
	SERVER_PID=
}
trap 'stop_server; cleanup' EXIT

python3 "$SRC_ROOT/tests/webfetch_server.py" >"$T/port" &
SERVER_PID=$!
for _ in $(seq 1 100); do
	[ -s "$T/port" ] && break
	sleep 0.05
done
PORT=$(head -n1 "$T/port")
[ -n "$PORT" ] || { echo "the loopback server did not start" >&2; exit 1; }
BASE=http://127.0.0.1:$PORT

# write_config WEBFETCH_YAML: skills "open" (no allowed-tools) and "web"
# (allowed-tools: WebFetch(domain:localhost)); configurations of each.
write_config() {
	rm -rf "$T/skills" "$T/state"
	mkdir -p "$T/skills/open" "$T/skills/web"
	printf -- '---\nname: open\ndescription: any tool\n---\nBody.\n' >"$T/skills/open/SKILL.md"
	printf -- '---\nname: web\ndescription: localhost only\nallowed-tools: "WebFetch(domain:localhost)"\n---\nWeb.\n' \
		>"$T/skills/web/SKILL.md"
	cat >"$T/config.yaml" <<CFG
sources: [{path: skills, trust: first_party}]
model: {provider: command, command: [$FAKE_MODEL, $T/script.json], timeout: 30}
tools: {limits: {webfetch: {timeout: 20}}, webfetch: $1}
runs: {workers: 2}
configurations:
  open: {skills: [open]}
  web: {skills: [web]}
CFG
}

start_with() {
	start_mount -c "$T/config.yaml" --state "$T/state/state.db"
}

# fetch CONFIG URL: one run whose model makes one webfetch call of URL and
# then answers "done"; OUT gets the tool's result text, RUN_ID the run.
fetch() {
	script_calls webfetch "$(json_args url "$2")" && start_run "$1" go && finish_run
}

# has TEXT: the last result contains TEXT.
has() {
	case "$OUT" in *"$1"*) ;; *) fail "expected [$1] in [$OUT]" ;; esac
}

test_page_redirect_and_caps() {
	write_config "{allow_private: true, max_text: 1000, max_download: 2000}"
	start_with || return
	grep -qx webfetch "$MNT/tools" || fail "webfetch is not listed as available: $(cat "$MNT/tools")"
	fetch open "$BASE/page.html" || return
	has "HTTP 200 $BASE/page.html
# Fetch test

Fish & chips <3 \"quoted\" it's"
	has "- one
- two"
	case "$OUT" in *secret* | *"Ignored title"* | *hidden* | *"<p>"*) fail "markup or script text leaked: $OUT" ;; esac
	fetch open "$BASE/redirect" || return
	has "HTTP 200 $BASE/page.html
# Fetch test"
	fetch open "$BASE/big" || return
	has "[truncated: 1000 bytes of 2000 shown; tools.webfetch.max_text]"
	has "[truncated: 2000 bytes of 3145720 downloaded; tools.webfetch.max_download]"
	fetch open "$BASE/bin" || return
	has "[binary content: application/octet-stream, 5000 bytes; not shown]"
	fetch open "file:///etc/passwd" || return
	has "webfetch: only http and https URLs can be fetched"
}

test_private_addresses_refused_by_default() {
	write_config "{}"
	start_with || return
	fetch open "$BASE/page.html" || return
	has "webfetch: refused to connect to 127.0.0.1 (loopback address)"
	has "tools.webfetch.allow_private"
	case "$OUT" in *"Fish"*) fail "the page was fetched: $OUT" ;; esac
	# By name too: the address is checked after the name is resolved.
	fetch open "http://localhost:$PORT/redirect" || return
	has "(loopback address)"
}

test_domain_grant_holds_every_hop() {
	write_config "{allow_private: true}"
	start_with || return
	assert_eq "webfetch(domain:localhost)" "$(cat "$MNT/configs/web/allowed-tools")" \
		"the run's tools"
	fetch web "http://localhost:$PORT/redirect" || return
	has "HTTP 200 http://localhost:$PORT/page.html
# Fetch test"
	fetch web "http://localhost:$PORT/redirect-to?u=$BASE/page.html" || return
	has "is refused: the host '127.0.0.1' is not admitted by this run's grant (WebFetch(domain:localhost))"
	case "$OUT" in *"Fish"*) fail "the redirect was followed: $OUT" ;; esac
	fetch web "$BASE/page.html" || return
	has "error: tool 'webfetch' is not allowed: the command is not admitted"
	grep -q '"type":"tool_denied"' "$MNT/runs/$RUN_ID/events" || fail "no tool_denied event"
}

run_tests
