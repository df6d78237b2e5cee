/* audit: the audit trail of the catalogue (issue 19; DESIGN.md section 8,
 * the `audit` file). Every change the catalogue sees is one event, stored
 * in the state database (store.h) and shown as one JSON line of the audit
 * file: a skill added, changed (its old and new digest), removed, made
 * invalid or valid again, a pinned source matching or not, the config file
 * reloaded or refused. The trail remembers the catalogue as it last saw it,
 * so what changed while no skillfs ran is recorded at the next mount, and
 * what each pinned source held when it last matched (pins.h). Retention:
 * audit.keep lines (the oldest go at each mount, or past twice as many). */
#ifndef SKILLFS_AUDIT_H
#define SKILLFS_AUDIT_H

#include <jansson.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "engine.h"
#include "store.h"

struct audit;

/* Opens the trail of engine e's catalogue in store st (kept open by the
 * caller until audit_close): records what changed since the trail last
 * saw the catalogue, trims it to audit.keep, and from now on records each
 * reload of e (engine_set_reload_hook) and answers e's pinned sources'
 * history (engine_set_pin_history). Returns NULL with *err (caller frees). */
struct audit *audit_open(struct engine *e, struct store *st, char **err);

/* audit_open with the catch-up on a thread of its own, so that a mount
 * answers before it ends (at 50,000 skills it takes about half a second):
 * reloads wait for it (they are recorded after it, in order), and so do
 * reads of the audit file (audit_file_size, audit_file_read). A catch-up
 * that fails is said on stderr; the reloads after it are recorded still.
 * Returns NULL only on ENOMEM, with *err. */
struct audit *audit_start(struct engine *e, struct store *st, char **err);

/* Stops recording (e's hooks cleared, waiting for a reload in progress,
 * and a catch-up cut short) and frees a. NULL is ignored. */
void audit_close(struct audit *a);

/* The audit file: its size, and up to size of its bytes at off into dst
 * (the count, 0 at its end, or a negative errno); *mtime when it last
 * changed. Both wait for audit_start's catch-up (30 s at most). */
int audit_file_size(struct audit *a, uint64_t *size, struct timespec *mtime);
ssize_t audit_file_read(struct audit *a, uint64_t off, size_t size, char *dst);

/* The events between two states of one key of the trail ("skill:<name>"
 * or "source:<path>"; was or now NULL: absent), appended to events (an
 * array): skill_added, skill_removed, skill_changed (old_digest,
 * new_digest), skill_invalid (reason), skill_valid; source_pin_matched,
 * source_pin_mismatch (expected, actual, reason), source_unpinned.
 * Returns 0, or -1 on ENOMEM. */
int audit_diff(const char *key, const json_t *was, const json_t *now, json_t *events);

/* The events and the states to keep (an object, key to state or null)
 * from snapshot old to now: the config reloaded or refused, then each
 * pinned source and each skill whose entry changed (an entry of the very
 * same skill, scan and source is passed over: the cost follows the
 * change). Returns 0, or -1 on ENOMEM. */
int audit_changes(const struct snapshot *old, const struct snapshot *now, json_t *events,
		  json_t *states);

#endif
