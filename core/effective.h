/* effective: which attached and forced skills take part in a run
 * (DESIGN.md R1, R4, D1). */
#ifndef SKILLFS_EFFECTIVE_H
#define SKILLFS_EFFECTIVE_H

#include <stdbool.h>
#include <stddef.h>

#include "catalog.h"
#include "config.h"

/* Checked in this order; the first that applies is the state. */
enum eff_state {
	EFF_EFFECTIVE = 0,
	EFF_DUPLICATE,   /* the same name was listed earlier */
	EFF_ORPHANED,    /* not in the catalogue */
	EFF_DISABLED,    /* skills.disabled, or the attachment has enabled: false */
	EFF_BELOW_TRUST, /* trust below skills.minTrustLevel */
	EFF_INVALID,     /* SKILL.md could not be parsed (D1) */
};

struct eff_item {
	char *name;
	bool forced;         /* forced on the run, not attached */
	enum eff_state state;
	char *reason;        /* "attached", "trust community < floor verified",
	                        the parse error of an invalid skill, ... */
	long index;          /* catalogue index, -1 when orphaned */
};

struct effective {
	struct eff_item *items; /* attachments, then forced skills, as listed */
	size_t n;
	size_t *eff;            /* catalogue indexes of the effective skills, in order */
	size_t neff;
	/* The skills that gate tools: effective ones plus invalid ones that were
	 * otherwise eligible (D1: they count as declaring []), in order. */
	size_t *gate;
	size_t ngate;
};

/* The state's word as shown in configs/<cfg>/attachments ("below-trust", ...). */
const char *eff_state_name(enum eff_state s);

/* R1 over a configuration (attach_all: every catalogue skill in name order)
 * followed by the forced skill names (may be NULL when nforced is 0).
 * Global disabling reads both the catalogue flag and c->disabled. Returns 0
 * and fills *out (free with effective_free), or -1 on ENOMEM with *out
 * empty. O(n log n). */
int effective_resolve(const struct config *c, const struct catalog *cat,
		      const struct configuration *cfg,
		      const char *const *forced, size_t nforced,
		      struct effective *out);

/* Frees everything and leaves e empty. NULL is ignored. */
void effective_free(struct effective *e);

#endif
