/* Tests for core/filecache: rendered run files kept per version of their
 * run, bounded in entries and bytes. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "filecache.h"

static struct file_bytes *bytes_of(const char *text)
{
	struct buf b = { 0 };
	assert_int_equal(buf_puts(&b, text), 0);
	struct file_bytes *fb = file_bytes_from_buf(&b);
	assert_non_null(fb);
	assert_null(b.data); /* taken */
	assert_int_equal(fb->len, strlen(text));
	assert_string_equal(fb->data, text);
	return fb;
}

static struct filecache_version at(long sec, uint64_t writes)
{
	return (struct filecache_version){ { sec, 0 }, writes };
}

static void test_kept_for_its_version_only(void **state)
{
	(void)state;
	struct filecache *c = filecache_new(4, 1000);
	assert_non_null(c);
	struct file_bytes *fb = bytes_of("hello");
	filecache_put(c, "r1", 1, "transcript", at(10, 5), fb);
	file_bytes_unref(fb);
	struct file_bytes *got = filecache_get(c, "r1", 1, "transcript", at(10, 5));
	assert_non_null(got);
	assert_string_equal(got->data, "hello");
	file_bytes_unref(got);
	/* Another change time, another store write, another run of that id,
	 * another file: not kept. */
	assert_null(filecache_get(c, "r1", 1, "transcript", at(11, 5)));
	assert_null(filecache_get(c, "r1", 1, "transcript", at(10, 6)));
	assert_null(filecache_get(c, "r1", 2, "transcript", at(10, 5)));
	assert_null(filecache_get(c, "r1", 1, "events", at(10, 5)));
	assert_null(filecache_get(c, "r2", 1, "transcript", at(10, 5)));
	/* A newer rendering replaces the older. */
	fb = bytes_of("hello again");
	filecache_put(c, "r1", 1, "transcript", at(12, 7), fb);
	file_bytes_unref(fb);
	assert_null(filecache_get(c, "r1", 1, "transcript", at(10, 5)));
	got = filecache_get(c, "r1", 1, "transcript", at(12, 7));
	assert_non_null(got);
	assert_string_equal(got->data, "hello again");
	/* What a caller holds outlives the cache. */
	filecache_free(c);
	assert_string_equal(got->data, "hello again");
	file_bytes_unref(got);
}

static void test_bounded_least_recently_used_go(void **state)
{
	(void)state;
	struct filecache *c = filecache_new(2, 10);
	assert_non_null(c);
	const char *names[] = { "a", "b", "c" };
	for (int i = 0; i < 3; i++) {
		struct file_bytes *fb = bytes_of("1234");
		filecache_put(c, names[i], 1, "events", at(1, 1), fb);
		file_bytes_unref(fb);
		if (i == 1) { /* a is read again: b is the older one now */
			struct file_bytes *g = filecache_get(c, "a", 1, "events", at(1, 1));
			assert_non_null(g);
			file_bytes_unref(g);
		}
	}
	struct file_bytes *g;
	assert_null(filecache_get(c, "b", 1, "events", at(1, 1)));
	assert_non_null(g = filecache_get(c, "a", 1, "events", at(1, 1)));
	file_bytes_unref(g);
	assert_non_null(g = filecache_get(c, "c", 1, "events", at(1, 1)));
	file_bytes_unref(g);
	/* Bytes: 8 of 10 are used; 6 more push out both. */
	struct file_bytes *fb = bytes_of("123456");
	filecache_put(c, "d", 1, "events", at(1, 1), fb);
	file_bytes_unref(fb);
	assert_null(filecache_get(c, "a", 1, "events", at(1, 1)));
	assert_non_null(g = filecache_get(c, "d", 1, "events", at(1, 1)));
	file_bytes_unref(g);
	/* A file larger than the cache is never kept. */
	fb = bytes_of("12345678901");
	filecache_put(c, "e", 1, "events", at(1, 1), fb);
	file_bytes_unref(fb);
	assert_null(filecache_get(c, "e", 1, "events", at(1, 1)));
	assert_non_null(g = filecache_get(c, "d", 1, "events", at(1, 1)));
	file_bytes_unref(g);
	filecache_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kept_for_its_version_only),
		cmocka_unit_test(test_bounded_least_recently_used_go),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
