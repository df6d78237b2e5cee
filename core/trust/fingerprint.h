/* fingerprint: sha256 digests of files and of sets of files (issue 19:
 * pinned sources, run provenance, the audit trail).
 *
 * The digest of a set of files is the sha256 of the text made of one line
 * per file, "<sha256 of the file, 64 lower-case hex digits>  <path>\n"
 * (the line `sha256sum` prints), the lines sorted by path byte for byte;
 * it is written "sha256:<64 hex digits>". Paths are relative (to a skill's
 * directory, or to a source's), so the same tree copied elsewhere has the
 * same digest. Hashing is nettle's sha256. */
#ifndef SKILLFS_FINGERPRINT_H
#define SKILLFS_FINGERPRINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "strlist.h"

#define FP_SIZE 32                        /* bytes of a sha256 */
#define FP_HEX_SIZE (2 * FP_SIZE + 1)     /* 64 hex digits and a NUL */
#define FP_TEXT_SIZE (7 + FP_HEX_SIZE)    /* "sha256:", 64 digits, NUL */

/* One file of a set: its path (relative, borrowed or owned by whoever
 * made the array) and the sha256 of its bytes. */
struct fp_line {
	const char *path;
	unsigned char sha[FP_SIZE];
};

/* The sha256 of len bytes at data. */
void fp_sha256(const void *data, size_t len, unsigned char out[FP_SIZE]);

/* The sha256 of what is left to read of fd (read to its end), with the
 * first head_max of those bytes copied to head (may be NULL when head_max
 * is 0) and their count in *head_len (may be NULL). Returns 0, or a
 * negative errno from read(). */
int fp_sha256_fd(int fd, unsigned char out[FP_SIZE], char *head, size_t head_max,
		 size_t *head_len);

/* d as 64 lower-case hex digits, NUL-terminated. */
void fp_hex(const unsigned char d[FP_SIZE], char out[FP_HEX_SIZE]);

/* d as "sha256:<64 hex digits>", NUL-terminated. */
void fp_format(const unsigned char d[FP_SIZE], char out[FP_TEXT_SIZE]);

/* Sorts lines by path (strcmp) and sets out to the digest of the set (see
 * the top of this file); two lines of one path are both hashed. O(n log n). */
void fp_digest_lines(struct fp_line *lines, size_t n, unsigned char out[FP_SIZE]);

/* Appends the text fp_digest_lines hashes, one string per line without its
 * newline ("<hex>  <path>"), for lines already sorted by path. Returns 0
 * or -1 on ENOMEM. */
int fp_lines_text(const struct fp_line *lines, size_t n, struct strlist *out);

/* Which paths differ between two such texts (each sorted by path, as
 * fp_lines_text makes them): appends to changed, added (in now, not in
 * was) and removed (in was, not in now) the paths. Returns 0 or -1 on
 * ENOMEM. O(n + m). */
int fp_lines_diff(const struct strlist *was, const struct strlist *now, struct strlist *changed,
		  struct strlist *added, struct strlist *removed);

#endif
