/* Tests for the agent loop (DESIGN.md R3, R5, R7, R10-R16, D3, sections 6
 * and 7), with an in-process scripted model, a temporary store and a
 * temporary workspace. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "buf.h"
#include "catalog.h"
#include "config.h"
#include "grants.h"
#include "model.h"
#include "resolution.h"
#include "sandbox.h"
#include "store.h"

#include <sqlite3.h>

/* This machine's sandbox, probed once: bash calls run in it. */
static struct sandbox box;

/* ---- the scripted model -------------------------------------------------- */

/* Replies are taken in order, whatever the chat. An entry is
 * {"message": {...}, "usage"?: {...}} or {"error": "text"}; "cancel": true
 * raises the test's cancel flag before replying. Every request is recorded
 * as {"chat_id", "turn", "tools": [names] | null, "messages": [...]}. */
struct script {
	json_t *replies;
	size_t next;
	json_t *requests;
	bool *cancel;
	bool *stop;
};

/* "lock": true in an entry: another connection holds the database's
 * write lock (taken before the reply, so the reply's commit waits for it)
 * until unlock_elsewhere(). */
static const char *locked_db;
static sqlite3 *locker;

static void lock_elsewhere(void)
{
	assert_non_null(locked_db);
	assert_int_equal(sqlite3_open(locked_db, &locker), SQLITE_OK);
	assert_int_equal(sqlite3_exec(locker, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
}

static void unlock_elsewhere(void)
{
	if (!locker)
		return;
	sqlite3_exec(locker, "ROLLBACK", NULL, NULL, NULL);
	sqlite3_close(locker);
	locker = NULL;
}

static int fake_complete(void *ctx, const struct model_request *req,
			 struct model_reply *out, char **err)
{
	struct script *s = ctx;
	json_t *names = json_null();
	if (req->tools) {
		names = json_array();
		size_t i;
		json_t *t;
		json_array_foreach(req->tools, i, t)
			json_array_append(names, json_object_get(json_object_get(t, "function"),
								 "name"));
	}
	json_array_append_new(s->requests,
			      json_pack("{s:s?, s:i, s:o, s:o}", "chat_id", req->chat_id,
					"turn", req->turn, "tools", names, "messages",
					json_deep_copy(req->messages)));
	if (s->next >= json_array_size(s->replies)) {
		*err = strdup("script exhausted");
		return -1;
	}
	json_t *e = json_array_get(s->replies, s->next++);
	if (json_is_true(json_object_get(e, "cancel")))
		*s->cancel = true;
	if (json_is_true(json_object_get(e, "stop")))
		*s->stop = true;
	if (json_is_true(json_object_get(e, "lock")))
		lock_elsewhere();
	const char *fail = json_string_value(json_object_get(e, "error"));
	if (fail) {
		*err = strdup(fail);
		return -1;
	}
	out->message = json_incref(json_object_get(e, "message"));
	out->usage = json_incref(json_object_get(e, "usage"));
	return 0;
}

static void fake_free(void *ctx)
{
	struct script *s = ctx;
	json_decref(s->replies);
	json_decref(s->requests);
	free(s);
}

static const struct model_ops fake_ops = { .name = "fake", .complete = fake_complete, .free = fake_free };

static json_t *say(const char *text)
{
	return json_pack("{s:{s:s, s:s}}", "message", "role", "assistant", "content", text);
}

/* One tool call; args is JSON text (passed as the string the model sent). */
static json_t *call(const char *id, const char *tool, const char *args)
{
	return json_pack("{s:{s:s, s:n, s:[{s:s, s:s, s:{s:s, s:s}}]}}", "message",
			 "role", "assistant", "content", "tool_calls", "id", id, "type",
			 "function", "function", "name", tool, "arguments", args);
}

static json_t *model_error(const char *text)
{
	return json_pack("{s:s}", "error", text);
}

/* What the text of a skill used by run_skill or /skill:run: starts with:
 * where the tools find its files. */
#define BASE_DIR(name) \
	"Base directory of this skill: /skills/" name " (read-only; its scripts/ and " \
	"references/ are there)\n\n"

/* ---- fixture ------------------------------------------------------------- */

struct fx {
	char tmp[PATH_MAX / 2];
	char skills[PATH_MAX];
	char ws[PATH_MAX];
	char db[PATH_MAX];
	struct config *cfg;
	struct catalog *cat;
	struct resolution *res;
	struct store *st;
	struct model *model;
	struct script *script;
	bool cancel;
	bool stop;
	int progress;
	struct agent_env env;
};

static bool fx_cancelled(void *arg)
{
	return *(bool *)arg;
}

static void fx_progress(void *arg, const char *run_id, bool new_files)
{
	(void)new_files;
	assert_non_null(run_id);
	(*(int *)arg)++;
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	assert_non_null(f);
	const char *t = getenv("TMPDIR");
	snprintf(f->tmp, sizeof f->tmp, "%s/skillfs-agent-XXXXXX", t && *t ? t : "/tmp");
	assert_non_null(mkdtemp(f->tmp));
	snprintf(f->skills, sizeof f->skills, "%s/skills", f->tmp);
	snprintf(f->ws, sizeof f->ws, "%s/ws", f->tmp);
	snprintf(f->db, sizeof f->db, "%s/state.db", f->tmp);
	assert_int_equal(mkdir(f->skills, 0755), 0);
	assert_int_equal(mkdir(f->ws, 0755), 0);
	char *err = NULL;
	f->st = store_open(f->db, &err);
	assert_non_null(f->st);
	f->script = calloc(1, sizeof *f->script);
	assert_non_null(f->script);
	f->script->replies = json_array();
	f->script->requests = json_array();
	f->script->cancel = &f->cancel;
	f->script->stop = &f->stop;
	f->model = model_new_custom(&fake_ops, f->script);
	assert_non_null(f->model);
	*state = f;
	return 0;
}

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(p);
}

static int teardown(void **state)
{
	struct fx *f = *state;
	model_free(f->model);
	store_close(f->st);
	resolution_free(f->res);
	catalog_free(f->cat);
	config_free(f->cfg);
	nftw(f->tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return 0;
}

static void write_file(const char *path, const char *text)
{
	FILE *fp = fopen(path, "w");
	assert_non_null(fp);
	fputs(text, fp);
	assert_int_equal(fclose(fp), 0);
}

/* skills/<dir>/SKILL.md (dir may be "a/skills/b" for a sub-skill). */
static void add_skill(struct fx *f, const char *dir, const char *text)
{
	char p[PATH_MAX * 2];
	snprintf(p, sizeof p, "%s/%s", f->skills, dir);
	char cmd[PATH_MAX * 2 + 16];
	snprintf(cmd, sizeof cmd, "mkdir -p '%s'", p);
	assert_int_equal(system(cmd), 0);
	strncat(p, "/SKILL.md", sizeof p - strlen(p) - 1);
	write_file(p, text);
}

/* Loads the catalogue of f->cfg and the resolution of configuration
 * "default" with the forced skills; fills the agent env. */
static void load_forced(struct fx *f, const char *const *forced, size_t nforced)
{
	f->cat = catalog_build(f->cfg, NULL, NULL, NULL);
	assert_non_null(f->cat);
	f->res = resolution_build(f->cfg, f->cat, config_find(f->cfg, "default"), forced,
				  nforced);
	assert_non_null(f->res);
	f->env = (struct agent_env){
		.store = f->st,
		.model = f->model,
		.config = f->cfg,
		.catalog = f->cat,
		.res = f->res,
		.allow = &f->res->grants,
		.workspace = f->ws,
		.sandbox = &box,
		.cancelled = fx_cancelled,
		.cancel_arg = &f->cancel,
		.stopping = fx_cancelled,
		.stopping_arg = &f->stop,
		.progress = fx_progress,
		.progress_arg = &f->progress,
	};
}

/* load_forced with config (the no-config default over the skills dir:
 * every skill attached) and no forced skills. */
static void load(struct fx *f)
{
	const char *dirs[] = {f->skills};
	f->cfg = config_default(dirs, 1);
	assert_non_null(f->cfg);
	load_forced(f, NULL, 0);
}

/* load_forced with a config file: the skills dir as a first_party source,
 * then yaml (configurations etc.). */
static void load_yaml(struct fx *f, const char *yaml, const char *const *forced,
		      size_t nforced)
{
	char text[4096];
	char *err = NULL;
	snprintf(text, sizeof text, "sources:\n  - path: skills\n    trust: first_party\n%s",
		 yaml);
	assert_int_equal(config_parse(text, strlen(text), "config.yaml", f->tmp, &f->cfg,
				      &err), 0);
	load_forced(f, forced, nforced);
}

static void script(struct fx *f, json_t *entry)
{
	assert_non_null(entry);
	assert_int_equal(json_array_append_new(f->script->replies, entry), 0);
}

/* Creates and enqueues run id with prompt (the run manager's part). */
static void enqueue_run(struct fx *f, const char *id, const char *prompt)
{
	char *err = NULL;
	assert_int_equal(store_run_create(f->st, id, &err), 0);
	json_t *forced = json_array(), *allowed = grants_to_json(f->env.allow);
	assert_int_equal(store_run_enqueue(f->st, id, "default", prompt, forced, allowed,
					   NULL, &err), 0);
	json_decref(forced);
	json_decref(allowed);
}

/* Creates, enqueues and starts run id with prompt. */
static void start_run(struct fx *f, const char *id, const char *prompt)
{
	char *err = NULL;
	enqueue_run(f, id, prompt);
	assert_int_equal(store_run_transition(f->st, id, RUNSTATE_QUEUED,
					      RUNSTATE_RUNNING, NULL, &err), 0);
}

static struct run_row get_row(struct fx *f, const char *id)
{
	struct run_row r;
	char *err = NULL;
	assert_int_equal(store_run_get(f->st, id, &r, &err), 0);
	return r;
}

static json_t *messages(struct fx *f, const char *id, const char *chat)
{
	json_t *m = NULL;
	char *err = NULL;
	assert_int_equal(store_messages(f->st, id, chat, &m, &err), 0);
	return m;
}

static char *events(struct fx *f, const char *id)
{
	struct buf b = {0};
	char *err = NULL;
	assert_int_equal(store_events_text(f->st, id, &b, &err), 0);
	char *s = buf_steal(&b, NULL);
	assert_non_null(s);
	return s;
}

/* The number of events of a type in the run's log. */
static size_t count_events(struct fx *f, const char *id, const char *type)
{
	char *text = events(f, id);
	size_t n = 0;
	for (char *p = text; *p;) {
		char *nl = strchr(p, '\n');
		assert_non_null(nl);
		json_t *ev = json_loadb(p, (size_t)(nl - p), 0, NULL);
		assert_non_null(ev);
		n += strcmp(json_string_value(json_object_get(ev, "type")), type) == 0;
		json_decref(ev);
		p = nl + 1;
	}
	free(text);
	return n;
}

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

static const char *msg_field(json_t *msgs, size_t i, const char *key)
{
	return json_string_value(json_object_get(json_array_get(msgs, i), key));
}

static json_t *request(struct fx *f, size_t i)
{
	json_t *r = json_array_get(f->script->requests, i);
	assert_non_null(r);
	return r;
}

static bool tools_offered(json_t *req, const char *tool)
{
	size_t i;
	json_t *t;
	json_array_foreach(json_object_get(req, "tools"), i, t)
		if (strcmp(json_string_value(t), tool) == 0)
			return true;
	return false;
}

static char *slurp(struct fx *f, const char *name)
{
	char p[PATH_MAX * 2];
	snprintf(p, sizeof p, "%s/%s", f->ws, name);
	FILE *fp = fopen(p, "r");
	if (!fp)
		return NULL;
	char *buf = calloc(1, 4096);
	assert_non_null(buf);
	size_t n = fread(buf, 1, 4095, fp);
	buf[n] = '\0';
	fclose(fp);
	return buf;
}

/* ---- tests --------------------------------------------------------------- */

static void prepopulate(struct fx *f, const char *id, const char *chat, json_t **msgs,
			size_t n);

static void test_R5_offered_tool_write_then_read(void **state)
{
	struct fx *f = *state;
	load(f);
	script(f, call("c1", "write", "{\"path\": \"a.txt\", \"content\": \"hello\"}"));
	script(f, call("c2", "read", "{\"path\": \"a.txt\"}"));
	json_t *last = say("done");
	json_object_set_new(last, "usage", json_pack("{s:i, s:i}", "prompt_tokens", 5,
						     "completion_tokens", 1));
	json_object_set_new(json_array_get(f->script->replies, 0), "usage",
			    json_pack("{s:i, s:i}", "prompt_tokens", 3, "completion_tokens", 2));
	script(f, last);
	start_run(f, "r1", "write and read a file");

	assert_int_equal(agent_run(&f->env, "r1"), AGENT_COMPLETED);
	struct run_row row = get_row(f, "r1");
	assert_int_equal(row.state, RUNSTATE_COMPLETED);
	assert_string_equal(row.result, "done");
	assert_string_equal(row.chat_id, AGENT_MAIN_CHAT);
	/* usage summed over the turns that reported it */
	assert_int_equal(json_integer_value(json_object_get(row.usage, "prompt_tokens")), 8);
	assert_int_equal(json_integer_value(json_object_get(row.usage, "completion_tokens")), 3);
	run_row_free(&row);

	char *content = slurp(f, "a.txt");
	assert_non_null(content);
	assert_string_equal(content, "hello");
	free(content);

	json_t *m = messages(f, "r1", AGENT_MAIN_CHAT);
	assert_int_equal(json_array_size(m), 7);
	assert_string_equal(msg_field(m, 0, "role"), "system");
	assert_string_equal(msg_field(m, 0, "content"), f->res->text[RES_SYSTEM_PROMPT]);
	assert_string_equal(msg_field(m, 1, "content"), "write and read a file");
	assert_string_equal(msg_field(m, 3, "role"), "tool");
	assert_string_equal(msg_field(m, 3, "tool_call_id"), "c1");
	assert_string_equal(msg_field(m, 5, "tool_call_id"), "c2");
	assert_string_equal(msg_field(m, 5, "content"), "hello");
	json_decref(m);

	/* policy all: every registered built-in offered, run_skill included (D4) */
	assert_int_equal(json_array_size(f->script->requests), 3);
	assert_true(tools_offered(request(f, 0), "write"));
	assert_true(tools_offered(request(f, 0), "run_skill"));
	assert_int_equal(json_integer_value(json_object_get(request(f, 2), "turn")), 3);

	assert_int_equal(count_events(f, "r1", "tool_call"), 2);
	assert_int_equal(count_events(f, "r1", "tool_result"), 2);
	assert_int_equal(count_events(f, "r1", "tool_denied"), 0);
	assert_true(f->progress > 0);
}

static void test_R5_tool_not_offered_is_denied_and_logged(void **state)
{
	struct fx *f = *state;
	add_skill(f, "reader", "---\nname: reader\ndescription: d\n"
			       "allowed-tools: [Read]\n---\nbody\n");
	load(f);
	script(f, call("c1", "bash", "{\"command\": \"echo x > made.txt\"}"));
	script(f, say("ok"));
	start_run(f, "r2", "try bash");

	assert_int_equal(agent_run(&f->env, "r2"), AGENT_COMPLETED);
	char *made = slurp(f, "made.txt");
	assert_null(made);
	/* offered: read only (first enforcement) */
	json_t *tools = json_object_get(request(f, 0), "tools");
	assert_int_equal(json_array_size(tools), 1);
	assert_true(tools_offered(request(f, 0), "read"));
	/* the model sees an error result (second enforcement) */
	json_t *msgs = json_object_get(request(f, 1), "messages");
	const char *res = msg_field(msgs, json_array_size(msgs) - 1, "content");
	assert_non_null(strstr(res, "error: tool 'bash' is not allowed: "
				    "it is not on this run's allow-list"));
	assert_int_equal(count_events(f, "r2", "tool_denied"), 1);
	char *ev = events(f, "r2");
	assert_non_null(strstr(ev, "\"type\":\"tool_denied\""));
	assert_non_null(strstr(ev, "\"tool\":\"bash\""));
	assert_non_null(strstr(ev, "echo x > made.txt"));
	free(ev);
	struct run_row row = get_row(f, "r2");
	assert_string_equal(row.result, "ok");
	run_row_free(&row);
}

static void test_D3_patterned_bash_grant_enforced_at_execution(void **state)
{
	struct fx *f = *state;
	add_skill(f, "echoer", "---\nname: echoer\ndescription: d\n"
			       "allowed-tools: Bash(echo:*)\n---\nb\n");
	load(f);
	script(f, call("c1", "bash", "{\"command\": \"echo hi\"}"));
	script(f, call("c2", "bash", "{\"command\": \"ls\"}"));
	script(f, call("c3", "bash", "{\"command\": \"echo hi; touch x\"}"));
	script(f, say("ok"));
	start_run(f, "r3", "echo");

	assert_int_equal(agent_run(&f->env, "r3"), AGENT_COMPLETED);
	json_t *m = messages(f, "r3", AGENT_MAIN_CHAT);
	assert_int_equal(json_array_size(m), 9);
	assert_non_null(strstr(msg_field(m, 3, "content"), "hi\n[exit 0]"));
	assert_non_null(strstr(msg_field(m, 5, "content"), "not admitted by the patterns"));
	assert_non_null(strstr(msg_field(m, 7, "content"), "not admitted by the patterns"));
	json_decref(m);
	char *x = slurp(f, "x");
	assert_null(x);
	assert_int_equal(count_events(f, "r3", "tool_denied"), 2);
}

/* WebFetch(domain:HOST): the call's url is what the grant checks (R5), and
 * an admitted call runs with the configured address rule. */
static void test_D3_webfetch_domain_grant_checks_the_url(void **state)
{
	struct fx *f = *state;
	add_skill(f, "web", "---\nname: web\ndescription: d\n"
			    "allowed-tools: WebFetch(domain:localhost)\n---\nb\n");
	load(f);
	script(f, call("c1", "webfetch", "{\"url\": \"http://localhost:1/x\"}"));
	script(f, call("c2", "webfetch", "{\"url\": \"http://127.0.0.1:1/x\"}"));
	script(f, call("c3", "webfetch", "{\"url\": \"http://localhost.evil.org/\", "
				       "\"command\": \"http://localhost/\"}"));
	script(f, call("c4", "webfetch", "{\"command\": \"http://localhost/\"}"));
	script(f, say("ok"));
	start_run(f, "r3w", "web");

	assert_int_equal(agent_run(&f->env, "r3w"), AGENT_COMPLETED);
	json_t *m = messages(f, "r3w", AGENT_MAIN_CHAT);
	assert_int_equal(json_array_size(m), 11);
	/* admitted by the grant, then refused by the address rule */
	assert_non_null(strstr(msg_field(m, 3, "content"),
			       "webfetch: refused to connect to "));
	assert_non_null(strstr(msg_field(m, 3, "content"), "(loopback address)"));
	assert_non_null(strstr(msg_field(m, 5, "content"), "not admitted by the patterns"));
	assert_non_null(strstr(msg_field(m, 7, "content"), "not admitted by the patterns"));
	assert_non_null(strstr(msg_field(m, 9, "content"), "not admitted by the patterns"));
	json_decref(m);
	assert_int_equal(count_events(f, "r3w", "tool_denied"), 3);
}

static void test_R3_empty_allow_list_is_one_plain_completion(void **state)
{
	struct fx *f = *state;
	add_skill(f, "quiet", "---\nname: quiet\ndescription: d\nallowed-tools: []\n---\nb\n");
	load(f);
	assert_int_equal(f->env.allow->n, 0);
	script(f, say("plain answer"));
	start_run(f, "r4", "hi");

	assert_int_equal(agent_run(&f->env, "r4"), AGENT_COMPLETED);
	assert_int_equal(json_array_size(f->script->requests), 1);
	assert_true(json_is_null(json_object_get(request(f, 0), "tools")));
	struct run_row row = get_row(f, "r4");
	assert_string_equal(row.result, "plain answer");
	run_row_free(&row);
}

/* A queued run handed to the agent starts in one commit: queued ->
 * running with its mode, model, chat id, system and user message; its
 * final answer is committed with its completion. */
static void test_queued_run_starts_in_one_commit(void **state)
{
	struct fx *f = *state;
	load(f);
	f->env.start_mode = "inline";
	f->env.start_model = "fake";
	script(f, say("done"));
	enqueue_run(f, "q1", "hello");

	assert_int_equal(agent_run(&f->env, "q1"), AGENT_COMPLETED);
	/* commits: the start; the answer with the completion */
	assert_int_equal(f->progress, 2);
	json_t *m = messages(f, "q1", AGENT_MAIN_CHAT);
	assert_int_equal(json_array_size(m), 3);
	assert_string_equal(msg_field(m, 0, "role"), "system");
	assert_string_equal(msg_field(m, 1, "role"), "user");
	assert_string_equal(msg_field(m, 1, "content"), "hello");
	assert_string_equal(msg_field(m, 2, "role"), "assistant");
	json_decref(m);
	struct run_row row = get_row(f, "q1");
	assert_int_equal(row.state, RUNSTATE_COMPLETED);
	assert_string_equal(row.mode, "inline");
	assert_string_equal(row.model, "fake");
	assert_string_equal(row.chat_id, AGENT_MAIN_CHAT);
	char *ev = events(f, "q1");
	assert_non_null(strstr(ev, "\"from\":\"queued\",\"to\":\"running\""));
	free(ev);
	run_row_free(&row);
}

/* A queued run that cannot start still ends failed, never stays queued. */
static void test_queued_run_that_cannot_start_fails(void **state)
{
	struct fx *f = *state;
	load(f);
	f->env.workspace = NULL;
	enqueue_run(f, "q2", "hello");
	assert_int_equal(agent_run(&f->env, "q2"), AGENT_FAILED);
	struct run_row row = get_row(f, "q2");
	assert_int_equal(row.state, RUNSTATE_FAILED);
	assert_non_null(strstr(row.error, "incomplete"));
	run_row_free(&row);
}

static void test_sec6_turn_limit_fails_the_run(void **state)
{
	struct fx *f = *state;
	load(f);
	f->cfg->max_turns = 2;
	for (int i = 0; i < 4; i++)
		script(f, call(i % 2 ? "b" : "a", "read", "{\"path\": \"nothing\"}"));
	start_run(f, "r5", "loop");

	assert_int_equal(agent_run(&f->env, "r5"), AGENT_FAILED);
	assert_int_equal(json_array_size(f->script->requests), 2);
	struct run_row row = get_row(f, "r5");
	assert_int_equal(row.state, RUNSTATE_FAILED);
	assert_string_equal(row.error, "turn limit (2) reached");
	run_row_free(&row);
}

static void test_sec7_model_error_fails_with_its_message(void **state)
{
	struct fx *f = *state;
	load(f);
	script(f, model_error("openai: HTTP 500: upstream exploded"));
	start_run(f, "r6", "hi");

	assert_int_equal(agent_run(&f->env, "r6"), AGENT_FAILED);
	struct run_row row = get_row(f, "r6");
	assert_int_equal(row.state, RUNSTATE_FAILED);
	assert_string_equal(row.error, "openai: HTTP 500: upstream exploded");
	assert_null(row.result);
	run_row_free(&row);
}

static void test_sec7_bad_json_arguments_give_error_result(void **state)
{
	struct fx *f = *state;
	load(f);
	script(f, call("c1", "write", "{\"path\": "));
	script(f, say("ok"));
	start_run(f, "r7", "hi");
	assert_int_equal(agent_run(&f->env, "r7"), AGENT_COMPLETED);
	json_t *m = messages(f, "r7", AGENT_MAIN_CHAT);
	assert_non_null(strstr(msg_field(m, 3, "content"),
			       "the arguments of write are not a JSON object"));
	json_decref(m);
}

static void test_R11_run_skill_inline_substitutes_arguments(void **state)
{
	struct fx *f = *state;
	add_skill(f, "greet", "---\nname: greet\ndescription: d\ninline: true\n---\n"
			      "Say hello to $ARGUMENTS, then bye to $ARGUMENTS.\n");
	add_skill(f, "plain", "---\nname: plain\ndescription: d\ninline: true\n---\nDo it.\n");
	add_skill(f, "hidden", "---\nname: hidden\ndescription: d\n"
			       "disable-model-invocation: true\n---\nSecret.\n");
	load(f);
	script(f, call("c1", "run_skill", "{\"name\": \"greet\", \"arguments\": \"Ann\"}"));
	script(f, call("c2", "run_skill", "{\"name\": \"plain\", \"arguments\": \"x y\"}"));
	script(f, call("c3", "run_skill", "{\"name\": \"hidden\"}"));
	script(f, call("c4", "run_skill", "{\"name\": \"nope\"}"));
	script(f, say("ok"));
	start_run(f, "r8", "greet Ann");

	assert_int_equal(agent_run(&f->env, "r8"), AGENT_COMPLETED);
	json_t *m = messages(f, "r8", AGENT_MAIN_CHAT);
	assert_string_equal(msg_field(m, 3, "content"),
			    BASE_DIR("greet") "Say hello to Ann, then bye to Ann.\n");
	assert_string_equal(msg_field(m, 5, "content"),
			    BASE_DIR("plain") "Do it.\n\nARGUMENTS: x y");
	assert_non_null(strstr(msg_field(m, 7, "content"), "disable-model-invocation"));
	assert_null(strstr(msg_field(m, 7, "content"), "Secret"));
	assert_non_null(strstr(msg_field(m, 9, "content"), "no skill named 'nope'"));
	json_decref(m);
	struct buf b = {0};
	assert_int_equal(agent_transcript(f->st, "r8", NULL, &b), 0);
	assert_null(strstr(b.data, "in sub-agent"));
	buf_free(&b);
}

/* A skill with a directory sub-skill always runs as a sub-agent (R10). */
static void add_digest(struct fx *f)
{
	add_skill(f, "digest", "---\nname: digest\ndescription: d\ntools: [read, run_skill, bash]\n"
			       "---\nDigest the task: $ARGUMENTS\n");
	add_skill(f, "digest/skills/helper", "---\nname: helper\ndescription: h\n---\n"
					     "Helper knowledge.\n");
}

static void test_R12_R13_run_skill_subagent(void **state)
{
	struct fx *f = *state;
	add_digest(f);
	load(f);
	script(f, call("m1", "run_skill", "{\"name\": \"digest\", \"arguments\": \"sum a.txt\"}"));
	script(f, call("s1", "run_skill", "{\"name\": \"digest\"}")); /* sub-agent: refused */
	script(f, call("s2", "write", "{\"path\": \"w\", \"content\": \"x\"}")); /* not its tool */
	script(f, say("the digest"));
	script(f, say("main done"));
	start_run(f, "r9", "digest it");

	assert_int_equal(agent_run(&f->env, "r9"), AGENT_COMPLETED);
	assert_int_equal(json_array_size(f->script->requests), 5);

	/* the sub-agent's chat */
	struct chat_row *rows;
	size_t n;
	char *err = NULL;
	assert_int_equal(store_chats(f->st, "r9", &rows, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_int_equal(strncmp(rows[0].chat_id, "skill-digest-", 13), 0);
	assert_true(strlen(rows[0].chat_id) > 13);
	assert_string_equal(rows[0].parent_chat, AGENT_MAIN_CHAT);
	assert_string_equal(rows[0].skill, "digest");
	assert_int_equal(rows[0].state, RUNSTATE_COMPLETED);
	assert_string_equal(rows[0].result, "the digest");
	/* the tools it was offered are recorded with its chat */
	assert_int_equal(json_array_size(rows[0].tools), 2);
	bool has_read = false, has_bash = false;
	size_t ti;
	json_t *tv;
	json_array_foreach(rows[0].tools, ti, tv) {
		has_read |= strcmp(json_string_value(tv), "read") == 0;
		has_bash |= strcmp(json_string_value(tv), "bash") == 0;
	}
	assert_true(has_read && has_bash);

	json_t *sreq = request(f, 1);
	assert_string_equal(json_string_value(json_object_get(sreq, "chat_id")), rows[0].chat_id);
	/* R13: its tools list, never run_skill */
	json_t *tools = json_object_get(sreq, "tools");
	assert_int_equal(json_array_size(tools), 2);
	assert_true(tools_offered(sreq, "read"));
	assert_true(tools_offered(sreq, "bash"));
	json_t *sm = json_object_get(sreq, "messages");
	const char *sys = msg_field(sm, 0, "content");
	assert_non_null(strstr(sys, BASE_DIR("digest") "Digest the task: sum a.txt"));
	assert_non_null(strstr(sys, "Helper knowledge."));
	assert_non_null(strstr(sys, "## Sub-skill: helper\n\nBase directory of this sub-skill: "
				    "/skills/digest/skills/helper (read-only;"));
	assert_string_equal(msg_field(sm, 1, "content"), "sum a.txt");

	json_t *subm = messages(f, "r9", rows[0].chat_id);
	assert_int_equal(json_array_size(subm), 7);
	assert_non_null(strstr(msg_field(subm, 3, "content"), "not one of this sub-agent's tools"));
	assert_non_null(strstr(msg_field(subm, 5, "content"), "not one of this sub-agent's tools"));
	json_decref(subm);
	char *w = slurp(f, "w");
	assert_null(w);

	/* the main agent got the answer as the tool result */
	json_t *m = messages(f, "r9", AGENT_MAIN_CHAT);
	assert_int_equal(json_array_size(m), 5);
	assert_string_equal(msg_field(m, 3, "content"), "the digest");
	json_decref(m);

	assert_int_equal(count_events(f, "r9", "subagent_started"), 1);
	assert_int_equal(count_events(f, "r9", "note"), 1);
	char *ev = events(f, "r9");
	assert_non_null(strstr(ev, "Running skill 'digest' in sub-agent..."));
	free(ev);
	assert_int_equal(count_events(f, "r9", "tool_denied"), 2);

	/* R16: the transcript shows the sub-agent where it started */
	struct buf b = {0};
	assert_int_equal(agent_transcript(f->st, "r9", NULL, &b), 0);
	const char *start = strstr(b.data, "\u2192 run_skill");
	const char *note = strstr(b.data, "Running skill 'digest' in sub-agent...");
	const char *answer = strstr(b.data, "\u2190 run_skill: the digest");
	assert_non_null(start);
	assert_non_null(note);
	assert_non_null(answer);
	assert_true(start < note && note < answer);
	assert_non_null(strstr(b.data, "assistant: main done"));
	buf_free(&b);

	b = (struct buf){0};
	assert_int_equal(agent_chat_transcript(f->st, "r9", rows[0].chat_id, NULL, &b), 0);
	assert_int_equal(strncmp(b.data, "system: You are a sub-agent", 27), 0);
	assert_non_null(strstr(b.data, "user: sum a.txt\n"));
	assert_non_null(strstr(b.data, "assistant: the digest\n"));
	assert_null(strstr(b.data, "main done"));
	buf_free(&b);
	b = (struct buf){0};
	assert_int_equal(agent_messages_json(f->st, "r9", "no-such-chat", &b), 0);
	assert_string_equal(b.data, "[]\n");
	buf_free(&b);
	b = (struct buf){0};
	assert_int_equal(agent_messages_json(f->st, "r9", rows[0].chat_id, &b), 0);
	json_t *parsed = json_loads(b.data, 0, NULL);
	assert_int_equal(json_array_size(parsed), 7);
	assert_int_equal(b.data[b.len - 1], '\n');
	json_decref(parsed);
	buf_free(&b);
	chat_rows_free(rows, n);
}

/* A run whose model asks for bash (an approval tool, writing ok.txt) and
 * then says final; returns once the run waits for the approval. */
static void run_to_approval(struct fx *f, const char *id, const char *final)
{
	load(f);
	assert_int_equal(strlist_add(&f->cfg->approval_tools, "bash"), 0);
	script(f, call("c1", "bash", "{\"command\": \"echo yes > ok.txt\"}"));
	script(f, say(final));
	start_run(f, id, "need approval");
	assert_int_equal(agent_run(&f->env, id), AGENT_WAITING_APPROVAL);
}

/* What the run manager does on `echo <decision> > ctl`. */
static void answer_approval(struct fx *f, const char *id, const char *decision)
{
	char *err = NULL;
	assert_int_equal(store_run_transition(f->st, id, RUNSTATE_WAITING_FOR_APPROVAL,
					      RUNSTATE_RUNNING,
					      &(struct run_change){.input = decision}, &err), 0);
}

static void test_sec6_approval_waits_then_approve_executes(void **state)
{
	struct fx *f = *state;
	run_to_approval(f, "ra", "done");
	struct run_row row = get_row(f, "ra");
	assert_int_equal(row.state, RUNSTATE_WAITING_FOR_APPROVAL);
	assert_string_equal(json_string_value(json_object_get(row.pending, "kind")), "approval");
	assert_string_equal(json_string_value(json_object_get(row.pending, "tool")), "bash");
	assert_string_equal(json_string_value(json_object_get(row.pending, "call_id")), "c1");
	assert_string_equal(json_string_value(json_object_get(
		json_object_get(row.pending, "arguments"), "command")), "echo yes > ok.txt");
	run_row_free(&row);
	char *ok = slurp(f, "ok.txt");
	assert_null(ok);

	answer_approval(f, "ra", "approve\n");
	assert_int_equal(agent_run(&f->env, "ra"), AGENT_COMPLETED);
	ok = slurp(f, "ok.txt");
	assert_non_null(ok);
	assert_string_equal(ok, "yes\n");
	free(ok);
	row = get_row(f, "ra");
	assert_int_equal(row.state, RUNSTATE_COMPLETED);
	assert_null(row.pending);
	assert_string_equal(row.input, "");
	run_row_free(&row);
	json_t *m = messages(f, "ra", AGENT_MAIN_CHAT);
	assert_int_equal(json_array_size(m), 5);
	json_decref(m);
	assert_int_equal(json_array_size(f->script->requests), 2);
	assert_int_equal(count_events(f, "ra", "approval_granted"), 1);
}

static void test_sec6_approval_deny_refuses(void **state)
{
	struct fx *f = *state;
	run_to_approval(f, "rd", "fine");
	answer_approval(f, "rd", "deny");
	assert_int_equal(agent_run(&f->env, "rd"), AGENT_COMPLETED);
	char *ok = slurp(f, "ok.txt");
	assert_null(ok);
	json_t *m = messages(f, "rd", AGENT_MAIN_CHAT);
	assert_non_null(strstr(msg_field(m, 3, "content"), "denied by the user"));
	json_decref(m);
	assert_int_equal(count_events(f, "rd", "approval_denied"), 1);
	struct run_row row = get_row(f, "rd");
	assert_null(row.pending);
	run_row_free(&row);
}

/* R7: a tool taken away while the run waited is refused, approval or not. */
static void test_R7_tool_removed_while_waiting_is_refused(void **state)
{
	struct fx *f = *state;
	run_to_approval(f, "r7w", "fine");
	answer_approval(f, "r7w", "approve");
	/* stored ∩ now, where now no longer grants bash */
	struct grants narrowed = {0};
	assert_int_equal(grants_copy(&f->res->grants, &narrowed), 0);
	size_t w = 0;
	for (size_t i = 0; i < narrowed.n; i++) {
		if (strcmp(narrowed.tools[i].name, "bash") == 0) {
			free(narrowed.tools[i].name);
			strlist_free(&narrowed.tools[i].patterns);
			free(narrowed.tools[i].by);
			continue;
		}
		narrowed.tools[w++] = narrowed.tools[i];
	}
	narrowed.n = w;
	narrowed.policy = GRANTS_LIST;
	f->env.allow = &narrowed;
	assert_int_equal(agent_run(&f->env, "r7w"), AGENT_COMPLETED);
	char *ok = slurp(f, "ok.txt");
	assert_null(ok);
	json_t *m = messages(f, "r7w", AGENT_MAIN_CHAT);
	assert_non_null(strstr(msg_field(m, 3, "content"), "not allowed"));
	json_decref(m);
	struct run_row row = get_row(f, "r7w");
	assert_null(row.pending); /* the question is over too */
	run_row_free(&row);
	grants_free(&narrowed);
}

static void test_sec6_ask_user_waits_for_input(void **state)
{
	struct fx *f = *state;
	load(f);
	script(f, call("q1", "ask_user", "{\"question\": \"Which colour?\"}"));
	script(f, say("blue it is"));
	start_run(f, "rq", "pick");
	assert_int_equal(agent_run(&f->env, "rq"), AGENT_WAITING_INPUT);
	struct run_row row = get_row(f, "rq");
	assert_int_equal(row.state, RUNSTATE_WAITING_FOR_INPUT);
	assert_string_equal(json_string_value(json_object_get(row.pending, "kind")), "question");
	assert_string_equal(json_string_value(json_object_get(row.pending, "question")),
			    "Which colour?");
	run_row_free(&row);

	/* resumed without an answer (e.g. a stray wake-up): waits again */
	char *err = NULL;
	assert_int_equal(store_run_transition(f->st, "rq", RUNSTATE_WAITING_FOR_INPUT,
					      RUNSTATE_RUNNING, NULL, &err), 0);
	assert_int_equal(agent_run(&f->env, "rq"), AGENT_WAITING_INPUT);

	assert_int_equal(store_run_transition(f->st, "rq", RUNSTATE_WAITING_FOR_INPUT,
					      RUNSTATE_RUNNING,
					      &(struct run_change){.input = "blue\n"}, &err), 0);
	assert_int_equal(agent_run(&f->env, "rq"), AGENT_COMPLETED);
	json_t *m = messages(f, "rq", AGENT_MAIN_CHAT);
	assert_int_equal(json_array_size(m), 5);
	assert_string_equal(msg_field(m, 3, "content"), "blue");
	json_decref(m);
	assert_int_equal(json_array_size(f->script->requests), 2);
	row = get_row(f, "rq");
	assert_string_equal(row.result, "blue it is");
	assert_null(row.pending);
	run_row_free(&row);
}

/* Section 6: a run resumes from its last committed message; a call that
 * has its result is not executed again and nothing is duplicated. */
static void test_sec6_resume_after_crash_no_duplicates(void **state)
{
	struct fx *f = *state;
	load(f);
	start_run(f, "rc", "two commands");
	char *err = NULL;
	json_t *pre[] = {
		json_pack("{s:s, s:s}", "role", "system", "content", "sys"),
		json_pack("{s:s, s:s}", "role", "user", "content", "two commands"),
		json_pack("{s:s, s:n, s:[{s:s, s:s, s:{s:s, s:s}}, {s:s, s:s, s:{s:s, s:s}}]}",
			  "role", "assistant", "content", "tool_calls",
			  "id", "a", "type", "function", "function", "name", "bash",
			  "arguments", "{\"command\": \"echo one >> log.txt\"}",
			  "id", "b", "type", "function", "function", "name", "bash",
			  "arguments", "{\"command\": \"echo two >> log.txt\"}"),
		json_pack("{s:s, s:s, s:s, s:s}", "role", "tool", "tool_call_id", "a",
			  "name", "bash", "content", "[exit 0]"),
	};
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(store_message_append(f->st, "rc", AGENT_MAIN_CHAT, pre[i],
						      NULL, &err), 0);
		json_decref(pre[i]);
	}
	script(f, say("finished"));
	assert_int_equal(agent_run(&f->env, "rc"), AGENT_COMPLETED);
	char *log = slurp(f, "log.txt");
	assert_non_null(log);
	assert_string_equal(log, "two\n");
	free(log);
	json_t *m = messages(f, "rc", AGENT_MAIN_CHAT);
	assert_int_equal(json_array_size(m), 6);
	assert_string_equal(msg_field(m, 4, "tool_call_id"), "b");
	assert_int_equal(count(json_string_value(json_object_get(json_array_get(m, 0), "content")),
			       "sys"), 1);
	json_decref(m);
	assert_int_equal(json_array_size(json_object_get(request(f, 0), "messages")), 5);
}

/* R7, at most once: a bash call whose start was committed but whose result
 * never was (the daemon died while it ran) is not run again: the model
 * gets a result saying it was interrupted and may have partly run, the
 * log and the transcript say so, and the run goes on (the next call,
 * never started, runs). */
static void test_R7_interrupted_side_effect_call_is_not_run_again(void **state)
{
	struct fx *f = *state;
	load(f);
	start_run(f, "ri", "two commands");
	json_t *pre[] = {
		json_pack("{s:s, s:s}", "role", "system", "content", "sys"),
		json_pack("{s:s, s:s}", "role", "user", "content", "two commands"),
		json_pack("{s:s, s:n, s:[{s:s, s:s, s:{s:s, s:s}}, {s:s, s:s, s:{s:s, s:s}}]}",
			  "role", "assistant", "content", "tool_calls",
			  "id", "a", "type", "function", "function", "name", "bash",
			  "arguments", "{\"command\": \"echo one >> log.txt\"}",
			  "id", "b", "type", "function", "function", "name", "bash",
			  "arguments", "{\"command\": \"echo two >> log.txt\"}"),
	};
	prepopulate(f, "ri", AGENT_MAIN_CHAT, pre, 3);
	char *err = NULL;
	assert_int_equal(store_step_start(f->st, "ri", AGENT_MAIN_CHAT, 3, 0, "bash", &err), 0);
	script(f, say("finished"));
	assert_int_equal(agent_run(&f->env, "ri"), AGENT_COMPLETED);
	char *log = slurp(f, "log.txt");
	assert_non_null(log);
	assert_string_equal(log, "two\n"); /* a is not run again, b runs */
	free(log);
	json_t *m = messages(f, "ri", AGENT_MAIN_CHAT);
	assert_int_equal(json_array_size(m), 6);
	assert_string_equal(msg_field(m, 3, "tool_call_id"), "a");
	const char *res = msg_field(m, 3, "content");
	assert_non_null(strstr(res, "interrupted"));
	assert_non_null(strstr(res, "may have partly run"));
	assert_string_equal(msg_field(m, 4, "tool_call_id"), "b");
	assert_null(strstr(msg_field(m, 4, "content"), "interrupted"));
	json_decref(m);
	assert_int_equal(count_events(f, "ri", "tool_interrupted"), 1);
	/* what the model saw */
	json_t *seen = json_object_get(request(f, 0), "messages");
	assert_non_null(strstr(msg_field(seen, 3, "content"), "may have partly run"));
	struct buf b = {0};
	assert_int_equal(agent_transcript(f->st, "ri", NULL, &b), 0);
	assert_non_null(strstr(b.data, "bash: error: this bash call was interrupted"));
	buf_free(&b);
	/* b's start was recorded before it ran */
	bool started = false;
	assert_int_equal(store_step_started(f->st, "ri", AGENT_MAIN_CHAT, 3, 1, &started, &err),
			 0);
	assert_true(started);
}

/* Read-only calls have no start record: one interrupted is run again. A
 * model call interrupted is asked again, and the log and the transcript
 * say so; a run that was never interrupted says nothing of the kind. */
static void test_R7_read_only_calls_and_model_calls_are_repeated(void **state)
{
	struct fx *f = *state;
	load(f);
	script(f, call("c1", "read", "{\"path\": \"notes.txt\"}"));
	script(f, say("done"));
	char p[PATH_MAX * 2];
	snprintf(p, sizeof p, "%s/notes.txt", f->ws);
	write_file(p, "hello\n");
	start_run(f, "rr", "go");
	assert_int_equal(agent_run(&f->env, "rr"), AGENT_COMPLETED);
	bool started = true;
	char *err = NULL;
	assert_int_equal(store_step_started(f->st, "rr", AGENT_MAIN_CHAT, 3, 0, &started, &err),
			 0);
	assert_false(started); /* read: no record */
	assert_int_equal(count_events(f, "rr", "model_call_repeated"), 0);
	struct buf b = {0};
	assert_int_equal(agent_transcript(f->st, "rr", NULL, &b), 0);
	assert_null(strstr(b.data, "asked again"));
	buf_free(&b);

	/* A run that died during its first model call. */
	start_run(f, "rm", "again");
	json_t *pre[] = {
		json_pack("{s:s, s:s}", "role", "system", "content", "sys"),
		json_pack("{s:s, s:s}", "role", "user", "content", "again"),
	};
	prepopulate(f, "rm", AGENT_MAIN_CHAT, pre, 2);
	assert_int_equal(store_step_start(f->st, "rm", AGENT_MAIN_CHAT, 2, STORE_STEP_MODEL,
					  "model", &err), 0);
	script(f, say("answered"));
	assert_int_equal(agent_run(&f->env, "rm"), AGENT_COMPLETED);
	assert_int_equal(count_events(f, "rm", "model_call_repeated"), 1);
	char *ev = events(f, "rm");
	assert_non_null(strstr(ev, "\"after_messages\":2"));
	free(ev);
	assert_int_equal(agent_transcript(f->st, "rm", NULL, &b), 0);
	const char *note = strstr(b.data, "[model call interrupted (skillfs stopped or crashed): "
				  "asked again]");
	assert_non_null(note);
	assert_non_null(strstr(note, "assistant: answered")); /* before the answer */
	buf_free(&b);
}

static void test_sec6_resume_with_final_answer_committed(void **state)
{
	struct fx *f = *state;
	load(f);
	start_run(f, "rf", "q");
	char *err = NULL;
	json_t *pre[] = {
		json_pack("{s:s, s:s}", "role", "system", "content", "sys"),
		json_pack("{s:s, s:s}", "role", "user", "content", "q"),
		json_pack("{s:s, s:s}", "role", "assistant", "content", "the answer"),
	};
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(store_message_append(f->st, "rf", AGENT_MAIN_CHAT, pre[i],
						      NULL, &err), 0);
		json_decref(pre[i]);
	}
	assert_int_equal(agent_run(&f->env, "rf"), AGENT_COMPLETED);
	assert_int_equal(json_array_size(f->script->requests), 0);
	struct run_row row = get_row(f, "rf");
	assert_string_equal(row.result, "the answer");
	run_row_free(&row);
	json_t *m = messages(f, "rf", AGENT_MAIN_CHAT);
	assert_int_equal(json_array_size(m), 3);
	json_decref(m);
}

/* Appends messages (stolen) to a chat of a run. */
static void prepopulate(struct fx *f, const char *id, const char *chat, json_t **msgs,
			size_t n)
{
	char *err = NULL;
	for (size_t i = 0; i < n; i++) {
		assert_non_null(msgs[i]);
		assert_int_equal(store_message_append(f->st, id, chat, msgs[i], NULL, &err), 0);
		json_decref(msgs[i]);
	}
}

/* A reply streaming in shows at the end of the transcript, labelled
 * "streaming: ", only while its chat has the messages it follows; what it
 * shows at every moment is the beginning of what the committed reply shows
 * (bar the label), so `tail -f` of the transcript reads on into it
 * (section 6: the transcript as the run goes). */
static void test_transcript_shows_a_streaming_reply_as_the_start_of_the_committed_one(void **state)
{
	struct fx *f = *state;
	load(f);
	start_run(f, "rp", "stream it");
	json_t *pre[] = { json_pack("{s:s, s:s}", "role", "user", "content", "stream it") };
	prepopulate(f, "rp", AGENT_MAIN_CHAT, pre, 1);
	const char *full = "First line, \xc3\xa9t\xc3\xa9.\n\n  Third line\n  end.  ";
	struct buf before = {0};
	assert_int_equal(agent_transcript(f->st, "rp", NULL, &before), 0);
	char *texts[40];
	size_t n = 0;
	for (size_t k = 0; k <= strlen(full); k++) {
		struct agent_partial p = { AGENT_MAIN_CHAT, 1, full, k };
		struct buf b = {0};
		assert_int_equal(agent_transcript(f->st, "rp", &p, &b), 0);
		/* The committed part stays as it was, the reply after it. */
		assert_int_equal(strncmp(b.data, before.data, before.len), 0);
		if (b.len > before.len)
			assert_int_equal(strncmp(b.data + before.len, "streaming: ", 11), 0);
		if (n < 40)
			texts[n++] = buf_steal(&b, NULL);
		buf_free(&b);
		/* Another chat's stream, or one after other messages: not here. */
		struct agent_partial other = { "skill-x-1", 1, full, k };
		struct agent_partial later = { AGENT_MAIN_CHAT, 2, full, k };
		struct buf o = {0}, l = {0};
		assert_int_equal(agent_transcript(f->st, "rp", &other, &o), 0);
		assert_int_equal(agent_transcript(f->st, "rp", &later, &l), 0);
		assert_string_equal(o.data, before.data);
		assert_string_equal(l.data, before.data);
		buf_free(&o);
		buf_free(&l);
	}
	json_t *reply[] = { json_pack("{s:s, s:s}", "role", "assistant", "content", full) };
	prepopulate(f, "rp", AGENT_MAIN_CHAT, reply, 1);
	struct agent_partial stale = { AGENT_MAIN_CHAT, 1, full, strlen(full) };
	struct buf done = {0}, hidden = {0};
	assert_int_equal(agent_transcript(f->st, "rp", NULL, &done), 0);
	assert_int_equal(agent_transcript(f->st, "rp", &stale, &hidden), 0);
	assert_string_equal(hidden.data, done.data); /* committed: no longer shown */
	assert_non_null(strstr(done.data, "assistant: First line"));
	for (size_t i = 0; i < n; i++) {
		char *t = texts[i];
		char *label = strstr(t + before.len, "streaming: ");
		if (label)
			memcpy(label, "assistant: ", 11);
		assert_true(strlen(t) <= done.len);
		assert_int_equal(strncmp(t, done.data, strlen(t)), 0);
		free(t);
	}
	buf_free(&before);
	buf_free(&done);
	buf_free(&hidden);
}

/* A main chat that crashed while its sub-agent was running: the sub-agent
 * continues from its own committed messages, in the same chat. */
static void test_R12_crashed_subagent_resumes_in_its_chat(void **state)
{
	struct fx *f = *state;
	add_digest(f);
	load(f);
	start_run(f, "rs1", "digest it");
	char *err = NULL;
	json_t *main_msgs[] = {
		json_pack("{s:s, s:s}", "role", "system", "content", "sys"),
		json_pack("{s:s, s:s}", "role", "user", "content", "digest it"),
		json_pack("{s:s, s:n, s:[{s:s, s:s, s:{s:s, s:s}}]}", "role", "assistant",
			  "content", "tool_calls", "id", "m1", "type", "function",
			  "function", "name", "run_skill", "arguments",
			  "{\"name\": \"digest\", \"arguments\": \"go\"}"),
	};
	prepopulate(f, "rs1", AGENT_MAIN_CHAT, main_msgs, 3);
	json_t *ev = json_pack("{s:s, s:s, s:s, s:i, s:s}", "chat_id", "skill-digest-1",
			       "skill", "digest", "parent_chat", AGENT_MAIN_CHAT,
			       "parent_seq", 3, "call_id", "m1");
	assert_int_equal(store_event_append(f->st, "rs1", "subagent_started", ev, NULL, &err), 0);
	json_decref(ev);
	assert_int_equal(store_chat_create(f->st, "rs1", "skill-digest-1", AGENT_MAIN_CHAT,
					   "digest", NULL, &err), 0);
	json_t *sub_msgs[] = {
		json_pack("{s:s, s:s}", "role", "system", "content", "digest sys"),
		json_pack("{s:s, s:s}", "role", "user", "content", "go"),
		json_pack("{s:s, s:n, s:[{s:s, s:s, s:{s:s, s:s}}]}", "role", "assistant",
			  "content", "tool_calls", "id", "s1", "type", "function",
			  "function", "name", "bash", "arguments",
			  "{\"command\": \"echo sub >> log.txt\"}"),
	};
	prepopulate(f, "rs1", "skill-digest-1", sub_msgs, 3);
	script(f, say("sub done"));
	script(f, say("main done"));

	assert_int_equal(agent_run(&f->env, "rs1"), AGENT_COMPLETED);
	struct chat_row *rows;
	size_t n;
	assert_int_equal(store_chats(f->st, "rs1", &rows, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_string_equal(rows[0].chat_id, "skill-digest-1");
	assert_int_equal(rows[0].state, RUNSTATE_COMPLETED);
	chat_rows_free(rows, n);
	assert_string_equal(json_string_value(json_object_get(request(f, 0), "chat_id")),
			    "skill-digest-1");
	json_t *sm = messages(f, "rs1", "skill-digest-1");
	assert_int_equal(json_array_size(sm), 5);
	json_decref(sm);
	json_t *mm = messages(f, "rs1", AGENT_MAIN_CHAT);
	assert_int_equal(json_array_size(mm), 5);
	assert_string_equal(msg_field(mm, 3, "content"), "sub done");
	json_decref(mm);
	char *log = slurp(f, "log.txt");
	assert_non_null(log);
	assert_string_equal(log, "sub\n");
	free(log);
	assert_int_equal(count_events(f, "rs1", "subagent_started"), 1);
}

/* A sub-agent that finished before the crash is not run again: its kept
 * result is the tool result. */
static void test_R12_finished_subagent_result_reused_after_crash(void **state)
{
	struct fx *f = *state;
	add_digest(f);
	load(f);
	start_run(f, "rs2", "digest it");
	char *err = NULL;
	json_t *main_msgs[] = {
		json_pack("{s:s, s:s}", "role", "system", "content", "sys"),
		json_pack("{s:s, s:s}", "role", "user", "content", "digest it"),
		json_pack("{s:s, s:n, s:[{s:s, s:s, s:{s:s, s:s}}]}", "role", "assistant",
			  "content", "tool_calls", "id", "m1", "type", "function",
			  "function", "name", "run_skill", "arguments", "{\"name\": \"digest\"}"),
	};
	prepopulate(f, "rs2", AGENT_MAIN_CHAT, main_msgs, 3);
	json_t *ev = json_pack("{s:s, s:s, s:s, s:i, s:s}", "chat_id", "skill-digest-2",
			       "skill", "digest", "parent_chat", AGENT_MAIN_CHAT,
			       "parent_seq", 3, "call_id", "m1");
	assert_int_equal(store_event_append(f->st, "rs2", "subagent_started", ev, NULL, &err), 0);
	json_decref(ev);
	assert_int_equal(store_chat_create(f->st, "rs2", "skill-digest-2", AGENT_MAIN_CHAT,
					   "digest", NULL, &err), 0);
	assert_int_equal(store_chat_transition(f->st, "rs2", "skill-digest-2",
					       RUNSTATE_COMPLETED, "kept result", &err), 0);
	script(f, say("main done"));
	assert_int_equal(agent_run(&f->env, "rs2"), AGENT_COMPLETED);
	assert_int_equal(json_array_size(f->script->requests), 1);
	json_t *mm = messages(f, "rs2", AGENT_MAIN_CHAT);
	assert_string_equal(msg_field(mm, 3, "content"), "kept result");
	json_decref(mm);
}

/* The one sub-agent chat of run id (its id copied into out). */
static void sub_chat(struct fx *f, const char *id, char *out, size_t n, enum runstate *state)
{
	struct chat_row *rows;
	size_t nrows;
	char *err = NULL;
	assert_int_equal(store_chats(f->st, id, &rows, &nrows, &err), 0);
	assert_int_equal(nrows, 1);
	snprintf(out, n, "%s", rows[0].chat_id);
	if (state)
		*state = rows[0].state;
	chat_rows_free(rows, nrows);
}

/* What the run manager does on `echo ANSWER > input`. */
static void answer_input(struct fx *f, const char *id, const char *answer)
{
	char *err = NULL;
	assert_int_equal(store_run_transition(f->st, id, RUNSTATE_WAITING_FOR_INPUT,
					      RUNSTATE_RUNNING,
					      &(struct run_change){.input = answer}, &err), 0);
}

/* A sub-agent skill "asker" with bash and ask_user, bash needing approval. */
static void load_asker(struct fx *f)
{
	add_skill(f, "asker", "---\nname: asker\ndescription: d\ntools: [bash, ask_user]\n"
			      "inline: false\n---\nAsk.\n");
	load(f);
	f->cfg->execution_mode = EXEC_SUBAGENT;
	assert_int_equal(strlist_add(&f->cfg->approval_tools, "bash"), 0);
}

/* Section 6 inside a sub-agent: an approval-listed call pauses the run with
 * pending naming the sub-agent's chat; approve runs it once, in that chat;
 * ask_user there waits for input the same way; the sub-agent then finishes
 * and its answer returns to the main chat. */
static void test_sec6_subagent_approval_and_question_pause_the_run(void **state)
{
	struct fx *f = *state;
	load_asker(f);
	script(f, call("m1", "run_skill", "{\"name\": \"asker\"}"));
	script(f, call("s1", "bash", "{\"command\": \"echo x >> x.txt\"}"));
	script(f, call("s2", "ask_user", "{\"question\": \"Which colour?\"}"));
	script(f, say("sub done"));
	script(f, say("ok"));
	start_run(f, "rs3", "ask");
	assert_int_equal(agent_run(&f->env, "rs3"), AGENT_WAITING_APPROVAL);
	char sub[128];
	enum runstate cs;
	sub_chat(f, "rs3", sub, sizeof sub, &cs);
	assert_int_equal(strncmp(sub, "skill-asker-", 12), 0);
	assert_int_equal(cs, RUNSTATE_RUNNING);
	struct run_row row = get_row(f, "rs3");
	assert_int_equal(row.state, RUNSTATE_WAITING_FOR_APPROVAL);
	assert_string_equal(json_string_value(json_object_get(row.pending, "kind")), "approval");
	assert_string_equal(json_string_value(json_object_get(row.pending, "chat_id")), sub);
	assert_string_equal(json_string_value(json_object_get(row.pending, "call_id")), "s1");
	assert_string_equal(json_string_value(json_object_get(row.pending, "tool")), "bash");
	run_row_free(&row);
	char *x = slurp(f, "x.txt");
	assert_null(x);

	answer_approval(f, "rs3", "approve");
	assert_int_equal(agent_run(&f->env, "rs3"), AGENT_WAITING_INPUT);
	x = slurp(f, "x.txt");
	assert_non_null(x);
	assert_string_equal(x, "x\n");
	free(x);
	row = get_row(f, "rs3");
	assert_string_equal(json_string_value(json_object_get(row.pending, "kind")), "question");
	assert_string_equal(json_string_value(json_object_get(row.pending, "chat_id")), sub);
	assert_string_equal(json_string_value(json_object_get(row.pending, "call_id")), "s2");
	run_row_free(&row);

	answer_input(f, "rs3", "blue\n");
	assert_int_equal(agent_run(&f->env, "rs3"), AGENT_COMPLETED);
	x = slurp(f, "x.txt");
	assert_string_equal(x, "x\n"); /* run once */
	free(x);
	char sub2[128];
	sub_chat(f, "rs3", sub2, sizeof sub2, &cs);
	assert_string_equal(sub2, sub);
	assert_int_equal(cs, RUNSTATE_COMPLETED);
	json_t *sm = messages(f, "rs3", sub);
	assert_int_equal(json_array_size(sm), 7);
	assert_string_equal(msg_field(sm, 3, "tool_call_id"), "s1");
	assert_string_equal(msg_field(sm, 3, "content"), "[exit 0]");
	assert_string_equal(msg_field(sm, 5, "content"), "blue");
	json_decref(sm);
	json_t *mm = messages(f, "rs3", AGENT_MAIN_CHAT);
	assert_int_equal(json_array_size(mm), 5);
	assert_string_equal(msg_field(mm, 3, "content"), "sub done");
	json_decref(mm);
	row = get_row(f, "rs3");
	assert_string_equal(row.result, "ok");
	assert_null(row.pending);
	assert_string_equal(row.input, "");
	run_row_free(&row);
	assert_int_equal(json_array_size(f->script->requests), 5);
	assert_int_equal(count_events(f, "rs3", "subagent_started"), 1);
	assert_int_equal(count_events(f, "rs3", "approval_granted"), 1);
	assert_int_equal(count_events(f, "rs3", "subagent_finished"), 1);
}

/* deny gives the sub-agent an error result and it carries on; a tool
 * outside the sub-agent's own set is refused without asking, approval
 * list or not. */
static void test_sec6_subagent_approval_deny_is_an_error_result(void **state)
{
	struct fx *f = *state;
	load_asker(f);
	assert_int_equal(strlist_add(&f->cfg->approval_tools, "write"), 0);
	script(f, call("m1", "run_skill", "{\"name\": \"asker\"}"));
	script(f, call("s0", "write", "{\"path\": \"w.txt\", \"content\": \"w\"}"));
	script(f, call("s1", "bash", "{\"command\": \"echo x > x.txt\"}"));
	script(f, say("gave up"));
	script(f, say("ok"));
	start_run(f, "rs4", "ask");
	assert_int_equal(agent_run(&f->env, "rs4"), AGENT_WAITING_APPROVAL);
	struct run_row row = get_row(f, "rs4");
	assert_string_equal(json_string_value(json_object_get(row.pending, "call_id")), "s1");
	run_row_free(&row);
	answer_approval(f, "rs4", "deny");
	assert_int_equal(agent_run(&f->env, "rs4"), AGENT_COMPLETED);
	char sub[128];
	sub_chat(f, "rs4", sub, sizeof sub, NULL);
	json_t *sm = messages(f, "rs4", sub);
	assert_non_null(strstr(msg_field(sm, 3, "content"), "not one of this sub-agent's tools"));
	assert_non_null(strstr(msg_field(sm, 5, "content"), "denied by the user"));
	json_decref(sm);
	char *x = slurp(f, "x.txt"), *w = slurp(f, "w.txt");
	assert_null(x);
	assert_null(w);
	json_t *mm = messages(f, "rs4", AGENT_MAIN_CHAT);
	assert_string_equal(msg_field(mm, 3, "content"), "gave up");
	json_decref(mm);
	row = get_row(f, "rs4");
	assert_string_equal(row.result, "ok");
	assert_null(row.pending);
	run_row_free(&row);
	assert_int_equal(count_events(f, "rs4", "approval_denied"), 1);
	char *ev = events(f, "rs4");
	char want[200];
	snprintf(want, sizeof want, "\"type\":\"approval_denied\",\"chat_id\":\"%s\"", sub);
	assert_non_null(strstr(ev, want));
	free(ev);
}

/* run_skill itself needing approval: once approved, the sub-agent's own
 * approval replaces pending; resuming reaches the sub-agent again through
 * the approved call instead of asking about run_skill again. */
static void test_sec6_approved_run_skill_then_subagent_approval(void **state)
{
	struct fx *f = *state;
	load_asker(f);
	assert_int_equal(strlist_add(&f->cfg->approval_tools, "run_skill"), 0);
	script(f, call("m1", "run_skill", "{\"name\": \"asker\"}"));
	script(f, call("s1", "bash", "{\"command\": \"echo x >> x.txt\"}"));
	script(f, say("sub done"));
	script(f, say("ok"));
	start_run(f, "rs5", "ask");
	assert_int_equal(agent_run(&f->env, "rs5"), AGENT_WAITING_APPROVAL);
	struct run_row row = get_row(f, "rs5");
	assert_string_equal(json_string_value(json_object_get(row.pending, "chat_id")),
			    AGENT_MAIN_CHAT);
	assert_string_equal(json_string_value(json_object_get(row.pending, "tool")), "run_skill");
	run_row_free(&row);
	answer_approval(f, "rs5", "approve");
	assert_int_equal(agent_run(&f->env, "rs5"), AGENT_WAITING_APPROVAL);
	char sub[128];
	sub_chat(f, "rs5", sub, sizeof sub, NULL);
	row = get_row(f, "rs5");
	assert_string_equal(json_string_value(json_object_get(row.pending, "chat_id")), sub);
	assert_string_equal(json_string_value(json_object_get(row.pending, "tool")), "bash");
	run_row_free(&row);
	answer_approval(f, "rs5", "approve");
	assert_int_equal(agent_run(&f->env, "rs5"), AGENT_COMPLETED);
	char *x = slurp(f, "x.txt");
	assert_non_null(x);
	assert_string_equal(x, "x\n");
	free(x);
	row = get_row(f, "rs5");
	assert_string_equal(row.result, "ok");
	assert_null(row.pending);
	run_row_free(&row);
	assert_int_equal(count_events(f, "rs5", "approval_granted"), 2);
	assert_int_equal(count_events(f, "rs5", "subagent_started"), 1);
	assert_int_equal(json_array_size(f->script->requests), 4);
}

/* learn_skill through the agent: it writes into the writable source and
 * is told the run's own allow-list, which the new skill cannot exceed. */
static void test_sec7_learn_skill_within_the_runs_list(void **state)
{
	struct fx *f = *state;
	add_skill(f, "gate", "---\nname: gate\ndescription: d\n"
			     "allowed-tools: [read, learn_skill]\n---\nGate.\n");
	/* continues the source's mapping of load_yaml */
	load_yaml(f, "    writable: true\nconfigurations:\n  default: {skills: [gate]}\n",
		  NULL, 0);
	script(f, call("l1", "learn_skill", "{\"name\": \"noted\", \"description\": \"d\", "
		       "\"body\": \"Note it.\", \"allowed_tools\": [\"bash\"]}"));
	script(f, call("l2", "learn_skill", "{\"name\": \"gate\", \"description\": \"d\", "
		       "\"body\": \"Note it.\"}"));
	script(f, call("l3", "learn_skill", "{\"name\": \"noted\", \"description\": \"d\", "
		       "\"body\": \"Note it.\", \"allowed_tools\": [\"Read\"]}"));
	script(f, say("ok"));
	start_run(f, "ls1", "learn");
	assert_int_equal(agent_run(&f->env, "ls1"), AGENT_COMPLETED);
	json_t *m = messages(f, "ls1", AGENT_MAIN_CHAT);
	assert_non_null(strstr(msg_field(m, 3, "content"),
			       "item 'bash' names a tool this run is not allowed"));
	assert_non_null(strstr(msg_field(m, 5, "content"), "a skill named 'gate' exists already"));
	assert_non_null(strstr(msg_field(m, 7, "content"), "learned skill 'noted'"));
	json_decref(m);
	char p[PATH_MAX * 2];
	snprintf(p, sizeof p, "%s/noted/SKILL.md", f->skills);
	FILE *fp = fopen(p, "r");
	assert_non_null(fp);
	char text[256] = {0};
	assert_true(fread(text, 1, sizeof text - 1, fp) > 0);
	fclose(fp);
	assert_string_equal(text, "---\nname: \"noted\"\ndescription: \"d\"\n"
			    "allowed-tools: [\"Read\"]\n---\nNote it.\n");
}

static void test_R15_skill_run_inline_becomes_user_message(void **state)
{
	struct fx *f = *state;
	add_skill(f, "greet", "---\nname: greet\ndescription: d\ninline: true\n---\n"
			      "Say hello to $ARGUMENTS.\n");
	load(f);
	script(f, say("Hello Bob"));
	start_run(f, "rs", "/skill:run:greet Bob\n");
	assert_int_equal(agent_run(&f->env, "rs"), AGENT_COMPLETED);
	json_t *msgs = json_object_get(request(f, 0), "messages");
	assert_int_equal(json_array_size(msgs), 2);
	assert_string_equal(msg_field(msgs, 1, "content"), BASE_DIR("greet") "Say hello to Bob.\n");
}

static void test_R15_skill_run_subagent_result_as_user_message(void **state)
{
	struct fx *f = *state;
	add_digest(f);
	load(f);
	script(f, say("digested"));
	script(f, say("here is the digest"));
	start_run(f, "rt", "/skill:run:digest the logs");
	assert_int_equal(agent_run(&f->env, "rt"), AGENT_COMPLETED);
	assert_int_equal(json_array_size(f->script->requests), 2);
	json_t *sreq = request(f, 0);
	assert_int_equal(strncmp(json_string_value(json_object_get(sreq, "chat_id")),
				 "skill-digest-", 13), 0);
	assert_string_equal(msg_field(json_object_get(sreq, "messages"), 1, "content"),
			    "the logs");
	json_t *mm = json_object_get(request(f, 1), "messages");
	assert_string_equal(json_string_value(json_object_get(request(f, 1), "chat_id")),
			    AGENT_MAIN_CHAT);
	assert_string_equal(msg_field(mm, 1, "content"), "[Skill result: digest]\n\ndigested");
	struct buf b = {0};
	assert_int_equal(agent_transcript(f->st, "rt", NULL, &b), 0);
	const char *note = strstr(b.data, "Running skill 'digest' in sub-agent...");
	const char *res = strstr(b.data, "user: [Skill result: digest]");
	assert_non_null(note);
	assert_non_null(res);
	assert_true(note < res);
	buf_free(&b);
}

static void test_R15_user_invocable_false_and_unknown_refused(void **state)
{
	struct fx *f = *state;
	add_skill(f, "internal", "---\nname: internal\ndescription: d\nuser-invocable: false\n"
				 "---\nInternal.\n");
	load(f);
	start_run(f, "ru", "/skill:run:internal");
	assert_int_equal(agent_run(&f->env, "ru"), AGENT_FAILED);
	struct run_row row = get_row(f, "ru");
	assert_non_null(strstr(row.error, "user-invocable: false"));
	run_row_free(&row);
	start_run(f, "rv", "/skill:run:missing now");
	assert_int_equal(agent_run(&f->env, "rv"), AGENT_FAILED);
	row = get_row(f, "rv");
	assert_non_null(strstr(row.error, "no skill named 'missing'"));
	run_row_free(&row);
	assert_int_equal(json_array_size(f->script->requests), 0);
}

/* A run keeps the catalogue it started with, and reads its skills' texts
 * from their files when it needs them (skill_read_text): one changed on
 * disk since is not run from it, never its new text under the old
 * front-matter. run_skill answers so (inline), the sub-agent of a skill
 * whose sub-skill changed fails saying so, and /skill:run: fails the run. */
static void test_skill_changed_during_the_run_is_not_run(void **state)
{
	struct fx *f = *state;
	add_skill(f, "greet", "---\nname: greet\ndescription: d\ninline: true\n---\nHello.\n");
	add_digest(f);
	load(f);
	add_skill(f, "greet", "---\nname: greet\ndescription: d\ninline: true\n---\n"
			      "Hello, changed.\n");
	add_skill(f, "digest/skills/helper", "---\nname: helper\ndescription: h\n---\n"
					     "Helper knowledge, changed.\n");
	script(f, call("c1", "run_skill", "{\"name\": \"greet\"}"));
	script(f, call("c2", "run_skill", "{\"name\": \"digest\"}"));
	script(f, say("ok"));
	start_run(f, "rc", "hi");
	assert_int_equal(agent_run(&f->env, "rc"), AGENT_COMPLETED);
	json_t *m = messages(f, "rc", AGENT_MAIN_CHAT);
	const char *r1 = msg_field(m, 3, "content"), *r2 = msg_field(m, 5, "content");
	assert_non_null(strstr(r1, "run_skill: skill 'greet' was changed on disk after this run "
				   "loaded it"));
	assert_null(strstr(r1, "Hello"));
	assert_non_null(strstr(r2, "skill 'digest' failed in its sub-agent: skill 'helper' was "
				   "changed on disk"));
	assert_null(strstr(r2, "Helper knowledge"));
	json_decref(m);

	start_run(f, "rd", "/skill:run:greet");
	assert_int_equal(agent_run(&f->env, "rd"), AGENT_FAILED);
	struct run_row row = get_row(f, "rd");
	assert_non_null(strstr(row.error, "/skill:run:greet: skill 'greet' was changed on disk"));
	run_row_free(&row);
}

static void test_sec6_cancellation(void **state)
{
	struct fx *f = *state;
	load(f);
	json_t *e = call("c1", "bash", "{\"command\": \"echo x > ran.txt\"}");
	json_object_set_new(e, "cancel", json_true());
	script(f, e);
	start_run(f, "rx", "go");
	assert_int_equal(agent_run(&f->env, "rx"), AGENT_CANCELLED);
	struct run_row row = get_row(f, "rx");
	assert_int_equal(row.state, RUNSTATE_CANCELLED);
	run_row_free(&row);
	char *ran = slurp(f, "ran.txt");
	assert_null(ran);

	/* cancelled before the first step: no model call at all */
	start_run(f, "ry", "go");
	assert_int_equal(agent_run(&f->env, "ry"), AGENT_CANCELLED);
	assert_int_equal(json_array_size(f->script->requests), 1);

	/* cancelled by someone else while running: the agent stops */
	f->cancel = false;
	start_run(f, "rz", "go");
	char *err = NULL;
	assert_int_equal(store_run_transition(f->st, "rz", RUNSTATE_RUNNING,
					      RUNSTATE_CANCELLED, NULL, &err), 0);
	assert_int_equal(agent_run(&f->env, "rz"), AGENT_CANCELLED);
	assert_int_equal(json_array_size(f->script->requests), 1);
}

static void test_sec6_cancellation_inside_subagent(void **state)
{
	struct fx *f = *state;
	add_digest(f);
	load(f);
	script(f, call("m1", "run_skill", "{\"name\": \"digest\"}"));
	json_t *e = say("never committed");
	json_object_set_new(e, "cancel", json_true());
	script(f, e);
	start_run(f, "rk", "go");
	assert_int_equal(agent_run(&f->env, "rk"), AGENT_CANCELLED);
	struct chat_row *rows;
	size_t n;
	char *err = NULL;
	assert_int_equal(store_chats(f->st, "rk", &rows, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_int_equal(rows[0].state, RUNSTATE_CANCELLED);
	json_t *sm = messages(f, "rk", rows[0].chat_id);
	assert_int_equal(json_array_size(sm), 2); /* system, user: no answer */
	json_decref(sm);
	chat_rows_free(rows, n);
	struct run_row row = get_row(f, "rk");
	assert_int_equal(row.state, RUNSTATE_CANCELLED);
	run_row_free(&row);
}

/* Shutdown: the run stays running with what was committed, and resumes. */
static void test_sec6_stopping_leaves_run_resumable(void **state)
{
	struct fx *f = *state;
	load(f);
	script(f, call("c1", "bash", "{\"command\": \"echo once >> log.txt\"}"));
	json_t *e = say("dropped");
	json_object_set_new(e, "stop", json_true());
	script(f, e);
	script(f, say("finished"));
	start_run(f, "rp", "go");
	assert_int_equal(agent_run(&f->env, "rp"), AGENT_STOPPED);
	struct run_row row = get_row(f, "rp");
	assert_int_equal(row.state, RUNSTATE_RUNNING);
	run_row_free(&row);
	json_t *m = messages(f, "rp", AGENT_MAIN_CHAT);
	assert_int_equal(json_array_size(m), 4); /* the second reply was dropped */
	json_decref(m);

	f->stop = false;
	assert_int_equal(agent_run(&f->env, "rp"), AGENT_COMPLETED);
	m = messages(f, "rp", AGENT_MAIN_CHAT);
	assert_int_equal(json_array_size(m), 5);
	assert_string_equal(msg_field(m, 4, "content"), "finished");
	json_decref(m);
	char *log = slurp(f, "log.txt");
	assert_non_null(log);
	assert_string_equal(log, "once\n");
	free(log);
}

static void test_transcript_and_messages_json(void **state)
{
	struct fx *f = *state;
	load(f);
	script(f, call("c1", "write", "{\"path\": \"a.txt\", \"content\": \"hello\"}"));
	script(f, call("c2", "read", "{\"path\": \"a.txt\"}"));
	script(f, say("all done"));
	start_run(f, "rr", "please write");
	assert_int_equal(agent_run(&f->env, "rr"), AGENT_COMPLETED);
	struct buf b = {0};
	assert_int_equal(agent_transcript(f->st, "rr", NULL, &b), 0);
	assert_non_null(strstr(b.data, "user: please write\n"));
	assert_non_null(strstr(b.data, "\u2192 write {\"path\": \"a.txt\""));
	assert_non_null(strstr(b.data, "\u2190 read: hello\n"));
	assert_non_null(strstr(b.data, "assistant: all done\n"));
	assert_true(strstr(b.data, "user:") < strstr(b.data, "assistant: all done"));
	buf_free(&b);
	b = (struct buf){0};
	assert_int_equal(agent_messages_json(f->st, "rr", NULL, &b), 0);
	json_t *j = json_loads(b.data, 0, NULL);
	assert_int_equal(json_array_size(j), 7);
	json_decref(j);
	buf_free(&b);
	assert_int_equal(agent_transcript(f->st, "no-such-run", NULL, &b), -ENOENT);
	buf_free(&b);
}

static void test_failed_run_shows_in_transcript(void **state)
{
	struct fx *f = *state;
	load(f);
	script(f, model_error("boom"));
	start_run(f, "rg", "hi");
	assert_int_equal(agent_run(&f->env, "rg"), AGENT_FAILED);
	struct buf b = {0};
	assert_int_equal(agent_transcript(f->st, "rg", NULL, &b), 0);
	assert_non_null(strstr(b.data, "[run failed] boom"));
	buf_free(&b);
}

/* ---- confinement: which skills run_skill and /skill:run: reach ----------- */

/* Skills for the reachability tests: attached, attached disabled, not
 * attached, a parent with a directory sub-skill and a sub-skills: list
 * naming an attached skill. */
static void add_confinement_skills(struct fx *f)
{
	add_skill(f, "shown", "---\nname: shown\ndescription: d\ninline: true\n---\n"
			      "Shown body $ARGUMENTS.\n");
	add_skill(f, "off", "---\nname: off\ndescription: d\ninline: true\n---\nOff body.\n");
	add_skill(f, "stray", "---\nname: stray\ndescription: d\ninline: true\n---\n"
			      "Stray body.\n");
	add_skill(f, "kid", "---\nname: kid\ndescription: d\ninline: true\n---\nKid body.\n");
	add_skill(f, "parent", "---\nname: parent\ndescription: d\nsub-skills: [kid]\n"
			       "---\nParent body.\n");
	add_skill(f, "parent/skills/helper", "---\nname: helper\ndescription: h\n---\n"
					     "Helper body.\n");
}

static const char confinement_yaml[] =
	"configurations:\n"
	"  default:\n"
	"    skills:\n"
	"      - shown\n"
	"      - {name: off, enabled: false}\n"
	"      - parent\n"
	"      - kid\n";

/* Only skills effective in the run's configuration run; a disabled
 * attachment, a skill not attached, another skill's sub-skill (directory or
 * sub-skills: list, even when attached itself) get exactly the answer an
 * unknown name gets. */
static void test_R1_run_skill_reaches_only_effective_skills(void **state)
{
	struct fx *f = *state;
	add_confinement_skills(f);
	load_yaml(f, confinement_yaml, NULL, 0);
	const char *names[] = { "shown", "off", "stray", "kid", "helper", "nope" };
	for (size_t i = 0; i < 6; i++) {
		char id[8], args[64];
		snprintf(id, sizeof id, "c%zu", i);
		snprintf(args, sizeof args, "{\"name\": \"%s\", \"arguments\": \"x\"}", names[i]);
		script(f, call(id, "run_skill", args));
	}
	script(f, say("ok"));
	start_run(f, "cf1", "try them");

	assert_int_equal(agent_run(&f->env, "cf1"), AGENT_COMPLETED);
	json_t *m = messages(f, "cf1", AGENT_MAIN_CHAT);
	assert_int_equal(json_array_size(m), 15);
	assert_string_equal(msg_field(m, 3, "content"), BASE_DIR("shown") "Shown body x.\n");
	for (size_t i = 1; i < 6; i++) {
		char want[64];
		snprintf(want, sizeof want, "run_skill: no skill named '%s'", names[i]);
		assert_string_equal(msg_field(m, 3 + 2 * i, "content"), want);
	}
	json_decref(m);
	assert_int_equal(count_events(f, "cf1", "subagent_started"), 0);
	struct run_row row = get_row(f, "cf1");
	assert_string_equal(row.result, "ok");
	run_row_free(&row);
}

/* A skill forced on the run is effective, attached or not (R1). */
static void test_R1_run_skill_reaches_forced_skills(void **state)
{
	struct fx *f = *state;
	add_confinement_skills(f);
	const char *forced[] = { "stray" };
	load_yaml(f, confinement_yaml, forced, 1);
	script(f, call("c1", "run_skill", "{\"name\": \"stray\"}"));
	script(f, say("ok"));
	start_run(f, "cf2", "forced");
	assert_int_equal(agent_run(&f->env, "cf2"), AGENT_COMPLETED);
	json_t *m = messages(f, "cf2", AGENT_MAIN_CHAT);
	assert_string_equal(msg_field(m, 3, "content"), BASE_DIR("stray") "Stray body.\n");
	json_decref(m);
}

/* /skill:run: follows the same rule as run_skill. */
static void test_R15_skill_run_reaches_only_effective_skills(void **state)
{
	struct fx *f = *state;
	add_confinement_skills(f);
	load_yaml(f, confinement_yaml, NULL, 0);
	const char *names[] = { "off", "stray", "kid", "helper" };
	for (size_t i = 0; i < 4; i++) {
		char id[8], prompt[64], want[96];
		snprintf(id, sizeof id, "s%zu", i);
		snprintf(prompt, sizeof prompt, "/skill:run:%s now", names[i]);
		start_run(f, id, prompt);
		assert_int_equal(agent_run(&f->env, id), AGENT_FAILED);
		struct run_row row = get_row(f, id);
		snprintf(want, sizeof want, "/skill:run:%s: no skill named '%s'", names[i],
			 names[i]);
		assert_string_equal(row.error, want);
		run_row_free(&row);
	}
	assert_int_equal(json_array_size(f->script->requests), 0);
	script(f, say("done"));
	start_run(f, "s9", "/skill:run:shown now");
	assert_int_equal(agent_run(&f->env, "s9"), AGENT_COMPLETED);
	assert_string_equal(msg_field(json_object_get(request(f, 0), "messages"), 1, "content"),
			    BASE_DIR("shown") "Shown body now.\n");
}

/* Issue "Skill files in reach": the tools read the files of the run's
 * effective skills (and of the sub-skills those may run) at
 * /skills/<name>, a directory sub-skill's inside its parent's; a skill
 * the run does not have (not attached, disabled) is not there, as for
 * run_skill. */
static void test_skill_files_reach_only_the_runs_skills(void **state)
{
	struct fx *f = *state;
	add_confinement_skills(f);
	load_yaml(f, confinement_yaml, NULL, 0);
	const char *paths[] = { "/skills/shown/SKILL.md", "/skills/parent/skills/helper/SKILL.md",
				"/skills/kid/SKILL.md", "/skills/off/SKILL.md",
				"/skills/stray/SKILL.md" };
	for (size_t i = 0; i < 5; i++) {
		char id[8], args[96];
		snprintf(id, sizeof id, "c%zu", i);
		snprintf(args, sizeof args, "{\"path\": \"%s\"}", paths[i]);
		script(f, call(id, "read", args));
	}
	script(f, say("ok"));
	start_run(f, "sf1", "read them");
	assert_int_equal(agent_run(&f->env, "sf1"), AGENT_COMPLETED);
	json_t *m = messages(f, "sf1", AGENT_MAIN_CHAT);
	assert_non_null(strstr(msg_field(m, 3, "content"), "Shown body"));
	assert_non_null(strstr(msg_field(m, 5, "content"), "Helper body."));
	assert_non_null(strstr(msg_field(m, 7, "content"), "Kid body."));
	assert_non_null(strstr(msg_field(m, 9, "content"), "read: no skill named 'off'"));
	assert_non_null(strstr(msg_field(m, 11, "content"), "read: no skill named 'stray'"));
	json_decref(m);
	/* Forced on the run: its files are there too. */
	resolution_free(f->res);
	catalog_free(f->cat);
	const char *forced[] = { "stray" };
	load_forced(f, forced, 1);
	script(f, call("c1", "read", "{\"path\": \"/skills/stray/SKILL.md\"}"));
	script(f, say("ok"));
	start_run(f, "sf2", "read it");
	assert_int_equal(agent_run(&f->env, "sf2"), AGENT_COMPLETED);
	m = messages(f, "sf2", AGENT_MAIN_CHAT);
	assert_non_null(strstr(msg_field(m, 3, "content"), "Stray body."));
	json_decref(m);
}

/* Issue "A project directory": with a workdir, the file tools work in it
 * (relative paths) and the workspace is /workspace. */
static void test_workdir_is_where_the_tools_work(void **state)
{
	struct fx *f = *state;
	load(f);
	char wd[PATH_MAX];
	snprintf(wd, sizeof wd, "%s/project", f->tmp);
	assert_int_equal(mkdir(wd, 0755), 0);
	if (box.switch_user && box.mode == SANDBOX_BWRAP)
		assert_int_equal(chown(wd, box.uid, box.gid), 0);
	f->env.workdir = wd;
	script(f, call("c1", "write", "{\"path\": \"src/a.txt\", \"content\": \"A\"}"));
	script(f, call("c2", "write", "{\"path\": \"/workspace/b.txt\", \"content\": \"B\"}"));
	script(f, say("ok"));
	start_run(f, "wd1", "work");
	assert_int_equal(agent_run(&f->env, "wd1"), AGENT_COMPLETED);
	char p[PATH_MAX + 16];
	snprintf(p, sizeof p, "%s/src/a.txt", wd);
	assert_int_equal(access(p, F_OK), 0);
	char *b = slurp(f, "b.txt");
	assert_non_null(b);
	assert_string_equal(b, "B");
	free(b);
	assert_null(slurp(f, "src/a.txt"));
}

/* ---- runs.budget ----------------------------------------------------------- */

/* An assistant message asking for n calls of tool with args. */
static json_t *calls(size_t n, const char *tool, const char *args)
{
	json_t *list = json_array();
	for (size_t i = 0; i < n; i++) {
		char id[16];
		snprintf(id, sizeof id, "k%zu", i);
		json_array_append_new(list, json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", id,
						      "type", "function", "function", "name",
						      tool, "arguments", args));
	}
	return json_pack("{s:{s:s, s:n, s:o}}", "message", "role", "assistant", "content",
			 "tool_calls", list);
}

static void assert_failed_with(struct fx *f, const char *id, const char *error)
{
	struct run_row row = get_row(f, id);
	assert_int_equal(row.state, RUNSTATE_FAILED);
	assert_string_equal(row.error, error);
	assert_null(row.result);
	run_row_free(&row);
}

static void test_budget_model_calls_fail_the_run(void **state)
{
	struct fx *f = *state;
	load(f);
	f->cfg->budget.model_calls = 2;
	for (int i = 0; i < 3; i++)
		script(f, call(i % 2 ? "b" : "a", "read", "{\"path\": \"nothing\"}"));
	start_run(f, "b1", "loop");
	assert_int_equal(agent_run(&f->env, "b1"), AGENT_FAILED);
	assert_int_equal(json_array_size(f->script->requests), 2);
	assert_failed_with(f, "b1", "budget exceeded: runs.budget.model_calls (2 model calls)");
}

/* Calls committed before (a crash, a wait), in any chat, count. */
static void test_budget_model_calls_count_what_was_committed(void **state)
{
	struct fx *f = *state;
	load(f);
	f->cfg->budget.model_calls = 2;
	start_run(f, "b2", "go");
	json_t *main_msgs[] = {
		json_pack("{s:s, s:s}", "role", "system", "content", "sys"),
		json_pack("{s:s, s:s}", "role", "user", "content", "go"),
		json_pack("{s:s, s:n, s:[{s:s, s:s, s:{s:s, s:s}}]}", "role", "assistant",
			  "content", "tool_calls", "id", "a", "type", "function", "function",
			  "name", "read", "arguments", "{\"path\": \"x\"}"),
		json_pack("{s:s, s:s, s:s, s:s}", "role", "tool", "tool_call_id", "a",
			  "name", "read", "content", "read: no such file: x"),
	};
	prepopulate(f, "b2", AGENT_MAIN_CHAT, main_msgs, 4);
	json_t *sub_msgs[] = {
		json_pack("{s:s, s:s}", "role", "assistant", "content", "an earlier sub-agent"),
	};
	prepopulate(f, "b2", "skill-old-1", sub_msgs, 1);
	script(f, say("never asked"));
	assert_int_equal(agent_run(&f->env, "b2"), AGENT_FAILED);
	assert_int_equal(json_array_size(f->script->requests), 0);
	assert_failed_with(f, "b2", "budget exceeded: runs.budget.model_calls (2 model calls)");
}

/* A reply asking for too many calls runs none of them. */
static void test_budget_tool_calls_per_turn_fail_the_run(void **state)
{
	struct fx *f = *state;
	load(f);
	f->cfg->budget.tool_calls_per_turn = 2;
	script(f, calls(2, "write", "{\"path\": \"two.txt\", \"content\": \"x\"}"));
	script(f, calls(3, "write", "{\"path\": \"three.txt\", \"content\": \"x\"}"));
	start_run(f, "b3", "write");
	assert_int_equal(agent_run(&f->env, "b3"), AGENT_FAILED);
	assert_failed_with(f, "b3", "budget exceeded: runs.budget.tool_calls_per_turn "
				    "(2 tool calls per turn)");
	char *two = slurp(f, "two.txt");
	assert_non_null(two);
	free(two);
	char *three = slurp(f, "three.txt");
	assert_null(three);
	json_t *m = messages(f, "b3", AGENT_MAIN_CHAT);
	assert_int_equal(json_array_size(m), 5); /* the second reply is not kept */
	json_decref(m);
	assert_int_equal(count_events(f, "b3", "tool_call"), 2);
}

static void test_budget_subagents_fail_the_run(void **state)
{
	struct fx *f = *state;
	add_digest(f);
	load(f);
	f->cfg->budget.subagents = 1;
	script(f, call("m1", "run_skill", "{\"name\": \"digest\"}"));
	script(f, say("first digest"));
	script(f, call("m2", "run_skill", "{\"name\": \"digest\"}"));
	script(f, say("never"));
	start_run(f, "b4", "digest twice");
	assert_int_equal(agent_run(&f->env, "b4"), AGENT_FAILED);
	assert_int_equal(json_array_size(f->script->requests), 3);
	assert_failed_with(f, "b4", "budget exceeded: runs.budget.subagents (1 sub-agent)");
	struct chat_row *rows;
	size_t n;
	char *err = NULL;
	assert_int_equal(store_chats(f->st, "b4", &rows, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_int_equal(rows[0].state, RUNSTATE_COMPLETED);
	chat_rows_free(rows, n);
	assert_int_equal(count_events(f, "b4", "subagent_started"), 1);
}

/* Sub-agents never get run_skill (R13), so today's deepest sub-agent has
 * depth 1, which the smallest depth the config admits (1) allows; a depth
 * of 0, which only a test can set, shows the check the agent makes before
 * each new sub-agent. */
static void test_budget_depth_fails_the_run(void **state)
{
	struct fx *f = *state;
	add_digest(f);
	load(f);
	f->cfg->budget.depth = 1;
	script(f, call("m1", "run_skill", "{\"name\": \"digest\"}"));
	script(f, say("sub answer"));
	script(f, say("main answer"));
	start_run(f, "b5", "digest");
	assert_int_equal(agent_run(&f->env, "b5"), AGENT_COMPLETED);

	f->cfg->budget.depth = 0;
	script(f, call("m1", "run_skill", "{\"name\": \"digest\"}"));
	script(f, say("never"));
	start_run(f, "b6", "digest");
	assert_int_equal(agent_run(&f->env, "b6"), AGENT_FAILED);
	assert_failed_with(f, "b6", "budget exceeded: runs.budget.depth "
				    "(0 levels of sub-agents)");
	assert_int_equal(count_events(f, "b6", "subagent_started"), 0);
	assert_int_equal(json_array_size(f->script->requests), 4);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The deadline kills the tool process running in a sub-agent; the
 * sub-agent's chat ends failed and so does the run. */
static void test_budget_seconds_kill_the_tool_and_fail_the_run(void **state)
{
	struct fx *f = *state;
	add_digest(f);
	load(f);
	f->cfg->budget.seconds = 1;
	script(f, call("m1", "run_skill", "{\"name\": \"digest\"}"));
	script(f, call("s1", "bash", "{\"command\": \"sleep 30; echo late > late.txt\"}"));
	script(f, say("never"));
	start_run(f, "b7", "slow");
	double t0 = now_s();
	assert_int_equal(agent_run(&f->env, "b7"), AGENT_FAILED);
	double took = now_s() - t0;
	assert_true(took >= 0.5 && took < 10);
	assert_failed_with(f, "b7", "budget exceeded: runs.budget.seconds (1 second)");
	struct chat_row *rows;
	size_t n;
	char *err = NULL;
	assert_int_equal(store_chats(f->st, "b7", &rows, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_int_equal(rows[0].state, RUNSTATE_FAILED);
	assert_string_equal(rows[0].result, "budget exceeded: runs.budget.seconds (1 second)");
	json_t *sm = messages(f, "b7", rows[0].chat_id);
	assert_int_equal(json_array_size(sm), 3); /* the killed call has no result */
	json_decref(sm);
	chat_rows_free(rows, n);
	assert_int_equal(json_array_size(f->script->requests), 2);
	char *late = slurp(f, "late.txt");
	assert_null(late);
}

/* The clock runs from the run's first start, across a resume. */
static void test_budget_seconds_count_from_the_first_start(void **state)
{
	struct fx *f = *state;
	load(f);
	f->cfg->budget.seconds = 1;
	start_run(f, "b8", "later");
	struct timespec ts = { 1, 100 * 1000 * 1000 };
	nanosleep(&ts, NULL);
	script(f, say("never"));
	assert_int_equal(agent_run(&f->env, "b8"), AGENT_FAILED);
	assert_int_equal(json_array_size(f->script->requests), 0);
	assert_failed_with(f, "b8", "budget exceeded: runs.budget.seconds (1 second)");
}

/* Bytes stored before count; a message that would go over is not stored
 * (here the final answer, committed with the completion). */
static void test_budget_stored_bytes_fail_the_run(void **state)
{
	struct fx *f = *state;
	load(f);
	start_run(f, "b9", "big");
	char big[3001];
	memset(big, 'x', 3000);
	big[3000] = '\0';
	json_t *pre[] = {
		json_pack("{s:s, s:s}", "role", "system", "content", "sys"),
		json_pack("{s:s, s:s}", "role", "user", "content", big),
	};
	int64_t stored = (int64_t)(store_message_bytes(pre[0]) + store_message_bytes(pre[1]));
	prepopulate(f, "b9", AGENT_MAIN_CHAT, pre, 2);
	f->cfg->budget.stored_bytes = stored + 100;
	/* over by itself: 100 bytes and more */
	script(f, say("an answer of some length, long enough to take the run over "
		      "the hundred bytes it has left"));
	assert_int_equal(agent_run(&f->env, "b9"), AGENT_FAILED);
	char want[96];
	snprintf(want, sizeof want, "budget exceeded: runs.budget.stored_bytes (%lld bytes)",
		 (long long)stored + 100);
	assert_failed_with(f, "b9", want);
	json_t *m = messages(f, "b9", AGENT_MAIN_CHAT);
	assert_int_equal(json_array_size(m), 2);
	json_decref(m);

	/* the same answer fits when nothing was stored before */
	f->cfg->budget.stored_bytes = 1000;
	script(f, say("an answer of some length, long enough to take the run over "
		      "the hundred bytes it has left"));
	start_run(f, "b10", "small");
	assert_int_equal(agent_run(&f->env, "b10"), AGENT_COMPLETED);
}

/* A prompt over the budget: the run starts and fails at once, storing
 * nothing. */
static void test_budget_stored_bytes_refuse_the_first_messages(void **state)
{
	struct fx *f = *state;
	load(f);
	f->cfg->budget.stored_bytes = 10;
	enqueue_run(f, "b11", "a prompt of more than ten bytes");
	assert_int_equal(agent_run(&f->env, "b11"), AGENT_FAILED);
	assert_failed_with(f, "b11", "budget exceeded: runs.budget.stored_bytes (10 bytes)");
	json_t *m = messages(f, "b11", AGENT_MAIN_CHAT);
	assert_int_equal(json_array_size(m), 0);
	json_decref(m);
	assert_int_equal(json_array_size(f->script->requests), 0);
}

/* Terminal(ls:*) admits ls given as a string or as words, and nothing
 * else: the words are checked as they are given (never joined). */
static void test_D3_patterned_terminal_checks_words(void **state)
{
	struct fx *f = *state;
	add_skill(f, "lister", "---\nname: lister\ndescription: d\n"
			       "allowed-tools: Terminal(ls:*)\n---\nb\n");
	load(f);
	script(f, call("c1", "terminal", "{\"command\": [\"ls\", \"-a\"]}"));
	script(f, call("c2", "terminal", "{\"command\": \"ls -a\"}"));
	script(f, call("c3", "terminal", "{\"command\": [\"rm\", \"-rf\", \".\"]}"));
	script(f, call("c4", "terminal", "{\"command\": [\"ls -a\"]}"));
	script(f, call("c5", "terminal", "{\"command\": [\"ls\", 3]}"));
	script(f, say("ok"));
	start_run(f, "r3t", "list");

	assert_int_equal(agent_run(&f->env, "r3t"), AGENT_COMPLETED);
	json_t *m = messages(f, "r3t", AGENT_MAIN_CHAT);
	assert_int_equal(json_array_size(m), 13);
	for (size_t i = 3; i <= 5; i += 2) {
		const char *res = msg_field(m, i, "content");
		if (sandbox_usable(&box))
			assert_non_null(strstr(res, ".\n..\n"));
		assert_null(strstr(res, "not admitted"));
	}
	for (size_t i = 7; i <= 11; i += 2)
		assert_non_null(strstr(msg_field(m, i, "content"), "not admitted by the patterns"));
	json_decref(m);
	assert_int_equal(count_events(f, "r3t", "tool_denied"), 3);
}

/* env.store_wait as the run manager's, for a test: records each call
 * ("rc/attempt"), lets the other connection go at the first failure, and
 * says to try again unless the run is stopping. */
struct waits {
	struct buf calls;
	bool *stop;
};

static bool fx_store_wait(void *arg, const char *run_id, int rc, const char *err,
			  unsigned attempt)
{
	struct waits *w = arg;
	assert_non_null(run_id);
	if (rc)
		assert_non_null(err);
	buf_printf(&w->calls, "%d/%u ", rc, attempt);
	unlock_elsewhere();
	return rc == 0 ? false : !*w->stop;
}

/* Issue 14: a commit the store cannot take now (the database locked by
 * another connection past the busy timeout) is not the end of the run:
 * the agent asks env.store_wait, tries the same commit again, and the run
 * completes with its answer committed once. */
static void test_a_commit_the_store_cannot_take_is_tried_again(void **state)
{
	struct fx *f = *state;
	load(f);
	struct waits w = { .stop = &f->stop };
	f->env.store_wait = fx_store_wait;
	f->env.store_wait_arg = &w;
	locked_db = f->db;
	json_t *e = say("the answer");
	json_object_set_new(e, "lock", json_true());
	script(f, e);
	start_run(f, "busy1", "hi");
	assert_int_equal(agent_run(&f->env, "busy1"), AGENT_COMPLETED);
	assert_string_equal(w.calls.data, "-11/0 0/1 ");
	struct run_row row = get_row(f, "busy1");
	assert_string_equal(row.result, "the answer");
	run_row_free(&row);
	json_t *msgs = messages(f, "busy1", AGENT_MAIN_CHAT);
	size_t answers = 0;
	for (size_t i = 0; i < json_array_size(msgs); i++)
		answers += strcmp(msg_field(msgs, i, "role"), "assistant") == 0;
	assert_int_equal(answers, 1);
	json_decref(msgs);
	buf_free(&w.calls);
}

/* ... and when the daemon stops meanwhile, the run is left as it was
 * (running, to resume), not failed. */
static void test_a_commit_given_up_at_a_stop_leaves_the_run_running(void **state)
{
	struct fx *f = *state;
	load(f);
	struct waits w = { .stop = &f->stop };
	f->env.store_wait = fx_store_wait;
	f->env.store_wait_arg = &w;
	locked_db = f->db;
	json_t *e = say("the answer");
	json_object_set_new(e, "lock", json_true());
	json_object_set_new(e, "stop", json_true());
	script(f, e);
	start_run(f, "busy2", "hi");
	assert_int_equal(agent_run(&f->env, "busy2"), AGENT_STOPPED);
	struct run_row row = get_row(f, "busy2");
	assert_int_equal(row.state, RUNSTATE_RUNNING);
	assert_null(row.error);
	run_row_free(&row);
	buf_free(&w.calls);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
		T(test_R5_offered_tool_write_then_read),
		T(test_transcript_shows_a_streaming_reply_as_the_start_of_the_committed_one),
		T(test_a_commit_the_store_cannot_take_is_tried_again),
		T(test_a_commit_given_up_at_a_stop_leaves_the_run_running),
		T(test_R5_tool_not_offered_is_denied_and_logged),
		T(test_D3_webfetch_domain_grant_checks_the_url),
		T(test_D3_patterned_bash_grant_enforced_at_execution),
		T(test_D3_patterned_terminal_checks_words),
		T(test_R3_empty_allow_list_is_one_plain_completion),
		T(test_queued_run_starts_in_one_commit),
		T(test_queued_run_that_cannot_start_fails),
		T(test_sec6_turn_limit_fails_the_run),
		T(test_sec7_model_error_fails_with_its_message),
		T(test_sec7_bad_json_arguments_give_error_result),
		T(test_R11_run_skill_inline_substitutes_arguments),
		T(test_R12_R13_run_skill_subagent),
		T(test_sec6_approval_waits_then_approve_executes),
		T(test_sec6_approval_deny_refuses),
		T(test_R7_tool_removed_while_waiting_is_refused),
		T(test_sec6_ask_user_waits_for_input),
		T(test_sec6_resume_after_crash_no_duplicates),
		T(test_sec6_resume_with_final_answer_committed),
		T(test_R7_interrupted_side_effect_call_is_not_run_again),
		T(test_R7_read_only_calls_and_model_calls_are_repeated),
		T(test_R12_crashed_subagent_resumes_in_its_chat),
		T(test_R12_finished_subagent_result_reused_after_crash),
		T(test_sec6_subagent_approval_and_question_pause_the_run),
		T(test_sec6_subagent_approval_deny_is_an_error_result),
		T(test_sec6_approved_run_skill_then_subagent_approval),
		T(test_sec7_learn_skill_within_the_runs_list),
		T(test_R15_skill_run_inline_becomes_user_message),
		T(test_R15_skill_run_subagent_result_as_user_message),
		T(test_R15_user_invocable_false_and_unknown_refused),
		T(test_skill_changed_during_the_run_is_not_run),
		T(test_sec6_cancellation),
		T(test_sec6_cancellation_inside_subagent),
		T(test_sec6_stopping_leaves_run_resumable),
		T(test_transcript_and_messages_json),
		T(test_failed_run_shows_in_transcript),
		T(test_R1_run_skill_reaches_only_effective_skills),
		T(test_R1_run_skill_reaches_forced_skills),
		T(test_R15_skill_run_reaches_only_effective_skills),
		T(test_skill_files_reach_only_the_runs_skills),
		T(test_workdir_is_where_the_tools_work),
		T(test_budget_model_calls_fail_the_run),
		T(test_budget_model_calls_count_what_was_committed),
		T(test_budget_tool_calls_per_turn_fail_the_run),
		T(test_budget_subagents_fail_the_run),
		T(test_budget_depth_fails_the_run),
		T(test_budget_seconds_kill_the_tool_and_fail_the_run),
		T(test_budget_seconds_count_from_the_first_start),
		T(test_budget_stored_bytes_fail_the_run),
		T(test_budget_stored_bytes_refuse_the_first_messages),
#undef T
	};
	struct tools_config tc = {0};
	if (strlist_add(&tc.terminal_commands, "ls") < 0 || sandbox_probe(&tc, &box) < 0)
		return 1;
	strlist_free(&tc.terminal_commands);
	if (!sandbox_usable(&box))
		fprintf(stderr, "warning: no usable sandbox, bash calls fail: %s\n", box.why);
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	sandbox_free(&box);
	return rc;
}
