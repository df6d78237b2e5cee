/* skill: one parsed SKILL.md (DESIGN.md section 2, D1, D3).
 *
 * One file past 1,200 lines: the front-matter scanner, the libyaml event
 * reader with its limits and the rules of each field feed each other
 * (a field's rule needs the reader's line numbers and limits; the one
 * lenient retry of a description needs the reader's state where it
 * failed, and the reader again), and one reading of the file is easier to
 * check whole. */
#include "skill.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "buf.h"
#include "claudetools.h"
#include "cmdline.h"
#include "yamlbound.h"

/* Result of the internal parsing steps: OK, or the skill was marked invalid
 * (both 0), or out of memory (-1). */
#define OOM (-1)

/* ---------------------------------------------------------------- helpers */

static size_t lim_file(const struct skill_limits *lim)
{
	return lim && lim->file_max ? lim->file_max : SKILL_DEFAULT_FILE_MAX;
}

static size_t lim_fm(const struct skill_limits *lim)
{
	return lim && lim->frontmatter_max ? lim->frontmatter_max
					   : SKILL_DEFAULT_FRONTMATTER_MAX;
}

/* Offset of the first byte that is not part of valid UTF-8 (no overlong
 * forms, surrogates or code points past U+10FFFF), or n when all is valid. */
static size_t utf8_invalid_at(const unsigned char *p, size_t n)
{
	size_t i = 0;
	while (i < n) {
		/* ASCII, the bulk of any SKILL.md, eight bytes at a time. */
		uint64_t w;
		if (n - i >= 8 && (memcpy(&w, p + i, 8), !(w & 0x8080808080808080ULL))) {
			i += 8;
			continue;
		}
		unsigned c = p[i], cp, min;
		size_t k;
		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xC2 && c <= 0xDF) {
			k = 1, cp = c & 0x1F, min = 0x80;
		} else if (c >= 0xE0 && c <= 0xEF) {
			k = 2, cp = c & 0x0F, min = 0x800;
		} else if (c >= 0xF0 && c <= 0xF4) {
			k = 3, cp = c & 0x07, min = 0x10000;
		} else {
			return i;
		}
		if (n - i <= k)
			return i;
		for (size_t j = 1; j <= k; j++) {
			if ((p[i + j] & 0xC0) != 0x80)
				return i;
			cp = cp << 6 | (p[i + j] & 0x3F);
		}
		if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
			return i;
		i += k + 1;
	}
	return n;
}

static size_t line_of(const char *p, size_t off)
{
	size_t line = 1;
	for (size_t i = 0; i < off; i++)
		if (p[i] == '\n')
			line++;
	return line;
}

/* A printable, valid UTF-8 rendering of untrusted text for messages:
 * quoted, control characters and bad bytes as \xNN, cut after 80 bytes. */
static char *quoted(const char *s, size_t n)
{
	struct buf b = {0};
	const unsigned char *p = (const unsigned char *)s;
	int r = buf_puts(&b, "'");
	for (size_t i = 0; i < n && r == 0;) {
		if (b.len > 80) {
			r = buf_puts(&b, "...");
			break;
		}
		size_t k = p[i] < 0x80 ? 1 : p[i] >= 0xF0 ? 4 : p[i] >= 0xE0 ? 3 : 2;
		bool ok = k <= n - i && utf8_invalid_at(p + i, k) == k &&
			  p[i] >= 0x20 && p[i] != 0x7F;
		if (ok) {
			r = buf_append(&b, p + i, k);
			i += k;
		} else {
			r = buf_printf(&b, "\\x%02X", p[i]);
			i++;
		}
	}
	if (r == 0)
		r = buf_puts(&b, "'");
	if (r) {
		buf_free(&b);
		return NULL;
	}
	return buf_steal(&b, NULL);
}

static char *qs(const char *s)
{
	return quoted(s, strlen(s));
}

char *skill_quote(const char *text)
{
	return qs(text ? text : "");
}

static int warnf(struct skill *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int warnf(struct skill *s, const char *fmt, ...)
{
	va_list ap;
	char *m = NULL;
	va_start(ap, fmt);
	int n = vasprintf(&m, fmt, ap);
	va_end(ap);
	if (n < 0)
		return OOM;
	return strlist_add_owned(&s->warnings, m) ? OOM : 0;
}

/* Like warnf, with one untrusted string quoted into the first %s. */
static int warnq(struct skill *s, const char *fmt, const char *text)
{
	char *q = qs(text);
	if (!q)
		return OOM;
	int r = warnf(s, fmt, q);
	free(q);
	return r;
}

static const char *json_kind(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT: return "a mapping";
	case JSON_ARRAY: return "a list";
	case JSON_STRING: return "a string";
	case JSON_INTEGER:
	case JSON_REAL: return "a number";
	case JSON_TRUE:
	case JSON_FALSE: return "a boolean";
	default: return "an empty value";
	}
}

/* ------------------------------------------------------------ tool grants */

static char *trim_dup(const char *p, size_t n)
{
	while (n && isspace((unsigned char)*p))
		p++, n--;
	while (n && isspace((unsigned char)p[n - 1]))
		n--;
	return strndup(p, n);
}

int tool_grant_parse(const char *item, struct tool_grant *g)
{
	memset(g, 0, sizeof *g);
	g->raw = strdup(item);
	char *t = trim_dup(item, strlen(item));
	if (!g->raw || !t)
		goto oom;
	size_t n = strlen(t);
	char *open = strchr(t, '(');
	if (open && n && t[n - 1] == ')') {
		g->tool = trim_dup(t, (size_t)(open - t));
		g->pattern = trim_dup(open + 1, (size_t)(t + n - 1 - (open + 1)));
		if (!g->tool || !g->pattern)
			goto oom;
		size_t pl = strlen(g->pattern);
		if (pl >= 2 && strcmp(g->pattern + pl - 2, ":*") == 0)
			pl -= 2;
		else if (pl >= 1 && g->pattern[pl - 1] == '*')
			pl--; /* "ls *" and "ls*" read as ls:* (words, D3) */
		while (pl && isspace((unsigned char)g->pattern[pl - 1]))
			pl--;
		g->pattern[pl] = '\0';
		free(t);
	} else {
		g->tool = t; /* a malformed item keeps its text: it matches no tool */
	}
	for (char *c = g->tool; *c; c++)
		if (*c >= 'A' && *c <= 'Z')
			*c = (char)(*c - 'A' + 'a');
	const char *same = tool_from_claude(g->tool, NULL);
	if (same && strcmp(same, g->tool) != 0) {
		char *t2 = strdup(same);
		if (!t2)
			goto oom_tool;
		free(g->tool);
		g->tool = t2;
	}
	return 0;
oom_tool:
	t = NULL; /* g->tool owns it (or it was freed above) */
oom:
	free(t);
	free(g->raw);
	free(g->tool);
	free(g->pattern);
	memset(g, 0, sizeof *g);
	return -1;
}

void tool_decl_free(struct tool_decl *d)
{
	for (size_t i = 0; i < d->n; i++) {
		free(d->items[i].tool);
		free(d->items[i].pattern);
		free(d->items[i].raw);
	}
	free(d->items);
	memset(d, 0, sizeof *d);
}

/* What a command pattern in a tools: item gives a sub-agent (mode.h,
 * R13 with D3), said with the skill: the allow-list resolver warns about
 * allowed-tools items itself. */
static int tools_pattern_warn(struct skill *s, const char *item,
			      const char *pattern)
{
	struct strlist words = {0};
	char *err = NULL;
	int r = 0;
	char *q = qs(item);
	if (!q)
		return OOM;
	if (!*pattern)
		r = warnf(s, "tools: item %s grants nothing: empty command pattern", q);
	else if (cmdline_split(pattern, &words, &err) < 0)
		r = err ? warnf(s, "tools: item %s grants nothing: pattern cannot be "
				"split: %s", q, err) : OOM;
	else
		r = warnf(s, "tools: item %s: the pattern is not checked on the "
			  "sub-agent's calls, so the sub-agent gets the tool only when "
			  "the run's allow-list limits it to commands within the "
			  "pattern", q);
	strlist_free(&words);
	free(err);
	free(q);
	return r;
}

static int decl_add(struct skill *s, const char *key, struct tool_decl *d,
		    const char *item)
{
	struct tool_grant g;
	if (tool_grant_parse(item, &g))
		return OOM;
	struct tool_grant *p = realloc(d->items, (d->n + 1) * sizeof *p);
	if (!p) {
		free(g.tool);
		free(g.pattern);
		free(g.raw);
		return OOM;
	}
	d->items = p;
	d->items[d->n++] = g;
	if (!*g.tool || strpbrk(g.tool, "() \t\r\n")) {
		char *q = qs(item);
		if (!q)
			return OOM;
		int r = warnf(s, "%s: item %s is not a tool name; it grants nothing",
			      key, q);
		free(q);
		return r;
	}
	bool claude_only = false;
	tool_from_claude(g.tool, &claude_only);
	if (claude_only && strcmp(key, "tools") == 0) {
		/* allowed-tools items are warned about by the resolver */
		char *q = qs(item);
		if (!q)
			return OOM;
		int r = warnf(s, "tools: item %s is a Claude Code tool skillfs does not "
			      "have; the sub-agent does not get it", q);
		free(q);
		return r;
	}
	if (g.pattern && strcmp(key, "tools") == 0)
		return tools_pattern_warn(s, item, g.pattern);
	return 0;
}

/* Splits a string form on whitespace and commas outside parentheses. */
static int decl_split(struct skill *s, const char *key, struct tool_decl *d,
		      const char *str)
{
	int depth = 0;
	const char *start = NULL;
	for (const char *p = str;; p++) {
		bool sep = *p == '\0' ||
			   (depth == 0 && (*p == ',' || isspace((unsigned char)*p)));
		if (sep) {
			if (start) {
				char *item = strndup(start, (size_t)(p - start));
				if (!item)
					return OOM;
				int r = decl_add(s, key, d, item);
				free(item);
				if (r)
					return r;
				start = NULL;
			}
			if (*p == '\0')
				return 0;
			continue;
		}
		if (!start)
			start = p;
		if (*p == '(')
			depth++;
		else if (*p == ')' && depth > 0)
			depth--;
	}
}

/* D3: every form other than a list of strings, a non-empty string or []
 * declares zero tools, with a warning (fail closed). */
static int parse_decl(struct skill *s, const char *key, const json_t *v,
		      struct tool_decl *d)
{
	d->declared = true;
	if (json_is_string(v)) {
		int r = decl_split(s, key, d, json_string_value(v));
		if (r || d->n)
			return r;
		return warnf(s, "%s names no tools; it declares none", key);
	}
	if (json_is_array(v)) {
		size_t i;
		json_t *e;
		json_array_foreach(v, i, e) {
			if (!json_is_string(e))
				return warnf(s, "%s: item %zu is %s, not a tool name; "
					     "the skill declares no tools", key, i + 1,
					     json_kind(e));
		}
		json_array_foreach(v, i, e) {
			const char *str = json_string_value(e);
			if (strspn(str, " \t\r\n") == strlen(str)) {
				if (warnf(s, "%s: item %zu is empty; ignored", key, i + 1))
					return OOM;
				continue;
			}
			if (decl_add(s, key, d, str))
				return OOM;
		}
		return 0;
	}
	return warnf(s, "%s is %s, not a list or a string; it declares no tools",
		     key, json_kind(v));
}

/* ------------------------------------------------------------ YAML loader */

struct yanchor {
	char *name;
	json_t *value;
};

struct yframe {
	json_t *c;
	char *key;    /* mapping: the key awaiting its value, or NULL */
	char *anchor; /* anchor of this collection, or NULL */
};

struct yload {
	struct yframe st[SKILL_YAML_MAX_DEPTH];
	size_t depth;
	struct yanchor *anchors;
	size_t nanchors, canchors;
	struct yaml_budget budget; /* the bounds (SKILL_YAML_MAX_*) */
	json_t *root;
	char *err;        /* why the front-matter is invalid */
	struct skill *s;  /* for warnings */
	size_t line0;     /* file line of the first front-matter line */
	/* For the lenient retry (lenient_description): whether the root is a
	 * block mapping; its last key: whether it was a plain 'description',
	 * where it began; the line of the last value read at depth 1 and
	 * whether it was a plain scalar; and the line of a libyaml scanner or
	 * parser error (+1; 0: none). */
	bool root_block;
	bool key_description;
	size_t key_line, key_col;
	size_t val_line;
	bool val_plain;
	size_t syntax_line;
};

static int yfail(struct yload *y, size_t line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int yfail(struct yload *y, size_t line, const char *fmt, ...)
{
	struct buf b = {0};
	va_list ap;
	va_start(ap, fmt);
	int r = buf_printf(&b, "front-matter line %zu: ", y->line0 + line);
	if (r == 0)
		r = buf_vprintf(&b, fmt, ap);
	va_end(ap);
	if (r) {
		buf_free(&b);
		return OOM;
	}
	y->err = buf_steal(&b, NULL);
	return y->err ? 1 : OOM;
}

/* Counts ev against the front-matter's bounds (yamlbound). */
static int ybudget(struct yload *y, const yaml_event_t *ev)
{
	const char *why = NULL;
	int r = yaml_budget_event(&y->budget, ev, &why);
	if (r < 0)
		return OOM;
	if (r > 0)
		return yfail(y, ev->start_mark.line, "%s; refusing the front-matter",
			     why);
	return 0;
}

static int yanchor_add(struct yload *y, const char *name, json_t *v)
{
	if (y->nanchors == y->canchors) {
		size_t cap = y->canchors ? y->canchors * 2 : 8;
		struct yanchor *p = realloc(y->anchors, cap * sizeof *p);
		if (!p)
			return OOM;
		y->anchors = p;
		y->canchors = cap;
	}
	char *n = strdup(name);
	if (!n)
		return OOM;
	y->anchors[y->nanchors++] = (struct yanchor){n, json_incref(v)};
	return 0;
}

static const struct yanchor *yanchor_find(const struct yload *y, const char *name)
{
	for (size_t i = y->nanchors; i-- > 0;) /* a redefinition wins */
		if (strcmp(y->anchors[i].name, name) == 0)
			return &y->anchors[i];
	return NULL;
}

/* Places a finished value (reference stolen) into the open collection. */
static int yadd(struct yload *y, size_t line, json_t *v)
{
	if (y->depth == 0) {
		json_decref(y->root);
		y->root = v;
		return 0;
	}
	struct yframe *f = &y->st[y->depth - 1];
	if (json_is_array(f->c))
		return json_array_append_new(f->c, v) ? OOM : 0;
	if (!f->key) {
		if (!json_is_string(v)) {
			json_decref(v);
			return yfail(y, line, "a mapping key must be a plain value, "
				     "not a list or a mapping");
		}
		/* A duplicate key is refused as soon as it is seen, at its own
		 * line: its value must never replace (or widen) the first. */
		if (json_object_get(f->c, json_string_value(v))) {
			char *q = qs(json_string_value(v));
			json_decref(v);
			int r = q ? yfail(y, line, "duplicate key %s: a key may appear "
					  "only once in a mapping", q) : OOM;
			free(q);
			return r;
		}
		f->key = strdup(json_string_value(v));
		json_decref(v);
		return f->key ? 0 : OOM;
	}
	int r = json_object_set_new(f->c, f->key, v);
	free(f->key);
	f->key = NULL;
	return r ? OOM : 0;
}

static bool all_digits(const char *p, const char *digits)
{
	if (!*p)
		return false;
	for (; *p; p++)
		if (!strchr(digits, *p))
			return false;
	return true;
}

/* YAML 1.2 core schema float syntax (without .inf and .nan, which JSON
 * cannot hold): [-+]? (\.[0-9]+ | [0-9]+(\.[0-9]*)?) ([eE][-+]?[0-9]+)? */
static bool is_float(const char *p)
{
	if (*p == '-' || *p == '+')
		p++;
	size_t a = strspn(p, "0123456789"), b = 0;
	p += a;
	if (*p == '.') {
		p++;
		b = strspn(p, "0123456789");
		p += b;
	}
	if (!a && !b)
		return false;
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '-' || *p == '+')
			p++;
		if (!all_digits(p, "0123456789"))
			return false;
		return true;
	}
	return *p == '\0';
}

/* Resolves a plain scalar with the YAML 1.2 core schema. */
static json_t *resolve_plain(const char *v, size_t n)
{
	static const char *const nulls[] = {"", "~", "null", "Null", "NULL"};
	static const char *const trues[] = {"true", "True", "TRUE"};
	static const char *const falses[] = {"false", "False", "FALSE"};
	for (size_t i = 0; i < sizeof nulls / sizeof *nulls; i++)
		if (strcmp(v, nulls[i]) == 0)
			return json_null();
	for (size_t i = 0; i < 3; i++) {
		if (strcmp(v, trues[i]) == 0)
			return json_true();
		if (strcmp(v, falses[i]) == 0)
			return json_false();
	}
	const char *d = v + (*v == '-' || *v == '+');
	int base = 0;
	const char *digits = NULL;
	if (all_digits(d, "0123456789"))
		base = 10, digits = v;
	else if (d == v && strncmp(v, "0x", 2) == 0 && all_digits(v + 2, "0123456789abcdefABCDEF"))
		base = 16, digits = v + 2;
	else if (d == v && strncmp(v, "0o", 2) == 0 && all_digits(v + 2, "01234567"))
		base = 8, digits = v + 2;
	if (base) {
		errno = 0;
		long long x = strtoll(digits, NULL, base);
		if (errno == 0)
			return json_integer(x);
	}
	if (base == 10 || is_float(v)) {
		double x = strtod(v, NULL);
		if (isfinite(x))
			return json_real(x);
	}
	return json_stringn(v, n);
}

static json_t *scalar_json(const yaml_event_t *ev, bool as_key)
{
	const char *v = (const char *)ev->data.scalar.value;
	size_t n = ev->data.scalar.length;
	const char *tag = (const char *)ev->data.scalar.tag;
	if (as_key || ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE ||
	    (tag && (strcmp(tag, "!") == 0 || strcmp(tag, YAML_STR_TAG) == 0)))
		return json_stringn(v, n);
	return resolve_plain(v, n);
}

static int yevent(struct yload *y, yaml_event_t *ev, int *docs, bool *done)
{
	size_t line = ev->start_mark.line;
	struct yframe *top = y->depth ? &y->st[y->depth - 1] : NULL;
	bool key_pos = top && json_is_object(top->c) && !top->key;
	int r = ybudget(y, ev);
	if (r)
		return r;

	switch (ev->type) {
	case YAML_STREAM_END_EVENT:
		*done = true;
		return 0;
	case YAML_DOCUMENT_START_EVENT:
		if (++*docs > 1)
			return yfail(y, line, "more than one YAML document");
		return 0;
	case YAML_SCALAR_EVENT: {
		const char *v = (const char *)ev->data.scalar.value;
		size_t n = ev->data.scalar.length;
		if (memchr(v, '\0', n))
			return yfail(y, line, "a NUL character is not allowed");
		json_t *j = scalar_json(ev, key_pos);
		if (!j)
			return OOM;
		bool plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
		if (key_pos && y->depth == 1) {
			y->key_description = plain && strcmp(v, "description") == 0;
			y->key_line = ev->start_mark.line;
			y->key_col = ev->start_mark.column;
			y->val_plain = false; /* its value is yet to come */
		} else if (y->depth == 1) {
			y->val_line = ev->start_mark.line;
			y->val_plain = plain;
		}
		if (ev->data.scalar.anchor &&
		    yanchor_add(y, (const char *)ev->data.scalar.anchor, j)) {
			json_decref(j);
			return OOM;
		}
		return yadd(y, line, j);
	}
	case YAML_ALIAS_EVENT: {
		const char *name = (const char *)ev->data.alias.anchor;
		if (y->depth == 1)
			y->val_plain = false;
		const struct yanchor *a = yanchor_find(y, name);
		if (!a) {
			char *q = qs(name);
			r = q ? yfail(y, line, "unknown alias *%s", q) : OOM;
			free(q);
			return r;
		}
		json_t *j = json_deep_copy(a->value);
		return j ? yadd(y, line, j) : OOM;
	}
	case YAML_SEQUENCE_START_EVENT:
	case YAML_MAPPING_START_EVENT: {
		/* ybudget refused a frame past SKILL_YAML_MAX_DEPTH. */
		if (key_pos)
			return yfail(y, line, "a mapping key must be a plain value, "
				     "not a list or a mapping");
		bool seq = ev->type == YAML_SEQUENCE_START_EVENT;
		if (y->depth == 1)
			y->val_plain = false;
		if (!seq && y->depth == 0)
			y->root_block = ev->data.mapping_start.style !=
					YAML_FLOW_MAPPING_STYLE;
		const yaml_char_t *anchor = seq ? ev->data.sequence_start.anchor
						: ev->data.mapping_start.anchor;
		struct yframe f = {
			.c = seq ? json_array() : json_object(),
			.anchor = anchor ? strdup((const char *)anchor) : NULL,
		};
		if (!f.c || (anchor && !f.anchor)) {
			json_decref(f.c);
			free(f.anchor);
			return OOM;
		}
		y->st[y->depth++] = f;
		return 0;
	}
	case YAML_SEQUENCE_END_EVENT:
	case YAML_MAPPING_END_EVENT: {
		if (!y->depth)
			return 0;
		struct yframe f = y->st[--y->depth];
		free(f.key);
		if (f.anchor) {
			r = yanchor_add(y, f.anchor, f.c);
			free(f.anchor);
			if (r) {
				json_decref(f.c);
				return r;
			}
		}
		return yadd(y, line, f.c);
	}
	default:
		return 0;
	}
}

static int yparser_error(struct yload *y, const yaml_parser_t *p,
			 const char *text)
{
	if (p->error == YAML_MEMORY_ERROR)
		return OOM;
	const char *problem = p->problem ? p->problem : "unknown error";
	if (p->error == YAML_SCANNER_ERROR || p->error == YAML_PARSER_ERROR)
		y->syntax_line = p->problem_mark.line + 1;
	if (p->error == YAML_READER_ERROR)
		return yfail(y, line_of(text, p->problem_offset) - 1,
			     "YAML error: %s", problem);
	if (p->context)
		return yfail(y, p->problem_mark.line,
			     "YAML error at column %zu: %s %s (line %zu)",
			     p->problem_mark.column + 1, problem, p->context,
			     y->line0 + p->context_mark.line);
	return yfail(y, p->problem_mark.line, "YAML error at column %zu: %s",
		     p->problem_mark.column + 1, problem);
}

/* Whether y failed with a YAML syntax error on the line where the key
 * 'description' of the root block mapping begins, at column 0 and plain,
 * while reading that key's value (none yet, or a plain scalar begun on
 * that line, as libyaml gives "x" before refusing "description: x: y"):
 * the one failure lenient_description may retry. */
static bool failed_in_top_description(const struct yload *y)
{
	if (!y->syntax_line || y->depth != 1 || !y->root_block ||
	    !json_is_object(y->st[0].c) || !y->key_description ||
	    y->key_col != 0 || y->key_line + 1 != y->syntax_line)
		return false;
	if (y->st[0].key) /* the key awaits its value */
		return strcmp(y->st[0].key, "description") == 0;
	return y->val_plain && y->val_line == y->key_line;
}

/* Loads the front-matter text into *out (NULL when it holds no document).
 * Returns 0, 1 with *err set (invalid), or OOM. On 1, *desc_line (may be
 * NULL) is the 0-based line of the text that failed plus one when
 * failed_in_top_description holds, else 0. */
static int yaml_load(struct skill *s, const char *text, size_t len,
		     size_t line0, json_t **out, char **err, size_t *desc_line)
{
	if (desc_line)
		*desc_line = 0;
	struct yload *y = calloc(1, sizeof *y);
	if (!y)
		return OOM;
	y->s = s;
	y->line0 = line0;
	static const struct yaml_bounds bounds = {SKILL_YAML_MAX_DEPTH,
		SKILL_YAML_MAX_NODES, SKILL_YAML_MAX_ALIAS_BYTES};
	if (yaml_budget_init(&y->budget, &bounds) < 0) {
		free(y);
		return OOM;
	}
	yaml_parser_t p;
	if (!yaml_parser_initialize(&p)) {
		yaml_budget_free(&y->budget);
		free(y);
		return OOM;
	}
	yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
	yaml_parser_set_encoding(&p, YAML_UTF8_ENCODING);

	int r = 0, docs = 0;
	bool done = false;
	while (!done && r == 0) {
		yaml_event_t ev;
		if (!yaml_parser_parse(&p, &ev)) {
			r = yparser_error(y, &p, text);
			break;
		}
		r = yevent(y, &ev, &docs, &done);
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&p);
	if (r > 0 && desc_line && failed_in_top_description(y))
		*desc_line = y->syntax_line;

	while (y->depth) {
		struct yframe *f = &y->st[--y->depth];
		json_decref(f->c);
		free(f->key);
		free(f->anchor);
	}
	for (size_t i = 0; i < y->nanchors; i++) {
		free(y->anchors[i].name);
		json_decref(y->anchors[i].value);
	}
	free(y->anchors);
	yaml_budget_free(&y->budget);
	if (r == 0) {
		*out = y->root;
	} else {
		json_decref(y->root);
		*err = y->err;
	}
	free(y);
	return r;
}

/* ------------------------------------------------------- skill lifecycle */

/* dir_name and dir share one allocation (dir_name's), and name is
 * dir_name itself when they are the same (name_dup): two allocations
 * fewer for each skill. */
static struct skill *skill_new(const char *dir_name, const char *dir)
{
	struct skill *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->refs = 1;
	s->valid = true;
	s->inline_flag = -1;
	s->user_invocable = true;
	s->category = SKILL_ACTION;
	if (!dir_name)
		dir_name = "";
	size_t nl = strlen(dir_name) + 1, dl = dir ? strlen(dir) + 1 : 0;
	s->dir_name = malloc(nl + dl);
	if (!s->dir_name) {
		free(s);
		return NULL;
	}
	memcpy(s->dir_name, dir_name, nl);
	if (dir) {
		s->dir = s->dir_name + nl;
		memcpy(s->dir, dir, dl);
	}
	return s;
}

/* A finished skill keeps no room beyond its lists' items (they grow 8
 * at a time, and most hold one or two if any). */
static void fit(struct skill *s)
{
	strlist_fit(&s->warnings);
	strlist_fit(&s->sub_skill_refs);
}

/* A copy of name n for s, or s's dir_name itself when it is the same. */
static char *name_dup(struct skill *s, const char *n)
{
	return strcmp(n, s->dir_name) == 0 ? s->dir_name : strdup(n);
}

static void skill_free(struct skill *s)
{
	if (s->name != s->dir_name)
		free(s->name);
	free(s->dir_name); /* and dir */
	free(s->parent);
	free(s->error);
	strlist_free(&s->warnings);
	free(s->description);
	free(s->license);
	free(s->compatibility);
	tool_decl_free(&s->allowed_tools);
	tool_decl_free(&s->tools);
	strlist_free(&s->sub_skill_refs);
	free(s->frontmatter_json);
	free(s->text);
	for (size_t i = 0; i < s->nsubs; i++)
		skill_unref(s->subs[i]);
	free(s->subs);
	free(s);
}

struct skill *skill_ref(struct skill *s)
{
	if (s)
		__atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED);
	return s;
}

void skill_unref(struct skill *s)
{
	if (s && __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) == 0)
		skill_free(s);
}

const char *skill_category_name(enum skill_category c)
{
	return c == SKILL_KNOWLEDGE ? "knowledge" : "action";
}

/* D1: invalid, no prose, no front-matter fields, declared-empty
 * allowed-tools. Takes msg. */
static int set_invalid(struct skill *s, char *msg)
{
	if (!msg)
		return OOM;
	s->valid = false;
	free(s->error);
	s->error = msg;
	free(s->description);
	free(s->license);
	free(s->compatibility);
	s->description = s->license = s->compatibility = NULL;
	free(s->frontmatter_json);
	s->frontmatter_json = NULL;
	tool_decl_free(&s->tools);
	strlist_free(&s->sub_skill_refs);
	s->inline_flag = -1;
	s->category = SKILL_ACTION;
	s->disable_model_invocation = false;
	s->user_invocable = true;
	tool_decl_free(&s->allowed_tools);
	s->allowed_tools.declared = true;
	s->body_len = 0;
	return 0;
}

struct skill *skill_invalid_copy(const struct skill *s, const char *error)
{
	struct skill *c = skill_new(s->dir_name, s->dir);
	if (!c)
		return NULL;
	c->name = name_dup(c, s->name ? s->name : s->dir_name);
	c->parent = s->parent ? strdup(s->parent) : NULL;
	c->text = s->text ? malloc(s->file_size + 1) : NULL;
	c->subs = s->nsubs ? calloc(s->nsubs, sizeof *c->subs) : NULL;
	if (!c->name || (s->parent && !c->parent) || (s->text && !c->text) ||
	    (s->nsubs && !c->subs) || strlist_extend(&c->warnings, &s->warnings) < 0 ||
	    set_invalid(c, strdup(error))) {
		skill_unref(c);
		return NULL;
	}
	if (s->text)
		memcpy(c->text, s->text, s->file_size + 1);
	c->text_read = s->text_read;
	c->body_off = s->body_off;
	c->text_hash = s->text_hash;
	c->file_size = s->file_size;
	for (size_t i = 0; i < s->nsubs; i++)
		c->subs[i] = skill_ref(s->subs[i]);
	c->nsubs = s->nsubs;
	c->st_mode = s->st_mode;
	c->st_dev = s->st_dev;
	c->st_ino = s->st_ino;
	c->st_size = s->st_size;
	c->st_mtim = s->st_mtim;
	c->st_ctim = s->st_ctim;
	fit(c);
	return c;
}

static int invalidf(struct skill *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int invalidf(struct skill *s, const char *fmt, ...)
{
	va_list ap;
	char *m = NULL;
	va_start(ap, fmt);
	int n = vasprintf(&m, fmt, ap);
	va_end(ap);
	return set_invalid(s, n < 0 ? NULL : m);
}

const char *skill_name_unusable(const char *n)
{
	size_t len = strlen(n);
	if (len == 0)
		return "it is empty";
	if (len > SKILL_NAME_MAX)
		return "it is longer than 64 bytes";
	if (strchr(n, '/'))
		return "it contains '/'";
	if (strcmp(n, ".") == 0 || strcmp(n, "..") == 0)
		return "it is '.' or '..'";
	for (const unsigned char *p = (const unsigned char *)n; *p; p++)
		if (*p < 0x20 || *p == 0x7F)
			return "it contains a control character";
	return NULL;
}

bool skill_name_valid(const char *name)
{
	size_t n = name ? strlen(name) : 0;
	if (n == 0 || n > SKILL_NAME_MAX || name[0] == '-' || name[n - 1] == '-')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
			return false;
		if (c == '-' && name[i + 1] == '-')
			return false;
	}
	return true;
}

/* ------------------------------------------------- front-matter meaning */

/* A string key: absent leaves *out NULL; a wrong type warns. */
static int str_key(struct skill *s, const json_t *fm, const char *key,
		   char **out)
{
	const json_t *v = json_object_get(fm, key);
	if (!v)
		return 0;
	if (!json_is_string(v))
		return warnf(s, "front-matter '%s' is %s, not a string; ignored",
			     key, json_kind(v));
	*out = strdup(json_string_value(v));
	return *out ? 0 : OOM;
}

/* A boolean key: absent or a wrong type (warned) leaves *out unchanged. */
static int bool_key(struct skill *s, const json_t *fm, const char *key,
		    bool *out)
{
	const json_t *v = json_object_get(fm, key);
	if (!v)
		return 0;
	if (json_is_boolean(v)) {
		*out = json_is_true(v);
		return 0;
	}
	return warnf(s, "front-matter '%s' is %s, not true or false; using the "
		     "default (%s)", key, json_kind(v), *out ? "true" : "false");
}

#define NAME_RULES_BROKEN "name %s breaks the naming rules (1-64 of a-z, " \
	"0-9 and '-', no leading, trailing or double hyphen)"

static int read_name(struct skill *s, const json_t *fm)
{
	const json_t *v = json_object_get(fm, "name");
	if (!v)
		return 0;
	if (!json_is_string(v))
		return warnf(s, "front-matter 'name' is %s, not a string; the skill "
			     "takes its directory's name", json_kind(v));
	const char *n = json_string_value(v);
	const char *why = skill_name_unusable(n);
	char *q = qs(n);
	if (!q)
		return OOM;
	int r;
	if (why) {
		r = warnf(s, "name %s cannot be used (%s); the skill takes its "
			  "directory's name", q, why);
	} else {
		s->name = name_dup(s, n);
		r = s->name ? 0 : OOM;
		if (!r && !skill_name_valid(n))
			r = warnf(s, NAME_RULES_BROKEN, q);
		if (!r && strcmp(n, s->dir_name) != 0) {
			char *qd = qs(s->dir_name);
			r = qd ? warnf(s, "name %s differs from the directory name %s",
				       q, qd) : OOM;
			free(qd);
		}
	}
	free(q);
	return r;
}

static int read_sub_skills(struct skill *s, const json_t *fm)
{
	const json_t *v = json_object_get(fm, "sub-skills");
	if (!v)
		return 0;
	if (!json_is_array(v))
		return warnf(s, "front-matter 'sub-skills' is %s, not a list of "
			     "names; ignored", json_kind(v));
	size_t i;
	const json_t *e;
	json_array_foreach(v, i, e) {
		const char *n = json_string_value(e);
		int r = 0;
		if (!n || !*n)
			r = warnf(s, "sub-skills: item %zu is %s, not a name; ignored",
				  i + 1, n ? "empty" : json_kind(e));
		else if (strlist_has(&s->sub_skill_refs, n))
			r = warnq(s, "sub-skills: %s is listed more than once; "
				  "included once", n);
		else
			r = strlist_add(&s->sub_skill_refs, n) ? OOM : 0;
		if (r)
			return r;
	}
	return 0;
}

bool skill_has_description(const struct skill *s)
{
	return s && s->description &&
	       s->description[strspn(s->description, " \t\r\n")] != '\0';
}

/* What an action skill without a description loses (prompt.c leaves it
 * out of <available_skills>). */
#define NOT_LISTED "the skill is not listed in <available_skills> (the model " \
	"cannot know when to use a skill without a description)"

/* The description's warnings, once the category is known: missing (not a
 * string, or blank), and over SKILL_DESCRIPTION_MAX characters. */
static int description_warnings(struct skill *s, const json_t *fm)
{
	const char *why = NULL;
	if (!json_object_get(fm, "description"))
		why = "no description in the front-matter";
	else if (!s->description)
		why = "no usable description"; /* str_key said why */
	else if (!skill_has_description(s))
		why = "the description is empty";
	int r = 0;
	if (why && s->category == SKILL_ACTION)
		r = warnf(s, "%s: " NOT_LISTED, why);
	else if (why)
		r = warnf(s, "%s", why);
	if (r || !s->description)
		return r;
	size_t chars = 0;
	for (const unsigned char *p = (const unsigned char *)s->description; *p; p++)
		chars += (*p & 0xC0) != 0x80;
	if (chars > SKILL_DESCRIPTION_MAX)
		r = warnf(s, "the description is %zu characters, over the limit of "
			  "%d characters of the Agent Skills format", chars,
			  SKILL_DESCRIPTION_MAX);
	return r;
}

/* Reads the understood keys from fm (a JSON object). */
static int read_frontmatter(struct skill *s, const json_t *fm)
{
	int r = read_name(s, fm);
	if (!r)
		r = str_key(s, fm, "description", &s->description);
	if (!r)
		r = str_key(s, fm, "license", &s->license);
	if (!r)
		r = str_key(s, fm, "compatibility", &s->compatibility);
	if (r)
		return r;

	json_t *hy = json_object_get(fm, "allowed-tools");
	json_t *us = json_object_get(fm, "allowed_tools");
	if (hy && us && warnf(s, "both allowed-tools and allowed_tools are "
			      "present; allowed-tools is used"))
		return OOM;
	if ((hy || us) && parse_decl(s, hy ? "allowed-tools" : "allowed_tools",
				     hy ? hy : us, &s->allowed_tools))
		return OOM;
	json_t *tools = json_object_get(fm, "tools");
	if (tools && parse_decl(s, "tools", tools, &s->tools))
		return OOM;

	const json_t *in = json_object_get(fm, "inline");
	if (in && json_is_boolean(in))
		s->inline_flag = json_is_true(in);
	else if (in && warnf(s, "front-matter 'inline' is %s, not true or false; "
			     "ignored", json_kind(in)))
		return OOM;

	if (read_sub_skills(s, fm))
		return OOM;

	const json_t *cat = json_object_get(fm, "category");
	if (cat) {
		const char *c = json_string_value(cat);
		if (c && strcmp(c, "knowledge") == 0)
			s->category = SKILL_KNOWLEDGE;
		else if (!c || strcmp(c, "action") != 0) {
			r = c ? warnq(s, "category %s is neither action nor knowledge; "
				      "using action", c)
			      : warnf(s, "front-matter 'category' is %s, not action or "
				      "knowledge; using action", json_kind(cat));
			if (r)
				return r;
		}
	}
	if (bool_key(s, fm, "disable-model-invocation", &s->disable_model_invocation) ||
	    bool_key(s, fm, "user-invocable", &s->user_invocable))
		return OOM;
	return description_warnings(s, fm);
}

/* ------------------------------------------------------------ file parse */

/* Whether [p, p+n) is the delimiter line mark (trailing blanks and CR
 * allowed). */
static bool line_is(const char *p, size_t n, const char *mark)
{
	while (n && (p[n - 1] == '\r' || p[n - 1] == ' ' || p[n - 1] == '\t'))
		n--;
	return n == 3 && memcmp(p, mark, 3) == 0;
}

/* The body of text (n bytes) into out (room for n bytes): CRLF turned
 * into LF. Returns its length. */
static size_t body_copy(char *out, const char *p, size_t n)
{
	size_t j = 0;
	for (size_t i = 0; i < n; i++) {
		if (p[i] == '\r' && i + 1 < n && p[i + 1] == '\n')
			continue;
		out[j++] = p[i];
	}
	return j;
}

/* The body is raw[off, len): skill_read_text makes it (body_copy). */
static int set_body(struct skill *s, const char *raw, size_t off, size_t len)
{
	size_t crlf = 0;
	for (const char *p = raw + off, *end = raw + len;
	     p < end && (p = memchr(p, '\r', (size_t)(end - p))); p++)
		crlf += p + 1 < end && p[1] == '\n';
	s->body_off = off;
	s->body_len = len - off - crlf;
	return 0;
}

/* ------------------------------------------------- lenient description */

static bool blank(char c)
{
	return c == ' ' || c == '\t';
}

/* Where the value of a "description:" line starts and ends, when the
 * line [p, p+n) is one lenient_description may take as plain text: the
 * key at column 0, an optional anchor (&name, kept outside the quotes),
 * then a plain value that holds ": " and starts with no YAML indicator;
 * a trailing comment (" #...") and blanks are not part of the value.
 * Returns false for any other line. */
static bool description_value(const char *p, size_t n, size_t *vs, size_t *ve)
{
	static const char key[] = "description:";
	if (n && p[n - 1] == '\r')
		n--;
	if (n <= sizeof key - 1 || memcmp(p, key, sizeof key - 1) != 0 ||
	    !blank(p[sizeof key - 1]))
		return false;
	size_t i = sizeof key - 1;
	while (i < n && blank(p[i]))
		i++;
	if (i < n && p[i] == '&') { /* an anchor: &name, then blanks */
		while (i < n && !blank(p[i]))
			i++;
		if (i == n)
			return false;
		while (i < n && blank(p[i]))
			i++;
	}
	if (i == n || strchr("\"'[]{}#&*!|>%@`,", p[i]) ||
	    (strchr("-?:", p[i]) && (i + 1 == n || blank(p[i + 1]))))
		return false;
	size_t e = i;
	while (e < n && !(p[e] == '#' && blank(p[e - 1])))
		e++;
	while (e > i && blank(p[e - 1]))
		e--;
	bool colon = false;
	for (size_t k = i; k + 1 < e && !colon; k++)
		colon = p[k] == ':' && p[k + 1] == ' ';
	*vs = i;
	*ve = e;
	return colon;
}

/* Whether a line after [text+from, text+len) continues the value of the
 * line before it (an indented line that is neither blank nor a comment,
 * before the next line at column 0): a multi-line value is not retried. */
static bool continued(const char *text, size_t len, size_t from)
{
	for (size_t p = from; p < len;) {
		const char *nl = memchr(text + p, '\n', len - p);
		size_t e = nl ? (size_t)(nl - text) : len, i = p;
		while (i < e && (blank(text[i]) || text[i] == '\r'))
			i++;
		if (i < e && i == p)
			return false; /* the next key at column 0 */
		if (i < e && text[i] != '#')
			return true;
		p = e + 1;
	}
	return false;
}

/* The front-matter text with [vs, ve) replaced by value as a YAML
 * double-quoted scalar (\ and " escaped, control characters as \xNN). */
static char *with_quoted(const char *text, size_t len, size_t vs, size_t ve,
			 const char *value, size_t vlen)
{
	struct buf b = {0};
	int r = buf_append(&b, text, vs);
	if (r == 0)
		r = buf_puts(&b, "\"");
	for (size_t i = 0; i < vlen && r == 0; i++) {
		unsigned char c = (unsigned char)value[i];
		if (c == '\\' || c == '"')
			r = buf_printf(&b, "\\%c", c);
		else if (c < 0x20 || c == 0x7F)
			r = buf_printf(&b, "\\x%02X", c);
		else
			r = buf_append(&b, value + i, 1);
	}
	if (r == 0)
		r = buf_puts(&b, "\"");
	if (r == 0)
		r = buf_append(&b, text + ve, len - ve);
	if (r) {
		buf_free(&b);
		return NULL;
	}
	return buf_steal(&b, NULL);
}

/* The first key other than description whose value differs between the
 * mappings a and b (or that only one holds), or NULL. */
static const char *changed_key(const json_t *a, const json_t *b)
{
	const char *k;
	const json_t *v;
	json_object_foreach((json_t *)a, k, v) {
		const json_t *w = json_object_get(b, k);
		if (strcmp(k, "description") != 0 && (!w || !json_equal(v, w)))
			return k;
	}
	json_object_foreach((json_t *)b, k, v)
		if (strcmp(k, "description") != 0 && !json_object_get(a, k))
			return k;
	return NULL;
}

/* A copy of the mapping fm without its key description. */
static json_t *without_description(const json_t *fm)
{
	json_t *c = json_copy((json_t *)fm);
	if (c)
		json_object_del(c, "description");
	return c;
}

/* The one lenient reading (issue: an unquoted ': ' in a description).
 * Called when yaml_load refused the front-matter text with a syntax error
 * on the 0-based line `line`, at the key description of the root block
 * mapping. When that line's value qualifies (description_value, no
 * continuation line), the text is parsed again, as strictly as before,
 * once with the value double-quoted (A) and once with it replaced by ""
 * (B); the reading is taken only when both parse, A's description is the
 * value byte for byte, and every key other than description is the same in
 * A and B, so the value can reach no other key (through an anchor, say).
 * Returns 0 with *fm set (and a warning on s), 1 when the fallback does
 * not apply (nothing changed; *note set when it was refused because
 * another key would change), or OOM. */
static int lenient_description(struct skill *s, const char *text, size_t len,
			       size_t line, size_t line0, json_t **fm,
			       char **note)
{
	size_t p = 0;
	for (size_t k = 0; k < line && p < len; k++) {
		const char *nl = memchr(text + p, '\n', len - p);
		p = nl ? (size_t)(nl - text) + 1 : len;
	}
	if (p >= len)
		return 1;
	const char *nl = memchr(text + p, '\n', len - p);
	size_t e = nl ? (size_t)(nl - text) : len, vs, ve;
	if (!description_value(text + p, e - p, &vs, &ve) ||
	    continued(text, len, nl ? e + 1 : len))
		return 1;
	vs += p;
	ve += p;
	char *a = with_quoted(text, len, vs, ve, text + vs, ve - vs);
	char *b = with_quoted(text, len, vs, ve, "", 0);
	json_t *ja = NULL, *jb = NULL, *ca = NULL, *cb = NULL;
	char *ea = NULL, *eb = NULL;
	int r = a && b ? 0 : OOM;
	int ra = r ? 1 : yaml_load(s, a, strlen(a), line0, &ja, &ea, NULL);
	int rb = r || ra ? 1 : yaml_load(s, b, strlen(b), line0, &jb, &eb, NULL);
	if (ra < 0 || rb < 0)
		r = OOM;
	else if (r == 0 && (ra || rb || !json_is_object(ja) || !json_is_object(jb)))
		r = 1;
	if (r == 0) {
		const json_t *d = json_object_get(ja, "description");
		ca = without_description(ja);
		cb = without_description(jb);
		if (!ca || !cb)
			r = OOM;
		else if (!json_is_string(d) || json_string_length(d) != ve - vs ||
			 memcmp(json_string_value(d), text + vs, ve - vs) != 0)
			r = 1;
		else if (!json_equal(ca, cb)) {
			const char *k = changed_key(ja, jb);
			char *q = qs(k ? k : "?"), *m = NULL;
			r = q && asprintf(&m, "(the description was not read as "
					  "plain text: that would change the key %s "
					  "too)", q) >= 0 ? 1 : OOM;
			*note = r == 1 ? m : NULL;
			free(q);
		}
	}
	if (r == 0)
		r = warnf(s, "front-matter line %zu: the description's value holds "
			  "': ', which unquoted YAML does not allow; it was read as "
			  "plain text, as if quoted (every other key as written). "
			  "Quote the value to say so", line0 + line);
	if (r == 0) {
		*fm = ja;
		ja = NULL;
	}
	json_decref(ja);
	json_decref(jb);
	json_decref(ca);
	json_decref(cb);
	free(ea);
	free(eb);
	free(a);
	free(b);
	return r;
}

/* The digest of a SKILL.md's bytes that skill_read_text checks the file
 * against (FNV-1a over 64-bit words, then the bytes left, mixed at the
 * end: the file's identity and size must match too, so it need only catch
 * a change that left them as they were). */
static uint64_t text_hash_of(const char *p, size_t n)
{
	const uint64_t prime = 0x100000001b3ULL;
	uint64_t h = 0xcbf29ce484222325ULL, w;
	size_t i = 0;
	for (; n - i >= 8; i += 8) {
		memcpy(&w, p + i, 8);
		h = (h ^ w) * prime;
		h ^= h >> 29;
	}
	for (; i < n; i++)
		h = (h ^ (unsigned char)p[i]) * prime;
	h ^= h >> 32;
	h *= 0xff51afd7ed558ccdULL;
	return h ^ h >> 29;
}

/* Parses raw (len bytes, any content, not kept) into s; *fm is the
 * front-matter (a JSON object, the caller's reference) or NULL for finish.
 * Returns 0 or OOM. */
static int parse_text(struct skill *s, const char *raw, size_t len,
		      const struct skill_limits *lim, json_t **fmp)
{
	*fmp = NULL;
	s->file_size = len;
	if (len > lim_file(lim))
		return invalidf(s, "SKILL.md is %zu bytes, over the limit of %zu "
				"bytes", len, lim_file(lim));
	s->text_read = true;
	s->text_hash = text_hash_of(raw, len);

	const char *nul = memchr(raw, '\0', len);
	if (nul)
		return invalidf(s, "SKILL.md contains a NUL byte (line %zu, byte "
				"%zu)", line_of(raw, (size_t)(nul - raw)),
				(size_t)(nul - raw));
	size_t bad = utf8_invalid_at((const unsigned char *)raw, len);
	if (bad < len)
		return invalidf(s, "SKILL.md is not valid UTF-8 (line %zu, byte "
				"%zu)", line_of(raw, bad), bad);

	size_t off = len >= 3 && memcmp(raw, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
	const char *nl = memchr(raw + off, '\n', len - off);
	size_t eol = nl ? (size_t)(nl - raw) : len;
	if (!line_is(raw + off, eol - off, "---"))
		return set_body(s, raw, off, len);

	size_t fm_start = nl ? eol + 1 : len, fm_end = 0, body = 0, p = fm_start;
	bool closed = false;
	while (p < len && !closed) {
		nl = memchr(raw + p, '\n', len - p);
		size_t e = nl ? (size_t)(nl - raw) : len;
		if (line_is(raw + p, e - p, "---") || line_is(raw + p, e - p, "...")) {
			fm_end = p;
			body = nl ? e + 1 : len;
			closed = true;
		}
		p = e + 1;
	}
	if (!closed)
		return invalidf(s, "front-matter not closed: the first line is '---' "
				"but no line '---' or '...' ends it");
	if (fm_end - fm_start > lim_fm(lim))
		return invalidf(s, "front-matter is %zu bytes, over the limit of %zu "
				"bytes", fm_end - fm_start, lim_fm(lim));

	json_t *fm = NULL;
	char *err = NULL;
	size_t desc_line = 0;
	int r = yaml_load(s, raw + fm_start, fm_end - fm_start, 2, &fm, &err,
			  &desc_line);
	if (r > 0 && desc_line) {
		char *note = NULL, *both = NULL;
		r = lenient_description(s, raw + fm_start, fm_end - fm_start,
					desc_line - 1, 2, &fm, &note);
		if (r == 0)
			free(err);
		if (r > 0 && note) {
			if (asprintf(&both, "%s %s", err, note) < 0)
				r = OOM;
			free(err);
			err = both;
		}
		free(note);
	}
	if (r < 0) {
		free(err);
		return OOM;
	}
	if (r > 0)
		return set_invalid(s, err);
	if (!fm)
		fm = json_object(); /* empty or comments only: no keys */
	else if (!json_is_object(fm)) {
		const char *kind = json_kind(fm);
		json_decref(fm);
		return invalidf(s, "front-matter is %s, not a mapping of keys", kind);
	}
	if (!fm)
		return OOM;
	*fmp = fm;
	if (read_frontmatter(s, fm))
		return OOM;
	return set_body(s, raw, body, len);
}

/* The checks read_name makes on a front-matter name, made on the
 * directory's name when the skill takes it: an unusable one makes the skill
 * invalid (or, when it already is, adds a warning), and a rule break is a
 * warning. */
static int check_dir_name(struct skill *s)
{
	const char *why = skill_name_unusable(s->name);
	char *q = qs(s->name);
	if (!q)
		return OOM;
	int r = 0;
	if (why && s->valid)
		r = invalidf(s, "the directory name %s cannot be used as a skill "
			     "name (%s) and the front-matter gives no usable name; "
			     "the skill is not listed", q, why);
	else if (why)
		r = warnf(s, "the directory name %s cannot be used as a skill name "
			  "(%s); the skill is not listed", q, why);
	else if (!skill_name_valid(s->name))
		r = warnf(s, NAME_RULES_BROKEN, q);
	free(q);
	return r;
}

/* Gives s its final name: the front-matter name, else the directory's;
 * and keeps the front-matter fm (parse_text's; taken) as compact JSON. */
static int finish(struct skill *s, json_t *fm)
{
	bool from_dir = !s->name;
	int r = 0;
	if (from_dir)
		s->name = s->dir_name;
	if (!s->name || (from_dir && check_dir_name(s)))
		r = OOM;
	else if (!s->valid)
		r = 0;
	else if (!fm)
		r = warnf(s, "no front-matter: the skill takes its directory's "
			  "name and has no description; " NOT_LISTED);
	else if (!json_object_get(fm, "name"))
		r = warnf(s, "no name in the front-matter; the skill takes its "
			  "directory's name");
	/* JSON text is a tenth of the objects' size, and only skill.json
	 * needs them (skill_frontmatter). */
	if (r == 0 && s->valid && fm &&
	    !(s->frontmatter_json = json_dumps(fm, JSON_COMPACT)))
		r = OOM;
	json_decref(fm);
	return r;
}

struct skill *skill_parse(const char *dir_name, const char *dir,
			  const char *bytes, size_t len,
			  const struct skill_limits *lim)
{
	struct skill *s = skill_new(dir_name, dir);
	if (!s)
		return NULL;
	if (!bytes)
		bytes = "", len = 0;
	json_t *fm = NULL;
	int r = parse_text(s, bytes, len, lim, &fm);
	if (r == 0 && s->text_read) {
		/* Its own copy: the bytes came from no file to read again. */
		s->text = malloc(len + 1);
		if (s->text) {
			memcpy(s->text, bytes, len);
			s->text[len] = '\0';
		} else {
			r = OOM;
		}
	}
	if (r) {
		json_decref(fm);
		skill_unref(s);
		return NULL;
	}
	if (finish(s, fm)) {
		skill_unref(s);
		return NULL;
	}
	fit(s);
	return s;
}

/* ------------------------------------------------------------ file load */

static char *path_join(const char *a, const char *b)
{
	char *p = NULL;
	return asprintf(&p, "%s/%s", a, b) < 0 ? NULL : p;
}

/* Reads fd to its end into *out (malloc'd, NUL-terminated; room for hint
 * bytes made first) and *len. Returns 0; 1 when there are more than max
 * bytes (*len: how many were read then, *out NULL); or -errno. */
static int read_all(int fd, size_t hint, size_t max, char **out, size_t *len)
{
	size_t cap = (hint < max ? hint : max) + 1, n = 0;
	char *p = malloc(cap + 1);
	*out = NULL;
	*len = 0;
	if (!p)
		return -ENOMEM;
	for (;;) {
		if (n == cap) {
			size_t more = cap > max / 2 ? max + 1 : cap * 2;
			char *q = realloc(p, more + 1);
			if (!q) {
				free(p);
				return -ENOMEM;
			}
			p = q;
			cap = more;
		}
		ssize_t k = read(fd, p + n, cap - n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			int e = errno;
			free(p);
			return -e;
		}
		if (k == 0)
			break;
		n += (size_t)k;
		if (n > max) {
			free(p);
			*len = n;
			return 1;
		}
	}
	p[n] = '\0';
	*out = p;
	*len = n;
	return 0;
}

/* Reads <s->dir>/SKILL.md into s, its front-matter into *fm (parse_text),
 * and what it read into md (NULL: nothing kept). Returns 0 or OOM. */
static int load_file(struct skill *s, const struct skill_limits *lim, json_t **fm,
		     struct skill_md *md)
{
	*fm = NULL;
	char *path = path_join(s->dir, "SKILL.md");
	if (!path)
		return OOM;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		int e = errno;
		if (md)
			md->open_errno = e;
		int r = e == ELOOP ? invalidf(s, "%s is a symbolic link; it is not "
					      "followed", path)
		      : e == ENOENT ? invalidf(s, "%s does not exist", path)
				    : invalidf(s, "cannot open %s: %s", path,
					       strerror(e));
		free(path);
		return r;
	}
	struct stat st;
	int r = 0;
	char *raw = NULL;
	if (fstat(fd, &st) < 0) {
		r = invalidf(s, "cannot stat %s: %s", path, strerror(errno));
		goto out;
	}
	if (md) {
		md->have_st = true;
		md->st = st;
	}
	s->st_mode = st.st_mode;
	s->st_dev = st.st_dev;
	s->st_ino = st.st_ino;
	s->st_size = st.st_size;
	s->st_mtim = st.st_mtim;
	s->st_ctim = st.st_ctim;
	if (!S_ISREG(st.st_mode)) {
		r = invalidf(s, "%s is not a regular file", path);
		goto out;
	}
	size_t max = lim_file(lim);
	if ((unsigned long long)st.st_size > max) {
		s->file_size = (size_t)st.st_size;
		r = invalidf(s, "SKILL.md is %zu bytes, over the limit of %zu bytes",
			     (size_t)st.st_size, max);
		goto out;
	}
	size_t len = 0;
	int rd = read_all(fd, (size_t)st.st_size, max, &raw, &len);
	if (rd == -ENOMEM) {
		r = OOM;
	} else if (rd < 0) {
		r = invalidf(s, "cannot read %s: %s", path, strerror(-rd));
	} else if (rd > 0) { /* it grew while being read */
		s->file_size = len;
		r = invalidf(s, "SKILL.md is over the limit of %zu bytes", max);
	} else {
		/* What was read is not kept: skill_read_text reads it again. */
		r = parse_text(s, raw, len, lim, fm);
		if (md) {
			md->text = raw;
			md->len = len;
			raw = NULL;
		}
	}
out:
	free(raw);
	close(fd);
	free(path);
	return r;
}

static struct skill *load_one(const char *dir, const char *dir_name,
			      const char *parent, const struct skill_limits *lim,
			      bool with_subs, struct skill_md *md);

/* Whether the directory sub-skill k (loaded after s's earlier subs, in
 * directory-name order) is kept: 1 yes; 0 no, with a warning on s, when its
 * name is unusable or an earlier sub-skill has it (the first by directory
 * name is the one used); OOM. */
static int keep_sub(struct skill *s, const struct skill *k)
{
	const char *why = skill_name_unusable(k->name);
	const struct skill *first = NULL;
	for (size_t i = 0; !why && !first && i < s->nsubs; i++)
		if (strcmp(s->subs[i]->name, k->name) == 0)
			first = s->subs[i];
	if (!why && !first)
		return 1;
	char *pd = path_join("skills", k->dir_name);
	char *pf = first ? path_join("skills", first->dir_name) : NULL;
	char *qd = pd ? qs(pd) : NULL, *qn = qs(k->name);
	char *qf = pf ? qs(pf) : NULL;
	int r = OOM;
	if (qd && qn && why)
		r = warnf(s, "sub-skill %s is not loaded: its name %s cannot be "
			  "used (%s)", qd, qn, why);
	else if (qd && qn && qf)
		r = warnf(s, "sub-skills %s and %s are both named %s; only %s (the "
			  "first by directory name) is used, %s is not loaded",
			  qf, qd, qn, qf, qd);
	free(pd);
	free(pf);
	free(qd);
	free(qn);
	free(qf);
	return r;
}

/* Loads <s->dir>/skills/<sub>/SKILL.md, one level, sorted by name. */
static int load_subs(struct skill *s, const struct skill_limits *lim)
{
	char *path = path_join(s->dir, "skills");
	if (!path)
		return OOM;
	int r = 0;
	struct strlist names = {0};
	int dfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0) {
		if (errno == ELOOP)
			r = warnf(s, "skills/ is a symbolic link; its sub-skills are "
				  "not loaded");
		else if (errno != ENOENT && errno != ENOTDIR)
			r = warnf(s, "cannot open skills/: %s", strerror(errno));
		free(path);
		return r;
	}
	DIR *d = fdopendir(dfd);
	if (!d) {
		r = warnf(s, "cannot read skills/: %s", strerror(errno));
		close(dfd);
		free(path);
		return r;
	}
	for (;;) {
		errno = 0;
		struct dirent *de = readdir(d);
		if (!de) {
			if (errno)
				r = warnf(s, "cannot read skills/: %s", strerror(errno));
			break;
		}
		struct stat st;
		if (de->d_name[0] == '.' ||
		    fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISLNK(st.st_mode)) {
			if ((r = warnq(s, "skills/%s is a symbolic link; not loaded",
				       de->d_name)))
				break;
			continue;
		}
		char *md = path_join(de->d_name, "SKILL.md");
		if (!md) {
			r = OOM;
			break;
		}
		bool has = S_ISDIR(st.st_mode) &&
			   fstatat(dfd, md, &st, AT_SYMLINK_NOFOLLOW) == 0;
		free(md);
		if (has && strlist_add(&names, de->d_name)) {
			r = OOM;
			break;
		}
	}
	closedir(d);
	strlist_sort(&names);
	if (r == 0 && names.n) {
		s->subs = calloc(names.n, sizeof *s->subs);
		if (!s->subs)
			r = OOM;
	}
	for (size_t i = 0; r == 0 && i < names.n; i++) {
		char *sub = path_join(path, names.items[i]);
		struct skill *k = sub ? load_one(sub, names.items[i], s->name, lim,
						 false, NULL) : NULL;
		free(sub);
		if (!k)
			r = OOM;
		else if ((r = keep_sub(s, k)) != 1)
			skill_unref(k);
		else {
			s->subs[s->nsubs++] = k;
			r = 0;
		}
	}
	strlist_free(&names);
	free(path);
	return r;
}

static struct skill *load_one(const char *dir, const char *dir_name,
			      const char *parent, const struct skill_limits *lim,
			      bool with_subs, struct skill_md *md)
{
	struct skill *s = skill_new(dir_name, dir);
	if (!s)
		return NULL;
	json_t *fm = NULL;
	if (parent && !(s->parent = strdup(parent)))
		goto oom;
	if (load_file(s, lim, &fm, md)) {
		json_decref(fm);
		goto oom;
	}
	if (finish(s, fm))
		goto oom;
	if (with_subs && load_subs(s, lim))
		goto oom;
	fit(s);
	return s;
oom:
	skill_unref(s);
	return NULL;
}

struct skill *skill_load(const char *dir, const struct skill_limits *lim)
{
	return skill_load_md(dir, lim, true, NULL);
}

void skill_md_free(struct skill_md *md)
{
	if (md) {
		free(md->text);
		*md = (struct skill_md){0};
	}
}

struct skill *skill_load_md(const char *dir, const struct skill_limits *lim, bool subs_dir,
			    struct skill_md *md)
{
	if (md)
		*md = (struct skill_md){0};
	if (!dir || !*dir) {
		struct skill *s = skill_new("", NULL);
		if (s && (invalidf(s, "no skill directory given") || finish(s, NULL))) {
			skill_unref(s);
			return NULL;
		}
		return s;
	}
	struct buf b = {0};
	int r = 0;
	if (dir[0] != '/') {
		char *cwd = getcwd(NULL, 0);
		if (cwd)
			r = buf_printf(&b, "%s/", cwd);
		else if (errno == ENOMEM)
			r = -1;
		free(cwd);
	}
	if (r || buf_puts(&b, dir)) {
		buf_free(&b);
		return NULL;
	}
	while (b.len > 1 && b.data[b.len - 1] == '/')
		b.data[--b.len] = '\0';
	char *abs = b.data;
	const char *slash = strrchr(abs, '/');
	const char *base = slash ? slash + 1 : abs;
	char *real = NULL;
	if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
		real = realpath(abs, NULL); /* "x/.." has no name of its own */
		if (real && (slash = strrchr(real, '/')) && slash[1])
			base = slash + 1;
	}
	struct skill *s = load_one(abs, base, NULL, lim, subs_dir, md);
	free(real);
	if (!s)
		skill_md_free(md);
	buf_free(&b);
	return s;
}

bool skill_same_file(const struct skill *s, const struct stat *st)
{
	return s->st_dev == st->st_dev && s->st_ino == st->st_ino &&
	       s->st_size == st->st_size &&
	       s->st_mtim.tv_sec == st->st_mtim.tv_sec &&
	       s->st_mtim.tv_nsec == st->st_mtim.tv_nsec &&
	       s->st_ctim.tv_sec == st->st_ctim.tv_sec &&
	       s->st_ctim.tv_nsec == st->st_ctim.tv_nsec;
}

/* ------------------------------------------------------------ its text */

/* The bytes of s's SKILL.md read again into *out (malloc'd, NUL-terminated,
 * file_size bytes), when the file is still the one parsed. Returns 0, or
 * -ESTALE, -ENOMEM, -errno. */
static int reread(const struct skill *s, char **out)
{
	*out = NULL;
	if (!s->dir)
		return -ENODATA;
	char *path = path_join(s->dir, "SKILL.md");
	if (!path)
		return -ENOMEM;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	int e = errno;
	free(path);
	if (fd < 0) /* gone, or a link or a directory in its place */
		return e == ENOENT || e == ELOOP || e == ENOTDIR ? -ESTALE : -e;
	struct stat st;
	char *p = NULL;
	size_t n = 0;
	int rc = fstat(fd, &st) < 0 ? -errno : !S_ISREG(st.st_mode) || !skill_same_file(s, &st)
							? -ESTALE : 0;
	if (rc == 0) {
		rc = read_all(fd, s->file_size, s->file_size, &p, &n);
		if (rc > 0 || (rc == 0 && (n != s->file_size ||
					   text_hash_of(p, n) != s->text_hash)))
			rc = -ESTALE;
	}
	close(fd);
	if (rc < 0) {
		free(p);
		return rc;
	}
	*out = p;
	return 0;
}

int skill_read_text(const struct skill *s, enum skill_text what, char **out, size_t *len)
{
	*out = NULL;
	if (len)
		*len = 0;
	char *raw = NULL;
	if (what == SKILL_TEXT_BODY && !s->valid) {
		raw = strdup("");
		if (!raw)
			return -ENOMEM;
		*out = raw;
		return 0;
	}
	if (!s->text_read)
		return -ENODATA;
	if (!s->text) {
		int rc = reread(s, &raw);
		if (rc < 0)
			return rc;
	}
	const char *src = s->text ? s->text : raw;
	if (what == SKILL_TEXT_RAW) {
		if (!raw && !(raw = malloc(s->file_size + 1)))
			return -ENOMEM;
		if (raw != src)
			memcpy(raw, src, s->file_size + 1);
		*out = raw;
		if (len)
			*len = s->file_size;
		return 0;
	}
	/* The body is never longer than its bytes: made in place when read. */
	char *body = raw ? raw : malloc(s->file_size - s->body_off + 1);
	if (!body)
		return -ENOMEM;
	size_t n = body_copy(body, src + s->body_off, s->file_size - s->body_off);
	body[n] = '\0';
	*out = body;
	if (len)
		*len = n;
	return 0;
}

int skill_frontmatter(const struct skill *s, json_t **out)
{
	*out = NULL;
	if (!s->frontmatter_json)
		return 0;
	*out = json_loads(s->frontmatter_json, 0, NULL);
	return *out ? 0 : -ENOMEM;
}

/* ------------------------------------------------------------------ JSON */

/* A JSON string for text that may not be UTF-8 (directory names): bad
 * bytes become \xNN. NULL text gives null. */
static json_t *jstr(const char *t)
{
	if (!t)
		return json_null();
	size_t n = strlen(t);
	if (utf8_invalid_at((const unsigned char *)t, n) == n)
		return json_stringn(t, n);
	struct buf b = {0};
	for (size_t i = 0; i < n;) {
		size_t ok = utf8_invalid_at((const unsigned char *)t + i, n - i);
		int r = buf_append(&b, t + i, ok);
		i += ok;
		if (!r && i < n)
			r = buf_printf(&b, "\\x%02X", (unsigned char)t[i++]);
		if (r) {
			buf_free(&b);
			return NULL;
		}
	}
	json_t *j = json_stringn(b.data, b.len);
	buf_free(&b);
	return j;
}

static void put(json_t *o, const char *k, json_t *v, bool *ok)
{
	if (!v || json_object_set_new(o, k, v))
		*ok = false;
}

static json_t *strlist_json(const struct strlist *l)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < l->n; i++)
		if (json_array_append_new(a, jstr(l->items[i]))) {
			json_decref(a);
			return NULL;
		}
	return a;
}

static json_t *decl_json(const struct tool_decl *d)
{
	if (!d->declared)
		return json_null();
	json_t *a = json_array();
	for (size_t i = 0; a && i < d->n; i++) {
		json_t *g = json_object();
		bool ok = g != NULL;
		if (g) {
			put(g, "tool", jstr(d->items[i].tool), &ok);
			put(g, "pattern", jstr(d->items[i].pattern), &ok);
			put(g, "raw", jstr(d->items[i].raw), &ok);
		}
		if (!ok || json_array_append_new(a, g)) {
			if (!ok)
				json_decref(g);
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

static json_t *copy_or_null(const json_t *v)
{
	return v ? json_deep_copy(v) : json_null();
}

json_t *skill_to_json(const struct skill *s)
{
	json_t *fm = NULL;
	if (skill_frontmatter(s, &fm) < 0)
		return NULL;
	json_t *o = json_object();
	if (!o) {
		json_decref(fm);
		return NULL;
	}
	bool ok = true;
	put(o, "name", jstr(s->name), &ok);
	put(o, "dir_name", jstr(s->dir_name), &ok);
	put(o, "dir", jstr(s->dir), &ok);
	put(o, "parent", jstr(s->parent), &ok);
	put(o, "valid", json_boolean(s->valid), &ok);
	put(o, "error", jstr(s->error), &ok);
	put(o, "warnings", strlist_json(&s->warnings), &ok);
	put(o, "description", jstr(s->description), &ok);
	put(o, "license", jstr(s->license), &ok);
	put(o, "compatibility", jstr(s->compatibility), &ok);
	/* metadata and arguments: the front-matter's own values */
	put(o, "metadata", copy_or_null(fm ? json_object_get(fm, "metadata") : NULL), &ok);
	put(o, "arguments", copy_or_null(fm ? json_object_get(fm, "arguments") : NULL), &ok);
	put(o, "allowed_tools", decl_json(&s->allowed_tools), &ok);
	put(o, "tools", decl_json(&s->tools), &ok);
	put(o, "inline", s->inline_flag < 0 ? json_null()
					    : json_boolean(s->inline_flag), &ok);
	put(o, "sub_skills", strlist_json(&s->sub_skill_refs), &ok);
	put(o, "category", json_string(skill_category_name(s->category)), &ok);
	put(o, "disable_model_invocation",
	    json_boolean(s->disable_model_invocation), &ok);
	put(o, "user_invocable", json_boolean(s->user_invocable), &ok);
	put(o, "frontmatter", fm ? fm : json_null(), &ok);
	put(o, "body_bytes", json_integer((json_int_t)s->body_len), &ok);
	put(o, "file_bytes", json_integer((json_int_t)s->file_size), &ok);
	json_t *subs = json_array();
	for (size_t i = 0; subs && i < s->nsubs; i++)
		if (json_array_append_new(subs, jstr(s->subs[i]->name))) {
			json_decref(subs);
			subs = NULL;
		}
	put(o, "directory_sub_skills", subs, &ok);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}
