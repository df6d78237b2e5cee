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

/* Undoes the octal escapes of a mountinfo field (\040 for a space...) in
 * place. */
static void unescape(char *s)
{
	char *o = s;
	for (char *p = s; *p; p++) {
		if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' && p[2] <= '7' &&
		    p[3] >= '0' && p[3] <= '7') {
			*o++ = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
			p += 3;
		} else {
			*o++ = *p;
		}
	}
	*o = '\0';
}

/* The mount point of a skillfs mount (file system type fuse.skillfs) at or
 * below dir, or above it, in *out (malloc'd; NULL when there is none).
 * Returns 0, or -ENOMEM. A mount table that cannot be read finds none. */
static int skillfs_mount_overlapping(const char *dir, char **out)
{
	*out = NULL;
	FILE *fp = fopen("/proc/self/mountinfo", "re");
	if (!fp)
		return 0;
	char *line = NULL;
	size_t cap = 0;
	int rc = 0;
	while (!*out && getline(&line, &cap, fp) > 0) {
		/* id parent major:minor root mountpoint options [optional...] -
		 * fstype source superoptions */
		char *save = NULL, *f[5] = {0};
		char *tok = strtok_r(line, " ", &save);
		for (int i = 0; tok && i < 5; i++, tok = strtok_r(NULL, " ", &save))
			f[i] = tok;
		while (tok && strcmp(tok, "-") != 0)
			tok = strtok_r(NULL, " ", &save);
		char *type = tok ? strtok_r(NULL, " ", &save) : NULL;
		if (!f[4] || !type || strcmp(type, "fuse.skillfs") != 0)
			continue;
		unescape(f[4]);
		if ((workdir_is_within(f[4], dir) || workdir_is_within(dir, f[4])) &&
		    !(*out = strdup(f[4])))
			rc = -ENOMEM;
	}
	free(line);
	fclose(fp);
	return rc;
}

int workdir_check(const struct strlist *roots, const char *path, const struct strlist *avoid,
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
	for (size_t i = 0; avoid && i < avoid->n; i++) {
		char *av = realpath(avoid->items[i], NULL);
		bool clash = av && (workdir_is_within(real, av) || workdir_is_within(av, real));
		if (clash) {
			int rc = refuse(why, "workdir %.*s overlaps %s, which skillfs keeps to "
					"itself (its state directory or a skill source): refused",
					QUOTE_MAX, path, av);
			free(av);
			free(real);
			return rc;
		}
		free(av);
	}
	char *mnt = NULL;
	int rc = skillfs_mount_overlapping(real, &mnt);
	if (rc == 0 && mnt)
		rc = refuse(why, "workdir %.*s is in or holds the skillfs mount %s, which "
			    "its tools would reach: refused", QUOTE_MAX, path, mnt);
	free(mnt);
	if (rc < 0) {
		free(real);
		return rc;
	}
	*resolved = real;
	return 0;
}
