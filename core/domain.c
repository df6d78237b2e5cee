/* domain: host names of WebFetch(domain:HOST) grants and of URLs (see
 * domain.h). */
#include "domain.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define HOST_MAX 253

/* Whether h (lower-case) is a host this module can compare: a name of
 * [a-z0-9_-] labels separated by single dots (one trailing dot allowed),
 * or an IPv6 literal in brackets. An IPv4 address is such a name. */
static bool host_ok(const char *h)
{
	size_t n = strlen(h);
	if (n == 0 || n > HOST_MAX + 2)
		return false;
	if (h[0] == '[') {
		if (n < 4 || h[n - 1] != ']')
			return false;
		for (size_t i = 1; i + 1 < n; i++)
			if (!isxdigit((unsigned char)h[i]) && h[i] != ':' && h[i] != '.')
				return false;
		return true;
	}
	if (h[n - 1] == '.')
		n--;
	if (n == 0 || h[0] == '.')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = h[i];
		if (c == '.') {
			if (h[i + 1] == '.')
				return false;
		} else if (!(c >= 'a' && c <= 'z') && !(c >= '0' && c <= '9') &&
			   c != '-' && c != '_') {
			return false;
		}
	}
	return true;
}

static void lower(char *s)
{
	for (; *s; s++)
		*s = (char)tolower((unsigned char)*s);
}

/* The host part of a domain pattern: "example.com" (sub false) or, for
 * "*.example.com", "example.com" with sub true; a new string, or NULL
 * when the pattern is not valid (*why says why; NULL on ENOMEM). */
static char *pattern_host(const char *pattern, bool *sub, char **why)
{
	*why = NULL;
	*sub = false;
	const char *example = "expected domain:HOST, e.g. WebFetch(domain:example.com)";
	/* "domain:*" reads as the words "domain" then ":*" (any words). */
	bool bare = pattern && strcasecmp(pattern, "domain") == 0;
	if (!pattern || (!bare && strncasecmp(pattern, DOMAIN_PATTERN_PREFIX,
					      strlen(DOMAIN_PATTERN_PREFIX)) != 0)) {
		if (asprintf(why, "not a domain pattern: %s", example) < 0)
			*why = NULL;
		return NULL;
	}
	const char *p = bare ? "" : pattern + strlen(DOMAIN_PATTERN_PREFIX);
	while (*p == ' ' || *p == '\t')
		p++;
	size_t n = strlen(p);
	while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
		n--;
	if (n >= 2 && p[0] == '*' && p[1] == '.') {
		*sub = true;
		p += 2;
		n -= 2;
	}
	char *h = strndup(p, n);
	if (!h)
		return NULL;
	lower(h);
	if (n == 0 || !host_ok(h)) {
		if (asprintf(why, n == 0 ? "empty domain pattern (WebFetch without a "
					   "pattern admits any host): %s"
					 : "not a host name in the domain pattern: %s",
			     example) < 0)
			*why = NULL;
		free(h);
		return NULL;
	}
	size_t l = strlen(h);
	if (l > 1 && h[l - 1] == '.')
		h[l - 1] = '\0';
	return h;
}

int domain_pattern_check(const char *pattern, char **why)
{
	bool sub;
	char *h = pattern_host(pattern, &sub, why);
	free(h);
	return h ? 0 : -1;
}

/* Whether h is an address literal (IPv4 digits and dots, or [IPv6]):
 * it has no subdomains. */
static bool is_address(const char *h)
{
	return h[0] == '[' || strspn(h, "0123456789.") == strlen(h);
}

/* Whether host (without a trailing dot) is base or, when strict, only, a
 * subdomain of it. */
static bool under(const char *host, const char *base, bool strict)
{
	size_t hl = strlen(host), bl = strlen(base);
	if (hl == bl)
		return !strict && strcmp(host, base) == 0;
	return !is_address(host) && !is_address(base) && hl > bl &&
	       host[hl - bl - 1] == '.' && strcmp(host + hl - bl, base) == 0;
}

bool domain_pattern_admits(const char *pattern, const char *host)
{
	if (!host)
		return false;
	bool sub;
	char *why = NULL;
	char *base = pattern_host(pattern, &sub, &why);
	free(why);
	char *h = strdup(host);
	bool ok = false;
	if (base && h) {
		lower(h);
		size_t l = strlen(h);
		if (l > 1 && h[l - 1] == '.')
			h[l - 1] = '\0';
		ok = host_ok(h) && under(h, base, sub);
	}
	free(h);
	free(base);
	return ok;
}

bool domain_pattern_covers(const char *outer, const char *inner)
{
	bool osub, isub;
	char *why = NULL;
	char *o = pattern_host(outer, &osub, &why);
	free(why);
	why = NULL;
	char *i = pattern_host(inner, &isub, &why);
	free(why);
	bool ok = false;
	if (o && i) {
		/* inner's hosts: i and below (or below only); within outer's
		 * when i lies under o, or equals o with both "below only". */
		ok = under(i, o, osub) || (osub && isub && strcmp(i, o) == 0);
	}
	free(o);
	free(i);
	return ok;
}

int domain_url_parse(const char *url, CURLU **u, char **host, char **why)
{
	*host = NULL;
	*why = NULL;
	if (u)
		*u = NULL;
	CURLU *h = curl_url();
	char *scheme = NULL, *name = NULL;
	int rc = -1;
	if (!h)
		return -1;
	CURLUcode uc = curl_url_set(h, CURLUPART_URL, url, 0);
	if (uc == CURLUE_OUT_OF_MEMORY)
		goto out;
	if (uc != CURLUE_OK) {
		if (asprintf(why, "not an absolute http or https URL (%s)",
			     curl_url_strerror(uc)) < 0)
			*why = NULL;
		goto out;
	}
	uc = curl_url_get(h, CURLUPART_SCHEME, &scheme, 0);
	if (uc == CURLUE_OUT_OF_MEMORY)
		goto out;
	if (!scheme || (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0)) {
		if (asprintf(why, "only http and https URLs can be fetched, not %.32s:",
			     scheme ? scheme : "this scheme") < 0)
			*why = NULL;
		goto out;
	}
	uc = curl_url_get(h, CURLUPART_HOST, &name, 0);
	if (uc == CURLUE_OUT_OF_MEMORY)
		goto out;
	if (!name || !*name) {
		*why = strdup("the URL has no host");
		goto out;
	}
	*host = strdup(name);
	if (!*host)
		goto out;
	lower(*host);
	if (!host_ok(*host)) {
		if (asprintf(why, "the host name '%.200s' is not plain ASCII letters, "
			     "digits, '-' and '.' (write an international name in "
			     "its xn-- form)", name) < 0)
			*why = NULL;
		free(*host);
		*host = NULL;
		goto out;
	}
	rc = 0;
	if (u) {
		*u = h;
		h = NULL;
	}
out:
	curl_free(scheme);
	curl_free(name);
	curl_url_cleanup(h);
	return rc;
}
