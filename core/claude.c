#include "claude.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "buf.h"
#include "claudetools.h"
#include "cmdline.h"
#include "config.h"
#include "domain.h"
#include "json_text.h"

const char *const claude_file_names[CLAUDE_NFILES] = {
	[CLAUDE_SETTINGS_JSON] = "settings.json",
	[CLAUDE_WARNINGS] = "warnings",
};

void claude_permissions_free(struct claude_permissions *p)
{
	if (!p)
		return;
	strlist_free(&p->allow);
	strlist_free(&p->deny);
	strlist_free(&p->warnings);
	memset(p, 0, sizeof *p);
}

/* ---- patterns ---- */

/* Whether a word of a command pattern reads the same as plain text in a
 * shell command and in a Claude Code rule: letters, digits, bytes past
 * ASCII and - _ . / : = @ % + , ^ only. */
static bool plain_word(const char *w)
{
	if (!*w)
		return false;
	for (const unsigned char *c = (const unsigned char *)w; *c; c++) {
		bool ok = *c >= 0x80 || (*c >= 'a' && *c <= 'z') ||
			  (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
			  strchr("-_./:=@%+,^", *c) != NULL;
		if (!ok)
			return false;
	}
	return true;
}

/* A command pattern as a Claude Code rule: 1 when `NAME(WORDS:*)` was
 * added to allow, 0 when the pattern cannot be written so, -1 on ENOMEM.
 *
 * How the words mean the same in both: skillfs admits a command whose
 * words (cmdline.h: split without a shell) begin with the pattern's words
 * (D3). Claude Code admits a command (each command of a compound line,
 * taken on its own) that equals the rule's prefix, or begins with it
 * followed by a blank, runs of blanks counted as one. With the pattern
 * written as its words joined by single spaces, both admit `git diff` and
 * `git diff --stat` for `Bash(git diff:*)`, and neither `git difftool`.
 * That holds while every word is plain text (plain_word): a word holding a
 * quote, a backslash, a blank, or a character that a shell or Claude
 * Code's rule syntax gives a meaning to ($, *, ~, parentheses ...) would
 * be read otherwise there, so such a pattern is not written at all. */
static int command_rule(const char *name, const char *pattern, struct strlist *allow)
{
	struct strlist words = { 0 };
	char *err = NULL;
	if (cmdline_split(pattern, &words, &err) < 0) {
		int rc = err ? 0 : -1;
		free(err);
		return rc;
	}
	struct buf b = { 0 };
	int rc = buf_printf(&b, "%s(", name);
	bool plain = true;
	for (size_t i = 0; i < words.n && rc == 0 && plain; i++) {
		plain = plain_word(words.items[i]);
		rc = buf_printf(&b, "%s%s", i ? " " : "", words.items[i]);
	}
	if (rc == 0 && plain)
		rc = buf_puts(&b, ":*)");
	if (rc == 0 && plain)
		rc = strlist_add(allow, b.data);
	buf_free(&b);
	strlist_free(&words);
	return rc < 0 ? -1 : plain;
}

/* A domain pattern (domain.h) as Claude Code rules: `NAME(domain:H)`, and
 * for a host name also `NAME(domain:*.H)`: skillfs admits H and its
 * subdomains, Claude Code's `domain:H` H alone and `domain:*.H` the
 * subdomains alone. An IP address and a `*.H` pattern are written as they
 * are. Returns 1 when written, 0 when the pattern is no domain pattern,
 * -1 on ENOMEM. */
static int domain_rules(const char *name, const char *pattern, struct strlist *allow)
{
	char *why = NULL;
	if (domain_pattern_check(pattern, &why) < 0) {
		int rc = why ? 0 : -1;
		free(why);
		return rc;
	}
	const char *host = pattern + strlen(DOMAIN_PATTERN_PREFIX);
	bool address = host[0] == '[' || strspn(host, "0123456789.") == strlen(host);
	if (strlist_addf(allow, "%s(%s)", name, pattern) < 0)
		return -1;
	if (!address && strncmp(host, "*.", 2) != 0 &&
	    strlist_addf(allow, "%s(domain:*.%s)", name, host) < 0)
		return -1;
	return 1;
}

/* ---- warnings ---- */

/* Appends " (granted by 'a', 'b')", or " (granted to every run: no skill
 * declares allowed-tools)" when nothing declared it. */
static int by_text(struct buf *b, const struct grant_tool *t)
{
	if (t->nby == 0)
		return buf_puts(b, " (granted to every run: no skill declares allowed-tools)");
	int rc = buf_puts(b, " (granted by");
	for (size_t i = 0; i < t->nby && rc == 0; i++) {
		bool seen = false;
		for (size_t k = 0; k < i && !seen; k++)
			seen = strcmp(t->by[k].skill, t->by[i].skill) == 0;
		if (!seen)
			rc = buf_printf(b, "%s '%s'", i ? "," : "", t->by[i].skill);
	}
	return rc == 0 ? buf_puts(b, ")") : -1;
}

static int add_warning(struct claude_permissions *p, struct buf *b)
{
	int rc = b->data ? strlist_add(&p->warnings, b->data) : -1;
	buf_free(b);
	return rc;
}

/* Whether some row of the table writes a grant of tool. */
static bool has_equivalent(const char *tool)
{
	size_t n;
	const struct claude_tool *rows = claude_tools(&n);
	for (size_t i = 0; i < n; i++)
		if ((rows[i].flags & CLAUDE_GRANTED) && !(rows[i].flags & CLAUDE_LEGACY) &&
		    rows[i].tool && strcasecmp(rows[i].tool, tool) == 0)
			return true;
	return false;
}

/* python, terminal, learn_skill: named, never widened into Bash. */
static int no_equivalent_warnings(const struct grants *g, struct claude_permissions *p)
{
	for (size_t i = 0; i < g->n; i++) {
		const struct grant_tool *t = &g->tools[i];
		if (has_equivalent(t->name))
			continue;
		struct buf b = { 0 };
		if (buf_printf(&b, "%s: left out: Claude Code has no tool that does only what "
				   "it does (a wider one, such as Bash, is never allowed for it)",
			       t->name) < 0 ||
		    by_text(&b, t) < 0 || add_warning(p, &b) < 0) {
			buf_free(&b);
			return -1;
		}
	}
	return 0;
}

/* A declared item that grants nothing in skillfs (D3: a Claude Code tool
 * skillfs does not have, such as WebSearch; a pattern on a tool that takes
 * none, such as Read(./src/x); a name no tool has, such as an MCP tool's)
 * is not allowed in Claude Code either: each is named with skillfs's
 * reason. The note tools (Skill ...) are allowed anyway: not named. */
static int dropped_warnings(const struct grants *g, struct claude_permissions *p)
{
	for (size_t i = 0; i < g->ndropped; i++) {
		const struct grant_drop *d = &g->dropped[i];
		struct tool_grant item;
		if (!d->item)
			continue;
		if (tool_grant_parse(d->item, &item) < 0)
			return -1;
		const struct claude_tool *row = claude_tool_find(item.tool);
		free(item.raw);
		free(item.tool);
		free(item.pattern);
		if (row && (row->flags & CLAUDE_NOTES) && !(row->flags & CLAUDE_READS))
			continue;
		if (strlist_addf(&p->warnings,
				 "skill '%s': allowed-tools item '%s' is not allowed here either: %s",
				 d->skill ? d->skill : "", d->item,
				 d->reason ? d->reason : "it grants nothing in skillfs") < 0)
			return -1;
	}
	return 0;
}

/* ---- the two policies ---- */

/* Policy all: every mapped tool and every note tool allowed, nothing
 * denied, no defaultMode. */
static int render_all(struct claude_permissions *p)
{
	size_t n;
	const struct claude_tool *rows = claude_tools(&n);
	if (strlist_add(&p->warnings,
			"no effective skill declares allowed-tools: the skills express no "
			"restriction, so every tool of the table is allowed, nothing is denied "
			"and defaultMode is left to Claude Code's other settings") < 0)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (!(rows[i].flags & CLAUDE_LEGACY) &&
		    (rows[i].flags & (CLAUDE_GRANTED | CLAUDE_NOTES)) &&
		    strlist_add(&p->allow, rows[i].name) < 0)
			return -1;
	return 0;
}

/* The rules of one row whose tool t is granted only with patterns: 1
 * when at least one pattern was written, 0 when none could be, -1 on
 * ENOMEM. Each pattern left out is a warning. */
static int pattern_rules(const struct claude_tool *row, const struct grant_tool *t,
			 struct claude_permissions *p)
{
	const char *arg = grants_pattern_argument(t->name);
	bool domains = arg && strcmp(arg, "url") == 0;
	int written = 0;
	for (size_t k = 0; k < t->patterns.n; k++) {
		const char *pat = t->patterns.items[k];
		int r = !arg ? 0 : domains ? domain_rules(row->name, pat, &p->allow)
					   : command_rule(row->name, pat, &p->allow);
		if (r < 0)
			return -1;
		written |= r;
		if (r == 0 &&
		    strlist_addf(&p->warnings,
				 domains ? "%s(%s): left out: Claude Code would read this domain "
					   "pattern otherwise"
					 : "%s(%s:*): left out: Claude Code would read this pattern "
					   "otherwise (it holds quoting, a blank or a character that "
					   "a shell or Claude Code's rules give a meaning to)",
				 row->name, pat) < 0)
			return -1;
	}
	if (!written)
		return strlist_addf(&p->warnings,
				    "%s: denied: none of its patterns can be written as a Claude "
				    "Code rule", row->name) < 0 ? -1 : 0;
	if (domains &&
	    strlist_addf(&p->warnings,
			 "%s: Claude Code also fetches, without asking, from its own list of "
			 "pre-approved documentation hosts; only denying %s whole would stop "
			 "that", row->name, row->name) < 0)
		return -1;
	return 1;
}

/* A declared list: the mapped grants allowed, every other tool of the
 * table denied, dontAsk. */
static int render_list(const struct grants *g, struct claude_permissions *p)
{
	size_t n;
	const struct claude_tool *rows = claude_tools(&n);
	p->restricted = true;
	for (size_t i = 0; i < n; i++) {
		const struct claude_tool *row = &rows[i];
		if (row->flags & CLAUDE_LEGACY)
			continue;
		if (row->flags & CLAUDE_NOTES) {
			if (strlist_add(&p->allow, row->name) < 0)
				return -1;
			continue;
		}
		const struct grant_tool *t = (row->flags & CLAUDE_GRANTED) && row->tool
						     ? grants_find(g, row->tool)
						     : NULL;
		int allowed = 0; /* 1: its rules are in allow; 0: deny it */
		if (t && t->unrestricted)
			allowed = strlist_add(&p->allow, row->name) < 0 ? -1 : 1;
		else if (t)
			allowed = pattern_rules(row, t, p);
		if (allowed < 0 || (allowed == 0 && strlist_add(&p->deny, row->name) < 0))
			return -1;
	}
	return 0;
}

/* Sorts l and removes repeated items. */
static void sort_unique(struct strlist *l)
{
	strlist_sort(l);
	size_t w = 0;
	for (size_t i = 0; i < l->n; i++) {
		if (w && strcmp(l->items[w - 1], l->items[i]) == 0) {
			free(l->items[i]);
			continue;
		}
		l->items[w++] = l->items[i];
	}
	l->n = w;
}

int claude_permissions_from_grants(const struct grants *g, struct claude_permissions *out)
{
	memset(out, 0, sizeof *out);
	int rc = g->policy == GRANTS_ALL ? render_all(out) : render_list(g, out);
	if (rc == 0)
		rc = no_equivalent_warnings(g, out);
	if (rc == 0)
		rc = dropped_warnings(g, out);
	if (rc < 0) {
		claude_permissions_free(out);
		errno = ENOMEM;
		return -1;
	}
	sort_unique(&out->allow);
	sort_unique(&out->deny);
	return 0;
}

int claude_permissions_resolve(const struct skill *const *gate, size_t n,
			       const struct strlist *ceiling,
			       struct claude_permissions *out)
{
	memset(out, 0, sizeof *out);
	/* A view of the built-in names, never changed nor freed. */
	struct strlist builtin = { .items = (char **)config_builtin_tools,
				   .n = config_builtin_tools_n };
	struct grants g, capped;
	if (grants_resolve(&builtin, gate, n, &g) < 0)
		return -1;
	if (ceiling) {
		int crc = grants_cap(&g, ceiling, &builtin, NULL, &capped);
		grants_free(&g);
		if (crc < 0)
			return -1;
		g = capped;
	}
	int rc = claude_permissions_from_grants(&g, out);
	grants_free(&g);
	return rc;
}

json_t *claude_settings_json(const struct claude_permissions *p)
{
	json_t *perm = json_object();
	json_t *allow = strlist_to_json(&p->allow), *deny = strlist_to_json(&p->deny);
	int rc = perm && allow && deny ? 0 : -1;
	if (rc == 0) {
		rc = json_object_set_new(perm, "allow", allow);
		allow = NULL;
	}
	if (rc == 0) {
		rc = json_object_set_new(perm, "deny", deny);
		deny = NULL;
	}
	if (rc == 0 && p->restricted)
		rc = json_object_set_new(perm, "defaultMode", json_string("dontAsk"));
	json_decref(allow);
	json_decref(deny);
	json_t *o = rc == 0 ? json_object() : NULL;
	if (o && json_object_set_new(o, "permissions", perm) == 0)
		return o;
	json_decref(o);
	if (!o)
		json_decref(perm);
	return NULL;
}

void claude_files_free(struct claude_files *f)
{
	if (!f)
		return;
	for (int i = 0; i < CLAUDE_NFILES; i++)
		free(f->text[i]);
	memset(f, 0, sizeof *f);
}

int claude_files_render(const struct claude_permissions *p, struct claude_files *out)
{
	memset(out, 0, sizeof *out);
	struct buf b = { 0 };
	json_t *j = claude_settings_json(p);
	int rc = json_text_append(&b, j, JSON_INDENT(2));
	json_decref(j);
	if (rc == 0 && !(out->text[CLAUDE_SETTINGS_JSON] = buf_steal(&b, &out->len[CLAUDE_SETTINGS_JSON])))
		rc = -1;
	for (size_t i = 0; i < p->warnings.n && rc == 0; i++)
		rc = buf_printf(&b, "%s\n", p->warnings.items[i]);
	if (rc == 0 && !(out->text[CLAUDE_WARNINGS] = buf_steal(&b, &out->len[CLAUDE_WARNINGS])))
		rc = -1;
	buf_free(&b);
	if (rc < 0) {
		claude_files_free(out);
		errno = ENOMEM;
	}
	return rc;
}

const char *claude_file(const struct claude_files *f, const char *name, size_t *len)
{
	for (int i = 0; f && name && i < CLAUDE_NFILES; i++)
		if (strcmp(name, claude_file_names[i]) == 0) {
			if (len)
				*len = f->len[i];
			return f->text[i];
		}
	return NULL;
}
