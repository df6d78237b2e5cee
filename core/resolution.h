/* resolution: everything one configuration resolves to (DESIGN.md sections
 * 3, 4 and 8): effective skills -> allow-list -> prompt, with the texts of
 * the files under configs/<cfg>/ rendered once. Immutable once built. */
#ifndef SKILLFS_RESOLUTION_H
#define SKILLFS_RESOLUTION_H

#include <stdbool.h>
#include <stddef.h>

#include "catalog.h"
#include "claude.h"
#include "config.h"
#include "effective.h"
#include "grants.h"
#include "prompt.h"
#include "strlist.h"

/* The files under configs/<cfg>/, in sorted (strcmp) order. (The
 * directory configs/<cfg>/skills/, the gate view, is the view's.) */
enum resolution_file_id {
	RES_ALLOWED_TOOLS = 0, /* one tool per line; "bash(git diff:*)" when patterned */
	RES_ATTACHMENTS,       /* "<name> <state> <reason>" per attachment */
	RES_AVAILABLE_SKILLS,  /* the <available_skills> section */
	RES_EFFECTIVE,         /* effective skills, one per line */
	RES_GRANTS_JSON,       /* grants_to_json plus "configuration" */
	RES_SKILL_BLOCK,       /* the framed knowledge-skill block */
	RES_SYSTEM_PROMPT,     /* base + skill block + available skills */
	RES_WARNINGS,          /* every warning, one per line */
	RES_NFILES
};

extern const char *const resolution_file_names[RES_NFILES];

struct resolution {
	int refs; /* atomic: resolution_ref, resolution_free */
	char *config_name;
	struct effective eff;
	struct grants grants; /* the allow-list resolved now (R6 stores a copy) */
	/* The same skills' grants as Claude Code settings (claude.h), and the
	 * files of configs/<cfg>/claude/ rendered from them. */
	struct claude_permissions claude;
	struct claude_files claude_files;
	struct prompt prompt;
	struct strlist warnings;
	/* Each NUL-terminated, "" when empty; skill-block and system-prompt
	 * are NULL when the prompt could not be assembled (prompt.error). */
	char *text[RES_NFILES];
	size_t len[RES_NFILES];
	/* The catalogue indexes of the effective skills, ascending and each
	 * once: in name order, as the catalogue is sorted by name. */
	size_t *eff_sorted;
	size_t neff_sorted;
};

/* Resolves cfg (with the forced skill names, may be NULL when nforced is 0)
 * against c and cat: effective skills (R1), the allow-list over the gate
 * skills (R2-R4, D1, D3), then the prompt (section 4, R9) under that list,
 * and the same skills' grants as Claude Code settings (claude.h).
 * Every text ends with a newline when it is not empty. A knowledge skill
 * whose body cannot be read leaves prompt.error set and the skill-block
 * and system-prompt texts NULL. Returns NULL with errno ENOMEM, or EINVAL
 * when c or cfg is NULL. O(n log n) in skills. */
struct resolution *resolution_build(const struct config *c,
				    const struct catalog *cat,
				    const struct configuration *cfg,
				    const char *const *forced, size_t nforced);

/* The text of a file by its name under configs/<cfg>/ (e.g.
 * "allowed-tools"), with its length in *len (may be NULL); NULL with errno
 * ENOENT for an unknown name, or prompt.error (ESTALE...) for a text that
 * could not be assembled. */
const char *resolution_file(const struct resolution *r, const char *name,
			    size_t *len);

/* Whether catalogue entry ci is an effective skill of r. O(log n). */
bool resolution_is_effective(const struct resolution *r, size_t ci);

/* Takes a reference and returns r (a snapshot shares an unchanged one
 * with the next). */
struct resolution *resolution_ref(struct resolution *r);

/* Whether r, resolved over cat, shows anything of a skill named in names
 * (sorted): an attachment or effective skill of that name, or a sub-skill
 * one of them refers to. O(r's skills log names). */
bool resolution_touches(const struct resolution *r, const struct catalog *cat,
			const struct strlist *names);

/* Drops a reference; the last frees r and everything it holds. NULL is
 * ignored. */
void resolution_free(struct resolution *r);

#endif
