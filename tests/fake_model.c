/* fake_model: a scripted model program for the command provider (tests).
 *
 *   fake_model [SCRIPT.json]        (or the script path in $FAKE_MODEL_SCRIPT)
 *
 * Reads one request object from stdin and prints one reply on stdout.
 * Without a script it answers
 *   {"role":"assistant","content":"echo: <last user message>\ntools: yes|no"}
 * where yes means the request had a "tools" field.
 *
 * A script is a JSON array of entries indexed by metadata.turn (turn 1 is
 * the first entry), or an object mapping chat-id prefixes to such arrays
 * (the longest prefix of metadata.chat_id wins; "*" matches any chat).
 * A turn past the end of its array exits 2. Each entry is an object; in
 * this order:
 *   "touch": "path"      create that file first (the request was read)
 *   "sleep_ms": N        sleep
 *   "stderr": "text"     write text to stderr
 *   "exit": N            exit with status N (after stderr)
 *   "raw": "text"        print text as is
 *   "big": N             print N bytes of 'x'
 *   "dump_request": true reply with the request (as JSON text) as content
 *   "reply": {...}       print that object (a message or a chat completion)
 * an entry with "role", "content", "tool_calls" or "choices" is printed
 * verbatim; anything else gets the default answer.
 *
 * When $FAKE_MODEL_STARTED names a file, the program appends its pid to it
 * as it starts, before reading stdin. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

static int die(const char *what, const char *detail)
{
	fprintf(stderr, "fake_model: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
	return 2;
}

static json_t *pick_turns(json_t *script, const char *chat_id)
{
	if (json_is_array(script))
		return script;
	json_t *best = NULL;
	size_t best_len = 0;
	const char *key;
	json_t *v;
	json_object_foreach(script, key, v) {
		size_t kl = strcmp(key, "*") == 0 ? 0 : strlen(key);
		if (kl && (!chat_id || strncmp(chat_id, key, kl) != 0))
			continue;
		if (!best || kl > best_len) {
			best = v;
			best_len = kl;
		}
	}
	return best;
}

static int print_json(json_t *v)
{
	if (json_dumpf(v, stdout, JSON_COMPACT) < 0)
		return die("cannot print the reply", NULL);
	putchar('\n');
	return 0;
}

static int default_reply(json_t *req, const char *content_override)
{
	json_t *msgs = json_object_get(req, "messages");
	const char *last = "";
	for (size_t i = json_array_size(msgs); i-- > 0;) {
		json_t *m = json_array_get(msgs, i);
		const char *role = json_string_value(json_object_get(m, "role"));
		if (role && strcmp(role, "user") == 0) {
			const char *c = json_string_value(json_object_get(m, "content"));
			last = c ? c : "";
			break;
		}
	}
	char *text = NULL;
	if (!content_override) {
		size_t n = strlen(last) + 32;
		if (!(text = malloc(n)))
			return die("out of memory", NULL);
		snprintf(text, n, "echo: %s\ntools: %s", last,
			 json_object_get(req, "tools") ? "yes" : "no");
	}
	json_t *reply = json_pack("{s:s, s:s}", "role", "assistant", "content",
				  content_override ? content_override : text);
	free(text);
	if (!reply)
		return die("cannot build the reply", NULL);
	int r = print_json(reply);
	json_decref(reply);
	return r;
}

static int run_entry(json_t *e, json_t *req)
{
	const char *touch = json_string_value(json_object_get(e, "touch"));
	if (touch) {
		FILE *f = fopen(touch, "a");
		if (!f || fclose(f) != 0)
			return die("cannot create", touch);
	}
	json_int_t ms = json_integer_value(json_object_get(e, "sleep_ms"));
	if (ms > 0) {
		struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
		nanosleep(&ts, NULL);
	}
	const char *err = json_string_value(json_object_get(e, "stderr"));
	if (err)
		fputs(err, stderr);
	json_t *ex = json_object_get(e, "exit");
	if (json_is_integer(ex))
		exit((int)json_integer_value(ex));
	const char *raw = json_string_value(json_object_get(e, "raw"));
	if (raw) {
		fputs(raw, stdout);
		return 0;
	}
	json_int_t big = json_integer_value(json_object_get(e, "big"));
	if (big > 0) {
		for (json_int_t i = 0; i < big; i++)
			putchar('x');
		return 0;
	}
	if (json_is_true(json_object_get(e, "dump_request"))) {
		char *dump = json_dumps(req, JSON_COMPACT | JSON_SORT_KEYS);
		if (!dump)
			return die("cannot dump the request", NULL);
		int r = default_reply(req, dump);
		free(dump);
		return r;
	}
	json_t *reply = json_object_get(e, "reply");
	if (reply)
		return print_json(reply);
	if (json_object_get(e, "role") || json_object_get(e, "content") ||
	    json_object_get(e, "tool_calls") || json_object_get(e, "choices"))
		return print_json(e);
	return default_reply(req, NULL);
}

int main(int argc, char **argv)
{
	const char *started = getenv("FAKE_MODEL_STARTED");
	if (started && *started) {
		FILE *f = fopen(started, "a");
		if (!f || fprintf(f, "%ld\n", (long)getpid()) < 0 || fclose(f) != 0)
			return die("cannot note the start", started);
	}
	json_error_t je;
	json_t *req = json_loadf(stdin, 0, &je);
	if (!json_is_object(req))
		return die("the request on stdin is not a JSON object", je.text);
	const char *path = argc > 1 ? argv[1] : getenv("FAKE_MODEL_SCRIPT");
	int r;
	if (!path || !*path) {
		r = default_reply(req, NULL);
	} else {
		json_t *script = json_load_file(path, 0, &je);
		if (!script)
			return die("cannot read the script", je.text);
		json_t *meta = json_object_get(req, "metadata");
		json_int_t turn = json_integer_value(json_object_get(meta, "turn"));
		json_t *turns = pick_turns(script, json_string_value(json_object_get(meta, "chat_id")));
		json_t *e = turn >= 1 ? json_array_get(turns, (size_t)(turn - 1)) : NULL;
		if (!e) {
			char what[64];
			snprintf(what, sizeof what, "%lld", (long long)turn);
			r = die("no reply scripted for turn", what);
		} else {
			r = run_entry(e, req);
		}
		json_decref(script);
	}
	json_decref(req);
	if (fflush(stdout) != 0)
		return die("cannot write stdout", NULL);
	return r;
}
