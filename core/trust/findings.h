/* findings: prompt-injection markers in a skill's text (issue 19). The
 * markers are a table, core/trust/injection_patterns.def; each has a level:
 * HIGH makes the skill invalid (D1, fail closed) unless skills.acknowledged
 * names it, LOW is a warning. */
#ifndef SKILLFS_FINDINGS_H
#define SKILLFS_FINDINGS_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"

enum finding_level { FINDING_LOW = 0, FINDING_HIGH = 1 };

/* At most this many findings are kept per file (the rest are counted). */
#define FINDINGS_PER_FILE_MAX 32

/* One marker found: in which line of its file, and which table entry. */
struct finding {
	unsigned line; /* 1-based */
	unsigned rule; /* index into the table (findings_rule_*) */
};

/* The table, compiled (regcomp). Shared by the threads that scan: regexec
 * on one compiled pattern is safe from several threads. */
struct findings_rules;

/* Compiles the table. Returns NULL on ENOMEM, or when an entry does not
 * compile (a mistake in the table: *err says which; caller frees; NULL on
 * ENOMEM). */
struct findings_rules *findings_rules_new(char **err);
/* Frees the compiled table. NULL is ignored. */
void findings_rules_free(struct findings_rules *r);

/* How many entries the table has. */
size_t findings_rule_count(void);
/* Entry i's id ("ignore-instructions"), level and reason (static). */
const char *findings_rule_id(size_t i);
enum finding_level findings_rule_level(size_t i);
const char *findings_rule_reason(size_t i);

/* "high" or "low". */
const char *finding_level_name(enum finding_level l);

/* Scans one file's text (len bytes; a leading UTF-8 BOM is skipped, CRLF
 * read as LF): each LINE entry against each line, each COMMENT entry
 * against each HTML comment. Sets *out (malloc'd; NULL when nothing was
 * found) and *n to what it finds, by line then table order, one per line
 * and entry, at most FINDINGS_PER_FILE_MAX; *more to the count of those
 * left out. Returns 0, or -1 on ENOMEM (nothing set). O(len x entries). */
int findings_scan(const struct findings_rules *r, const char *text, size_t len,
		  struct finding **out, size_t *n, size_t *more);

/* Whether the bytes look like text worth scanning: no NUL byte in the
 * first 8 KiB. */
bool findings_is_text(const char *data, size_t len);

/* Appends one line "<file>:<line>: <level>: <id>: <reason>\n". Returns 0
 * or -1 on ENOMEM. */
int finding_format(struct buf *out, const char *file, const struct finding *f);

#endif
