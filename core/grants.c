/* grants: the allow-list (see grants.h).
 *
 * One file past 1,200 lines: the resolution (R2-R4, D1, D3), the tool
 * ceiling (grants_cap), the wait-time intersection (R7) and the stored
 * JSON form all build and meet tool entries through the same private
 * helpers (item_check, build_list_tools, meet_tool, the provenance and
 * cut lists); split, those would have to become a header of their own. */
#include "grants.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "claudetools.h"
#include "cmdline.h"
#include "domain.h"

const char *grants_pattern_argument(const char *tool)
{
	if (!tool)
		return NULL;
	if (strcasecmp(tool, "bash") == 0 || strcasecmp(tool, "terminal") == 0)
		return "command";
	if (strcasecmp(tool, "webfetch") == 0)
		return "url";
	return NULL;
}

bool grants_tool_has_patterns(const char *tool)
{
	return grants_pattern_argument(tool) != NULL;
}

/* Whether the tool's patterns are domain patterns (webfetch) rather than
 * command patterns. */
static bool domain_tool(const char *tool)
{
	return tool && strcasecmp(tool, "webfetch") == 0;
}

static void tool_free(struct grant_tool *t)
{
	free(t->name);
	strlist_free(&t->patterns);
	for (size_t i = 0; i < t->nby; i++) {
		free(t->by[i].skill);
		free(t->by[i].pattern);
	}
	free(t->by);
	memset(t, 0, sizeof *t);
}

void grants_free(struct grants *g)
{
	if (!g)
		return;
	for (size_t i = 0; i < g->n; i++)
		tool_free(&g->tools[i]);
	free(g->tools);
	strlist_free(&g->declaring);
	for (size_t i = 0; i < g->ndropped; i++) {
		free(g->dropped[i].skill);
		free(g->dropped[i].item);
		free(g->dropped[i].reason);
	}
	free(g->dropped);
	strlist_free(&g->warnings);
	strlist_free(&g->ceiling);
	for (size_t i = 0; i < g->ncut; i++) {
		free(g->cut[i].item);
		strlist_free(&g->cut[i].kept);
	}
	free(g->cut);
	memset(g, 0, sizeof *g);
}

static char *dup_or_null(const char *s, bool *fail)
{
	if (!s)
		return NULL;
	char *d = strdup(s);
	if (!d)
		*fail = true;
	return d;
}

/* Appends an empty tool to g; returns it or NULL on ENOMEM. g->tools must
 * have been sized by the caller (cap) to avoid reallocation surprises. */
static struct grant_tool *tool_push(struct grants *g, const char *name)
{
	char *n = strdup(name);
	if (!n)
		return NULL;
	struct grant_tool *t = &g->tools[g->n++];
	memset(t, 0, sizeof *t);
	t->name = n;
	return t;
}

static int by_add(struct grant_tool *t, const char *skill, const char *pattern)
{
	struct grant_source *p = realloc(t->by, (t->nby + 1) * sizeof *p);
	if (!p)
		return -1;
	t->by = p;
	bool fail = false;
	struct grant_source s = { dup_or_null(skill ? skill : "", &fail),
				  dup_or_null(pattern, &fail) };
	if (fail) {
		free(s.skill);
		free(s.pattern);
		return -1;
	}
	t->by[t->nby++] = s;
	return 0;
}

static int by_copy(struct grant_tool *dst, const struct grant_tool *src)
{
	for (size_t i = 0; i < src->nby; i++)
		if (by_add(dst, src->by[i].skill, src->by[i].pattern) < 0)
			return -1;
	return 0;
}

static int drop_add(struct grants *g, const char *skill, const char *item,
		    const char *reason)
{
	struct grant_drop *p = realloc(g->dropped, (g->ndropped + 1) * sizeof *p);
	if (!p)
		return -1;
	g->dropped = p;
	bool fail = false;
	struct grant_drop d = { dup_or_null(skill, &fail), dup_or_null(item, &fail),
				dup_or_null(reason, &fail) };
	if (fail) {
		free(d.skill);
		free(d.item);
		free(d.reason);
		return -1;
	}
	g->dropped[g->ndropped++] = d;
	return 0;
}

/* Appends a cut: item (taken) and kept (its strings copied). */
static int cut_add(struct grants *g, char *item, const struct strlist *kept)
{
	struct grant_cut *p = item ? realloc(g->cut, (g->ncut + 1) * sizeof *p) : NULL;
	if (!p) {
		free(item);
		return -1;
	}
	g->cut = p;
	p[g->ncut] = (struct grant_cut){ item, { 0 } };
	if (kept && strlist_extend(&p[g->ncut].kept, kept) < 0) {
		free(item);
		strlist_free(&p[g->ncut].kept);
		return -1;
	}
	g->ncut++;
	return 0;
}

/* Copies the ceiling's record (capped, ceiling, cut) of src into out. */
static int copy_ceiling(struct grants *out, const struct grants *src)
{
	out->capped = src->capped;
	if (strlist_extend(&out->ceiling, &src->ceiling) < 0)
		return -1;
	for (size_t i = 0; i < src->ncut; i++) {
		char *item = strdup(src->cut[i].item);
		if (cut_add(out, item, &src->cut[i].kept) < 0)
			return -1;
	}
	return 0;
}

static int cmp_icase_ptr(const void *a, const void *b)
{
	return strcasecmp(*(const char *const *)a, *(const char *const *)b);
}

static int cmp_tool(const void *a, const void *b)
{
	return strcasecmp(((const struct grant_tool *)a)->name,
			  ((const struct grant_tool *)b)->name);
}

static int cmp_str_ptr(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Adds the unique strings of v (sorted here) to l. */
static int add_sorted_unique(struct strlist *l, const char **v, size_t n)
{
	if (n > 1)
		qsort(v, n, sizeof *v, cmp_str_ptr);
	for (size_t i = 0; i < n; i++) {
		if (i > 0 && strcmp(v[i], v[i - 1]) == 0)
			continue;
		if (strlist_add(l, v[i]) < 0)
			return -1;
	}
	return 0;
}

/* One admitted declared item during resolution (borrowed strings). */
struct item {
	size_t reg;          /* index into the sorted registered names */
	size_t seq;          /* declaration order, for a stable sort */
	const char *skill;
	const char *pattern; /* NULL: unrestricted */
};

static int cmp_item(const void *a, const void *b)
{
	const struct item *x = a, *y = b;
	if (x->reg != y->reg)
		return x->reg < y->reg ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static const char *item_text(const struct tool_grant *it)
{
	if (it->raw)
		return it->raw;
	return it->tool ? it->tool : "";
}

/* Sorted, de-duplicated (case-insensitively) copy of the registered names,
 * borrowed. */
static const char **sorted_registered(const struct strlist *registered, size_t *n)
{
	size_t cnt = registered ? registered->n : 0;
	const char **v = malloc((cnt ? cnt : 1) * sizeof *v);
	if (!v)
		return NULL;
	size_t k = 0;
	for (size_t i = 0; i < cnt; i++)
		if (registered->items[i] && registered->items[i][0])
			v[k++] = registered->items[i];
	if (k > 1)
		qsort(v, k, sizeof *v, cmp_icase_ptr);
	size_t u = 0;
	for (size_t i = 0; i < k; i++)
		if (u == 0 || strcasecmp(v[i], v[u - 1]) != 0)
			v[u++] = v[i];
	*n = u;
	return v;
}

static long find_registered(const char **reg, size_t nreg, const char *tool)
{
	const char **hit = bsearch(&tool, reg, nreg, sizeof *reg, cmp_icase_ptr);
	return hit ? (long)(hit - reg) : -1;
}

/* Builds the tools of a list policy from the sorted items. */
static int build_list_tools(struct grants *g, const char **reg,
			    struct item *items, size_t nitems)
{
	if (nitems == 0)
		return 0;
	qsort(items, nitems, sizeof *items, cmp_item);
	size_t ntools = 1;
	for (size_t i = 1; i < nitems; i++)
		if (items[i].reg != items[i - 1].reg)
			ntools++;
	g->tools = calloc(ntools, sizeof *g->tools);
	const char **pats = malloc(nitems * sizeof *pats);
	if (!g->tools || !pats) {
		free(pats);
		return -1;
	}
	int rc = 0;
	for (size_t i = 0; i < nitems && rc == 0;) {
		size_t j = i;
		while (j < nitems && items[j].reg == items[i].reg)
			j++;
		struct grant_tool *t = tool_push(g, reg[items[i].reg]);
		if (!t) {
			rc = -1;
			break;
		}
		size_t np = 0;
		for (size_t k = i; k < j; k++) {
			if (!items[k].pattern)
				t->unrestricted = true;
			else
				pats[np++] = items[k].pattern;
			/* One provenance entry per (skill, pattern). Items of one
			 * skill are adjacent here (sorted by declaration order). */
			bool seen = false;
			for (size_t m = k; m > i && !seen &&
					   items[m - 1].skill == items[k].skill;
			     m--)
				seen = (!items[m - 1].pattern && !items[k].pattern) ||
				       (items[m - 1].pattern && items[k].pattern &&
					strcmp(items[m - 1].pattern, items[k].pattern) == 0);
			if (!seen && by_add(t, items[k].skill, items[k].pattern) < 0)
				rc = -1;
		}
		if (rc == 0 && !t->unrestricted &&
		    add_sorted_unique(&t->patterns, pats, np) < 0)
			rc = -1;
		i = j;
	}
	free(pats);
	return rc;
}

int grants_resolve(const struct strlist *registered,
		   const struct skill *const *skills, size_t n,
		   struct grants *out)
{
	return grants_resolve_here(registered, NULL, NULL, skills, n, out);
}

/* Why tool is registered but unavailable here, or NULL. */
static const char *unavailable_why(const struct strlist *names, const struct strlist *why,
				   const char *tool)
{
	for (size_t i = 0; names && why && tool && i < names->n && i < why->n; i++)
		if (strcasecmp(names->items[i], tool) == 0)
			return why->items[i];
	return NULL;
}

/* What a declared item grants: 0 with *r its index in reg (sorted
 * registered names); 1 when it grants nothing, with *reason (a short one,
 * for grant_drop) and *detail (the whole of it, e.g. "'nope' is not a
 * registered tool"), both malloc'd, and *verb ("dropped", "grants
 * nothing", "grants nothing here"); -1 on ENOMEM. unavailable and why (may
 * be NULL) are the registered tools that cannot work here, and why. */
static int item_check(const char **reg, size_t nreg, const struct strlist *unavailable,
		      const struct strlist *why, const struct tool_grant *it, long *r,
		      char **reason, char **detail, const char **verb)
{
	const char *tool = it->tool ? it->tool : "";
	*reason = *detail = NULL;
	*r = tool[0] ? find_registered(reg, nreg, tool) : -1;
	const char *absent = *r < 0 ? unavailable_why(unavailable, why, it->tool) : NULL;
	bool claude_only = false;
	if (*r < 0 && !absent)
		tool_from_claude(it->tool, &claude_only);
	char *w = NULL;
	int rc = 0;
	if (absent) {
		*verb = "grants nothing here";
		*reason = strdup("not available here");
		rc = asprintf(detail, "'%s' is not available: %s", tool, absent);
	} else if (claude_only) {
		*verb = "dropped";
		*reason = strdup("a Claude Code tool skillfs does not have");
		rc = asprintf(detail, "it is a Claude Code tool skillfs does not have");
	} else if (*r < 0) {
		*verb = "dropped";
		*reason = strdup("not a registered tool");
		rc = asprintf(detail, "'%s' is not a registered tool", tool);
	} else if (it->pattern && !grants_tool_has_patterns(reg[*r])) {
		*verb = "grants nothing";
		*reason = strdup("tool takes no command pattern");
		rc = asprintf(detail, "'%s' takes no command pattern", reg[*r]);
	} else if (it->pattern && grants_tool_pattern_check(reg[*r], it->pattern, &w) < 0) {
		*verb = "grants nothing";
		*reason = w;
		rc = w ? asprintf(detail, "%s", w) : -1;
	} else {
		return 0;
	}
	if (rc < 0 || !*reason) {
		if (rc < 0)
			*detail = NULL;
		free(*reason);
		free(*detail);
		*reason = *detail = NULL;
		return -1;
	}
	return 1;
}

int grants_resolve_here(const struct strlist *registered,
			const struct strlist *unavailable, const struct strlist *why,
			const struct skill *const *skills, size_t n,
			struct grants *out)
{
	memset(out, 0, sizeof *out);
	size_t nreg = 0;
	const char **reg = sorted_registered(registered, &nreg);
	if (!reg)
		return -1;

	size_t cap = 0;
	for (size_t i = 0; i < n; i++)
		if (skills[i] && skills[i]->valid && skills[i]->allowed_tools.declared)
			cap += skills[i]->allowed_tools.n;
	struct item *items = malloc((cap ? cap : 1) * sizeof *items);
	if (!items) {
		free(reg);
		return -1;
	}
	size_t nitems = 0;
	int rc = 0;

	for (size_t i = 0; i < n && rc == 0; i++) {
		const struct skill *s = skills[i];
		if (!s)
			continue;
		const char *name = s->name ? s->name : "";
		if (s->valid && !s->allowed_tools.declared)
			continue;
		if (strlist_add(&out->declaring, name) < 0) {
			rc = -1;
			break;
		}
		if (!s->valid) {
			/* D1: whatever was parsed, an invalid skill declares []. */
			if (strlist_addf(&out->warnings,
					 "skill '%s' is invalid: it counts as allowed-tools: [] (grants nothing)",
					 name) < 0)
				rc = -1;
			continue;
		}
		for (size_t k = 0; k < s->allowed_tools.n && rc == 0; k++) {
			const struct tool_grant *it = &s->allowed_tools.items[k];
			const char *text = item_text(it);
			long r;
			char *reason, *detail;
			const char *verb;
			int bad = item_check(reg, nreg, unavailable, why, it, &r, &reason, &detail,
					     &verb);
			if (bad > 0) {
				if (drop_add(out, name, text, reason) < 0 ||
				    strlist_addf(&out->warnings,
						 "skill '%s': allowed-tools item '%s' %s: %s", name,
						 text, verb, detail) < 0)
					rc = -1;
				free(reason);
				free(detail);
				continue;
			}
			if (bad < 0) {
				rc = -1;
				break;
			}
			items[nitems] = (struct item){ (size_t)r, nitems, name, it->pattern };
			nitems++;
		}
	}

	if (rc == 0 && out->declaring.n == 0) {
		out->policy = GRANTS_ALL;
		out->tools = calloc(nreg ? nreg : 1, sizeof *out->tools);
		if (!out->tools)
			rc = -1;
		for (size_t i = 0; i < nreg && rc == 0; i++) {
			struct grant_tool *t = tool_push(out, reg[i]);
			if (!t)
				rc = -1;
			else
				t->unrestricted = true;
		}
	} else if (rc == 0) {
		out->policy = GRANTS_LIST;
		rc = build_list_tools(out, reg, items, nitems);
	}
	free(items);
	free(reg);
	if (rc < 0) {
		grants_free(out);
		errno = ENOMEM;
	}
	return rc;
}

static int cmp_tool_key(const void *key, const void *elem)
{
	return strcasecmp((const char *)key, ((const struct grant_tool *)elem)->name);
}

const struct grant_tool *grants_find(const struct grants *g, const char *tool)
{
	if (!g || !tool || !g->tools || g->n == 0)
		return NULL;
	return bsearch(tool, g->tools, g->n, sizeof *g->tools, cmp_tool_key);
}

bool grants_has(const struct grants *g, const char *tool)
{
	return grants_find(g, tool) != NULL;
}

int grants_pattern_check(const char *pattern, char **why)
{
	*why = NULL;
	if (!pattern || strspn(pattern, " \t") == strlen(pattern)) {
		*why = strdup("empty command pattern");
		return -1;
	}
	struct strlist words = {0};
	char *err = NULL;
	if (cmdline_split(pattern, &words, &err) == 0) {
		strlist_free(&words);
		return 0;
	}
	if (err && asprintf(why, "pattern cannot be split: %s", err) < 0)
		*why = NULL;
	free(err);
	return -1;
}

/* Whether the words of p are the first words of c. */
static bool words_prefix(const struct strlist *p, const struct strlist *c)
{
	if (p->n == 0 || p->n > c->n)
		return false;
	for (size_t i = 0; i < p->n; i++)
		if (strcmp(p->items[i], c->items[i]) != 0)
			return false;
	return true;
}

/* Whether the split command argv is admitted by pattern. */
static bool pattern_admits(const char *pattern, const struct strlist *argv)
{
	struct strlist words = {0};
	if (!pattern || cmdline_split(pattern, &words, NULL) < 0)
		return false; /* a pattern that cannot be split grants nothing */
	bool ok = words_prefix(&words, argv);
	strlist_free(&words);
	return ok;
}

int grants_tool_pattern_check(const char *tool, const char *pattern, char **why)
{
	if (domain_tool(tool))
		return domain_pattern_check(pattern, why);
	return grants_pattern_check(pattern, why);
}

bool grants_pattern_matches(const char *pattern, const char *command)
{
	struct strlist argv = {0};
	if (!pattern || !command || cmdline_split(command, &argv, NULL) < 0)
		return false;
	bool ok = pattern_admits(pattern, &argv);
	strlist_free(&argv);
	return ok;
}

bool grants_pattern_covers(const char *outer, const char *inner)
{
	struct strlist in = {0};
	if (!outer || !inner || cmdline_split(inner, &in, NULL) < 0)
		return false;
	bool ok = pattern_admits(outer, &in);
	strlist_free(&in);
	return ok;
}

bool grants_tool_pattern_covers(const char *tool, const char *outer,
				const char *inner)
{
	if (domain_tool(tool))
		return domain_pattern_covers(outer, inner);
	return grants_pattern_covers(outer, inner);
}

/* Whether a URL's host is admitted by one of the domain patterns. */
static bool url_permitted(const struct strlist *patterns, const char *url)
{
	char *host = NULL, *why = NULL;
	if (!url || domain_url_parse(url, NULL, &host, &why) < 0) {
		free(why);
		return false;
	}
	bool ok = false;
	for (size_t i = 0; i < patterns->n && !ok; i++)
		ok = domain_pattern_admits(patterns->items[i], host);
	free(host);
	return ok;
}

/* Whether the split command argv is admitted by one of t's patterns. */
static bool tool_admits(const struct grant_tool *t, const struct strlist *argv)
{
	bool ok = false;
	for (size_t i = 0; i < t->patterns.n && !ok; i++)
		ok = pattern_admits(t->patterns.items[i], argv);
	return ok;
}

bool grants_permits(const struct grants *g, const char *tool,
		    const char *command)
{
	const struct grant_tool *t = grants_find(g, tool);
	if (!t)
		return false;
	if (t->unrestricted)
		return true;
	if (domain_tool(t->name))
		return url_permitted(&t->patterns, command);
	struct strlist argv = {0};
	if (!command || cmdline_split(command, &argv, NULL) < 0)
		return false;
	bool ok = tool_admits(t, &argv);
	strlist_free(&argv);
	return ok;
}

bool grants_permits_argv(const struct grants *g, const char *tool,
			 const char *const *argv)
{
	const struct grant_tool *t = grants_find(g, tool);
	if (!t)
		return false;
	if (t->unrestricted)
		return true;
	if (!argv || !argv[0])
		return false;
	/* A view of argv, never changed nor freed. */
	struct strlist words = {.items = (char **)argv};
	while (argv[words.n])
		words.n++;
	return tool_admits(t, &words);
}

static int tool_copy(struct grants *dst, const struct grant_tool *src)
{
	struct grant_tool *t = tool_push(dst, src->name);
	if (!t)
		return -1;
	t->unrestricted = src->unrestricted;
	if (strlist_extend(&t->patterns, &src->patterns) < 0 || by_copy(t, src) < 0)
		return -1;
	return 0;
}

/* Appends src's dropped items to out's. */
static int copy_dropped(struct grants *out, const struct grants *src)
{
	for (size_t i = 0; i < src->ndropped; i++)
		if (drop_add(out, src->dropped[i].skill, src->dropped[i].item,
			     src->dropped[i].reason) < 0)
			return -1;
	return 0;
}

static int copy_meta(struct grants *out, const struct grants *src)
{
	if (strlist_extend(&out->declaring, &src->declaring) < 0 ||
	    strlist_extend(&out->warnings, &src->warnings) < 0 ||
	    copy_dropped(out, src) < 0 || copy_ceiling(out, src) < 0)
		return -1;
	return 0;
}

int grants_copy(const struct grants *src, struct grants *out)
{
	memset(out, 0, sizeof *out);
	out->policy = src->policy;
	out->tools = calloc(src->n ? src->n : 1, sizeof *out->tools);
	int rc = out->tools ? 0 : -1;
	for (size_t i = 0; i < src->n && rc == 0; i++)
		rc = tool_copy(out, &src->tools[i]);
	if (rc == 0)
		rc = copy_meta(out, src);
	if (rc < 0) {
		grants_free(out);
		errno = ENOMEM;
	}
	return rc;
}

/* Patterns admitted by both sets of patterns of tool: p ∩ q is the
 * narrower of the two when one covers the other (grants_tool_pattern_covers:
 * word-wise for commands, by subdomain for domains), else nothing; a
 * pattern that cannot be split meets nothing. */
static int intersect_patterns(const char *tool, const struct strlist *a,
			      const struct strlist *b, struct strlist *out)
{
	size_t cap = a->n * b->n;
	const char **v = malloc((cap ? cap : 1) * sizeof *v);
	if (!v)
		return -1;
	size_t nv = 0;
	for (size_t i = 0; i < a->n; i++)
		for (size_t j = 0; j < b->n; j++) {
			const char *p = a->items[i], *q = b->items[j];
			if (grants_tool_pattern_covers(tool, p, q))
				v[nv++] = q;
			else if (grants_tool_pattern_covers(tool, q, p))
				v[nv++] = p;
		}
	int rc = add_sorted_unique(out, v, nv);
	free(v);
	return rc;
}

/* r (a tool pushed, named) gets what both s and t (the same tool) admit:
 * unrestricted when both are, else the patterns they have in common
 * (intersect_patterns), an unrestricted side taking the other's. Returns
 * 0 or -1 on ENOMEM. */
static int meet_tool(const struct grant_tool *s, const struct grant_tool *t,
		     struct grant_tool *r)
{
	if (s->unrestricted && t->unrestricted) {
		r->unrestricted = true;
		return 0;
	}
	if (s->unrestricted)
		return strlist_extend(&r->patterns, &t->patterns);
	if (t->unrestricted)
		return strlist_extend(&r->patterns, &s->patterns);
	return intersect_patterns(s->name, &s->patterns, &t->patterns, &r->patterns);
}

int grants_intersect(const struct grants *stored, const struct grants *now,
		     struct grants *out)
{
	if (!now) { /* nothing resolvable now: fail closed */
		memset(out, 0, sizeof *out);
		out->policy = GRANTS_LIST;
		return 0;
	}
	if (!stored)
		return grants_copy(now, out);
	memset(out, 0, sizeof *out);
	out->policy = (stored->policy == GRANTS_ALL && now->policy == GRANTS_ALL)
			      ? GRANTS_ALL
			      : GRANTS_LIST;
	/* Provenance describes the side that restricts now, else the stored. */
	const struct grants *prov = now->policy == GRANTS_LIST ? now : stored;
	out->tools = calloc(stored->n ? stored->n : 1, sizeof *out->tools);
	int rc = out->tools ? 0 : -1;
	for (size_t i = 0; i < stored->n && rc == 0; i++) {
		const struct grant_tool *s = &stored->tools[i];
		const struct grant_tool *t = grants_find(now, s->name);
		if (!t) {
			rc = strlist_addf(&out->warnings,
					  "tool '%s' removed: no longer granted", s->name);
			continue;
		}
		struct grant_tool *r = tool_push(out, t->name);
		if (!r) {
			rc = -1;
			break;
		}
		rc = meet_tool(s, t, r);
		if (rc == 0) {
			const struct grant_tool *p = prov == now ? t : s;
			rc = by_copy(r, p);
		}
		if (rc == 0 && !r->unrestricted && r->patterns.n == 0) {
			tool_free(r);
			out->n--;
			rc = strlist_addf(&out->warnings,
					  "tool '%s' removed: no command pattern left in common",
					  s->name);
		}
	}
	if (rc == 0) {
		/* now's warnings first, then the removals found above */
		struct strlist removed = out->warnings;
		memset(&out->warnings, 0, sizeof out->warnings);
		rc = strlist_extend(&out->declaring, &prov->declaring);
		if (rc == 0)
			rc = strlist_extend(&out->warnings, &now->warnings);
		if (rc == 0)
			rc = strlist_extend(&out->warnings, &removed);
		strlist_free(&removed);
		if (rc == 0)
			rc = copy_dropped(out, now);
		/* The ceiling in force now, else the one the run was stored
		 * under (stored ∩ now lies within both). */
		if (rc == 0 && (now->capped || stored->capped))
			rc = copy_ceiling(out, now->capped ? now : stored);
	}
	/* stored may be in any order (e.g. hand-built): keep tools sorted */
	if (rc == 0 && out->n > 1)
		qsort(out->tools, out->n, sizeof *out->tools, cmp_tool);
	if (rc < 0) {
		grants_free(out);
		errno = ENOMEM;
	}
	return rc;
}

/* One list line of tool and pattern (grants_format_item without its
 * newline), malloc'd; NULL on ENOMEM. */
static char *item_line(const char *tool, const char *pattern)
{
	struct buf b = { 0 };
	if (grants_format_item(&b, tool, pattern) < 0) {
		buf_free(&b);
		return NULL;
	}
	size_t len;
	char *t = buf_steal(&b, &len);
	if (t && len)
		t[len - 1] = '\0';
	return t;
}

/* The lines of tool t's entry r (grants_format_lines of one tool),
 * appended to l. */
static int tool_lines(const struct grant_tool *r, struct strlist *l)
{
	if (r->unrestricted)
		return strlist_add_owned(l, item_line(r->name, NULL));
	for (size_t i = 0; i < r->patterns.n; i++)
		if (strlist_add_owned(l, item_line(r->name, r->patterns.items[i])) < 0)
			return -1;
	return 0;
}

/* Records in out what the ceiling took of t (g's entry) when r (NULL:
 * the tool went) is what is left of it: each line of t that is not a line
 * of r, with the lines of r within it. */
static int record_cut(struct grants *out, const struct grant_tool *t, const struct grant_tool *r)
{
	struct strlist left = { 0 };
	int rc = r ? tool_lines(r, &left) : 0;
	if (rc == 0 && t->unrestricted) {
		if (!r || !r->unrestricted)
			rc = cut_add(out, item_line(t->name, NULL), &left);
	} else if (rc == 0) {
		for (size_t i = 0; i < t->patterns.n && rc == 0; i++) {
			const char *p = t->patterns.items[i];
			if (r && strlist_has(&r->patterns, p))
				continue;
			struct strlist kept = { 0 };
			for (size_t k = 0; r && k < r->patterns.n && rc == 0; k++)
				if (grants_tool_pattern_covers(t->name, p, r->patterns.items[k]))
					rc = strlist_add_owned(&kept, item_line(t->name,
										r->patterns.items[k]));
			if (rc == 0)
				rc = cut_add(out, item_line(t->name, p), &kept);
			strlist_free(&kept);
		}
	}
	strlist_free(&left);
	return rc;
}

/* Resolves the ceiling's items into c (a list, provenance "ceiling"),
 * each item that allows nothing left out with a warning in warn. */
static int ceiling_resolve(const struct strlist *ceiling, const struct strlist *registered,
			   const struct strlist *unavailable, struct grants *c,
			   struct strlist *warn)
{
	memset(c, 0, sizeof *c);
	c->policy = GRANTS_LIST;
	size_t nreg = 0, nitems = 0, n = ceiling ? ceiling->n : 0;
	const char **reg = sorted_registered(registered, &nreg);
	struct item *items = malloc((n ? n : 1) * sizeof *items);
	struct tool_grant *parsed = calloc(n ? n : 1, sizeof *parsed);
	int rc = reg && items && parsed ? 0 : -1;
	for (size_t i = 0; i < n && rc == 0; i++) {
		const char *text = ceiling->items[i];
		rc = tool_grant_parse(text, &parsed[i]);
		if (rc < 0)
			break;
		long r;
		char *reason, *detail;
		const char *verb;
		int bad = item_check(reg, nreg, NULL, NULL, &parsed[i], &r, &reason, &detail,
				     &verb);
		/* A tool that cannot work here is not on any list: no news. */
		bool here = !(unavailable && parsed[i].tool &&
			      strlist_has(unavailable, parsed[i].tool));
		if (bad > 0 && here)
			rc = strlist_addf(warn, "ceiling (tools:) item '%s' allows nothing: %s",
					  text, detail);
		free(reason);
		free(detail);
		if (bad < 0)
			rc = -1;
		if (bad == 0) {
			items[nitems] = (struct item){ (size_t)r, nitems, "", parsed[i].pattern };
			nitems++;
		}
	}
	if (rc == 0)
		rc = build_list_tools(c, reg, items, nitems);
	for (size_t i = 0; parsed && i < n; i++) {
		free(parsed[i].tool);
		free(parsed[i].pattern);
		free(parsed[i].raw);
	}
	free(parsed);
	free(items);
	free(reg);
	return rc;
}

int grants_cap(const struct grants *g, const struct strlist *ceiling,
	       const struct strlist *registered, const struct strlist *unavailable,
	       struct grants *out)
{
	struct grants c;
	struct strlist warn = { 0 };
	memset(out, 0, sizeof *out);
	int rc = ceiling_resolve(ceiling, registered, unavailable, &c, &warn);
	out->policy = GRANTS_LIST;
	out->capped = true;
	out->tools = calloc(g->n ? g->n : 1, sizeof *out->tools);
	if (rc == 0 && (!out->tools || strlist_extend(&out->declaring, &g->declaring) < 0 ||
			strlist_extend(&out->warnings, &g->warnings) < 0 ||
			strlist_extend(&out->warnings, &warn) < 0 || copy_dropped(out, g) < 0 ||
			(ceiling && strlist_extend(&out->ceiling, ceiling) < 0)))
		rc = -1;
	for (size_t i = 0; i < g->n && rc == 0; i++) {
		const struct grant_tool *t = &g->tools[i];
		const struct grant_tool *ct = grants_find(&c, t->name);
		struct grant_tool *r = ct ? tool_push(out, t->name) : NULL;
		if (ct && !r) {
			rc = -1;
			break;
		}
		if (r && (meet_tool(t, ct, r) < 0 || by_copy(r, t) < 0)) {
			rc = -1;
			break;
		}
		if (r && !r->unrestricted && r->patterns.n == 0) {
			tool_free(r); /* nothing in common: the tool goes */
			out->n--;
			r = NULL;
		}
		rc = record_cut(out, t, r);
	}
	grants_free(&c);
	strlist_free(&warn);
	if (rc < 0) {
		grants_free(out);
		errno = ENOMEM;
	}
	return rc;
}

int grants_format_item(struct buf *out, const char *tool, const char *pattern)
{
	if (pattern && domain_tool(tool))
		return buf_printf(out, "%s(%s)\n", tool, pattern);
	if (pattern)
		return buf_printf(out, "%s(%s:*)\n", tool, pattern);
	return buf_printf(out, "%s\n", tool);
}

int grants_format_lines(const struct grants *g, struct buf *out)
{
	for (size_t i = 0; i < g->n; i++) {
		const struct grant_tool *t = &g->tools[i];
		if (t->unrestricted) {
			if (grants_format_item(out, t->name, NULL) < 0)
				return -1;
			continue;
		}
		for (size_t k = 0; k < t->patterns.n; k++)
			if (grants_format_item(out, t->name, t->patterns.items[k]) < 0)
				return -1;
	}
	return 0;
}

/* json_array_append_new / json_object_set_new that also fail on a NULL value. */
static int jadd(json_t *arr, json_t *v)
{
	return v ? json_array_append_new(arr, v) : -1;
}

static int jset(json_t *obj, const char *k, json_t *v)
{
	return v ? json_object_set_new(obj, k, v) : -1;
}

static json_t *str_or_null(const char *s)
{
	return s ? json_string(s) : json_null();
}

static json_t *tool_json(const struct grant_tool *t)
{
	json_t *o = json_object(), *by = json_array();
	int rc = (o && by) ? 0 : -1;
	if (rc == 0)
		rc = jset(o, "name", json_string(t->name));
	if (rc == 0)
		rc = jset(o, "unrestricted", json_boolean(t->unrestricted));
	if (rc == 0)
		rc = jset(o, "patterns", strlist_to_json(&t->patterns));
	for (size_t i = 0; i < t->nby && rc == 0; i++) {
		json_t *e = json_object();
		rc = e ? 0 : -1;
		if (rc == 0)
			rc = jset(e, "skill", json_string(t->by[i].skill));
		if (rc == 0)
			rc = jset(e, "pattern", str_or_null(t->by[i].pattern));
		if (rc == 0)
			rc = jadd(by, e);
		else
			json_decref(e);
	}
	if (rc == 0) {
		rc = json_object_set_new(o, "granted_by", by);
		by = NULL;
	}
	json_decref(by);
	if (rc < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* {"tools": [the ceiling's items], "removed": [{"item", "kept": [..]}]}. */
static json_t *ceiling_json(const struct grants *g)
{
	json_t *o = json_object(), *cut = json_array();
	int rc = o && cut ? 0 : -1;
	if (rc == 0)
		rc = jset(o, "tools", strlist_to_json(&g->ceiling));
	for (size_t i = 0; i < g->ncut && rc == 0; i++)
		rc = jadd(cut, json_pack("{s:s, s:o}", "item", g->cut[i].item, "kept",
					 strlist_to_json(&g->cut[i].kept)));
	if (rc == 0) {
		rc = json_object_set_new(o, "removed", cut);
		cut = NULL;
	}
	json_decref(cut);
	if (rc < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *grants_to_json(const struct grants *g)
{
	json_t *o = json_object(), *tools = json_array(), *dropped = json_array();
	int rc = (o && tools && dropped) ? 0 : -1;
	if (rc == 0)
		rc = jset(o, "policy",
			  json_string(g->policy == GRANTS_ALL ? "all" : "list"));
	for (size_t i = 0; i < g->n && rc == 0; i++)
		rc = jadd(tools, tool_json(&g->tools[i]));
	for (size_t i = 0; i < g->ndropped && rc == 0; i++) {
		json_t *e = json_object();
		rc = e ? 0 : -1;
		if (rc == 0)
			rc = jset(e, "skill", str_or_null(g->dropped[i].skill));
		if (rc == 0)
			rc = jset(e, "item", str_or_null(g->dropped[i].item));
		if (rc == 0)
			rc = jset(e, "reason", str_or_null(g->dropped[i].reason));
		if (rc == 0)
			rc = jadd(dropped, e);
		else
			json_decref(e);
	}
	if (rc == 0) {
		rc = json_object_set_new(o, "tools", tools);
		tools = NULL;
	}
	if (rc == 0)
		rc = jset(o, "declaring", strlist_to_json(&g->declaring));
	if (rc == 0) {
		rc = json_object_set_new(o, "dropped", dropped);
		dropped = NULL;
	}
	if (rc == 0)
		rc = jset(o, "warnings", strlist_to_json(&g->warnings));
	if (rc == 0)
		rc = jset(o, "ceiling", g->capped ? ceiling_json(g) : json_null());
	json_decref(tools);
	json_decref(dropped);
	if (rc < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static int set_err(char **err, const char *msg)
{
	if (err)
		*err = strdup(msg);
	return -1;
}

/* Reads an array of strings (absent = empty when optional). */
static int strlist_from_json(const json_t *a, bool optional, struct strlist *l)
{
	if (!a)
		return optional ? 0 : -1;
	if (!json_is_array(a))
		return -1;
	size_t i;
	const json_t *v;
	json_array_foreach(a, i, v) {
		if (!json_is_string(v) || strlist_add(l, json_string_value(v)) < 0)
			return -1;
	}
	return 0;
}

static const char *tool_from_json(const json_t *o, struct grants *g)
{
	if (!json_is_object(o))
		return "tools: expected objects";
	const json_t *name = json_object_get(o, "name");
	const json_t *unr = json_object_get(o, "unrestricted");
	if (!json_is_string(name) || !json_string_value(name)[0])
		return "tools: a tool has no name";
	if (!json_is_boolean(unr))
		return "tools: 'unrestricted' must be true or false";
	struct grant_tool *t = tool_push(g, json_string_value(name));
	if (!t)
		return "out of memory";
	t->unrestricted = json_is_true(unr);
	if (strlist_from_json(json_object_get(o, "patterns"), true, &t->patterns) < 0)
		return "tools: 'patterns' must be a list of strings";
	if (t->unrestricted)
		strlist_free(&t->patterns);
	else if (t->patterns.n == 0)
		return "tools: a restricted tool has no pattern";
	const json_t *by = json_object_get(o, "granted_by");
	if (by && !json_is_array(by))
		return "tools: 'granted_by' must be a list";
	size_t i;
	const json_t *e;
	json_array_foreach(by, i, e) {
		const json_t *sk = json_object_get(e, "skill");
		const json_t *pt = json_object_get(e, "pattern");
		if (!json_is_string(sk) || (pt && !json_is_null(pt) && !json_is_string(pt)))
			return "tools: malformed 'granted_by' entry";
		if (by_add(t, json_string_value(sk),
			   json_is_string(pt) ? json_string_value(pt) : NULL) < 0)
			return "out of memory";
	}
	return NULL;
}

/* Reads "ceiling" (absent or null: none) into g; NULL, or what is wrong. */
static const char *ceiling_from_json(const json_t *c, struct grants *g)
{
	if (!c || json_is_null(c))
		return NULL;
	const json_t *removed = json_object_get(c, "removed");
	if (!json_is_object(c) ||
	    strlist_from_json(json_object_get(c, "tools"), false, &g->ceiling) < 0 ||
	    (removed && !json_is_array(removed)))
		return "stored allow-list: malformed 'ceiling'";
	g->capped = true;
	size_t i;
	const json_t *e;
	json_array_foreach(removed, i, e) {
		const json_t *item = json_object_get(e, "item");
		struct strlist kept = { 0 };
		if (!json_is_string(item) ||
		    strlist_from_json(json_object_get(e, "kept"), true, &kept) < 0) {
			strlist_free(&kept);
			return "stored allow-list: malformed 'ceiling' entry";
		}
		int rc = cut_add(g, strdup(json_string_value(item)), &kept);
		strlist_free(&kept);
		if (rc < 0)
			return "out of memory";
	}
	return NULL;
}

int grants_from_json(const json_t *j, struct grants *out, char **err)
{
	memset(out, 0, sizeof *out);
	if (err)
		*err = NULL;
	const char *why = NULL;
	const json_t *pol = json_object_get(j, "policy");
	const json_t *tools = json_object_get(j, "tools");
	if (!json_is_object(j))
		why = "stored allow-list: expected a JSON object";
	else if (!json_is_string(pol))
		why = "stored allow-list: 'policy' missing";
	else if (strcmp(json_string_value(pol), "all") == 0)
		out->policy = GRANTS_ALL;
	else if (strcmp(json_string_value(pol), "list") == 0)
		out->policy = GRANTS_LIST;
	else
		why = "stored allow-list: 'policy' must be all or list";
	if (!why && !json_is_array(tools))
		why = "stored allow-list: 'tools' must be a list";
	if (!why) {
		size_t n = json_array_size(tools);
		out->tools = calloc(n ? n : 1, sizeof *out->tools);
		if (!out->tools)
			why = "out of memory";
		for (size_t i = 0; i < n && !why; i++)
			why = tool_from_json(json_array_get(tools, i), out);
	}
	if (!why) {
		if (out->n > 1)
			qsort(out->tools, out->n, sizeof *out->tools, cmp_tool);
		for (size_t i = 1; i < out->n && !why; i++)
			if (strcasecmp(out->tools[i - 1].name, out->tools[i].name) == 0)
				why = "stored allow-list: a tool is listed twice";
	}
	if (!why && (strlist_from_json(json_object_get(j, "declaring"), true,
				       &out->declaring) < 0 ||
		     strlist_from_json(json_object_get(j, "warnings"), true,
				       &out->warnings) < 0))
		why = "stored allow-list: 'declaring' and 'warnings' must be lists of strings";
	const json_t *dropped = json_object_get(j, "dropped");
	if (!why && dropped && !json_is_array(dropped))
		why = "stored allow-list: 'dropped' must be a list";
	if (!why) {
		size_t i;
		const json_t *e;
		json_array_foreach(dropped, i, e) {
			const json_t *sk = json_object_get(e, "skill");
			const json_t *it = json_object_get(e, "item");
			const json_t *re = json_object_get(e, "reason");
			if (!json_is_string(sk) || !json_is_string(it) ||
			    (re && !json_is_null(re) && !json_is_string(re))) {
				why = "stored allow-list: malformed 'dropped' entry";
				break;
			}
			if (drop_add(out, json_string_value(sk), json_string_value(it),
				     json_is_string(re) ? json_string_value(re) : NULL) < 0) {
				why = "out of memory";
				break;
			}
		}
	}
	if (!why)
		why = ceiling_from_json(json_object_get(j, "ceiling"), out);
	if (why) {
		grants_free(out);
		return set_err(err, why);
	}
	return 0;
}
