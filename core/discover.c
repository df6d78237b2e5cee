#include "discover.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "buf.h"

/* One search: the bounds, what it found, and the path being looked at
 * (the root, then a directory below it). */
struct walk {
	const struct discover_bounds *b;
	bool want_dirs;
	size_t entries; /* read so far */
	struct discover *out;
	char path[PATH_MAX];
	size_t root_len;
	dev_t root_dev; /* the search stays on the root's filesystem */
};

/* Names never searched: the directory itself and its parent, and the two
 * trees that hold thousands of directories and never a skill of ours. */
static bool skipped(const char *name)
{
	return strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || strcmp(name, ".git") == 0 ||
	       strcmp(name, "node_modules") == 0;
}

/* Whether directory dir holds a SKILL.md as the catalogue loads one: a
 * regular file, a symbolic link (an invalid skill saying why), or a name
 * that cannot be looked at (an invalid skill too). */
static bool holds_skill_md(const char *dir)
{
	char p[PATH_MAX];
	struct stat st;
	if (snprintf(p, sizeof p, "%s/SKILL.md", dir) >= (int)sizeof p)
		return false;
	if (lstat(p, &st) == 0)
		return S_ISREG(st.st_mode) || S_ISLNK(st.st_mode);
	return errno != ENOENT && errno != ENOTDIR;
}

/* Whether directory dir holds a directory (or an entry that may be one),
 * each entry read counting towards the bound. */
static bool holds_dir(struct walk *w, const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return false;
	bool found = false;
	struct dirent *de;
	while (!found && w->entries < w->b->entries && (de = readdir(d))) {
		w->entries++;
		found = !skipped(de->d_name) && (de->d_type == DT_DIR || de->d_type == DT_UNKNOWN);
	}
	closedir(d);
	return found;
}

/* Searches the directory at w->path (len bytes), depth levels below the
 * root. Returns 0, or -1 on ENOMEM. */
static int walk_dir(struct walk *w, size_t len, unsigned depth)
{
	if (w->out->cut_entries)
		return 0;
	DIR *d = opendir(w->path);
	if (!d)
		return 0; /* unreadable: nothing found there */
	struct strlist names = { 0 };
	int rc = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (w->entries >= w->b->entries) {
			w->out->cut_entries = true;
			break;
		}
		w->entries++;
		if (skipped(de->d_name) ||
		    (de->d_type != DT_DIR && de->d_type != DT_LNK && de->d_type != DT_UNKNOWN))
			continue;
		if (strlist_add(&names, de->d_name) < 0) {
			rc = -1;
			break;
		}
	}
	closedir(d);
	strlist_sort(&names);
	for (size_t i = 0; rc == 0 && i < names.n; i++) {
		size_t nl = strlen(names.items[i]);
		if (len + 1 + nl >= sizeof w->path)
			continue;
		w->path[len] = '/';
		memcpy(w->path + len + 1, names.items[i], nl + 1);
		struct stat st;
		if (lstat(w->path, &st) < 0)
			continue;
		bool link = S_ISLNK(st.st_mode);
		/* A link is never followed; one directly in the source that
		 * leads to a skill is that skill, as in a plain source. */
		if (link ? depth != 0 || stat(w->path, &st) < 0 || !S_ISDIR(st.st_mode)
			 : !S_ISDIR(st.st_mode) || st.st_dev != w->root_dev)
			continue;
		const char *rel = w->path + w->root_len + 1;
		if (holds_skill_md(w->path)) {
			rc = strlist_add(&w->out->skills, rel);
			continue; /* its own tree is the skill's files */
		}
		if (link)
			continue;
		if (w->want_dirs && strlist_add(&w->out->dirs, rel) < 0) {
			rc = -1;
			break;
		}
		if (depth + 1 >= w->b->depth) {
			if (holds_dir(w, w->path))
				w->out->cut_depth = true;
			continue;
		}
		rc = walk_dir(w, len + 1 + nl, depth + 1);
	}
	w->path[len] = '\0';
	strlist_free(&names);
	return rc;
}

int discover_search(const char *root, const struct discover_bounds *b, bool want_dirs,
		    struct discover *out)
{
	memset(out, 0, sizeof *out);
	struct walk *w = calloc(1, sizeof *w);
	if (!w)
		return -1;
	w->b = b;
	w->want_dirs = want_dirs;
	w->out = out;
	w->root_len = strlen(root);
	int rc = 0;
	struct stat st;
	if (w->root_len < sizeof w->path && b->depth > 0 && stat(root, &st) == 0) {
		w->root_dev = st.st_dev;
		memcpy(w->path, root, w->root_len + 1);
		rc = walk_dir(w, w->root_len, 0);
	}
	free(w);
	if (rc < 0)
		discover_free(out);
	return rc;
}

void discover_free(struct discover *d)
{
	if (!d)
		return;
	strlist_free(&d->skills);
	strlist_free(&d->dirs);
	d->cut_depth = d->cut_entries = false;
}

/* ---- the hint ---- */

/* Appends s to out, fit for one line of a warning: a control byte, or a
 * byte that is not part of valid UTF-8, reads '?'. */
static int put_plain(struct buf *out, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	while (*p) {
		size_t n = *p < 0x80 ? 1 : (*p & 0xe0) == 0xc0 ? 2 : (*p & 0xf0) == 0xe0 ? 3
			 : (*p & 0xf8) == 0xf0 ? 4 : 0;
		bool ok = n > 0 && (n > 1 || (*p >= 0x20 && *p != 0x7f));
		for (size_t k = 1; ok && k < n; k++)
			ok = (p[k] & 0xc0) == 0x80;
		if (ok && n == 2)
			ok = *p >= 0xc2; /* not overlong */
		if (!ok) {
			if (buf_puts(out, "?") < 0)
				return -1;
			p++;
			continue;
		}
		if (buf_append(out, p, n) < 0)
			return -1;
		p += n;
	}
	return 0;
}

/* root/rel; rel "" (skills in hidden directories of root itself, which a
 * plain source skips) reads "root (hidden directories)". */
static int put_dir(struct buf *out, const char *root, const char *rel)
{
	if (put_plain(out, root) < 0)
		return -1;
	if (!*rel)
		return buf_puts(out, " (hidden directories)");
	return buf_puts(out, "/") < 0 ? -1 : put_plain(out, rel);
}

/* A directory holding skills, and how many. */
struct group {
	const char *dir; /* relative to the source; "" for the source itself */
	size_t n;
};

static int cmp_group(const void *a, const void *b)
{
	const struct group *x = a, *y = b;
	if (x->n != y->n)
		return x->n > y->n ? -1 : 1;
	return strcmp(x->dir, y->dir);
}

/* What the bounds left out, if anything: " (searched N levels deep and at
 * most M entries: there may be more)". */
static int put_cut(struct buf *out, const struct discover *d)
{
	if (!d->cut_depth && !d->cut_entries)
		return 0;
	return buf_printf(out, " (searched %u levels deep and at most %u entries: there may be more)",
			  (unsigned)DISCOVER_HINT_DEPTH, (unsigned)DISCOVER_HINT_ENTRIES);
}

int discover_hint(const char *root, char **msg)
{
	static const struct discover_bounds hint = { DISCOVER_HINT_DEPTH, DISCOVER_HINT_ENTRIES };
	struct discover d;
	struct strlist parents = { 0 };
	struct group *g = NULL;
	struct buf out = { 0 };
	*msg = NULL;
	if (discover_search(root, &hint, false, &d) < 0)
		return -1;
	int rc = 0;
	if (!d.skills.n) {
		rc = buf_puts(&out, "no skills in ");
		rc = rc ? rc : put_plain(&out, root);
		rc = rc ? rc : buf_puts(&out, ": no directory in it holds a SKILL.md");
		rc = rc ? rc : put_cut(&out, &d);
		goto done;
	}
	/* Each skill's parent directory, sorted so equal ones are runs. */
	for (size_t i = 0; rc == 0 && i < d.skills.n; i++) {
		const char *rel = d.skills.items[i];
		const char *slash = strrchr(rel, '/');
		char *p = strndup(rel, slash ? (size_t)(slash - rel) : 0);
		rc = p ? strlist_add_owned(&parents, p) : -1;
	}
	if (rc < 0)
		goto done;
	strlist_sort(&parents);
	size_t ng = 0;
	if (!(g = calloc(parents.n, sizeof *g))) {
		rc = -1;
		goto done;
	}
	for (size_t i = 0; i < parents.n; i++) {
		if (ng && strcmp(g[ng - 1].dir, parents.items[i]) == 0)
			g[ng - 1].n++;
		else
			g[ng++] = (struct group){ parents.items[i], 1 };
	}
	qsort(g, ng, sizeof *g, cmp_group);
	rc = buf_puts(&out, "no skills directly in ");
	rc = rc ? rc : put_plain(&out, root);
	rc = rc ? rc : buf_printf(&out, "; %zu found in ", d.skills.n);
	if (ng == 1) {
		rc = rc ? rc : put_dir(&out, root, g[0].dir);
		rc = rc ? rc : put_cut(&out, &d);
		if (rc == 0 && g[0].dir[0])
			rc = buf_puts(&out, ": use that directory as the source");
		else if (rc == 0)
			rc = buf_puts(&out, ": a plain source skips hidden directories");
	} else {
		for (size_t i = 0; rc == 0 && i < ng && i < DISCOVER_HINT_NAMED; i++) {
			rc = i ? buf_puts(&out, ", ") : 0;
			rc = rc ? rc : put_dir(&out, root, g[i].dir);
			rc = rc ? rc : buf_printf(&out, " (%zu)", g[i].n);
		}
		if (rc == 0 && ng > DISCOVER_HINT_NAMED)
			rc = buf_printf(&out, " and %zu more directories", ng - DISCOVER_HINT_NAMED);
		rc = rc ? rc : put_cut(&out, &d);
		rc = rc ? rc : buf_puts(&out, ": use those directories as sources");
	}
	rc = rc ? rc : buf_puts(&out, ", or `recursive: true` on this source (-r on the "
				      "command line) to load every skill below it");
done:
	free(g);
	strlist_free(&parents);
	discover_free(&d);
	if (rc == 0 && !(*msg = buf_steal(&out, NULL)))
		rc = -1;
	buf_free(&out);
	return rc < 0 ? -1 : 0;
}
