#include "findings.h"

#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "grow.h"

enum rule_where { LINE, COMMENT };
enum rule_flags { CASE = 0, ICASE = REG_ICASE };
enum { LOW = FINDING_LOW, HIGH = FINDING_HIGH };

struct rule_def {
	const char *id;
	enum finding_level level;
	enum rule_where where;
	int flags;
	size_t minlen;       /* shorter text cannot match */
	const char *needles; /* comma-separated; one is in every match ("": none) */
	const char *pattern;
	const char *reason;
};

static const struct rule_def rules[] = {
#define INJECTION(id, level, where, flags, minlen, needles, pattern, reason) \
	{ id, (enum finding_level)(level), where, flags, minlen, needles, pattern, reason },
#include "injection_patterns.def"
#undef INJECTION
};
#define NRULES (sizeof rules / sizeof *rules)

/* Every needle of every entry, by its first two bytes: a file is read
 * once for all of them (findings_scan) rather than once per needle. */
#define NEEDLES_MAX 128
struct needle {
	const char *s;
	size_t n;
	unsigned rule;
};

struct findings_rules {
	regex_t re[NRULES];
	struct needle needles[NEEDLES_MAX]; /* sorted by their first two bytes */
	size_t nneedles;
	bool short_needle[NRULES];          /* holds a needle of one byte */
	/* per first two bytes: 1 + the index of its first needle; 0: none */
	uint16_t first[65536];
	/* per first two bytes, one bit: whether a needle starts with them
	 * (8 KiB, where first is 128: most pairs of a text start none) */
	uint64_t starts[65536 / 64];
};

static unsigned pair_of(const char *p)
{
	return (unsigned)(unsigned char)p[0] << 8 | (unsigned char)p[1];
}

static int cmp_needle(const void *a, const void *b)
{
	unsigned x = pair_of(((const struct needle *)a)->s);
	unsigned y = pair_of(((const struct needle *)b)->s);
	return x < y ? -1 : x > y;
}

/* Indexes the needles of every entry (r->needles, r->first). -1 when the
 * table holds more than NEEDLES_MAX. */
static int index_needles(struct findings_rules *r)
{
	for (size_t i = 0; i < NRULES; i++) {
		for (const char *p = rules[i].needles; *p;) {
			const char *comma = strchr(p, ',');
			size_t n = comma ? (size_t)(comma - p) : strlen(p);
			if (n == 1)
				r->short_needle[i] = true;
			else if (n && r->nneedles == NEEDLES_MAX)
				return -1;
			else if (n)
				r->needles[r->nneedles++] = (struct needle){ p, n, (unsigned)i };
			p += n + (comma ? 1 : 0);
		}
	}
	qsort(r->needles, r->nneedles, sizeof *r->needles, cmp_needle);
	for (size_t k = r->nneedles; k-- > 0;) {
		unsigned pair = pair_of(r->needles[k].s);
		r->first[pair] = (uint16_t)(k + 1);
		r->starts[pair / 64] |= 1ULL << (pair % 64);
	}
	return 0;
}

/* Marks live[i] for each entry with a needle somewhere in lower (len
 * bytes), in one pass over it. */
static void find_needles(const struct findings_rules *r, const char *lower, size_t len,
			 bool *live)
{
	for (size_t i = 0; i + 1 < len; i++) {
		unsigned pair = pair_of(lower + i);
		if (!(r->starts[pair / 64] >> (pair % 64) & 1))
			continue;
		unsigned k = r->first[pair];
		for (size_t j = k - 1; j < r->nneedles && pair_of(r->needles[j].s) == pair; j++) {
			const struct needle *nd = &r->needles[j];
			if (!live[nd->rule] && nd->n <= len - i && memcmp(lower + i, nd->s, nd->n) == 0)
				live[nd->rule] = true;
		}
	}
}

size_t findings_rule_count(void)
{
	return NRULES;
}

const char *findings_rule_id(size_t i)
{
	return i < NRULES ? rules[i].id : "?";
}

enum finding_level findings_rule_level(size_t i)
{
	return i < NRULES ? rules[i].level : FINDING_HIGH;
}

const char *findings_rule_reason(size_t i)
{
	return i < NRULES ? rules[i].reason : "?";
}

const char *finding_level_name(enum finding_level l)
{
	return l == FINDING_HIGH ? "high" : "low";
}

struct findings_rules *findings_rules_new(char **err)
{
	*err = NULL;
	struct findings_rules *r = calloc(1, sizeof *r);
	if (!r)
		return NULL;
	if (index_needles(r) < 0) {
		*err = strdup("injection_patterns.def holds more needles than the index takes");
		free(r);
		return NULL;
	}
	for (size_t i = 0; i < NRULES; i++) {
		int rc = regcomp(&r->re[i], rules[i].pattern,
				 REG_EXTENDED | REG_NOSUB | rules[i].flags);
		if (rc != 0) {
			char msg[256];
			regerror(rc, &r->re[i], msg, sizeof msg);
			if (asprintf(err, "injection pattern '%s' does not compile: %s", rules[i].id,
				     msg) < 0)
				*err = NULL;
			while (i-- > 0)
				regfree(&r->re[i]);
			free(r);
			return NULL;
		}
	}
	return r;
}

void findings_rules_free(struct findings_rules *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < NRULES; i++)
		regfree(&r->re[i]);
	free(r);
}

bool findings_is_text(const char *data, size_t len)
{
	return !memchr(data, '\0', len < 8192 ? len : 8192);
}

/* What one scan collects. */
struct sink {
	struct finding *v;
	size_t n, cap, more;
};

static int add(struct sink *s, unsigned line, unsigned rule)
{
	if (s->n >= FINDINGS_PER_FILE_MAX) {
		s->more++;
		return 0;
	}
	struct finding *p = grow(s->v, &s->cap, s->n, sizeof *p, 4);
	if (!p)
		return -1;
	s->v = p;
	s->v[s->n++] = (struct finding){ line, rule };
	return 0;
}

/* Whether rule d may match text (len bytes; lower: the same with ASCII
 * letters in lower case): long enough, and holding one of its needles.
 * Never false for a text the pattern matches; most lines are passed over
 * here rather than by the regular expressions. */
/* Whether hay (len bytes) holds needle (n > 0 bytes): memchr for its
 * first byte, then a compare; quicker than memmem on lines this short. */
static bool holds(const char *hay, size_t len, const char *needle, size_t n)
{
	for (const char *p = hay, *end = hay + len; (size_t)(end - p) >= n;) {
		p = memchr(p, needle[0], (size_t)(end - p) - n + 1);
		if (!p)
			return false;
		if (memcmp(p, needle, n) == 0)
			return true;
		p++;
	}
	return false;
}

static bool may_match(const struct rule_def *d, const char *lower, size_t len)
{
	if (len < d->minlen)
		return false;
	if (!*d->needles)
		return true;
	for (const char *p = d->needles; *p;) {
		const char *comma = strchr(p, ',');
		size_t n = comma ? (size_t)(comma - p) : strlen(p);
		if (n && holds(lower, len, p, n))
			return true;
		p += n + (comma ? 1 : 0);
	}
	return false;
}

/* Matches the entries of kind where that are live (one of their needles is
 * somewhere in the file: a part of it can hold no other) against text (len
 * bytes, NUL-terminated; lower as may_match takes it), recording each at
 * line. */
static int match(const struct findings_rules *r, enum rule_where where, const bool *live,
		 const char *text, const char *lower, size_t len, unsigned line, struct sink *s)
{
	for (size_t i = 0; i < NRULES; i++)
		if (live[i] && rules[i].where == where && may_match(&rules[i], lower, len) &&
		    regexec(&r->re[i], text, 0, NULL, 0) == 0 && add(s, line, (unsigned)i) < 0)
			return -1;
	return 0;
}

/* text (len bytes) with ASCII letters in lower case, into *buf (grown as
 * needed): the haystack of may_match. */
static char *lowered(char **buf, size_t *cap, const char *text, size_t len)
{
	if (len + 1 > *cap) {
		char *b = realloc(*buf, len + 1);
		if (!b)
			return NULL;
		*buf = b;
		*cap = len + 1;
	}
	for (size_t i = 0; i < len; i++)
		(*buf)[i] = text[i] >= 'A' && text[i] <= 'Z' ? (char)(text[i] - 'A' + 'a') : text[i];
	(*buf)[len] = '\0';
	return *buf;
}

/* A copy of p[0..n) NUL-terminated into *buf (grown as needed), with
 * newlines made blanks when flat. */
static char *copy_text(char **buf, size_t *cap, const char *p, size_t n, bool flat)
{
	if (n + 1 > *cap) {
		char *b = realloc(*buf, n + 1);
		if (!b)
			return NULL;
		*buf = b;
		*cap = n + 1;
	}
	memcpy(*buf, p, n);
	(*buf)[n] = '\0';
	for (size_t i = 0; flat && i < n; i++)
		if ((*buf)[i] == '\n' || (*buf)[i] == '\r')
			(*buf)[i] = ' ';
	return *buf;
}

static unsigned lines_in(const char *p, size_t n)
{
	unsigned k = 0;
	for (const char *e = p + n; (p = memchr(p, '\n', (size_t)(e - p))); p++)
		k++;
	return k;
}

static int cmp_finding(const void *a, const void *b)
{
	const struct finding *x = a, *y = b;
	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	return x->rule < y->rule ? -1 : x->rule > y->rule;
}

int findings_scan(const struct findings_rules *r, const char *text, size_t len,
		  struct finding **out, size_t *n, size_t *more)
{
	struct sink s = { NULL, 0, 0, 0 };
	char *buf = NULL, *low = NULL;
	size_t cap = 0, lcap = 0;
	size_t at = len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
	unsigned line = 1;
	int rc = 0;
	/* Each needle is looked for once in the whole file, not on every
	 * line: most files hold none. (A comment's text is matched with its
	 * lines joined: its entries are always live.) */
	bool live[NRULES] = { false }, any = false;
	if (!lowered(&low, &lcap, text, len)) {
		rc = -1;
	} else {
		find_needles(r, low, len, live);
		for (size_t i = 0; i < NRULES; i++)
			any |= live[i] = live[i] || !*rules[i].needles ||
					 rules[i].where == COMMENT ||
					 (r->short_needle[i] && may_match(&rules[i], low, len));
	}
	if (!any)
		at = len; /* nothing to match */
	/* A line shorter than every live entry without needles, when no
	 * entry with needles is live, can match nothing: most lines are
	 * passed over here, without copying them. */
	bool needled = false;
	size_t shortest = SIZE_MAX;
	for (size_t i = 0; i < NRULES; i++) {
		if (!live[i] || rules[i].where != LINE)
			continue;
		if (*rules[i].needles)
			needled = true;
		else if (rules[i].minlen < shortest)
			shortest = rules[i].minlen;
	}
	if (needled)
		shortest = 0;
	/* Each line. */
	for (size_t i = at; i < len && rc == 0; line++) {
		const char *nl = memchr(text + i, '\n', len - i);
		size_t end = nl ? (size_t)(nl - text) : len;
		size_t e = end > i && text[end - 1] == '\r' ? end - 1 : end;
		if (e - i >= shortest) { /* shorter: nothing can match it */
			if (!copy_text(&buf, &cap, text + i, e - i, false) ||
			    !lowered(&low, &lcap, buf, e - i))
				rc = -1;
			else
				rc = match(r, LINE, live, buf, low, e - i, line, &s);
		}
		i = end + 1;
	}
	/* Each HTML comment. */
	line = 1;
	for (size_t i = at; i < len && rc == 0;) {
		const char *open = memmem(text + i, len - i, "<!--", 4);
		if (!open)
			break;
		size_t from = (size_t)(open - text) + 4;
		line += lines_in(text + i, from - i);
		const char *close = memmem(text + from, len - from, "-->", 3);
		size_t to = close ? (size_t)(close - text) : len;
		if (!copy_text(&buf, &cap, text + from, to - from, true) ||
		    !lowered(&low, &lcap, buf, to - from))
			rc = -1;
		else
			rc = match(r, COMMENT, live, buf, low, to - from, line, &s);
		line += lines_in(text + from, to - from);
		i = close ? to + 3 : len;
	}
	free(buf);
	free(low);
	if (rc < 0) {
		free(s.v);
		return -1;
	}
	if (s.n > 1)
		qsort(s.v, s.n, sizeof *s.v, cmp_finding);
	*out = s.v;
	*n = s.n;
	*more = s.more;
	return 0;
}

int finding_format(struct buf *out, const char *file, const struct finding *f)
{
	return buf_printf(out, "%s:%u: %s: %s: %s\n", file, f->line,
			  finding_level_name(findings_rule_level(f->rule)),
			  findings_rule_id(f->rule), findings_rule_reason(f->rule));
}
