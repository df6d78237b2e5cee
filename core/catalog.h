/* catalog: every skill of every source of a config, by name (DESIGN.md
 * section 2, D2). A catalog is immutable once built; rebuilding reuses the
 * skills of the previous one whose SKILL.md did not change. */
#ifndef SKILLFS_CATALOG_H
#define SKILLFS_CATALOG_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "pins.h"
#include "scan.h"
#include "skill.h"
#include "strlist.h"

struct catalog_entry {
	/* The skill as the catalogue serves it (one reference held): loaded,
	 * or an invalid copy of it (skill_invalid_copy, D1) while its source
	 * is pinned and does not match, or while its files hold a high
	 * injection finding that skills.acknowledged does not accept. */
	struct skill *skill;
	struct skill *loaded;     /* as parsed (one reference held); NULL:
	                             the same as skill */
	struct skill_scan *scan;  /* its directory's files: digests and
	                             findings (one reference); NULL: none */
	size_t source;            /* index into config->sources */
	enum trust trust;         /* source trust after the per-skill override */
	bool disabled;            /* in skills.disabled */
	struct strlist warnings;  /* its findings' (the first ngate), then
	                             the sub-skill references': unknown, cyclic */
	size_t ngate;
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
	                            unusable name, pinned sources that do not
	                            match */
	/* Per source of the config (npins of them): the state of its pin,
	 * one reference; NULL when it is not pinned (or was not read). */
	struct source_pin **pins;
	size_t npins;
	/* What this catalogue changed from the one it was made from by
	 * catalog_update (base; compared, never followed); base NULL: built
	 * from scratch, anything may differ. */
	struct catalog_delta {
		const struct catalog *base;
		struct strlist names; /* sorted: each skill whose entry came, went
		                         or changed in anything the mount shows */
		bool names_changed;   /* a name came or went: indexes moved */
	} delta;
	const struct config *config; /* built for (identity only) */
	size_t *renamed;  /* entries whose name is not their directory's own
	                     (ascending indexes), for catalog_update */
	size_t nrenamed;
	size_t nbuilt_warnings; /* the first warnings are the build's own; any
	                           after them were added by its owner */
	bool updatable;  /* catalog_update can build on it: no unlisted
	                    directory, no source that is one skill, listed
	                    twice or holds none */
	struct strlist shadowed;  /* sorted: the directories of skills a
	                             duplicate name left out */
	struct strlist dup_names; /* sorted: the names that have one */
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

/* catalog_build, with what pinned sources held when they last matched
 * (hist, may be NULL). Besides loading, it scans each skill's directory
 * as it is (re)loaded (scan.h: digests and injection findings, what did
 * not change reused from prev), checks each pinned source (pins.h) and
 * serves an invalid copy of each skill of a pinned source that does not
 * match (the pin's message as its error, also a catalogue warning), and of
 * each skill with a high injection finding that skills.acknowledged does
 * not name; the other findings are warnings of the entry. */
struct catalog *catalog_build_with(const struct config *c, const struct catalog *prev,
				   const struct skill_limits *lim, const struct strlist *dirty,
				   const struct pin_history *hist);

/* catalog_build_with with no directory named dirty, where a skill of prev
 * whose SKILL.md looks unchanged is reused only when each of its files is
 * as prev's scan of it found it (its identity: device, inode, size,
 * mtime, ctime), and none came or went; else it is loaded afresh. For the
 * first rescan once the watches are set up: a file changed before its
 * directory was watched is seen. Costs what the scans' walks cost (a file
 * whose identity did not change is not read). NULL only on ENOMEM. */
struct catalog *catalog_build_checked(const struct config *c, const struct catalog *prev,
				      const struct skill_limits *lim,
				      const struct pin_history *hist);

/* A catalogue equal to what catalog_build_with(c, prev, lim, dirty, hist)
 * would build, made in O(what changed) from prev: dirty must name every
 * directory that changed since prev was built for the same config c (each
 * one that changed and those above it, as the watcher marks them, and each
 * name that came or went in a source). Returns NULL with errno EAGAIN when
 * the change is not one it can follow (prev not updatable, a directory in
 * a recursive or pinned source, a name that collides): build it afresh
 * then; or NULL with ENOMEM. */
struct catalog *catalog_update(const struct config *c, const struct catalog *prev,
			       const struct skill_limits *lim, const struct strlist *dirty,
			       const struct pin_history *hist);

/* The digest of the skills' files of directory dir taken as a source
 * (recursive: as recursive: true), exactly as a pin of such a source is
 * checked, into out ("sha256:<hex>"): what `skillfs fingerprint DIR`
 * prints for sources[].fingerprint. Returns 0; 1 when some file could not
 * be read (such a digest never matches: *err names them); -1 with *err
 * when dir cannot be read. *err is malloc'd (caller frees) or NULL. */
int catalog_fingerprint(const char *dir, bool recursive, const struct skill_limits *lim,
			char out[FP_TEXT_SIZE], char **err);

/* The skill of e as parsed (e->loaded, else e->skill). */
const struct skill *catalog_entry_loaded(const struct catalog_entry *e);

/* Whether b holds exactly the skills of a: the same loaded objects in the
 * same order (a rebuild that found nothing changed reuses every one). */
bool catalog_same(const struct catalog *a, const struct catalog *b);

/* The entry of a skill by name, or NULL. O(log n). */
const struct catalog_entry *catalog_find(const struct catalog *cat, const char *name);

/* Index of a skill by name, or -1. */
long catalog_index(const struct catalog *cat, const char *name);

void catalog_free(struct catalog *cat);

#endif
