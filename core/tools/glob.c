/* glob: the paths of the workspace that match a pattern (globpat.h), found
 * by a confined walk (workspace_walk), sorted, capped. */
#include "tool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "globpat.h"

/* At most this many paths are listed, and this many entries visited. */
#define GLOB_PATHS_MAX 1000
#define GLOB_VISIT_MAX 200000
/* How often (entries) the walk asks whether the run was cancelled. */
#define GLOB_POLL_EVERY 4096

struct glob_walk {
	struct call *c;
	const struct globpat *pat;
	size_t strip;          /* bytes of an entry's path before the start's part */
	struct strlist found;  /* root-relative paths, directories with '/' */
	size_t visited;
	bool full;             /* more matched than GLOB_PATHS_MAX */
	bool too_many;         /* stopped after GLOB_VISIT_MAX entries */
	bool cancelled;
};

static int visit(void *arg, const struct workspace_entry *e)
{
	struct glob_walk *w = arg;
	const struct tool_ctx *ctx = w->c->ctx;
	if (++w->visited > GLOB_VISIT_MAX) {
		w->too_many = true;
		return WORKSPACE_WALK_STOP;
	}
	if (w->visited % GLOB_POLL_EVERY == 0 && ctx->cancel && ctx->cancel(ctx->cancel_arg)) {
		w->cancelled = true;
		return WORKSPACE_WALK_STOP;
	}
	bool dir = S_ISDIR(e->type);
	if (dir && tool_is_vcs_dir(e->name))
		return WORKSPACE_WALK_SKIP;
	const char *sub = e->path + w->strip;
	if (globpat_match(w->pat, sub)) {
		if (w->found.n == GLOB_PATHS_MAX) {
			w->full = true;
			return WORKSPACE_WALK_STOP;
		}
		if (strlist_addf(&w->found, "%s%s", e->path, dir ? "/" : "") < 0)
			return -1;
	}
	if (dir && !globpat_may_match_below(w->pat, sub))
		return WORKSPACE_WALK_SKIP;
	return WORKSPACE_WALK_NEXT;
}

/* The length of the start directory's part of an entry's path: the
 * walk's paths are relative to the root. */
static bool start_prefix(struct call *c, const struct workspace *ws, const char *dir,
			 size_t *strip)
{
	struct buf err = {0};
	char *rel = workspace_relative(ws, dir, &err);
	if (!rel) {
		tool_fail(c, "%s", err.data ? err.data : "bad path");
		buf_free(&err);
		return false;
	}
	*strip = strcmp(rel, ".") ? strlen(rel) + 1 : 0;
	free(rel);
	return true;
}

void tool_glob(struct call *c, json_t *args)
{
	const char *pattern, *path = ".";
	if (!tool_arg_string(c, args, "pattern", true, false, &pattern, NULL))
		return;
	tool_arg_string(c, args, "path", false, false, &path, NULL);
	if (c->is_error)
		return;
	struct globpat pat;
	const char *why;
	if (globpat_parse(&pat, pattern, &why) < 0) {
		if (why)
			tool_fail(c, "%s", why);
		else
			c->oom = true;
		return;
	}
	struct workspace ws;
	if (!tool_open_path(c, path, TOOL_READ, &ws)) {
		globpat_free(&pat);
		return;
	}
	const char *dir = path;
	struct glob_walk w = {.c = c, .pat = &pat};
	struct buf err = {0};
	if (!start_prefix(c, &ws, dir, &w.strip))
		goto out;
	if (workspace_walk(&ws, dir, visit, &w, &err) < 0) {
		if (errno == ENOMEM)
			c->oom = true;
		else
			tool_fail(c, "%s", err.data ? err.data : "cannot list the directory");
		goto out;
	}
	if (w.cancelled) {
		tool_fail(c, "cancelled");
		goto out;
	}
	strlist_sort(&w.found);
	size_t cap = tool_output_cap(c), shown = 0;
	for (; shown < w.found.n; shown++) {
		if (c->text.len + strlen(w.found.items[shown]) + 1 > cap)
			break;
		tool_put(c, "%s\n", w.found.items[shown]);
	}
	if (w.found.n == 0)
		tool_put(c, "no paths match %s in %s\n", pattern, path);
	if (shown < w.found.n)
		tool_put(c, "[%zu more paths not shown: the output is capped at %zu bytes; "
			 "narrow the pattern or the path]\n", w.found.n - shown, cap);
	if (w.full)
		tool_put(c, "[more than %d paths match: only the first %d found are listed; "
			 "narrow the pattern or the path]\n", GLOB_PATHS_MAX, GLOB_PATHS_MAX);
	if (w.too_many)
		tool_put(c, "[the search stopped after %d entries: narrow the path]\n",
			 GLOB_VISIT_MAX);
out:
	buf_free(&err);
	strlist_free(&w.found);
	globpat_free(&pat);
	workspace_close(&ws);
}
