/* claude: a configuration's allow-list as Claude Code permission settings
 * (configs/<cfg>/claude/settings.json and warnings, `skillfs check
 * --claude`). The set is the gate skills' grants as R2-R4, D1 and D3
 * resolve them, but against every built-in tool rather than the registered
 * and available ones (those say what skillfs can run, nothing about Claude
 * Code), then capped by a tool ceiling when one is given. It is written
 * fail closed, through the one table of claudetools.h:
 * - a declared list: "allow" holds exactly the mapped grants, "deny" every
 *   tool of the table granted not at all, "defaultMode" is "dontAsk" (a
 *   call no rule allows is refused, never asked);
 * - policy all (no skill declares allowed-tools): every mapped tool is
 *   allowed, nothing denied, no defaultMode, and a warning says the skills
 *   express no restriction;
 * - the tools that only load text or keep notes (Skill, TodoWrite, ...)
 *   are allowed under both.
 * A grant that cannot be written with the same meaning (python, terminal,
 * learn_skill; a pattern Claude Code would read otherwise) is left out and
 * named in the warnings, never widened. */
#ifndef SKILLFS_CLAUDE_H
#define SKILLFS_CLAUDE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "grants.h"
#include "skill.h"
#include "strlist.h"

/* The directory under configs/<cfg>/ and the names in it. */
#define CLAUDE_DIR_NAME "claude"
#define CLAUDE_SKILLS_NAME "skills"

struct claude_permissions {
	bool restricted;         /* a declared list: defaultMode dontAsk */
	struct strlist allow;    /* rules ("Read", "Bash(git diff:*)"), sorted, unique */
	struct strlist deny;     /* tool names, sorted, unique */
	struct strlist warnings; /* what could not be expressed, one line each */
};

/* Writes g as Claude Code permissions into *out, as described above. A tool
 * granted with and without a pattern is allowed whole (D3); a command
 * pattern becomes `Bash(WORDS:*)`, a domain pattern `WebFetch(domain:H)`
 * (and `WebFetch(domain:*.H)` for a host name, as skillfs admits its
 * subdomains too); a tool none of whose patterns can be written is denied.
 * Returns 0, or -1 on ENOMEM (*out empty). */
int claude_permissions_from_grants(const struct grants *g, struct claude_permissions *out);

/* Resolves the gate skills (as grants_resolve takes them) against every
 * built-in tool (config_builtin_tools), caps that by the configuration's
 * tool ceiling (its allowed-tools items, grants_cap against the same
 * tools; NULL: no ceiling), then claude_permissions_from_grants.
 * Returns 0, or -1 on ENOMEM (*out empty). */
int claude_permissions_resolve(const struct skill *const *gate, size_t n,
			       const struct strlist *ceiling,
			       struct claude_permissions *out);

/* The settings file's object: {"permissions": {"allow": [...], "deny":
 * [...], "defaultMode": "dontAsk"}} (no defaultMode when not restricted).
 * Returns a new reference, or NULL on ENOMEM. */
json_t *claude_settings_json(const struct claude_permissions *p);

/* Frees everything and leaves p empty. */
void claude_permissions_free(struct claude_permissions *p);

/* The generated files of configs/<cfg>/claude/, in sorted order (its
 * skills/ directory is the gate view's). */
enum claude_file_id {
	CLAUDE_SETTINGS_JSON = 0, /* claude_settings_json, indented, newline-ended */
	CLAUDE_WARNINGS,          /* p->warnings, one per line */
	CLAUDE_NFILES
};

extern const char *const claude_file_names[CLAUDE_NFILES];

struct claude_files {
	char *text[CLAUDE_NFILES]; /* NUL-terminated; "" when empty */
	size_t len[CLAUDE_NFILES];
};

/* Renders the texts of p's files into *out (caller frees with
 * claude_files_free). Returns 0, or -1 on ENOMEM (*out empty). */
int claude_files_render(const struct claude_permissions *p, struct claude_files *out);

/* The text of a file by its name ("settings.json", "warnings"), with its
 * length in *len (may be NULL); NULL for any other name. */
const char *claude_file(const struct claude_files *f, const char *name, size_t *len);

/* Frees the texts and leaves f empty. */
void claude_files_free(struct claude_files *f);

#endif
