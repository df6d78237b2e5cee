#include "trust.h"

#include <string.h>

static const char *const trust_names[] = {
	[TRUST_UNTRUSTED] = "untrusted",
	[TRUST_COMMUNITY] = "community",
	[TRUST_VERIFIED] = "verified",
	[TRUST_FIRST_PARTY] = "first_party",
};

bool trust_parse(const char *s, enum trust *out)
{
	for (int i = TRUST_UNTRUSTED; i <= TRUST_FIRST_PARTY; i++) {
		if (s && strcmp(s, trust_names[i]) == 0) {
			*out = (enum trust)i;
			return true;
		}
	}
	*out = TRUST_UNTRUSTED;
	return false;
}

const char *trust_name(enum trust t)
{
	if (t < TRUST_UNTRUSTED || t > TRUST_FIRST_PARTY)
		return trust_names[TRUST_UNTRUSTED];
	return trust_names[t];
}
