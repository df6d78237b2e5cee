/* Unit tests for core/runs: which ids name a run (DESIGN.md section 6;
 * issue "Confinement").
 * The engine is opened without its watcher; the run manager with its
 * workers, over a state database in a temporary directory. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine.h"
#include "runs.h"
#include "strlist.h"
#include "view.h"

#include "testutil.h"

struct fixture {
	char *root;
	char *skills;
	char *db;
	struct engine *e;
};

static void start_runs(struct fixture *f)
{
	char *err = NULL;
	if (engine_start_runs(f->e, f->db, &err) < 0)
		fail_msg("engine_start_runs: %s", err ? err : "?");
	assert_non_null(engine_runs(f->e));
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof *f);
	assert_non_null(f);
	f->root = test_tmpdir("runstest");
	f->skills = test_join(f->root, "skills");
	assert_int_equal(mkdir(f->skills, 0755), 0);
	char *dir = test_join(f->skills, "alpha");
	assert_int_equal(mkdir(dir, 0755), 0);
	char *md = test_join(dir, "SKILL.md");
	test_write_text(md, "---\nname: alpha\ndescription: a skill\n---\nBody.\n");
	free(md);
	free(dir);
	f->db = test_join(f->root, "state/state.db");
	struct engine_options opt = { 0 };
	const char *dirs[1] = { f->skills };
	opt.dirs = dirs;
	opt.ndirs = 1;
	char *err = NULL;
	f->e = engine_open(&opt, &err);
	if (!f->e)
		fail_msg("engine_open: %s", err ? err : "?");
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	engine_close(f->e);
	free(f->skills);
	free(f->db);
	test_rm_tree(f->root);
	free(f);
	return 0;
}

/* A string of n copies of c followed by tail. */
static char *repeat(char c, size_t n, const char *tail)
{
	char *s = malloc(n + strlen(tail) + 1);
	assert_non_null(s);
	memset(s, c, n);
	strcpy(s + n, tail);
	return s;
}

static int attr_rc(struct engine *e, const char *path, struct view_attr *a)
{
	struct snapshot *s = engine_snapshot(e);
	int rc = view_getattr(s, path, a);
	snapshot_unref(s);
	return rc;
}

static int attr_rc_f(struct engine *e, struct view_attr *a, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int attr_rc_f(struct engine *e, struct view_attr *a, const char *fmt, ...)
{
	char path[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(path, sizeof path, fmt, ap);
	va_end(ap);
	return attr_rc(e, path, a);
}

/* Section 6: an id is 1-64 characters. One longer is no run at all, not
 * the run of its first 64 characters (it was cut to fit a buffer). */
static void test_sec6_overlong_id_names_no_run(void **state)
{
	struct fixture *f = *state;
	start_runs(f);
	struct runs *r = engine_runs(f->e);
	char *id64 = repeat('a', RUN_ID_MAX, "");
	char *id65 = repeat('a', RUN_ID_MAX, "b");
	char *id100 = repeat('a', 100, "");
	assert_int_equal(runs_create(r, id64), 0);
	struct view_attr a;
	assert_int_equal(attr_rc_f(f->e, &a, "runs/%s", id64), 0);
	assert_int_equal(attr_rc_f(f->e, &a, "runs/%s/status", id64), 0);

	assert_int_equal(attr_rc_f(f->e, &a, "runs/%s", id65), -ENOENT);
	assert_int_equal(attr_rc_f(f->e, &a, "runs/%s/status", id65), -ENOENT);
	assert_int_equal(attr_rc_f(f->e, &a, "runs/%s/prompt", id100), -ENOENT);
	struct snapshot *s = engine_snapshot(f->e);
	struct view_dirent *ents = NULL;
	size_t n = 0;
	char path[256];
	snprintf(path, sizeof path, "runs/%s", id65);
	assert_int_equal(view_readdir(s, path, &ents, &n), -ENOENT);
	char *data = NULL;
	size_t len = 0;
	snprintf(path, sizeof path, "runs/%s/status", id65);
	assert_int_equal(view_read_all(s, path, &data, &len), -ENOENT);
	snapshot_unref(s);
	char id[RUN_ID_MAX + 1];
	assert_false(view_run_of(path, id, sizeof id));

	/* Every entry point of the run manager: no such run. */
	assert_false(runs_exists(r, id65));
	struct run_file rf;
	assert_int_equal(runs_stat_file(r, id65, "", &rf), -ENOENT);
	assert_int_equal(runs_stat_file(r, id65, "prompt", &rf), -ENOENT);
	struct strlist names = { 0 };
	assert_int_equal(runs_readdir(r, id65, "", &names), -ENOENT);
	assert_int_equal(runs_write(r, id65, "prompt", "x", 1, 0), -ENOENT);
	assert_int_equal(runs_write(r, id65, "ctl", "cancel\n", 7, 0), -ENOENT);
	assert_int_equal(runs_writable(r, id65, "prompt"), -ENOENT);
	assert_int_equal(runs_truncate(r, id65, "prompt", 0), -ENOENT);
	enum runstate st;
	assert_int_equal(runs_state(r, id65, &st), -ENOENT);
	struct timespec ts;
	assert_int_equal(runs_changed_at(r, id65, &ts), -ENOENT);
	char status[64];
	uint64_t handle = 0;
	assert_int_equal(runs_wait(r, id65, NULL, NULL, status, sizeof status, &handle), -ENOENT);
	assert_int_equal(runs_remove(r, id65), -ENOENT);
	/* mkdir: within NAME_MAX, so EINVAL (not ENAMETOOLONG). */
	assert_int_equal(runs_create(r, id65), -EINVAL);
	assert_int_equal(runs_create(r, "bad:id"), -EINVAL);
	assert_true(runs_exists(r, id64));
	assert_int_equal(runs_list(r, &names), 0);
	assert_int_equal(names.n, 1);
	assert_string_equal(names.items[0], id64);
	strlist_free(&names);
	assert_int_equal(runs_remove(r, id64), 0);
	free(id64);
	free(id65);
	free(id100);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_sec6_overlong_id_names_no_run, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
