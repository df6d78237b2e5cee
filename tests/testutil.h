/* testutil: temporary directories and files for the cmocka unit tests.
 * Every helper fails the running test (cmocka assert) instead of
 * returning an error. */
#ifndef SKILLFS_TESTUTIL_H
#define SKILLFS_TESTUTIL_H

#include <stddef.h>

/* A new empty directory under $TMPDIR (or /tmp), named <tag>-XXXXXX, as a
 * canonical (symlink-free) path the caller frees. */
char *test_tmpdir(const char *tag);

/* Removes dir and everything below it (symlinks are not followed), then
 * frees dir. */
void test_rm_tree(char *dir);

/* "a/b", allocated. */
char *test_join(const char *a, const char *b);

/* Creates or replaces path with n bytes of data. */
void test_write(const char *path, const void *data, size_t n);

/* Creates or replaces path with the string text. */
void test_write_text(const char *path, const char *text);

#endif
