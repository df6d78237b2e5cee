/* Tests for the webfetch tool (issue "Tools that do real work", item 3):
 * its argument checking, the address rule, the HTML-to-text reducer,
 * charsets, the domain patterns of WebFetch(domain:HOST), and fetches
 * from a loopback HTTP server the test starts (tests/webfetch_server.py):
 * a page's text, a redirect, refused addresses and hosts, the caps, the
 * summary of a binary type. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <curl/curl.h>

#include "buf.h"
#include "config.h"
#include "domain.h"
#include "strlist.h"
#include "tool.h"
#include "tools.h"
#include "tooltest.h"
#include "webfetch.h"
#include "webtext.h"

/* ---- helpers ---- */

static struct tool_result exec_json(const struct tool_ctx *ctx, const char *json)
{
	json_error_t jerr;
	json_t *args = json_loads(json, 0, &jerr);
	if (!args)
		fail_msg("bad test JSON: %s", jerr.text);
	struct tool_result r;
	assert_int_equal(tools_exec(ctx, "webfetch", args, &r), 0);
	assert_non_null(r.text);
	json_decref(args);
	return r;
}



static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	assert_non_null(d);
	int n = 0;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* ---- the address rule ---- */

static const char *classify(const char *ip)
{
	struct sockaddr_in in = {.sin_family = AF_INET};
	struct sockaddr_in6 in6 = {.sin6_family = AF_INET6};
	if (inet_pton(AF_INET, ip, &in.sin_addr) == 1)
		return webfetch_address_class((struct sockaddr *)&in, sizeof in);
	if (inet_pton(AF_INET6, ip, &in6.sin6_addr) == 1)
		return webfetch_address_class((struct sockaddr *)&in6, sizeof in6);
	fail_msg("bad test address %s", ip);
	return NULL;
}

static void test_address_classes(void **state)
{
	(void)state;
	static const struct {
		const char *ip, *why; /* why NULL: public */
	} cases[] = {
		{"0.0.0.0", "unspecified"},
		{"0.1.2.3", "unspecified"},
		{"10.0.0.1", "private"},
		{"10.255.255.255", "private"},
		{"100.64.0.1", "shared (CGNAT)"},
		{"100.127.255.255", "shared (CGNAT)"},
		{"100.128.0.1", NULL},
		{"100.63.255.255", NULL},
		{"127.0.0.1", "loopback"},
		{"127.255.0.9", "loopback"},
		{"169.254.169.254", "link-local"},
		{"172.16.0.1", "private"},
		{"172.31.255.254", "private"},
		{"172.32.0.1", NULL},
		{"172.15.255.255", NULL},
		{"192.168.1.1", "private"},
		{"192.169.0.1", NULL},
		{"192.0.0.8", "reserved"},
		{"198.18.0.1", "reserved"},
		{"224.0.0.1", "multicast"},
		{"239.255.255.250", "multicast"},
		{"240.0.0.1", "reserved"},
		{"255.255.255.255", "reserved"},
		{"8.8.8.8", NULL},
		{"93.184.216.34", NULL},
		{"1.1.1.1", NULL},
		{"::", "unspecified"},
		{"::1", "loopback"},
		{"::2", "reserved"},
		{"fe80::1", "link-local"},
		{"febf::1", "link-local"},
		{"fec0::1", "private"},
		{"fc00::1", "unique local"},
		{"fd12:3456::1", "unique local"},
		{"ff02::1", "multicast"},
		{"::ffff:127.0.0.1", "loopback"},
		{"::ffff:10.1.2.3", "private"},
		{"::ffff:169.254.1.1", "link-local"},
		{"::ffff:8.8.8.8", NULL},
		{"::127.0.0.1", "loopback"},
		{"64:ff9b::192.168.0.1", "private"},
		{"64:ff9b::8.8.8.8", NULL},
		{"2002:7f00:1::", "loopback"},
		{"2002:0808:0808::1", NULL},
		{"2001:4860:4860::8888", NULL},
		{"2606:4700::1111", NULL},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const char *got = classify(cases[i].ip);
		if (!cases[i].why && got)
			fail_msg("%s: expected public, got %s", cases[i].ip, got);
		if (cases[i].why && (!got || strcmp(got, cases[i].why) != 0))
			fail_msg("%s: expected %s, got %s", cases[i].ip, cases[i].why,
				 got ? got : "public");
	}
	struct sockaddr sa = {.sa_family = AF_UNIX};
	assert_string_equal(webfetch_address_class(&sa, sizeof sa), "not an internet address");
	struct sockaddr_in short_in = {.sin_family = AF_INET};
	assert_non_null(webfetch_address_class((struct sockaddr *)&short_in, 4));
}

/* ---- content types ---- */

static void test_text_types(void **state)
{
	(void)state;
	const char *text[] = {"text/html", "text/plain; charset=utf-8", "TEXT/CSV",
			      "application/json", "application/xml",
			      "application/javascript", "application/ld+json",
			      "image/svg+xml", "application/atom+xml; charset=x",
			      " text/markdown"};
	const char *binary[] = {"application/octet-stream", "image/png", "application/pdf",
				"text/", "application/jsonx", "+json", "video/mp4",
				"application/zip", ""};
	for (size_t i = 0; i < sizeof text / sizeof *text; i++)
		if (!webtext_type_is_text(text[i]))
			fail_msg("%s should be text", text[i]);
	for (size_t i = 0; i < sizeof binary / sizeof *binary; i++)
		if (webtext_type_is_text(binary[i]))
			fail_msg("%s should not be text", binary[i]);
}

/* ---- HTML to text ---- */

static void expect_html(const char *html, const char *want)
{
	struct buf out = {0};
	assert_int_equal(webtext_html(html, strlen(html), &out), 0);
	const char *got = out.data ? out.data : "";
	if (strcmp(got, want) != 0)
		fail_msg("HTML %s\n gave [%s]\n  not [%s]", html, got, want);
	buf_free(&out);
}

static void test_html_to_text(void **state)
{
	(void)state;
	expect_html("<html><head><title>T</title><style>p{}</style>"
		    "<script>var x = '<p>no</p>';</script></head>"
		    "<body><h1>Big  \n title</h1><p>Fish &amp; chips</p>"
		    "<ul><li>one</li><li>two</li></ul><div>a<br>b</div></body></html>",
		    "# Big title\n\nFish & chips\n\n- one\n- two\n\na\nb");
	/* Entities, named and numeric; unknown ones stay as written. */
	expect_html("&lt;a&gt; &quot;q&quot; it&#39;s &apos;x&apos; &#65;&#x42;&#X43;",
		    "<a> \"q\" it's 'x' ABC");
	expect_html("a&nbsp;b&#160;c &copy; &eacute;&Uuml; &hellip;&mdash;&euro;",
		    "a b c \xC2\xA9 \xC3\xA9\xC3\x9C \xE2\x80\xA6\xE2\x80\x94\xE2\x82\xAC");
	expect_html("AT&T &foo; &amp &#; &#x; & x", "AT&T &foo; &amp &#; &#x; & x");
	expect_html("&#0;|&#x110000;|&#xD800;|&#150;|&#9731", "\xEF\xBF\xBD|\xEF\xBF\xBD|"
		    "\xEF\xBF\xBD|\xE2\x80\x93|\xE2\x98\x83");
	/* Not tags: a lone '<', "< b"; tags with '>' inside quotes. */
	expect_html("a < b <3 <a title=\"x>y\" href='>'>link</a>!", "a < b <3 link!");
	/* Comments, doctype, processing instructions; unclosed comment. */
	expect_html("<!DOCTYPE html><?xml x?>one<!-- <p>two</p> -->three<!-- four",
		    "onethree");
	/* Upper case, end tags with blanks, a script that does not end early. */
	expect_html("<P>x</P ><SCRIPT>if (a</scripty) {}</SCRIPT >y<Style>z</STYLE>w",
		    "x\n\nyw");
	/* A head left open ends at the first body element. */
	expect_html("<html><head><meta charset=utf-8><title>t</title><p>body text",
		    "body text");
	expect_html("<head><link rel=x>hidden</head>shown", "shown");
	/* <pre> keeps its white space. */
	expect_html("<p>a   b</p><pre>  x\n    y</pre><p>c  d</p>",
		    "a b\n\n  x\n    y\n\nc d");
	/* Table cells, blank lines collapsed, leading and trailing space. */
	expect_html("  <table><tr><td>a</td><td>b</td></tr><tr><td>c</td></tr></table>"
		    "<p></p><p></p><p>  end  </p>  ",
		    "a b\nc\n\nend");
	/* Headings of each level, dropped elements. */
	expect_html("<h2>two</h2><h6>six</h6><noscript>js</noscript><template>t</template>x",
		    "## two\n\n###### six\n\nx");
	expect_html("", "");
	expect_html("<script>never closed", "");
	/* Bytes that are not markup pass through unchanged (UTF-8). */
	expect_html("<p>caf\xC3\xA9 \xE2\x98\x83</p>", "caf\xC3\xA9 \xE2\x98\x83");
}

/* ---- charsets ---- */

static void expect_utf8(const char *charset, const char *in, size_t n, int rc,
			const char *want)
{
	struct buf out = {0};
	assert_int_equal(webtext_to_utf8(charset, in, n, &out), rc);
	const char *got = out.data ? out.data : "";
	if (strlen(want) != out.len || memcmp(got, want, out.len) != 0)
		fail_msg("%s: got [%.*s], want [%s]", charset, (int)out.len, got, want);
	buf_free(&out);
}

static void test_charsets(void **state)
{
	(void)state;
	expect_utf8("utf-8", "caf\xC3\xA9", 5, 0, "caf\xC3\xA9");
	expect_utf8("UTF8", "x", 1, 0, "x");
	expect_utf8("ISO-8859-1", "caf\xE9", 4, 0, "caf\xC3\xA9");
	expect_utf8("latin1", "\xFF", 1, 0, "\xC3\xBF");
	/* windows-1252 and its superset reading of ISO-8859-1. */
	expect_utf8("windows-1252", "\x80\x93q\x94", 4, 0,
		    "\xE2\x82\xAC\xE2\x80\x9Cq\xE2\x80\x9D");
	expect_utf8("iso-8859-1", "\x80", 1, 0, "\xE2\x82\xAC");
	expect_utf8("us-ascii", "plain", 5, 0, "plain");
	/* Others through iconv; what it cannot convert becomes U+FFFD. */
	expect_utf8("ISO-8859-2", "\xB1\xE6", 2, 0, "\xC4\x85\xC4\x87");
	expect_utf8("ISO-8859-6", "a\xA1\xC7", 3, 0, "a\xEF\xBF\xBD\xD8\xA7");
	expect_utf8("UTF-16LE", "h\0i\0!", 5, 0, "hi\xEF\xBF\xBD");
	/* An unknown label: the bytes as they are, 1. */
	expect_utf8("x-no-such-charset", "a\xFF", 2, 1, "a\xFF");
}

static void expect_decoded(const char *ct, const char *in, size_t n, int rc,
			   const char *want, const char *unknown_want)
{
	struct buf out = {0};
	char unknown[64] = "x";
	if (n == SIZE_MAX)
		n = strlen(in);
	assert_int_equal(webtext_decode(ct, in, n, &out, unknown, sizeof unknown), rc);
	const char *got = out.data ? out.data : "";
	if (strlen(want) != out.len || memcmp(got, want, out.len) != 0)
		fail_msg("%s: got [%.*s], want [%s]", ct ? ct : "(no type)", (int)out.len, got,
			 want);
	assert_string_equal(unknown, unknown_want);
	buf_free(&out);
}

/* Where the charset comes from: the header, a byte order mark, the
 * document; else UTF-8 when valid, else windows-1252. */
static void test_decode_finds_the_charset(void **state)
{
	(void)state;
	expect_decoded("text/plain; charset=iso-8859-1", "\xE9", 1, 0, "\xC3\xA9", "");
	expect_decoded("text/plain; Charset = \"ISO-8859-2\"", "\xB1", 1, 0, "\xC4\x85", "");
	expect_decoded("text/plain", "\xEF\xBB\xBFhi", 5, 0, "hi", "");
	expect_decoded("text/plain; charset=iso-8859-1", "\xFF\xFEh\0i\0", 6, 0, "hi", "");
	expect_decoded("text/plain", "\xFE\xFF\0h\0i", 6, 0, "hi", "");
	expect_decoded("text/html", "<meta charset=\"iso-8859-2\"><p>\xB1</p>", SIZE_MAX, 0,
		       "\xC4\x85", "");
	expect_decoded("text/html",
		       "<meta http-equiv=Content-Type content='text/html; charset=windows-1252'>"
		       "<p>\x80</p>", SIZE_MAX, 0, "\xE2\x82\xAC", "");
	expect_decoded("application/xml",
		       "<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><a>\xE9</a>", SIZE_MAX, 0,
		       "<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><a>\xC3\xA9</a>", "");
	expect_decoded(NULL, "caf\xC3\xA9", 5, 0, "caf\xC3\xA9", "");
	expect_decoded(NULL, "caf\xE9", 4, 0, "caf\xC3\xA9", "");
	expect_decoded("text/plain; charset=x-nope", "a\xFF", 2, 1, "a\xFF", "x-nope");
	expect_decoded("application/xhtml+xml", "<p>a</p><p>b</p>", 16, 0, "a\n\nb", "");
}

/* ---- domain patterns ---- */

static void test_domain_pattern_check(void **state)
{
	(void)state;
	const char *good[] = {"domain:example.com", "domain:Example.COM", "domain:*.example.com",
			      "domain:localhost", "domain:127.0.0.1", "domain:[::1]",
			      "domain: example.com ", "domain:example.com.", "domain:a_b.example"};
	const char *bad[] = {"example.com", "domain:", "domain:*", "domain:exa mple.com",
			     "domain:a..b", "domain:*.*.x", "domain:http://x.com",
			     "domain:x.com/path", "git diff", "Domain", "domain:.x.com",
			     "domain:x.com:443", "domain:b\xC3\xBC" "cher.de", "url:x.com", ""};
	for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
		char *why = NULL;
		if (domain_pattern_check(good[i], &why) != 0)
			fail_msg("'%s' refused: %s", good[i], why ? why : "?");
	}
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		char *why = NULL;
		if (domain_pattern_check(bad[i], &why) == 0)
			fail_msg("'%s' accepted", bad[i]);
		assert_non_null(why);
		assert_non_null(strstr(why, "domain:HOST"));
		free(why);
	}
}

static void test_domain_pattern_admits(void **state)
{
	(void)state;
	static const struct {
		const char *pattern, *host;
		bool admits;
	} cases[] = {
		{"domain:example.com", "example.com", true},
		{"domain:example.com", "docs.example.com", true},
		{"domain:example.com", "a.b.example.com", true},
		{"domain:example.com", "EXAMPLE.com", true},
		{"domain:example.com", "example.com.", true},
		{"domain:example.com.", "docs.example.com", true},
		{"domain:Example.Com", "docs.example.com", true},
		{"domain:example.com", "evilexample.com", false},
		{"domain:example.com", "example.com.evil.org", false},
		{"domain:example.com", "xample.com", false},
		{"domain:example.com", "com", false},
		{"domain:example.com", "example.co", false},
		{"domain:example.com", "", false},
		{"domain:example.com", "docs.example.com/x", false},
		{"domain:*.example.com", "example.com", false},
		{"domain:*.example.com", "docs.example.com", true},
		{"domain:*.example.com", "a.docs.example.com", true},
		{"domain:127.0.0.1", "127.0.0.1", true},
		{"domain:0.0.1", "127.0.0.1", false},
		{"domain:[::1]", "[::1]", true},
		{"domain:localhost", "localhost", true},
		{"example.com", "example.com", false},
		{"domain:", "example.com", false},
		{"git diff", "git", false},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		if (domain_pattern_admits(cases[i].pattern, cases[i].host) != cases[i].admits)
			fail_msg("%s for '%s': expected %s", cases[i].pattern, cases[i].host,
				 cases[i].admits ? "admitted" : "refused");
	assert_false(domain_pattern_admits("domain:example.com", NULL));
}

static void test_domain_pattern_covers(void **state)
{
	(void)state;
	static const struct {
		const char *outer, *inner;
		bool covers;
	} cases[] = {
		{"domain:example.com", "domain:example.com", true},
		{"domain:example.com", "domain:docs.example.com", true},
		{"domain:docs.example.com", "domain:example.com", false},
		{"domain:example.com", "domain:*.example.com", true},
		{"domain:*.example.com", "domain:example.com", false},
		{"domain:*.example.com", "domain:docs.example.com", true},
		{"domain:*.example.com", "domain:*.example.com", true},
		{"domain:*.example.com", "domain:*.docs.example.com", true},
		{"domain:example.com", "domain:evilexample.com", false},
		{"domain:example.com", "git diff", false},
		{"git", "git diff", false},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		if (domain_pattern_covers(cases[i].outer, cases[i].inner) != cases[i].covers)
			fail_msg("%s covers %s: expected %d", cases[i].outer, cases[i].inner,
				 cases[i].covers);
}

static void test_domain_url_parse(void **state)
{
	(void)state;
	static const struct {
		const char *url, *host, *why; /* host NULL: refused, why a part */
	} cases[] = {
		{"http://Example.COM/x", "example.com", NULL},
		{"https://a.b:8443/p?q#f", "a.b", NULL},
		{"HTTP://x.org", "x.org", NULL},
		{"http://ex%61mple.com/", "example.com", NULL},
		{"http://user:pw@b.com/", "b.com", NULL},
		{"http://x.com#@y.com", "x.com", NULL},
		{"http://[::1]:80/", "[::1]", NULL},
		{"http://2130706433/", "127.0.0.1", NULL},
		{"ftp://x.org/", NULL, "only http and https"},
		{"file:///etc/passwd", NULL, "only http and https"},
		{"gopher://x/", NULL, "only http and https"},
		{"example.com", NULL, "not an absolute http or https URL"},
		{"http://exa mple.com/", NULL, "not an absolute http or https URL"},
		{"http://b\xC3\xBC" "cher.de/", NULL, "xn--"},
		{"", NULL, "not an absolute"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char *host = NULL, *why = NULL;
		CURLU *u = NULL;
		int rc = domain_url_parse(cases[i].url, &u, &host, &why);
		if (cases[i].host) {
			if (rc != 0)
				fail_msg("%s refused: %s", cases[i].url, why ? why : "?");
			assert_string_equal(host, cases[i].host);
			assert_non_null(u);
		} else {
			if (rc == 0)
				fail_msg("%s accepted as %s", cases[i].url, host);
			assert_null(u);
			assert_non_null(why);
			if (!strstr(why, cases[i].why))
				fail_msg("%s: '%s' not in '%s'", cases[i].url, cases[i].why, why);
		}
		curl_url_cleanup(u);
		free(host);
		free(why);
	}
}

/* ---- arguments (no network needed) ---- */

static void test_arguments(void **state)
{
	(void)state;
	struct tool_ctx ctx = {0};
	struct tool_result r = exec_json(&ctx, "{}");
	expect_error(&r, "webfetch: missing required argument 'url'");
	r = exec_json(&ctx, "{\"url\": 7}");
	expect_error(&r, "webfetch: argument 'url' must be a string");
	r = exec_json(&ctx, "{\"url\": \"http://x.invalid/\", \"method\": \"POST\"}");
	expect_error(&r, "webfetch: argument 'method' must be \"GET\" or \"HEAD\"");
	r = exec_json(&ctx, "{\"url\": \"http://x.invalid/\", \"method\": 1}");
	expect_error(&r, "webfetch: argument 'method' must be a string");
	r = exec_json(&ctx, "{\"url\": \"file:///etc/passwd\"}");
	expect_error(&r, "webfetch: only http and https URLs can be fetched, not file:");
	r = exec_json(&ctx, "{\"url\": \"ftp://x.invalid/\"}");
	expect_error_has(&r, "only http and https");
	r = exec_json(&ctx, "{\"url\": \"/etc/passwd\"}");
	expect_error_has(&r, "webfetch: not an absolute http or https URL");
	r = exec_json(&ctx, "{\"url\": \"http://b\\u00fccher.de/\"}");
	expect_error_has(&r, "xn--");
	struct buf big = {0};
	assert_int_equal(buf_puts(&big, "{\"url\": \"http://x.invalid/"), 0);
	for (int i = 0; i < WEBFETCH_MAX_URL; i++)
		assert_int_equal(buf_puts(&big, "a"), 0);
	assert_int_equal(buf_puts(&big, "\"}"), 0);
	r = exec_json(&ctx, big.data);
	expect_error(&r, "webfetch: the URL is longer than 8192 bytes");
	buf_free(&big);
	/* A host outside the grant's domains: refused before any connection. */
	struct strlist domains = {0};
	assert_int_equal(strlist_add(&domains, "domain:example.com"), 0);
	ctx.domains = &domains;
	r = exec_json(&ctx, "{\"url\": \"http://evilexample.com/\"}");
	expect_error(&r, "webfetch: the host 'evilexample.com' is not admitted by this "
		     "run's grant (WebFetch(domain:example.com))");
	strlist_free(&domains);
	ctx.domains = &domains; /* restricted to nothing: refused */
	r = exec_json(&ctx, "{\"url\": \"http://example.com/\"}");
	expect_error_has(&r, "not admitted by this run's grant (no host)");
}

/* ---- fetches from a loopback server ---- */

static pid_t server_pid;
static int server_port;
static bool have_server;

static int start_server(void **state)
{
	(void)state;
	const char *root = getenv("SKILLFS_SOURCE_ROOT");
	char script[4096];
	snprintf(script, sizeof script, "%s/tests/webfetch_server.py", root ? root : ".");
	int fds[2];
	if (access(script, R_OK) != 0 || pipe(fds) < 0)
		return 0;
	server_pid = fork();
	if (server_pid < 0)
		return -1;
	if (server_pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		close(fds[1]);
		execlp("python3", "python3", script, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	FILE *fp = fdopen(fds[0], "r");
	if (fp && fscanf(fp, "%d", &server_port) == 1 && server_port > 0)
		have_server = true;
	if (fp)
		fclose(fp);
	else
		close(fds[0]);
	return 0;
}

static int stop_server(void **state)
{
	(void)state;
	if (server_pid > 0) {
		kill(server_pid, SIGTERM);
		waitpid(server_pid, NULL, 0);
	}
	return 0;
}

static int need_server(void **state)
{
	(void)state;
	if (!have_server) {
		if (getenv("CI"))
			fail_msg("the loopback server (python3 tests/webfetch_server.py) "
				 "did not start under CI");
		skip();
	}
	return 0;
}

static char *url_of(const char *host, const char *path)
{
	char *u = NULL;
	assert_true(asprintf(&u, "http://%s:%d%s", host, server_port, path) > 0);
	return u;
}

/* Fetches path from 127.0.0.1 through tools_exec with allow_private as
 * given; method NULL: GET. */
static struct tool_result get(struct webfetch_config *wc, const char *path,
			      const char *method)
{
	char *u = url_of("127.0.0.1", path);
	struct tool_ctx ctx = {.webfetch = wc, .timeout_ms = 20000};
	json_t *args = json_pack("{s:s}", "url", u);
	if (method)
		json_object_set_new(args, "method", json_string(method));
	struct tool_result r;
	assert_int_equal(tools_exec(&ctx, "webfetch", args, &r), 0);
	json_decref(args);
	free(u);
	return r;
}

static void expect_text(struct tool_result *r, bool is_error, const char *path,
			const char *body)
{
	char *want = NULL;
	assert_true(asprintf(&want, "HTTP %s http://127.0.0.1:%d%s\n%s",
			     is_error ? "404" : "200", server_port, path, body) > 0);
	if (r->is_error != is_error)
		fail_msg("is_error %d: %s", r->is_error, r->text);
	assert_string_equal(r->text, want);
	free(want);
	tool_result_free(r);
}

static const char page_text[] =
	"# Fetch test\n\n"
	"Fish & chips <3 \"quoted\" it's \xE2\x98\xBA \xE2\x98\x83 ok\n\n"
	"- one\n- two\n\n"
	"last\nline\n";

static void test_fetch_html_page(void **state)
{
	(void)state;
	struct webfetch_config wc = {.allow_private = true};
	int fds = count_fds();
	struct tool_result r = get(&wc, "/page.html", NULL);
	expect_text(&r, false, "/page.html", page_text);
	assert_int_equal(count_fds(), fds);
	r = get(&wc, "/json", NULL);
	expect_text(&r, false, "/json", "{\"answer\": 42}\n");
	r = get(&wc, "/missing", NULL);
	expect_text(&r, true, "/missing", "# Not here\n");
}

static void test_fetch_follows_redirect(void **state)
{
	(void)state;
	struct webfetch_config wc = {.allow_private = true};
	struct tool_result r = get(&wc, "/redirect", NULL);
	expect_text(&r, false, "/page.html", page_text);
	/* A redirect status without a Location is the answer itself. */
	r = get(&wc, "/nowhere", NULL);
	if (r.is_error)
		fail_msg("%s", r.text);
	char *nowhere = NULL;
	assert_true(asprintf(&nowhere, "HTTP 302 http://127.0.0.1:%d/nowhere\nmoved nowhere\n",
			     server_port) > 0);
	assert_string_equal(r.text, nowhere);
	free(nowhere);
	tool_result_free(&r);
	/* At most 5 hops are followed, each counted. */
	r = get(&wc, "/chain?left=5", NULL);
	expect_text(&r, false, "/chain?left=0", "end of chain\n");
	r = get(&wc, "/chain?left=6", NULL);
	char *want = NULL;
	assert_true(asprintf(&want, "webfetch: more than 5 redirects (the last to "
			     "http://127.0.0.1:%d/chain?left=0)", server_port) > 0);
	expect_error(&r, want);
	free(want);
	r = get(&wc, "/loop", NULL);
	assert_true(asprintf(&want, "webfetch: more than 5 redirects (the last to "
			     "http://127.0.0.1:%d/loop?n=6)", server_port) > 0);
	expect_error(&r, want);
	free(want);
}

static void test_fetch_refuses_loopback(void **state)
{
	(void)state;
	struct webfetch_config wc = {.allow_private = false};
	struct tool_result r = get(&wc, "/page.html", NULL);
	expect_error_has(&r, "webfetch: refused to connect to 127.0.0.1 (loopback address)");
	r = get(NULL, "/page.html", NULL); /* no configuration: refused too */
	expect_error_has(&r, "(loopback address)");
	/* By name: checked after the name is resolved. */
	char *u = url_of("localhost", "/page.html");
	struct tool_ctx ctx = {.webfetch = &wc};
	json_t *args = json_pack("{s:s}", "url", u);
	assert_int_equal(tools_exec(&ctx, "webfetch", args, &r), 0);
	expect_error_has(&r, "loopback address)");
	json_decref(args);
	free(u);
}

/* The address rule of the next test: 127.0.0.1 counts as public, every
 * other address as private, and each connection is counted. */
static const char *only_127_0_0_1(const struct sockaddr *sa, socklen_t len, void *arg)
{
	int *n = arg;
	(*n)++;
	const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
	if (sa->sa_family == AF_INET && len >= sizeof *in &&
	    in->sin_addr.s_addr == htonl(INADDR_LOOPBACK))
		return NULL;
	return "private";
}

static void test_fetch_checks_address_after_redirect(void **state)
{
	(void)state;
	char *target = url_of("127.0.0.2", "/page.html");
	char *path = NULL;
	assert_true(asprintf(&path, "/redirect-to?u=%s", target) > 0);
	char *u = url_of("127.0.0.1", path);
	int connections = 0;
	struct webfetch_request rq = {.url = u, .timeout_ms = 20000,
				      .refuse = only_127_0_0_1, .refuse_arg = &connections};
	struct tool_ctx ctx = {0};
	struct call c = {.tool = "webfetch", .ctx = &ctx};
	webfetch_fetch(&c, &rq);
	assert_false(c.oom);
	assert_true(c.is_error);
	char *want = NULL;
	assert_true(asprintf(&want, "webfetch: refused to connect to 127.0.0.2 (private "
			     "address) for %s", target) > 0);
	if (strncmp(c.text.data, want, strlen(want)) != 0)
		fail_msg("got [%s], want [%s...]", c.text.data, want);
	assert_int_equal(connections, 2); /* the first hop, then the redirect's */
	buf_free(&c.text);
	free(want);
	/* The same rule lets the first hop through when nothing redirects. */
	free(u);
	u = url_of("127.0.0.1", "/json");
	rq.url = u;
	c = (struct call){.tool = "webfetch", .ctx = &ctx};
	webfetch_fetch(&c, &rq);
	assert_false(c.is_error);
	assert_non_null(strstr(c.text.data, "{\"answer\": 42}"));
	buf_free(&c.text);
	free(u);
	free(path);
	free(target);
}

static void test_fetch_redirect_outside_domain_refused(void **state)
{
	(void)state;
	struct webfetch_config wc = {.allow_private = true};
	struct strlist domains = {0};
	assert_int_equal(strlist_add(&domains, "domain:localhost"), 0);
	struct tool_ctx ctx = {.webfetch = &wc, .domains = &domains, .timeout_ms = 20000};
	char *target = url_of("127.0.0.1", "/page.html");
	char *path = NULL;
	assert_true(asprintf(&path, "/redirect-to?u=%s", target) > 0);
	char *from = url_of("localhost", path);
	json_t *args = json_pack("{s:s}", "url", from);
	struct tool_result r;
	assert_int_equal(tools_exec(&ctx, "webfetch", args, &r), 0);
	char *want = NULL;
	assert_true(asprintf(&want, "webfetch: the redirect from %s to %s is refused: the "
			     "host '127.0.0.1' is not admitted by this run's grant "
			     "(WebFetch(domain:localhost))", from, target) > 0);
	expect_error(&r, want);
	free(want);
	json_decref(args);
	/* A redirect within the domain is followed. */
	char *in = url_of("localhost", "/redirect");
	args = json_pack("{s:s}", "url", in);
	assert_int_equal(tools_exec(&ctx, "webfetch", args, &r), 0);
	if (r.is_error)
		fail_msg("%s", r.text);
	assert_non_null(strstr(r.text, "/page.html\n# Fetch test\n"));
	tool_result_free(&r);
	json_decref(args);
	free(in);
	free(from);
	free(path);
	free(target);
	strlist_free(&domains);
}

static void test_fetch_size_caps(void **state)
{
	(void)state;
	struct webfetch_config wc = {.allow_private = true, .max_text = 100,
				     .max_download = 1000};
	struct tool_result r = get(&wc, "/big", NULL);
	struct buf want = {0};
	for (int i = 0; i < 10; i++)
		assert_int_equal(buf_puts(&want, "0123456789"), 0);
	assert_int_equal(buf_puts(&want, "\n[truncated: 100 bytes of 1000 shown; "
				  "tools.webfetch.max_text]\n[truncated: 1000 bytes of "
				  "3145720 downloaded; tools.webfetch.max_download]\n"), 0);
	expect_text(&r, false, "/big", want.data);
	buf_free(&want);
	/* A redirect whose body passes the cap is not followed. */
	wc.max_download = 5;
	r = get(&wc, "/redirect", NULL);
	expect_error_has(&r, "/redirect has a body of more than 5 bytes "
			 "(tools.webfetch.max_download)");
	/* The defaults: 1 MiB of text of a complete download. */
	wc = (struct webfetch_config){.allow_private = true};
	r = get(&wc, "/big", NULL);
	assert_false(r.is_error);
	assert_non_null(strstr(r.text, "\n[truncated: 1048576 bytes of 3145720 shown; "
			       "tools.webfetch.max_text]\n"));
	assert_null(strstr(r.text, "max_download"));
	assert_true(strlen(r.text) < (1 << 20) + 200);
	tool_result_free(&r);
}

static void test_fetch_binary_summarised(void **state)
{
	(void)state;
	struct webfetch_config wc = {.allow_private = true};
	struct tool_result r = get(&wc, "/bin", NULL);
	expect_text(&r, false, "/bin",
		    "[binary content: application/octet-stream, 5000 bytes; not shown]");
	r = get(&wc, "/bin-stream", NULL);
	expect_text(&r, false, "/bin-stream",
		    "[binary content: image/png, 20004 bytes; not shown]");
	wc.max_download = 1000;
	r = get(&wc, "/bin-stream", NULL);
	expect_text(&r, false, "/bin-stream",
		    "[binary content: image/png, more than 1000 bytes; not shown]");
}

static void test_fetch_charsets(void **state)
{
	(void)state;
	struct webfetch_config wc = {.allow_private = true};
	struct tool_result r = get(&wc, "/latin1", NULL);
	expect_text(&r, false, "/latin1", "caf\xC3\xA9 cr\xC3\xA8me\n");
	r = get(&wc, "/meta1252", NULL);
	expect_text(&r, false, "/meta1252",
		    "\xE2\x82\xAC 5 \xE2\x80\x9Cquoted\xE2\x80\x9D\n");
	r = get(&wc, "/latin2", NULL);
	expect_text(&r, false, "/latin2", "\xC4\x85\xC4\x87\n");
}

static void test_fetch_head(void **state)
{
	(void)state;
	struct webfetch_config wc = {.allow_private = true};
	struct tool_result r = get(&wc, "/page.html", "HEAD");
	assert_false(r.is_error);
	char *first = NULL;
	assert_true(asprintf(&first, "HTTP 200 http://127.0.0.1:%d/page.html\n",
			     server_port) > 0);
	assert_memory_equal(r.text, first, strlen(first));
	assert_non_null(strstr(r.text, "Content-Type: text/html; charset=utf-8"));
	assert_null(strstr(r.text, "Fetch test"));
	assert_null(strchr(r.text, '\r'));
	free(first);
	tool_result_free(&r);
	r = get(&wc, "/redirect", "head"); /* followed too */
	assert_false(r.is_error);
	assert_non_null(strstr(r.text, "/page.html\n"));
	tool_result_free(&r);
}

static bool cancel_now(void *arg)
{
	(void)arg;
	return true;
}

static void test_fetch_timeout_and_cancel(void **state)
{
	(void)state;
	struct webfetch_config wc = {.allow_private = true};
	char *u = url_of("127.0.0.1", "/slow");
	json_t *args = json_pack("{s:s}", "url", u);
	struct tool_ctx ctx = {.webfetch = &wc, .timeout_ms = 300};
	struct tool_result r;
	assert_int_equal(tools_exec(&ctx, "webfetch", args, &r), 0);
	expect_error(&r, "webfetch: timed out after 300 ms");
	ctx = (struct tool_ctx){.webfetch = &wc, .timeout_ms = 20000, .cancel = cancel_now};
	assert_int_equal(tools_exec(&ctx, "webfetch", args, &r), 0);
	expect_error(&r, "webfetch: cancelled");
	json_decref(args);
	free(u);
}

int main(void)
{
	const struct CMUnitTest units[] = {
		cmocka_unit_test(test_address_classes),
		cmocka_unit_test(test_text_types),
		cmocka_unit_test(test_html_to_text),
		cmocka_unit_test(test_charsets),
		cmocka_unit_test(test_decode_finds_the_charset),
		cmocka_unit_test(test_domain_pattern_check),
		cmocka_unit_test(test_domain_pattern_admits),
		cmocka_unit_test(test_domain_pattern_covers),
		cmocka_unit_test(test_domain_url_parse),
		cmocka_unit_test(test_arguments),
	};
#define S(fn) cmocka_unit_test_setup(fn, need_server)
	const struct CMUnitTest served[] = {
		S(test_fetch_html_page),
		S(test_fetch_follows_redirect),
		S(test_fetch_refuses_loopback),
		S(test_fetch_checks_address_after_redirect),
		S(test_fetch_redirect_outside_domain_refused),
		S(test_fetch_size_caps),
		S(test_fetch_binary_summarised),
		S(test_fetch_charsets),
		S(test_fetch_head),
		S(test_fetch_timeout_and_cancel),
	};
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return 1;
	int rc = cmocka_run_group_tests_name("webfetch", units, NULL, NULL);
	rc |= cmocka_run_group_tests_name("webfetch over loopback", served, start_server,
					  stop_server);
	curl_global_cleanup();
	return rc;
}
