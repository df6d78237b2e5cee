/* globpat: path patterns with "**" (see globpat.h). */
#include "globpat.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

void globpat_free(struct globpat *g)
{
	strlist_free(&g->parts);
}

static bool is_any(const char *part)
{
	return strcmp(part, "**") == 0;
}

int globpat_parse(struct globpat *g, const char *pattern, const char **why)
{
	*g = (struct globpat){0};
	*why = NULL;
	if (!pattern || !*pattern) {
		*why = "the pattern is empty";
		return -1;
	}
	if (strlen(pattern) > GLOBPAT_MAX) {
		*why = "the pattern is too long (at most 1024 bytes)";
		return -1;
	}
	if (pattern[0] == '/') {
		*why = "the pattern must be relative (to 'path', by default the "
		       "workspace); give the directory as 'path'";
		return -1;
	}
	for (const char *s = pattern; *s;) {
		size_t len = strcspn(s, "/");
		if (len == 2 && s[0] == '.' && s[1] == '.') {
			globpat_free(g);
			*why = "the pattern may not contain '..': give the directory as 'path'";
			return -1;
		}
		bool skip = len == 0 || (len == 1 && s[0] == '.') ||
			    (len == 2 && !strncmp(s, "**", 2) && g->parts.n &&
			     is_any(g->parts.items[g->parts.n - 1]));
		if (!skip && strlist_addf(&g->parts, "%.*s", (int)len, s) < 0) {
			globpat_free(g);
			errno = ENOMEM;
			return -1;
		}
		s += len;
		s += strspn(s, "/");
	}
	if (g->parts.n == 0) {
		*why = "the pattern names no file (only '.' and '/')";
		return -1;
	}
	return 0;
}

/* Splits path into at most max components (pointers into copy). Returns
 * the number, or -1 when there are more or memory runs out. */
static int split(const char *path, char **copy, const char **comps, int max)
{
	*copy = strdup(path);
	if (!*copy)
		return -1;
	int n = 0;
	for (char *s = *copy; *s;) {
		if (n == max)
			return -1;
		comps[n++] = s;
		char *slash = strchr(s, '/');
		if (!slash)
			break;
		*slash = '\0';
		s = slash + 1;
	}
	return n;
}

/* The components a path may have here (a walk is WORKSPACE_WALK_DEPTH deep
 * below a start that may itself be deep). */
#define COMPS_MAX 256

/* With m(i, j) meaning "the first i parts match the first j components of
 * path exactly", fills col[i] = m(i, ncomps) for i = 0..nparts (dynamic
 * programming row by row, linear in parts times components whatever the
 * "**"s). Returns 0, or -1 when path has too many components or memory
 * runs out. */
static int table(const struct globpat *g, const char *path, bool *col)
{
	char *copy;
	const char *comps[COMPS_MAX];
	int nc = split(path, &copy, comps, COMPS_MAX);
	if (nc < 0) {
		free(copy);
		return -1;
	}
	size_t np = g->parts.n;
	/* One row at a time: prev is row i - 1, cur row i. */
	bool *prev = calloc((size_t)nc + 1, sizeof *prev);
	bool *cur = calloc((size_t)nc + 1, sizeof *cur);
	if (!prev || !cur) {
		free(prev);
		free(cur);
		free(copy);
		return -1;
	}
	prev[0] = true;
	col[0] = nc == 0;
	for (size_t i = 1; i <= np; i++) {
		const char *part = g->parts.items[i - 1];
		bool any = is_any(part);
		for (int j = 0; j <= nc; j++) {
			if (any)
				cur[j] = prev[j] || (j > 0 && cur[j - 1]);
			else
				cur[j] = j > 0 && prev[j - 1] &&
					 fnmatch(part, comps[j - 1], 0) == 0;
		}
		col[i] = cur[nc];
		bool *t = prev;
		prev = cur;
		cur = t;
	}
	free(prev);
	free(cur);
	free(copy);
	return 0;
}

bool globpat_match(const struct globpat *g, const char *path)
{
	size_t np = g->parts.n;
	bool col[GLOBPAT_MAX + 2];
	if (np > GLOBPAT_MAX || table(g, path, col) < 0)
		return false;
	return col[np];
}

bool globpat_may_match_below(const struct globpat *g, const char *dir)
{
	size_t np = g->parts.n;
	bool col[GLOBPAT_MAX + 2];
	if (np > GLOBPAT_MAX || table(g, dir, col) < 0)
		return true; /* cannot tell: enter */
	/* Some parts matched dir exactly and a part is left for what is
	 * below, or the last part is "**", which takes more. */
	for (size_t i = 0; i < np; i++)
		if (col[i])
			return true;
	return col[np] && np && is_any(g->parts.items[np - 1]);
}
