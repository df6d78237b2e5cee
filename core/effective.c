#include "effective.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *eff_state_name(enum eff_state s)
{
	switch (s) {
	case EFF_EFFECTIVE: return "effective";
	case EFF_DUPLICATE: return "duplicate";
	case EFF_ORPHANED: return "orphaned";
	case EFF_DISABLED: return "disabled";
	case EFF_BELOW_TRUST: return "below-trust";
	case EFF_INVALID: return "invalid";
	}
	return "invalid";
}

void effective_free(struct effective *e)
{
	if (!e)
		return;
	for (size_t i = 0; i < e->n; i++) {
		free(e->items[i].name);
		free(e->items[i].reason);
	}
	free(e->items);
	free(e->eff);
	free(e->gate);
	memset(e, 0, sizeof *e);
}

/* Sort key for the duplicate check: name, then position. */
struct pos {
	const char *name;
	size_t at;
};

static int cmp_pos(const void *a, const void *b)
{
	const struct pos *x = a, *y = b;
	int c = strcmp(x->name, y->name);
	if (c)
		return c;
	return x->at < y->at ? -1 : x->at > y->at;
}

static int cmp_str_ptr(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Fills the state and reason of one item. first_forced: whether the earlier
 * entry of a duplicate was forced (meaningless otherwise). */
static int classify(const struct config *c, const struct catalog *cat,
		    const char **disabled, size_t ndisabled, bool enabled,
		    bool dup, bool first_forced, struct eff_item *it)
{
	it->index = -1;
	if (dup) {
		it->state = EFF_DUPLICATE;
		it->reason = strdup(first_forced ? "already forced earlier"
						 : "already attached earlier");
		return it->reason ? 0 : -1;
	}
	long idx = cat ? catalog_index(cat, it->name) : -1;
	if (idx < 0 || (size_t)idx >= cat->n) {
		it->state = EFF_ORPHANED;
		it->reason = strdup("not in the catalogue");
		return it->reason ? 0 : -1;
	}
	it->index = idx;
	const struct catalog_entry *e = &cat->entries[idx];
	const char *key = it->name;
	bool global_off = e->disabled ||
			  (ndisabled && bsearch(&key, disabled, ndisabled,
						sizeof *disabled, cmp_str_ptr));
	if (global_off || !enabled) {
		it->state = EFF_DISABLED;
		it->reason = strdup(global_off ? "disabled globally (skills.disabled)"
					       : "attachment enabled: false");
		return it->reason ? 0 : -1;
	}
	enum trust floor = c ? c->min_trust : TRUST_UNTRUSTED;
	if (e->trust < floor) {
		it->state = EFF_BELOW_TRUST;
		return asprintf(&it->reason, "trust %s < floor %s",
				trust_name(e->trust), trust_name(floor)) < 0
			       ? (it->reason = NULL, -1)
			       : 0;
	}
	if (!e->skill || !e->skill->valid) {
		it->state = EFF_INVALID;
		const char *why = e->skill && e->skill->error ? e->skill->error
							    : "SKILL.md could not be parsed";
		it->reason = strdup(why);
		return it->reason ? 0 : -1;
	}
	it->state = EFF_EFFECTIVE;
	it->reason = strdup(it->forced ? "forced on the run" : "attached");
	return it->reason ? 0 : -1;
}

int effective_resolve(const struct config *c, const struct catalog *cat,
		      const struct configuration *cfg,
		      const char *const *forced, size_t nforced,
		      struct effective *out)
{
	memset(out, 0, sizeof *out);
	size_t natt = 0;
	if (cfg)
		natt = cfg->attach_all ? (cat ? cat->n : 0) : cfg->n;
	size_t total = natt + nforced;
	size_t alloc = total ? total : 1;
	out->items = calloc(alloc, sizeof *out->items);
	out->eff = malloc(alloc * sizeof *out->eff);
	out->gate = malloc(alloc * sizeof *out->gate);
	struct pos *order = malloc(alloc * sizeof *order);
	bool *enabled = malloc(alloc * sizeof *enabled);
	size_t ndisabled = c ? c->disabled.n : 0;
	const char **disabled = malloc((ndisabled ? ndisabled : 1) * sizeof *disabled);
	int rc = (out->items && out->eff && out->gate && order && enabled && disabled)
			 ? 0
			 : -1;

	for (size_t i = 0; i < total && rc == 0; i++) {
		struct eff_item *it = &out->items[i];
		const char *name;
		enabled[i] = true;
		if (i < natt && cfg->attach_all) {
			const struct skill *s = cat->entries[i].skill;
			name = s && s->name ? s->name : "";
		} else if (i < natt) {
			name = cfg->att[i].name ? cfg->att[i].name : "";
			enabled[i] = cfg->att[i].enabled;
		} else {
			name = forced[i - natt] ? forced[i - natt] : "";
			it->forced = true;
		}
		it->name = strdup(name);
		if (!it->name)
			rc = -1;
		out->n++;
		order[i] = (struct pos){ it->name, i };
	}

	if (rc == 0) {
		for (size_t i = 0; i < ndisabled; i++)
			disabled[i] = c->disabled.items[i];
		if (ndisabled > 1)
			qsort(disabled, ndisabled, sizeof *disabled, cmp_str_ptr);
		if (total > 1)
			qsort(order, total, sizeof *order, cmp_pos);
	}
	/* Classify in sorted order; the first of a run of equal names wins. */
	size_t first = 0;
	for (size_t k = 0; k < total && rc == 0; k++) {
		bool dup = k > 0 && strcmp(order[k].name, order[k - 1].name) == 0;
		if (!dup)
			first = k;
		struct eff_item *it = &out->items[order[k].at];
		rc = classify(c, cat, disabled, ndisabled, enabled[order[k].at], dup,
			      out->items[order[first].at].forced, it);
	}
	/* The lists follow the listed order. */
	for (size_t i = 0; i < total && rc == 0; i++) {
		const struct eff_item *it = &out->items[i];
		if (it->state == EFF_EFFECTIVE)
			out->eff[out->neff++] = (size_t)it->index;
		if (it->state == EFF_EFFECTIVE || it->state == EFF_INVALID)
			out->gate[out->ngate++] = (size_t)it->index;
	}
	free(order);
	free(enabled);
	free(disabled);
	if (rc < 0) {
		effective_free(out);
		errno = ENOMEM;
	}
	return rc;
}
