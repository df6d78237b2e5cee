#include "skilldirs.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "skill.h"

/* Whether entry e may be run at all (R1's rules, as run_skill applies
 * them) and its name can be a directory of TOOLS_SKILLS. */
static bool usable(const struct catalog_entry *e, enum trust min_trust)
{
	return e && e->skill && e->skill->valid && !e->disabled && e->trust >= min_trust &&
	       e->skill->dir && e->skill->dir[0] == '/' && !skill_name_unusable(e->skill->name);
}

/* Adds catalogue entry i unless it is there already (seen[i]). */
static void add(const struct catalog *cat, size_t i, bool *seen, struct skilldirs *d)
{
	if (seen[i])
		return;
	seen[i] = true;
	if (d->n == TOOLS_SKILLS_MAX) {
		d->left_out++;
		return;
	}
	const struct skill *s = cat->entries[i].skill;
	d->items[d->n++] = (struct tool_skill_dir){.name = s->name, .dir = s->dir};
}

int skilldirs_build(const struct catalog *cat, const struct effective *eff,
		    enum trust min_trust, struct skilldirs *out)
{
	memset(out, 0, sizeof *out);
	if (!cat || !cat->n || !eff || !eff->neff)
		return 0;
	bool *seen = calloc(cat->n, sizeof *seen);
	/* Entries to look into for sub-skills, each once: a queue. */
	size_t *queue = calloc(cat->n, sizeof *queue);
	out->items = calloc(TOOLS_SKILLS_MAX, sizeof *out->items);
	if (!seen || !queue || !out->items) {
		free(seen);
		free(queue);
		skilldirs_free(out);
		return -1;
	}
	size_t head = 0, tail = 0;
	for (size_t k = 0; k < eff->neff; k++) {
		size_t i = eff->eff[k];
		if (i < cat->n && !seen[i] && usable(&cat->entries[i], min_trust)) {
			add(cat, i, seen, out);
			queue[tail++] = i;
		}
	}
	while (head < tail) {
		const struct catalog_entry *e = &cat->entries[queue[head++]];
		for (size_t k = 0; k < e->nref_subs; k++) {
			size_t i = e->ref_subs[k];
			if (i < cat->n && !seen[i] && usable(&cat->entries[i], min_trust)) {
				add(cat, i, seen, out);
				queue[tail++] = i;
			}
		}
	}
	free(seen);
	free(queue);
	return 0;
}

void skilldirs_free(struct skilldirs *d)
{
	if (!d)
		return;
	free(d->items);
	memset(d, 0, sizeof *d);
}

char *skilldirs_base(const struct skilldirs *d, const struct skill *s)
{
	const struct tool_skill_dir *best = NULL;
	size_t best_len = 0;
	for (size_t i = 0; s && s->dir && i < d->n; i++) {
		size_t n = strlen(d->items[i].dir);
		if (strncmp(s->dir, d->items[i].dir, n) == 0 &&
		    (s->dir[n] == '\0' || s->dir[n] == '/') && (!best || n > best_len)) {
			best = &d->items[i];
			best_len = n;
		}
	}
	if (!best) {
		errno = ENOENT;
		return NULL;
	}
	char *out;
	if (asprintf(&out, "%s/%s%s", TOOLS_SKILLS, best->name, s->dir + best_len) < 0) {
		errno = ENOMEM;
		return NULL;
	}
	return out;
}
