/* skilldirs: the skills whose files a run's tools may read, each at
 * TOOLS_SKILLS/<name> (issue "Skill files in reach"; DESIGN.md section 7):
 * the run's effective skills, then the front-matter sub-skills they may run
 * (valid, enabled, at or above the trust floor), at most TOOLS_SKILLS_MAX.
 * A directory sub-skill lives in its parent's directory, so its files are
 * there: TOOLS_SKILLS/<parent>/skills/<sub>. */
#ifndef SKILLFS_SKILLDIRS_H
#define SKILLFS_SKILLDIRS_H

#include <stddef.h>

#include "catalog.h"
#include "effective.h"
#include "tools.h"
#include "trust.h"

struct skilldirs {
	struct tool_skill_dir *items; /* names and directories borrowed from
	                                 the catalogue's skills */
	size_t n;
	size_t left_out; /* skills not in reach: over TOOLS_SKILLS_MAX */
};

/* The skills of eff (resolved against cat) whose files are in reach, with
 * min_trust the trust floor (skills.minTrustLevel). Returns 0 and fills
 * *out (free with skilldirs_free; valid while cat is), or -1 on ENOMEM
 * with *out empty. */
int skilldirs_build(const struct catalog *cat, const struct effective *eff,
		    enum trust min_trust, struct skilldirs *out);

void skilldirs_free(struct skilldirs *d);

/* Where the tools see the directory of skill s: "/skills/<name>" for a
 * skill of d, "/skills/<parent>/skills/<sub>" for a directory inside one
 * (the longest match wins). A new string; NULL with errno ENOENT when no
 * skill of d holds it, or ENOMEM. */
char *skilldirs_base(const struct skilldirs *d, const struct skill *s);

#endif
