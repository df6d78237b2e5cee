/* discover: where the skills of a source lie (DESIGN.md section 2; issue
 * 15, "Finding skills"). A plain source holds its skills one level down; a
 * recursive one (sources[].recursive, -r DIR) at any depth. This searches a
 * source's tree for directories holding a SKILL.md, and words the hint for
 * a plain source that holds none directly. */
#ifndef SKILLFS_DISCOVER_H
#define SKILLFS_DISCOVER_H

#include <stdbool.h>
#include <stddef.h>

#include "strlist.h"

/* How far a search goes: levels below the source, and directory entries
 * read in all. */
struct discover_bounds {
	unsigned depth;
	size_t entries;
};

/* A recursive source's search: deep and wide enough for any collection
 * (the mount shows no path deeper than 64 levels), yet a tree such as a
 * home directory given by mistake cannot stall start-up for long. */
#define DISCOVER_RECURSIVE_DEPTH 64
#define DISCOVER_RECURSIVE_ENTRIES 200000
/* The hint's search below a plain source with no skill directly in it:
 * collections keep theirs in skills/, plugins/<p>/skills/, .curated/. */
#define DISCOVER_HINT_DEPTH 5
#define DISCOVER_HINT_ENTRIES 20000
/* The directories a hint names, the most populated first. */
#define DISCOVER_HINT_NAMED 4

struct discover {
	/* Directories holding a SKILL.md (a regular file or a symbolic link),
	 * relative to the source, in search order: each directory's entries
	 * in strcmp order, depth first. */
	struct strlist skills;
	/* The other directories searched, relative to the source (filled
	 * only when asked for). */
	struct strlist dirs;
	bool cut_depth;   /* a directory at the depth bound was not searched */
	bool cut_entries; /* the entry bound stopped the search */
};

/* Searches the directories below root for skills: hidden directories
 * included, .git and node_modules skipped, symbolic links never followed
 * (one directly in root that leads to a directory holding a SKILL.md is a
 * skill, as in a plain source), a skill's own directory not searched
 * further (its skills/ holds its sub-skills, which skill_load reads), and
 * no directory entered that is on another filesystem than root (a mount
 * point below it: the skillfs mount itself, say).
 * want_dirs: also list the other directories searched. Returns 0 with
 * *out filled (free with discover_free; a root that cannot be read gives
 * nothing), or -1 on ENOMEM with *out empty. */
int discover_search(const char *root, const struct discover_bounds *b, bool want_dirs,
		    struct discover *out);

void discover_free(struct discover *d);

/* The warning for a plain source root that holds no skill directly:
 * where the search (DISCOVER_HINT_*) found SKILL.md files deeper, up to
 * DISCOVER_HINT_NAMED directories with their counts, and what to do ("no
 * skills directly in X; 18 found in X/skills: use that directory as the
 * source, or `recursive: true`..."), or that none lies below it. A new
 * string in *msg; returns 0, or -1 on ENOMEM. */
int discover_hint(const char *root, char **msg);

#endif
