/* Tests for core/workdir: which directories runs/<id>/workdir accepts
 * (runs.workdir_roots; issue "A project directory"): a directory at or
 * under a root, with symbolic links resolved on both sides; never a
 * file, a missing directory, a path outside the roots, a link leading out
 * of them, or the state directory. */
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

#include "strlist.h"
#include "workdir.h"

#include "testutil.h"

struct fx {
	char *tmp;   /* canonical */
	char *root;  /* tmp/projects: the one root */
	struct strlist roots;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	assert_non_null(f);
	f->tmp = test_tmpdir("skillfs-workdir");
	f->root = test_join(f->tmp, "projects");
	assert_int_equal(mkdir(f->root, 0755), 0);
	assert_int_equal(strlist_add(&f->roots, f->root), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	strlist_free(&f->roots);
	free(f->root);
	test_rm_tree(f->tmp);
	free(f);
	return 0;
}

static char *mkdir_in(const char *dir, const char *name)
{
	char *p = test_join(dir, name);
	assert_int_equal(mkdir(p, 0755), 0);
	return p;
}

/* Checks path: 0 and the resolved path, or -EINVAL and the reason holding
 * want. Returns the resolved path (or NULL), which the caller frees. */
static char *check(struct fx *f, const char *path, const char *avoid, int want_rc,
		   const char *want)
{
	char *res = NULL, *why = NULL;
	struct strlist av = {0};
	if (avoid)
		assert_int_equal(strlist_add(&av, avoid), 0);
	int rc = workdir_check(&f->roots, path, avoid ? &av : NULL, &res, &why);
	strlist_free(&av);
	if (rc != want_rc)
		fail_msg("%s: rc %d, want %d (%s)", path, rc, want_rc, why ? why : "-");
	if (rc == 0) {
		assert_non_null(res);
		assert_null(why);
	} else {
		assert_null(res);
		assert_non_null(why);
		if (!strstr(why, want))
			fail_msg("%s: reason '%s' lacks '%s'", path, why, want);
	}
	free(why);
	return res;
}

static void test_empty_roots_turn_workdir_off(void **state)
{
	struct fx *f = *state;
	strlist_free(&f->roots);
	char *p = mkdir_in(f->tmp, "anything");
	assert_null(check(f, p, NULL, -EINVAL, "runs.workdir_roots is empty: workdir is off"));
	free(p);
}

static void test_a_directory_under_a_root_is_taken_resolved(void **state)
{
	struct fx *f = *state;
	char *p = mkdir_in(f->root, "app");
	char *q = mkdir_in(p, "src");
	char *res = check(f, q, NULL, 0, NULL);
	assert_string_equal(res, q);
	free(res);
	/* Written untidily: the resolved form is kept. */
	char messy[4096];
	snprintf(messy, sizeof messy, "%s//./src/../src/", p);
	res = check(f, messy, NULL, 0, NULL);
	assert_string_equal(res, q);
	free(res);
	/* The root itself is a directory under the roots. */
	res = check(f, f->root, NULL, 0, NULL);
	assert_string_equal(res, f->root);
	free(res);
	free(q);
	free(p);
}

static void test_outside_missing_file_and_relative_are_refused(void **state)
{
	struct fx *f = *state;
	char *out = mkdir_in(f->tmp, "elsewhere");
	assert_null(check(f, out, NULL, -EINVAL, "is not under runs.workdir_roots"));
	/* A sibling whose name starts like the root is not inside it. */
	char *sib = mkdir_in(f->tmp, "projects2");
	assert_null(check(f, sib, NULL, -EINVAL, "is not under runs.workdir_roots"));
	/* .. climbing out of the root. */
	char up[4096];
	snprintf(up, sizeof up, "%s/../elsewhere", f->root);
	assert_null(check(f, up, NULL, -EINVAL, "not under runs.workdir_roots"));
	char *missing = test_join(f->root, "missing");
	assert_null(check(f, missing, NULL, -EINVAL, "no such directory"));
	char *file = test_join(f->root, "notes.txt");
	test_write_text(file, "x\n");
	assert_null(check(f, file, NULL, -EINVAL, "is not a directory"));
	assert_null(check(f, "projects", NULL, -EINVAL, "must be an absolute path"));
	assert_null(check(f, "", NULL, -EINVAL, "must be an absolute path"));
	free(file);
	free(missing);
	free(sib);
	free(out);
}

static void test_a_link_out_of_the_roots_is_refused(void **state)
{
	struct fx *f = *state;
	char *out = mkdir_in(f->tmp, "secret");
	char *link = test_join(f->root, "escape");
	assert_int_equal(symlink(out, link), 0);
	assert_null(check(f, link, NULL, -EINVAL, "which is not under runs.workdir_roots"));
	/* A link to a file inside is not a directory either. */
	char *file = test_join(f->root, "f");
	test_write_text(file, "x");
	char *flink = test_join(f->root, "flink");
	assert_int_equal(symlink(file, flink), 0);
	assert_null(check(f, flink, NULL, -EINVAL, "is not a directory"));
	/* A link that stays inside is followed: its target is the workdir. */
	char *in = mkdir_in(f->root, "real");
	char *ilink = test_join(f->root, "alias");
	assert_int_equal(symlink("real", ilink), 0);
	char *res = check(f, ilink, NULL, 0, NULL);
	assert_string_equal(res, in);
	free(res);
	free(ilink);
	free(in);
	free(flink);
	free(file);
	free(link);
	free(out);
}

static void test_roots_are_resolved_too(void **state)
{
	struct fx *f = *state;
	/* The root is named through a link: a workdir named by the real
	 * path is inside it, and one named through the link as well. */
	char *link = test_join(f->tmp, "via");
	assert_int_equal(symlink(f->root, link), 0);
	strlist_free(&f->roots);
	assert_int_equal(strlist_add(&f->roots, link), 0);
	char *p = mkdir_in(f->root, "app");
	char *res = check(f, p, NULL, 0, NULL);
	assert_string_equal(res, p);
	free(res);
	char via[4096];
	snprintf(via, sizeof via, "%s/app", link);
	res = check(f, via, NULL, 0, NULL);
	assert_string_equal(res, p);
	free(res);
	/* A root that does not exist admits nothing; the next one still does. */
	strlist_free(&f->roots);
	assert_int_equal(strlist_add(&f->roots, "/nonexistent/skillfs-root"), 0);
	assert_null(check(f, p, NULL, -EINVAL, "/nonexistent/skillfs-root"));
	assert_int_equal(strlist_add(&f->roots, f->root), 0);
	res = check(f, p, NULL, 0, NULL);
	free(res);
	free(p);
	free(link);
}

static void test_what_skillfs_keeps_is_never_a_workdir(void **state)
{
	struct fx *f = *state;
	char *st = mkdir_in(f->root, "state");
	char *ws = mkdir_in(st, "workspaces");
	/* The state directory itself, a directory inside it, and one that
	 * holds it. */
	assert_null(check(f, st, st, -EINVAL, "which skillfs keeps to itself"));
	assert_null(check(f, ws, st, -EINVAL, "which skillfs keeps to itself"));
	assert_null(check(f, f->root, st, -EINVAL, "which skillfs keeps to itself"));
	char *other = mkdir_in(f->root, "other");
	char *res = check(f, other, st, 0, NULL);
	free(res);
	free(other);
	free(ws);
	free(st);
}

static void test_is_within(void **state)
{
	(void)state;
	assert_true(workdir_is_within("/a/b", "/a"));
	assert_true(workdir_is_within("/a", "/a"));
	assert_true(workdir_is_within("/a", "/"));
	assert_false(workdir_is_within("/ab", "/a"));
	assert_false(workdir_is_within("/a", "/a/b"));
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_empty_roots_turn_workdir_off),
		T(test_a_directory_under_a_root_is_taken_resolved),
		T(test_outside_missing_file_and_relative_are_refused),
		T(test_a_link_out_of_the_roots_is_refused),
		T(test_roots_are_resolved_too),
		T(test_what_skillfs_keeps_is_never_a_workdir),
		cmocka_unit_test(test_is_within),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
