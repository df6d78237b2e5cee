/* Tests for the tool registry and the workspace tools (DESIGN.md section 7:
 * "file tools cannot reach outside it (no `..`, no symlink escapes); process
 * tools run with a timeout, output cap, rlimits, a scrubbed environment, in
 * their own process group"), and of the tools that do real work (python,
 * terminal, glob, grep). One file: every tool's tests share one fixture (a
 * temporary workspace and this machine's sandbox, probed once). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "catalog.h"
#include "config.h"
#include "grants.h"
#include "globpat.h"
#include "sandbox.h"
#include "skill.h"
#include "strlist.h"
#include "tools.h"
#include "tooltest.h"
#include "workspace.h"

/* The sandbox of this machine, probed once (bubblewrap, as CI installs). */
static struct sandbox box;

struct fx {
	char tmp[1024]; /* scratch directory */
	char ws[1100];  /* the workspace: tmp/ws (created by the tools) */
	struct tool_ctx ctx;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	assert_non_null(f);
	const char *t = getenv("TMPDIR");
	int n = snprintf(f->tmp, sizeof f->tmp, "%s/skillfs-tools-XXXXXX",
			 t && *t ? t : "/tmp");
	assert_true(n > 0 && (size_t)n < sizeof f->tmp);
	assert_non_null(mkdtemp(f->tmp));
	snprintf(f->ws, sizeof f->ws, "%s/ws", f->tmp);
	f->ctx = (struct tool_ctx){.workspace = f->ws, .sandbox = &box};
	*state = f;
	return 0;
}

/* Process-tool tests need a working sandbox: skipped without one, but a
 * failure under CI, which installs bubblewrap. */
static int setup_sandboxed(void **state)
{
	if (!sandbox_usable(&box)) {
		if (getenv("CI"))
			fail_msg("no usable sandbox under CI: %s", box.why ? box.why : "?");
		skip();
	}
	return setup(state);
}

static int rm_entry(const char *p, const struct stat *st, int flag,
		    struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(p);
}

static int teardown(void **state)
{
	struct fx *f = *state;
	nftw(f->tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return 0;
}

/* Helpers. */

static void put_file(const char *dir, const char *name, const char *content)
{
	char p[PATH_MAX];
	assert_true(snprintf(p, sizeof p, "%s/%s", dir, name) < (int)sizeof p);
	FILE *fp = fopen(p, "w");
	assert_non_null(fp);
	fputs(content, fp);
	assert_int_equal(fclose(fp), 0);
}

static char *slurp(const char *dir, const char *name)
{
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	FILE *fp = fopen(p, "r");
	if (!fp)
		return NULL;
	struct buf b = {0};
	char chunk[4096];
	size_t n;
	while ((n = fread(chunk, 1, sizeof chunk, fp)) > 0)
		assert_int_equal(buf_append(&b, chunk, n), 0);
	fclose(fp);
	return buf_steal(&b, NULL);
}

/* The number of open file descriptors: no tool may leak one. */
static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	assert_non_null(d);
	int n = 0;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static void make_ws(struct fx *f)
{
	if (mkdir(f->ws, 0755) < 0)
		assert_int_equal(errno, EEXIST);
}

static struct tool_result run(struct fx *f, const char *tool, const char *json_args)
{
	return tooltest_run(&f->ctx, tool, json_args);
}

static struct tool_result run_kv(struct fx *f, const char *tool, const char *k1,
				 const char *v1, const char *k2, const char *v2)
{
	return tooltest_run_kv(&f->ctx, tool, k1, v1, k2, v2);
}

/* ---- registry ---- */

static const struct {
	const char *name;
	const char *required[4];
	const char *optional[4];
} expected_schemas[] = {
	{"bash", {"command"}, {0}},
	{"python", {0}, {"code", "path", "args"}},
	{"terminal", {"command"}, {0}},
	{"read", {"path"}, {"offset", "limit"}},
	{"write", {"path", "content"}, {0}},
	{"edit", {"path", "old_string", "new_string"}, {"replace_all"}},
	{"glob", {"pattern"}, {"path"}},
	{"grep", {"pattern"}, {"path", "glob", "ignore_case"}},
	{"webfetch", {"url"}, {"method"}},
	{"run_skill", {"name"}, {"arguments"}},
	{"learn_skill", {"name", "description", "body"}, {"allowed_tools", "files"}},
	{"ask_user", {"question"}, {0}},
};
#define NEXPECTED (sizeof expected_schemas / sizeof expected_schemas[0])

static bool array_has(json_t *arr, const char *s)
{
	size_t i;
	json_t *v;
	json_array_foreach(arr, i, v)
		if (json_is_string(v) && strcmp(json_string_value(v), s) == 0)
			return true;
	return false;
}

static void test_sec7_every_schema_is_a_valid_function_tool(void **state)
{
	(void)state;
	size_t nbuiltin = 0;
	while (tools_builtin[nbuiltin])
		nbuiltin++;
	assert_int_equal(nbuiltin, NEXPECTED);
	for (size_t i = 0; i < NEXPECTED; i++) {
		const char *name = expected_schemas[i].name;
		assert_true(tools_is_builtin(name));
		json_t *s = tools_schema(name);
		assert_non_null(s);
		/* Round trip through text: the model request carries it. */
		char *text = json_dumps(s, JSON_COMPACT);
		assert_non_null(text);
		json_decref(s);
		s = json_loads(text, 0, NULL);
		free(text);
		assert_non_null(s);
		assert_string_equal(
			json_string_value(json_object_get(s, "type")),
			"function");
		json_t *fn = json_object_get(s, "function");
		assert_true(json_is_object(fn));
		assert_string_equal(
			json_string_value(json_object_get(fn, "name")), name);
		const char *desc =
			json_string_value(json_object_get(fn, "description"));
		assert_non_null(desc);
		assert_true(strlen(desc) > 10);
		json_t *params = json_object_get(fn, "parameters");
		assert_string_equal(
			json_string_value(json_object_get(params, "type")),
			"object");
		json_t *props = json_object_get(params, "properties");
		json_t *req = json_object_get(params, "required");
		assert_true(json_is_object(props));
		assert_true(json_is_array(req));
		size_t nreq = 0;
		for (; expected_schemas[i].required[nreq]; nreq++) {
			const char *k = expected_schemas[i].required[nreq];
			if (!array_has(req, k))
				fail_msg("%s: '%s' not required", name, k);
			assert_non_null(json_object_get(props, k));
		}
		assert_int_equal(json_array_size(req), nreq);
		size_t nopt = 0;
		for (; expected_schemas[i].optional[nopt]; nopt++) {
			const char *k = expected_schemas[i].optional[nopt];
			assert_non_null(json_object_get(props, k));
			assert_false(array_has(req, k));
		}
		assert_int_equal(json_object_size(props), nreq + nopt);
		json_decref(s);
	}
}

/* A list of names (up to NULL). */
#define names_of(...) names_of_((const char *[]){ __VA_ARGS__, NULL })
static struct strlist names_of_(const char **names)
{
	struct strlist l = {0};
	for (; *names; names++)
		assert_int_equal(strlist_add(&l, *names), 0);
	return l;
}

/* R7: the tools whose calls run at most once (their start is committed
 * first) are the ones that may change something; the read-only ones and
 * the ones the agent loop answers are run again after a crash. Every
 * built-in tool is in one list or the other, and an unknown name counts
 * as having side effects. */
static void test_R7_side_effects_per_tool(void **state)
{
	(void)state;
	const char *once[] = {"bash", "python", "terminal", "write", "edit", "learn_skill"};
	const char *again[] = {"read", "glob", "grep", "webfetch", "run_skill", "ask_user"};
	for (size_t i = 0; i < sizeof once / sizeof *once; i++)
		assert_true(tools_has_side_effects(once[i]));
	for (size_t i = 0; i < sizeof again / sizeof *again; i++)
		assert_false(tools_has_side_effects(again[i]));
	size_t n = 0;
	while (tools_builtin[n])
		n++;
	assert_int_equal(n, sizeof once / sizeof *once + sizeof again / sizeof *again);
	assert_true(tools_has_side_effects("no-such-tool"));
	assert_true(tools_has_side_effects(NULL));
}

static void test_sec7_schemas_in_given_order_unknown_skipped(void **state)
{
	(void)state;
	struct strlist names = names_of("write", "no-such-tool", "bash");
	json_t *arr = tools_schemas(&names);
	assert_non_null(arr);
	assert_int_equal(json_array_size(arr), 2);
	const char *n0 = json_string_value(json_object_get(
		json_object_get(json_array_get(arr, 0), "function"), "name"));
	const char *n1 = json_string_value(json_object_get(
		json_object_get(json_array_get(arr, 1), "function"), "name"));
	assert_string_equal(n0, "write");
	assert_string_equal(n1, "bash");
	json_decref(arr);
	strlist_free(&names);

	arr = tools_schemas(NULL);
	assert_int_equal(json_array_size(arr), NEXPECTED);
	json_decref(arr);

	assert_false(tools_is_builtin("no-such-tool"));
	assert_false(tools_is_builtin(NULL));
	assert_null(tools_schema("no-such-tool"));
}

/* Picking from the table made once gives what parsing gives, in the
 * asked order, shares the objects, comes with the same array as JSON text,
 * and leaves the table as it was. */
static void test_schemas_pick_equals_parsing(void **state)
{
	(void)state;
	struct strlist names = names_of("write", "no-such-tool", "bash", "read");
	struct tool_schemas ts;
	assert_int_equal(tool_schemas_init(&ts), 0);
	assert_int_equal(ts.n, NEXPECTED);
	json_t *parsed = tools_schemas(&names);
	json_t *picked;
	char *text;
	assert_int_equal(tool_schemas_pick(&ts, &names, &picked, &text), 0);
	assert_int_equal(json_array_size(picked), 3);
	assert_true(json_equal(parsed, picked));
	bool shared = false;
	size_t i;
	json_t *s;
	json_array_foreach(ts.all, i, s)
		shared |= s == json_array_get(picked, 0);
	assert_true(shared);
	json_error_t je;
	json_t *from_text = json_loads(text, 0, &je);
	assert_non_null(from_text);
	assert_true(json_equal(from_text, parsed));
	json_decref(from_text);
	free(text);
	json_decref(picked);
	assert_int_equal(json_array_size(ts.all), NEXPECTED);
	struct strlist none = {0};
	assert_int_equal(tool_schemas_pick(&ts, &none, &picked, &text), 0);
	assert_int_equal(json_array_size(picked), 0);
	assert_string_equal(text, "[]");
	free(text);
	json_decref(picked);
	json_decref(parsed);
	tool_schemas_free(&ts);
	strlist_free(&names);
}

static void test_sec7_unavailable_tools_give_error_result(void **state)
{
	struct fx *f = *state;
	/* No built-in tool is a stub any more (issue "Tools that do real
	 * work", item 9): none answers "not available in this version". */
	for (size_t i = 0; tools_builtin[i]; i++) {
		struct tool_result r = run(f, tools_builtin[i], "{}");
		assert_null(strstr(r.text, "not available in this version"));
		assert_null(strstr(r.text, "not implemented"));
		tool_result_free(&r);
		const char *why = tools_unavailable_why(tools_builtin[i], &box);
		assert_true(!why || !strstr(why, "not implemented"));
	}
	struct tool_result r = run(f, "run_skill", "{\"name\": \"x\"}");
	expect_error_has(&r, "handled by the engine");
	r = run(f, "ask_user", "{\"question\": \"?\"}");
	expect_error_has(&r, "handled by the engine");
	r = run(f, "no-such-tool", "{}");
	expect_error(&r, "unknown tool 'no-such-tool'");
}

static void test_sec7_bad_arguments_name_the_argument(void **state)
{
	struct fx *f = *state;
	struct tool_result r = run(f, "read", "{}");
	expect_error(&r, "read: missing required argument 'path'");
	r = run(f, "read", NULL);
	expect_error(&r, "read: missing required argument 'path'");
	r = run(f, "write", "{\"path\": 7, \"content\": \"x\"}");
	expect_error(&r, "write: argument 'path' must be a string");
	r = run(f, "write", "{\"path\": \"a\"}");
	expect_error(&r, "write: missing required argument 'content'");
	r = run(f, "edit", "{\"path\": \"a\", \"old_string\": \"x\"}");
	expect_error(&r, "edit: missing required argument 'new_string'");
	r = run(f, "edit", "{\"path\": \"a\", \"old_string\": \"x\", "
			   "\"new_string\": \"y\", \"replace_all\": \"yes\"}");
	expect_error(&r, "edit: argument 'replace_all' must be true or false");
	r = run(f, "read", "{\"path\": \"a\", \"offset\": 0}");
	expect_error(&r, "read: argument 'offset' must be an integer of at "
			 "least 1");
	r = run(f, "read", "{\"path\": \"a\\u0000b\"}");
	expect_error(&r, "read: argument 'path' contains a NUL character");
	r = run(f, "bash", "{}");
	expect_error(&r, "bash: missing required argument 'command'");
	r = run(f, "bash", "[\"echo\"]");
	expect_error(&r, "bash: arguments must be a JSON object");
}

/* ---- file tools ---- */

static void test_sec7_write_read_round_trip(void **state)
{
	struct fx *f = *state;
	const char *content = "first line\nzweite Zeile \xc3\xa4\xe2\x82\xac\n"
			      "no newline at end";
	struct tool_result r = run_kv(f, "write", "path", "a.txt", "content",
				      content);
	expect_ok(&r, NULL);
	char *disk = slurp(f->ws, "a.txt");
	assert_non_null(disk);
	assert_string_equal(disk, content);
	free(disk);
	r = run_kv(f, "read", "path", "a.txt", NULL, NULL);
	expect_ok(&r, content);

	/* Replacing keeps the permission bits and leaves no temporary. */
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s/a.txt", f->ws);
	assert_int_equal(chmod(p, 0600), 0);
	r = run_kv(f, "write", "path", "a.txt", "content", "new");
	expect_ok(&r, "wrote 3 bytes to a.txt");
	struct stat st;
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	disk = slurp(f->ws, "a.txt");
	assert_string_equal(disk, "new");
	free(disk);
}

static void test_sec7_write_creates_subdirectories(void **state)
{
	struct fx *f = *state;
	struct tool_result r = run_kv(f, "write", "path", "notes/deep/b.md",
				      "content", "hello");
	expect_ok(&r, "wrote 5 bytes to notes/deep/b.md");
	char dir[PATH_MAX];
	snprintf(dir, sizeof dir, "%s/notes/deep", f->ws);
	char *disk = slurp(dir, "b.md");
	assert_non_null(disk);
	assert_string_equal(disk, "hello");
	free(disk);
	/* Only the file itself is in the directory: no temporary left. */
	int n = 0;
	DIR *d = opendir(dir);
	assert_non_null(d);
	struct dirent *e;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(d);
	assert_int_equal(n, 1);
	/* A file in the way of a directory is reported, not overwritten. */
	r = run_kv(f, "write", "path", "notes/deep/b.md/c", "content", "x");
	expect_error(&r, "write: a component of the path is not a directory: "
			 "notes/deep/b.md/c");
	r = run_kv(f, "write", "path", "notes", "content", "x");
	expect_error(&r, "write: is a directory: notes");
	r = run_kv(f, "write", "path", "notes/", "content", "x");
	expect_error_has(&r, "not a file path");
}

static void test_sec7_read_refuses_dotdot_escape(void **state)
{
	struct fx *f = *state;
	make_ws(f);
	put_file(f->tmp, "x", "outside secret");
	struct tool_result r = run_kv(f, "read", "path", "../x", NULL, NULL);
	expect_error(&r, "read: path escapes the workspace: ../x");
	r = run_kv(f, "read", "path", "sub/../../x", NULL, NULL);
	expect_error(&r, "read: path escapes the workspace: sub/../../x");
	r = run_kv(f, "write", "path", "../y", "content", "x");
	expect_error(&r, "write: path escapes the workspace: ../y");
	r = run_kv(f, "write", "path", "new/../../y", "content", "x");
	expect_error(&r, "write: path escapes the workspace: new/../../y");
	char *y = slurp(f->tmp, "y");
	assert_null(y);
	/* A ".." that stays inside is fine. */
	put_file(f->ws, "in.txt", "inside");
	r = run_kv(f, "read", "path", "sub/../in.txt", NULL, NULL);
	expect_error_has(&r, "no such file"); /* sub does not exist */
	r = run_kv(f, "write", "path", "sub/../in2.txt", "content", "i2");
	expect_ok(&r, NULL);
	r = run_kv(f, "read", "path", "sub/../in2.txt", NULL, NULL);
	expect_ok(&r, "i2");
}

static void test_sec7_absolute_paths_outside_are_refused(void **state)
{
	struct fx *f = *state;
	struct tool_result r = run_kv(f, "read", "path", "/etc/passwd", NULL,
				      NULL);
	expect_error(&r, "read: path escapes the workspace: /etc/passwd");
	r = run_kv(f, "write", "path", "/etc/skillfs-test", "content", "x");
	expect_error(&r, "write: path escapes the workspace: "
			 "/etc/skillfs-test");
	/* A sibling whose name starts with the workspace's is outside. */
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s2/x", f->ws);
	r = run_kv(f, "write", "path", p, "content", "x");
	expect_error_has(&r, "path escapes the workspace");
}

static void test_sec7_absolute_path_inside_workspace_allowed(void **state)
{
	struct fx *f = *state;
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s/abs/in.txt", f->ws);
	struct tool_result r = run_kv(f, "write", "path", p, "content", "abs");
	expect_ok(&r, NULL);
	r = run_kv(f, "read", "path", "abs/in.txt", NULL, NULL);
	expect_ok(&r, "abs");
	snprintf(p, sizeof p, "%s//abs/./in.txt", f->ws);
	r = run_kv(f, "read", "path", p, NULL, NULL);
	expect_ok(&r, "abs");
	/* Also through the canonical path of the workspace. */
	char *real = realpath(f->ws, NULL);
	assert_non_null(real);
	snprintf(p, sizeof p, "%s/abs/in.txt", real);
	free(real);
	r = run_kv(f, "read", "path", p, NULL, NULL);
	expect_ok(&r, "abs");
}

static void make_links(struct fx *f, char *outside, size_t n)
{
	make_ws(f);
	snprintf(outside, n, "%s/outside", f->tmp);
	assert_int_equal(mkdir(outside, 0755), 0);
	put_file(outside, "target.txt", "outside content");
	put_file(f->tmp, "x", "parent secret");
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s/etc", f->ws);
	assert_int_equal(symlink("/etc", p), 0);
	snprintf(p, sizeof p, "%s/up", f->ws);
	assert_int_equal(symlink("..", p), 0);
	snprintf(p, sizeof p, "%s/out", f->ws);
	assert_int_equal(symlink(outside, p), 0);
	snprintf(p, sizeof p, "%s/target-link", f->ws);
	char t[PATH_MAX];
	snprintf(t, sizeof t, "%s/target.txt", outside);
	assert_int_equal(symlink(t, p), 0);
}

static void test_sec7_symlink_escapes_are_refused(void **state)
{
	struct fx *f = *state;
	char outside[PATH_MAX];
	make_links(f, outside, sizeof outside);
	int fds = count_fds();
	struct tool_result r = run_kv(f, "read", "path", "etc/passwd", NULL,
				      NULL);
	expect_error(&r, "read: path escapes the workspace: etc/passwd");
	r = run_kv(f, "read", "path", "up/x", NULL, NULL);
	expect_error(&r, "read: path escapes the workspace: up/x");
	r = run_kv(f, "read", "path", "target-link", NULL, NULL);
	expect_error(&r, "read: path escapes the workspace: target-link");
	r = run_kv(f, "write", "path", "out/new.txt", "content", "x");
	expect_error(&r, "write: path escapes the workspace: out/new.txt");
	r = run_kv(f, "write", "path", "up/new.txt", "content", "x");
	expect_error(&r, "write: path escapes the workspace: up/new.txt");
	r = run(f, "edit", "{\"path\": \"target-link\", \"old_string\": "
			   "\"outside\", \"new_string\": \"pwned\"}");
	expect_error(&r, "edit: path escapes the workspace: target-link");
	char *s = slurp(outside, "new.txt");
	assert_null(s);
	s = slurp(f->tmp, "new.txt");
	assert_null(s);
	/* Writing over a link replaces the link, never its outside target. */
	r = run_kv(f, "write", "path", "target-link", "content", "mine");
	expect_ok(&r, NULL);
	s = slurp(outside, "target.txt");
	assert_string_equal(s, "outside content");
	free(s);
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s/target-link", f->ws);
	struct stat st;
	assert_int_equal(lstat(p, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(count_fds(), fds);
}

static void test_sec7_symlink_inside_workspace_is_followed(void **state)
{
	struct fx *f = *state;
	struct tool_result r = run_kv(f, "write", "path", "sub/f.txt",
				      "content", "via link");
	expect_ok(&r, NULL);
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s/alias", f->ws);
	assert_int_equal(symlink("sub", p), 0);
	r = run_kv(f, "read", "path", "alias/f.txt", NULL, NULL);
	expect_ok(&r, "via link");
}

/* The component-by-component resolution used without openat2: the same
 * escapes are refused, and symbolic links are not followed at all. */
static void test_sec7_fallback_resolution_refuses_escapes(void **state)
{
	struct fx *f = *state;
	char outside[PATH_MAX];
	make_links(f, outside, sizeof outside);
	int fds = count_fds();
	struct workspace ws;
	struct buf err = {0}, out = {0};
	assert_int_equal(workspace_open(&ws, f->ws, &err), 0);
	ws.no_openat2 = true;

	const char *bad[] = {"../x", "sub/../../x", "/etc/passwd"};
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(workspace_read(&ws, bad[i], 0, &out, &err), -1);
		assert_non_null(strstr(err.data, "path escapes the workspace"));
		buf_free(&err);
	}
	const char *links[] = {"etc/passwd", "up/x", "target-link"};
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(workspace_read(&ws, links[i], 0, &out, &err),
				 -1);
		assert_non_null(strstr(err.data, "symbolic link"));
		buf_free(&err);
	}
	assert_int_equal(workspace_write(&ws, "out/new.txt", "x", 1, &err), -1);
	buf_free(&err);
	assert_int_equal(workspace_write(&ws, "up/new.txt", "x", 1, &err), -1);
	buf_free(&err);
	assert_null(slurp(outside, "new.txt"));
	assert_null(slurp(f->tmp, "new.txt"));

	/* Ordinary use still works. */
	assert_int_equal(workspace_write(&ws, "d/e/f.txt", "ok", 2, &err), 0);
	assert_int_equal(workspace_read(&ws, "d/./e/../e/f.txt", 0, &out, &err),
			 0);
	assert_string_equal(out.data, "ok");
	assert_null(err.data);
	buf_free(&out);
	workspace_close(&ws);
	workspace_close(&ws); /* harmless twice */
	assert_int_equal(count_fds(), fds);
}

/* A workspaces' directory that another user may write is refused: whoever
 * can rename entries there can swap a run's workspace for a link while the
 * daemon works on it by path (removing it when the run goes). */
static void test_sec7_workspace_parent_writable_by_others_is_refused(void **state)
{
	struct fx *f = *state;
	struct workspace ws;
	struct buf err = {0};
	assert_int_equal(chmod(f->tmp, 0777), 0);
	assert_int_equal(workspace_open(&ws, f->ws, &err), -1);
	assert_non_null(err.data);
	assert_non_null(strstr(err.data, "writable by other users"));
	buf_free(&err);
	assert_int_equal(access(f->ws, F_OK), -1); /* nothing made there */
	assert_int_equal(chmod(f->tmp, 0755), 0);
	assert_int_equal(workspace_open(&ws, f->ws, &err), 0);
	workspace_close(&ws);
	buf_free(&err);
}

static void test_sec7_read_missing_and_special_files(void **state)
{
	struct fx *f = *state;
	struct tool_result r = run_kv(f, "read", "path", "a.txt", NULL, NULL);
	expect_error(&r, "read: no such file: a.txt");
	r = run_kv(f, "read", "path", "", NULL, NULL);
	expect_error(&r, "read: empty path");
	r = run_kv(f, "read", "path", ".", NULL, NULL);
	expect_error(&r, "read: is a directory: .");
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s/fifo", f->ws);
	assert_int_equal(mkfifo(p, 0600), 0);
	r = run_kv(f, "read", "path", "fifo", NULL, NULL);
	expect_error(&r, "read: not a regular file: fifo");
	/* Binary content is refused with a hint, not passed on. */
	snprintf(p, sizeof p, "%s/bin", f->ws);
	FILE *fp = fopen(p, "wb");
	assert_non_null(fp);
	fwrite("ab\0\xff", 1, 4, fp);
	fclose(fp);
	r = run_kv(f, "read", "path", "bin", NULL, NULL);
	expect_error_has(&r, "read: not a UTF-8 text file: bin");
}

static void test_sec7_read_size_cap(void **state)
{
	struct fx *f = *state;
	make_ws(f);
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s/big.txt", f->ws);
	FILE *fp = fopen(p, "w");
	assert_non_null(fp);
	for (size_t i = 0; i < WORKSPACE_READ_MAX + 1; i++)
		fputc('a', fp);
	assert_int_equal(fclose(fp), 0);
	struct tool_result r = run_kv(f, "read", "path", "big.txt", NULL, NULL);
	expect_error(&r, "read: file is too large to read: big.txt "
			 "(1048577 bytes; the limit is 1048576 bytes)");
	/* Exactly at the cap is fine. */
	assert_int_equal(truncate(p, (off_t)WORKSPACE_READ_MAX), 0);
	r = run_kv(f, "read", "path", "big.txt", NULL, NULL);
	assert_false(r.is_error);
	assert_int_equal(strlen(r.text), WORKSPACE_READ_MAX);
	tool_result_free(&r);
}

static void test_sec7_read_offset_and_limit(void **state)
{
	struct fx *f = *state;
	make_ws(f);
	put_file(f->ws, "l.txt", "one\ntwo\nthree\nfour\nfive");
	struct tool_result r = run(f, "read", "{\"path\": \"l.txt\", "
					     "\"offset\": 2, \"limit\": 2}");
	expect_ok(&r, "two\nthree\n[lines 2-3 of 5]");
	r = run(f, "read", "{\"path\": \"l.txt\", \"offset\": 4}");
	expect_ok(&r, "four\nfive\n[lines 4-5 of 5]");
	r = run(f, "read", "{\"path\": \"l.txt\", \"limit\": 1}");
	expect_ok(&r, "one\n[lines 1-1 of 5]");
	r = run(f, "read", "{\"path\": \"l.txt\", \"limit\": 99}");
	expect_ok(&r, "one\ntwo\nthree\nfour\nfive");
	r = run(f, "read", "{\"path\": \"l.txt\", \"offset\": 9}");
	expect_ok(&r, "[offset 9 is past the end: l.txt has 5 lines]");
}

static void test_sec7_edit_replaces_unique_string(void **state)
{
	struct fx *f = *state;
	make_ws(f);
	put_file(f->ws, "e.txt", "alpha beta gamma\n");
	struct tool_result r = run(f, "edit", "{\"path\": \"e.txt\", "
					      "\"old_string\": \"beta\", "
					      "\"new_string\": \"BETA\\u0000!\"}");
	expect_ok(&r, "edited e.txt: replaced 1 occurrence");
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s/e.txt", f->ws);
	struct stat st;
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_size, 19); /* "alpha BETA\0! gamma\n" */
	r = run(f, "edit", "{\"path\": \"e.txt\", \"old_string\": "
			   "\"BETA\\u0000!\", \"new_string\": \"b\"}");
	expect_error_has(&r, "not a UTF-8 text file");
	put_file(f->ws, "e.txt", "alpha beta gamma\n");
	r = run(f, "edit", "{\"path\": \"e.txt\", \"old_string\": \"gamma\", "
			   "\"new_string\": \"\"}");
	expect_ok(&r, NULL);
	char *s = slurp(f->ws, "e.txt");
	assert_string_equal(s, "alpha beta \n");
	free(s);
}

static void test_sec7_edit_missing_or_ambiguous_old_string(void **state)
{
	struct fx *f = *state;
	make_ws(f);
	int fds = count_fds();
	put_file(f->ws, "e.txt", "x = 1\ny = 1\n");
	struct tool_result r = run(f, "edit", "{\"path\": \"e.txt\", "
					      "\"old_string\": \"z = 1\", "
					      "\"new_string\": \"z = 2\"}");
	expect_error(&r, "edit: old_string not found in e.txt");
	r = run(f, "edit", "{\"path\": \"e.txt\", \"old_string\": \"= 1\", "
			   "\"new_string\": \"= 2\"}");
	expect_error(&r, "edit: old_string occurs 2 times in e.txt; include "
			 "more surrounding text to make it unique, or set "
			 "replace_all to true");
	char *s = slurp(f->ws, "e.txt");
	assert_string_equal(s, "x = 1\ny = 1\n"); /* untouched */
	free(s);
	r = run(f, "edit", "{\"path\": \"e.txt\", \"old_string\": \"= 1\", "
			   "\"new_string\": \"= 2\", \"replace_all\": true}");
	expect_ok(&r, "edited e.txt: replaced 2 occurrences");
	s = slurp(f->ws, "e.txt");
	assert_string_equal(s, "x = 2\ny = 2\n");
	free(s);
	r = run(f, "edit", "{\"path\": \"e.txt\", \"old_string\": \"\", "
			   "\"new_string\": \"a\"}");
	expect_error_has(&r, "edit: old_string is empty");
	r = run(f, "edit", "{\"path\": \"nope.txt\", \"old_string\": \"a\", "
			   "\"new_string\": \"b\"}");
	expect_error(&r, "edit: no such file: nope.txt");
	assert_int_equal(count_fds(), fds);
}

/* ---- bash ---- */

static void test_sec7_bash_output_and_exit_code(void **state)
{
	struct fx *f = *state;
	struct tool_result r = run_kv(f, "bash", "command",
				      "echo hello; echo oops >&2; exit 3",
				      NULL, NULL);
	assert_true(r.is_error);
	assert_non_null(strstr(r.text, "hello\n"));
	assert_non_null(strstr(r.text, "oops\n")); /* stderr merged */
	assert_non_null(strstr(r.text, "[exit 3]"));
	tool_result_free(&r);
	r = run_kv(f, "bash", "command", "printf 'no newline'", NULL, NULL);
	expect_ok(&r, "no newline\n[exit 0]");
	r = run_kv(f, "bash", "command", "true", NULL, NULL);
	expect_ok(&r, "[exit 0]");
	/* bubblewrap reports a command killed by signal N as exit 128+N. */
	r = run_kv(f, "bash", "command", "kill -KILL $$", NULL, NULL);
	expect_error(&r, "[exit 137]");
	/* Invalid UTF-8 output still gives valid text. */
	r = run_kv(f, "bash", "command", "printf 'a\\377b'", NULL, NULL);
	expect_ok(&r, "a\xef\xbf\xbd" "b\n[exit 0]");
}

static void test_sec7_bash_runs_in_workspace(void **state)
{
	struct fx *f = *state;
	struct tool_result r = run_kv(f, "bash", "command",
				      "pwd -P; echo made > made.txt", NULL,
				      NULL);
	expect_ok(&r, SANDBOX_WORKSPACE "\n[exit 0]");
	char *s = slurp(f->ws, "made.txt");
	assert_string_equal(s, "made\n");
	free(s);
}

static void test_sec7_bash_environment_is_scrubbed(void **state)
{
	struct fx *f = *state;
	assert_int_equal(setenv("SKILLFS_TEST_SECRET", "leaked-value", 1), 0);
	struct tool_result r = run_kv(f, "bash", "command",
				      "env | grep -v '^_=' | sort", NULL,
				      NULL);
	unsetenv("SKILLFS_TEST_SECRET");
	assert_false(r.is_error);
	assert_null(strstr(r.text, "leaked-value"));
	assert_null(strstr(r.text, "SKILLFS_TEST_SECRET"));
	assert_non_null(strstr(r.text, "HOME=" SANDBOX_WORKSPACE "\n"));
	assert_non_null(strstr(r.text, "LANG=C.UTF-8\n"));
	assert_non_null(strstr(r.text, "PATH=/usr/local/bin:/usr/bin:/bin\n"));
	tool_result_free(&r);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_sec7_bash_timeout_kills_command(void **state)
{
	struct fx *f = *state;
	f->ctx.timeout_ms = 1500; /* the sandbox starts within it, even on a loaded machine */
	double t0 = now_s();
	struct tool_result r = run_kv(f, "bash", "command",
				      "echo started; sleep 20; echo never",
				      NULL, NULL);
	double elapsed = now_s() - t0;
	assert_true(elapsed < 10.0);
	assert_true(r.is_error);
	assert_non_null(strstr(r.text, "started\n"));
	assert_null(strstr(r.text, "never"));
	assert_non_null(strstr(r.text, "[timed out after 1500 ms; the command "
					"was killed]"));
	tool_result_free(&r);
}

static void test_sec7_bash_output_cap(void **state)
{
	struct fx *f = *state;
	f->ctx.output_max = 1000;
	struct tool_result r = run_kv(f, "bash", "command",
				      "head -c 100000 /dev/zero | tr '\\0' a",
				      NULL, NULL);
	assert_false(r.is_error);
	const char *note = "\n[output truncated after 1000 bytes]\n[exit 0]";
	char *at = strstr(r.text, note);
	assert_non_null(at);
	assert_int_equal(at - r.text, 1000);
	for (size_t i = 0; i < 1000; i++)
		assert_int_equal(r.text[i], 'a');
	tool_result_free(&r);
}

static bool cancel_after_first_poll(void *arg)
{
	int *polls = arg;
	return ++*polls > 1;
}

static void test_sec7_bash_cancel_kills_command(void **state)
{
	struct fx *f = *state;
	int polls = 0;
	f->ctx.cancel = cancel_after_first_poll;
	f->ctx.cancel_arg = &polls;
	double t0 = now_s();
	struct tool_result r = run_kv(f, "bash", "command", "sleep 20", NULL,
				      NULL);
	assert_true(now_s() - t0 < 10.0);
	assert_true(polls > 1);
	expect_error(&r, "[cancelled; the command was killed]");
}

/* ---- the sandbox (issue: confinement) ---- */

static void test_sec7_bash_is_confined(void **state)
{
	struct fx *f = *state;
	/* The host's secrets, the state beside the workspace, /root and
	 * /home are not there; nothing outside the workspace is writable. */
	put_file(f->tmp, "beside.txt", "secret beside the workspace\n");
	char cmd[4096];
	snprintf(cmd, sizeof cmd,
		 "test -e /etc/shadow && echo shadow-visible; "
		 "test -e %s/beside.txt && echo beside-visible; "
		 "ls /root /home 2>/dev/null | head -1; "
		 "touch /usr/x /etc/x /x 2>/dev/null && echo wrote-outside; "
		 "echo in > inside.txt && echo wrote-inside; "
		 "grep -q 'NoNewPrivs:.*1' /proc/self/status && echo nnp; "
		 "grep -q 'CapEff:.*0000000000000000' /proc/self/status && echo nocaps; "
		 "cat /proc/1/environ | tr '\\0' '\\n' | grep -c SKILLFS_TEST_SECRET",
		 f->tmp);
	assert_int_equal(setenv("SKILLFS_TEST_SECRET", "leaked-value", 1), 0);
	struct tool_result r = run_kv(f, "bash", "command", cmd, NULL, NULL);
	unsetenv("SKILLFS_TEST_SECRET");
	assert_null(strstr(r.text, "shadow-visible"));
	assert_null(strstr(r.text, "beside-visible"));
	assert_null(strstr(r.text, "wrote-outside"));
	assert_null(strstr(r.text, "leaked-value"));
	assert_non_null(strstr(r.text, "wrote-inside\nnnp\nnocaps\n0\n"));
	tool_result_free(&r);
	char *s = slurp(f->ws, "inside.txt");
	assert_string_equal(s, "in\n");
	free(s);
	/* A process left in the background ends with the call. */
	r = run_kv(f, "bash", "command",
		   "setsid sleep 777 >/dev/null 2>&1 & echo started", NULL, NULL);
	expect_ok(&r, "started\n[exit 0]");
	FILE *ps = popen("pgrep -f '[s]leep 777' | wc -l", "r");
	assert_non_null(ps);
	int left = -1;
	assert_int_equal(fscanf(ps, "%d", &left), 1);
	pclose(ps);
	assert_int_equal(left, 0);
	/* No process limit beyond SANDBOX_NPROC, even for root. */
	r = run_kv(f, "bash", "command",
		   "sh -c 'for i in $(seq 400); do sleep 20 & done' >/dev/null 2>&1; "
		   "ls -d /proc/[0-9]* | wc -l", NULL, NULL);
	char *end = strstr(r.text, "\n[exit");
	assert_non_null(end);
	char *line = end;
	while (line > r.text && line[-1] != '\n')
		line--;
	int running = atoi(line); /* the last line before the status */
	if (!(running > SANDBOX_NPROC / 2 && running <= SANDBOX_NPROC))
		fail_msg("%d processes in the sandbox: %s", running, r.text);
	tool_result_free(&r);
}

/* The memory-backed places a call may write are capped: the sandbox's own
 * root and /dev are read-only (each is an uncapped tmpfs, half the host's
 * memory), /dev/shm has a small tmpfs of its own, /tmp its size. */
static void test_sec7_bash_memory_filesystems_are_capped(void **state)
{
	struct fx *f = *state;
	struct tool_result r = run_kv(f, "bash", "command",
		"for d in / /dev /dev/shm /tmp; do "
		"echo x > $d/probe 2>/dev/null && echo \"wrote $d\"; done; "
		"echo x > /dev/null && echo devnull; "
		"head -c 2000M /dev/zero > /dev/shm/big 2>/dev/null; "
		"for d in / /dev /dev/shm /tmp; do "
		"df -k --output=size $d | tail -1; done", NULL, NULL);
	assert_null(strstr(r.text, "wrote /\n"));
	assert_null(strstr(r.text, "wrote /dev\n"));
	assert_non_null(strstr(r.text, "wrote /dev/shm\n"));
	assert_non_null(strstr(r.text, "wrote /tmp\n"));
	assert_non_null(strstr(r.text, "devnull\n"));
	/* The two writable ones: no larger than their caps. */
	const char *p = strstr(r.text, "devnull\n");
	assert_non_null(p);
	long sizes[4];
	p += strlen("devnull\n");
	for (int i = 0; i < 4; i++) {
		char *end;
		sizes[i] = strtol(p, &end, 10);
		assert_true(end > p);
		p = end;
	}
	if (sizes[2] * 1024L > SANDBOX_SHM_BYTES || sizes[3] * 1024L > SANDBOX_TMP_BYTES)
		fail_msg("/dev/shm %ld KiB, /tmp %ld KiB: %s", sizes[2], sizes[3], r.text);
	tool_result_free(&r);
}

static void test_D3_patterned_bash_runs_argv_without_shell(void **state)
{
	struct fx *f = *state;
	f->ctx.argv_only = true;
	struct tool_result r = run_kv(f, "bash", "command", "echo 'a  b' c", NULL, NULL);
	expect_ok(&r, "a  b c\n[exit 0]");
	/* Quoted shell syntax is a literal word, never run. */
	r = run_kv(f, "bash", "command", "echo '$(id)' ';' '>x'", NULL, NULL);
	expect_ok(&r, "$(id) ; >x\n[exit 0]");
	assert_int_equal(access(f->ws, F_OK), 0);
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s/x", f->ws);
	assert_int_equal(access(p, F_OK), -1);
}

/* A patterned grant's program is not steered by files the call could
 * write: `git diff --output=.gitconfig` wrote a config naming a program
 * for git diff to run, and HOME was the workspace. */
static void test_D3_patterned_call_ignores_home_and_git_config(void **state)
{
	struct fx *f = *state;
	f->ctx.argv_only = true;
	struct tool_result r = run_kv(f, "bash", "command", "true", NULL, NULL);
	expect_ok(&r, "[exit 0]"); /* the workspace exists now */
	put_file(f->ws, ".gitconfig", "[diff]\n\texternal = touch pwned\n");
	put_file(f->ws, "a", "a\n");
	put_file(f->ws, "b", "b\n");
	r = run_kv(f, "bash", "command", "env", NULL, NULL);
	assert_non_null(strstr(r.text, "HOME=" SANDBOX_PRISTINE_HOME "\n"));
	assert_non_null(strstr(r.text, "GIT_CONFIG_GLOBAL=/dev/null\n"));
	tool_result_free(&r);
	r = run_kv(f, "bash", "command", "git diff --no-index a b", NULL, NULL);
	assert_non_null(strstr(r.text, "+b"));
	tool_result_free(&r);
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s/pwned", f->ws);
	assert_int_equal(access(p, F_OK), -1);
	/* ... nor can it write a home of its own. */
	r = run_kv(f, "bash", "command", "touch " SANDBOX_PRISTINE_HOME "/x", NULL, NULL);
	assert_true(r.is_error);
	tool_result_free(&r);
}

static void test_sec7_no_sandbox_program_fails_closed(void **state)
{
	struct fx *f = *state;
	struct tools_config tc = {.sandbox_program = "/nonexistent/bwrap"};
	struct sandbox sb;
	assert_int_equal(sandbox_probe(&tc, &sb), 0);
	assert_false(sandbox_usable(&sb));
	assert_non_null(strstr(sb.why, "/nonexistent/bwrap"));
	/* Not registered: out of the registered list, with the reason. */
	struct config *c = config_default(NULL, 0);
	assert_non_null(c);
	free(c->tools.sandbox_program);
	c->tools.sandbox_program = strdup("/nonexistent/bwrap");
	struct sandbox csb;
	assert_int_equal(tools_probe(c, &csb), 0);
	assert_false(strlist_has(&c->registered_tools, "bash"));
	assert_true(strlist_has(&c->registered_tools, "read"));
	assert_non_null(strstr(config_tool_unavailable_why(c, "bash"), "/nonexistent/bwrap"));
	bool warned = false;
	for (size_t i = 0; i < c->warnings.n; i++)
		warned = warned || strstr(c->warnings.items[i], "tool 'bash' is not available");
	assert_true(warned);
	sandbox_free(&csb);
	config_free(c);
	/* And a call that reaches it anyway is refused, never unconfined. */
	f->ctx.sandbox = &sb;
	struct tool_result r = run_kv(f, "bash", "command", "echo ran", NULL, NULL);
	assert_true(r.is_error);
	assert_null(strstr(r.text, "ran"));
	assert_non_null(strstr(r.text, "not available"));
	tool_result_free(&r);
	sandbox_free(&sb);
}

/* A program that is not a sandbox (here one that drops its options and
 * runs the rest, as a careless wrapper would) fails the probe. */
static void test_sec7_sandbox_program_that_does_not_confine_fails_closed(void **state)
{
	struct fx *f = *state;
	put_file(f->tmp, "fake-bwrap",
		 "#!/bin/sh\n"
		 "while [ $# -gt 0 ] && [ \"$1\" != -- ]; do shift; done\n"
		 "shift\nexec \"$@\"\n");
	char prog[PATH_MAX];
	snprintf(prog, sizeof prog, "%s/fake-bwrap", f->tmp);
	/* Reachable by tools.user too, when the test runs as root. */
	assert_int_equal(chmod(f->tmp, 0755), 0);
	assert_int_equal(chmod(prog, 0755), 0);
	struct tools_config tc = {.sandbox_program = prog};
	struct sandbox sb;
	assert_int_equal(sandbox_probe(&tc, &sb), 0);
	assert_false(sandbox_usable(&sb));
	assert_non_null(sb.why);
	assert_non_null(strstr(sb.why, "does not confine"));
	sandbox_free(&sb);
}

static void test_sec7_bwrap_missing_from_path_fails_closed(void **state)
{
	struct fx *f = *state;
	const char *old = getenv("PATH");
	char *saved = old ? strdup(old) : NULL;
	assert_int_equal(setenv("PATH", f->tmp, 1), 0);
	struct tools_config tc = {0};
	struct sandbox sb;
	int rc = sandbox_probe(&tc, &sb);
	if (saved)
		setenv("PATH", saved, 1);
	free(saved);
	assert_int_equal(rc, 0);
	assert_false(sandbox_usable(&sb));
	assert_non_null(strstr(sb.why, "not found on PATH"));
	assert_non_null(tools_unavailable_why("bash", &sb));
	assert_null(tools_unavailable_why("read", &sb));
	sandbox_free(&sb);
}

static void test_sec7_sandbox_none_runs_unconfined(void **state)
{
	struct fx *f = *state;
	struct tools_config tc = {.sandbox = SANDBOX_NONE};
	struct sandbox sb;
	assert_int_equal(sandbox_probe(&tc, &sb), 0);
	assert_true(sandbox_usable(&sb));
	f->ctx.sandbox = &sb;
	struct tool_result r = run_kv(f, "bash", "command", "echo $HOME", NULL, NULL);
	char want[PATH_MAX + 16];
	snprintf(want, sizeof want, "%s\n[exit 0]", f->ws);
	expect_ok(&r, want);
	sandbox_free(&sb);
	struct config *c = config_default(NULL, 0);
	assert_non_null(c);
	c->tools.sandbox = SANDBOX_NONE;
	assert_int_equal(tools_probe(c, &sb), 0);
	assert_true(strlist_has(&c->registered_tools, "bash"));
	bool warned = false;
	for (size_t i = 0; i < c->warnings.n; i++)
		warned = warned || strstr(c->warnings.items[i], "WITHOUT a sandbox");
	assert_true(warned);
	sandbox_free(&sb);
	config_free(c);
}

/* ---- learn_skill (DESIGN.md section 7) ---- */

/* A writable source (tmp/src) with skills "taken" (with a directory
 * sub-skill "helper") and "broken" (invalid), its catalogue, and the
 * calling run's allow-list: the grants of a skill declaring decl (NULL:
 * policy all). */
struct learn_fx {
	char src[1200];
	struct config *cfg;
	struct catalog *cat;
	struct grants allow;
};

static void learn_setup(struct fx *f, struct learn_fx *l, const char *decl)
{
	snprintf(l->src, sizeof l->src, "%s/src", f->tmp);
	char p[PATH_MAX];
	assert_int_equal(mkdir(l->src, 0755), 0);
	snprintf(p, sizeof p, "%s/taken", l->src);
	assert_int_equal(mkdir(p, 0755), 0);
	put_file(p, "SKILL.md", "---\nname: taken\ndescription: d\n---\nTaken.\n");
	snprintf(p, sizeof p, "%s/taken/skills", l->src);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof p, "%s/taken/skills/helper", l->src);
	assert_int_equal(mkdir(p, 0755), 0);
	put_file(p, "SKILL.md", "---\nname: helper\ndescription: h\n---\nHelp.\n");
	snprintf(p, sizeof p, "%s/broken", l->src);
	assert_int_equal(mkdir(p, 0755), 0);
	put_file(p, "SKILL.md", "---\nname: [broken\n---\nx\n");
	const char *dirs[] = {l->src};
	l->cfg = config_default(dirs, 1);
	assert_non_null(l->cfg);
	l->cfg->sources[0].writable = true;
	l->cfg->sources[0].trust = TRUST_COMMUNITY;
	l->cat = catalog_build(l->cfg, NULL, NULL, NULL);
	assert_non_null(l->cat);
	assert_non_null(catalog_find(l->cat, "broken"));
	struct skill *gate = NULL;
	if (decl) {
		char text[512];
		snprintf(text, sizeof text, "---\nname: gate\ndescription: g\nallowed-tools: %s\n"
			 "---\nb\n", decl);
		gate = skill_parse("gate", NULL, text, strlen(text), NULL);
		assert_non_null(gate);
		assert_true(gate->valid);
	}
	const struct skill *const gates[] = {gate};
	assert_int_equal(grants_resolve(&l->cfg->registered_tools, gates, gate ? 1 : 0,
					&l->allow), 0);
	skill_unref(gate);
	f->ctx.allow = &l->allow;
	f->ctx.learn_dir = config_learn_dir(l->cfg);
	f->ctx.catalog = l->cat;
}

static void learn_free(struct learn_fx *l)
{
	grants_free(&l->allow);
	catalog_free(l->cat);
	config_free(l->cfg);
}

/* The names in dir, sorted, one per line ("" for none). */
static char *listing(const char *dir)
{
	struct dirent **ents;
	int n = scandir(dir, &ents, NULL, alphasort);
	assert_true(n >= 0);
	struct buf b = {0};
	assert_int_equal(buf_puts(&b, ""), 0);
	for (int i = 0; i < n; i++) {
		if (strcmp(ents[i]->d_name, ".") && strcmp(ents[i]->d_name, ".."))
			assert_int_equal(buf_printf(&b, "%s\n", ents[i]->d_name), 0);
		free(ents[i]);
	}
	free(ents);
	return buf_steal(&b, NULL);
}

static void expect_source_untouched(struct learn_fx *l)
{
	char *names = listing(l->src);
	assert_string_equal(names, "broken\ntaken\n");
	free(names);
}

static void test_sec7_learn_skill_argument_checking(void **state)
{
	struct fx *f = *state;
	struct learn_fx l;
	learn_setup(f, &l, NULL);
	struct tool_result r = run(f, "learn_skill", "{\"description\": \"d\", \"body\": \"b\"}");
	expect_error(&r, "learn_skill: missing required argument 'name'");
	r = run(f, "learn_skill", "{\"name\": \"x\", \"body\": \"b\"}");
	expect_error(&r, "learn_skill: missing required argument 'description'");
	r = run(f, "learn_skill", "{\"name\": \"x\", \"description\": \"d\"}");
	expect_error(&r, "learn_skill: missing required argument 'body'");
	const char *bad_names[] = {"Bad", "a--b", "-a", "a/b", "..", ""};
	for (size_t i = 0; i < sizeof bad_names / sizeof *bad_names; i++) {
		char args[256];
		snprintf(args, sizeof args, "{\"name\": \"%s\", \"description\": \"d\", "
			 "\"body\": \"b\"}", bad_names[i]);
		r = run(f, "learn_skill", args);
		expect_error_has(&r, "argument 'name' must be 1 to 64 lower-case letters");
	}
	r = run(f, "learn_skill", "{\"name\": \"x\", \"description\": \"two\\nlines\", "
		"\"body\": \"b\"}");
	expect_error_has(&r, "argument 'description' must be one line");
	r = run(f, "learn_skill", "{\"name\": \"x\", \"description\": \"\", \"body\": \"b\"}");
	expect_error_has(&r, "argument 'description' must be one line");
	r = run(f, "learn_skill", "{\"name\": \"x\", \"description\": \"d\", \"body\": \" \\n\"}");
	expect_error(&r, "learn_skill: argument 'body' is empty; a skill needs instructions");
	r = run(f, "learn_skill", "{\"name\": \"x\", \"description\": \"d\", \"body\": \"b\", "
		"\"allowed_tools\": \"read\"}");
	expect_error_has(&r, "argument 'allowed_tools' must be an array");
	r = run(f, "learn_skill", "{\"name\": \"x\", \"description\": \"d\", \"body\": \"b\", "
		"\"allowed_tools\": [\"read\", 7]}");
	expect_error_has(&r, "allowed_tools: item 2 must be a tool name");
	r = run(f, "learn_skill", "{\"name\": \"x\", \"description\": \"d\", \"body\": \"b\", "
		"\"files\": [\"a\"]}");
	expect_error_has(&r, "argument 'files' must be an object");
	r = run(f, "learn_skill", "{\"name\": \"x\", \"description\": \"d\", \"body\": \"b\", "
		"\"files\": {\"a.txt\": 1}}");
	expect_error(&r, "learn_skill: files: the content of 'a.txt' must be a string");
	r = run(f, "learn_skill", "{\"name\": \"x\", \"description\": \"d\", \"body\": \"b\", "
		"\"files\": {\"a.bin\": \"x\\u0000y\"}}");
	expect_error_has(&r, "is not text");
	/* counts and sizes are capped */
	json_t *args = json_pack("{s:s, s:s, s:s, s:o}", "name", "x", "description", "d",
				 "body", "b", "files", json_object());
	for (int i = 0; i < 33; i++) {
		char k[16];
		snprintf(k, sizeof k, "f%d.txt", i);
		json_object_set_new(json_object_get(args, "files"), k, json_string("x"));
	}
	assert_int_equal(tools_exec(&f->ctx, "learn_skill", args, &r), 0);
	expect_error(&r, "learn_skill: argument 'files' has 33 files; at most 32");
	json_object_clear(json_object_get(args, "files"));
	char *big = malloc((256 << 10) + 2);
	assert_non_null(big);
	memset(big, 'x', (256 << 10) + 1);
	big[(256 << 10) + 1] = '\0';
	json_object_set_new(json_object_get(args, "files"), "big.txt", json_string(big));
	assert_int_equal(tools_exec(&f->ctx, "learn_skill", args, &r), 0);
	expect_error(&r, "learn_skill: files: 'big.txt' has 262145 bytes; at most 262144");
	free(big);
	json_decref(args);
	expect_source_untouched(&l);
	learn_free(&l);
}

static void test_sec7_learn_skill_refuses_bad_file_paths(void **state)
{
	struct fx *f = *state;
	struct learn_fx l;
	learn_setup(f, &l, NULL);
	static const struct {
		const char *path, *why;
	} bad[] = {
		{"/etc/cron.d/x", "is absolute"},
		{"../x", "contains '..'"},
		{"a/../../x", "contains '..'"},
		{"a/..", "contains '..'"},
		{".hidden", "starting with '.'"},
		{"a/./b", "starting with '.'"},
		{"a//b", "empty component"},
		{"a/", "empty component"},
		{"", "must be 1 to 200 bytes"},
		{"SKILL.md", "names a SKILL.md"},
		{"refs/skill.MD", "names a SKILL.md"},
		{"skills/sub/notes.md", "is under skills/"},
		{"a b.txt", "may hold only letters"},
		{"a\\\\b", "may hold only letters"},
		{"caf\\u00e9.txt", "may hold only letters"},
		{"a/b/c/d/e/f/g/h/i.txt", "more than 8 directories deep"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		char args[512];
		snprintf(args, sizeof args, "{\"name\": \"fresh\", \"description\": \"d\", "
			 "\"body\": \"b\", \"files\": {\"ok.txt\": \"x\", \"%s\": \"x\"}}",
			 bad[i].path);
		struct tool_result r = run(f, "learn_skill", args);
		if (!r.is_error || !strstr(r.text, bad[i].why))
			fail_msg("path '%s': %s", bad[i].path, r.text);
		tool_result_free(&r);
	}
	struct tool_result r = run(f, "learn_skill", "{\"name\": \"fresh\", \"description\": "
				   "\"d\", \"body\": \"b\", \"files\": {\"a\": \"x\", "
				   "\"a/b\": \"y\"}}");
	expect_error(&r, "learn_skill: files: 'a' is both a file and a directory");
	expect_source_untouched(&l);
	learn_free(&l);
}

static void test_sec7_learn_skill_refusals(void **state)
{
	struct fx *f = *state;
	struct learn_fx l;
	learn_setup(f, &l, NULL);
	/* a name the catalogue has: valid, invalid, or a sub-skill's */
	const char *taken[] = {"taken", "broken", "helper"};
	for (size_t i = 0; i < 3; i++) {
		char args[256], want[128];
		snprintf(args, sizeof args, "{\"name\": \"%s\", \"description\": \"d\", "
			 "\"body\": \"b\"}", taken[i]);
		snprintf(want, sizeof want, "learn_skill: a skill named '%s' exists already; "
			 "choose another name", taken[i]);
		struct tool_result r = run(f, "learn_skill", args);
		expect_error(&r, want);
	}
	/* something on disk the catalogue does not know yet */
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s/late", l.src);
	assert_int_equal(mkdir(p, 0755), 0);
	struct tool_result r = run(f, "learn_skill", "{\"name\": \"late\", \"description\": "
				   "\"d\", \"body\": \"b\"}");
	expect_error(&r, "learn_skill: the writable source already holds 'late'; choose "
		     "another name");
	assert_int_equal(rmdir(p), 0);
	/* a SKILL.md the parser refuses (over the file limit) never lands */
	json_t *args = json_pack("{s:s, s:s, s:o}", "name", "huge", "description", "d",
				 "body", json_null());
	char *body = malloc(SKILL_DEFAULT_FILE_MAX + 1);
	assert_non_null(body);
	memset(body, 'x', SKILL_DEFAULT_FILE_MAX);
	body[SKILL_DEFAULT_FILE_MAX] = '\0';
	json_object_set_new(args, "body", json_string(body));
	free(body);
	assert_int_equal(tools_exec(&f->ctx, "learn_skill", args, &r), 0);
	json_decref(args);
	expect_error_has(&r, "learn_skill: the skill is invalid: ");
	/* no writable source */
	f->ctx.learn_dir = NULL;
	r = run(f, "learn_skill", "{\"name\": \"fresh\", \"description\": \"d\", \"body\": \"b\"}");
	expect_error(&r, "learn_skill: no source is writable (sources[].writable)");
	/* a writable source that is one skill itself */
	snprintf(p, sizeof p, "%s/taken", l.src);
	f->ctx.learn_dir = p;
	r = run(f, "learn_skill", "{\"name\": \"fresh\", \"description\": \"d\", \"body\": \"b\"}");
	expect_error_has(&r, "the writable source is one skill itself");
	f->ctx.learn_dir = config_learn_dir(l.cfg);
	f->ctx.catalog = NULL; /* fail closed */
	r = run(f, "learn_skill", "{\"name\": \"fresh\", \"description\": \"d\", \"body\": \"b\"}");
	expect_error_has(&r, "the catalogue is not known");
	expect_source_untouched(&l);
	learn_free(&l);
}

/* A run cannot mint itself new grants: every allowed_tools item must lie
 * within the calling run's own list. */
static void test_sec7_learn_skill_never_grants_more_than_the_run(void **state)
{
	struct fx *f = *state;
	struct learn_fx l;
	learn_setup(f, &l, "[read, learn_skill, \"Bash(git log:*)\", AskUserQuestion]");
	static const struct {
		const char *item, *why;
	} wider[] = {
		{"write", "names a tool this run is not allowed"},
		{"WebSearch", "names a tool this run is not allowed"},
		{"Bash", "grants 'bash' for any command, but this run has it only for some"},
		{"Bash(git:*)", "admits commands this run's patterns for 'bash' do not"},
		{"Bash(git logx:*)", "admits commands this run's patterns for 'bash' do not"},
		{"Bash()", "grants nothing: empty command pattern"},
		{"Read(./src/**)", "'read' takes no command pattern"},
		{"Bash(git", "is not a tool name"},
	};
	for (size_t i = 0; i < sizeof wider / sizeof *wider; i++) {
		json_t *args = json_pack("{s:s, s:s, s:s, s:[s, s]}", "name", "fresh",
					 "description", "d", "body", "b", "allowed_tools",
					 "read", wider[i].item);
		struct tool_result r;
		assert_int_equal(tools_exec(&f->ctx, "learn_skill", args, &r), 0);
		json_decref(args);
		if (!r.is_error || !strstr(r.text, wider[i].why))
			fail_msg("item '%s': %s", wider[i].item, r.text);
		tool_result_free(&r);
	}
	expect_source_untouched(&l);
	/* within: the same, narrower, and Claude Code names for them */
	struct tool_result r = run(f, "learn_skill", "{\"name\": \"fresh\", \"description\": "
				   "\"d\", \"body\": \"b\", \"allowed_tools\": [\"Read\", "
				   "\"Bash(git log --oneline:*)\", \"bash(git log)\", "
				   "\"AskUserQuestion\"]}");
	if (r.is_error)
		fail_msg("%s", r.text);
	tool_result_free(&r);
	/* no list known: nothing can be granted */
	f->ctx.allow = NULL;
	r = run(f, "learn_skill", "{\"name\": \"other\", \"description\": \"d\", \"body\": "
		"\"b\", \"allowed_tools\": [\"read\"]}");
	expect_error_has(&r, "names a tool this run is not allowed");
	r = run(f, "learn_skill", "{\"name\": \"other\", \"description\": \"d\", \"body\": \"b\"}");
	if (r.is_error)
		fail_msg("%s", r.text);
	tool_result_free(&r);
	learn_free(&l);
}

/* A learned WebFetch(domain:...) item is judged by the domain rules: a
 * subdomain of the run's domain is within it, another domain is not. */
static void test_sec7_learn_skill_domain_items_use_the_domain_rules(void **state)
{
	struct fx *f = *state;
	struct learn_fx l;
	learn_setup(f, &l, "[\"WebFetch(domain:a.com)\"]");
	struct tool_result r = run(f, "learn_skill", "{\"name\": \"fresh\", \"description\": "
				   "\"d\", \"body\": \"b\", \"allowed_tools\": "
				   "[\"WebFetch(domain:docs.a.com)\"]}");
	if (r.is_error)
		fail_msg("%s", r.text);
	tool_result_free(&r);
	r = run(f, "learn_skill", "{\"name\": \"other\", \"description\": \"d\", "
		"\"body\": \"b\", \"allowed_tools\": [\"WebFetch(domain:b.com)\"]}");
	expect_error_has(&r, "admits commands this run's patterns for 'webfetch' do not");
	learn_free(&l);
}

static void test_sec7_learn_skill_writes_the_skill_atomically(void **state)
{
	struct fx *f = *state;
	struct learn_fx l;
	learn_setup(f, &l, NULL); /* policy all */
	int fds = count_fds();
	const char *args =
		"{\"name\": \"sum-csv\", "
		"\"description\": \"Sums a CSV column: say \\\"sum\\\" # or 'add' [x]\", "
		"\"body\": \"# Sum\\n\\n---\\nRun `scripts/sum.sh $ARGUMENTS`.\", "
		"\"allowed_tools\": [\"bash\", \"Read\", \"Bash(awk:*)\"], "
		"\"files\": {\"scripts/sum.sh\": \"#!/bin/sh\\nawk -F, '{s+=$1} END {print s}' \\\"$1\\\"\\n\", "
		"\"references/notes.md\": \"notes\\n\", \"README.txt\": \"\"}}";
	struct tool_result r = run(f, "learn_skill", args);
	if (r.is_error)
		fail_msg("%s", r.text);
	assert_non_null(strstr(r.text, "learned skill 'sum-csv': SKILL.md ("));
	assert_non_null(strstr(r.text, "and 3 other files written; allowed-tools: [bash, Read, "
			       "Bash(awk:*)]"));
	tool_result_free(&r);
	assert_int_equal(count_fds(), fds);
	/* nothing else in the source: the temporary directory was renamed */
	char *names = listing(l.src);
	assert_string_equal(names, "broken\nsum-csv\ntaken\n");
	free(names);
	char dir[PATH_MAX];
	snprintf(dir, sizeof dir, "%s/sum-csv", l.src);
	names = listing(dir);
	assert_string_equal(names, "README.txt\nSKILL.md\nreferences\nscripts\n");
	free(names);
	char *md = slurp(dir, "SKILL.md");
	assert_non_null(md);
	assert_string_equal(md, "---\n"
			    "name: \"sum-csv\"\n"
			    "description: \"Sums a CSV column: say \\\"sum\\\" # or 'add' [x]\"\n"
			    "allowed-tools: [\"bash\", \"Read\", \"Bash(awk:*)\"]\n"
			    "---\n"
			    "# Sum\n\n---\nRun `scripts/sum.sh $ARGUMENTS`.\n");
	free(md);
	char *sh = slurp(dir, "scripts/sum.sh");
	assert_string_equal(sh, "#!/bin/sh\nawk -F, '{s+=$1} END {print s}' \"$1\"\n");
	free(sh);
	char *notes = slurp(dir, "references/notes.md");
	assert_string_equal(notes, "notes\n");
	free(notes);
	struct stat st;
	char p[PATH_MAX + 64];
	snprintf(p, sizeof p, "%s/scripts/sum.sh", dir);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0755); /* a script: executable */
	snprintf(p, sizeof p, "%s/references/notes.md", dir);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0644);
	assert_int_equal(stat(dir, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0755);
	snprintf(p, sizeof p, "%s/scripts", dir);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0755);

	/* the catalogue finds it, valid, with the source's trust */
	struct catalog *cat = catalog_build(l.cfg, l.cat, NULL, NULL);
	assert_non_null(cat);
	const struct catalog_entry *e = catalog_find(cat, "sum-csv");
	assert_non_null(e);
	assert_true(e->skill->valid);
	assert_int_equal(e->trust, TRUST_COMMUNITY);
	assert_string_equal(e->skill->description, "Sums a CSV column: say \"sum\" # or 'add' [x]");
	assert_int_equal(e->skill->allowed_tools.n, 3);
	assert_int_equal(e->skill->warnings.n, 0);
	catalog_free(cat);

	/* the same name again: on disk now */
	r = run(f, "learn_skill", "{\"name\": \"sum-csv\", \"description\": \"d\", \"body\": \"b\"}");
	expect_error_has(&r, "already holds 'sum-csv'");

	/* a skill learned without allowed_tools declares none: it never
	 * opens a later run to policy all */
	r = run(f, "learn_skill", "{\"name\": \"plain\", \"description\": \"d\", \"body\": \"b\"}");
	if (r.is_error)
		fail_msg("%s", r.text);
	tool_result_free(&r);
	snprintf(dir, sizeof dir, "%s/plain", l.src);
	md = slurp(dir, "SKILL.md");
	assert_string_equal(md, "---\nname: \"plain\"\ndescription: \"d\"\nallowed-tools: []\n"
			    "---\nb\n");
	free(md);
	struct skill *s = skill_load(dir, NULL);
	assert_non_null(s);
	assert_true(s->valid);
	assert_true(s->allowed_tools.declared);
	assert_int_equal(s->allowed_tools.n, 0);
	skill_unref(s);
	learn_free(&l);
}

/* ---- python (issue: tools that do real work) ---- */

static void test_python_arguments_are_checked(void **state)
{
	struct fx *f = *state;
	make_ws(f);
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s/sub", f->ws);
	assert_int_equal(mkdir(p, 0755), 0);
	put_file(f->tmp, "outside.py", "print('outside')\n");
	struct tool_result r = run(f, "python", "{}");
	expect_error(&r, "python: give exactly one of 'code' (a program to run) and "
			 "'path' (a Python file in the workspace)");
	r = run(f, "python", "{\"code\": \"print(1)\", \"path\": \"a.py\"}");
	expect_error_has(&r, "give exactly one of 'code'");
	r = run(f, "python", "{\"code\": 5}");
	expect_error(&r, "python: argument 'code' must be a string");
	r = run(f, "python", "{\"code\": \"print(1)\", \"args\": \"a b\"}");
	expect_error(&r, "python: argument 'args' must be an array of strings");
	r = run(f, "python", "{\"code\": \"print(1)\", \"args\": [\"a\", 2]}");
	expect_error(&r, "python: argument 'args': item 2 is not a string");
	r = run(f, "python", "{\"path\": \"a\\u0000b.py\"}");
	expect_error(&r, "python: argument 'path' contains a NUL character");
	r = run(f, "python", "{\"path\": \"../outside.py\"}");
	expect_error(&r, "python: path escapes the workspace: ../outside.py");
	char json[PATH_MAX + 64];
	snprintf(json, sizeof json, "{\"path\": \"%s/outside.py\"}", f->tmp);
	r = run(f, "python", json);
	expect_error_has(&r, "python: path escapes the workspace");
	r = run(f, "python", "{\"path\": \"/etc/passwd\"}");
	expect_error(&r, "python: path escapes the workspace: /etc/passwd");
	r = run(f, "python", "{\"path\": \"nope.py\"}");
	expect_error(&r, "python: no such file: nope.py");
	r = run(f, "python", "{\"path\": \"sub\"}");
	expect_error(&r, "python: not a regular file: sub");
	/* A link out of the workspace is not followed. */
	snprintf(p, sizeof p, "%s/out.py", f->ws);
	char target[PATH_MAX];
	snprintf(target, sizeof target, "%s/outside.py", f->tmp);
	assert_int_equal(symlink(target, p), 0);
	r = run(f, "python", "{\"path\": \"out.py\"}");
	expect_error_has(&r, "python: path escapes the workspace");
}

static void test_python_runs_code_and_files(void **state)
{
	struct fx *f = *state;
	if (!box.python)
		skip();
	struct tool_result r = run(f, "python", "{\"code\": \"import sys, os\\n"
						"print(sys.argv[1:], os.getcwd())\\n"
						"print('\\u00e9t\\u00e9')\", "
						"\"args\": [\"a b\", \"-c\"]}");
	expect_ok(&r, "['a b', '-c'] " SANDBOX_WORKSPACE "\n\xc3\xa9t\xc3\xa9\n[exit 0]");
	make_ws(f);
	put_file(f->ws, "data.csv", "3\n4\n5\n");
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s/lib", f->ws);
	assert_int_equal(mkdir(p, 0755), 0);
	put_file(f->ws, "lib/sum.py", "import sys\n"
				      "total = sum(int(l) for l in open(sys.argv[1]))\n"
				      "print('total', total)\n"
				      "open('out.txt', 'w').write(str(total))\n");
	r = run(f, "python", "{\"path\": \"lib/sum.py\", \"args\": [\"data.csv\"]}");
	expect_ok(&r, "total 12\n[exit 0]");
	char *s = slurp(f->ws, "out.txt");
	assert_string_equal(s, "12");
	free(s);
	/* The workspace as the sandbox names it. */
	r = run(f, "python", "{\"path\": \"" SANDBOX_WORKSPACE "/lib/sum.py\", "
			     "\"args\": [\"data.csv\"]}");
	expect_ok(&r, "total 12\n[exit 0]");
	/* A file whose name looks like an option is still the program. */
	put_file(f->ws, "-V", "print('not an option')\n");
	r = run(f, "python", "{\"path\": \"-V\"}");
	expect_ok(&r, "not an option\n[exit 0]");
	/* Errors: a traceback and the exit status. */
	r = run(f, "python", "{\"code\": \"raise SystemExit(3)\"}");
	expect_error(&r, "[exit 3]");
	r = run(f, "python", "{\"code\": \"1/0\"}");
	expect_error_has(&r, "ZeroDivisionError");
	/* Confined like bash. */
	r = run(f, "python", "{\"code\": \"open('/usr/x', 'w')\"}");
	expect_error_has(&r, "Error");
	assert_int_equal(access("/usr/x", F_OK), -1);
}

/* python needs python3 in the sandbox's PATH: without it the tool is
 * unavailable, says why, and is not registered. */
static void test_python_unavailable_without_python3(void **state)
{
	struct fx *f = *state;
	/* A PATH whose directories lack python3. */
	char bin[PATH_MAX];
	snprintf(bin, sizeof bin, "%s/bin", f->tmp);
	assert_int_equal(mkdir(bin, 0755), 0);
	errno = 0;
	assert_null(sandbox_find("python3", bin, SANDBOX_NONE));
	assert_int_equal(errno, ENOENT);
	put_file(bin, "python3", "#!/bin/sh\n");
	char py[PATH_MAX + 16];
	snprintf(py, sizeof py, "%s/python3", bin);
	assert_null(sandbox_find("python3", bin, SANDBOX_NONE)); /* not executable */
	assert_int_equal(errno, EACCES);
	assert_int_equal(chmod(py, 0755), 0);
	char *found = sandbox_find("python3", bin, SANDBOX_NONE);
	assert_non_null(found);
	assert_string_equal(found, py);
	free(found);
	/* The sandbox does not show the test's directory. */
	assert_null(sandbox_find("python3", bin, SANDBOX_BWRAP));
	assert_null(sandbox_find("bin/python3", "/usr", SANDBOX_NONE));

	struct sandbox sb;
	assert_int_equal(sandbox_copy(&sb, &box), 0);
	free(sb.python);
	sb.python = NULL;
	if (sandbox_usable(&sb))
		assert_string_equal(tools_unavailable_why("python", &sb),
				    "python3 not found in the sandbox's PATH (" SANDBOX_PATH ")");
	struct config *c = config_default(NULL, 0);
	assert_non_null(c);
	assert_int_equal(tools_settle(c, &sb), 0);
	assert_false(strlist_has(&c->registered_tools, "python"));
	assert_true(strlist_has(&c->tools.unavailable, "python"));
	assert_non_null(config_tool_unavailable_why(c, "python"));
	if (sandbox_usable(&sb)) {
		assert_true(strlist_has(&c->registered_tools, "bash"));
		assert_non_null(strstr(config_tool_unavailable_why(c, "python"),
				       "python3 not found in the sandbox's PATH"));
	}
	config_free(c);
	/* A call that reaches it anyway is refused. */
	f->ctx.sandbox = &sb;
	struct tool_result r = run(f, "python", "{\"code\": \"print('ran')\"}");
	assert_true(r.is_error);
	assert_null(strstr(r.text, "ran\n"));
	assert_non_null(strstr(r.text, "not available"));
	tool_result_free(&r);
	sandbox_free(&sb);
}

/* ---- terminal ---- */

static void test_terminal_refuses_what_it_does_not_run(void **state)
{
	struct fx *f = *state;
	make_ws(f);
	put_file(f->ws, "keep.txt", "kept\n");
	struct tool_result r = run(f, "terminal", "{\"command\": \"rm -rf keep.txt\"}");
	expect_error(&r, "terminal: 'rm' is not a program terminal may run (give a bare "
			 "name, no path, and no shell syntax); it runs only: ls, cat, head, "
			 "tail, wc, grep, find, sort, diff, git");
	r = run(f, "terminal", "{\"command\": [\"rm\", \"keep.txt\"]}");
	expect_error_has(&r, "'rm' is not a program terminal may run");
	r = run(f, "terminal", "{\"command\": \"/bin/ls\"}");
	expect_error_has(&r, "'/bin/ls' is not a program terminal may run");
	r = run(f, "terminal", "{\"command\": \"../ls\"}");
	expect_error_has(&r, "is not a program terminal may run");
	r = run(f, "terminal", "{\"command\": \"ls; rm keep.txt\"}");
	expect_error_has(&r, "terminal: contains shell syntax ';'");
	r = run(f, "terminal", "{\"command\": \"ls | wc\"}");
	expect_error_has(&r, "terminal: contains shell syntax '|'");
	r = run(f, "terminal", "{\"command\": \"ls\\u0000rm\"}");
	expect_error_has(&r, "NUL");
	r = run(f, "terminal", "{\"command\": []}");
	expect_error(&r, "terminal: argument 'command' must start with the program to run");
	r = run(f, "terminal", "{\"command\": [\"\"]}");
	expect_error(&r, "terminal: argument 'command' must start with the program to run");
	r = run(f, "terminal", "{\"command\": [\"ls\", 1]}");
	expect_error(&r, "terminal: argument 'command': item 2 is not a string");
	r = run(f, "terminal", "{\"command\": 7}");
	expect_error(&r, "terminal: argument 'command' must be a string or an array of "
			 "strings");
	r = run(f, "terminal", "{}");
	expect_error(&r, "terminal: missing required argument 'command'");
	/* Allowed but absent here. */
	struct sandbox sb;
	assert_int_equal(sandbox_copy(&sb, &box), 0);
	assert_int_equal(strlist_add(&sb.commands_missing, "tree"), 0);
	f->ctx.sandbox = &sb;
	r = run(f, "terminal", "{\"command\": \"tree\"}");
	if (sandbox_usable(&sb))
		expect_error_has(&r, "'tree' is allowed but not installed in the sandbox's PATH");
	else
		tool_result_free(&r);
	sandbox_free(&sb);
	char *s = slurp(f->ws, "keep.txt");
	assert_string_equal(s, "kept\n");
	free(s);
}

static void test_terminal_runs_allowed_programs(void **state)
{
	struct fx *f = *state;
	make_ws(f);
	put_file(f->ws, "a b.txt", "one\ntwo\nthree\n");
	put_file(f->ws, "c.txt", "x\n");
	struct tool_result r = run(f, "terminal", "{\"command\": \"ls\"}");
	expect_ok(&r, "a b.txt\nc.txt\n[exit 0]");
	r = run(f, "terminal", "{\"command\": \"wc -l 'a b.txt'\"}");
	expect_ok(&r, "3 a b.txt\n[exit 0]");
	r = run(f, "terminal", "{\"command\": [\"head\", \"-n\", \"1\", \"a b.txt\"]}");
	expect_ok(&r, "one\n[exit 0]");
	/* Words are words: no shell sees them. */
	r = run(f, "terminal", "{\"command\": [\"cat\", \"$(id)\", \"*\"]}");
	assert_true(r.is_error);
	assert_non_null(strstr(r.text, "$(id)"));
	assert_null(strstr(r.text, "uid="));
	tool_result_free(&r);
	r = run(f, "terminal", "{\"command\": \"grep -c o 'a b.txt'\"}");
	expect_ok(&r, "2\n[exit 0]");
	r = run(f, "terminal", "{\"command\": \"cat nope\"}");
	expect_error_has(&r, "[exit 1]");
}

/* PATH inside holds the allowed programs only: a program started by the
 * allowed one finds nothing else by name. */
static void test_terminal_path_holds_only_its_programs(void **state)
{
	struct fx *f = *state;
	struct tools_config tc = {0};
	assert_int_equal(strlist_add(&tc.terminal_commands, "ls"), 0);
	assert_int_equal(strlist_add(&tc.terminal_commands, "env"), 0);
	assert_int_equal(strlist_add(&tc.terminal_commands, "no-such-program-here"), 0);
	struct sandbox sb;
	assert_int_equal(sandbox_probe(&tc, &sb), 0);
	strlist_free(&tc.terminal_commands);
	assert_int_equal(sb.commands.n, 2);
	assert_int_equal(sb.commands_missing.n, 1);
	assert_string_equal(sb.commands_missing.items[0], "no-such-program-here");
	f->ctx.sandbox = &sb;
	struct tool_result r = run(f, "terminal", "{\"command\": \"ls " SANDBOX_BIN "\"}");
	expect_ok(&r, "env\nls\n[exit 0]");
	r = run(f, "terminal", "{\"command\": \"env\"}");
	assert_false(r.is_error);
	assert_non_null(strstr(r.text, "PATH=" SANDBOX_BIN "\n"));
	tool_result_free(&r);
	/* env would start sh by name: there is none on this PATH. */
	r = run(f, "terminal", "{\"command\": \"env sh -c id\"}");
	expect_error_has(&r, "No such file or directory");
	r = run(f, "terminal", "{\"command\": \"bash\"}");
	expect_error(&r, "terminal: 'bash' is not a program terminal may run (give a bare "
			 "name, no path, and no shell syntax); it runs only: ls, env");
	sandbox_free(&sb);
	/* No program at all: unavailable. */
	struct tools_config none = {0};
	assert_int_equal(sandbox_probe(&none, &sb), 0);
	assert_string_equal(tools_unavailable_why("terminal", &sb),
			    "tools.terminal.commands is empty");
	sandbox_free(&sb);
}

static void test_terminal_git_log(void **state)
{
	struct fx *f = *state;
	if (!strlist_has(&box.commands, "git"))
		skip();
	struct tool_result r = run(f, "terminal", "{\"command\": \"git init -q\"}");
	expect_ok(&r, "[exit 0]");
	r = run(f, "terminal", "{\"command\": [\"git\", \"-c\", \"user.name=A\", \"-c\", "
			       "\"user.email=a@example.com\", \"commit\", \"-q\", "
			       "\"--allow-empty\", \"-m\", \"first commit\"]}");
	expect_ok(&r, "[exit 0]");
	r = run(f, "terminal", "{\"command\": \"git log --format=%s\"}");
	expect_ok(&r, "first commit\n[exit 0]");
}

/* ---- glob ---- */

/* A small tree: a.c b.h src/{x.c,y.h,deep/z.c} "dir with space/q.c",
 * .git/config, link -> src, out -> the directory above the workspace. */
static void make_tree(struct fx *f)
{
	make_ws(f);
	const char *dirs[] = {"src", "src/deep", "dir with space", ".git"};
	char p[PATH_MAX];
	for (size_t i = 0; i < 4; i++) {
		snprintf(p, sizeof p, "%s/%s", f->ws, dirs[i]);
		assert_int_equal(mkdir(p, 0755), 0);
	}
	put_file(f->ws, "a.c", "int a;\n");
	put_file(f->ws, "b.h", "hello header\n");
	put_file(f->ws, "src/x.c", "int main(void)\n{\n\treturn 0; /* hello */\n}\n");
	put_file(f->ws, "src/y.h", "HELLO\n");
	put_file(f->ws, "src/deep/z.c", "hello deep\n");
	put_file(f->ws, "dir with space/q.c", "q\n");
	put_file(f->ws, ".git/config", "hello from git\n");
	put_file(f->tmp, "secret.c", "hello secret\n");
	snprintf(p, sizeof p, "%s/link", f->ws);
	assert_int_equal(symlink("src", p), 0);
	snprintf(p, sizeof p, "%s/out", f->ws);
	assert_int_equal(symlink(f->tmp, p), 0);
}

static void test_glob_lists_matching_paths_sorted(void **state)
{
	struct fx *f = *state;
	make_tree(f);
	int fds = count_fds();
	struct tool_result r = run(f, "glob", "{\"pattern\": \"*.c\"}");
	expect_ok(&r, "a.c\n");
	r = run(f, "glob", "{\"pattern\": \"**/*.c\"}");
	expect_ok(&r, "a.c\ndir with space/q.c\nsrc/deep/z.c\nsrc/x.c\n");
	r = run(f, "glob", "{\"pattern\": \"src/*.h\"}");
	expect_ok(&r, "src/y.h\n");
	r = run(f, "glob", "{\"pattern\": \"*\"}");
	expect_ok(&r, "a.c\nb.h\ndir with space/\nlink\nout\nsrc/\n");
	r = run(f, "glob", "{\"pattern\": \"src/**\"}"); /* ** takes none too */
	expect_ok(&r, "src/\nsrc/deep/\nsrc/deep/z.c\nsrc/x.c\nsrc/y.h\n");
	r = run(f, "glob", "{\"pattern\": \"**/deep/*\"}");
	expect_ok(&r, "src/deep/z.c\n");
	r = run(f, "glob", "{\"pattern\": \"*.c\", \"path\": \"src\"}");
	expect_ok(&r, "src/x.c\n");
	r = run(f, "glob", "{\"pattern\": \"./*.[ch]\", \"path\": \"" SANDBOX_WORKSPACE "/src/\"}");
	expect_ok(&r, "src/x.c\nsrc/y.h\n");
	/* Through a link inside the workspace when asked to start there. */
	r = run(f, "glob", "{\"pattern\": \"*.h\", \"path\": \"link\"}");
	expect_ok(&r, "link/y.h\n");
	r = run(f, "glob", "{\"pattern\": \"**/*.xyz\"}");
	expect_ok(&r, "no paths match **/*.xyz in .\n");
	/* .git is entered only when asked. */
	r = run(f, "glob", "{\"pattern\": \"**/config\"}");
	expect_ok(&r, "no paths match **/config in .\n");
	r = run(f, "glob", "{\"pattern\": \"*\", \"path\": \".git\"}");
	expect_ok(&r, ".git/config\n");
	assert_int_equal(count_fds(), fds);
}

static void test_glob_stays_in_the_workspace(void **state)
{
	struct fx *f = *state;
	make_tree(f);
	/* Links are listed, never entered: nothing of the directory above. */
	struct tool_result r = run(f, "glob", "{\"pattern\": \"out/*\"}");
	expect_ok(&r, "no paths match out/* in .\n");
	r = run(f, "glob", "{\"pattern\": \"**/secret.c\"}");
	expect_ok(&r, "no paths match **/secret.c in .\n");
	r = run(f, "glob", "{\"pattern\": \"*\", \"path\": \"out\"}");
	expect_error(&r, "glob: path escapes the workspace: out");
	r = run(f, "glob", "{\"pattern\": \"*\", \"path\": \"..\"}");
	expect_error(&r, "glob: path escapes the workspace: ..");
	r = run(f, "glob", "{\"pattern\": \"*\", \"path\": \"/etc\"}");
	expect_error(&r, "glob: path escapes the workspace: /etc");
	r = run(f, "glob", "{\"pattern\": \"../*\"}");
	expect_error(&r, "glob: the pattern may not contain '..': give the directory as "
			 "'path'");
	r = run(f, "glob", "{\"pattern\": \"/etc/*\"}");
	expect_error_has(&r, "glob: the pattern must be relative");
	r = run(f, "glob", "{\"pattern\": \"\"}");
	expect_error(&r, "glob: the pattern is empty");
	r = run(f, "glob", "{}");
	expect_error(&r, "glob: missing required argument 'pattern'");
	r = run(f, "glob", "{\"pattern\": \"*\", \"path\": \"nope\"}");
	expect_error(&r, "glob: no such file: nope");
	r = run(f, "glob", "{\"pattern\": \"*\", \"path\": \"a.c\"}");
	expect_error(&r, "glob: not a directory: a.c");
}

static void test_glob_caps_its_result(void **state)
{
	struct fx *f = *state;
	make_ws(f);
	char name[64];
	for (int i = 0; i < 1005; i++) {
		snprintf(name, sizeof name, "f%04d.txt", i);
		put_file(f->ws, name, "");
	}
	struct tool_result r = run(f, "glob", "{\"pattern\": \"*.txt\"}");
	assert_false(r.is_error);
	assert_non_null(strstr(r.text, "f0000.txt\nf0001.txt\n"));
	assert_non_null(strstr(r.text, "f0999.txt\n[more than 1000 paths match: only the "
				       "first 1000 found are listed"));
	assert_null(strstr(r.text, "f1000.txt"));
	tool_result_free(&r);
	f->ctx.output_max = 100;
	r = run(f, "glob", "{\"pattern\": \"*.txt\"}");
	assert_false(r.is_error);
	assert_non_null(strstr(r.text, "f0009.txt\n[990 more paths not shown: the output "
				       "is capped at 100 bytes"));
	tool_result_free(&r);
}

/* ---- grep ---- */

static void test_grep_finds_lines_sorted(void **state)
{
	struct fx *f = *state;
	make_tree(f);
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s/bin.dat", f->ws);
	FILE *fp = fopen(p, "w");
	assert_non_null(fp);
	fwrite("hello\0binary\n", 1, 13, fp);
	fclose(fp);
	put_file(f->ws, "latin1.txt", "hello caf\xe9\n");
	int fds = count_fds();
	struct tool_result r = run(f, "grep", "{\"pattern\": \"hello\"}");
	expect_ok(&r, "b.h:1: hello header\n"
		      "src/deep/z.c:1: hello deep\n"
		      "src/x.c:3: \treturn 0; /* hello */\n"
		      "[2 binary files skipped]\n");
	r = run(f, "grep", "{\"pattern\": \"hello\", \"ignore_case\": true, \"path\": \"src\"}");
	expect_ok(&r, "src/deep/z.c:1: hello deep\n"
		      "src/x.c:3: \treturn 0; /* hello */\n"
		      "src/y.h:1: HELLO\n");
	r = run(f, "grep", "{\"pattern\": \"^(int|HELLO)\", \"glob\": \"*.c\"}");
	expect_ok(&r, "a.c:1: int a;\nsrc/x.c:1: int main(void)\n");
	r = run(f, "grep", "{\"pattern\": \"^(int|HELLO)\", \"glob\": \"src/*\"}");
	expect_ok(&r, "src/x.c:1: int main(void)\nsrc/y.h:1: HELLO\n");
	r = run(f, "grep", "{\"pattern\": \"return [0-9]+;\", \"path\": \"src/x.c\"}");
	expect_ok(&r, "src/x.c:3: \treturn 0; /* hello */\n");
	r = run(f, "grep", "{\"pattern\": \"nothing-like-this\"}");
	expect_ok(&r, "no lines match nothing-like-this in .\n[2 binary files skipped]\n");
	/* Through a link only when the path names it; .git only when asked. */
	r = run(f, "grep", "{\"pattern\": \"HELLO\", \"path\": \"link\"}");
	expect_ok(&r, "link/y.h:1: HELLO\n");
	r = run(f, "grep", "{\"pattern\": \"git\", \"path\": \".git\"}");
	expect_ok(&r, ".git/config:1: hello from git\n");
	assert_int_equal(count_fds(), fds);
}

static void test_grep_arguments_and_confinement(void **state)
{
	struct fx *f = *state;
	make_tree(f);
	struct tool_result r = run(f, "grep", "{\"pattern\": \"(\"}");
	expect_error_has(&r, "grep: invalid regular expression (POSIX extended syntax): ");
	r = run(f, "grep", "{\"pattern\": \"\"}");
	expect_error(&r, "grep: the pattern is empty");
	/* The pattern runs in the daemon: nothing that costs it gigabytes
	 * (nested intervals) or exponential time (back-references). */
	r = run(f, "grep", "{\"pattern\": \"((a{1,100}){1,100}){1,100}\"}");
	expect_error_has(&r, "grep: the pattern is refused: the pattern's repetitions");
	r = run(f, "grep", "{\"pattern\": \"(.{1,30}){1,30}x\"}");
	expect_error_has(&r, "grep: the pattern is refused: the pattern's repetitions");
	r = run(f, "grep", "{\"pattern\": \"(.*)*\\\\1\\\\1x\"}");
	expect_error_has(&r, "grep: the pattern is refused: back-references");
	r = run(f, "grep", "{\"pattern\": \"[\\\\1]{1,8}(ab|c){2,10}\"}");
	expect_ok(&r, "no lines match [\\1]{1,8}(ab|c){2,10} in .\n");
	r = run(f, "grep", "{\"pattern\": \"a\", \"ignore_case\": \"yes\"}");
	expect_error(&r, "grep: argument 'ignore_case' must be true or false");
	r = run(f, "grep", "{\"pattern\": \"a\", \"glob\": \"../*\"}");
	expect_error_has(&r, "grep: glob: the pattern may not contain '..'");
	r = run(f, "grep", "{\"pattern\": \"secret\", \"path\": \"out\"}");
	expect_error(&r, "grep: path escapes the workspace: out");
	r = run(f, "grep", "{\"pattern\": \"secret\", \"path\": \"out/secret.c\"}");
	expect_error(&r, "grep: path escapes the workspace: out/secret.c");
	r = run(f, "grep", "{\"pattern\": \"secret\", \"path\": \"../secret.c\"}");
	expect_error(&r, "grep: path escapes the workspace: ../secret.c");
	r = run(f, "grep", "{\"pattern\": \"secret\"}");
	expect_ok(&r, "no lines match secret in .\n");
	r = run(f, "grep", "{\"pattern\": \"x\", \"path\": \"nope\"}");
	expect_error(&r, "grep: no such file: nope");
}

static void test_grep_caps_lines_and_output(void **state)
{
	struct fx *f = *state;
	make_ws(f);
	struct buf b = {0};
	for (int i = 0; i < 600; i++)
		assert_int_equal(buf_printf(&b, "match %d\n", i), 0);
	put_file(f->ws, "many.txt", b.data);
	buf_free(&b);
	struct tool_result r = run(f, "grep", "{\"pattern\": \"match\"}");
	assert_false(r.is_error);
	assert_non_null(strstr(r.text, "many.txt:500: match 499\n[more than 500 lines "
				       "match: only the first 500 are listed"));
	assert_null(strstr(r.text, "match 500"));
	tool_result_free(&r);
	/* A long line is cut at 500 bytes, at a character boundary. */
	for (int i = 0; i < 499; i++)
		assert_int_equal(buf_puts(&b, "x"), 0);
	assert_int_equal(buf_puts(&b, "\xc3\xa9 tail\n"), 0);
	put_file(f->ws, "long.txt", b.data);
	buf_free(&b);
	r = run(f, "grep", "{\"pattern\": \"tail\", \"path\": \"long.txt\"}");
	assert_false(r.is_error);
	assert_int_equal(strlen(r.text), strlen("long.txt:1: ") + 499 + strlen(" [line cut]\n"));
	assert_non_null(strstr(r.text, "x [line cut]\n"));
	tool_result_free(&r);
	f->ctx.output_max = 200;
	r = run(f, "grep", "{\"pattern\": \"match\"}");
	assert_false(r.is_error);
	assert_non_null(strstr(r.text, "[output capped at 200 bytes"));
	assert_true(strstr(r.text, "[output capped") - r.text <= 200);
	tool_result_free(&r);
}

/* The glob patterns themselves. */
static void test_globpat_matching(void **state)
{
	(void)state;
	struct globpat g;
	const char *why;
	assert_int_equal(globpat_parse(&g, "**/**/a/*.c", &why), 0);
	assert_int_equal(g.parts.n, 3); /* repeated ** collapsed */
	assert_true(globpat_match(&g, "a/x.c"));
	assert_true(globpat_match(&g, "p/q/a/x.c"));
	assert_false(globpat_match(&g, "a/b/x.c"));
	assert_false(globpat_match(&g, "x.c"));
	assert_true(globpat_may_match_below(&g, "p/q"));
	assert_true(globpat_may_match_below(&g, ""));
	globpat_free(&g);
	assert_int_equal(globpat_parse(&g, "src/*.h", &why), 0);
	assert_true(globpat_match(&g, "src/a.h"));
	assert_false(globpat_match(&g, "src/sub/a.h"));
	assert_false(globpat_match(&g, "lib/a.h"));
	assert_true(globpat_may_match_below(&g, "src"));
	assert_false(globpat_may_match_below(&g, "lib"));
	assert_false(globpat_may_match_below(&g, "src/sub"));
	globpat_free(&g);
	assert_int_equal(globpat_parse(&g, ".hidden/[ab]?", &why), 0);
	assert_true(globpat_match(&g, ".hidden/ax"));
	assert_false(globpat_match(&g, ".hidden/cx"));
	globpat_free(&g);
	/* Many ** parts stay linear: this would take ages by backtracking. */
	assert_int_equal(globpat_parse(&g, "**/a/**/a/**/a/**/a/**/a/**/b", &why), 0);
	struct buf p = {0};
	for (int i = 0; i < 60; i++)
		assert_int_equal(buf_puts(&p, "a/"), 0);
	assert_int_equal(buf_puts(&p, "c"), 0);
	assert_false(globpat_match(&g, p.data));
	buf_free(&p);
	globpat_free(&g);
	assert_int_equal(globpat_parse(&g, "a/../b", &why), -1);
	assert_int_equal(globpat_parse(&g, "/a", &why), -1);
	assert_int_equal(globpat_parse(&g, "./", &why), -1);
	assert_string_equal(why, "the pattern names no file (only '.' and '/')");
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
#define TS(fn) cmocka_unit_test_setup_teardown(fn, setup_sandboxed, teardown)
	const struct CMUnitTest tests[] = {
		T(test_sec7_every_schema_is_a_valid_function_tool),
		T(test_sec7_schemas_in_given_order_unknown_skipped),
		T(test_R7_side_effects_per_tool),
		T(test_schemas_pick_equals_parsing),
		T(test_sec7_unavailable_tools_give_error_result),
		T(test_sec7_bad_arguments_name_the_argument),
		T(test_sec7_write_read_round_trip),
		T(test_sec7_write_creates_subdirectories),
		T(test_sec7_read_refuses_dotdot_escape),
		T(test_sec7_absolute_paths_outside_are_refused),
		T(test_sec7_absolute_path_inside_workspace_allowed),
		T(test_sec7_symlink_escapes_are_refused),
		T(test_sec7_symlink_inside_workspace_is_followed),
		T(test_sec7_fallback_resolution_refuses_escapes),
		T(test_sec7_workspace_parent_writable_by_others_is_refused),
		T(test_sec7_read_missing_and_special_files),
		T(test_sec7_read_size_cap),
		T(test_sec7_read_offset_and_limit),
		T(test_sec7_edit_replaces_unique_string),
		T(test_sec7_edit_missing_or_ambiguous_old_string),
		TS(test_sec7_bash_output_and_exit_code),
		TS(test_sec7_bash_runs_in_workspace),
		TS(test_sec7_bash_environment_is_scrubbed),
		TS(test_sec7_bash_timeout_kills_command),
		TS(test_sec7_bash_output_cap),
		TS(test_sec7_bash_cancel_kills_command),
		TS(test_sec7_bash_is_confined),
		TS(test_sec7_bash_memory_filesystems_are_capped),
		TS(test_D3_patterned_bash_runs_argv_without_shell),
		TS(test_D3_patterned_call_ignores_home_and_git_config),
		T(test_sec7_no_sandbox_program_fails_closed),
		T(test_sec7_sandbox_program_that_does_not_confine_fails_closed),
		T(test_sec7_bwrap_missing_from_path_fails_closed),
		T(test_sec7_sandbox_none_runs_unconfined),
		T(test_sec7_learn_skill_argument_checking),
		T(test_sec7_learn_skill_refuses_bad_file_paths),
		T(test_sec7_learn_skill_refusals),
		T(test_sec7_learn_skill_never_grants_more_than_the_run),
		T(test_sec7_learn_skill_writes_the_skill_atomically),
		T(test_sec7_learn_skill_domain_items_use_the_domain_rules),
		T(test_python_arguments_are_checked),
		TS(test_python_runs_code_and_files),
		T(test_python_unavailable_without_python3),
		T(test_terminal_refuses_what_it_does_not_run),
		TS(test_terminal_runs_allowed_programs),
		TS(test_terminal_path_holds_only_its_programs),
		TS(test_terminal_git_log),
		T(test_glob_lists_matching_paths_sorted),
		T(test_glob_stays_in_the_workspace),
		T(test_glob_caps_its_result),
		T(test_grep_finds_lines_sorted),
		T(test_grep_arguments_and_confinement),
		T(test_grep_caps_lines_and_output),
		T(test_globpat_matching),
	};
	/* The default configuration's terminal programs. */
	struct config *dc = config_default(NULL, 0);
	if (!dc || sandbox_probe(&dc->tools, &box) < 0)
		return 1;
	config_free(dc);
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	sandbox_free(&box);
	return rc;
}
