#include "workdir.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "buf.h"

/* How much of a user's path a message quotes. */
#define QUOTE_MAX 512

bool workdir_is_within(const char *p, const char *dir)
{
	if (strcmp(dir, "/") == 0)
		return p[0] == '/';
	size_t n = strlen(dir);
	return strncmp(p, dir, n) == 0 && (p[n] == '\0' || p[n] == '/');
}

static int refuse(char **why, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int refuse(char **why, const char *fmt, ...)
{
	struct buf b = {0};
	va_list ap;
	va_start(ap, fmt);
	int rc = buf_vprintf(&b, fmt, ap);
	va_end(ap);
	*why = rc < 0 ? NULL : buf_steal(&b, NULL);
	buf_free(&b);
	return -EINVAL;
}

/* The roots as one parenthesised list for a message. */
static int roots_text(const struct strlist *roots, struct buf *out)
{
	for (size_t i = 0; i < roots->n; i++)
		if (buf_printf(out, "%s%s", i ? ", " : "", roots->items[i]) < 0)
			return -1;
	return buf_puts(out, "");
}

int workdir_check(const struct strlist *roots, const char *path, const char *avoid,
		  char **resolved, char **why)
{
	*resolved = NULL;
	*why = NULL;
	if (!roots || roots->n == 0)
		return refuse(why, "runs.workdir_roots is empty: workdir is off (list the "
			      "directories a run may work in under runs.workdir_roots in "
			      "the config file)");
	if (!path || path[0] != '/')
		return refuse(why, "workdir must be an absolute path, got '%.*s'", QUOTE_MAX,
			      path ? path : "");
	char *real = realpath(path, NULL);
	if (!real) {
		int e = errno;
		if (e == ENOMEM)
			return -ENOMEM;
		return refuse(why, "workdir %.*s: %s", QUOTE_MAX, path,
			      e == ENOENT ? "no such directory" : strerror(e));
	}
	struct stat st;
	if (stat(real, &st) < 0 || !S_ISDIR(st.st_mode)) {
		int rc = refuse(why, "workdir %.*s is not a directory", QUOTE_MAX, path);
		free(real);
		return rc;
	}
	bool inside = false;
	for (size_t i = 0; !inside && i < roots->n; i++) {
		char *root = realpath(roots->items[i], NULL);
		if (!root && errno == ENOMEM) {
			free(real);
			return -ENOMEM;
		}
		inside = root && workdir_is_within(real, root);
		free(root);
	}
	if (!inside) {
		struct buf list = {0};
		int rc;
		if (roots_text(roots, &list) < 0)
			rc = -ENOMEM;
		else if (strcmp(real, path) != 0)
			rc = refuse(why, "workdir %.*s leads to %.*s, which is not under "
				    "runs.workdir_roots (%s)", QUOTE_MAX, path, QUOTE_MAX, real,
				    list.data);
		else
			rc = refuse(why, "workdir %.*s is not under runs.workdir_roots (%s)",
				    QUOTE_MAX, path, list.data);
		buf_free(&list);
		free(real);
		return rc;
	}
	if (avoid) {
		char *av = realpath(avoid, NULL);
		bool clash = av && (workdir_is_within(real, av) || workdir_is_within(av, real));
		if (clash) {
			int rc = refuse(why, "workdir %.*s overlaps skillfs's state directory "
					"%s: refused", QUOTE_MAX, path, av);
			free(av);
			free(real);
			return rc;
		}
		free(av);
	}
	*resolved = real;
	return 0;
}
