/* skill: one parsed SKILL.md (DESIGN.md section 2, D1, D3).
 *
 * A skill is immutable once loaded and reference counted, so catalogue
 * snapshots can share unchanged skills. Parsing never fails on bad input:
 * a broken file yields a skill with valid == false, an error message, and
 * an allowed-tools declaration of [] (D1). Only allocation failure returns
 * NULL. */
#ifndef SKILLFS_SKILL_H
#define SKILLFS_SKILL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include "claudetools.h"
#include "strlist.h"

#define SKILL_NAME_MAX 64
/* The Agent Skills format's limit on a description, in characters: a
 * longer one is kept whole, with a warning. */
#define SKILL_DESCRIPTION_MAX 1024
#define SKILL_DEFAULT_FRONTMATTER_MAX (8 * 1024)
#define SKILL_DEFAULT_FILE_MAX (256 * 1024)

/* Bounds on the parsed front-matter, whatever its size: nesting depth,
 * nodes after alias expansion, and scalar bytes added by aliases. A
 * front-matter beyond them is invalid (D1). */
#define SKILL_YAML_MAX_DEPTH 64
#define SKILL_YAML_MAX_NODES 10000
#define SKILL_YAML_MAX_ALIAS_BYTES (1024 * 1024)

struct skill_limits {
	size_t frontmatter_max; /* bytes of front-matter text; 0 = default */
	size_t file_max;        /* bytes of the whole SKILL.md; 0 = default */
};

enum skill_category { SKILL_ACTION = 0, SKILL_KNOWLEDGE = 1 };

/* One item of an allowed-tools (or tools) declaration. Parentheses always
 * restrict: "Bash(*)", "Bash(:*)" and "Bash()" give pattern "", never NULL,
 * and an empty pattern grants nothing (D3). A trailing ":*" or "*" and the
 * blanks before it are dropped ("Bash(ls *)" gives "ls"). A malformed item
 * such as "Bash(git" keeps its whole text as tool, so it matches no
 * registered tool. */
struct tool_grant {
	char *tool;    /* lower-cased tool name, e.g. "bash" */
	char *pattern; /* "git diff" for Bash(git diff:*), or NULL = unrestricted */
	char *raw;     /* the item as written, e.g. "Bash(git diff:*)" */
};

/* The tri-state allowed-tools declaration: absent (declared == false),
 * declared-empty (declared, n == 0), or a list. */
struct tool_decl {
	bool declared;
	struct tool_grant *items;
	size_t n;
};

struct skill {
	int refs; /* atomic; use skill_ref / skill_unref */

	/* (name may be dir_name itself, and dir shares its block: skill.c
	 * frees them) */
	char *name;     /* front-matter name, else the directory name */
	char *dir_name; /* the directory's own name */
	char *dir;      /* absolute path of the skill directory */
	char *parent;   /* for a directory sub-skill: the parent's name; else NULL */

	bool valid;      /* false: parse error (D1) */
	char *error;     /* why invalid; NULL when valid */
	struct strlist warnings;

	/* Understood front-matter keys; NULL / defaults when absent. The
	 * values of metadata and arguments (any JSON) are the front-matter's
	 * own (skill_frontmatter). */
	char *description;
	char *license;
	char *compatibility;
	struct tool_decl allowed_tools; /* D3; invalid skills: declared, n == 0 */
	struct tool_decl tools;         /* sub-agent tools (R13), same forms */
	int inline_flag;                /* -1 absent, 0 false, 1 true */
	struct strlist sub_skill_refs;  /* front-matter sub-skills: names */
	enum skill_category category;
	bool disable_model_invocation; /* default false */
	bool user_invocable;           /* default true */

	/* The file: its size in bytes (0 when there is none), and the size
	 * of its body as skill_read_text gives it (0 for an invalid skill).
	 * The text itself is not kept for a skill loaded from a file (the
	 * page cache keeps it): skill_read_text reads it again. */
	size_t file_size;
	size_t body_len;

	/* Private to skill.c; use skill_read_text and skill_frontmatter. */
	char *text;           /* skill_parse's copy of the bytes (NUL-ended),
	                         or NULL: loaded from a file (or none kept) */
	bool text_read;       /* the bytes were read and parsed (false: over
	                         the size limit or unreadable) */
	size_t body_off;      /* where the body begins in them */
	uint64_t text_hash;   /* of the bytes (text_hash_of in skill.c) */
	char *frontmatter_json; /* every front-matter key as compact JSON
	                           (unknown kept), or NULL: none */

	/* Directory sub-skills (<dir>/skills/<sub>/SKILL.md), sorted by name. */
	struct skill **subs;
	size_t nsubs;

	/* Identity of SKILL.md when loaded, to detect changes cheaply, and
	 * its mode (the mount shows its owner-exec bit); 0 when not loaded. */
	mode_t st_mode;
	dev_t st_dev;
	ino_t st_ino;
	off_t st_size;
	struct timespec st_mtim;
	struct timespec st_ctim;
};

/* Parses SKILL.md bytes. dir_name is the directory name (used when there is
 * no usable front-matter name and for the mismatch warning); dir may be
 * NULL. lim may be NULL (defaults). Never fails on bad input; returns NULL
 * only when out of memory. The returned skill has refs == 1 and no
 * directory sub-skills. A front-matter holding a key twice in one mapping
 * (at the top or nested, such as in metadata) is invalid, its error naming
 * the key and the line of its second occurrence; allowed-tools beside
 * allowed_tools is not a duplicate (allowed-tools is used). An invalid
 * skill (D1) is named after dir_name and has body "", no front-matter
 * and no front-matter fields. The skill keeps a copy of the bytes for
 * skill_read_text, unless they are over file_max (not copied: its text
 * reads as -ENODATA). A front-matter name that is empty,
 * over 64 bytes, "." or "..", or holds '/' or a control character is not
 * used (warning); other rule breaks keep the name with a warning. A skill
 * that takes dir_name gets the same checks: an unusable dir_name makes the
 * skill invalid (a warning when it already is) and skill_name_unusable()
 * non-NULL for its name, which callers must not list; a rule break is a
 * warning. */
struct skill *skill_parse(const char *dir_name, const char *dir,
			  const char *bytes, size_t len,
			  const struct skill_limits *lim);

/* The same skill made invalid (D1) for a reason found outside its
 * SKILL.md (a pinned source that does not match, an injection finding):
 * name, directories, the SKILL.md bytes (what skill_read_text reads) and
 * identity, warnings and directory sub-skills kept; error set to a copy
 * of error; no prose, no front-matter fields, allowed-tools declared [].
 * Returns NULL on ENOMEM. */
struct skill *skill_invalid_copy(const struct skill *s, const char *error);

/* What skill_read_text reads. */
enum skill_text {
	SKILL_TEXT_RAW,  /* SKILL.md byte for byte */
	SKILL_TEXT_BODY, /* the markdown body after the front-matter, BOM
	                    dropped, CRLF turned into LF; "" for an invalid
	                    skill (body_len bytes) */
};

/* The text of s's SKILL.md exactly as it was parsed, into *out (malloc'd,
 * NUL-terminated; the caller frees) and *len (may be NULL). A skill made by
 * skill_parse has its own copy; one loaded from a file (skill_load) reads
 * the file again, which must still be the one parsed: the same identity
 * (device, inode, size, mtime, ctime) and the same bytes, else -ESTALE (it
 * was changed or replaced since; the watcher reloads it). The body of an
 * invalid skill is "" and reads nothing. Returns 0, or a negative errno:
 * -ENODATA when the bytes were never read (over the size limit,
 * unreadable, or no file: serve the file itself, if any), -ESTALE,
 * -ENOMEM, or what reading the file failed with (-EIO, -EACCES...). */
int skill_read_text(const struct skill *s, enum skill_text what, char **out, size_t *len);

/* Every front-matter key of s as JSON (unknown ones kept, in the order
 * written) into *out, a new reference; NULL when s has no front-matter
 * (none in the file, or invalid). Returns 0, or -ENOMEM. */
int skill_frontmatter(const struct skill *s, json_t **out);

/* Loads <dir>/SKILL.md (O_NOFOLLOW-safe, size-limited) and, one level deep,
 * <dir>/skills/<sub>/SKILL.md as directory sub-skills. A missing or
 * unreadable file yields an invalid skill. Sub-skills have distinct, usable
 * names: one whose name cannot be used, or whose name a sub-skill earlier
 * in directory-name order already has, is not loaded, and the parent warns
 * naming it (and the one kept). Returns NULL only on ENOMEM. */
struct skill *skill_load(const char *dir, const struct skill_limits *lim);

/* What skill_load_md read of <dir>/SKILL.md, for a caller that reads the
 * skill's files too (the scan of its findings and digest): the file is
 * read once at start-up, not twice. */
struct skill_md {
	int open_errno; /* why SKILL.md could not be opened, or 0 */
	bool have_st;   /* st is what fstat said of the file opened */
	struct stat st;
	char *text;     /* the bytes parsed (malloc'd, len of them; read
	                   whole), or NULL: not read */
	size_t len;
};

/* skill_load, keeping in *md what it read of the top SKILL.md (md is
 * zeroed first; free it with skill_md_free). subs_dir false: the caller
 * read dir's entries and there is no skills/ among them, which is then
 * not looked for. NULL only on ENOMEM (md is then empty). */
struct skill *skill_load_md(const char *dir, const struct skill_limits *lim, bool subs_dir,
			    struct skill_md *md);

/* Frees what md holds and zeroes it. NULL is ignored. */
void skill_md_free(struct skill_md *md);

/* True when name obeys the Agent Skills name rules (1-64 of a-z 0-9 -, no
 * leading, trailing or double hyphen). */
bool skill_name_valid(const char *name);

/* Why name cannot serve as one path component and one line of a listing
 * (empty, over 64 bytes, "." or "..", a '/' or a control character), as a
 * short static phrase such as "it contains '/'"; NULL when it can. */
const char *skill_name_unusable(const char *name);

/* Untrusted text (a directory name, say) made fit for one line of a
 * message: single-quoted, control characters and bytes that are not UTF-8
 * as \xNN, cut after about 80 bytes. NULL text reads as "". Returns a new
 * string, or NULL on ENOMEM. */
char *skill_quote(const char *text);

/* Parses one allowed-tools item such as "Read" or "Bash(git diff:*)" into
 * g (lower-cased tool, mapped through tool_from_claude (claudetools.h)
 * when it is a Claude Code name for another skillfs tool, pattern or NULL,
 * raw copy). Returns 0, or -1 on ENOMEM. */
int tool_grant_parse(const char *item, struct tool_grant *g);

/* Whether s has a description that is not blank. A skill without one is
 * not listed in <available_skills> (prompt.h) and warns so. */
bool skill_has_description(const struct skill *s);

/* Whether the file identity stored in s still matches st (same inode, size,
 * mtime and ctime). */
bool skill_same_file(const struct skill *s, const struct stat *st);

/* Every parsed field of s as a JSON object (name, dir_name, valid, error,
 * warnings, description, license, compatibility, metadata, arguments,
 * allowed_tools (null when absent, else a list of {tool, pattern, raw}),
 * tools, inline, sub_skills, category, disable_model_invocation,
 * user_invocable, frontmatter, body_bytes, file_bytes, and the names of
 * directory sub-skills). The caller adds catalogue facts (source, trust).
 * Returns a new reference, or NULL on ENOMEM. */
json_t *skill_to_json(const struct skill *s);

/* "action" or "knowledge". */
const char *skill_category_name(enum skill_category c);

/* Takes a reference (atomically) and returns s. */
struct skill *skill_ref(struct skill *s);
/* Drops a reference; the last one frees s and its directory sub-skills.
 * NULL is ignored. */
void skill_unref(struct skill *s);

/* Frees the items of d and leaves it undeclared (declared == false). */
void tool_decl_free(struct tool_decl *d);

#endif
