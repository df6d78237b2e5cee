#include "pins.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"

/* At most this many paths of each kind are named in a message. */
#define PATHS_SHOWN 8

struct source_pin *pin_ref(struct source_pin *p)
{
	if (p)
		__atomic_add_fetch(&p->refs, 1, __ATOMIC_ACQ_REL);
	return p;
}

void pin_unref(struct source_pin *p)
{
	if (!p || __atomic_sub_fetch(&p->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	strlist_free(&p->lines);
	free(p->message);
	for (size_t i = 0; i < p->nscans; i++)
		scan_unref(p->scans[i]);
	free(p->scans);
	free(p);
}

int pin_digest(const struct pin_part *parts, size_t n, char out[FP_TEXT_SIZE],
	       struct strlist *lines, bool *complete)
{
	struct fp_line *v = NULL;
	size_t nv = 0;
	bool all = true;
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		if (!parts[i].scan || parts[i].scan->error)
			all = false;
		rc = scan_lines(parts[i].scan, parts[i].prefix, &v, &nv);
	}
	unsigned char d[FP_SIZE];
	if (rc == 0) {
		fp_digest_lines(v, nv, d);
		fp_format(d, out);
		if (lines)
			rc = fp_lines_text(v, nv, lines);
	}
	scan_lines_free(v, nv);
	if (complete)
		*complete = all;
	return rc;
}

/* Appends "; <what>: a, b, ... (and N more)" for a non-empty list. */
static int name_paths(struct buf *b, const char *what, const struct strlist *l)
{
	int rc = l->n ? buf_printf(b, "; %s: ", what) : 0;
	for (size_t i = 0; i < l->n && i < PATHS_SHOWN && rc == 0; i++)
		rc = buf_printf(b, "%s%s", i ? ", " : "", l->items[i]);
	if (rc == 0 && l->n > PATHS_SHOWN)
		rc = buf_printf(b, " (and %zu more)", l->n - PATHS_SHOWN);
	return rc;
}

/* The files of the source that could not be read, from its scans. */
static int name_unread(struct buf *b, const struct pin_part *parts, size_t n)
{
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		if (!parts[i].scan)
			rc = buf_printf(b, "; the files of %s were not read",
					parts[i].prefix[0] ? parts[i].prefix : ".");
		else if (parts[i].scan->error)
			rc = buf_printf(b, "; in %s: %s", parts[i].prefix[0] ? parts[i].prefix : ".",
					parts[i].scan->error);
	}
	return rc;
}

/* p->message for a source that does not match. */
static int mismatch_message(struct source_pin *p, const struct source *src,
			    const struct pin_part *parts, size_t n,
			    const struct pin_history *hist)
{
	struct buf b = { 0 };
	struct strlist was = { 0 }, changed = { 0 }, added = { 0 }, removed = { 0 };
	int rc = buf_printf(&b, "pinned source %s does not match its fingerprint: expected %s, "
			    "found %s", src->path, p->expected, p->actual);
	if (rc == 0)
		rc = name_unread(&b, parts, n);
	int known = rc == 0 && hist && hist->last_match
			    ? hist->last_match(hist->ctx, src->path, p->expected, &was)
			    : 0;
	if (known < 0)
		rc = -1;
	if (rc == 0 && known > 0) {
		rc = fp_lines_diff(&was, &p->lines, &changed, &added, &removed);
		if (rc == 0)
			rc = name_paths(&b, "changed since it last matched", &changed);
		if (rc == 0)
			rc = name_paths(&b, "added", &added);
		if (rc == 0)
			rc = name_paths(&b, "removed", &removed);
	} else if (rc == 0) {
		rc = buf_puts(&b, "; no earlier match of it is recorded to compare with");
	}
	if (rc == 0)
		rc = buf_puts(&b, "; every skill in it is invalid until it matches again "
			      "(review the change, then set sources[].fingerprint to what "
			      "`skillfs fingerprint` prints)");
	if (rc == 0)
		p->message = buf_steal(&b, NULL);
	buf_free(&b);
	strlist_free(&was);
	strlist_free(&changed);
	strlist_free(&added);
	strlist_free(&removed);
	return p->message ? 0 : -1;
}

/* Whether prev was made from exactly these scans. */
static bool same_scans(const struct source_pin *prev, const struct pin_part *parts, size_t n)
{
	if (prev->nscans != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (prev->scans[i] != parts[i].scan)
			return false;
	return true;
}

struct source_pin *pin_check(const struct source *src, size_t si, const struct pin_part *parts,
			     size_t n, struct source_pin *prev, const struct pin_history *hist)
{
	uint64_t gen = hist ? hist->generation : 0;
	if (prev && prev->source == si && prev->generation == gen &&
	    strcmp(prev->expected, src->fingerprint) == 0 && same_scans(prev, parts, n))
		return pin_ref(prev);
	struct source_pin *p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	p->refs = 1;
	p->source = si;
	p->generation = gen;
	snprintf(p->expected, sizeof p->expected, "%s", src->fingerprint);
	p->scans = calloc(n ? n : 1, sizeof *p->scans);
	bool complete = false;
	int rc = p->scans ? pin_digest(parts, n, p->actual, &p->lines, &complete) : -1;
	for (size_t i = 0; rc == 0 && i < n; i++)
		p->scans[p->nscans++] = scan_ref(parts[i].scan);
	p->matched = rc == 0 && complete && strcmp(p->actual, p->expected) == 0;
	if (rc == 0 && !p->matched)
		rc = mismatch_message(p, src, parts, n, hist);
	if (rc < 0) {
		pin_unref(p);
		return NULL;
	}
	return p;
}
