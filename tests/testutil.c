#include "testutil.h"

#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

char *test_tmpdir(const char *tag)
{
	const char *t = getenv("TMPDIR");
	char *p = NULL;
	assert_true(asprintf(&p, "%s/%s-XXXXXX", t && *t ? t : "/tmp", tag) > 0);
	assert_non_null(mkdtemp(p));
	char *real = realpath(p, NULL);
	assert_non_null(real);
	free(p);
	return real;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(path);
}

void test_rm_tree(char *dir)
{
	assert_int_equal(nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS), 0);
	free(dir);
}

char *test_join(const char *a, const char *b)
{
	char *p = NULL;
	assert_true(asprintf(&p, "%s/%s", a, b) > 0);
	return p;
}

void test_write(const char *path, const void *data, size_t n)
{
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, n, f), n);
	assert_int_equal(fclose(f), 0);
}

void test_write_text(const char *path, const char *text)
{
	test_write(path, text, strlen(text));
}
