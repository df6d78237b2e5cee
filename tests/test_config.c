/* Tests of core/config: the instance config file (DESIGN.md sections 3, 9,
 * D2). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "config.h"

/* ---- helpers ---------------------------------------------------------- */

struct tmp {
	char dir[256];
};

static int setup_tmp(void **state)
{
	struct tmp *t = calloc(1, sizeof *t);
	assert_non_null(t);
	const char *base = getenv("TMPDIR");
	snprintf(t->dir, sizeof t->dir, "%s/skillfs-config-XXXXXX",
		 base && *base ? base : "/tmp");
	assert_non_null(mkdtemp(t->dir));
	/* Physical path, so it compares equal to what getcwd() reports. */
	char *real = realpath(t->dir, NULL);
	assert_non_null(real);
	assert_true(strlen(real) < sizeof t->dir);
	strcpy(t->dir, real);
	free(real);
	*state = t;
	return 0;
}

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st, (void)flag, (void)f;
	return remove(p);
}

static int teardown_tmp(void **state)
{
	struct tmp *t = *state;
	nftw(t->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(t);
	return 0;
}

/* Writes text to dir/name (creating dir/name's parent one level deep). */
static void write_file(const char *dir, const char *name, const char *text)
{
	char p[512];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	char *slash = strrchr(p, '/');
	*slash = '\0';
	mkdir(p, 0700);
	*slash = '/';
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
}

/* Parses text that must be accepted; base directory "/base". */
static struct config *parse_ok(const char *text)
{
	struct config *c = NULL;
	char *err = NULL;
	int rc = config_parse(text, strlen(text), "config.yaml", "/base", &c, &err);
	if (rc != 0)
		fail_msg("unexpected error: %s", err ? err : "(none)");
	assert_null(err);
	assert_non_null(c);
	return c;
}

/* Parses text that must be refused; returns the message (caller frees). */
static char *parse_err(const char *text)
{
	struct config *c = (struct config *)1;
	char *err = NULL;
	int rc = config_parse(text, strlen(text), "config.yaml", "/base", &c, &err);
	assert_int_equal(rc, -1);
	assert_null(c);
	assert_non_null(err);
	return err;
}

/* Asserts the message starts with want. */
static void assert_prefix(const char *msg, const char *want)
{
	if (strncmp(msg, want, strlen(want)) != 0)
		fail_msg("message '%s' does not start with '%s'", msg, want);
}

static void assert_contains(const char *msg, const char *want)
{
	if (!strstr(msg, want))
		fail_msg("message '%s' does not contain '%s'", msg, want);
}

static bool has_warning(const struct config *c, const char *needle)
{
	for (size_t i = 0; i < c->warnings.n; i++)
		if (strstr(c->warnings.items[i], needle))
			return true;
	return false;
}

static void assert_builtin_tools(const struct strlist *l)
{
	static const char *const want[] = {"bash", "python", "terminal", "read",
		"write", "edit", "glob", "grep", "webfetch", "run_skill", "learn_skill",
		"ask_user"};
	assert_int_equal(l->n, 12);
	assert_int_equal(config_builtin_tools_n, 12);
	for (size_t i = 0; i < 12; i++) {
		assert_string_equal(l->items[i], want[i]);
		assert_string_equal(config_builtin_tools[i], want[i]);
	}
}

/* ---- the example and the defaults -------------------------------------- */

static const char full_example[] =
	"sources:\n"
	"  - path: skills\n"
	"    trust: first_party\n"
	"  - path: /opt/shared/skills/\n"
	"    trust: community\n"
	"    writable: true\n"
	"  - path: learned\n"
	"    writable: yes\n"
	"    recursive: true\n"
	"skills:\n"
	"  maxBytes: 30000\n"
	"  listingMaxBytes: 2048\n"
	"  execution_mode: subagent\n"
	"  minTrustLevel: verified\n"
	"  disabled: [some-skill, other]\n"
	"  trust: {some-skill: community, pdf: first_party}\n"
	"tools:\n"
	"  registered: [Bash, read, edit, write, webfetch, python, terminal,\n"
	"               run_skill, learn_skill, ask_user]\n"
	"  approval: [bash, WRITE]\n"
	"model:\n"
	"  provider: command\n"
	"  command: [./examples/demo-model, --fast]\n"
	"  base_url: http://127.0.0.1:8080/v1\n"
	"  model: some-model\n"
	"  api_key_env: OPENAI_API_KEY\n"
	"  timeout: 60\n"
	"runs:\n"
	"  workers: 8\n"
	"  max_turns: 10\n"
	"  prompt_max_bytes: 5000\n"
	"  budget: {model_calls: 50, tool_calls_per_turn: 4, subagents: 3,\n"
	"           depth: 1, seconds: 600, stored_bytes: 512KiB}\n"
	"state: var/state.db\n"
	"configurations:\n"
	"  zeta:\n"
	"    skills: [one]\n"
	"  default:\n"
	"    skills:\n"
	"      - pdf\n"
	"      - {name: review, enabled: false}\n"
	"      - {name: lint}\n"
	"      - pdf\n";

static void test_S9_full_example_reads_every_key(void **state)
{
	(void)state;
	struct config *c = parse_ok(full_example);

	assert_string_equal(c->base_dir, "/base");
	assert_int_equal(c->nsources, 3);
	assert_string_equal(c->sources[0].path, "/base/skills");
	assert_int_equal(c->sources[0].trust, TRUST_FIRST_PARTY);
	assert_false(c->sources[0].writable);
	assert_string_equal(c->sources[1].path, "/opt/shared/skills");
	assert_int_equal(c->sources[1].trust, TRUST_COMMUNITY);
	assert_true(c->sources[1].writable);
	assert_true(c->sources[2].writable);
	assert_false(c->sources[0].recursive);
	assert_false(c->sources[1].recursive);
	assert_true(c->sources[2].recursive);
	/* learn_skill writes into the first writable source only */
	assert_string_equal(config_learn_dir(c), "/opt/shared/skills");

	assert_int_equal(c->max_bytes, 30000);
	assert_int_equal(c->listing_max_bytes, 2048);
	assert_int_equal(c->execution_mode, EXEC_SUBAGENT);
	assert_int_equal(c->min_trust, TRUST_VERIFIED);
	assert_int_equal(c->disabled.n, 2);
	assert_true(config_skill_disabled(c, "some-skill"));
	assert_true(config_skill_disabled(c, "other"));
	assert_false(config_skill_disabled(c, "pdf"));
	assert_int_equal(c->ntrust_overrides, 2);
	assert_int_equal(config_skill_trust(c, "pdf", TRUST_UNTRUSTED), TRUST_FIRST_PARTY);

	/* Registered keeps the file's order, lower-cased. */
	static const char *const reg[] = {"bash", "read", "edit", "write", "webfetch",
		"python", "terminal", "run_skill", "learn_skill", "ask_user"};
	assert_int_equal(c->registered_tools.n, 10);
	for (size_t i = 0; i < 10; i++)
		assert_string_equal(c->registered_tools.items[i], reg[i]);
	assert_int_equal(c->approval_tools.n, 2);
	assert_string_equal(c->approval_tools.items[0], "bash");
	assert_string_equal(c->approval_tools.items[1], "write");

	assert_string_equal(c->model.provider, "command");
	assert_int_equal(c->model.command.n, 2);
	assert_string_equal(c->model.command.items[0], "/base/examples/demo-model");
	assert_string_equal(c->model.command.items[1], "--fast");
	assert_string_equal(c->model.base_url, "http://127.0.0.1:8080/v1");
	assert_string_equal(c->model.model, "some-model");
	assert_string_equal(c->model.api_key_env, "OPENAI_API_KEY");
	assert_int_equal(c->model.timeout, 60);

	assert_int_equal(c->workers, 8);
	assert_int_equal(c->max_turns, 10);
	assert_int_equal(c->prompt_max_bytes, 5000);
	assert_int_equal(c->budget.model_calls, 50);
	assert_int_equal(c->budget.tool_calls_per_turn, 4);
	assert_int_equal(c->budget.subagents, 3);
	assert_int_equal(c->budget.depth, 1);
	assert_int_equal(c->budget.seconds, 600);
	assert_int_equal(c->budget.stored_bytes, 512 * 1024);
	assert_string_equal(c->state_path, "/base/var/state.db");

	/* Configurations in file order, attachments in order, duplicates kept. */
	assert_int_equal(c->nconfigs, 2);
	assert_string_equal(c->configs[0].name, "zeta");
	assert_string_equal(c->configs[1].name, "default");
	const struct configuration *d = config_find(c, "default");
	assert_ptr_equal(d, &c->configs[1]);
	assert_false(d->attach_all);
	assert_int_equal(d->n, 4);
	assert_string_equal(d->att[0].name, "pdf");
	assert_true(d->att[0].enabled);
	assert_string_equal(d->att[1].name, "review");
	assert_false(d->att[1].enabled);
	assert_string_equal(d->att[2].name, "lint");
	assert_true(d->att[2].enabled);
	assert_string_equal(d->att[3].name, "pdf");
	assert_null(config_find(c, "missing"));

	assert_int_equal(c->warnings.n, 0);
	config_free(c);
}

static void test_S9_absent_keys_take_defaults(void **state)
{
	(void)state;
	struct config *c = parse_ok("configurations:\n  default:\n");
	assert_int_equal(c->nsources, 0);
	assert_int_equal(c->max_bytes, CONFIG_DEFAULT_MAX_BYTES);
	assert_int_equal(c->max_bytes, 24000);
	assert_int_equal(c->listing_max_bytes, 4096);
	assert_int_equal(c->execution_mode, EXEC_INLINE);
	assert_int_equal(c->min_trust, TRUST_UNTRUSTED);
	assert_int_equal(c->disabled.n, 0);
	assert_int_equal(c->ntrust_overrides, 0);
	assert_builtin_tools(&c->registered_tools);
	assert_int_equal(c->approval_tools.n, 0);
	assert_string_equal(c->model.provider, "echo");
	assert_int_equal(c->model.command.n, 0);
	assert_null(c->model.base_url);
	assert_null(c->model.model);
	assert_null(c->model.api_key_env);
	assert_int_equal(c->model.timeout, 120);
	assert_int_equal(c->workers, 4);
	assert_int_equal(c->max_turns, 32);
	assert_int_equal(c->prompt_max_bytes, 1024 * 1024);
	assert_int_equal(c->budget.model_calls, 200);
	assert_int_equal(c->budget.tool_calls_per_turn, 32);
	assert_int_equal(c->budget.subagents, 16);
	assert_int_equal(c->budget.depth, 2);
	assert_int_equal(c->budget.seconds, 3600);
	assert_int_equal(c->budget.stored_bytes, 64 * 1024 * 1024);
	assert_int_equal(c->workdir_roots.n, 0); /* workdir is off */
	assert_null(c->state_path);
	assert_int_equal(c->nconfigs, 1);
	assert_string_equal(c->configs[0].name, "default");
	assert_int_equal(c->configs[0].n, 0);
	assert_false(c->configs[0].attach_all);
	assert_int_equal(c->warnings.n, 0);
	config_free(c);
}

/* A file with no settings is refused, so an editor's half-written or
 * emptied file cannot silently drop every configuration; "{}" is the way
 * to ask for every default. */
static void test_S9_empty_file_is_refused(void **state)
{
	(void)state;
	const char *texts[] = {"", "# only a comment\n", "\n  \n# a\n  # b\n",
			       "---\n", "~\n", "--- # c\n...\n"};
	for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
		char *err = parse_err(texts[i]);
		assert_prefix(err, "config.yaml: the file holds no settings");
		assert_contains(err, "write {}");
		free(err);
	}
	struct config *c = parse_ok("{}\n");
	assert_int_equal(c->nconfigs, 0);
	assert_int_equal(c->max_bytes, 24000);
	assert_builtin_tools(&c->registered_tools);
	config_free(c);
	c = parse_ok("# settings\n{}  # every default\n");
	assert_int_equal(c->nconfigs, 0);
	config_free(c);
	c = parse_ok("tools:\n  approval: [bash]\n");
	assert_int_equal(c->nconfigs, 0);
	config_free(c);
}

static void test_S9_registered_empty_list_registers_nothing(void **state)
{
	(void)state;
	struct config *c = parse_ok("tools:\n  registered: []\n");
	assert_int_equal(c->registered_tools.n, 0);
	assert_false(config_tool_registered(c, "bash"));
	config_free(c);
	c = parse_ok("tools:\n  registered: [READ, bash]\n");
	assert_true(config_tool_registered(c, "read"));
	assert_true(config_tool_registered(c, "bash"));
	assert_false(config_tool_registered(c, "write"));
	config_free(c);
}

static void test_S9_model_command_string_splits_on_whitespace(void **state)
{
	(void)state;
	struct config *c = parse_ok("model:\n  provider: command\n"
				    "  command: \"  bin/model  --x\t y \"\n");
	assert_int_equal(c->model.command.n, 3);
	assert_string_equal(c->model.command.items[0], "/base/bin/model");
	assert_string_equal(c->model.command.items[1], "--x");
	assert_string_equal(c->model.command.items[2], "y");
	config_free(c);
	/* No slash: a program looked up on PATH, left alone. */
	c = parse_ok("model:\n  provider: command\n  command: python3 ./m.py\n");
	assert_string_equal(c->model.command.items[0], "python3");
	assert_string_equal(c->model.command.items[1], "./m.py");
	config_free(c);
}

static void test_S9_openai_provider_reads_url(void **state)
{
	(void)state;
	struct config *c = parse_ok("model:\n  provider: openai\n"
				    "  base_url: https://api.example.com/v1\n");
	assert_string_equal(c->model.provider, "openai");
	assert_string_equal(c->model.base_url, "https://api.example.com/v1");
	assert_null(c->model.model);
	config_free(c);
}


/* model.stream (default on) and runs.keep (default: keep every run). */
static void test_S9_model_stream_and_runs_keep(void **state)
{
	(void)state;
	struct config *c = parse_ok("model:\n  provider: echo\n");
	assert_false(c->model.stream_off);
	assert_true(c->keep.days == 0 && c->keep.count == 0);
	config_free(c);
	c = parse_ok("model:\n  provider: echo\n  stream: false\n"
		     "runs:\n  keep: {days: 0.5, count: 10}\n");
	assert_true(c->model.stream_off);
	assert_true(c->keep.days == 0.5);
	assert_int_equal(c->keep.count, 10);
	config_free(c);
	const char *bad[] = { "runs:\n  keep: {days: 0}\n", "runs:\n  keep: {days: soon}\n",
			      "runs:\n  keep: {days: -2}\n", "runs:\n  keep: {count: 0}\n",
			      "runs:\n  keep: [30]\n", "model:\n  stream: maybe\n" };
	const char *key[] = { "runs.keep.days", "runs.keep.days", "runs.keep.days",
			      "runs.keep.count", "runs.keep", "model.stream" };
	for (size_t i = 0; i < 6; i++) {
		char *err = parse_err(bad[i]);
		assert_non_null(strstr(err, key[i]));
		free(err);
	}
}

/* ---- paths ------------------------------------------------------------- */

static void test_S9_relative_paths_resolve_against_config_dir(void **state)
{
	struct tmp *t = *state;
	write_file(t->dir, "etc/config.yaml",
		   "sources:\n"
		   "  - path: skills\n"
		   "  - path: ./a/../b//c/.\n"
		   "  - path: ../shared\n"
		   "state: db/state.db\n"
		   "model:\n"
		   "  provider: command\n"
		   "  command: [../bin/model]\n");
	char cfg[512], want[600];
	snprintf(cfg, sizeof cfg, "%s/etc/config.yaml", t->dir);

	/* Load through a relative path from another directory. */
	char *old = getcwd(NULL, 0);
	assert_non_null(old);
	assert_int_equal(chdir(t->dir), 0);
	struct config *c = NULL;
	char *err = NULL;
	int rc = config_load("etc/config.yaml", &c, &err);
	assert_int_equal(chdir(old), 0);
	free(old);
	if (rc != 0)
		fail_msg("load failed: %s", err);

	assert_string_equal(c->path, cfg);
	snprintf(want, sizeof want, "%s/etc", t->dir);
	assert_string_equal(c->base_dir, want);
	assert_int_equal(c->nsources, 3);
	snprintf(want, sizeof want, "%s/etc/skills", t->dir);
	assert_string_equal(c->sources[0].path, want);
	snprintf(want, sizeof want, "%s/etc/b/c", t->dir);
	assert_string_equal(c->sources[1].path, want);
	snprintf(want, sizeof want, "%s/shared", t->dir);
	assert_string_equal(c->sources[2].path, want);
	snprintf(want, sizeof want, "%s/etc/db/state.db", t->dir);
	assert_string_equal(c->state_path, want);
	snprintf(want, sizeof want, "%s/bin/model", t->dir);
	assert_string_equal(c->model.command.items[0], want);
	config_free(c);
}

static void test_S9_load_missing_file_names_path(void **state)
{
	struct tmp *t = *state;
	char p[512];
	snprintf(p, sizeof p, "%s/nope.yaml", t->dir);
	struct config *c = (struct config *)1;
	char *err = NULL;
	assert_int_equal(config_load(p, &c, &err), -1);
	assert_null(c);
	assert_non_null(err);
	assert_prefix(err, p);
	assert_contains(err, strerror(ENOENT));
	free(err);
}

/* A FIFO in the config file's place is refused at once: opening it for
 * reading would wait for a writer that never comes (the watcher thread
 * reloads the config, and a shutdown would then wait for it forever). */
static void test_S9_load_refuses_fifo_without_waiting(void **state)
{
	struct tmp *t = *state;
	char p[512];
	snprintf(p, sizeof p, "%s/fifo.yaml", t->dir);
	assert_int_equal(mkfifo(p, 0644), 0);
	struct config *c = (struct config *)1;
	char *err = NULL;
	alarm(10); /* a blocked open ends the test instead of hanging it */
	assert_int_equal(config_load(p, &c, &err), -1);
	alarm(0);
	assert_null(c);
	assert_non_null(err);
	assert_prefix(err, p);
	assert_contains(err, "not a regular file");
	free(err);
}

static void test_S9_load_reports_errors_with_file_name(void **state)
{
	struct tmp *t = *state;
	write_file(t->dir, "bad.yaml", "runs:\n  workers: 0\n");
	char p[512], want[600];
	snprintf(p, sizeof p, "%s/bad.yaml", t->dir);
	struct config *c = NULL;
	char *err = NULL;
	assert_int_equal(config_load(p, &c, &err), -1);
	snprintf(want, sizeof want, "%s:2: runs.workers: ", p);
	assert_prefix(err, want);
	free(err);
}

static void test_S9_load_refuses_empty_file(void **state)
{
	struct tmp *t = *state;
	write_file(t->dir, "empty.yaml", "# nothing yet\n");
	char p[512];
	snprintf(p, sizeof p, "%s/empty.yaml", t->dir);
	struct config *c = (struct config *)1;
	char *err = NULL;
	assert_int_equal(config_load(p, &c, &err), -1);
	assert_null(c);
	assert_prefix(err, p);
	assert_contains(err, "holds no settings");
	free(err);
}

/* ---- bounded input ----------------------------------------------------- */

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* n copies of unit, then tail. */
static char *repeat(const char *unit, size_t n, const char *tail)
{
	size_t u = strlen(unit), t = strlen(tail);
	char *s = malloc(u * n + t + 1);
	assert_non_null(s);
	for (size_t i = 0; i < n; i++)
		memcpy(s + i * u, unit, u);
	memcpy(s + u * n, tail, t + 1);
	return s;
}

/* 100,000 nested '[' (and '{', and block sequences "- - - ...") are
 * refused with the bound named, in well under 100 ms: the best of three
 * tries, so a stall of a loaded machine is not taken for the parser's cost
 * (the document loader took seconds, growing with the square of the
 * depth). */
static void test_nesting_is_refused_fast(void **state)
{
	(void)state;
	const char *units[] = {"[", "{", "- ", "a: [", "{b: "};
	for (size_t u = 0; u < sizeof units / sizeof *units; u++) {
		char *text = repeat(units[u], 100000, "x\n");
		double best = 1e9;
		for (int i = 0; i < 3; i++) {
			struct config *c = (struct config *)1;
			char *err = NULL;
			double t0 = now_ms();
			int rc = config_parse(text, strlen(text), "config.yaml", "/base",
					      &c, &err);
			double dt = now_ms() - t0;
			best = dt < best ? dt : best;
			assert_int_equal(rc, -1);
			assert_null(c);
			assert_prefix(err, "config.yaml:1: nested deeper than 64 levels");
			assert_contains(err, "refusing the config file");
			free(err);
		}
		if (best >= 100)
			fail_msg("'%s' x 100000 took %.1f ms (best of 3)", units[u], best);
		free(text);
	}
}

static void test_nesting_within_the_bound_is_read(void **state)
{
	(void)state;
	/* The top mapping and 63 sequences: 64 levels, read (an unknown key
	 * is a warning); one more is refused. */
	char *text = repeat("[", 63, "");
	struct buf b = {0};
	assert_int_equal(buf_printf(&b, "extra: %s1", text), 0);
	for (int i = 0; i < 63; i++)
		assert_int_equal(buf_puts(&b, "]"), 0);
	assert_int_equal(buf_puts(&b, "\n"), 0);
	struct config *c = parse_ok(b.data);
	assert_true(has_warning(c, "extra"));
	config_free(c);
	buf_free(&b);
	assert_int_equal(buf_printf(&b, "extra: [%s1", text), 0);
	for (int i = 0; i < 64; i++)
		assert_int_equal(buf_puts(&b, "]"), 0);
	char *err = parse_err(b.data);
	assert_contains(err, "nested deeper than 64 levels");
	free(err);
	buf_free(&b);
	free(text);
}

/* Aliases that repeat each other ("billion laughs") are refused before
 * anything walks the document. */
static void test_alias_bomb_is_refused(void **state)
{
	(void)state;
	struct buf b = {0};
	assert_int_equal(buf_puts(&b, "a0: &a0 [\"lol lol lol lol lol\"]\n"), 0);
	for (int i = 1; i < 20; i++)
		assert_int_equal(buf_printf(&b, "a%d: &a%d [*a%d, *a%d, *a%d, *a%d, "
					    "*a%d, *a%d, *a%d, *a%d]\n", i, i, i - 1,
					    i - 1, i - 1, i - 1, i - 1, i - 1, i - 1,
					    i - 1), 0);
	assert_int_equal(buf_puts(&b, "skills: {disabled: *a19}\n"), 0);
	double t0 = now_ms();
	char *err = parse_err(b.data);
	double dt = now_ms() - t0;
	assert_prefix(err, "config.yaml:");
	if (!strstr(err, "aliases repeat") && !strstr(err, "values (counting"))
		fail_msg("unexpected message: %s", err);
	assert_true(dt < 5000); /* refused, not expanded */
	free(err);
	buf_free(&b);
}

static void test_text_over_the_size_cap_is_refused(void **state)
{
	(void)state;
	size_t n = 4 * 1024 * 1024 + 1;
	char *text = malloc(n + 1);
	assert_non_null(text);
	memset(text, '#', n);
	text[n] = '\0';
	struct config *c = (struct config *)1;
	char *err = NULL;
	assert_int_equal(config_parse(text, n, "config.yaml", "/base", &c, &err), -1);
	assert_null(c);
	assert_prefix(err, "config.yaml: 4194305 bytes, over the limit of 4194304");
	free(err);
	free(text);
}

/* ---- errors name file, line and key ------------------------------------ */

static void test_S9_error_bad_execution_mode(void **state)
{
	(void)state;
	char *err = parse_err("skills:\n  maxBytes: 100\n  execution_mode: fast\n");
	assert_string_equal(err, "config.yaml:3: skills.execution_mode: "
				 "expected 'inline' or 'subagent', got 'fast'");
	free(err);
}

static void test_S9_error_workers_as_string(void **state)
{
	(void)state;
	char *err = parse_err("# comment\nruns:\n  workers: four\n");
	assert_prefix(err, "config.yaml:3: runs.workers: ");
	assert_contains(err, "'four'");
	free(err);
	err = parse_err("runs:\n  workers: 65\n");
	assert_prefix(err, "config.yaml:2: runs.workers: ");
	free(err);
}

static void test_S9_error_unknown_registered_tool(void **state)
{
	(void)state;
	char *err = parse_err("tools:\n  registered:\n    - bash\n    - telnet\n");
	assert_prefix(err, "config.yaml:4: tools.registered[1]: ");
	assert_contains(err, "'telnet'");
	free(err);
}

static void test_S9_error_approval_tool_not_registered(void **state)
{
	(void)state;
	char *err = parse_err("tools:\n  approval: [bash]\n  registered: [read]\n");
	assert_prefix(err, "config.yaml:2: tools.approval[0]: ");
	assert_contains(err, "'bash'");
	free(err);
}

static void test_S9_error_bad_configuration_name(void **state)
{
	(void)state;
	const char *bad[] = {"\"..\"", "\".\"", "a/b", "\"has space\"",
			     "x12345678901234567890123456789012345678901234567890123456789012345"};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		char text[256];
		snprintf(text, sizeof text, "configurations:\n  ok: {}\n  %s:\n    skills: []\n",
			 bad[i]);
		char *err = parse_err(text);
		assert_prefix(err, "config.yaml:3: configurations.");
		assert_contains(err, "configuration name");
		free(err);
	}
	/* The whole allowed alphabet, at the length limit. */
	struct config *c = parse_ok("configurations:\n  A-z_0.9:\n  "
		"x123456789012345678901234567890123456789012345678901234567890123:\n");
	assert_int_equal(c->nconfigs, 2);
	config_free(c);
}

/* configs/ERROR is the reload-error file (section 8), so a configuration of
 * that name could never be seen: it is refused like any other bad name. */
static void test_S9_error_configuration_named_ERROR_is_reserved(void **state)
{
	(void)state;
	char *err = parse_err("configurations:\n  default: {skills: []}\n"
			      "  ERROR: {skills: []}\n");
	assert_prefix(err, "config.yaml:3: configurations.ERROR: ");
	assert_contains(err, "bad configuration name 'ERROR': it is reserved");
	free(err);
	/* Only the exact name is reserved. */
	struct config *c = parse_ok("configurations:\n  Error: {}\n  ERRORS: {}\n");
	assert_int_equal(c->nconfigs, 2);
	config_free(c);
}

static void test_S9_error_sources_not_a_list(void **state)
{
	(void)state;
	char *err = parse_err("\nsources: skills\n");
	assert_prefix(err, "config.yaml:2: sources: expected a list");
	free(err);
	err = parse_err("sources:\n  - trust: verified\n");
	assert_prefix(err, "config.yaml:2: sources[0].path: missing");
	free(err);
	err = parse_err("sources:\n  - path: s\n    writable: sometimes\n");
	assert_prefix(err, "config.yaml:3: sources[0].writable: expected true or false");
	free(err);
	err = parse_err("sources:\n  - path: s\n    recursive: deep\n");
	assert_prefix(err, "config.yaml:3: sources[0].recursive: expected true or false");
	free(err);
	struct config *c = parse_ok("sources:\n  - path: s\n");
	assert_false(c->sources[0].writable);
	assert_false(c->sources[0].recursive);
	assert_null(config_learn_dir(c));
	config_free(c);
}

static void test_S9_error_document_not_a_mapping(void **state)
{
	(void)state;
	char *err = parse_err("- a\n- b\n");
	assert_prefix(err, "config.yaml:1: expected a mapping");
	free(err);
	err = parse_err("\n\njust text\n");
	assert_prefix(err, "config.yaml:3: expected a mapping");
	free(err);
}

static void test_S9_error_yaml_syntax(void **state)
{
	(void)state;
	char *err = parse_err("runs:\n  workers: 4\n  bad: [1, 2\n");
	assert_prefix(err, "config.yaml:");
	assert_contains(err, "YAML syntax error");
	/* The unclosed list is noticed where the input ends; the message also
	 * names the line where it was opened. */
	int line = atoi(err + strlen("config.yaml:"));
	assert_true(line >= 3 && line <= 4);
	assert_contains(err, "line 3");
	free(err);
	err = parse_err("skills:\n\tmaxBytes: 1\n");
	assert_prefix(err, "config.yaml:2: YAML syntax error");
	free(err);
}

static void test_S9_error_min_trust_level_unknown_is_an_error(void **state)
{
	(void)state;
	char *err = parse_err("skills:\n  minTrustLevel: trusted\n");
	assert_prefix(err, "config.yaml:2: skills.minTrustLevel: ");
	assert_contains(err, "'trusted'");
	free(err);
}

static void test_S9_error_provider_requirements(void **state)
{
	(void)state;
	char *err = parse_err("model:\n  provider: command\n");
	assert_prefix(err, "config.yaml:2: model.command: ");
	free(err);
	err = parse_err("model:\n  model: m\n  provider: openai\n");
	assert_prefix(err, "config.yaml:3: model.base_url: ");
	free(err);
	err = parse_err("model:\n  provider: magic\n");
	assert_prefix(err, "config.yaml:2: model.provider: ");
	free(err);
	err = parse_err("model:\n  timeout: 0\n");
	assert_prefix(err, "config.yaml:2: model.timeout: ");
	free(err);
}

static void test_S9_error_attachment_shapes(void **state)
{
	(void)state;
	char *err = parse_err("configurations:\n  d:\n    skills:\n      - {enabled: true}\n");
	assert_prefix(err, "config.yaml:4: configurations.d.skills[0].name: ");
	free(err);
	err = parse_err("configurations:\n  d:\n    skills:\n      - {name: x, enabled: maybe}\n");
	assert_prefix(err, "config.yaml:4: configurations.d.skills[0].enabled: ");
	free(err);
	err = parse_err("configurations:\n  d:\n    skills:\n      - [x]\n");
	assert_prefix(err, "config.yaml:4: configurations.d.skills[0]: ");
	free(err);
	err = parse_err("configurations:\n  d: {}\n  d: {}\n");
	assert_prefix(err, "config.yaml:3: configurations.d: ");
	free(err);
}

static void test_S9_error_known_key_twice(void **state)
{
	(void)state;
	char *err = parse_err("runs:\n  workers: 2\n  workers: 3\n");
	assert_prefix(err, "config.yaml:3: runs.workers: ");
	free(err);
}

/* ---- warnings, fallbacks, trust ---------------------------------------- */

static void test_S9_unknown_key_is_only_a_warning(void **state)
{
	(void)state;
	struct config *c = parse_ok("colour: blue\n"
				    "runs:\n  workers: 2\n  speed: 9\n"
				    "configurations:\n  d:\n    note: x\n    skills: [a]\n");
	assert_int_equal(c->workers, 2);
	assert_int_equal(c->nconfigs, 1);
	assert_int_equal(c->configs[0].n, 1);
	assert_int_equal(c->warnings.n, 3);
	assert_string_equal(c->warnings.items[0], "config.yaml:1: unknown key 'colour'");
	assert_string_equal(c->warnings.items[1], "config.yaml:4: unknown key 'runs.speed'");
	assert_string_equal(c->warnings.items[2],
			    "config.yaml:7: unknown key 'configurations.d.note'");
	config_free(c);
}

static void check_max_bytes_fallback(const char *value, bool warned)
{
	char text[128];
	snprintf(text, sizeof text, "skills:\n  maxBytes: %s\n  listingMaxBytes: %s\n",
		 value, value);
	struct config *c = parse_ok(text);
	assert_int_equal(c->max_bytes, 24000);
	assert_int_equal(c->listing_max_bytes, 4096);
	assert_int_equal(has_warning(c, "config.yaml:2: skills.maxBytes"), warned);
	assert_int_equal(has_warning(c, "config.yaml:3: skills.listingMaxBytes"), warned);
	assert_int_equal(c->warnings.n, warned ? 2 : 0);
	config_free(c);
}

static void test_S3_max_bytes_zero_falls_back(void **state)
{
	(void)state;
	check_max_bytes_fallback("0", true);
}

static void test_S3_max_bytes_negative_falls_back(void **state)
{
	(void)state;
	check_max_bytes_fallback("-5", true);
}

static void test_S3_max_bytes_non_numeric_falls_back(void **state)
{
	(void)state;
	check_max_bytes_fallback("\"abc\"", true);
	check_max_bytes_fallback("12kb", true);
}

static void test_S3_max_bytes_empty_falls_back(void **state)
{
	(void)state;
	check_max_bytes_fallback("", false);
	check_max_bytes_fallback("\"\"", false);
}

static void test_S3_max_bytes_positive_is_kept(void **state)
{
	(void)state;
	struct config *c = parse_ok("skills:\n  maxBytes: 1\n");
	assert_int_equal(c->max_bytes, 1);
	assert_int_equal(c->warnings.n, 0);
	config_free(c);
}

static void test_D2_unknown_trust_level_reads_as_untrusted(void **state)
{
	(void)state;
	struct config *c = parse_ok("sources:\n"
				    "  - path: a\n    trust: verified\n"
				    "  - path: b\n    trust: trusted\n"
				    "  - path: c\n"
				    "skills:\n  trust:\n    x: superuser\n");
	assert_int_equal(c->nsources, 3);
	assert_int_equal(c->sources[0].trust, TRUST_VERIFIED);
	assert_int_equal(c->sources[1].trust, TRUST_UNTRUSTED);
	assert_int_equal(c->sources[2].trust, TRUST_UNTRUSTED); /* missing */
	assert_int_equal(config_skill_trust(c, "x", TRUST_FIRST_PARTY), TRUST_UNTRUSTED);
	assert_int_equal(c->warnings.n, 2);
	assert_true(has_warning(c, "config.yaml:5: sources[1].trust: unknown trust level 'trusted'"));
	assert_true(has_warning(c, "config.yaml:9: skills.trust.x: unknown trust level"));
	config_free(c);
}

static void test_D2_per_skill_trust_override_wins(void **state)
{
	(void)state;
	struct config *c = parse_ok("skills:\n  trust: {pdf: community, tool: first_party}\n");
	assert_int_equal(config_skill_trust(c, "pdf", TRUST_FIRST_PARTY), TRUST_COMMUNITY);
	assert_int_equal(config_skill_trust(c, "tool", TRUST_UNTRUSTED), TRUST_FIRST_PARTY);
	assert_int_equal(config_skill_trust(c, "other", TRUST_VERIFIED), TRUST_VERIFIED);
	config_free(c);
}

static void test_S3_attachment_can_be_disabled(void **state)
{
	(void)state;
	struct config *c = parse_ok("configurations:\n  d:\n    skills:\n"
				    "      - {name: review, enabled: false}\n"
				    "      - {name: pdf, enabled: true}\n");
	const struct configuration *d = config_find(c, "d");
	assert_non_null(d);
	assert_int_equal(d->n, 2);
	assert_string_equal(d->att[0].name, "review");
	assert_false(d->att[0].enabled);
	assert_string_equal(d->att[1].name, "pdf");
	assert_true(d->att[1].enabled);
	config_free(c);
}

/* ---- the no-config default --------------------------------------------- */

static void test_S9_default_config_without_file(void **state)
{
	struct tmp *t = *state;
	char *old = getcwd(NULL, 0);
	assert_non_null(old);
	assert_int_equal(chdir(t->dir), 0);
	const char *dirs[] = {"skills", "/abs/more/"};
	struct config *c = config_default(dirs, 2);
	const char *extra[] = {"x/../late"};
	int rc = c ? config_add_sources(c, extra, 1) : -1;
	assert_int_equal(chdir(old), 0);
	free(old);
	assert_non_null(c);
	assert_int_equal(rc, 0);

	char want[600];
	assert_null(c->path);
	assert_int_equal(c->nsources, 3);
	snprintf(want, sizeof want, "%s/skills", t->dir);
	assert_string_equal(c->sources[0].path, want);
	assert_string_equal(c->sources[1].path, "/abs/more");
	snprintf(want, sizeof want, "%s/late", t->dir);
	assert_string_equal(c->sources[2].path, want);
	for (size_t i = 0; i < 3; i++)
		assert_int_equal(c->sources[i].trust, TRUST_FIRST_PARTY);
	assert_builtin_tools(&c->registered_tools);
	assert_int_equal(c->nconfigs, 1);
	assert_string_equal(c->configs[0].name, "default");
	assert_true(c->configs[0].attach_all);
	assert_int_equal(c->configs[0].n, 0);
	assert_int_equal(c->max_bytes, 24000);
	assert_string_equal(c->model.provider, "echo");
	assert_null(c->state_path);
	config_free(c);
}

static void test_S9_add_sources_after_file_sources(void **state)
{
	(void)state;
	struct config *c = parse_ok("sources:\n  - {path: s, trust: community}\n");
	const char *extra[] = {"/cli/dir"};
	assert_int_equal(config_add_sources(c, extra, 1), 0);
	assert_int_equal(c->nsources, 2);
	assert_string_equal(c->sources[0].path, "/base/s");
	assert_int_equal(c->sources[0].trust, TRUST_COMMUNITY);
	assert_string_equal(c->sources[1].path, "/cli/dir");
	assert_int_equal(c->sources[1].trust, TRUST_FIRST_PARTY);
	config_free(c);
}

/* ---- bad input never crashes ------------------------------------------- */

static void test_S9_odd_documents_are_handled(void **state)
{
	(void)state;
	static const char *const texts[] = {
		"a: &x [*x]\n",
		"configurations: &c {d: {skills: *c}}\n",
		"skills: {trust: {[a]: b}}\n",
		"? [complex]\n: key\n",
		"sources: [~, 1]\n",
		"runs: {workers: 99999999999999999999999}\n",
		"tools: {registered: [[bash]]}\n",
		"configurations: {d: {skills: [{name: ''}]}}\n",
		"\xff\xfe bad utf-8\n",
		"x: 1\n---\ny: 2\n",
		"x: 1\n---\n[unclosed\n",
		"!!binary aGk=\n",
		"{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{\n",
	};
	for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
		struct config *c = NULL;
		char *err = NULL;
		int rc = config_parse(texts[i], strlen(texts[i]), "f.yaml", "/b", &c, &err);
		if (rc == 0) {
			assert_non_null(c);
			assert_null(err);
			config_free(c);
		} else {
			assert_int_equal(rc, -1);
			assert_null(c);
			assert_non_null(err);
			assert_prefix(err, "f.yaml:");
			free(err);
		}
	}
	/* An embedded NUL in the input is refused, not truncated. */
	static const char nul[] = "state: a\0b\n";
	struct config *c = NULL;
	char *err = NULL;
	assert_int_equal(config_parse(nul, sizeof nul - 1, "f.yaml", "/b", &c, &err), -1);
	assert_prefix(err, "f.yaml:1:");
	free(err);
}

/* runs.budget: each key alone, the others keeping their defaults. */
static void test_S7_budget_keys_one_at_a_time(void **state)
{
	(void)state;
	struct config *c = parse_ok("runs:\n  budget:\n    model_calls: 7\n");
	assert_int_equal(c->budget.model_calls, 7);
	assert_int_equal(c->budget.tool_calls_per_turn, CONFIG_DEFAULT_BUDGET_TOOL_CALLS_PER_TURN);
	assert_int_equal(c->budget.stored_bytes, CONFIG_DEFAULT_BUDGET_STORED_BYTES);
	config_free(c);
	c = parse_ok("runs: {budget: {tool_calls_per_turn: 1}}\n");
	assert_int_equal(c->budget.tool_calls_per_turn, 1);
	assert_int_equal(c->budget.model_calls, CONFIG_DEFAULT_BUDGET_MODEL_CALLS);
	config_free(c);
	c = parse_ok("runs: {budget: {subagents: 100}}\n");
	assert_int_equal(c->budget.subagents, 100);
	config_free(c);
	c = parse_ok("runs: {budget: {depth: 5}}\n");
	assert_int_equal(c->budget.depth, 5);
	assert_int_equal(c->budget.subagents, CONFIG_DEFAULT_BUDGET_SUBAGENTS);
	config_free(c);
	c = parse_ok("runs: {budget: {seconds: 86400}}\n");
	assert_int_equal(c->budget.seconds, 86400);
	assert_int_equal(c->budget.depth, CONFIG_DEFAULT_BUDGET_DEPTH);
	config_free(c);
	c = parse_ok("runs: {budget: {stored_bytes: 1000}}\n");
	assert_int_equal(c->budget.stored_bytes, 1000);
	assert_int_equal(c->budget.seconds, CONFIG_DEFAULT_BUDGET_SECONDS);
	config_free(c);
	c = parse_ok("runs: {budget: {stored_bytes: \"1 GiB\"}}\n");
	assert_int_equal(c->budget.stored_bytes, (int64_t)1 << 30);
	config_free(c);
	/* null reads as absent; an unknown key is a warning */
	c = parse_ok("runs:\n  budget:\n    seconds:\n    tokens: 5\n");
	assert_int_equal(c->budget.seconds, CONFIG_DEFAULT_BUDGET_SECONDS);
	assert_true(has_warning(c, "config.yaml:4: unknown key 'runs.budget.tokens'"));
	config_free(c);
	c = parse_ok("runs: {budget: }\n");
	assert_int_equal(c->budget.model_calls, CONFIG_DEFAULT_BUDGET_MODEL_CALLS);
	config_free(c);
}

/* A bad budget is an error naming the key and its line. */
static void test_S7_budget_bad_values_name_the_key(void **state)
{
	(void)state;
	static const struct {
		const char *text, *prefix, *detail;
	} bad[] = {
		{ "runs:\n  budget:\n    model_calls: 0\n",
		  "config.yaml:3: runs.budget.model_calls: ", "got 0" },
		{ "runs:\n  budget:\n    tool_calls_per_turn: -1\n",
		  "config.yaml:3: runs.budget.tool_calls_per_turn: ", "got -1" },
		{ "runs:\n  budget:\n    subagents: many\n",
		  "config.yaml:3: runs.budget.subagents: ", "'many'" },
		{ "runs:\n  budget:\n    depth: 1.5\n",
		  "config.yaml:3: runs.budget.depth: ", "'1.5'" },
		{ "runs:\n  budget:\n    seconds: [1]\n",
		  "config.yaml:3: runs.budget.seconds: ", "a list" },
		{ "runs:\n  budget:\n    seconds: 99999999999999999999\n",
		  "config.yaml:3: runs.budget.seconds: ", "integer" },
		{ "runs:\n  budget:\n    stored_bytes: 64MB\n",
		  "config.yaml:3: runs.budget.stored_bytes: ", "'64MB'" },
		{ "runs:\n  budget:\n    stored_bytes: 0\n",
		  "config.yaml:3: runs.budget.stored_bytes: ", "KiB, MiB" },
		{ "runs:\n  budget:\n    stored_bytes: -5\n",
		  "config.yaml:3: runs.budget.stored_bytes: ", "'-5'" },
		{ "runs:\n  budget:\n    stored_bytes: {a: 1}\n",
		  "config.yaml:3: runs.budget.stored_bytes: ", "a mapping" },
		{ "runs:\n  budget:\n    stored_bytes: 9999999TiB\n",
		  "config.yaml:3: runs.budget.stored_bytes: ", "'9999999TiB'" },
		{ "runs:\n  budget: 200\n", "config.yaml:2: runs.budget: ", "a mapping" },
		{ "runs:\n  budget:\n    depth: 1\n    depth: 2\n",
		  "config.yaml:4: runs.budget.depth: ", "twice" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		char *err = parse_err(bad[i].text);
		assert_prefix(err, bad[i].prefix);
		assert_contains(err, bad[i].detail);
		free(err);
	}
}

static void test_S9_second_document_is_a_warning(void **state)
{
	(void)state;
	struct config *c = parse_ok("runs: {workers: 2}\n---\nruns: {workers: 3}\n");
	assert_int_equal(c->workers, 2);
	assert_true(has_warning(c, "config.yaml:3: only the first YAML document"));
	config_free(c);
}

/* Issue "Confinement": tools.sandbox, sandbox_program, network, user, env
 * and limits. */
static void test_S9_tools_sandbox_keys(void **state)
{
	(void)state;
	struct config *c = parse_ok("configurations:\n  default:\n");
	assert_int_equal(c->tools.sandbox, SANDBOX_BWRAP);
	assert_null(c->tools.sandbox_program);
	assert_false(c->tools.network);
	assert_null(c->tools.user);
	assert_int_equal(config_tool_timeout_ms(c, "bash"), CONFIG_DEFAULT_TOOL_TIMEOUT * 1000);
	assert_int_equal(config_tool_output_max(c, "bash"), (size_t)CONFIG_DEFAULT_TOOL_OUTPUT);
	config_free(c);
	c = parse_ok("tools:\n  sandbox: none\n  sandbox_program: bin/bwrap\n"
		     "  network: true\n  user: toolrunner\n"
		     "  env: {GIT_PAGER: cat, EMPTY: ''}\n"
		     "  limits: {Bash: {timeout: 5, output_bytes: 1000}, read: {}}\n");
	assert_int_equal(c->tools.sandbox, SANDBOX_NONE);
	assert_string_equal(c->tools.sandbox_program, "/base/bin/bwrap");
	assert_true(c->tools.network);
	assert_string_equal(c->tools.user, "toolrunner");
	assert_int_equal(c->tools.env.n, 2);
	assert_string_equal(c->tools.env.items[0], "GIT_PAGER=cat");
	assert_string_equal(c->tools.env.items[1], "EMPTY=");
	assert_int_equal(config_tool_timeout_ms(c, "bash"), 5000);
	assert_int_equal(config_tool_output_max(c, "bash"), 1000);
	assert_int_equal(config_tool_timeout_ms(c, "read"), CONFIG_DEFAULT_TOOL_TIMEOUT * 1000);
	config_free(c);
	const char *bad[][2] = {
		{"tools:\n  sandbox: docker\n", "tools.sandbox: expected 'bwrap' or 'none'"},
		{"tools:\n  network: maybe\n", "tools.network: expected true or false"},
		{"tools:\n  limits: {telnet: {timeout: 1}}\n", "tools.limits.telnet: unknown tool"},
		{"tools:\n  limits: {bash: {timeout: 0}}\n", "tools.limits.bash.timeout: expected an integer"},
		{"tools:\n  limits: {bash: {output_bytes: x}}\n", "tools.limits.bash.output_bytes: expected an integer"},
		{"tools:\n  env: {PATH: /x}\n", "tools.env.PATH: PATH is set by skillfs"},
		{"tools:\n  env: {'A-B': x}\n", "tools.env.A-B: not a variable name"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		char *err = parse_err(bad[i][0]);
		if (!strstr(err, bad[i][1]))
			fail_msg("%s: got '%s', want '%s'", bad[i][0], err, bad[i][1]);
		free(err);
	}
}

/* tools.webfetch: allow_private, and the caps as integers or sizes. */
static void test_S9_tools_webfetch_keys(void **state)
{
	(void)state;
	struct config *c = parse_ok("configurations:\n  default:\n");
	assert_false(c->tools.webfetch.allow_private);
	assert_int_equal(c->tools.webfetch.max_text, 0); /* the defaults */
	assert_int_equal(c->tools.webfetch.max_download, 0);
	config_free(c);
	c = parse_ok("tools:\n  webfetch: {allow_private: true, max_text: 4096, "
		     "max_download: 2MiB}\n");
	assert_true(c->tools.webfetch.allow_private);
	assert_int_equal(c->tools.webfetch.max_text, 4096);
	assert_int_equal(c->tools.webfetch.max_download, 2 << 20);
	config_free(c);
	c = parse_ok("tools:\n  webfetch: {max_text: \"1 KiB\", extra: 1}\n");
	assert_int_equal(c->tools.webfetch.max_text, 1024);
	assert_true(has_warning(c, "unknown key 'tools.webfetch.extra'"));
	config_free(c);
	const char *bad[][2] = {
		{"tools:\n  webfetch: {allow_private: sometimes}\n",
		 "tools.webfetch.allow_private: expected true or false"},
		{"tools:\n  webfetch: {max_text: 0}\n", "tools.webfetch.max_text: expected a positive"},
		{"tools:\n  webfetch: {max_text: 1MB}\n", "tools.webfetch.max_text: expected a positive"},
		{"tools:\n  webfetch: {max_download: [1]}\n",
		 "tools.webfetch.max_download: expected a size"},
		{"tools:\n  webfetch: {max_download: 2GiB}\n",
		 "tools.webfetch.max_download: expected a positive number of bytes of at most 1073741824"},
		{"tools:\n  webfetch: [allow_private]\n", "tools.webfetch: expected a mapping"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		char *err = parse_err(bad[i][0]);
		if (!strstr(err, bad[i][1]))
			fail_msg("%s: got '%s', want '%s'", bad[i][0], err, bad[i][1]);
		free(err);
	}
}

/* An unavailable tool leaves the registered list (never offered, never
 * counted by policy all) and tools.approval, and says why. */
static void test_S9_unavailable_tool_leaves_registered(void **state)
{
	(void)state;
	struct config *c = parse_ok("tools:\n  registered: [bash, read]\n  approval: [bash]\n");
	assert_int_equal(config_tool_unavailable(c, "bash", "no sandbox"), 0);
	assert_false(strlist_has(&c->registered_tools, "bash"));
	assert_false(strlist_has(&c->approval_tools, "bash"));
	assert_true(strlist_has(&c->registered_tools, "read"));
	assert_string_equal(config_tool_unavailable_why(c, "bash"), "no sandbox");
	assert_null(config_tool_unavailable_why(c, "read"));
	assert_int_equal(config_tool_unavailable(c, "python", "x"), 0); /* not registered */
	assert_null(config_tool_unavailable_why(c, "python"));
	config_free(c);
}

/* tools.terminal.commands: the terminal's programs, by default the
 * documented list; bare names only. */
static void test_tools_terminal_commands(void **state)
{
	(void)state;
	struct config *c = parse_ok("tools: {}\n");
	struct buf b = {0};
	for (size_t i = 0; i < c->tools.terminal_commands.n; i++)
		assert_int_equal(buf_printf(&b, "%s%s", i ? " " : "",
					    c->tools.terminal_commands.items[i]), 0);
	assert_string_equal(b.data, "ls cat head tail wc grep find sort diff git");
	assert_string_equal(b.data, CONFIG_DEFAULT_TERMINAL_COMMANDS);
	buf_free(&b);
	config_free(c);
	c = config_default(NULL, 0);
	assert_int_equal(c->tools.terminal_commands.n, 10);
	config_free(c);
	c = parse_ok("tools:\n  terminal: {commands: [git, python3.11, g++, git]}\n");
	assert_int_equal(c->tools.terminal_commands.n, 3);
	assert_string_equal(c->tools.terminal_commands.items[0], "git");
	assert_string_equal(c->tools.terminal_commands.items[1], "python3.11");
	assert_string_equal(c->tools.terminal_commands.items[2], "g++");
	assert_true(has_warning(c, "tools.terminal.commands[3]: 'git' listed twice"));
	config_free(c);
	c = parse_ok("tools:\n  terminal: {commands: []}\n");
	assert_int_equal(c->tools.terminal_commands.n, 0);
	config_free(c);
	c = parse_ok("tools:\n  terminal: {}\n");
	assert_int_equal(c->tools.terminal_commands.n, 10);
	config_free(c);
	const char *bad[][2] = {
		{"tools:\n  terminal: {commands: [/bin/rm]}\n",
		 "tools.terminal.commands[0]: '/bin/rm' is not a program name"},
		{"tools:\n  terminal: {commands: [ls, 'a b']}\n",
		 "tools.terminal.commands[1]: 'a b' is not a program name"},
		{"tools:\n  terminal: {commands: ['-rf']}\n", "'-rf' is not a program name"},
		{"tools:\n  terminal: {commands: ['..']}\n", "'..' is not a program name"},
		{"tools:\n  terminal: {commands: ['']}\n", "expected a non-empty string"},
		{"tools:\n  terminal: {commands: ls}\n", "tools.terminal.commands: expected a list"},
		{"tools:\n  terminal: [ls]\n", "tools.terminal: expected a mapping"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		char *err = parse_err(bad[i][0]);
		if (!strstr(err, bad[i][1]))
			fail_msg("%s: got '%s', want '%s'", bad[i][0], err, bad[i][1]);
		free(err);
	}
}

/* runs.workdir_roots: absolute, relative ones against the config's
 * directory, normalised, each once; anything but a list of strings is an
 * error naming the key. */
static void test_runs_workdir_roots(void **state)
{
	(void)state;
	struct config *c = parse_ok("runs:\n  workdir_roots: [/srv/projects/, work, "
				    "./work, /srv//projects]\n");
	assert_int_equal(c->workdir_roots.n, 2);
	assert_string_equal(c->workdir_roots.items[0], "/srv/projects");
	assert_string_equal(c->workdir_roots.items[1], "/base/work");
	config_free(c);
	c = parse_ok("runs: {workdir_roots: []}\n");
	assert_int_equal(c->workdir_roots.n, 0);
	config_free(c);
	char *err = parse_err("runs: {workdir_roots: /srv}\n");
	assert_contains(err, "runs.workdir_roots: expected a list");
	free(err);
	err = parse_err("runs: {workdir_roots: [[/srv]]}\n");
	assert_contains(err, "runs.workdir_roots[0]: expected a string");
	free(err);
}

/* ---- issue 19: the tool ceiling, pins, acknowledged skills, audit.keep ---- */

static void test_S9_ceiling_pin_acknowledged_and_audit_keep(void **state)
{
	(void)state;
	struct config *c = parse_ok(
		"sources:\n"
		"  - {path: a, fingerprint: sha256:"
		"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef}\n"
		"  - {path: b}\n"
		"skills: {acknowledged: [wild, other]}\n"
		"audit: {keep: 50}\n"
		"configurations:\n"
		"  capped: {tools: [read, \"Bash(git log:*)\"], skills: [x]}\n"
		"  closed: {tools: []}\n"
		"  open: {skills: [x]}\n");
	assert_string_equal(c->sources[0].fingerprint,
			    "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
	assert_null(c->sources[1].fingerprint);
	assert_true(config_skill_acknowledged(c, "wild"));
	assert_false(config_skill_acknowledged(c, "tame"));
	assert_int_equal(c->audit_keep, 50);
	const struct configuration *cf = config_find(c, "capped");
	assert_true(cf->has_ceiling);
	assert_int_equal(cf->ceiling.n, 2);
	assert_string_equal(cf->ceiling.items[1], "Bash(git log:*)");
	cf = config_find(c, "closed");
	assert_true(cf->has_ceiling); /* an empty ceiling allows no tool */
	assert_int_equal(cf->ceiling.n, 0);
	assert_false(config_find(c, "open")->has_ceiling);
	config_free(c);
	c = parse_ok("{}");
	assert_int_equal(c->audit_keep, CONFIG_DEFAULT_AUDIT_KEEP);
	config_free(c);
}

/* A pin or a ceiling that cannot be read is an error: read as absent, it
 * would load a source unchecked or leave a configuration uncapped. */
static void test_S9_bad_pin_and_ceiling_are_errors(void **state)
{
	(void)state;
	static const char *const pins[] = {
		"sha256:ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef0123456789",
		"sha256:0123", "md5:0123456789abcdef0123456789abcdef", "[x]",
	};
	for (size_t i = 0; i < sizeof pins / sizeof *pins; i++) {
		char text[256];
		snprintf(text, sizeof text, "sources:\n  - path: a\n    fingerprint: %s\n", pins[i]);
		char *err = parse_err(text);
		assert_prefix(err, "config.yaml:3: sources[0].fingerprint: ");
		free(err);
	}
	char *err = parse_err("configurations:\n  c:\n    tools: read\n");
	assert_prefix(err, "config.yaml:3: configurations.c.tools: expected a list");
	free(err);
	err = parse_err("configurations:\n  c: {tools: [read, [bash]]}\n");
	assert_prefix(err, "config.yaml:2: configurations.c.tools[1]: ");
	free(err);
	err = parse_err("audit: {keep: 0}\n");
	assert_prefix(err, "config.yaml:1: audit.keep: ");
	free(err);
}

/* watch.rescan_seconds: 5 by default, 0 (never) allowed, a negative or
 * non-numeric value an error naming the key. */
static void test_watch_rescan_seconds(void **state)
{
	(void)state;
	struct config *c = parse_ok("{}");
	assert_int_equal(c->watch_rescan_seconds, CONFIG_DEFAULT_WATCH_RESCAN);
	assert_int_equal(c->watch_rescan_seconds, 5);
	config_free(c);
	c = parse_ok("watch: {rescan_seconds: 0}\n");
	assert_int_equal(c->watch_rescan_seconds, 0);
	config_free(c);
	c = parse_ok("watch:\n  rescan_seconds: 1\n");
	assert_int_equal(c->watch_rescan_seconds, 1);
	config_free(c);
	const char *dirs[] = { "/nonexistent" };
	c = config_default(dirs, 1);
	assert_non_null(c);
	assert_int_equal(c->watch_rescan_seconds, CONFIG_DEFAULT_WATCH_RESCAN);
	config_free(c);
	char *err = parse_err("watch: {rescan_seconds: -1}\n");
	assert_prefix(err, "config.yaml:1: watch.rescan_seconds: ");
	free(err);
	err = parse_err("watch: {rescan_seconds: soon}\n");
	assert_prefix(err, "config.yaml:1: watch.rescan_seconds: ");
	free(err);
}

int main(void)
{
	const struct CMUnitTest t[] = {
		cmocka_unit_test(test_S9_full_example_reads_every_key),
		cmocka_unit_test(test_S9_absent_keys_take_defaults),
		cmocka_unit_test(test_runs_workdir_roots),
		cmocka_unit_test(test_S9_empty_file_is_refused),
		cmocka_unit_test_setup_teardown(test_S9_load_refuses_empty_file,
						setup_tmp, teardown_tmp),
		cmocka_unit_test(test_nesting_is_refused_fast),
		cmocka_unit_test(test_nesting_within_the_bound_is_read),
		cmocka_unit_test(test_alias_bomb_is_refused),
		cmocka_unit_test(test_text_over_the_size_cap_is_refused),
		cmocka_unit_test(test_S9_registered_empty_list_registers_nothing),
		cmocka_unit_test(test_S9_model_command_string_splits_on_whitespace),
		cmocka_unit_test(test_S9_openai_provider_reads_url),
		cmocka_unit_test(test_S9_model_stream_and_runs_keep),
		cmocka_unit_test_setup_teardown(test_S9_relative_paths_resolve_against_config_dir,
						setup_tmp, teardown_tmp),
		cmocka_unit_test_setup_teardown(test_S9_load_refuses_fifo_without_waiting,
						setup_tmp, teardown_tmp),
		cmocka_unit_test_setup_teardown(test_S9_load_missing_file_names_path,
						setup_tmp, teardown_tmp),
		cmocka_unit_test_setup_teardown(test_S9_load_reports_errors_with_file_name,
						setup_tmp, teardown_tmp),
		cmocka_unit_test(test_S9_error_bad_execution_mode),
		cmocka_unit_test(test_S9_error_workers_as_string),
		cmocka_unit_test(test_S9_error_unknown_registered_tool),
		cmocka_unit_test(test_S9_error_approval_tool_not_registered),
		cmocka_unit_test(test_S9_tools_sandbox_keys),
		cmocka_unit_test(test_S9_tools_webfetch_keys),
		cmocka_unit_test(test_tools_terminal_commands),
		cmocka_unit_test(test_S9_unavailable_tool_leaves_registered),
		cmocka_unit_test(test_S9_error_bad_configuration_name),
		cmocka_unit_test(test_S9_error_configuration_named_ERROR_is_reserved),
		cmocka_unit_test(test_S9_error_sources_not_a_list),
		cmocka_unit_test(test_S9_error_document_not_a_mapping),
		cmocka_unit_test(test_S9_error_yaml_syntax),
		cmocka_unit_test(test_S9_error_min_trust_level_unknown_is_an_error),
		cmocka_unit_test(test_S9_error_provider_requirements),
		cmocka_unit_test(test_S9_error_attachment_shapes),
		cmocka_unit_test(test_S9_error_known_key_twice),
		cmocka_unit_test(test_S9_unknown_key_is_only_a_warning),
		cmocka_unit_test(test_S3_max_bytes_zero_falls_back),
		cmocka_unit_test(test_S3_max_bytes_negative_falls_back),
		cmocka_unit_test(test_S3_max_bytes_non_numeric_falls_back),
		cmocka_unit_test(test_S3_max_bytes_empty_falls_back),
		cmocka_unit_test(test_S3_max_bytes_positive_is_kept),
		cmocka_unit_test(test_D2_unknown_trust_level_reads_as_untrusted),
		cmocka_unit_test(test_D2_per_skill_trust_override_wins),
		cmocka_unit_test(test_S3_attachment_can_be_disabled),
		cmocka_unit_test_setup_teardown(test_S9_default_config_without_file,
						setup_tmp, teardown_tmp),
		cmocka_unit_test(test_S9_add_sources_after_file_sources),
		cmocka_unit_test(test_S9_odd_documents_are_handled),
		cmocka_unit_test(test_S9_second_document_is_a_warning),
		cmocka_unit_test(test_S7_budget_keys_one_at_a_time),
		cmocka_unit_test(test_S7_budget_bad_values_name_the_key),
		cmocka_unit_test(test_S9_ceiling_pin_acknowledged_and_audit_keep),
		cmocka_unit_test(test_S9_bad_pin_and_ceiling_are_errors),
		cmocka_unit_test(test_watch_rescan_seconds),
	};
	return cmocka_run_group_tests(t, NULL, NULL);
}
