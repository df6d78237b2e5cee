/* webtext: web content as text for the model (see webtext.h). */
#include "webtext.h"

#include <ctype.h>
#include <errno.h>
#include <iconv.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tool.h"

/* ---- content types and charsets ---- */

void webtext_media_type(const char *ct, char *out, size_t size)
{
	size_t k = 0;
	while (ct && (*ct == ' ' || *ct == '\t'))
		ct++;
	for (; ct && *ct && *ct != ';' && *ct != ' ' && *ct != '\t' && k + 1 < size; ct++)
		out[k++] = (char)tolower((unsigned char)*ct);
	out[k] = '\0';
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && strcmp(s + n - m, suffix) == 0;
}

bool webtext_type_is_text(const char *type)
{
	char t[128];
	webtext_media_type(type, t, sizeof t);
	static const char *const app[] = {
		"application/json", "application/xml", "application/javascript",
		"application/x-javascript", "application/ecmascript",
	};
	if (strncmp(t, "text/", 5) == 0 && t[5])
		return true;
	for (size_t i = 0; i < sizeof app / sizeof app[0]; i++)
		if (strcmp(t, app[i]) == 0)
			return true;
	const char *slash = strchr(t, '/');
	return slash && slash[1] && (ends_with(t, "+xml") || ends_with(t, "+json"));
}

static bool type_is_html(const char *type)
{
	char t[128];
	webtext_media_type(type, t, sizeof t);
	return strcmp(t, "text/html") == 0 || strcmp(t, "application/xhtml+xml") == 0;
}

/* Copies a charset label at p (after "charset=", maybe quoted) into out:
 * letters, digits and ._:- only; "" when there is none. */
static void label_at(const char *p, const char *end, char *out, size_t size)
{
	size_t k = 0;
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	if (p < end && (*p == '"' || *p == '\''))
		p++;
	for (; p < end && k + 1 < size &&
	       (isalnum((unsigned char)*p) || (*p && strchr("._:-", *p)));
	     p++)
		out[k++] = *p;
	out[k] = '\0';
}

/* The charset parameter of a Content-Type value into out ("" if none). */
static void header_charset(const char *ct, char *out, size_t size)
{
	out[0] = '\0';
	for (const char *p = ct ? strchr(ct, ';') : NULL; p; p = strchr(p + 1, ';')) {
		const char *q = p + 1;
		while (*q == ' ' || *q == '\t')
			q++;
		if (strncasecmp(q, "charset", 7) != 0)
			continue;
		q += 7;
		while (*q == ' ' || *q == '\t')
			q++;
		if (*q != '=')
			continue;
		label_at(q + 1, q + 1 + strlen(q + 1), out, size);
		return;
	}
}

static const char *find_icase(const char *s, const char *end, const char *word)
{
	size_t n = strlen(word);
	for (; s + n <= end; s++)
		if (strncasecmp(s, word, n) == 0)
			return s;
	return NULL;
}

/* A charset declared in the first bytes of a document: <meta charset=...>,
 * <meta ... content="...; charset=..."> or <?xml ... encoding="..."?>. */
static void document_charset(const char *p, size_t n, char *out, size_t size)
{
	const char *end = p + (n < 4096 ? n : 4096);
	out[0] = '\0';
	if (end - p >= 5 && strncmp(p, "<?xml", 5) == 0) {
		const char *close = memchr(p, '>', (size_t)(end - p));
		const char *e = find_icase(p, close ? close : end, "encoding");
		if (e) {
			e += 8;
			while (e < end && (*e == ' ' || *e == '='))
				e++;
			label_at(e, close ? close : end, out, size);
			return;
		}
	}
	for (const char *m = find_icase(p, end, "<meta"); m; m = find_icase(m + 5, end, "<meta")) {
		const char *close = memchr(m, '>', (size_t)(end - m));
		const char *tag_end = close ? close : end;
		const char *c = find_icase(m, tag_end, "charset");
		if (!c)
			continue;
		c += 7;
		while (c < tag_end && (*c == ' ' || *c == '\t'))
			c++;
		if (c < tag_end && *c == '=') {
			label_at(c + 1, tag_end, out, size);
			if (out[0])
				return;
		}
	}
}

/* windows-1252 bytes 0x80-0x9F (the others are Latin-1); the five bytes
 * it leaves undefined map to the C1 code point, as in browsers. */
static const uint16_t cp1252_high[32] = {
	0x20AC, 0x0081, 0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021,
	0x02C6, 0x2030, 0x0160, 0x2039, 0x0152, 0x008D, 0x017D, 0x008F,
	0x0090, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022, 0x2013, 0x2014,
	0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0x009D, 0x017E, 0x0178,
};

/* Appends code point cp as UTF-8 (U+FFFD for one that is not a scalar
 * value). Returns 0 or -1. */
static int put_cp(struct buf *out, uint32_t cp)
{
	char u[4];
	size_t n;
	if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF) || cp == 0)
		cp = 0xFFFD;
	if (cp < 0x80) {
		u[0] = (char)cp;
		n = 1;
	} else if (cp < 0x800) {
		u[0] = (char)(0xC0 | cp >> 6);
		u[1] = (char)(0x80 | (cp & 0x3F));
		n = 2;
	} else if (cp < 0x10000) {
		u[0] = (char)(0xE0 | cp >> 12);
		u[1] = (char)(0x80 | (cp >> 6 & 0x3F));
		u[2] = (char)(0x80 | (cp & 0x3F));
		n = 3;
	} else {
		u[0] = (char)(0xF0 | cp >> 18);
		u[1] = (char)(0x80 | (cp >> 12 & 0x3F));
		u[2] = (char)(0x80 | (cp >> 6 & 0x3F));
		u[3] = (char)(0x80 | (cp & 0x3F));
		n = 4;
	}
	return buf_append(out, u, n);
}

static uint32_t cp1252(unsigned char b)
{
	return b >= 0x80 && b < 0xA0 ? cp1252_high[b - 0x80] : b;
}

static bool label_is(const char *label, const char *const *names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcasecmp(label, names[i]) == 0)
			return true;
	return false;
}

int webtext_to_utf8(const char *charset, const char *p, size_t n, struct buf *out)
{
	static const char *const utf8[] = {"utf-8", "utf8", "unicode-1-1-utf-8"};
	static const char *const latin[] = {
		"iso-8859-1", "iso8859-1", "iso_8859-1", "latin1", "l1", "cp819",
		"ibm819", "iso-ir-100", "windows-1252", "cp1252", "x-cp1252",
		"us-ascii", "ascii", "ansi_x3.4-1968",
	};
	if (!charset || !*charset || label_is(charset, utf8, 3))
		return buf_append(out, p, n);
	if (label_is(charset, latin, sizeof latin / sizeof latin[0])) {
		for (size_t i = 0; i < n; i++)
			if (put_cp(out, cp1252((unsigned char)p[i])) < 0)
				return -1;
		return 0;
	}
	iconv_t cd = iconv_open("UTF-8", charset);
	if (cd == (iconv_t)-1)
		return buf_append(out, p, n) < 0 ? -1 : 1;
	char *in = (char *)p;
	size_t left = n;
	char chunk[4096];
	int rc = 0;
	for (bool flush = false; rc == 0;) {
		char *o = chunk;
		size_t room = sizeof chunk;
		size_t r = flush ? iconv(cd, NULL, NULL, &o, &room)
				 : iconv(cd, &in, &left, &o, &room);
		int e = errno;
		if (buf_append(out, chunk, (size_t)(o - chunk)) < 0) {
			rc = -1;
			break;
		}
		if (r != (size_t)-1) {
			if (flush)
				break;
			flush = true; /* all read: end the shift state */
		} else if (e == E2BIG) {
			continue;
		} else if (e == EILSEQ && left) {
			rc = buf_puts(out, "\xEF\xBF\xBD"); /* skip one byte */
			in++;
			left--;
		} else {
			/* EINVAL: an incomplete sequence at the end */
			rc = buf_puts(out, "\xEF\xBF\xBD");
			break;
		}
	}
	iconv_close(cd);
	return rc;
}

/* ---- HTML to text ---- */

/* The HTML 4 Latin-1 entities, U+00A0 to U+00FF in order. */
static const char *const latin1_entities[96] = {
	"nbsp", "iexcl", "cent", "pound", "curren", "yen", "brvbar", "sect",
	"uml", "copy", "ordf", "laquo", "not", "shy", "reg", "macr",
	"deg", "plusmn", "sup2", "sup3", "acute", "micro", "para", "middot",
	"cedil", "sup1", "ordm", "raquo", "frac14", "frac12", "frac34", "iquest",
	"Agrave", "Aacute", "Acirc", "Atilde", "Auml", "Aring", "AElig", "Ccedil",
	"Egrave", "Eacute", "Ecirc", "Euml", "Igrave", "Iacute", "Icirc", "Iuml",
	"ETH", "Ntilde", "Ograve", "Oacute", "Ocirc", "Otilde", "Ouml", "times",
	"Oslash", "Ugrave", "Uacute", "Ucirc", "Uuml", "Yacute", "THORN", "szlig",
	"agrave", "aacute", "acirc", "atilde", "auml", "aring", "aelig", "ccedil",
	"egrave", "eacute", "ecirc", "euml", "igrave", "iacute", "icirc", "iuml",
	"eth", "ntilde", "ograve", "oacute", "ocirc", "otilde", "ouml", "divide",
	"oslash", "ugrave", "uacute", "ucirc", "uuml", "yacute", "thorn", "yuml",
};

static const struct {
	const char *name;
	uint32_t cp;
} named_entities[] = {
	{"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''},
	{"ndash", 0x2013}, {"mdash", 0x2014}, {"lsquo", 0x2018}, {"rsquo", 0x2019},
	{"sbquo", 0x201A}, {"ldquo", 0x201C}, {"rdquo", 0x201D}, {"bdquo", 0x201E},
	{"dagger", 0x2020}, {"Dagger", 0x2021}, {"bull", 0x2022}, {"hellip", 0x2026},
	{"permil", 0x2030}, {"lsaquo", 0x2039}, {"rsaquo", 0x203A}, {"euro", 0x20AC},
	{"trade", 0x2122}, {"larr", 0x2190}, {"uarr", 0x2191}, {"rarr", 0x2192},
	{"darr", 0x2193}, {"harr", 0x2194}, {"minus", 0x2212}, {"le", 0x2264},
	{"ge", 0x2265}, {"ne", 0x2260}, {"asymp", 0x2248}, {"infin", 0x221E},
	{"thinsp", 0x2009}, {"ensp", 0x2002}, {"emsp", 0x2003}, {"zwnj", 0x200C},
	{"zwj", 0x200D}, {"OElig", 0x0152}, {"oelig", 0x0153}, {"Scaron", 0x0160},
	{"scaron", 0x0161}, {"Yuml", 0x0178}, {"fnof", 0x0192}, {"circ", 0x02C6},
	{"tilde", 0x02DC}, {"alpha", 0x03B1}, {"beta", 0x03B2}, {"pi", 0x03C0},
	{"mu", 0x03BC}, {"check", 0x2713},
};

/* The code point of a named entity, or 0. */
static uint32_t entity_cp(const char *name, size_t n)
{
	for (size_t i = 0; i < 96; i++)
		if (strlen(latin1_entities[i]) == n &&
		    memcmp(latin1_entities[i], name, n) == 0)
			return i == 0 ? ' ' : 0xA0 + (uint32_t)i; /* &nbsp; a space */
	for (size_t i = 0; i < sizeof named_entities / sizeof named_entities[0]; i++)
		if (strlen(named_entities[i].name) == n &&
		    memcmp(named_entities[i].name, name, n) == 0)
			return named_entities[i].cp;
	return 0;
}

/* Decodes the character reference at s[0] == '&' (end bounds it):
 * *cp gets its code point (U+FFFD for an invalid number) and the
 * reference's length is returned; 0 when it is not one (a plain '&'). */
static size_t char_ref(const char *s, const char *end, uint32_t *cp)
{
	const char *p = s + 1;
	if (p < end && *p == '#') {
		p++;
		bool hex = p < end && (*p == 'x' || *p == 'X');
		if (hex)
			p++;
		const char *digits = p;
		uint64_t v = 0;
		for (; p < end && (hex ? isxdigit((unsigned char)*p) : isdigit((unsigned char)*p)); p++)
			if (v <= 0x10FFFF)
				v = v * (hex ? 16 : 10) +
				    (uint64_t)(isdigit((unsigned char)*p) ? *p - '0'
									   : (tolower((unsigned char)*p) - 'a' + 10));
		if (p == digits)
			return 0;
		if (p < end && *p == ';')
			p++;
		if (v >= 0x80 && v < 0xA0)
			v = cp1252((unsigned char)v); /* as browsers do */
		*cp = v == 0 || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF) ? 0xFFFD
									   : (uint32_t)v;
		if (*cp == 0xA0)
			*cp = ' ';
		return (size_t)(p - s);
	}
	const char *name = p;
	while (p < end && p - name < 32 && isalnum((unsigned char)*p))
		p++;
	if (p == name || p >= end || *p != ';')
		return 0;
	uint32_t v = entity_cp(name, (size_t)(p - name));
	if (!v)
		return 0;
	*cp = v;
	return (size_t)(p + 1 - s);
}

struct html {
	struct buf *out;
	int pre;            /* depth of <pre> */
	bool in_head;
	int breaks;         /* line breaks owed before the next text (0-2) */
	bool space;         /* a space owed before the next text */
	const char *prefix; /* owed at the start of the next text: "- ", "# " */
	bool oom;
};

static bool at_line_start(const struct html *h)
{
	return h->out->len == 0 || h->out->data[h->out->len - 1] == '\n';
}

static void emit(struct html *h, const char *p, size_t n)
{
	if (buf_append(h->out, p, n) < 0)
		h->oom = true;
}

static void owe_break(struct html *h, int n)
{
	if (h->breaks < n)
		h->breaks = n;
	h->space = false;
	h->prefix = NULL;
}

/* Pays what is owed before a visible character. */
static void settle(struct html *h)
{
	if (h->out->len && h->breaks) {
		/* Trailing blanks of the line are dropped. */
		while (h->out->len && h->out->data[h->out->len - 1] == ' ')
			h->out->len--;
		int have = 0;
		for (size_t i = h->out->len; i > 0 && have < 2 && h->out->data[i - 1] == '\n'; i--)
			have++;
		for (; have < h->breaks; have++)
			emit(h, "\n", 1);
	} else if (h->space && !at_line_start(h)) {
		emit(h, " ", 1);
	}
	h->breaks = 0;
	h->space = false;
	if (h->prefix) {
		emit(h, h->prefix, strlen(h->prefix));
		h->prefix = NULL;
	}
}

static void text_char(struct html *h, uint32_t cp)
{
	bool blank = cp == ' ' || cp == '\t' || cp == '\n' || cp == '\r' || cp == '\f';
	if (h->in_head)
		return;
	if (h->pre) {
		if (cp == '\r')
			return;
		settle(h);
	} else if (blank) {
		h->space = true;
		return;
	} else {
		settle(h);
	}
	if (put_cp(h->out, cp) < 0)
		h->oom = true;
}

/* Text between tags: character references decoded. */
static void text_run(struct html *h, const char *s, const char *end)
{
	while (s < end && !h->oom) {
		uint32_t cp;
		size_t n;
		if (*s == '&' && (n = char_ref(s, end, &cp)) > 0) {
			text_char(h, cp);
			s += n;
			continue;
		}
		/* Plain bytes up to the next '&' or blank go out as they are. */
		const char *q = s;
		while (q < end && *q != '&' && !strchr(" \t\n\r\f", *q))
			q++;
		if (q == s) {
			text_char(h, (unsigned char)*s);
			s++;
			continue;
		}
		if (!h->in_head) {
			settle(h);
			emit(h, s, (size_t)(q - s));
		}
		s = q;
	}
}

static bool name_in(const char *name, const char *const *list)
{
	for (; *list; list++)
		if (strcmp(name, *list) == 0)
			return true;
	return false;
}

/* Elements whose content is never text for the reader. */
static const char *const dropped[] = {"script", "style", "title", "noscript", "template",
				       "iframe", "object", "textarea", NULL};
/* Elements that end a paragraph (a blank line) or a line. */
static const char *const paragraphs[] = {"p", "pre", "blockquote", "table", "ul", "ol", "dl",
					  "hr", "figure", "h1", "h2", "h3", "h4", "h5", "h6",
					  NULL};
static const char *const lines[] = {"br", "div", "li", "tr", "dt", "dd", "section",
				     "article", "header", "footer", "nav", "aside", "main",
				     "form", "fieldset", "address", "details", "summary",
				     "figcaption", "caption", "thead", "tbody", "tfoot",
				     "option", "center", "legend", "body", "html", "menu",
				     NULL};
/* What may stand in <head>; anything else starts the body. */
static const char *const head_content[] = {"meta", "link", "title", "style", "script",
					    "base", "noscript", "template", NULL};

static void tag(struct html *h, const char *name, bool end)
{
	if (!end && strcmp(name, "head") == 0) {
		h->in_head = true;
		return;
	}
	if (strcmp(name, "head") == 0 || (!end && strcmp(name, "body") == 0) ||
	    (h->in_head && !end && !name_in(name, head_content))) {
		h->in_head = false;
	}
	if (strcmp(name, "pre") == 0) {
		if (!end)
			h->pre++;
		else if (h->pre)
			h->pre--;
	}
	if (name_in(name, paragraphs))
		owe_break(h, 2);
	else if (name_in(name, lines))
		owe_break(h, 1);
	else if (strcmp(name, "td") == 0 || strcmp(name, "th") == 0)
		h->space = true;
	if (end)
		return;
	static const char *const marks[] = {"# ", "## ", "### ", "#### ", "##### ", "###### "};
	if (name[0] == 'h' && name[1] >= '1' && name[1] <= '6' && !name[2])
		h->prefix = marks[name[1] - '1'];
	else if (strcmp(name, "li") == 0)
		h->prefix = "- ";
}

/* The end of the markup construct starting at s[0] == '<' that is not a
 * tag: a comment, <!...> or <?...>; NULL when s starts none. */
static const char *skip_other(const char *s, const char *end)
{
	if (end - s >= 4 && memcmp(s, "<!--", 4) == 0) {
		for (const char *p = s + 4; p + 3 <= end; p++)
			if (memcmp(p, "-->", 3) == 0)
				return p + 3;
		return end;
	}
	if (end - s >= 2 && (s[1] == '!' || s[1] == '?')) {
		const char *gt = memchr(s, '>', (size_t)(end - s));
		return gt ? gt + 1 : end;
	}
	return NULL;
}

/* Past the end tag </name...> of a dropped element, from s; end when
 * there is none. */
static const char *skip_raw(const char *s, const char *end, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = s; p + 2 + n <= end; p++) {
		if (p[0] != '<' || p[1] != '/' || strncasecmp(p + 2, name, n) != 0)
			continue;
		const char *q = p + 2 + n;
		if (q < end && !strchr(" \t\n\r\f/>", *q))
			continue;
		const char *gt = memchr(q, '>', (size_t)(end - q));
		return gt ? gt + 1 : end;
	}
	return end;
}

int webtext_html(const char *html, size_t len, struct buf *out)
{
	struct html h = {.out = out};
	size_t start = out->len;
	const char *s = html, *end = html + len;
	while (s < end && !h.oom) {
		const char *lt = memchr(s, '<', (size_t)(end - s));
		if (!lt) {
			text_run(&h, s, end);
			break;
		}
		text_run(&h, s, lt);
		s = lt;
		const char *other = skip_other(s, end);
		if (other) {
			s = other;
			continue;
		}
		bool closing = s + 1 < end && s[1] == '/';
		const char *p = s + 1 + closing;
		if (p >= end || !isalpha((unsigned char)*p)) {
			text_run(&h, s, s + 1); /* a lone '<' */
			s++;
			continue;
		}
		char name[16];
		size_t k = 0;
		bool long_name = false;
		for (; p < end && !strchr(" \t\n\r\f/>", *p); p++) {
			if (k + 1 < sizeof name)
				name[k++] = (char)tolower((unsigned char)*p);
			else
				long_name = true;
		}
		name[k] = '\0';
		/* Attributes, quoted values included, up to '>'. */
		char quote = 0;
		for (; p < end; p++) {
			if (quote) {
				if (*p == quote)
					quote = 0;
			} else if (*p == '"' || *p == '\'') {
				quote = *p;
			} else if (*p == '>') {
				break;
			}
		}
		s = p < end ? p + 1 : end;
		if (long_name)
			continue;
		tag(&h, name, closing);
		if (!closing && name_in(name, dropped))
			s = skip_raw(s, end, name);
	}
	if (h.oom)
		return -1;
	/* No trailing blanks or breaks. */
	while (out->len > start && strchr(" \n", out->data[out->len - 1]))
		out->len--;
	if (out->data)
		out->data[out->len] = '\0';
	return 0;
}

int webtext_decode(const char *ct, const char *p, size_t n, struct buf *out,
		   char *unknown, size_t size)
{
	char charset[64];
	header_charset(ct, charset, sizeof charset);
	/* A byte order mark says more than any label. */
	if (n >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0) {
		strcpy(charset, "utf-8");
		p += 3;
		n -= 3;
	} else if (n >= 2 && memcmp(p, "\xFF\xFE", 2) == 0) {
		strcpy(charset, "UTF-16LE");
		p += 2;
		n -= 2;
	} else if (n >= 2 && memcmp(p, "\xFE\xFF", 2) == 0) {
		strcpy(charset, "UTF-16BE");
		p += 2;
		n -= 2;
	}
	if (!charset[0])
		document_charset(p, n, charset, sizeof charset);
	if (!charset[0])
		strcpy(charset, tool_is_text(p, n) ? "utf-8" : "windows-1252");
	if (unknown && size)
		unknown[0] = '\0';
	if (!type_is_html(ct)) {
		int rc = webtext_to_utf8(charset, p, n, out);
		if (rc == 1 && unknown && size)
			snprintf(unknown, size, "%s", charset);
		return rc;
	}
	struct buf utf8 = {0};
	int rc = webtext_to_utf8(charset, p, n, &utf8);
	if (rc == 1 && unknown && size)
		snprintf(unknown, size, "%s", charset);
	if (rc >= 0 && webtext_html(utf8.data ? utf8.data : "", utf8.len, out) < 0)
		rc = -1;
	buf_free(&utf8);
	return rc;
}
