/* Tests for core/dbwatch: the state database's file deleted or replaced
 * under an open store is noticed, once, and a path that still names the
 * opened file is not. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dbwatch.h"
#include "testutil.h"

struct fx {
	char *dir, *db;
	struct dbwatch w;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	assert_non_null(f);
	f->dir = test_tmpdir("dbwatch");
	f->db = test_join(f->dir, "state.db");
	test_write_text(f->db, "db");
	struct stat st;
	assert_int_equal(stat(f->db, &st), 0);
	assert_int_equal(dbwatch_init(&f->w, f->db, &st), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	dbwatch_free(&f->w);
	free(f->db);
	test_rm_tree(f->dir);
	free(f);
	return 0;
}

static void test_same_file_is_fine(void **state)
{
	struct fx *f = *state;
	bool first = true;
	assert_null(dbwatch_check(&f->w, true, &first));
	assert_false(first);
	/* Written in place (as SQLite does): still the same file. */
	FILE *fp = fopen(f->db, "a");
	assert_non_null(fp);
	fputs("more", fp);
	fclose(fp);
	assert_null(dbwatch_check(&f->w, true, NULL));
}

static void test_deleted_is_noticed_once(void **state)
{
	struct fx *f = *state;
	assert_int_equal(unlink(f->db), 0);
	bool first = false;
	const char *m = dbwatch_check(&f->w, true, &first);
	assert_non_null(m);
	assert_true(first);
	assert_non_null(strstr(m, f->db));
	assert_non_null(strstr(m, "was deleted while mounted"));
	assert_non_null(strstr(m, "new runs are refused"));
	assert_non_null(strstr(m, "Unmount and mount again"));
	/* Said once; it stays even when a file comes back at the path. */
	test_write_text(f->db, "new");
	assert_ptr_equal(dbwatch_check(&f->w, true, &first), m);
	assert_false(first);
}

static void test_replaced_is_noticed(void **state)
{
	struct fx *f = *state;
	char *other = test_join(f->dir, "other.db");
	test_write_text(other, "other");
	assert_int_equal(rename(other, f->db), 0);
	const char *m = dbwatch_check(&f->w, true, NULL);
	assert_non_null(m);
	assert_non_null(strstr(m, "was replaced by another file"));
	free(other);
}

/* Without now, a check looks again once a second has passed since the
 * last: polling it notices the change (within 10 s, however loaded the
 * machine). */
static void test_unforced_checks_notice_in_time(void **state)
{
	struct fx *f = *state;
	assert_null(dbwatch_check(&f->w, false, NULL));
	assert_int_equal(unlink(f->db), 0);
	const char *m = NULL;
	for (int i = 0; i < 1000 && !m; i++) {
		m = dbwatch_check(&f->w, false, NULL);
		if (!m)
			usleep(10 * 1000);
	}
	assert_non_null(m);
	assert_non_null(strstr(m, "was deleted"));
}

int main(void)
{
	const struct CMUnitTest t[] = {
		cmocka_unit_test_setup_teardown(test_same_file_is_fine, setup, teardown),
		cmocka_unit_test_setup_teardown(test_deleted_is_noticed_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_replaced_is_noticed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unforced_checks_notice_in_time, setup,
						teardown),
	};
	return cmocka_run_group_tests(t, NULL, NULL);
}
