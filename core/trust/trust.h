/* trust: the ordered trust levels of skill sources (DESIGN.md D2). */
#ifndef SKILLFS_TRUST_H
#define SKILLFS_TRUST_H

#include <stdbool.h>

enum trust {
	TRUST_UNTRUSTED = 0,
	TRUST_COMMUNITY = 1,
	TRUST_VERIFIED = 2,
	TRUST_FIRST_PARTY = 3,
};

/* Parses a level name ("untrusted", "community", "verified", "first_party").
 * Returns true and sets *out on a known name; false otherwise (*out is then
 * TRUST_UNTRUSTED, as D2 requires for unknown levels). */
bool trust_parse(const char *s, enum trust *out);
/* The canonical name of a level. */
const char *trust_name(enum trust t);

#endif
