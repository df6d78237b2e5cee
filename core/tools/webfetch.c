/* webfetch: GET or HEAD over http and https (see webfetch.h). */
#include "webfetch.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "clock.h"
#include "config.h"
#include "domain.h"
#include "tool.h"
#include "webtext.h"

/* ---- addresses ---- */

/* Why IPv4 address a (host order) is not public, or NULL. */
static const char *v4_class(uint32_t a)
{
	static const struct {
		uint32_t net, mask;
		const char *why;
	} nets[] = {
		{0x00000000, 0xFF000000, "unspecified"},     /* 0/8 "this network" */
		{0x0A000000, 0xFF000000, "private"},         /* 10/8 */
		{0x64400000, 0xFFC00000, "shared (CGNAT)"},  /* 100.64/10 */
		{0x7F000000, 0xFF000000, "loopback"},        /* 127/8 */
		{0xA9FE0000, 0xFFFF0000, "link-local"},      /* 169.254/16 */
		{0xAC100000, 0xFFF00000, "private"},         /* 172.16/12 */
		{0xC0000000, 0xFFFFFF00, "reserved"},        /* 192.0.0/24 */
		{0xC0A80000, 0xFFFF0000, "private"},         /* 192.168/16 */
		{0xC6120000, 0xFFFE0000, "reserved"},        /* 198.18/15 */
		{0xE0000000, 0xF0000000, "multicast"},       /* 224/4 */
		{0xF0000000, 0xF0000000, "reserved"},        /* 240/4, broadcast */
	};
	for (size_t i = 0; i < sizeof nets / sizeof nets[0]; i++)
		if ((a & nets[i].mask) == nets[i].net)
			return nets[i].why;
	return NULL;
}

static uint32_t v4_at(const uint8_t *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

static const char *v6_class(const uint8_t *b)
{
	static const uint8_t zero[16] = {0};
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
	static const uint8_t nat64[12] = {0, 0x64, 0xFF, 0x9B};
	if (memcmp(b, zero, 15) == 0)
		return b[15] == 1 ? "loopback" : b[15] == 0 ? "unspecified"
							  : "reserved";
	if (memcmp(b, mapped, 12) == 0 || memcmp(b, zero, 12) == 0 ||
	    memcmp(b, nat64, 12) == 0)
		return v4_class(v4_at(b + 12)); /* ::ffff:a.b.c.d, ::a.b.c.d */
	if (b[0] == 0x20 && b[1] == 0x02)
		return v4_class(v4_at(b + 2)); /* 6to4 */
	if (b[0] == 0xFF)
		return "multicast";
	if ((b[0] & 0xFE) == 0xFC)
		return "unique local"; /* fc00::/7 */
	if (b[0] == 0xFE && (b[1] & 0xC0) == 0x80)
		return "link-local"; /* fe80::/10 */
	if (b[0] == 0xFE && (b[1] & 0xC0) == 0xC0)
		return "private"; /* fec0::/10, the old site-local */
	return NULL;
}

const char *webfetch_address_class(const struct sockaddr *sa, socklen_t len)
{
	if (sa && sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		return v4_class(ntohl(in->sin_addr.s_addr));
	}
	if (sa && sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		return v6_class(in6->sin6_addr.s6_addr);
	}
	return "not an internet address";
}

/* ---- the fetch ---- */

struct fetch {
	const struct webfetch_request *rq;
	CURL *h;
	struct buf body;
	struct buf headers;  /* of the latest response */
	uint64_t max_download;
	uint64_t got;        /* body bytes received (stored or not) */
	bool started;        /* the first body bytes were seen */
	bool store;          /* keep the body (a text type, not a redirect) */
	bool redirect;       /* the response is a redirect */
	bool has_location;   /* the latest response has a Location header */
	bool cut;            /* stopped at max_download */
	bool done_early;     /* stopped on purpose: a summary needs no more */
	bool oom;
	char refused[256];   /* the first address refused, and why */
};

static curl_socket_t open_socket(void *arg, curlsocktype purpose,
				 struct curl_sockaddr *a)
{
	struct fetch *f = arg;
	const struct sockaddr *sa = &a->addr;
	const char *why = NULL;
	if (purpose != CURLSOCKTYPE_IPCXN)
		why = "not an outgoing connection";
	else if (a->family != AF_INET && a->family != AF_INET6)
		why = "not an internet address";
	else if (f->rq->refuse)
		why = f->rq->refuse(sa, a->addrlen, f->rq->refuse_arg);
	else if (!f->rq->allow_private)
		why = webfetch_address_class(sa, a->addrlen);
	if (!why)
		return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
	if (!f->refused[0]) {
		char ip[INET6_ADDRSTRLEN] = "?";
		if (a->family == AF_INET)
			inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, ip, sizeof ip);
		else if (a->family == AF_INET6)
			inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, ip,
				  sizeof ip);
		snprintf(f->refused, sizeof f->refused, "%s (%s address)", ip, why);
	}
	return CURL_SOCKET_BAD;
}

static bool is_redirect(long status)
{
	return status == 301 || status == 302 || status == 303 || status == 307 ||
	       status == 308;
}

static size_t on_body(char *p, size_t size, size_t nmemb, void *arg)
{
	struct fetch *f = arg;
	size_t n = size * nmemb;
	if (!f->started) {
		f->started = true;
		long status = 0;
		char *ct = NULL;
		curl_off_t cl = -1;
		curl_easy_getinfo(f->h, CURLINFO_RESPONSE_CODE, &status);
		curl_easy_getinfo(f->h, CURLINFO_CONTENT_TYPE, &ct);
		curl_easy_getinfo(f->h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl);
		/* A redirect's body is dropped but read to its end: libcurl
		 * gives the Location only after a complete transfer. */
		f->redirect = is_redirect(status) && f->has_location;
		f->store = !f->redirect && (!ct || webtext_type_is_text(ct));
		if (!f->store && !f->redirect && cl >= 0) {
			f->done_early = true; /* the summary has its size */
			return 0;
		}
	}
	size_t take = n;
	if (f->got + n > f->max_download) {
		take = (size_t)(f->max_download - f->got);
		f->cut = true;
	}
	if (f->store && buf_append(&f->body, p, take) < 0) {
		f->oom = true;
		return 0;
	}
	f->got += take;
	return take == n ? n : 0;
}

/* Keeps the header lines of the latest response, as "Name: value\n". */
static size_t on_header(char *p, size_t size, size_t nmemb, void *arg)
{
	struct fetch *f = arg;
	size_t n = size * nmemb, len = n;
	if (n >= 5 && strncmp(p, "HTTP/", 5) == 0) {
		buf_free(&f->headers); /* a new response (1xx, then the final) */
		f->has_location = false;
		return n;
	}
	if (n >= 9 && strncasecmp(p, "location:", 9) == 0)
		f->has_location = true;
	while (len && (p[len - 1] == '\n' || p[len - 1] == '\r'))
		len--;
	if (len == 0 || f->headers.len + len > 64 * 1024)
		return n; /* the blank line, or enough headers to show */
	if (buf_append(&f->headers, p, len) < 0 || buf_puts(&f->headers, "\n") < 0) {
		f->oom = true;
		return 0;
	}
	return n;
}

static int on_progress(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	(void)dt, (void)dn, (void)ut, (void)un;
	struct fetch *f = arg;
	return f->rq->cancel && f->rq->cancel(f->rq->cancel_arg) ? 1 : 0;
}

/* Whether host is admitted by the request's domain patterns. */
static bool host_admitted(const struct webfetch_request *rq, const char *host)
{
	if (!rq->domains)
		return true;
	for (size_t i = 0; i < rq->domains->n; i++)
		if (domain_pattern_admits(rq->domains->items[i], host))
			return true;
	return false;
}

/* The domain patterns as "WebFetch(domain:a), WebFetch(domain:b)". */
static void put_domains(struct call *c, const struct strlist *d)
{
	for (size_t i = 0; i < d->n && i < 8; i++)
		tool_put(c, "%sWebFetch(%s)", i ? ", " : "", d->items[i]);
	if (d->n > 8)
		tool_put(c, ", ...");
	if (d->n == 0)
		tool_put(c, "no host");
}

static int setup_handle(struct fetch *f, char *errbuf)
{
	CURL *h = f->h;
	if (curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https") != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_PROXY, "") != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_NOPROXY, "*") != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_NETRC, (long)CURL_NETRC_IGNORED) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, open_socket) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_OPENSOCKETDATA, f) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_WRITEDATA, f) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_HEADERDATA, f) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_XFERINFODATA, f) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_USERAGENT, "skillfs/" SKILLFS_VERSION
			     " (webfetch)") != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_NOBODY, f->rq->head ? 1L : 0L) != CURLE_OK)
		return -1;
	return 0;
}

/* The result of the final response: status line, then text or summary. */
static void put_result(struct call *c, struct fetch *f, long status, const char *url)
{
	const struct webfetch_request *rq = f->rq;
	tool_put(c, "HTTP %ld %s\n", status, url);
	if (status >= 400)
		c->is_error = true;
	if (rq->head) {
		tool_put_bytes(c, f->headers.data ? f->headers.data : "", f->headers.len);
		return;
	}
	char *ct = NULL;
	curl_off_t cl = -1;
	curl_easy_getinfo(f->h, CURLINFO_CONTENT_TYPE, &ct);
	curl_easy_getinfo(f->h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl);
	char type[128];
	webtext_media_type(ct, type, sizeof type);
	bool is_text = ct ? webtext_type_is_text(ct)
			  : f->body.len == 0 || tool_is_text(f->body.data, f->body.len);
	if (!is_text || !f->store) {
		if (f->cut && cl < 0)
			tool_put(c, "[binary content: %s, more than %llu bytes; not shown]",
				 type[0] ? type : "unknown type", (unsigned long long)f->got);
		else
			tool_put(c, "[binary content: %s, %llu bytes; not shown]",
				 type[0] ? type : "unknown type",
				 (unsigned long long)(cl >= 0 ? (uint64_t)cl : f->got));
		return;
	}
	struct buf text = {0};
	char unknown[64];
	int known = webtext_decode(ct, f->body.data ? f->body.data : "", f->body.len, &text,
				   unknown, sizeof unknown);
	if (known < 0) {
		c->oom = true;
		goto out;
	}
	const struct buf *t = &text;
	size_t max_text = rq->max_text ? (size_t)rq->max_text : CONFIG_DEFAULT_WEBFETCH_TEXT;
	size_t shown = t->len;
	if (shown > max_text) {
		shown = max_text;
		/* Not in the middle of a character. */
		while (shown > 0 && ((unsigned char)t->data[shown] & 0xC0) == 0x80)
			shown--;
	}
	if (shown)
		tool_put_bytes(c, t->data, shown);
	else if (t->len == 0)
		tool_put(c, "[no text]");
	if (shown && t->data[shown - 1] != '\n')
		tool_put(c, "\n");
	if (known == 1)
		tool_put(c, "[charset '%s' is unknown here: bytes that are not UTF-8 "
			 "were replaced]\n", unknown);
	if (shown < t->len)
		tool_put(c, "[truncated: %zu bytes of %zu shown; tools.webfetch.max_text]\n",
			 shown, t->len);
	if (f->cut) {
		if (cl >= 0)
			tool_put(c, "[truncated: %llu bytes of %lld downloaded; "
				 "tools.webfetch.max_download]\n",
				 (unsigned long long)f->got, (long long)cl);
		else
			tool_put(c, "[truncated: %llu bytes of a longer response downloaded; "
				 "tools.webfetch.max_download]\n",
				 (unsigned long long)f->got);
	}
out:
	buf_free(&text);
}

static void fail_timeout(struct call *c, int timeout)
{
	if (timeout % 1000 == 0)
		tool_fail(c, "timed out after %d s (tools.limits.webfetch.timeout)",
			  timeout / 1000);
	else
		tool_fail(c, "timed out after %d ms", timeout);
}

void webfetch_fetch(struct call *c, const struct webfetch_request *rq)
{
	struct fetch f = {.rq = rq};
	f.max_download = rq->max_download ? rq->max_download
					  : CONFIG_DEFAULT_WEBFETCH_DOWNLOAD;
	int timeout = rq->timeout_ms > 0 ? rq->timeout_ms : TOOLS_DEFAULT_TIMEOUT_MS;
	int64_t deadline = clock_ms() + timeout;
	char errbuf[CURL_ERROR_SIZE];
	char *url = strdup(rq->url ? rq->url : "");
	char *prev = NULL;
	CURLU *u = NULL;
	struct curl_slist *accept = NULL;
	f.h = curl_easy_init();
	accept = curl_slist_append(NULL, "Accept: text/html, text/plain;q=0.9, "
				   "application/json;q=0.9, */*;q=0.5");
	if (!url || !f.h || !accept || setup_handle(&f, errbuf) < 0 ||
	    curl_easy_setopt(f.h, CURLOPT_HTTPHEADER, accept) != CURLE_OK) {
		c->oom = true;
		goto out;
	}
	for (int hop = 0;; hop++) {
		char *host = NULL, *why = NULL;
		CURLU *next = NULL;
		if (domain_url_parse(url, &next, &host, &why) < 0) {
			if (!why)
				c->oom = true;
			else if (prev)
				tool_fail(c, "the redirect from %s to %.2000s is refused: %s",
					  prev, url, why);
			else
				tool_fail(c, "%s", why);
			free(why);
			goto out;
		}
		if (!host_admitted(rq, host)) {
			if (prev)
				tool_fail(c, "the redirect from %s to %.2000s is refused: the "
					  "host '%s' is not admitted by this run's grant (", prev,
					  url, host);
			else
				tool_fail(c, "the host '%s' is not admitted by this run's grant (",
					  host);
			put_domains(c, rq->domains);
			tool_put(c, ")");
			free(host);
			curl_url_cleanup(next);
			goto out;
		}
		free(host);
		int64_t left = deadline - clock_ms();
		if (curl_easy_setopt(f.h, CURLOPT_CURLU, next) != CURLE_OK) {
			curl_url_cleanup(next);
			c->oom = true;
			goto out;
		}
		curl_url_cleanup(u);
		u = next;
		if (left <= 0) {
			fail_timeout(c, timeout);
			goto out;
		}
		if (curl_easy_setopt(f.h, CURLOPT_TIMEOUT_MS, (long)left) != CURLE_OK) {
			c->oom = true;
			goto out;
		}
		buf_free(&f.body);
		buf_free(&f.headers);
		f.got = 0;
		f.started = f.store = f.redirect = f.has_location = false;
		f.cut = f.done_early = false;
		f.refused[0] = '\0';
		errbuf[0] = '\0';
		CURLcode rc = curl_easy_perform(f.h);
		if (f.oom) {
			c->oom = true;
			goto out;
		}
		if (rc == CURLE_WRITE_ERROR && (f.cut || f.done_early))
			rc = CURLE_OK;
		if (rc == CURLE_ABORTED_BY_CALLBACK) {
			tool_fail(c, "cancelled");
			goto out;
		}
		if (rc == CURLE_OPERATION_TIMEDOUT) {
			fail_timeout(c, timeout);
			goto out;
		}
		if (rc != CURLE_OK && f.refused[0]) {
			tool_fail(c, "refused to connect to %s for %.2000s: private, loopback "
				  "and link-local addresses are not fetched unless "
				  "tools.webfetch.allow_private is true", f.refused, url);
			goto out;
		}
		if (rc != CURLE_OK) {
			tool_fail(c, "%.2000s: %s%s%s", url, curl_easy_strerror(rc),
				  errbuf[0] ? ": " : "", errbuf);
			goto out;
		}
		if (f.redirect && f.cut) {
			tool_fail(c, "the redirect from %.2000s has a body of more than %llu "
				  "bytes (tools.webfetch.max_download)", url,
				  (unsigned long long)f.max_download);
			goto out;
		}
		long status = 0;
		char *location = NULL;
		curl_easy_getinfo(f.h, CURLINFO_RESPONSE_CODE, &status);
		if (is_redirect(status))
			curl_easy_getinfo(f.h, CURLINFO_REDIRECT_URL, &location);
		if (!location) {
			/* The URL fetched, as libcurl wrote it for the request. */
			char *fetched = NULL;
			CURLUcode uc = curl_url_get(u, CURLUPART_URL, &fetched, 0);
			if (uc == CURLUE_OUT_OF_MEMORY)
				c->oom = true;
			else
				put_result(c, &f, status, fetched ? fetched : url);
			curl_free(fetched);
			goto out;
		}
		if (hop == WEBFETCH_MAX_REDIRECTS) {
			tool_fail(c, "more than %d redirects (the last to %.2000s)",
				  WEBFETCH_MAX_REDIRECTS, location);
			goto out;
		}
		if (strlen(location) > WEBFETCH_MAX_URL) {
			tool_fail(c, "the redirect from %.2000s goes to a URL longer than %d "
				  "bytes", url, WEBFETCH_MAX_URL);
			goto out;
		}
		free(prev);
		prev = url;
		url = strdup(location);
		if (!url) {
			c->oom = true;
			goto out;
		}
	}
out:
	if (f.h)
		curl_easy_cleanup(f.h);
	curl_url_cleanup(u);
	curl_slist_free_all(accept);
	buf_free(&f.body);
	buf_free(&f.headers);
	free(url);
	free(prev);
}

/* ---- the tool ---- */

void tool_webfetch(struct call *c, json_t *args)
{
	const char *url, *method = "GET";
	size_t len;
	if (!tool_arg_string(c, args, "url", true, false, &url, &len))
		return;
	if (!tool_arg_string(c, args, "method", false, false, &method, NULL) && c->is_error)
		return;
	if (strcasecmp(method, "GET") != 0 && strcasecmp(method, "HEAD") != 0) {
		tool_fail(c, "argument 'method' must be \"GET\" or \"HEAD\"");
		return;
	}
	if (len > WEBFETCH_MAX_URL) {
		tool_fail(c, "the URL is longer than %d bytes", WEBFETCH_MAX_URL);
		return;
	}
	const struct webfetch_config *w = c->ctx->webfetch;
	struct webfetch_request rq = {
		.url = url,
		.head = strcasecmp(method, "HEAD") == 0,
		.allow_private = w && w->allow_private,
		.max_text = w ? w->max_text : 0,
		.max_download = w ? w->max_download : 0,
		.timeout_ms = c->ctx->timeout_ms,
		.domains = c->ctx->domains,
		.cancel = c->ctx->cancel,
		.cancel_arg = c->ctx->cancel_arg,
	};
	webfetch_fetch(c, &rq);
}
