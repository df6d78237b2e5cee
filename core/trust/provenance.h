/* provenance: what a run saw of its skills when it was enqueued (issue 19),
 * so that "what did this run see?" has an answer after the skills have
 * changed. Stored with the run (store_run_enqueue_with) and shown in its
 * info.json. */
#ifndef SKILLFS_PROVENANCE_H
#define SKILLFS_PROVENANCE_H

#include <jansson.h>

#include "catalog.h"
#include "config.h"
#include "resolution.h"

/* {"ceiling": null | [the configuration's ceiling items], "skills": [{
 * "name", "source", "trust", "valid", "skill_md_sha256", "digest"}, ...]}
 * for each effective skill of r, in effective order: its source's path,
 * its trust level, the sha256 of its SKILL.md and the digest of its whole
 * directory (fingerprint.h), each "sha256:<hex>" (null when not known).
 * A new reference, or NULL on ENOMEM. */
json_t *provenance_of(const struct config *c, const struct catalog *cat,
		      const struct resolution *r);

#endif
