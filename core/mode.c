#include "mode.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const default_tools[] = { "bash", "read", "edit", "write",
					     "webfetch" };

/* Tools a sub-agent never receives (R13). */
static const char *const never_tools[] = { "run_skill", "terminal", "learn_skill" };

bool mode_has_sub_skills(const struct skill *s)
{
	return s && (s->nsubs > 0 || s->sub_skill_refs.n > 0);
}

struct mode_info mode_decide(const struct skill *s, enum exec_mode global)
{
	if (mode_has_sub_skills(s))
		return (struct mode_info){
			EXEC_SUBAGENT, "has sub-skills",
			s->inline_flag == 1
				? "inline: true ignored: a skill with sub-skills always runs as a sub-agent"
				: NULL
		};
	if (s && s->inline_flag == 1)
		return (struct mode_info){ EXEC_INLINE, "front-matter inline: true", NULL };
	if (global == EXEC_SUBAGENT)
		return (struct mode_info){ EXEC_SUBAGENT, "execution_mode subagent", NULL };
	return (struct mode_info){ EXEC_INLINE, "execution_mode inline", NULL };
}

static bool is_never(const char *t)
{
	for (size_t i = 0; i < sizeof never_tools / sizeof *never_tools; i++)
		if (strcasecmp(t, never_tools[i]) == 0)
			return true;
	return false;
}

static bool registered_has(const struct strlist *reg, const char *t)
{
	for (size_t i = 0; reg && i < reg->n; i++)
		if (reg->items[i] && strcasecmp(reg->items[i], t) == 0)
			return true;
	return false;
}

static bool list_has_icase(const struct strlist *l, const char *t)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcasecmp(l->items[i], t) == 0)
			return true;
	return false;
}

/* Adds t (lower-cased) when every rule admits it. The lists involved hold a
 * handful of tools, so the linear scans stay cheap. */
static int consider(const char *t, const struct strlist *registered,
		    const struct grants *allow, struct strlist *added,
		    struct strlist *out)
{
	if (!t || !t[0] || is_never(t) || !registered_has(registered, t) ||
	    (allow && !grants_has(allow, t)) || list_has_icase(added, t))
		return 0;
	char *low = strdup(t);
	if (!low)
		return -1;
	for (char *p = low; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	if (strlist_add(added, low) < 0) {
		free(low);
		return -1;
	}
	return strlist_add_owned(out, low);
}

/* Whether the tools: items naming tool (case-insensitively) let the
 * sub-agent have it (D3 applied to R13). An item without a pattern does.
 * A command pattern on a tool with pattern semantics cannot be enforced on
 * the sub-agent's calls, which are checked against the run's allow-list
 * only: such items give the tool only when allow already restricts it to
 * patterns that each lie within one of theirs (so nothing beyond the items'
 * text is admitted). An empty pattern, one that cannot be split, and a
 * pattern on any other tool give nothing. */
static bool decl_gives(const struct tool_decl *d, const char *tool,
		       const struct grants *allow)
{
	const struct grant_tool *t = grants_find(allow, tool);
	bool any_pattern = false;
	for (size_t i = 0; i < d->n; i++) {
		const struct tool_grant *it = &d->items[i];
		if (!it->tool || strcasecmp(it->tool, tool) != 0)
			continue;
		if (!it->pattern)
			return true;
		any_pattern = true;
	}
	if (!any_pattern || !grants_tool_has_patterns(tool) || !t ||
	    t->unrestricted || t->patterns.n == 0)
		return false;
	for (size_t k = 0; k < t->patterns.n; k++) {
		bool within = false;
		for (size_t i = 0; i < d->n && !within; i++) {
			const struct tool_grant *it = &d->items[i];
			within = it->tool && it->pattern &&
				 strcasecmp(it->tool, tool) == 0 &&
				 grants_tool_pattern_covers(tool, it->pattern,
							   t->patterns.items[k]);
		}
		if (!within)
			return false;
	}
	return true;
}

int mode_subagent_tools(const struct skill *s, const struct strlist *registered,
			bool have_python, const struct grants *allow,
			struct strlist *out)
{
	if (!s || !s->valid)
		return 0;
	struct strlist added = { 0 };
	int rc = 0;
	if (s->tools.declared) {
		for (size_t i = 0; i < s->tools.n && rc == 0; i++) {
			const char *t = s->tools.items[i].tool;
			if (t && decl_gives(&s->tools, t, allow))
				rc = consider(t, registered, allow, &added, out);
		}
	} else {
		for (size_t i = 0; i < sizeof default_tools / sizeof *default_tools && rc == 0; i++)
			rc = consider(default_tools[i], registered, allow, &added, out);
		if (rc == 0 && have_python)
			rc = consider("python", registered, allow, &added, out);
	}
	strlist_free(&added);
	return rc;
}

int mode_render(const struct config *c, const struct skill *s, bool have_python,
		struct buf *out)
{
	struct mode_info m = mode_decide(s, c ? c->execution_mode : EXEC_INLINE);
	struct strlist tools = { 0 };
	int rc = mode_subagent_tools(s, c ? &c->registered_tools : NULL, have_python,
				     NULL, &tools);
	if (rc == 0)
		rc = buf_printf(out, "%s\n%s\ntools:",
				m.mode == EXEC_SUBAGENT ? "subagent" : "inline", m.reason);
	for (size_t i = 0; i < tools.n && rc == 0; i++)
		rc = buf_printf(out, " %s", tools.items[i]);
	if (rc == 0)
		rc = buf_puts(out, tools.n ? "\n" : " (none)\n");
	if (rc == 0 && m.warning)
		rc = buf_printf(out, "warning: %s\n", m.warning);
	strlist_free(&tools);
	return rc;
}
