/* grants: the tool allow-list of a run (DESIGN.md R2-R5, R7, R8, D1, D3,
 * D4). One pure resolver used by the mount, `skillfs check` and the run
 * engine, plus the execution-time check, the wait-time intersection and the
 * JSON form stored with a run. */
#ifndef SKILLFS_GRANTS_H
#define SKILLFS_GRANTS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "skill.h"
#include "strlist.h"

enum grants_policy {
	GRANTS_ALL = 0,  /* no skill declares allowed-tools: every registered tool */
	GRANTS_LIST = 1, /* the union of the declared lists */
};

/* One skill's contribution to a tool. */
struct grant_source {
	char *skill;
	char *pattern; /* NULL: granted without a pattern */
};

struct grant_tool {
	char *name;              /* the registered tool name (lower-case) */
	bool unrestricted;       /* any command; patterns is then empty */
	struct strlist patterns; /* command patterns (D3), sorted, unique */
	struct grant_source *by; /* which skills granted it (empty for policy all) */
	size_t nby;
};

/* A declared item that grants nothing. */
struct grant_drop {
	char *skill;
	char *item;   /* as written */
	char *reason; /* "not a registered tool", "tool takes no command pattern",
	                 "empty command pattern", "pattern cannot be split: ..." */
};

/* What a configuration's ceiling took from the list (grants_cap): item, a
 * line of the list before ("read", "bash(git push:*)"), and kept, the
 * lines of it that are left (empty: all of it went). */
struct grant_cut {
	char *item;
	struct strlist kept;
};

struct grants {
	enum grants_policy policy;
	struct grant_tool *tools; /* sorted by name; the allow-list */
	size_t n;
	struct strlist declaring; /* skills that declare allowed-tools, in order */
	struct grant_drop *dropped;
	size_t ndropped;
	struct strlist warnings;
	/* The configuration's tool ceiling, when one applied (grants_cap):
	 * its items as written, and what it took away, in list order. */
	bool capped;
	struct strlist ceiling;
	struct grant_cut *cut;
	size_t ncut;
};

/* Whether a tool's allowed-tools items may carry a pattern (D3): a command
 * pattern for bash and terminal, a domain pattern (domain.h) for webfetch. */
bool grants_tool_has_patterns(const char *tool);

/* The argument of a call that the tool's patterns are checked against:
 * "command" for bash and terminal, "url" for webfetch; NULL for a tool
 * without patterns. */
const char *grants_pattern_argument(const char *tool);

/* Resolves the allow-list of the gate skills (the effective skills plus the
 * invalid-but-otherwise-eligible ones, in order) against the registered
 * tools. An invalid skill always counts as declaring [] whatever its struct
 * says (D1). Tool names compare case-insensitively. A pattern on a tool
 * without pattern semantics grants nothing, nor does an empty pattern
 * (Bash(), Bash(:*), Bash(*)) or one grants_tool_pattern_check refuses
 * (for webfetch, anything but domain:HOST); an
 * unregistered name is dropped; each with a dropped entry and a warning
 * naming skill and item. A tool granted both with and without a pattern is
 * unrestricted. On success returns 0 and fills
 * *out (caller frees with grants_free); on ENOMEM returns -1 and *out is
 * empty. O(k log k) in the number of declared items. */
int grants_resolve(const struct strlist *registered,
		   const struct skill *const *skills, size_t n,
		   struct grants *out);

/* grants_resolve, told which tools are registered but cannot work here
 * (unavailable, with the reason at the same index of why; both may be
 * NULL): a skill granting one gets a warning that says why, e.g. "skill
 * 'x': allowed-tools item 'Bash' grants nothing here: 'bash' is not
 * available: bubblewrap ... not found". */
int grants_resolve_here(const struct strlist *registered,
			const struct strlist *unavailable, const struct strlist *why,
			const struct skill *const *skills, size_t n,
			struct grants *out);

/* The tool ceiling of a configuration (configurations.<cfg>.tools):
 * *out = g ∩ ceiling, a list (policy list) of what both admit, tool by
 * tool as grants_intersect meets them: a pattern of the ceiling narrows a
 * tool g grants without one (bash ∩ Bash(git diff:*) = bash(git diff:*)),
 * two patterns of a tool meet to the longer when the words of one begin
 * the words of the other, else to nothing, and a tool left with nothing
 * goes. With policy all (no skill declares) the ceiling is the list, as
 * far as its tools are registered. ceiling holds allowed-tools items
 * (tool_grant_parse: Claude Code names map, case does not matter); an item
 * that allows nothing (a tool that is not registered, a pattern on a tool
 * without patterns, an empty or unsplittable pattern) is left out with a
 * warning, which only narrows; an item naming a tool in unavailable (may
 * be NULL) is left out silently. *out keeps g's provenance, declaring,
 * dropped and warnings, records the ceiling (capped, ceiling) and each
 * line of g it took away or narrowed (cut). g is not changed. Returns 0,
 * or -1 on ENOMEM (*out empty). */
int grants_cap(const struct grants *g, const struct strlist *ceiling,
	       const struct strlist *registered, const struct strlist *unavailable,
	       struct grants *out);

/* The tool entry for a name (case-insensitive), or NULL when the tool is
 * not on the list. O(log n). */
const struct grant_tool *grants_find(const struct grants *g, const char *tool);

/* Whether the tool is offered at all (R5, first enforcement). */
bool grants_has(const struct grants *g, const char *tool);

/* Whether pattern can grant anything (D3): it is not empty (nor blanks
 * only) and cmdline_split accepts it. Returns 0, or -1 with *why saying
 * what is wrong ("empty command pattern", "pattern cannot be split: ...";
 * caller frees), or -1 with *why NULL on ENOMEM. */
int grants_pattern_check(const char *pattern, char **why);

/* grants_pattern_check for the patterns of tool: webfetch's must be
 * domain patterns (domain_pattern_check), the others command patterns. */
int grants_tool_pattern_check(const char *tool, const char *pattern, char **why);

/* Whether a command is admitted by a command pattern (D3): both split with
 * cmdline_split (a command or a pattern that cannot be split admits
 * nothing) and the command's words begin with the pattern's words, word
 * for word: "git diff" admits "git diff", "git diff --stat" and
 * "git diff 'a b'", never "git difftool" nor "git diff; id". An admitted
 * command runs without a shell: the bash tool executes its cmdline_split
 * argv directly. */
bool grants_pattern_matches(const char *pattern, const char *command);

/* Whether every command inner admits is admitted by outer too: the words
 * of outer begin the words of inner (both must split). */
bool grants_pattern_covers(const char *outer, const char *inner);

/* grants_pattern_covers for the patterns of tool: for webfetch, every host
 * inner admits is admitted by outer (domain_pattern_covers). */
bool grants_tool_pattern_covers(const char *tool, const char *outer,
				const char *inner);

/* The execution-time check (R5): the tool is on the list and, when it is
 * restricted to patterns, command (the call's grants_pattern_argument; may
 * be NULL: refused then) matches one of them (grants_pattern_matches; for
 * webfetch, the URL's host is admitted by one of its domain patterns,
 * domain_pattern_admits). Fails closed on a NULL g. */
bool grants_permits(const struct grants *g, const char *tool,
		    const char *command);

/* grants_permits for a command given as its words (argv, NULL-terminated;
 * NULL is refused when the tool is restricted), as the terminal tool takes
 * an array: the words must begin with the words of one of the tool's
 * patterns, compared exactly, with nothing split or joined. */
bool grants_permits_argv(const struct grants *g, const char *tool,
			 const char *const *argv);

/* R7/R8: *out = stored ∩ now. A NULL stored (a run written before lists
 * were stored) yields a copy of now. The result never holds a tool or a
 * pattern absent from either side: a tool narrowed to patterns on one side
 * stays narrowed; two patterns intersect word-wise, to the longer when the
 * words of one begin the words of the other ("git" ∩ "git diff" = "git
 * diff"; "git diff" ∩ "git difftool" = nothing), else to nothing; a tool left with no pattern and not
 * unrestricted is removed (with a warning). A NULL now yields an empty list
 * (fail closed). Returns 0, or -1 on ENOMEM. */
int grants_intersect(const struct grants *stored, const struct grants *now,
		     struct grants *out);

/* Deep copy. Returns 0, or -1 on ENOMEM (out empty). */
int grants_copy(const struct grants *src, struct grants *out);

/* Appends one list line for a tool and pattern: "bash",
 * "bash(git diff:*)" or "webfetch(domain:example.com)" (the same form as
 * skills/<name>/allowed-tools).
 * Returns 0 or -1. */
int grants_format_item(struct buf *out, const char *tool, const char *pattern);

/* Appends the allow-list, one line per tool or per tool pattern, sorted.
 * Nothing for an empty list. Returns 0 or -1. */
int grants_format_lines(const struct grants *g, struct buf *out);

/* The JSON form: {"policy": "all"|"list", "tools": [{"name", "unrestricted",
 * "patterns": [..], "granted_by": [{"skill", "pattern"}]}], "declaring":
 * [..], "dropped": [{"skill", "item", "reason"}], "warnings": [..],
 * "ceiling": null | {"tools": [items], "removed": [{"item", "kept": [..]}]}}.
 * Returns a new reference, or NULL on ENOMEM. */
json_t *grants_to_json(const struct grants *g);

/* Reads the JSON form back. Anything malformed is an error, never a wider
 * list: returns -1 with *err (caller frees; NULL on ENOMEM) and *out empty.
 * A caller must not treat a malformed stored list as absent (R8). */
int grants_from_json(const json_t *j, struct grants *out, char **err);

/* Frees everything and leaves g empty (policy all, no tools). */
void grants_free(struct grants *g);

#endif
