/* mode: how an action skill executes (DESIGN.md R10) and which tools a
 * sub-agent running it gets (R13, D5). */
#ifndef SKILLFS_MODE_H
#define SKILLFS_MODE_H

#include <stdbool.h>

#include "buf.h"
#include "config.h"
#include "grants.h"
#include "skill.h"
#include "strlist.h"

struct mode_info {
	enum exec_mode mode;
	const char *reason;  /* static text: "has sub-skills",
	                        "front-matter inline: true", "execution_mode inline" */
	const char *warning; /* static text, or NULL */
};

/* Whether a skill has sub-skills: directory sub-skills, or a front-matter
 * sub-skills: list (declared, even if a name does not resolve). */
bool mode_has_sub_skills(const struct skill *s);

/* R10: sub-skills force a sub-agent (an inline: true beside them is ignored
 * with a warning); else inline: true runs inline; else the global mode. */
struct mode_info mode_decide(const struct skill *s, enum exec_mode global);

/* R13 and D5: the tools a sub-agent running s gets, in order, unique and
 * lower-case: the skill's tools: list when declared (even []), else bash,
 * read, edit, write, webfetch, plus python when have_python; never
 * run_skill, terminal or learn_skill; only registered tools; and, when
 * allow is not NULL (a run context), only tools on that allow-list. An
 * invalid skill gets nothing. A tools: item with a command pattern never
 * widens its text (D3): the sub-agent's calls are checked against allow
 * only, so Bash(ls:*) gives bash only when allow restricts bash to
 * patterns within ls (never with allow NULL or unrestricted); an empty
 * pattern (Bash(), Bash(*)), one that cannot be split, and a pattern on a
 * tool without pattern semantics give nothing. Appends to *out; returns 0
 * or -1 (ENOMEM). */
int mode_subagent_tools(const struct skill *s, const struct strlist *registered,
			bool have_python, const struct grants *allow,
			struct strlist *out);

/* The text of skills/<name>/mode: "inline" or "subagent", then the reason,
 * then "tools: ..." (the sub-agent tools, no run context; "tools: (none)"
 * when empty), then "warning: ..." when there is one; each line ends with a
 * newline. Returns 0 or -1. */
int mode_render(const struct config *c, const struct skill *s, bool have_python,
		struct buf *out);

#endif
