/* grep: the lines of workspace files that match a POSIX extended regular
 * expression, found by a confined walk (workspace_walk): files in sorted
 * order, binary files skipped, results capped. */
#include "tool.h"

#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "globpat.h"

/* At most this many matching lines, files searched and entries visited;
 * a longer line is cut; a bigger file is skipped. */
#define GREP_LINES_MAX 500
#define GREP_FILES_MAX 20000
#define GREP_VISIT_MAX 200000
#define GREP_LINE_TEXT_MAX 500
#define GREP_FILE_MAX ((size_t)4 << 20)
/* A NUL byte in this much of the start makes a file binary. */
#define GREP_BINARY_PROBE 8192
#define GREP_POLL_EVERY 4096
/* The pattern runs in the daemon, without a timeout, so its cost is
 * bounded: at most this many bytes, at most this many positions once the
 * intervals ({m,n}, which the regex compiler unrolls) are expanded, at
 * most this deep in groups, and no back-references (\1..\9, whose
 * matching is exponential). */
#define GREP_PATTERN_MAX 1024
#define GREP_PATTERN_EXPANDED_MAX 256
#define GREP_PATTERN_DEPTH 32

struct grep_walk {
	struct call *c;
	const struct globpat *only; /* the glob filter, or NULL */
	size_t strip;
	struct strlist files; /* root-relative paths of regular files */
	size_t visited;
	bool too_many;
	bool cancelled;
};

static int visit(void *arg, const struct workspace_entry *e)
{
	struct grep_walk *w = arg;
	const struct tool_ctx *ctx = w->c->ctx;
	if (++w->visited > GREP_VISIT_MAX || w->files.n == GREP_FILES_MAX) {
		w->too_many = true;
		return WORKSPACE_WALK_STOP;
	}
	if (w->visited % GREP_POLL_EVERY == 0 && ctx->cancel && ctx->cancel(ctx->cancel_arg)) {
		w->cancelled = true;
		return WORKSPACE_WALK_STOP;
	}
	if (S_ISDIR(e->type)) {
		if (tool_is_vcs_dir(e->name) ||
		    (w->only && !globpat_may_match_below(w->only, e->path + w->strip)))
			return WORKSPACE_WALK_SKIP;
		return WORKSPACE_WALK_NEXT;
	}
	if (!S_ISREG(e->type) || (w->only && !globpat_match(w->only, e->path + w->strip)))
		return WORKSPACE_WALK_NEXT; /* links are not followed */
	return strlist_add(&w->files, e->path) < 0 ? -1 : WORKSPACE_WALK_NEXT;
}

/* What a search found and passed over. */
struct grep_result {
	size_t lines;     /* matching lines listed */
	bool lines_full;  /* more matched than GREP_LINES_MAX */
	bool output_full; /* the output cap was reached */
	size_t binary, large, unreadable;
};

/* The end of a cut of at most max bytes of the UTF-8 text p[0..n), at a
 * character boundary. */
static size_t cut_at(const char *p, size_t n, size_t max)
{
	if (n <= max)
		return n;
	size_t k = max;
	while (k > 0 && ((unsigned char)p[k] & 0xC0) == 0x80)
		k--;
	return k;
}

/* Searches the text of one file (data, NUL-terminated; changed in place)
 * shown as name; false when a cap ends the search. */
static bool search(struct call *c, const regex_t *re, const char *name, char *data,
		   size_t len, struct grep_result *res)
{
	size_t cap = tool_output_cap(c);
	size_t lineno = 0;
	for (char *line = data; line < data + len;) {
		char *nl = memchr(line, '\n', (size_t)(data + len - line));
		char *end = nl ? nl : data + len;
		lineno++;
		char save = *end;
		*end = '\0';
		bool hit = regexec(re, line, 0, NULL, 0) == 0;
		*end = save;
		if (hit) {
			if (res->lines == GREP_LINES_MAX) {
				res->lines_full = true;
				return false;
			}
			size_t n = (size_t)(end - line);
			if (n && line[n - 1] == '\r')
				n--;
			size_t shown = cut_at(line, n, GREP_LINE_TEXT_MAX);
			size_t before = c->text.len;
			tool_put(c, "%s:%zu: %.*s%s\n", name, lineno, (int)shown, line,
				 shown < n ? " [line cut]" : "");
			if (c->text.len > cap) {
				c->text.len = before;
				c->text.data[before] = '\0';
				res->output_full = true;
				return false;
			}
			res->lines++;
		}
		if (!nl)
			break;
		line = nl + 1;
	}
	return true;
}

/* Reads and searches one file; false when a cap ends the search. A file
 * searched alone (the path named it) that cannot be read is an error. */
static bool search_file(struct call *c, const struct workspace *ws, const regex_t *re,
			const char *path, const char *name, bool alone,
			struct grep_result *res)
{
	struct buf data = {0}, err = {0};
	bool go_on = true;
	if (workspace_read(ws, path, GREP_FILE_MAX, &data, &err) < 0) {
		if (alone)
			tool_fail(c, "%s", err.data ? err.data : "cannot read the file");
		else if (err.data && strstr(err.data, "too large"))
			res->large++;
		else
			res->unreadable++;
	} else if (memchr(data.data, '\0', data.len < GREP_BINARY_PROBE ? data.len
									 : GREP_BINARY_PROBE) ||
		   !tool_is_text(data.data, data.len)) {
		res->binary++;
	} else {
		go_on = search(c, re, name, data.data, data.len, res);
	}
	buf_free(&data);
	buf_free(&err);
	return go_on;
}

static void put_notes(struct call *c, const struct grep_result *res, bool too_many)
{
	if (res->lines_full)
		tool_put(c, "[more than %d lines match: only the first %d are listed; narrow "
			 "the pattern, the path or the glob]\n", GREP_LINES_MAX, GREP_LINES_MAX);
	if (res->output_full)
		tool_put(c, "[output capped at %zu bytes: narrow the pattern, the path or the "
			 "glob]\n", tool_output_cap(c));
	if (too_many)
		tool_put(c, "[the search stopped after %d files or %d entries: narrow the "
			 "path or the glob]\n", GREP_FILES_MAX, GREP_VISIT_MAX);
	if (res->binary)
		tool_put(c, "[%zu binary file%s skipped]\n", res->binary,
			 res->binary == 1 ? "" : "s");
	if (res->large)
		tool_put(c, "[%zu file%s over %zu MiB skipped]\n", res->large,
			 res->large == 1 ? "" : "s", GREP_FILE_MAX >> 20);
	if (res->unreadable)
		tool_put(c, "[%zu file%s could not be read]\n", res->unreadable,
			 res->unreadable == 1 ? "" : "s");
}

static size_t sat_mul(size_t a, size_t b)
{
	return b && a > (GREP_PATTERN_EXPANDED_MAX + 1) / b ? GREP_PATTERN_EXPANDED_MAX + 1
							   : a * b;
}

static size_t sat_add(size_t a, size_t b)
{
	size_t s = a + b;
	return s > GREP_PATTERN_EXPANDED_MAX + 1 ? GREP_PATTERN_EXPANDED_MAX + 1 : s;
}

/* The end of the bracket expression starting at p ('['), or NULL. */
static const char *bracket_end(const char *p)
{
	p++;
	if (*p == '^')
		p++;
	if (*p == ']')
		p++;
	for (; *p; p++) {
		if (*p == '[' && (p[1] == ':' || p[1] == '=' || p[1] == '.')) {
			char close = p[1];
			const char *e = p + 2;
			while (*e && !(e[0] == close && e[1] == ']'))
				e++;
			if (!*e)
				return NULL;
			p = e + 1;
		} else if (*p == ']') {
			return p;
		}
	}
	return NULL;
}

/* Whether the ERE pattern is cheap enough to run here (see
 * GREP_PATTERN_*); else *why says what is refused. A pattern this cannot
 * read is left to regcomp to report. */
static bool pattern_bounded(const char *pattern, const char **why)
{
	size_t total[GREP_PATTERN_DEPTH + 1], last[GREP_PATTERN_DEPTH + 1];
	int depth = 0;
	total[0] = last[0] = 0;
	if (strlen(pattern) > GREP_PATTERN_MAX) {
		*why = "the pattern is longer than 1024 bytes";
		return false;
	}
	for (const char *p = pattern; *p; p++) {
		if (*p == '\\') {
			if (p[1] >= '1' && p[1] <= '9') {
				*why = "back-references (\\1 to \\9) are not supported";
				return false;
			}
			if (p[1])
				p++;
			last[depth] = 1;
			total[depth] = sat_add(total[depth], 1);
		} else if (*p == '[') {
			const char *e = bracket_end(p);
			if (!e)
				return true;
			p = e;
			last[depth] = 1;
			total[depth] = sat_add(total[depth], 1);
		} else if (*p == '(') {
			if (depth == GREP_PATTERN_DEPTH) {
				*why = "the pattern nests groups more than 32 deep";
				return false;
			}
			depth++;
			total[depth] = last[depth] = 0;
		} else if (*p == ')' && depth > 0) {
			size_t g = total[depth] ? total[depth] : 1;
			depth--;
			last[depth] = g;
			total[depth] = sat_add(total[depth], g);
		} else if (*p == '{' && p[1] >= '0' && p[1] <= '9') {
			char *e;
			unsigned long m = strtoul(p + 1, &e, 10), n = m;
			if (*e == ',')
				n = e[1] >= '0' && e[1] <= '9' ? strtoul(e + 1, &e, 10) : (e++, m);
			if (*e != '}')
				return true;
			size_t k = n > m ? n : m;
			if (k > GREP_PATTERN_EXPANDED_MAX)
				k = GREP_PATTERN_EXPANDED_MAX + 1;
			if (k > 1)
				total[depth] = sat_add(total[depth],
						       sat_mul(last[depth], k - 1));
			last[depth] = sat_mul(last[depth], k);
			p = e;
		} else if (*p != '*' && *p != '+' && *p != '?' && *p != '|' && *p != '^' &&
			   *p != '$') {
			last[depth] = 1;
			total[depth] = sat_add(total[depth], 1);
		}
		for (int i = 0; i <= depth; i++)
			if (total[i] > GREP_PATTERN_EXPANDED_MAX) {
				*why = "the pattern's repetitions ({m,n}) expand to more than "
				       "256 positions";
				return false;
			}
	}
	return true;
}

void tool_grep(struct call *c, json_t *args)
{
	const char *pattern, *path = ".", *only_text = NULL;
	bool icase = false;
	if (!tool_arg_string(c, args, "pattern", true, false, &pattern, NULL))
		return;
	tool_arg_string(c, args, "path", false, false, &path, NULL);
	if (!c->is_error)
		tool_arg_string(c, args, "glob", false, false, &only_text, NULL);
	if (c->is_error || !tool_arg_bool(c, args, "ignore_case", &icase))
		return;
	if (!*pattern) {
		tool_fail(c, "the pattern is empty");
		return;
	}
	const char *costly = NULL;
	if (!pattern_bounded(pattern, &costly)) {
		tool_fail(c, "the pattern is refused: %s; write a simpler one", costly);
		return;
	}
	regex_t re;
	int rc = regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB | (icase ? REG_ICASE : 0));
	if (rc != 0) {
		char msg[256];
		regerror(rc, &re, msg, sizeof msg);
		if (rc == REG_ESPACE)
			c->oom = true;
		else
			tool_fail(c, "invalid regular expression (POSIX extended syntax): %s",
				  msg);
		return;
	}
	/* A glob without '/' names files at any depth, as grep --include
	 * does: "*.c" is taken as a "**" part followed by "*.c". */
	struct globpat only = {0};
	const char *why = NULL;
	char *anywhere = NULL;
	if (only_text && !strchr(only_text, '/') &&
	    asprintf(&anywhere, "**/%s", only_text) < 0) {
		c->oom = true;
		regfree(&re);
		return;
	}
	if (only_text && globpat_parse(&only, anywhere ? anywhere : only_text, &why) < 0) {
		if (why)
			tool_fail(c, "glob: %s", why);
		else
			c->oom = true;
		free(anywhere);
		regfree(&re);
		return;
	}
	free(anywhere);
	struct workspace ws;
	struct buf err = {0};
	struct grep_walk w = {.c = c, .only = only_text ? &only : NULL};
	struct grep_result res = {0};
	char *rel = NULL;
	if (!tool_open_path(c, path, TOOL_READ, &ws))
		goto done;
	const char *dir = path;
	rel = workspace_relative(&ws, dir, &err);
	if (!rel) {
		tool_fail(c, "%s", err.data ? err.data : "bad path");
		goto out;
	}
	w.strip = strcmp(rel, ".") ? strlen(rel) + 1 : 0;
	if (workspace_walk(&ws, dir, visit, &w, &err) < 0) {
		if (errno == ENOMEM) {
			c->oom = true;
			goto out;
		}
		if (errno != ENOTDIR) {
			tool_fail(c, "%s", err.data ? err.data : "cannot search the directory");
			goto out;
		}
		/* A file: searched alone, under its own name. */
		search_file(c, &ws, &re, dir, rel, true, &res);
		if (c->is_error)
			goto out;
	} else if (w.cancelled) {
		tool_fail(c, "cancelled");
		goto out;
	} else {
		strlist_sort(&w.files);
		for (size_t i = 0; i < w.files.n && !c->oom; i++)
			if (!search_file(c, &ws, &re, w.files.items[i], w.files.items[i], false,
					 &res))
				break;
	}
	if (res.lines == 0 && !res.output_full)
		tool_put(c, "no lines match %s in %s\n", pattern, path);
	put_notes(c, &res, w.too_many);
out:
	free(rel);
	buf_free(&err);
	strlist_free(&w.files);
	workspace_close(&ws);
done:
	globpat_free(&only);
	regfree(&re);
}
