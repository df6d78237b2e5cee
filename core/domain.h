/* domain: the hosts a `WebFetch(domain:HOST)` grant admits (DESIGN.md D3)
 * and the host of a URL as libcurl reads it, so that the host a grant is
 * checked against is the host webfetch connects to. */
#ifndef SKILLFS_DOMAIN_H
#define SKILLFS_DOMAIN_H

#include <curl/curl.h>
#include <stdbool.h>

/* The prefix of a domain pattern: "domain:example.com". */
#define DOMAIN_PATTERN_PREFIX "domain:"

/* Whether pattern is a domain pattern: "domain:HOST" where HOST is a host
 * name of ASCII letters, digits, '-', '_' and dots (optionally led by "*.",
 * which admits the subdomains only), or an IPv4 address, or an IPv6
 * address in brackets. Returns 0, or -1 with *why saying what is wrong
 * (caller frees), or -1 with *why NULL on ENOMEM. */
int domain_pattern_check(const char *pattern, char **why);

/* Whether host (lower-case, as domain_url_parse gives it) is admitted by
 * pattern: it equals HOST or is a subdomain of it ("docs.example.com" and
 * "example.com" for domain:example.com, never "evilexample.com"); one
 * trailing dot is ignored on either side. "*.HOST" admits the subdomains
 * only. A pattern domain_pattern_check refuses admits nothing. */
bool domain_pattern_admits(const char *pattern, const char *host);

/* Whether every host inner admits is admitted by outer too (both must be
 * valid domain patterns). */
bool domain_pattern_covers(const char *outer, const char *inner);

/* Parses an absolute http or https URL with libcurl's URL parser. Returns 0
 * with *host its lower-cased host (an IPv6 address in brackets; caller
 * frees) and, when u is not NULL, *u the parsed URL (caller frees with
 * curl_url_cleanup); or -1 with *why saying why the URL is refused (not a
 * URL, another scheme, a host that is not plain ASCII: caller frees), or
 * -1 with *why NULL on ENOMEM. */
int domain_url_parse(const char *url, CURLU **u, char **host, char **why);

#endif
