/* webfetch: a GET or HEAD of an http or https URL with libcurl, for the
 * model: redirects followed by hand (each hop's host checked against the
 * run's domain patterns), every connection's address checked after DNS
 * resolution (private, loopback, link-local... refused unless allowed),
 * the download, the text and the time capped, and the content turned into
 * text (webtext.h) or, for other types, summarised. It runs in the daemon, unsandboxed: it never touches
 * the local file system (http and https only, no proxy, netrc or cookie
 * file). The pieces are public for the tests. */
#ifndef SKILLFS_WEBFETCH_H
#define SKILLFS_WEBFETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "buf.h"
#include "strlist.h"

#define WEBFETCH_MAX_REDIRECTS 5
#define WEBFETCH_MAX_URL 8192

/* Why a connection to the address sa (AF_INET or AF_INET6, len bytes) is
 * refused while private addresses are not allowed: "loopback",
 * "private", "link-local", "unspecified", "multicast", "shared (CGNAT)",
 * "unique local", "reserved", "not an internet address"; NULL for an
 * address that is none of these. IPv6 forms that carry an IPv4 address
 * (IPv4-mapped ::ffff:a.b.c.d, IPv4-compatible ::a.b.c.d, NAT64
 * 64:ff9b::/96, 6to4 2002::/16) are judged by that IPv4 address. */
const char *webfetch_address_class(const struct sockaddr *sa, socklen_t len);

/* One fetch. */
struct webfetch_request {
	const char *url;
	bool head;             /* HEAD: the result is the response's headers */
	bool allow_private;    /* tools.webfetch.allow_private */
	uint64_t max_text;     /* 0: CONFIG_DEFAULT_WEBFETCH_TEXT */
	uint64_t max_download; /* 0: CONFIG_DEFAULT_WEBFETCH_DOWNLOAD */
	int timeout_ms;        /* the whole fetch, all hops */
	/* "domain:HOST" patterns every hop's host must match; NULL: any. */
	const struct strlist *domains;
	bool (*cancel)(void *arg); /* polled: true stops the transfer */
	void *cancel_arg;
	/* Tests only: when set, decides instead of webfetch_address_class
	 * and allow_private which addresses are refused (why, or NULL). */
	const char *(*refuse)(const struct sockaddr *sa, socklen_t len, void *arg);
	void *refuse_arg;
};

struct call;

/* Fetches rq->url into the call's result: "HTTP <status> <final url>",
 * then the text (or, for HEAD, the header lines), then a line for each
 * cap that cut it ("[truncated: N bytes of M shown; ...]"). A status of
 * 400 or more is an error result with the same text; a refused address,
 * host, scheme or redirect, a transport error, a timeout or too many
 * redirects are error results saying so. */
void webfetch_fetch(struct call *c, const struct webfetch_request *rq);

#endif
