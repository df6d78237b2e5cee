/* pins: sources pinned to a digest of their skills' files
 * (sources[].fingerprint, issue 19). While a pinned source does not match,
 * every skill in it is invalid (D1); what the warnings say names the
 * source, the expected and the actual digest, and the files that differ
 * from what the source held when it last matched (pin_history). */
#ifndef SKILLFS_PINS_H
#define SKILLFS_PINS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "fingerprint.h"
#include "scan.h"
#include "strlist.h"

/* What a pinned source held when it last matched (kept in the state
 * database by the audit trail). */
struct pin_history {
	/* Sets *lines (empty on entry) to the files of source when its digest
	 * was digest, as fp_lines_text made them: returns 1; 0 when none is
	 * recorded; -1 on ENOMEM. Called while a catalogue is built. */
	int (*last_match)(void *ctx, const char *source, const char *digest,
			  struct strlist *lines);
	void *ctx;
	/* Changes whenever last_match may answer otherwise (a database
	 * attached): a pin computed under another generation is computed
	 * again even when its files did not change. */
	uint64_t generation;
};

/* One skill of a source: its scan (may be NULL: not scanned, which never
 * matches) and its directory relative to the source ("" when the source
 * is that skill's directory). */
struct pin_part {
	struct skill_scan *scan;
	const char *prefix;
};

/* A pinned source's state, immutable once made, reference counted. */
struct source_pin {
	int refs;
	size_t source;                  /* index into the config's sources */
	char expected[FP_TEXT_SIZE];    /* sources[].fingerprint */
	char actual[FP_TEXT_SIZE];      /* the digest of its skills' files now */
	bool matched;                   /* equal, and every file was read */
	struct strlist lines;           /* the files actual is the digest of:
	                                   "<hex>  <path>", sorted by path */
	char *message;                  /* when not matched: why, with the
	                                   files that differ; else NULL */
	struct skill_scan **scans;      /* what it was made from (held) */
	size_t nscans;
	uint64_t generation;            /* the pin_history's when made */
};

/* The state of source src (index si, pinned: src->fingerprint set) whose
 * skills are parts (in the order found). When prev (the previous
 * catalogue's pin of the same source, or NULL) was made from the same
 * scans under the same history generation, it is returned again (a
 * reference): the cost follows the skills that changed. hist may be NULL
 * (no history: the message says so). Returns NULL on ENOMEM. */
struct source_pin *pin_check(const struct source *src, size_t si, const struct pin_part *parts,
			     size_t n, struct source_pin *prev, const struct pin_history *hist);

/* The digest of a source's skills' files (as pin_check computes it) into
 * out, and the files' lines into *lines when lines is not NULL; *complete
 * (may be NULL) is false when some file could not be read. Returns 0 or
 * -1 on ENOMEM. */
int pin_digest(const struct pin_part *parts, size_t n, char out[FP_TEXT_SIZE],
	       struct strlist *lines, bool *complete);

/* Takes a reference and returns p (NULL passes). */
struct source_pin *pin_ref(struct source_pin *p);
/* Drops one; the last frees p and the scans it holds. NULL is ignored. */
void pin_unref(struct source_pin *p);

#endif
