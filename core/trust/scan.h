/* scan: what a skill's directory holds, file by file: each file's sha256
 * and its injection findings, and the digest of the whole directory
 * (issue 19; fingerprint.h says how the digest is made). A scan is made
 * when a skill is (re)loaded and reuses what an earlier scan of the same
 * directory found for every file whose identity (device, inode, size,
 * mtime, ctime) did not change, so its cost follows the files that
 * changed; a file changed within SCAN_RACY_NS before that scan began is
 * read again (two writes within one tick of the file system's clock leave
 * the same identity, as git's "racily clean" entries). Immutable once
 * made, reference counted.
 *
 * The files of a skill are the regular files below its directory, at any
 * depth (64 at most), hidden ones included, sub-skills' too, as the gate
 * view shows them; a symbolic link counts only when it names a regular
 * file inside the directory (as that file's bytes), and .git directories
 * are not entered. */
#ifndef SKILLFS_SCAN_H
#define SKILLFS_SCAN_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include "buf.h"
#include "findings.h"
#include "fingerprint.h"

#define SCAN_FILES_MAX 20000            /* files of one skill */
#define SCAN_DEPTH_MAX 64               /* directory levels below it */
#define SCAN_TEXT_MAX (4L * 1024 * 1024) /* bytes of a file scanned */
#define SCAN_RACY_NS 1000000000L          /* see above: one second */

struct scan_file {
	char *path;                  /* relative to the skill's directory */
	unsigned char sha[FP_SIZE];
	dev_t dev;                   /* identity when it was read */
	ino_t ino;
	off_t size;
	struct timespec mtime, ctime;
	bool scanned;                /* its text was scanned (false: binary,
	                                or over SCAN_TEXT_MAX) */
	struct finding *findings;    /* by line */
	size_t nfindings, more;      /* more: found beyond those kept */
};

struct skill_scan {
	int refs;
	struct scan_file *files;     /* sorted by path (strcmp) */
	size_t n;
	unsigned char digest[FP_SIZE]; /* of the directory's files */
	char *error;                 /* why the digest does not cover every
	                                file (one could not be read, a bound
	                                was reached), or NULL */
	size_t nhigh, nlow;          /* findings of each level, all files */
	struct timespec made;        /* when the walk began (CLOCK_REALTIME) */
};

/* The entries of a directory (not "." and ".."), each name with its type
 * as readdir gave it (d_type, DT_UNKNOWN where the file system gives
 * none), in readdir's order: a skill's directory is read once, for the
 * load (is SKILL.md there, what is it, is there a skills/) and the scan. */
struct scan_entry {
	char *name;
	unsigned char type;
};

struct scan_listing {
	struct scan_entry *v;
	size_t n, cap;
	int error; /* errno of the read that failed (v then incomplete), or 0 */
	bool cut;  /* more than SCAN_LISTING_MAX entries: v holds the first */
};

#define SCAN_LISTING_MAX 4096

/* Reads the entries of dir into *l (zeroed first; free with
 * scan_listing_free). 0, with l->error or l->cut set when l is not the
 * whole directory; -1 on ENOMEM (l is then empty). */
int scan_listing_read(const char *dir, struct scan_listing *l);
/* Whether l holds every entry of its directory (no error, not cut). */
bool scan_listing_whole(const struct scan_listing *l);
/* The entry called name, or NULL. O(n). */
const struct scan_entry *scan_listing_find(const struct scan_listing *l, const char *name);
/* Frees what l holds and zeroes it. */
void scan_listing_free(struct scan_listing *l);

/* What the caller has already read of the directory: a file it has read
 * whole (a skill's SKILL.md, read to be parsed): its path relative to the
 * directory, what fstat said of the descriptor read, and the bytes; and
 * the directory's own entries (top: a whole listing, else NULL: read). */
struct scan_given {
	const char *path;
	struct stat st;
	const char *text;
	size_t len;
	const struct scan_listing *top;
};

/* Scans directory dir with the compiled table rules, reusing what prev (a
 * scan of the same directory, or NULL) found for unchanged files, and
 * taking the file given (NULL: none) from the caller's bytes instead of
 * reading it again, when they are the whole of a regular file, and the
 * directory's entries from given->top when it is set. Returns a
 * new scan (refs 1), or NULL on ENOMEM. A file that cannot be read is
 * left out and named in error. */
struct skill_scan *scan_dir(const char *dir, const struct skill_scan *prev,
			    const struct findings_rules *rules, const struct scan_given *given);

/* Whether scans a and b found the same files: the same paths, each with
 * the same sha256 and identity (device, inode, size, mtime, ctime), and
 * the same error. */
bool scan_unchanged(const struct skill_scan *a, const struct skill_scan *b);

/* Takes a reference and returns s (NULL passes). */
struct skill_scan *scan_ref(struct skill_scan *s);
/* Drops one; the last frees s. NULL is ignored. */
void scan_unref(struct skill_scan *s);

/* The file of path (relative to the directory), or NULL. O(log n). */
const struct scan_file *scan_find(const struct skill_scan *s, const char *path);

/* The lines a digest of the files is made from, each path prefixed with
 * prefix and '/' (prefix "" or NULL: the paths as they are), appended to
 * *lines (realloc'd, *n entries; each path is a copy, freed with
 * scan_lines_free). Returns 0 or -1 on ENOMEM. */
int scan_lines(const struct skill_scan *s, const char *prefix, struct fp_line **lines,
	       size_t *n);
/* Frees lines made by scan_lines and their paths. */
void scan_lines_free(struct fp_line *lines, size_t n);

/* The findings file: one line per finding (finding_format), files in path
 * order, then "<file>: N more findings not shown" where some were left
 * out. Returns 0 or -1 on ENOMEM. */
int scan_findings_text(const struct skill_scan *s, struct buf *out);

/* The findings as a JSON array of {"file", "line", "level", "id",
 * "reason"}. NULL on ENOMEM. */
json_t *scan_findings_json(const struct skill_scan *s);

/* The first high finding as "<file>:<line>: <id>: <reason>" into out
 * (size bytes), for a message; false when there is none. */
bool scan_first_high(const struct skill_scan *s, char *out, size_t size);

#endif
