/* Unit tests for core/skill: SKILL.md parsing (DESIGN.md section 2, D1, D3). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "skill.h"

#include "testutil.h"

/* ------------------------------------------------------------- helpers */

/* What skill_read_text gives, which must succeed (the caller frees). */
static char *text_of(const struct skill *s, enum skill_text what, size_t *len)
{
	char *t = NULL;
	size_t n = 0;
	int rc = skill_read_text(s, what, &t, &n);
	if (rc != 0)
		fail_msg("skill_read_text(%s): %s", s->name, strerror(-rc));
	assert_non_null(t);
	assert_int_equal(t[n], '\0');
	if (len)
		*len = n;
	return t;
}

/* The body of s is want, body_len bytes. */
static void assert_body(const struct skill *s, const char *want)
{
	size_t n;
	char *b = text_of(s, SKILL_TEXT_BODY, &n);
	assert_string_equal(b, want);
	assert_int_equal(n, strlen(want));
	assert_int_equal(s->body_len, n);
	free(b);
}

/* SKILL.md of s reads as the len bytes want, file_size of them. */
static void assert_raw(const struct skill *s, const char *want, size_t len)
{
	size_t n;
	char *r = text_of(s, SKILL_TEXT_RAW, &n);
	assert_int_equal(n, len);
	assert_memory_equal(r, want, len);
	assert_int_equal(s->file_size, len);
	free(r);
}

/* The front-matter of s (a new reference), or NULL when it has none. */
static json_t *fm_of(const struct skill *s)
{
	json_t *fm = NULL;
	assert_int_equal(skill_frontmatter(s, &fm), 0);
	return fm;
}

static struct skill *parse_n(const char *dir_name, const char *text, size_t n,
			     const struct skill_limits *lim)
{
	struct skill *s = skill_parse(dir_name, NULL, text, n, lim);
	assert_non_null(s);
	assert_non_null(s->name);
	free(text_of(s, SKILL_TEXT_BODY, NULL)); /* it has a body ("" at least) */
	return s;
}

static struct skill *parse(const char *dir_name, const char *text)
{
	return parse_n(dir_name, text, strlen(text), NULL);
}

static bool has_warning(const struct skill *s, const char *part)
{
	for (size_t i = 0; i < s->warnings.n; i++)
		if (strstr(s->warnings.items[i], part))
			return true;
	return false;
}

/* D1: an invalid skill has an error, no prose and declares no tools. */
static void assert_invalid(const struct skill *s, const char *error_part)
{
	assert_false(s->valid);
	assert_non_null(s->error);
	if (error_part && !strstr(s->error, error_part))
		fail_msg("error '%s' does not mention '%s'", s->error, error_part);
	assert_body(s, "");
	assert_true(s->allowed_tools.declared);
	assert_int_equal(s->allowed_tools.n, 0);
	assert_null(fm_of(s));
	assert_null(s->description);
}

static void assert_grant(const struct tool_decl *d, size_t i, const char *tool,
			 const char *pattern)
{
	assert_true(i < d->n);
	assert_string_equal(d->items[i].tool, tool);
	if (pattern)
		assert_string_equal(d->items[i].pattern, pattern);
	else
		assert_null(d->items[i].pattern);
}

/* Creates <root>/<rel>/SKILL.md holding text; returns <root>/<rel>. */
static char *make_skill(const char *root, const char *rel, const char *text)
{
	char *dir = test_join(root, rel);
	assert_int_equal(mkdir(dir, 0755), 0);
	char *md = test_join(dir, "SKILL.md");
	test_write(md, text, strlen(text));
	free(md);
	return dir;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ------------------------------------------------- file structure */

static void test_no_frontmatter_takes_dir_name_and_whole_file_is_body(void **st)
{
	(void)st;
	const char *text = "# Title\n\nJust prose.\n";
	struct skill *s = parse("plain", text);
	assert_true(s->valid);
	assert_null(s->error);
	assert_string_equal(s->name, "plain");
	assert_body(s, text);
	assert_false(s->allowed_tools.declared);
	assert_null(fm_of(s));
	assert_true(has_warning(s, "no front-matter"));
	assert_raw(s, text, strlen(text));
	skill_unref(s);
}

static void test_D1_frontmatter_not_closed_is_invalid(void **st)
{
	(void)st;
	const char *text = "---\nname: x\ndescription: d\n\nbody\n";
	struct skill *s = parse("x", text);
	assert_invalid(s, "not closed");
	assert_string_equal(s->name, "x");
	assert_raw(s, text, strlen(text)); /* still served byte for byte */
	skill_unref(s);

	s = parse("x", "---");
	assert_invalid(s, "not closed");
	skill_unref(s);
}

static void test_D1_yaml_syntax_error_is_invalid_with_line(void **st)
{
	(void)st;
	/* (an unquoted ': ' in a description is read leniently: see below) */
	struct skill *s = parse("x", "---\nname: x\nlicense: foo: bar\n"
				"allowed-tools: [read]\n---\nbody\n");
	assert_invalid(s, "line 3");
	assert_non_null(strstr(s->error, "mapping values are not allowed"));
	skill_unref(s);
}

static void test_D1_frontmatter_list_is_invalid(void **st)
{
	(void)st;
	struct skill *s = parse("x", "---\n- name: x\n- description: y\n---\nbody\n");
	assert_invalid(s, "a list, not a mapping");
	skill_unref(s);
}

static void test_D1_frontmatter_scalar_is_invalid(void **st)
{
	(void)st;
	struct skill *s = parse("x", "---\njust some text\n---\nbody\n");
	assert_invalid(s, "a string, not a mapping");
	skill_unref(s);
	s = parse("x", "---\n~\n---\nbody\n");
	assert_invalid(s, "not a mapping");
	skill_unref(s);
}

static void test_D1_more_than_one_document_is_invalid(void **st)
{
	(void)st;
	struct skill *s = parse("x", "---\nname: x\n--- \nname: y\n---\nbody\n");
	assert_true(s->valid); /* "--- " closes the front-matter */
	skill_unref(s);
	s = parse("x", "---\nname: x\n--- {name: y}\n---\nbody\n");
	assert_invalid(s, "more than one YAML document");
	skill_unref(s);
}

static void test_empty_frontmatter_is_valid_without_keys(void **st)
{
	(void)st;
	struct skill *s = parse("empty", "---\n# only a comment\n---\nbody\n");
	assert_true(s->valid);
	assert_string_equal(s->name, "empty");
	assert_body(s, "body\n");
	json_t *fm = fm_of(s);
	assert_true(json_is_object(fm));
	assert_int_equal(json_object_size(fm), 0);
	json_decref(fm);
	assert_true(has_warning(s, "no description"));
	skill_unref(s);
}

static void test_dots_line_closes_frontmatter(void **st)
{
	(void)st;
	struct skill *s = parse("x", "---\nname: x\ndescription: d\n...\nthe body\n");
	assert_true(s->valid);
	assert_string_equal(s->description, "d");
	assert_body(s, "the body\n");
	skill_unref(s);
}

static void test_crlf_file_body_normalised_raw_exact(void **st)
{
	(void)st;
	const char *text = "---\r\nname: crlf\r\ndescription: Windows file\r\n"
			   "allowed-tools: Read, Write\r\n---\r\nline one\r\nline two\r\n";
	struct skill *s = parse("crlf", text);
	assert_true(s->valid);
	assert_string_equal(s->name, "crlf");
	assert_string_equal(s->description, "Windows file");
	assert_int_equal(s->allowed_tools.n, 2);
	assert_grant(&s->allowed_tools, 1, "write", NULL);
	assert_body(s, "line one\nline two\n");
	assert_raw(s, text, strlen(text));
	skill_unref(s);
	/* A carriage return alone stays, in the body and at its end. */
	s = parse("cr", "---\nname: cr\ndescription: d\n---\na\rb\r\n\r\rc\r");
	assert_true(s->valid);
	assert_body(s, "a\rb\n\r\rc\r");
	skill_unref(s);
}

static void test_bom_is_skipped_for_parsing_and_kept_in_raw(void **st)
{
	(void)st;
	const char *text = "\xEF\xBB\xBF---\nname: bom\ndescription: d\n---\nbody\n";
	struct skill *s = parse("bom", text);
	assert_true(s->valid);
	assert_string_equal(s->name, "bom");
	assert_string_equal(s->description, "d");
	assert_body(s, "body\n");
	assert_raw(s, text, strlen(text));
	skill_unref(s);

	s = parse("bom", "\xEF\xBB\xBFplain body\n");
	assert_true(s->valid);
	assert_body(s, "plain body\n");
	skill_unref(s);
}

static void test_D1_invalid_utf8_is_invalid(void **st)
{
	(void)st;
	const char *bad[] = {
		"---\nname: x\ndescription: caf\xE9\n---\nbody\n", /* Latin-1 */
		"---\nname: x\n---\nbody \xC0\xAF\n",               /* overlong */
		"---\nname: x\n---\nbody \xED\xA0\x80\n",           /* surrogate */
		"no front-matter \xF4\x90\x80\x80\n",               /* > U+10FFFF */
		"truncated \xE2\x82",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		struct skill *s = parse("x", bad[i]);
		assert_invalid(s, "not valid UTF-8");
		skill_unref(s);
	}
	struct skill *s = parse("x", "---\nname: x\ndescription: \xE2\x82\xAC 5\n---\n\xF0\x9F\x98\x80\n");
	assert_true(s->valid);
	assert_string_equal(s->description, "\xE2\x82\xAC 5");
	skill_unref(s);
}

/* A bad byte is found wherever it lies in a run of ASCII (read eight
 * bytes at a time): the error names its byte. */
static void test_D1_invalid_utf8_found_at_its_byte(void **st)
{
	(void)st;
	for (size_t at = 0; at < 24; at++) {
		char text[64], want[32];
		memset(text, 'a', 40);
		text[at] = (char)0xE9;
		text[40] = '\0';
		struct skill *s = parse("x", text);
		snprintf(want, sizeof want, "line 1, byte %zu)", at);
		assert_invalid(s, want);
		skill_unref(s);
	}
}

static void test_D1_nul_byte_is_invalid(void **st)
{
	(void)st;
	const char text[] = "---\nname: x\n---\nbo\0dy\n";
	struct skill *s = parse_n("x", text, sizeof text - 1, NULL);
	assert_invalid(s, "NUL");
	assert_raw(s, text, sizeof text - 1);
	skill_unref(s);

	/* A NUL written as a YAML escape is refused too. */
	s = parse("x", "---\nname: \"a\\0b\"\n---\nbody\n");
	assert_invalid(s, "NUL");
	skill_unref(s);
}

/* ------------------------------------------------------------- limits */

static void test_D1_file_over_limit_via_load_is_not_read(void **st)
{
	(void)st;
	char *root = test_tmpdir("skilltest");
	size_t n = SKILL_DEFAULT_FILE_MAX + 1;
	struct buf b = {0};
	assert_int_equal(buf_puts(&b, "---\nname: big\ndescription: d\nallowed-tools: [bash]\n---\n"), 0);
	while (b.len < n)
		assert_int_equal(buf_puts(&b, "x"), 0);
	char *dir = test_join(root, "big");
	assert_int_equal(mkdir(dir, 0755), 0);
	char *md = test_join(dir, "SKILL.md");
	test_write(md, b.data, b.len);

	struct skill *s = skill_load(dir, NULL);
	assert_non_null(s);
	assert_invalid(s, "over the limit");
	char *t = NULL;
	assert_int_equal(skill_read_text(s, SKILL_TEXT_RAW, &t, NULL), -ENODATA);
	assert_null(t);
	assert_int_equal(s->file_size, b.len);
	assert_int_equal(s->st_size, (off_t)b.len);
	assert_string_equal(s->name, "big");
	skill_unref(s);

	/* A configured limit applies to skill_parse as well. */
	struct skill_limits lim = {.file_max = 64};
	s = parse_n("big", b.data, 65, &lim);
	assert_invalid(s, "over the limit");
	assert_int_equal(skill_read_text(s, SKILL_TEXT_RAW, &t, NULL), -ENODATA);
	assert_null(t);
	assert_null(s->text); /* not copied */
	skill_unref(s);
	s = parse_n("big", "---\nname: big\n---\nsmall\n", 22, &lim);
	assert_true(s->valid);
	skill_unref(s);

	buf_free(&b);
	free(md);
	free(dir);
	test_rm_tree(root);
}

static void test_D1_frontmatter_over_limit_is_invalid(void **st)
{
	(void)st;
	struct buf b = {0};
	assert_int_equal(buf_puts(&b, "---\nname: x\ndescription: \""), 0);
	while (b.len < SKILL_DEFAULT_FRONTMATTER_MAX + 10)
		assert_int_equal(buf_puts(&b, "y"), 0);
	assert_int_equal(buf_puts(&b, "\"\nallowed-tools: [bash]\n---\nbody\n"), 0);
	struct skill *s = parse_n("x", b.data, b.len, NULL);
	assert_invalid(s, "front-matter is");
	assert_non_null(strstr(s->error, "over the limit"));
	skill_unref(s);

	struct skill_limits lim = {.frontmatter_max = 64 * 1024};
	s = parse_n("x", b.data, b.len, &lim);
	assert_true(s->valid);
	assert_int_equal(s->allowed_tools.n, 1);
	skill_unref(s);
	buf_free(&b);
}

static void test_D1_billion_laughs_is_refused_fast(void **st)
{
	(void)st;
	const char *doc =
		"---\n"
		"name: lol\n"
		"a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n"
		"b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
		"c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
		"d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
		"e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
		"f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
		"g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n"
		"h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\n"
		"i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]\n"
		"---\nbody\n";
	double t0 = now();
	struct skill *s = parse("lol", doc);
	double dt = now() - t0;
	assert_invalid(s, "aliases");
	assert_true(dt < 1.0);
	skill_unref(s);

	/* Long strings repeated by aliases are bounded by bytes as well. */
	struct buf b = {0};
	assert_int_equal(buf_puts(&b, "---\na: &a \""), 0);
	for (int i = 0; i < 7000; i++)
		assert_int_equal(buf_puts(&b, "z"), 0);
	assert_int_equal(buf_puts(&b, "\"\nb: [*a"), 0);
	for (int i = 0; i < 200; i++)
		assert_int_equal(buf_puts(&b, ",*a"), 0);
	assert_int_equal(buf_puts(&b, "]\n---\n"), 0);
	struct skill_limits lim = {.frontmatter_max = 64 * 1024};
	s = parse_n("lol", b.data, b.len, &lim);
	assert_invalid(s, "bytes of text");
	skill_unref(s);
	buf_free(&b);
}

static void test_aliases_within_bounds_are_expanded(void **st)
{
	(void)st;
	struct skill *s = parse("al", "---\nname: al\ndescription: d\n"
				"base: &t [Read, Grep]\nallowed-tools: *t\n"
				"metadata: {tools: *t}\n---\nbody\n");
	assert_true(s->valid);
	assert_int_equal(s->allowed_tools.n, 2);
	assert_grant(&s->allowed_tools, 1, "grep", NULL);
	json_t *fm = fm_of(s);
	json_t *m = json_object_get(json_object_get(fm, "metadata"), "tools");
	assert_int_equal(json_array_size(m), 2);
	json_decref(fm);
	skill_unref(s);

	s = parse("al", "---\na: &a [*a]\n---\nbody\n"); /* self reference */
	assert_invalid(s, "unknown alias");
	skill_unref(s);
}

static void test_D1_deep_nesting_is_invalid_without_crash(void **st)
{
	(void)st;
	size_t depth = 10000;
	struct buf b = {0};
	assert_int_equal(buf_puts(&b, "---\nname: deep\nx: "), 0);
	for (size_t i = 0; i < depth; i++)
		assert_int_equal(buf_puts(&b, "["), 0);
	for (size_t i = 0; i < depth; i++)
		assert_int_equal(buf_puts(&b, "]"), 0);
	assert_int_equal(buf_puts(&b, "\n---\nbody\n"), 0);

	/* With the default limits the front-matter is simply too big. */
	struct skill *s = parse_n("deep", b.data, b.len, NULL);
	assert_invalid(s, "over the limit");
	skill_unref(s);

	/* With room for it, the depth cap refuses it. */
	struct skill_limits lim = {.frontmatter_max = 1 << 20, .file_max = 1 << 21};
	s = parse_n("deep", b.data, b.len, &lim);
	assert_invalid(s, "nested deeper than");
	skill_unref(s);
	buf_free(&b);

	/* Block-style nesting too. */
	assert_int_equal(buf_puts(&b, "---\n"), 0);
	for (size_t i = 0; i < 200; i++) {
		for (size_t j = 0; j < i; j++)
			assert_int_equal(buf_puts(&b, " "), 0);
		assert_int_equal(buf_puts(&b, "k:\n"), 0);
	}
	assert_int_equal(buf_puts(&b, "---\n"), 0);
	s = parse_n("deep", b.data, b.len, &lim);
	assert_invalid(s, "nested deeper than");
	skill_unref(s);
	buf_free(&b);

	/* 64 levels are fine. */
	assert_int_equal(buf_puts(&b, "---\nx: "), 0);
	for (size_t i = 0; i < SKILL_YAML_MAX_DEPTH - 1; i++)
		assert_int_equal(buf_puts(&b, "["), 0);
	for (size_t i = 0; i < SKILL_YAML_MAX_DEPTH - 1; i++)
		assert_int_equal(buf_puts(&b, "]"), 0);
	assert_int_equal(buf_puts(&b, "\n---\n"), 0);
	s = parse_n("deep", b.data, b.len, NULL);
	assert_true(s->valid);
	skill_unref(s);
	buf_free(&b);
}

/* ------------------------------------------------------- allowed-tools */

static void test_D3_allowed_tools_list(void **st)
{
	(void)st;
	struct skill *s = parse("t", "---\nname: t\ndescription: d\n"
				"allowed-tools:\n  - Read\n  - WebFetch\n  - Bash(git diff:*)\n"
				"---\nbody\n");
	assert_true(s->valid);
	assert_true(s->allowed_tools.declared);
	assert_int_equal(s->allowed_tools.n, 3);
	assert_grant(&s->allowed_tools, 0, "read", NULL);
	assert_grant(&s->allowed_tools, 1, "webfetch", NULL);
	assert_grant(&s->allowed_tools, 2, "bash", "git diff");
	assert_string_equal(s->allowed_tools.items[0].raw, "Read");
	assert_int_equal(s->warnings.n, 0);
	skill_unref(s);
}

static void test_D3_allowed_tools_string_split_on_commas_and_spaces(void **st)
{
	(void)st;
	struct skill *s = parse("t", "---\nname: t\ndescription: d\n"
				"allowed-tools: Read, Write  Bash(git diff:*),WebFetch\n"
				"---\nbody\n");
	assert_true(s->valid);
	assert_int_equal(s->allowed_tools.n, 4);
	assert_grant(&s->allowed_tools, 0, "read", NULL);
	assert_grant(&s->allowed_tools, 1, "write", NULL);
	assert_grant(&s->allowed_tools, 2, "bash", "git diff");
	assert_string_equal(s->allowed_tools.items[2].raw, "Bash(git diff:*)");
	assert_grant(&s->allowed_tools, 3, "webfetch", NULL);
	skill_unref(s);
}

static void test_R3_allowed_tools_empty_list_declares_none(void **st)
{
	(void)st;
	struct skill *s = parse("t", "---\nname: t\ndescription: d\nallowed-tools: []\n---\nbody\n");
	assert_true(s->valid);
	assert_true(s->allowed_tools.declared);
	assert_int_equal(s->allowed_tools.n, 0);
	assert_int_equal(s->warnings.n, 0);
	skill_unref(s);
}

/* D3: every other form fails closed: declared, zero tools, a warning. */
static void check_declared_empty(const char *value, const char *warning)
{
	char *text = NULL;
	assert_true(asprintf(&text, "---\nname: t\ndescription: d\nallowed-tools:%s\n"
			     "---\nbody\n", value) > 0);
	struct skill *s = parse("t", text);
	assert_true(s->valid);
	assert_true(s->allowed_tools.declared);
	assert_int_equal(s->allowed_tools.n, 0);
	if (!has_warning(s, warning))
		fail_msg("no warning '%s' for allowed-tools:%s", warning, value);
	skill_unref(s);
	free(text);
}

static void test_D3_allowed_tools_empty_value_declares_none(void **st)
{
	(void)st;
	check_declared_empty("", "an empty value");
	check_declared_empty(" null", "an empty value");
	check_declared_empty(" \"\"", "names no tools");
	check_declared_empty(" ' , '", "names no tools");
}

static void test_D3_allowed_tools_number_declares_none(void **st)
{
	(void)st;
	check_declared_empty(" 42", "a number");
	check_declared_empty(" true", "a boolean");
}

static void test_D3_allowed_tools_mapping_declares_none(void **st)
{
	(void)st;
	check_declared_empty(" {read: true}", "a mapping");
	check_declared_empty("\n  bash: yes", "a mapping");
}

static void test_D3_allowed_tools_list_with_non_string_declares_none(void **st)
{
	(void)st;
	check_declared_empty(" [read, 3]", "item 2 is a number");
	check_declared_empty(" [read, [bash]]", "item 2 is a list");
	check_declared_empty(" [read, ~]", "item 2 is an empty value");
}

static void test_D3_bash_pattern_items(void **st)
{
	(void)st;
	struct tool_grant g;
	assert_int_equal(tool_grant_parse("Bash(git:*)", &g), 0);
	assert_string_equal(g.tool, "bash");
	assert_string_equal(g.pattern, "git");
	assert_string_equal(g.raw, "Bash(git:*)");
	struct tool_decl d = {.declared = true, .items = malloc(sizeof g), .n = 1};
	assert_non_null(d.items);
	d.items[0] = g;
	tool_decl_free(&d);
	assert_false(d.declared);
	assert_int_equal(d.n, 0);

	assert_int_equal(tool_grant_parse("Bash(git diff:*)", &g), 0);
	assert_string_equal(g.tool, "bash");
	assert_string_equal(g.pattern, "git diff");
	free(g.tool), free(g.pattern), free(g.raw);

	assert_int_equal(tool_grant_parse("Bash(npm test*)", &g), 0);
	assert_string_equal(g.pattern, "npm test");
	free(g.tool), free(g.pattern), free(g.raw);

	assert_int_equal(tool_grant_parse(" WebFetch ", &g), 0);
	assert_string_equal(g.tool, "webfetch");
	assert_null(g.pattern);
	assert_string_equal(g.raw, " WebFetch ");
	free(g.tool), free(g.pattern), free(g.raw);

	/* Claude Code's WebFetch(domain:HOST): the pattern keeps "domain:". */
	assert_int_equal(tool_grant_parse("WebFetch(domain:docs.example.com)", &g), 0);
	assert_string_equal(g.tool, "webfetch");
	assert_string_equal(g.pattern, "domain:docs.example.com");
	free(g.tool), free(g.pattern), free(g.raw);

	/* Parentheses always restrict: an empty pattern is not "any". */
	assert_int_equal(tool_grant_parse("Bash(*)", &g), 0);
	assert_string_equal(g.tool, "bash");
	assert_non_null(g.pattern);
	assert_string_equal(g.pattern, "");
	free(g.tool), free(g.pattern), free(g.raw);

	/* A malformed item names no real tool. */
	assert_int_equal(tool_grant_parse("Bash(git diff", &g), 0);
	assert_string_not_equal(g.tool, "bash");
	free(g.tool), free(g.pattern), free(g.raw);

	struct skill *s = parse("t", "---\nname: t\ndescription: d\n"
				"allowed-tools: Bash(git status:*) Bash(git:*) Bash(oops\n---\nb\n");
	assert_int_equal(s->allowed_tools.n, 3);
	assert_grant(&s->allowed_tools, 0, "bash", "git status");
	assert_grant(&s->allowed_tools, 1, "bash", "git");
	assert_string_not_equal(s->allowed_tools.items[2].tool, "bash");
	assert_true(has_warning(s, "not a tool name"));
	skill_unref(s);
}

static void test_D3_hyphenated_allowed_tools_wins(void **st)
{
	(void)st;
	struct skill *s = parse("t", "---\nname: t\ndescription: d\n"
				"allowed_tools: [bash, write]\nallowed-tools: [read]\n---\nb\n");
	assert_int_equal(s->allowed_tools.n, 1);
	assert_grant(&s->allowed_tools, 0, "read", NULL);
	assert_true(has_warning(s, "allowed-tools is used"));
	skill_unref(s);

	s = parse("t", "---\nname: t\ndescription: d\nallowed-tools: []\nallowed_tools: [bash]\n---\nb\n");
	assert_true(s->allowed_tools.declared);
	assert_int_equal(s->allowed_tools.n, 0);
	skill_unref(s);

	s = parse("t", "---\nname: t\ndescription: d\nallowed_tools: Bash\n---\nb\n");
	assert_int_equal(s->allowed_tools.n, 1);
	assert_grant(&s->allowed_tools, 0, "bash", NULL);
	assert_int_equal(s->warnings.n, 0);
	skill_unref(s);
}

static void test_R13_tools_key_parsed_like_allowed_tools(void **st)
{
	(void)st;
	struct skill *s = parse("t", "---\nname: t\ndescription: d\ntools: Read, Bash(ls:*)\n---\nb\n");
	assert_false(s->allowed_tools.declared);
	assert_true(s->tools.declared);
	assert_int_equal(s->tools.n, 2);
	assert_grant(&s->tools, 1, "bash", "ls");
	skill_unref(s);

	s = parse("t", "---\nname: t\ndescription: d\ntools: 7\n---\nb\n");
	assert_true(s->tools.declared);
	assert_int_equal(s->tools.n, 0);
	assert_true(has_warning(s, "tools is a number"));
	skill_unref(s);
}

/* D3: Claude Code tool names resolve to the skillfs tool doing the same
 * job, through one table; the raw item is kept. */
static void test_D3_claude_code_names_map_to_skillfs_tools(void **st)
{
	(void)st;
	struct skill *s = parse("t", "---\nname: t\ndescription: d\n"
				"allowed-tools: [Read, Write, Edit, MultiEdit, \"Bash(git log:*)\", "
				"Glob, Grep, \"WebFetch(domain:example.com)\", AskUserQuestion, "
				"askuserquestion, WebSearch]\n---\nb\n");
	assert_true(s->valid);
	assert_int_equal(s->allowed_tools.n, 11);
	assert_grant(&s->allowed_tools, 0, "read", NULL);
	assert_grant(&s->allowed_tools, 1, "write", NULL);
	assert_grant(&s->allowed_tools, 2, "edit", NULL);
	assert_grant(&s->allowed_tools, 3, "edit", NULL);
	assert_string_equal(s->allowed_tools.items[3].raw, "MultiEdit");
	assert_grant(&s->allowed_tools, 4, "bash", "git log");
	assert_grant(&s->allowed_tools, 5, "glob", NULL);
	assert_grant(&s->allowed_tools, 6, "grep", NULL);
	assert_grant(&s->allowed_tools, 7, "webfetch", "domain:example.com");
	assert_grant(&s->allowed_tools, 8, "ask_user", NULL);
	assert_string_equal(s->allowed_tools.items[8].raw, "AskUserQuestion");
	assert_grant(&s->allowed_tools, 9, "ask_user", NULL);
	/* no skillfs tool: kept as written (lower-cased), so it matches none */
	assert_grant(&s->allowed_tools, 10, "websearch", NULL);
	assert_int_equal(s->warnings.n, 0); /* the resolver warns (grants.c) */
	skill_unref(s);

	bool missing = true;
	assert_string_equal(tool_from_claude("MULTIEDIT", &missing), "edit");
	assert_false(missing);
	assert_string_equal(tool_from_claude("AskUserQuestion", NULL), "ask_user");
	const char *none[] = {"WebSearch", "TodoWrite", "Task", "Agent", "Skill", "NotebookEdit"};
	for (size_t i = 0; i < sizeof none / sizeof *none; i++) {
		missing = false;
		assert_null(tool_from_claude(none[i], &missing));
		assert_true(missing);
	}
	missing = true;
	assert_null(tool_from_claude("teleport", &missing));
	assert_false(missing);
	assert_null(tool_from_claude("ask_user", &missing)); /* already skillfs's */
	assert_false(missing);

	/* a sub-agent's tools: list is mapped the same way, and warns */
	s = parse("t", "---\nname: t\ndescription: d\ntools: [AskUserQuestion, TodoWrite]\n"
		  "---\nb\n");
	assert_grant(&s->tools, 0, "ask_user", NULL);
	assert_true(has_warning(s, "tools: item 'TodoWrite' is a Claude Code tool skillfs "
				"does not have"));
	skill_unref(s);
}

static void test_D3_absent_allowed_tools_is_undeclared(void **st)
{
	(void)st;
	struct skill *s = parse("t", "---\nname: t\ndescription: d\n---\nb\n");
	assert_true(s->valid);
	assert_false(s->allowed_tools.declared);
	assert_false(s->tools.declared);
	skill_unref(s);
}

/* ---------------------------------------------------------------- names */

static void test_name_rules(void **st)
{
	(void)st;
	assert_true(skill_name_valid("pdf"));
	assert_true(skill_name_valid("a-b-9"));
	assert_true(skill_name_valid("0123456789012345678901234567890123456789012345678901234567890123"));
	assert_false(skill_name_valid("01234567890123456789012345678901234567890123456789012345678901234"));
	assert_false(skill_name_valid(""));
	assert_false(skill_name_valid("Pdf"));
	assert_false(skill_name_valid("a--b"));
	assert_false(skill_name_valid("-a"));
	assert_false(skill_name_valid("a-"));
	assert_false(skill_name_valid("a/b"));
	assert_false(skill_name_valid("a_b"));
}

static struct skill *parse_named(const char *dir_name, const char *name)
{
	char *text = NULL;
	assert_true(asprintf(&text, "---\nname: \"%s\"\ndescription: d\n---\nb\n", name) > 0);
	struct skill *s = parse(dir_name, text);
	free(text);
	assert_true(s->valid);
	return s;
}

static void test_name_breaking_rules_is_kept_with_warning(void **st)
{
	(void)st;
	const char *kept[] = {"My-Skill", "my--skill", "-skill", "my skill"};
	for (size_t i = 0; i < sizeof kept / sizeof *kept; i++) {
		struct skill *s = parse_named(kept[i], kept[i]);
		assert_string_equal(s->name, kept[i]);
		assert_true(has_warning(s, "breaks the naming rules"));
		skill_unref(s);
	}
}

static void test_unsafe_name_falls_back_to_dir_name(void **st)
{
	(void)st;
	char long65[66];
	memset(long65, 'a', 65);
	long65[65] = '\0';
	const char *unsafe[] = {"a/b", "../etc", "..", ".", "", long65, "a\\tb"};
	for (size_t i = 0; i < sizeof unsafe / sizeof *unsafe; i++) {
		struct skill *s = parse_named("dir", unsafe[i]);
		assert_string_equal(s->name, "dir");
		if (!has_warning(s, "cannot be used"))
			fail_msg("no warning for name '%s'", unsafe[i]);
		skill_unref(s);
	}
	struct skill *s = parse("dir", "---\nname: [a]\ndescription: d\n---\nb\n");
	assert_string_equal(s->name, "dir");
	assert_true(has_warning(s, "not a string"));
	skill_unref(s);
}

/* Section 2: a skill without a usable front-matter name takes its
 * directory's name, and that name gets the same checks: an unusable one
 * makes the skill invalid (a warning when it already is), a rule break is
 * the same warning a front-matter name gets. */
static void test_dir_name_gets_the_front_matter_name_checks(void **st)
{
	(void)st;
	const char *unusable[] = {"evil\ninjected", "tab\tname", "del\x7F", ""};
	for (size_t i = 0; i < sizeof unusable / sizeof *unusable; i++) {
		struct skill *s = parse(unusable[i], "no fm\n");
		assert_invalid(s, "cannot be used as a skill name");
		assert_non_null(skill_name_unusable(s->name));
		assert_null(strchr(s->error, '\n'));
		skill_unref(s);
		/* An unusable front-matter name falls back to it: the same. */
		s = parse(unusable[i], "---\nname: \"a/b\"\ndescription: d\n---\nb\n");
		assert_invalid(s, "cannot be used as a skill name");
		assert_true(has_warning(s, "cannot be used"));
		skill_unref(s);
	}
	/* Already invalid: the error stays, the name problem is a warning. */
	struct skill *s = parse("bad\nyaml", "---\ndescription: [x\n---\n");
	assert_invalid(s, NULL);
	assert_null(strstr(s->error, "directory name"));
	assert_true(has_warning(s, "cannot be used as a skill name"));
	assert_non_null(skill_name_unusable(s->name));
	skill_unref(s);

	const char *kept[] = {"\xC3\x9Cn\xC3\xAF", "x<y>&", "My-Skill", "a--b"};
	for (size_t i = 0; i < sizeof kept / sizeof *kept; i++) {
		s = parse(kept[i], "no fm\n");
		assert_true(s->valid);
		assert_string_equal(s->name, kept[i]);
		if (!has_warning(s, "breaks the naming rules"))
			fail_msg("no naming-rule warning for '%s'", kept[i]);
		skill_unref(s);
		s = parse(kept[i], "---\ndescription: d\n---\nb\n");
		assert_true(s->valid);
		assert_true(has_warning(s, "breaks the naming rules"));
		skill_unref(s);
	}
	/* A good directory name: no naming warning. */
	s = parse("fine-name", "no fm\n");
	assert_true(s->valid);
	assert_false(has_warning(s, "naming rules"));
	skill_unref(s);
}

static void test_name_differing_from_dir_warns(void **st)
{
	(void)st;
	struct skill *s = parse_named("folder", "other");
	assert_string_equal(s->name, "other");
	assert_string_equal(s->dir_name, "folder");
	assert_true(has_warning(s, "differs from the directory name"));
	skill_unref(s);

	s = parse_named("same", "same");
	assert_int_equal(s->warnings.n, 0);
	skill_unref(s);
}

static void test_missing_description_warns(void **st)
{
	(void)st;
	struct skill *s = parse("n", "---\nname: n\n---\nb\n");
	assert_true(s->valid);
	assert_null(s->description);
	assert_true(has_warning(s, "no description"));
	skill_unref(s);

	s = parse("n", "---\nname: n\ndescription: ''\n---\nb\n");
	assert_true(has_warning(s, "description is empty"));
	skill_unref(s);
}

static void test_missing_description_says_not_listed(void **st)
{
	(void)st;
	static const char *const texts[] = {
		"---\nname: n\n---\nb\n",
		"---\nname: n\ndescription: ''\n---\nb\n",
		"---\nname: n\ndescription: '  '\n---\nb\n",
		"---\nname: n\ndescription: 42\n---\nb\n",
		"no front-matter\n",
	};
	for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
		struct skill *s = parse("n", texts[i]);
		assert_true(s->valid);
		assert_false(skill_has_description(s));
		if (!has_warning(s, "not listed in <available_skills>"))
			fail_msg("no not-listed warning for %s", texts[i]);
		skill_unref(s);
	}
	/* a knowledge skill is never listed: it only says it has none */
	struct skill *s = parse("k", "---\nname: k\ncategory: knowledge\n---\nb\n");
	assert_true(has_warning(s, "no description"));
	assert_false(has_warning(s, "not listed"));
	skill_unref(s);
	s = parse("d", "---\nname: d\ndescription: d\n---\nb\n");
	assert_true(skill_has_description(s));
	assert_int_equal(s->warnings.n, 0);
	skill_unref(s);
}

static void test_description_over_1024_characters_warns(void **st)
{
	(void)st;
	struct buf b = {0};
	assert_int_equal(buf_puts(&b, "---\nname: long\ndescription: "), 0);
	for (int i = 0; i < SKILL_DESCRIPTION_MAX; i++) /* 2 bytes, 1 character */
		assert_int_equal(buf_puts(&b, "\xC3\xA9"), 0);
	assert_int_equal(buf_puts(&b, "\n---\nb\n"), 0);
	struct skill *s = parse("long", b.data);
	assert_true(s->valid);
	assert_int_equal(s->warnings.n, 0); /* 1,024 characters: at the limit */
	skill_unref(s);

	b.len -= strlen("\n---\nb\n");
	assert_int_equal(buf_puts(&b, "x\n---\nb\n"), 0);
	s = parse("long", b.data);
	assert_true(s->valid);
	assert_int_equal(strlen(s->description), 2 * SKILL_DESCRIPTION_MAX + 1);
	assert_true(has_warning(s, "the description is 1025 characters, over the "
				"limit of 1024 characters"));
	skill_unref(s);
	buf_free(&b);
}

/* ------------------------------------------------- lenient description */

static const char dlv_text[] =
	"---\nname: dlv\n"
	"description: Debug Go with Delve (dlv): inspect goroutines\n"
	"allowed-tools: Bash(dlv:*) Read\n---\nbody\n";

static void test_lenient_description_with_colon_is_plain_text(void **st)
{
	(void)st;
	struct skill *s = parse("dlv", dlv_text);
	assert_true(s->valid);
	assert_null(s->error);
	assert_string_equal(s->description,
			    "Debug Go with Delve (dlv): inspect goroutines");
	assert_true(has_warning(s, "front-matter line 3: the description's value "
				"holds ': '"));
	assert_true(has_warning(s, "read as plain text"));
	/* every other key read as written: allowed-tools counts */
	assert_true(s->allowed_tools.declared);
	assert_int_equal(s->allowed_tools.n, 2);
	assert_string_equal(s->allowed_tools.items[0].tool, "bash");
	assert_string_equal(s->allowed_tools.items[0].pattern, "dlv");
	assert_string_equal(s->allowed_tools.items[1].tool, "read");
	assert_body(s, "body\n");
	json_t *fm = fm_of(s);
	assert_string_equal(json_string_value(json_object_get(fm, "description")),
			    s->description);
	json_decref(fm);
	skill_unref(s);

	/* quotes, backslashes, a comment, CRLF and an anchor nothing uses */
	s = parse("q", "---\r\nname: q\r\ndescription: &d Use \"it\": a\\b 'x' "
		  "# a comment\r\nlicense: MIT\r\n---\r\nb\r\n");
	assert_true(s->valid);
	assert_string_equal(s->description, "Use \"it\": a\\b 'x'");
	assert_string_equal(s->license, "MIT");
	skill_unref(s);
}

static void test_lenient_description_never_other_keys(void **st)
{
	(void)st;
	/* a broken allowed-tools line is still invalid */
	struct skill *s = parse("t", "---\nname: t\ndescription: d\n"
				"allowed-tools: Bash(git: diff) Read: all\n---\nb\n");
	assert_invalid(s, "line 4");
	skill_unref(s);
	/* a second broken line after a lenient description: still invalid
	 * (one retry, same strict rules) */
	s = parse("t", "---\nname: t\ndescription: a: b\nlicense: c: d\n---\nb\n");
	assert_invalid(s, "line 3");
	skill_unref(s);
	/* the value would reach allowed-tools through an anchor: refused */
	s = parse("t", "---\nname: t\ndescription: &t Bash, Read: all files\n"
		  "allowed-tools: *t\n---\nb\n");
	assert_invalid(s, "line 3");
	assert_non_null(strstr(s->error, "would change the key 'allowed-tools'"));
	skill_unref(s);
	/* a nested description key is not the top-level one */
	s = parse("t", "---\nname: t\nmetadata:\n  description: a: b\n---\nb\n");
	assert_invalid(s, "line 4");
	skill_unref(s);
	/* a duplicate description is still a duplicate: the retry fails */
	s = parse("t", "---\nname: t\ndescription: a: b\ndescription: c\n---\nb\n");
	assert_invalid(s, "line 3");
	skill_unref(s);
}

static void test_lenient_description_not_in_multiline_or_flow(void **st)
{
	(void)st;
	static const char *const texts[] = {
		/* ': ' on a continuation line of a multi-line plain value */
		"---\nname: t\ndescription: Debug Go\n  with Delve (dlv): inspect\n---\nb\n",
		/* ': ' on the first line, a continuation after it */
		"---\nname: t\ndescription: Debug (dlv): inspect\n  goroutines\n---\nb\n",
		/* inside a flow mapping */
		"---\n{name: t,\ndescription: a: b}\n---\nb\n",
		/* inside a flow sequence */
		"---\nallowed-tools: [Read,\ndescription: a: b, Bash]\n---\nb\n",
		/* a quoted value is what it says */
		"---\nname: t\ndescription: \"a\": b\n---\nb\n",
		/* indented: not at column 0 */
		"---\n name: t\n description: a: b\n---\nb\n",
	};
	for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
		struct skill *s = parse("t", texts[i]);
		if (s->valid)
			fail_msg("read leniently: %s", texts[i]);
		assert_invalid(s, "YAML error");
		assert_false(has_warning(s, "plain text"));
		skill_unref(s);
	}
	/* the same values, each on one line of a block mapping at column 0,
	 * are read as plain text: only the context above makes the difference */
	static const char *const one_line[] = {
		"---\nname: t\ndescription: Debug Go with Delve (dlv): inspect\n---\nb\n",
		"---\nname: t\ndescription: Debug (dlv): inspect goroutines\n---\nb\n",
		"---\nname: t\ndescription: a: b}\n---\nb\n",
		"---\nallowed-tools: [Read]\ndescription: a: b, Bash]\n---\nb\n",
	};
	for (size_t i = 0; i < sizeof one_line / sizeof *one_line; i++) {
		struct skill *s = parse("t", one_line[i]);
		if (!s->valid || !has_warning(s, "plain text"))
			fail_msg("not read leniently: %s", one_line[i]);
		skill_unref(s);
	}
}

/* ----------------------------------------------------------- other keys */

static void test_category_knowledge(void **st)
{
	(void)st;
	struct skill *s = parse("k", "---\nname: k\ndescription: d\ncategory: knowledge\n---\nb\n");
	assert_int_equal(s->category, SKILL_KNOWLEDGE);
	assert_string_equal(skill_category_name(s->category), "knowledge");
	assert_int_equal(s->warnings.n, 0);
	skill_unref(s);

	s = parse("k", "---\nname: k\ndescription: d\n---\nb\n");
	assert_int_equal(s->category, SKILL_ACTION);
	skill_unref(s);

	s = parse("k", "---\nname: k\ndescription: d\ncategory: reference\n---\nb\n");
	assert_int_equal(s->category, SKILL_ACTION);
	assert_true(has_warning(s, "neither action nor knowledge"));
	skill_unref(s);
}

static void test_inline_true(void **st)
{
	(void)st;
	struct skill *s = parse("i", "---\nname: i\ndescription: d\ninline: true\n---\nb\n");
	assert_int_equal(s->inline_flag, 1);
	skill_unref(s);
	s = parse("i", "---\nname: i\ndescription: d\ninline: false\n---\nb\n");
	assert_int_equal(s->inline_flag, 0);
	skill_unref(s);
	s = parse("i", "---\nname: i\ndescription: d\n---\nb\n");
	assert_int_equal(s->inline_flag, -1);
	skill_unref(s);
	s = parse("i", "---\nname: i\ndescription: d\ninline: \"true\"\n---\nb\n");
	assert_int_equal(s->inline_flag, -1);
	assert_true(has_warning(s, "'inline' is a string"));
	skill_unref(s);
}

static void test_R15_user_invocable_false(void **st)
{
	(void)st;
	struct skill *s = parse("u", "---\nname: u\ndescription: d\nuser-invocable: false\n"
				"disable-model-invocation: true\n---\nb\n");
	assert_false(s->user_invocable);
	assert_true(s->disable_model_invocation);
	skill_unref(s);

	s = parse("u", "---\nname: u\ndescription: d\n---\nb\n");
	assert_true(s->user_invocable);
	assert_false(s->disable_model_invocation);
	skill_unref(s);

	/* A wrong type keeps the default, with a warning. */
	s = parse("u", "---\nname: u\ndescription: d\nuser-invocable: 0\n"
		  "disable-model-invocation: yes\n---\nb\n");
	assert_true(s->user_invocable);
	assert_false(s->disable_model_invocation);
	assert_true(has_warning(s, "'user-invocable' is a number"));
	assert_true(has_warning(s, "'disable-model-invocation' is a string"));
	skill_unref(s);
}

static void test_sub_skills_list_deduped(void **st)
{
	(void)st;
	struct skill *s = parse("p", "---\nname: p\ndescription: d\nsub-skills: [a, b, a, 3]\n---\nb\n");
	assert_int_equal(s->sub_skill_refs.n, 2);
	assert_string_equal(s->sub_skill_refs.items[0], "a");
	assert_string_equal(s->sub_skill_refs.items[1], "b");
	assert_true(has_warning(s, "more than once"));
	assert_true(has_warning(s, "item 4 is a number"));
	skill_unref(s);

	s = parse("p", "---\nname: p\ndescription: d\nsub-skills: a\n---\nb\n");
	assert_int_equal(s->sub_skill_refs.n, 0);
	assert_true(has_warning(s, "not a list"));
	skill_unref(s);
}

static void test_unknown_keys_kept_and_values_typed(void **st)
{
	(void)st;
	struct skill *s = parse("u", "---\nname: u\ndescription: d\nlicense: MIT\n"
				"compatibility: needs git\nversion: 1.5\nx-custom: {a: [1, two]}\n"
				"metadata:\n  author: me\n  count: 3\n  flag: true\n  quoted: \"3\"\n"
				"arguments: [file]\n---\nb\n");
	assert_true(s->valid);
	assert_string_equal(s->license, "MIT");
	assert_string_equal(s->compatibility, "needs git");
	json_t *fm = fm_of(s);
	assert_true(json_is_real(json_object_get(fm, "version")));
	json_t *custom = json_object_get(json_object_get(fm, "x-custom"), "a");
	assert_int_equal(json_array_size(custom), 2);
	assert_int_equal(json_integer_value(json_array_get(custom, 0)), 1);
	assert_string_equal(json_string_value(json_array_get(custom, 1)), "two");
	assert_string_equal(json_string_value(json_object_get(fm, "name")), "u");
	json_t *meta = json_object_get(fm, "metadata");
	assert_string_equal(json_string_value(json_object_get(meta, "author")), "me");
	assert_int_equal(json_integer_value(json_object_get(meta, "count")), 3);
	assert_true(json_is_true(json_object_get(meta, "flag")));
	assert_string_equal(json_string_value(json_object_get(meta, "quoted")), "3");
	assert_string_equal(json_string_value(json_array_get(json_object_get(fm, "arguments"), 0)),
			    "file");
	assert_int_equal(s->warnings.n, 0);
	json_decref(fm);
	skill_unref(s);
}

static void test_wrong_type_on_string_key_warns(void **st)
{
	(void)st;
	struct skill *s = parse("w", "---\nname: w\ndescription: [a, b]\nlicense: 3\n---\nb\n");
	assert_true(s->valid);
	assert_null(s->description);
	assert_null(s->license);
	assert_true(has_warning(s, "'description' is a list"));
	assert_true(has_warning(s, "'license' is a number"));
	skill_unref(s);
}

/* D1: a key given twice in a mapping makes the front-matter invalid (it
 * used to warn and keep the last value, so a second allowed-tools could
 * widen the first). */
static void test_D1_duplicate_key_is_invalid(void **st)
{
	(void)st;
	struct skill *s = parse("d", "---\nname: d\ndescription: one\ndescription: two\n---\nb\n");
	assert_invalid(s, "front-matter line 4: duplicate key 'description'");
	assert_string_equal(s->name, "d");
	skill_unref(s);

	/* the second value would widen the grant: the skill declares [] */
	s = parse("d", "---\nname: d\ndescription: d\nallowed-tools: []\n"
		  "allowed-tools: [bash]\n---\nb\n");
	assert_invalid(s, "line 5: duplicate key 'allowed-tools'");
	skill_unref(s);
	s = parse("d", "---\nname: d\ndescription: d\nallowed-tools: [read]\n"
		  "tools: [read]\nallowed-tools: Bash\n---\nb\n");
	assert_invalid(s, "line 6: duplicate key 'allowed-tools'");
	assert_int_equal(s->tools.n, 0);
	skill_unref(s);

	/* however the key is written */
	s = parse("d", "---\nname: d\ndescription: d\n\"allowed-tools\": []\n"
		  "'allowed-tools': [bash]\n---\nb\n");
	assert_invalid(s, "line 5: duplicate key 'allowed-tools'");
	skill_unref(s);
	s = parse("d", "---\n{name: d, description: d, allowed-tools: [], allowed-tools: [bash]}\n---\nb\n");
	assert_invalid(s, "duplicate key 'allowed-tools'");
	skill_unref(s);

	/* nested mappings too, in a mapping or in a list */
	s = parse("d", "---\nname: d\ndescription: d\nmetadata:\n  owner: a\n  owner: b\n---\nb\n");
	assert_invalid(s, "line 6: duplicate key 'owner'");
	skill_unref(s);
	s = parse("d", "---\nname: d\ndescription: d\narguments:\n  - {n: 1, n: 2}\n---\nb\n");
	assert_invalid(s, "line 5: duplicate key 'n'");
	skill_unref(s);

	/* the same key in two different mappings is no duplicate */
	s = parse("d", "---\nname: d\ndescription: d\nmetadata:\n  name: x\n"
		  "  sub: {name: y}\n---\nb\n");
	assert_true(s->valid);
	assert_string_equal(s->name, "d");
	skill_unref(s);

	/* allowed-tools beside allowed_tools is not a duplicate (D3) */
	s = parse("d", "---\nname: d\ndescription: d\nallowed-tools: [read]\n"
		  "allowed_tools: [bash]\n---\nb\n");
	assert_true(s->valid);
	assert_int_equal(s->allowed_tools.n, 1);
	assert_grant(&s->allowed_tools, 0, "read", NULL);
	skill_unref(s);
}

static void test_skill_to_json_has_every_field(void **st)
{
	(void)st;
	struct skill *s = parse("j", "---\nname: j\ndescription: d\nallowed-tools: [Bash(git:*)]\n"
				"extra: 1\n---\nbody\n");
	json_t *j = skill_to_json(s);
	assert_non_null(j);
	const char *keys[] = {"name", "dir_name", "valid", "error", "warnings",
		"description", "license", "compatibility", "metadata", "arguments",
		"allowed_tools", "tools", "inline", "sub_skills", "category",
		"disable_model_invocation", "user_invocable", "frontmatter",
		"body_bytes", "file_bytes", "directory_sub_skills"};
	for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
		if (!json_object_get(j, keys[i]))
			fail_msg("skill.json lacks %s", keys[i]);
	assert_true(json_is_true(json_object_get(j, "valid")));
	json_t *at = json_array_get(json_object_get(j, "allowed_tools"), 0);
	assert_string_equal(json_string_value(json_object_get(at, "tool")), "bash");
	assert_string_equal(json_string_value(json_object_get(at, "pattern")), "git");
	assert_string_equal(json_string_value(json_object_get(at, "raw")), "Bash(git:*)");
	assert_true(json_is_null(json_object_get(j, "tools")));
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "frontmatter"), "extra")), 1);
	assert_int_equal(json_integer_value(json_object_get(j, "body_bytes")), 5);
	assert_string_equal(json_string_value(json_object_get(j, "category")), "action");
	char *dump = json_dumps(j, 0);
	assert_non_null(dump);
	free(dump);
	json_decref(j);
	skill_unref(s);

	s = parse("bad", "---\nname: [\n---\nb\n");
	j = skill_to_json(s);
	assert_non_null(j);
	assert_true(json_is_false(json_object_get(j, "valid")));
	assert_true(json_is_string(json_object_get(j, "error")));
	assert_int_equal(json_array_size(json_object_get(j, "allowed_tools")), 0);
	assert_true(json_is_array(json_object_get(j, "allowed_tools")));
	json_decref(j);
	skill_unref(s);
}

static void test_refcount(void **st)
{
	(void)st;
	struct skill *s = parse("r", "---\nname: r\n---\nb\n");
	assert_ptr_equal(skill_ref(s), s);
	assert_int_equal(s->refs, 2);
	skill_unref(s);
	assert_int_equal(s->refs, 1);
	skill_unref(s);
	skill_unref(NULL);
}

/* ------------------------------------------------------------ loading */

static void test_load_directory_sub_skills(void **st)
{
	(void)st;
	char *root = test_tmpdir("skilltest");
	char *dir = make_skill(root, "parent", "---\nname: parent\ndescription: p\n---\nP\n");
	char *skills = test_join(dir, "skills");
	assert_int_equal(mkdir(skills, 0755), 0);
	free(make_skill(skills, "zeta", "---\nname: zeta\ndescription: z\n---\nZ\n"));
	free(make_skill(skills, "alpha", "---\nname: alpha\ndescription: a\n---\nA\n"));
	char *nomd = test_join(skills, "notes");
	assert_int_equal(mkdir(nomd, 0755), 0);
	/* Deeper levels are not loaded. */
	char *deeper = test_join(skills, "alpha/skills");
	assert_int_equal(mkdir(deeper, 0755), 0);
	free(make_skill(deeper, "inner", "---\nname: inner\n---\nI\n"));

	struct skill *s = skill_load(dir, NULL);
	assert_non_null(s);
	assert_true(s->valid);
	assert_string_equal(s->name, "parent");
	assert_string_equal(s->dir, dir);
	assert_null(s->parent);
	assert_int_equal(s->nsubs, 2);
	assert_string_equal(s->subs[0]->name, "alpha");
	assert_string_equal(s->subs[1]->name, "zeta");
	assert_string_equal(s->subs[0]->parent, "parent");
	assert_body(s->subs[0], "A\n"); /* read from its file */
	assert_int_equal(s->subs[0]->nsubs, 0);
	json_t *j = skill_to_json(s);
	assert_string_equal(json_string_value(json_array_get(json_object_get(j, "directory_sub_skills"), 1)), "zeta");
	json_decref(j);
	skill_unref(s);

	/* A trailing slash changes neither the name nor the directory. */
	char *slashed = NULL;
	assert_true(asprintf(&slashed, "%s//", dir) > 0);
	s = skill_load(slashed, NULL);
	assert_non_null(s);
	assert_string_equal(s->dir_name, "parent");
	assert_string_equal(s->dir, dir);
	skill_unref(s);
	free(slashed);

	free(deeper);
	free(nomd);
	free(skills);
	free(dir);
	test_rm_tree(root);
}

/* Section 2: two directory sub-skills of one name cannot both be shown
 * under sub-skills/<name>: the first by directory name is used, the other
 * is not loaded, and the parent warns naming both. A sub-skill whose name
 * cannot be used is not loaded either, with a warning. */
static void test_load_duplicate_and_unusable_sub_skill_names(void **st)
{
	(void)st;
	char *root = test_tmpdir("skilltest");
	char *dir = make_skill(root, "p", "---\nname: p\ndescription: p\n---\nP\n");
	char *skills = test_join(dir, "skills");
	assert_int_equal(mkdir(skills, 0755), 0);
	free(make_skill(skills, "child2", "---\nname: child\ndescription: c\n---\nC2\n"));
	free(make_skill(skills, "child", "---\nname: child\ndescription: c\n---\nC1\n"));
	free(make_skill(skills, "b", "---\nname: child\ndescription: c\n---\nB\n"));
	free(make_skill(skills, "tab\tsub", "no front-matter\n"));
	free(make_skill(skills, "other", "---\nname: other\ndescription: o\n---\nO\n"));

	struct skill *s = skill_load(dir, NULL);
	assert_non_null(s);
	assert_true(s->valid);
	assert_int_equal(s->nsubs, 2);
	assert_string_equal(s->subs[0]->name, "child");
	assert_string_equal(s->subs[0]->dir_name, "b"); /* "b" < "child" < "child2" */
	assert_body(s->subs[0], "B\n");
	assert_string_equal(s->subs[1]->name, "other");
	for (size_t i = 0; i < s->warnings.n; i++)
		assert_null(strchr(s->warnings.items[i], '\t'));
	size_t dup = 0;
	for (size_t i = 0; i < s->warnings.n; i++) {
		const char *w = s->warnings.items[i];
		if (strstr(w, "both named 'child'")) {
			dup++;
			assert_non_null(strstr(w, "only 'skills/b' (the first by directory name)"));
		}
	}
	assert_int_equal(dup, 2);
	assert_true(has_warning(s, "'skills/b' and 'skills/child' are both named"));
	assert_true(has_warning(s, "'skills/b' and 'skills/child2' are both named"));
	assert_true(has_warning(s, "'skills/tab\\x09sub' is not loaded"));
	json_t *j = skill_to_json(s);
	json_t *subs = json_object_get(j, "directory_sub_skills");
	assert_int_equal(json_array_size(subs), 2);
	assert_string_equal(json_string_value(json_array_get(subs, 0)), "child");
	assert_string_equal(json_string_value(json_array_get(subs, 1)), "other");
	json_decref(j);
	skill_unref(s);

	free(skills);
	free(dir);
	test_rm_tree(root);
}

static void test_load_refuses_symlinked_skill_md(void **st)
{
	(void)st;
	char *root = test_tmpdir("skilltest");
	char *real = test_join(root, "real.md");
	const char *text = "---\nname: l\nallowed-tools: [bash]\n---\nb\n";
	test_write(real, text, strlen(text));
	char *dir = test_join(root, "linked");
	assert_int_equal(mkdir(dir, 0755), 0);
	char *md = test_join(dir, "SKILL.md");
	assert_int_equal(symlink(real, md), 0);
	struct skill *s = skill_load(dir, NULL);
	assert_non_null(s);
	assert_invalid(s, "symbolic link");
	assert_string_equal(s->name, "linked");
	skill_unref(s);

	char *missing = test_join(root, "missing");
	assert_int_equal(mkdir(missing, 0755), 0);
	s = skill_load(missing, NULL);
	assert_non_null(s);
	assert_invalid(s, "does not exist");
	skill_unref(s);

	/* A FIFO is refused without blocking. */
	char *fifo_dir = test_join(root, "fifo");
	assert_int_equal(mkdir(fifo_dir, 0755), 0);
	char *fifo = test_join(fifo_dir, "SKILL.md");
	assert_int_equal(mkfifo(fifo, 0644), 0);
	s = skill_load(fifo_dir, NULL);
	assert_non_null(s);
	assert_invalid(s, "not a regular file");
	skill_unref(s);

	s = skill_load(NULL, NULL);
	assert_non_null(s);
	assert_false(s->valid);
	skill_unref(s);

	free(fifo);
	free(fifo_dir);
	free(missing);
	free(md);
	free(dir);
	free(real);
	test_rm_tree(root);
}

static void test_same_file_tracks_identity(void **st)
{
	(void)st;
	char *root = test_tmpdir("skilltest");
	char *dir = make_skill(root, "id", "---\nname: id\ndescription: d\n---\nb\n");
	char *md = test_join(dir, "SKILL.md");
	struct skill *s = skill_load(dir, NULL);
	assert_non_null(s);
	struct stat sb;
	assert_int_equal(stat(md, &sb), 0);
	assert_true(skill_same_file(s, &sb));
	const char *text = "---\nname: id\ndescription: changed, longer\n---\nb\n";
	test_write(md, text, strlen(text));
	assert_int_equal(stat(md, &sb), 0);
	assert_false(skill_same_file(s, &sb));
	skill_unref(s);
	free(md);
	free(dir);
	test_rm_tree(root);
}

static char *corpus_dir(void)
{
	const char *src = getenv("SKILLFS_SOURCE_ROOT");
	char *p = NULL;
	assert_true(asprintf(&p, "%s/../shared/corpus", src && *src ? src : ".") > 0);
	return p;
}

static int corpus_count;

static int corpus_file(const char *path, const struct stat *sb, int flag,
		       struct FTW *ftw)
{
	if (flag != FTW_F || !S_ISREG(sb->st_mode))
		return 0;
	const char *base = path + ftw->base;
	/* Every file through the parser: no crash, whatever it holds. */
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	char *data = malloc((size_t)sb->st_size + 1);
	assert_non_null(data);
	assert_int_equal(read(fd, data, (size_t)sb->st_size), sb->st_size);
	close(fd);
	struct skill *p = skill_parse("corpus", NULL, data, (size_t)sb->st_size, NULL);
	assert_non_null(p);
	json_t *j = skill_to_json(p);
	assert_non_null(j);
	json_decref(j);
	if (strcmp(base, "SKILL.md") != 0) {
		skill_unref(p);
		free(data);
		return 0;
	}

	char *dir = strndup(path, ftw->base - 1);
	assert_non_null(dir);
	struct skill *s = skill_load(dir, NULL);
	assert_non_null(s);
	if (!s->valid)
		fail_msg("%s is invalid: %s", path, s->error);
	assert_string_equal(s->name, dir + strlen(dir) - strlen(s->dir_name));
	assert_non_null(s->description);
	assert_false(s->allowed_tools.declared);
	/* Read again from the file: the bytes, and the body the bytes give. */
	assert_raw(s, data, (size_t)sb->st_size);
	assert_true(s->body_len > 0);
	char *body = text_of(p, SKILL_TEXT_BODY, NULL);
	assert_body(s, body);
	free(body);
	skill_unref(s);
	skill_unref(p);
	free(data);
	free(dir);
	corpus_count++;
	return 0;
}

static void test_corpus_superpowers_all_valid(void **st)
{
	(void)st;
	char *corpus = corpus_dir();
	char *sp = test_join(corpus, "superpowers");
	struct stat sb;
	if (stat(sp, &sb) < 0) {
		/* CI always has it: there a missing corpus is a failure. */
		const char *ci = getenv("CI"), *req = getenv("SKILLFS_REQUIRE_CORPUS");
		if ((ci && strcmp(ci, "true") == 0) || (req && *req))
			fail_msg("the skills corpus is missing: looked for %s", sp);
		print_message("corpus not found under SKILLFS_SOURCE_ROOT/../shared; "
			      "skipped\n");
		free(sp);
		free(corpus);
		skip();
	}
	corpus_count = 0;
	assert_int_equal(nftw(sp, corpus_file, 16, FTW_PHYS), 0);
	assert_true(corpus_count >= 14);
	free(sp);
	free(corpus);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_frontmatter_takes_dir_name_and_whole_file_is_body),
		cmocka_unit_test(test_D1_frontmatter_not_closed_is_invalid),
		cmocka_unit_test(test_D1_yaml_syntax_error_is_invalid_with_line),
		cmocka_unit_test(test_D1_frontmatter_list_is_invalid),
		cmocka_unit_test(test_D1_frontmatter_scalar_is_invalid),
		cmocka_unit_test(test_D1_more_than_one_document_is_invalid),
		cmocka_unit_test(test_empty_frontmatter_is_valid_without_keys),
		cmocka_unit_test(test_dots_line_closes_frontmatter),
		cmocka_unit_test(test_crlf_file_body_normalised_raw_exact),
		cmocka_unit_test(test_bom_is_skipped_for_parsing_and_kept_in_raw),
		cmocka_unit_test(test_D1_invalid_utf8_is_invalid),
		cmocka_unit_test(test_D1_invalid_utf8_found_at_its_byte),
		cmocka_unit_test(test_D1_nul_byte_is_invalid),
		cmocka_unit_test(test_D1_file_over_limit_via_load_is_not_read),
		cmocka_unit_test(test_D1_frontmatter_over_limit_is_invalid),
		cmocka_unit_test(test_D1_billion_laughs_is_refused_fast),
		cmocka_unit_test(test_aliases_within_bounds_are_expanded),
		cmocka_unit_test(test_D1_deep_nesting_is_invalid_without_crash),
		cmocka_unit_test(test_D3_allowed_tools_list),
		cmocka_unit_test(test_D3_allowed_tools_string_split_on_commas_and_spaces),
		cmocka_unit_test(test_R3_allowed_tools_empty_list_declares_none),
		cmocka_unit_test(test_D3_allowed_tools_empty_value_declares_none),
		cmocka_unit_test(test_D3_allowed_tools_number_declares_none),
		cmocka_unit_test(test_D3_allowed_tools_mapping_declares_none),
		cmocka_unit_test(test_D3_allowed_tools_list_with_non_string_declares_none),
		cmocka_unit_test(test_D3_bash_pattern_items),
		cmocka_unit_test(test_D3_hyphenated_allowed_tools_wins),
		cmocka_unit_test(test_R13_tools_key_parsed_like_allowed_tools),
		cmocka_unit_test(test_D3_claude_code_names_map_to_skillfs_tools),
		cmocka_unit_test(test_D3_absent_allowed_tools_is_undeclared),
		cmocka_unit_test(test_name_rules),
		cmocka_unit_test(test_name_breaking_rules_is_kept_with_warning),
		cmocka_unit_test(test_unsafe_name_falls_back_to_dir_name),
		cmocka_unit_test(test_dir_name_gets_the_front_matter_name_checks),
		cmocka_unit_test(test_name_differing_from_dir_warns),
		cmocka_unit_test(test_missing_description_warns),
		cmocka_unit_test(test_missing_description_says_not_listed),
		cmocka_unit_test(test_description_over_1024_characters_warns),
		cmocka_unit_test(test_lenient_description_with_colon_is_plain_text),
		cmocka_unit_test(test_lenient_description_never_other_keys),
		cmocka_unit_test(test_lenient_description_not_in_multiline_or_flow),
		cmocka_unit_test(test_category_knowledge),
		cmocka_unit_test(test_inline_true),
		cmocka_unit_test(test_R15_user_invocable_false),
		cmocka_unit_test(test_sub_skills_list_deduped),
		cmocka_unit_test(test_unknown_keys_kept_and_values_typed),
		cmocka_unit_test(test_wrong_type_on_string_key_warns),
		cmocka_unit_test(test_D1_duplicate_key_is_invalid),
		cmocka_unit_test(test_skill_to_json_has_every_field),
		cmocka_unit_test(test_refcount),
		cmocka_unit_test(test_load_directory_sub_skills),
		cmocka_unit_test(test_load_duplicate_and_unusable_sub_skill_names),
		cmocka_unit_test(test_load_refuses_symlinked_skill_md),
		cmocka_unit_test(test_same_file_tracks_identity),
		cmocka_unit_test(test_corpus_superpowers_all_valid),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
