#include "resolution.h"

#include "json_text.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "mode.h"

const char *const resolution_file_names[RES_NFILES] = {
	[RES_ALLOWED_TOOLS] = "allowed-tools",
	[RES_ATTACHMENTS] = "attachments",
	[RES_AVAILABLE_SKILLS] = "available-skills",
	[RES_EFFECTIVE] = "effective",
	[RES_GRANTS_JSON] = "grants.json",
	[RES_SKILL_BLOCK] = "skill-block",
	[RES_SYSTEM_PROMPT] = "system-prompt",
	[RES_WARNINGS] = "warnings",
};

struct resolution *resolution_ref(struct resolution *r)
{
	__atomic_add_fetch(&r->refs, 1, __ATOMIC_ACQ_REL);
	return r;
}

bool resolution_touches(const struct resolution *r, const struct catalog *cat,
			const struct strlist *names)
{
	if (!names->n)
		return false;
	for (size_t i = 0; i < r->eff.n; i++) {
		if (strlist_sorted_has(names, r->eff.items[i].name))
			return true;
		long ci = r->eff.items[i].index;
		if (ci < 0 || (size_t)ci >= cat->n)
			continue;
		const struct catalog_entry *e = &cat->entries[ci];
		for (size_t k = 0; k < e->nref_subs; k++)
			if (strlist_sorted_has(names, cat->entries[e->ref_subs[k]].skill->name))
				return true;
	}
	return false;
}

void resolution_free(struct resolution *r)
{
	if (!r || __atomic_sub_fetch(&r->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	free(r->config_name);
	effective_free(&r->eff);
	grants_free(&r->grants);
	claude_permissions_free(&r->claude);
	claude_files_free(&r->claude_files);
	prompt_free(&r->prompt);
	strlist_free(&r->warnings);
	for (int i = 0; i < RES_NFILES; i++)
		free(r->text[i]);
	free(r->eff_sorted);
	free(r);
}

static int cmp_index(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	return x < y ? -1 : x > y;
}

/* Fills r->eff_sorted from r->eff. Returns 0 or -1 on ENOMEM. */
static int sort_effective(struct resolution *r)
{
	size_t n = r->eff.neff;
	r->eff_sorted = malloc((n ? n : 1) * sizeof *r->eff_sorted);
	if (!r->eff_sorted)
		return -1;
	if (n)
		memcpy(r->eff_sorted, r->eff.eff, n * sizeof *r->eff_sorted);
	qsort(r->eff_sorted, n, sizeof *r->eff_sorted, cmp_index);
	size_t w = 0;
	for (size_t i = 0; i < n; i++)
		if (w == 0 || r->eff_sorted[w - 1] != r->eff_sorted[i])
			r->eff_sorted[w++] = r->eff_sorted[i];
	r->neff_sorted = w;
	return 0;
}

bool resolution_is_effective(const struct resolution *r, size_t ci)
{
	return r && r->neff_sorted &&
	       bsearch(&ci, r->eff_sorted, r->neff_sorted, sizeof ci, cmp_index);
}

const char *resolution_file(const struct resolution *r, const char *name,
			    size_t *len)
{
	if (!r || !name)
		return NULL;
	for (int i = 0; i < RES_NFILES; i++)
		if (strcmp(name, resolution_file_names[i]) == 0) {
			if (len)
				*len = r->len[i];
			if (!r->text[i])
				errno = r->prompt.error;
			return r->text[i];
		}
	errno = ENOENT;
	return NULL;
}

/* Warnings in a stable order: the config file's (an unknown key may be a
 * mistyped setting) and the catalogue's (a source that cannot be read, a
 * name in two sources), attachments, then the effective skills' own
 * (parse, catalogue, mode), then grants, then prompt budget drops. */
static int collect_warnings(const struct config *c, const struct catalog *cat,
			    struct resolution *r)
{
	struct strlist *w = &r->warnings;
	for (size_t i = 0; i < c->warnings.n; i++)
		if (strlist_addf(w, "config: %s", c->warnings.items[i]) < 0)
			return -1;
	if (strlist_extend(w, &cat->warnings) < 0)
		return -1;
	for (size_t i = 0; i < r->eff.n; i++) {
		const struct eff_item *it = &r->eff.items[i];
		if (it->state == EFF_EFFECTIVE || it->state == EFF_DISABLED)
			continue;
		if (strlist_addf(w, "skill '%s' %s: %s", it->name,
				 eff_state_name(it->state), it->reason) < 0)
			return -1;
	}
	for (size_t i = 0; i < r->eff.neff; i++) {
		const struct catalog_entry *e = &cat->entries[r->eff.eff[i]];
		const struct skill *s = e->skill;
		for (size_t k = 0; k < s->warnings.n; k++)
			if (strlist_addf(w, "skill '%s': %s", s->name,
					 s->warnings.items[k]) < 0)
				return -1;
		for (size_t k = 0; k < e->warnings.n; k++)
			if (strlist_addf(w, "skill '%s': %s", s->name,
					 e->warnings.items[k]) < 0)
				return -1;
		struct mode_info m = mode_decide(s, c->execution_mode);
		if (s->category == SKILL_ACTION && m.warning &&
		    strlist_addf(w, "skill '%s': %s", s->name, m.warning) < 0)
			return -1;
	}
	if (strlist_extend(w, &r->grants.warnings) < 0 ||
	    strlist_extend(w, &r->prompt.warnings) < 0)
		return -1;
	return 0;
}

static int lines(struct buf *b, const struct strlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		if (buf_printf(b, "%s\n", l->items[i]) < 0)
			return -1;
	return 0;
}

static int set_text(struct resolution *r, int id, struct buf *b)
{
	r->text[id] = buf_steal(b, &r->len[id]);
	buf_free(b);
	return r->text[id] ? 0 : -1;
}

static int set_copy(struct resolution *r, int id, const char *s, size_t len)
{
	struct buf b = { 0 };
	if (buf_append(&b, s ? s : "", s ? len : 0) < 0)
		return -1;
	return set_text(r, id, &b);
}

static int render(struct resolution *r)
{
	struct buf b = { 0 };
	int rc = 0;
	for (size_t i = 0; i < r->eff.n && rc == 0; i++)
		rc = buf_printf(&b, "%s %s %s\n", r->eff.items[i].name,
				eff_state_name(r->eff.items[i].state),
				r->eff.items[i].reason);
	if (rc == 0)
		rc = set_text(r, RES_ATTACHMENTS, &b);

	for (size_t i = 0; i < r->eff.n && rc == 0; i++)
		if (r->eff.items[i].state == EFF_EFFECTIVE)
			rc = buf_printf(&b, "%s\n", r->eff.items[i].name);
	if (rc == 0)
		rc = set_text(r, RES_EFFECTIVE, &b);

	if (rc == 0)
		rc = grants_format_lines(&r->grants, &b);
	if (rc == 0)
		rc = set_text(r, RES_ALLOWED_TOOLS, &b);

	if (rc == 0) {
		json_t *j = grants_to_json(&r->grants);
		rc = j && json_object_set_new(j, "configuration",
					      json_string(r->config_name)) == 0
			     ? json_text_append(&b, j, JSON_INDENT(2))
			     : -1;
		json_decref(j);
	}
	if (rc == 0)
		rc = set_text(r, RES_GRANTS_JSON, &b);

	/* Not assembled (prompt.error): those two texts stay NULL. */
	if (rc == 0 && !r->prompt.error)
		rc = set_copy(r, RES_SKILL_BLOCK, r->prompt.skill_block,
			      r->prompt.skill_block_len);
	if (rc == 0)
		rc = set_copy(r, RES_AVAILABLE_SKILLS, r->prompt.available,
			      r->prompt.available_len);
	if (rc == 0 && !r->prompt.error)
		rc = set_copy(r, RES_SYSTEM_PROMPT, r->prompt.system,
			      r->prompt.system_len);

	if (rc == 0)
		rc = lines(&b, &r->warnings);
	if (rc == 0)
		rc = set_text(r, RES_WARNINGS, &b);
	buf_free(&b);
	return rc;
}

/* g capped by cfg's tool ceiling (grants_cap), in place. */
static int apply_ceiling(const struct config *c, const struct configuration *cfg,
			 struct grants *g)
{
	struct grants capped;
	if (grants_cap(g, &cfg->ceiling, &c->registered_tools, &c->tools.unavailable,
		       &capped) < 0)
		return -1;
	grants_free(g);
	*g = capped;
	return 0;
}

struct resolution *resolution_build(const struct config *c,
				    const struct catalog *cat,
				    const struct configuration *cfg,
				    const char *const *forced, size_t nforced)
{
	if (!c || !cfg) {
		errno = EINVAL;
		return NULL;
	}
	struct resolution *r = calloc(1, sizeof *r);
	if (r)
		r->refs = 1;
	if (!r) {
		errno = ENOMEM;
		return NULL;
	}
	const struct skill **gate = NULL;
	int rc = -1;
	r->config_name = strdup(cfg->name ? cfg->name : "");
	if (!r->config_name ||
	    effective_resolve(c, cat, cfg, forced, nforced, &r->eff) < 0 ||
	    sort_effective(r) < 0)
		goto out;
	gate = malloc((r->eff.ngate ? r->eff.ngate : 1) * sizeof *gate);
	if (!gate)
		goto out;
	for (size_t i = 0; i < r->eff.ngate; i++)
		gate[i] = cat->entries[r->eff.gate[i]].skill;
	/* The allow-list first, capped by the configuration's ceiling; the
	 * budget applies afterwards (R9). */
	if (grants_resolve_here(&c->registered_tools, &c->tools.unavailable,
				&c->tools.unavailable_why, gate, r->eff.ngate, &r->grants) < 0 ||
	    (cfg->has_ceiling && apply_ceiling(c, cfg, &r->grants) < 0) ||
	    prompt_build(c, cat, r->eff.eff, r->eff.neff, &r->grants, &r->prompt) < 0 ||
	    collect_warnings(c, cat, r) < 0 || render(r) < 0)
		goto out;
	/* For Claude Code: resolved against every built-in tool, not the
	 * registered ones, and capped by the same ceiling. */
	if (claude_permissions_resolve(gate, r->eff.ngate,
				       cfg->has_ceiling ? &cfg->ceiling : NULL, &r->claude) < 0 ||
	    claude_files_render(&r->claude, &r->claude_files) < 0)
		goto out;
	rc = 0;
out:
	free(gate);
	if (rc < 0) {
		resolution_free(r);
		errno = ENOMEM;
		return NULL;
	}
	return r;
}
