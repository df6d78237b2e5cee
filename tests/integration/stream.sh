#!/usr/bin/env bash
# Live progress (section 6, README "Following a run"): with the openai
# provider the reply streams into runs/<id>/transcript as it comes, and
# GNU `tail -f` of the transcript prints it before the reply is finished;
# messages.json never holds partial text; the committed reply replaces the
# streaming one, and what tail printed runs on into it.
. "$(dirname "$0")/lib.sh"

SERVER_PID=
start_server() {
	python3 "$SRC_ROOT/tests/sse_server.py" "$T/port" "$T/release" &
	SERVER_PID=$!
	wait_for 10 test -s "$T/port" || { fail "the SSE server did not start"; return 1; }
	cat >"$T/config.yaml" <<CFG
model: {provider: openai, base_url: "http://127.0.0.1:$(cat "$T/port")/v1", model: m, timeout: 60}
configurations:
  default: {skills: []}
CFG
}

stop_server() {
	touch "$T/release"
	[ -z "$SERVER_PID" ] || { kill "$SERVER_PID" 2>/dev/null; wait "$SERVER_PID" 2>/dev/null; }
	SERVER_PID=
}

test_tail_f_prints_the_reply_while_it_streams() {
	start_server || return
	start_mount -c "$T/config.yaml" --state "$T/state.db" || { stop_server; return; }
	start_run default "say hello" || { stop_server; return; }
	local tr=$MNT/runs/$RUN_ID/transcript
	tail -f -s 0.2 "$tr" >"$T/tail.out" 2>"$T/tail.err" &
	local tail_pid=$!
	if ! wait_for 15 grep -q "partial world" "$T/tail.out"; then
		fail "tail -f printed no streamed text: [$(cat "$T/tail.out")] [$(cat "$T/tail.err")]"
	fi
	# The reply is not finished: the server holds its end back.
	assert_eq running "$(cat "$MNT/runs/$RUN_ID/status")" "status while streaming"
	grep -q "^streaming: Hello, partial world$" "$tr" ||
		fail "the transcript does not mark the partial reply: [$(cat "$tr")]"
	grep -q "partial world" "$MNT/runs/$RUN_ID/messages.json" &&
		fail "messages.json shows partial text"
	# stat's size is the bytes a read returns, also while streaming.
	assert_eq "$(stat -c %s "$tr")" "$(wc -c <"$tr")" "size of the streaming transcript"
	touch "$T/release"
	assert_eq completed "$(cat "$MNT/runs/$RUN_ID/wait")" "run state"
	assert_eq "Hello, partial world and the rest." "$(cat "$MNT/runs/$RUN_ID/result")" "result"
	grep -q "^assistant: Hello, partial world and the rest.$" "$tr" ||
		fail "the committed reply is not in the transcript: [$(cat "$tr")]"
	grep -q "streaming:" "$tr" && fail "the transcript still shows the streaming reply"
	# What tail printed ran on into the committed text, without a
	# truncation or a repeat.
	wait_for 5 grep -q "partial world and the rest.$" "$T/tail.out" ||
		fail "tail -f did not read on into the committed reply: [$(cat "$T/tail.out")]"
	kill "$tail_pid" 2>/dev/null
	wait "$tail_pid" 2>/dev/null
	grep -q "truncated" "$T/tail.err" && fail "tail saw the transcript shrink: $(cat "$T/tail.err")"
	assert_eq 1 "$(grep -c "Hello, partial" "$T/tail.out")" "the reply printed once by tail"
	grep -q '"stream": *true' "$T/port.requests" || fail "the request did not ask for a stream"
	stop_server
}

run_tests
