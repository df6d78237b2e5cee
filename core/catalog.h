/* catalog: every skill of every source of a config, by name (DESIGN.md
 * section 2, D2). A catalog is immutable once built; rebuilding reuses the
 * skills of the previous one whose SKILL.md did not change. */
#ifndef SKILLFS_CATALOG_H
#define SKILLFS_CATALOG_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "skill.h"
#include "strlist.h"

struct catalog_entry {
	struct skill *skill;      /* one reference held */
	size_t source;            /* index into config->sources */
	enum trust trust;         /* source trust after the per-skill override */
	bool disabled;            /* in skills.disabled */
	struct strlist warnings;  /* catalogue-level: unknown/cyclic sub-skill
	                             references, shadowed duplicates */
	/* Resolved front-matter sub-skill references that exist, each at most
	 * once, in declaration order, cycles cut (indexes into entries). */
	size_t *ref_subs;
	size_t nref_subs;
	bool is_referenced_sub; /* named in another skill's sub-skills: list */
};

struct catalog {
	struct catalog_entry *entries; /* sorted by name (strcmp) */
	size_t n;
	struct strlist warnings; /* duplicates across sources, unreadable sources,
	                            sources holding no skill (and where SKILL.md
	                            files lie deeper), skills left out for an
	                            unusable name */
};

/* Scans every source of c: a plain one's immediate subdirectories, a
 * recursive one's tree (discover_search). prev (may be NULL) lends skills whose SKILL.md
 * file identity is unchanged and whose directory is not in dirty (a sorted
 * list of skill directories that had other changes; may be NULL). A duplicate
 * name: the first source wins, the other is a warning. A skill whose name
 * cannot be used (skill_name_unusable: a directory name it fell back to) is
 * left out, with a warning naming its directory. Returns NULL only on
 * ENOMEM. */
struct catalog *catalog_build(const struct config *c, const struct catalog *prev,
			      const struct skill_limits *lim,
			      const struct strlist *dirty);

/* Whether b holds exactly the skills of a: the same loaded objects in the
 * same order (a rebuild that found nothing changed reuses every one). */
bool catalog_same(const struct catalog *a, const struct catalog *b);

/* The entry of a skill by name, or NULL. O(log n). */
const struct catalog_entry *catalog_find(const struct catalog *cat, const char *name);

/* Index of a skill by name, or -1. */
long catalog_index(const struct catalog *cat, const char *name);

void catalog_free(struct catalog *cat);

#endif
