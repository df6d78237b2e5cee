/* Unit tests for core/catalog: the skill catalogue built from the sources of
 * a config (DESIGN.md section 2, D1, D2). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "catalog.h"
#include "config.h"
#include "discover.h"
#include "strlist.h"

#include "testutil.h"

/* ------------------------------------------------------------- helpers */

/* Each test gets a fresh temporary directory as its state; teardown
 * removes it even when the test failed. */
static int setup(void **state)
{
	/* canonical, so the paths the catalogue stores can be predicted */
	*state = test_tmpdir("catalogtest");
	return 0;
}

static int teardown(void **state)
{
	test_rm_tree(*state);
	return 0;
}

static void make_dir(const char *root, const char *rel)
{
	char *d = test_join(root, rel);
	assert_int_equal(mkdir(d, 0755), 0);
	free(d);
}

/* Creates <root>/<rel>/SKILL.md holding text (<root>/<rel> must not exist). */
static void make_skill(const char *root, const char *rel, const char *text)
{
	make_dir(root, rel);
	char *dir = test_join(root, rel);
	char *md = test_join(dir, "SKILL.md");
	test_write_text(md, text);
	free(md);
	free(dir);
}

/* A simple valid SKILL.md text (static storage, overwritten by each call). */
static const char *skill_md(const char *name, const char *extra)
{
	static char buf[1024];
	snprintf(buf, sizeof buf, "---\nname: %s\ndescription: the %s skill\n%s---\nBody of %s.\n",
		 name, name, extra ? extra : "", name);
	return buf;
}

static struct config *parse_config(const char *base, const char *yaml)
{
	struct config *c = NULL;
	char *err = NULL;
	int rc = config_parse(yaml, strlen(yaml), "config.yaml", base, &c, &err);
	if (rc != 0)
		fail_msg("config_parse: %s", err ? err : "(no message)");
	assert_non_null(c);
	return c;
}

static struct config *default_config(const char *const *dirs, size_t n)
{
	struct config *c = config_default(dirs, n);
	assert_non_null(c);
	return c;
}

static struct catalog *build(const struct config *c, const struct catalog *prev,
			     const struct strlist *dirty)
{
	struct skill_limits lim = { 0 };
	struct catalog *cat = catalog_build(c, prev, &lim, dirty);
	assert_non_null(cat);
	/* Every catalogue is sorted by name with unique names. */
	for (size_t i = 1; i < cat->n; i++)
		assert_true(strcmp(cat->entries[i - 1].skill->name, cat->entries[i].skill->name) < 0);
	return cat;
}

static const struct catalog_entry *must_find(const struct catalog *cat, const char *name)
{
	const struct catalog_entry *e = catalog_find(cat, name);
	if (!e)
		fail_msg("skill '%s' is not in the catalogue", name);
	return e;
}

static bool list_has_part(const struct strlist *l, const char *a, const char *b)
{
	for (size_t i = 0; i < l->n; i++)
		if (strstr(l->items[i], a) && (!b || strstr(l->items[i], b)))
			return true;
	return false;
}

static const char *ref_name(const struct catalog *cat, const struct catalog_entry *e, size_t k)
{
	assert_true(k < e->nref_subs);
	assert_true(e->ref_subs[k] < cat->n);
	return cat->entries[e->ref_subs[k]].skill->name;
}

/* --------------------------------------------------------- discovery */

/* Section 2: each immediate subdirectory holding SKILL.md is a skill;
 * hidden directories, directories without SKILL.md, plain files and deeper
 * SKILL.md files are not. */
static void test_sec2_immediate_subdirs_with_skill_md(void **state)
{
	const char *root = *state;
	make_dir(root, "src");
	char *src = test_join(root, "src");
	make_skill(src, "pdf", skill_md("pdf", NULL));
	make_skill(src, "review", skill_md("review", NULL));
	make_skill(src, ".hidden", skill_md("hidden", NULL));
	make_dir(src, "no-skill-md");
	make_dir(src, "no-skill-md/deeper");
	make_skill(src, "no-skill-md/deeper/nested", skill_md("nested", NULL));
	char *f = test_join(src, "loose-file");
	test_write_text(f, "not a skill\n");
	free(f);
	/* A directory whose SKILL.md is a directory is not a skill either. */
	make_dir(src, "odd");
	make_dir(src, "odd/SKILL.md");

	const char *dirs[] = { src };
	struct config *c = default_config(dirs, 1);
	struct catalog *cat = build(c, NULL, NULL);
	assert_int_equal(cat->n, 2);
	assert_string_equal(cat->entries[0].skill->name, "pdf");
	assert_string_equal(cat->entries[1].skill->name, "review");
	char *pdf_dir = test_join(src, "pdf");
	assert_string_equal(cat->entries[0].skill->dir, pdf_dir);
	free(pdf_dir);
	assert_int_equal(cat->entries[0].source, 0);
	assert_true(cat->entries[0].skill->valid);
	assert_null(catalog_find(cat, "hidden"));
	assert_null(catalog_find(cat, "nested"));
	assert_null(catalog_find(cat, "odd"));
	assert_int_equal(cat->warnings.n, 0);

	catalog_free(cat);
	config_free(c);
	free(src);
}

/* Section 2: a source may itself be one skill directory. */
static void test_sec2_source_that_is_one_skill(void **state)
{
	const char *root = *state;
	make_skill(root, "solo", skill_md("solo", NULL));
	char *solo = test_join(root, "solo");
	/* Its own subdirectories are not scanned as further skills. */
	make_skill(solo, "inner", skill_md("inner", NULL));
	make_dir(root, "multi");
	char *multi = test_join(root, "multi");
	make_skill(multi, "other", skill_md("other", NULL));

	const char *dirs[] = { solo, multi };
	struct config *c = default_config(dirs, 2);
	struct catalog *cat = build(c, NULL, NULL);
	assert_int_equal(cat->n, 2);
	const struct catalog_entry *e = must_find(cat, "solo");
	assert_string_equal(e->skill->dir, solo);
	assert_int_equal(e->source, 0);
	assert_string_equal(must_find(cat, "other")->skill->name, "other");
	assert_int_equal(must_find(cat, "other")->source, 1);
	assert_null(catalog_find(cat, "inner"));

	catalog_free(cat);
	config_free(c);
	free(solo);
	free(multi);
}

/* Entries are sorted by skill name (not directory name); catalog_find and
 * catalog_index find every one and miss absent names. */
static void test_sec2_sorted_by_name_and_lookup(void **state)
{
	const char *root = *state;
	const char *dirs[] = { root };
	/* Directory order a-dir < b-dir < c-dir; name order differs. */
	make_skill(root, "a-dir", skill_md("zeta", NULL));
	make_skill(root, "b-dir", skill_md("alpha", NULL));
	make_skill(root, "c-dir", skill_md("mu", NULL));
	make_skill(root, "beta", skill_md("beta", NULL));
	/* No front-matter: the directory name is the skill name. */
	make_skill(root, "omega", "Just a body.\n");

	struct config *c = default_config(dirs, 1);
	struct catalog *cat = build(c, NULL, NULL);
	const char *want[] = { "alpha", "beta", "mu", "omega", "zeta" };
	assert_int_equal(cat->n, 5);
	for (size_t i = 0; i < 5; i++) {
		assert_string_equal(cat->entries[i].skill->name, want[i]);
		assert_int_equal(catalog_index(cat, want[i]), (long)i);
		assert_ptr_equal(catalog_find(cat, want[i]), &cat->entries[i]);
	}
	char *zdir = test_join(root, "a-dir");
	assert_string_equal(must_find(cat, "zeta")->skill->dir, zdir);
	free(zdir);
	/* Not found: before the first, between, after the last, prefixes. */
	const char *absent[] = { "", "aaa", "alph", "alphab", "c-dir", "n", "zz", "a-dir" };
	for (size_t i = 0; i < sizeof absent / sizeof *absent; i++) {
		assert_int_equal(catalog_index(cat, absent[i]), -1);
		assert_null(catalog_find(cat, absent[i]));
	}

	catalog_free(cat);
	config_free(c);
}

/* An empty catalogue (no sources, or an empty source) finds nothing. */
static void test_sec2_empty_catalog_lookup(void **state)
{
	const char *root = *state;
	const char *dirs[] = { root };
	struct config *c = default_config(dirs, 1);
	struct catalog *cat = build(c, NULL, NULL);
	assert_int_equal(cat->n, 0);
	assert_int_equal(catalog_index(cat, "x"), -1);
	assert_null(catalog_find(cat, "x"));
	assert_int_equal(catalog_index(NULL, "x"), -1);
	catalog_free(cat);
	catalog_free(NULL);
	config_free(c);
}

/* ---------------------------------------------------------- duplicates */

/* Section 2: a name found in two sources: the first source wins; the
 * catalogue warns, naming both directories. */
/* Section 2: one directory listed twice as a source (`s` and `s/`) is read
 * once, with one warning, not a shadow warning per skill. */
static void test_sec2_same_source_twice_read_once(void **state)
{
	const char *root = *state;
	make_dir(root, "s");
	char *s1 = test_join(root, "s"), *s2 = test_join(root, "s/");
	make_skill(s1, "a", skill_md("a", NULL));
	make_skill(s1, "b", skill_md("b", NULL));
	const char *dirs[] = { s1, s2 };
	struct config *c = default_config(dirs, 2);
	struct catalog *cat = build(c, NULL, NULL);
	assert_int_equal(cat->n, 2);
	assert_int_equal(cat->warnings.n, 1);
	assert_true(list_has_part(&cat->warnings, "same directory as an earlier source", NULL));
	assert_int_equal(must_find(cat, "a")->source, 0);
	catalog_free(cat);
	config_free(c);
	free(s1);
	free(s2);
}

static void test_sec2_duplicate_first_source_wins(void **state)
{
	const char *root = *state;
	make_dir(root, "one");
	make_dir(root, "two");
	char *one = test_join(root, "one"), *two = test_join(root, "two");
	/* The later source sorts first by path and holds the shadowed copy
	 * in a directory whose name sorts first, to rule out accidents. */
	make_skill(two, "aaa", skill_md("dup", NULL));
	make_skill(one, "zzz", skill_md("dup", "license: MIT\n"));
	make_skill(two, "only-two", skill_md("only-two", NULL));

	const char *dirs[] = { one, two };
	struct config *c = default_config(dirs, 2);
	struct catalog *cat = build(c, NULL, NULL);
	assert_int_equal(cat->n, 2);
	const struct catalog_entry *e = must_find(cat, "dup");
	char *win = test_join(one, "zzz"), *lose = test_join(two, "aaa");
	assert_string_equal(e->skill->dir, win);
	assert_int_equal(e->source, 0);
	assert_non_null(e->skill->license);
	assert_int_equal(cat->warnings.n, 1);
	assert_true(list_has_part(&cat->warnings, win, lose));
	assert_true(list_has_part(&cat->warnings, "dup", NULL));
	assert_int_equal(must_find(cat, "only-two")->source, 1);

	/* Swapping the source order swaps the winner. */
	catalog_free(cat);
	config_free(c);
	const char *swapped[] = { two, one };
	c = default_config(swapped, 2);
	cat = build(c, NULL, NULL);
	e = must_find(cat, "dup");
	assert_string_equal(e->skill->dir, lose);
	assert_null(e->skill->license);
	assert_true(list_has_part(&cat->warnings, win, lose));

	catalog_free(cat);
	config_free(c);
	free(win);
	free(lose);
	free(one);
	free(two);
}

/* A source large enough to be loaded by several threads gives the same
 * catalogue as directory order: every skill once, and of two directories
 * with the same name the one that sorts first wins, every time. */
static void test_sec2_large_source_loads_in_directory_order(void **state)
{
	const char *root = *state;
	const char *dirs[] = { root };
	char rel[64], name[64];
	for (int i = 0; i < 300; i++) {
		snprintf(rel, sizeof rel, "d%03d", i);
		snprintf(name, sizeof name, "skill-%03d", i);
		make_skill(root, rel, skill_md(name, NULL));
	}
	/* Same name in a late and an early directory: d000x sorts first. */
	make_skill(root, "d299x", skill_md("twin", "license: late\n"));
	make_skill(root, "d000x", skill_md("twin", "license: early\n"));
	make_dir(root, "d150-empty"); /* no SKILL.md: not a skill */
	struct config *c = default_config(dirs, 1);
	for (int round = 0; round < 5; round++) {
		struct catalog *cat = build(c, NULL, NULL);
		assert_int_equal(cat->n, 301);
		for (int i = 0; i < 300; i++) {
			snprintf(name, sizeof name, "skill-%03d", i);
			snprintf(rel, sizeof rel, "d%03d", i);
			char *dir = test_join(root, rel);
			assert_string_equal(must_find(cat, name)->skill->dir, dir);
			free(dir);
		}
		assert_string_equal(must_find(cat, "twin")->skill->license, "early");
		assert_int_equal(cat->warnings.n, 1);
		catalog_free(cat);
	}
	config_free(c);
}

/* --------------------------------------------------------------- trust */

/* D2: trust comes from the source, overridden per skill by skills.trust;
 * a missing or unknown level reads as untrusted. */
static void test_D2_trust_from_source_and_override(void **state)
{
	const char *root = *state;
	const char *srcs[] = { "fp", "comm", "none", "bogus" };
	for (size_t i = 0; i < 4; i++)
		make_dir(root, srcs[i]);
	char *fp = test_join(root, "fp"), *comm = test_join(root, "comm");
	char *none = test_join(root, "none"), *bogus = test_join(root, "bogus");
	make_skill(fp, "fp-plain", skill_md("fp-plain", NULL));
	make_skill(fp, "fp-lowered", skill_md("fp-lowered", NULL));
	make_skill(fp, "fp-unknown-override", skill_md("fp-unknown-override", NULL));
	make_skill(comm, "comm-plain", skill_md("comm-plain", NULL));
	make_skill(comm, "comm-raised", skill_md("comm-raised", NULL));
	make_skill(none, "none-plain", skill_md("none-plain", NULL));
	make_skill(bogus, "bogus-plain", skill_md("bogus-plain", NULL));

	struct config *c = parse_config(root,
		"sources:\n"
		"  - path: fp\n"
		"    trust: first_party\n"
		"  - path: comm\n"
		"    trust: community\n"
		"  - path: none\n"
		"  - path: bogus\n"
		"    trust: super_trusted\n"
		"skills:\n"
		"  trust:\n"
		"    fp-lowered: community\n"
		"    comm-raised: verified\n"
		"    fp-unknown-override: godlike\n");
	struct catalog *cat = build(c, NULL, NULL);
	assert_int_equal(cat->n, 7);
	assert_int_equal(must_find(cat, "fp-plain")->trust, TRUST_FIRST_PARTY);
	assert_int_equal(must_find(cat, "fp-lowered")->trust, TRUST_COMMUNITY);
	assert_int_equal(must_find(cat, "fp-unknown-override")->trust, TRUST_UNTRUSTED);
	assert_int_equal(must_find(cat, "comm-plain")->trust, TRUST_COMMUNITY);
	assert_int_equal(must_find(cat, "comm-raised")->trust, TRUST_VERIFIED);
	assert_int_equal(must_find(cat, "none-plain")->trust, TRUST_UNTRUSTED);
	assert_int_equal(must_find(cat, "bogus-plain")->trust, TRUST_UNTRUSTED);
	assert_int_equal(must_find(cat, "bogus-plain")->source, 3);
	/* The unknown levels were warned about by the config. */
	assert_true(list_has_part(&c->warnings, "super_trusted", NULL));
	assert_true(list_has_part(&c->warnings, "godlike", NULL));

	catalog_free(cat);
	config_free(c);
	free(fp);
	free(comm);
	free(none);
	free(bogus);
}

/* D2: a skill can never declare its own trust. */
static void test_D2_skill_cannot_declare_own_trust(void **state)
{
	const char *root = *state;
	make_dir(root, "u");
	char *u = test_join(root, "u");
	make_skill(u, "sneaky", skill_md("sneaky", "trust: first_party\nminTrustLevel: untrusted\n"));
	make_skill(u, "sneaky2", skill_md("sneaky2", "metadata:\n  trust: first_party\n"));

	struct config *c = parse_config(root, "sources:\n  - path: u\n    trust: untrusted\n");
	struct catalog *cat = build(c, NULL, NULL);
	const struct catalog_entry *e = must_find(cat, "sneaky");
	assert_true(e->skill->valid);
	assert_int_equal(e->trust, TRUST_UNTRUSTED);
	assert_int_equal(must_find(cat, "sneaky2")->trust, TRUST_UNTRUSTED);
	catalog_free(cat);
	config_free(c);

	/* Same skill in a community source: still the source's level. */
	c = parse_config(root, "sources:\n  - path: u\n    trust: community\n");
	cat = build(c, NULL, NULL);
	assert_int_equal(must_find(cat, "sneaky")->trust, TRUST_COMMUNITY);
	catalog_free(cat);
	config_free(c);
	free(u);
}

/* Section 3: skills.disabled marks the entry disabled; it stays listed. */
static void test_sec3_disabled_marks_entry(void **state)
{
	const char *root = *state;
	make_dir(root, "s");
	char *s = test_join(root, "s");
	make_skill(s, "on", skill_md("on", NULL));
	make_skill(s, "off", skill_md("off", NULL));
	struct config *c = parse_config(root,
		"sources:\n  - path: s\n    trust: verified\n"
		"skills:\n  disabled: [off, not-in-catalogue]\n");
	struct catalog *cat = build(c, NULL, NULL);
	assert_int_equal(cat->n, 2);
	assert_true(must_find(cat, "off")->disabled);
	assert_false(must_find(cat, "on")->disabled);
	assert_int_equal(must_find(cat, "off")->trust, TRUST_VERIFIED);
	catalog_free(cat);
	config_free(c);
	free(s);
}

/* ---------------------------------------------------------- sub-skills */

/* Section 2: front-matter sub-skills references resolve in declaration
 * order, transitively, each at most once; a missing one is a warning on
 * the entry; referenced skills are marked. */
static void test_sec2_sub_skill_refs_resolved_in_order_once(void **state)
{
	const char *root = *state;
	const char *dirs[] = { root };
	make_skill(root, "parent", skill_md("parent", "sub-skills: [zed, ghost, beta, zed2]\n"));
	make_skill(root, "zed", skill_md("zed", "sub-skills: [beta, leaf]\n"));
	make_skill(root, "beta", skill_md("beta", NULL));
	make_skill(root, "leaf", skill_md("leaf", NULL));
	make_skill(root, "zed2", skill_md("zed2", "sub-skills: [leaf]\n"));
	make_skill(root, "loner", skill_md("loner", NULL));

	struct config *c = default_config(dirs, 1);
	struct catalog *cat = build(c, NULL, NULL);
	const struct catalog_entry *p = must_find(cat, "parent");
	/* zed, then what zed reaches (beta, leaf), then zed2; beta and leaf
	 * only once. */
	assert_int_equal(p->nref_subs, 4);
	assert_string_equal(ref_name(cat, p, 0), "zed");
	assert_string_equal(ref_name(cat, p, 1), "beta");
	assert_string_equal(ref_name(cat, p, 2), "leaf");
	assert_string_equal(ref_name(cat, p, 3), "zed2");
	assert_int_equal(p->warnings.n, 1);
	assert_true(list_has_part(&p->warnings, "ghost", NULL));

	const struct catalog_entry *z = must_find(cat, "zed");
	assert_int_equal(z->nref_subs, 2);
	assert_string_equal(ref_name(cat, z, 0), "beta");
	assert_string_equal(ref_name(cat, z, 1), "leaf");
	assert_int_equal(z->warnings.n, 0);

	assert_true(must_find(cat, "zed")->is_referenced_sub);
	assert_true(must_find(cat, "beta")->is_referenced_sub);
	assert_true(must_find(cat, "leaf")->is_referenced_sub);
	assert_true(must_find(cat, "zed2")->is_referenced_sub);
	assert_false(must_find(cat, "parent")->is_referenced_sub);
	assert_false(must_find(cat, "loner")->is_referenced_sub);
	assert_int_equal(must_find(cat, "loner")->nref_subs, 0);
	assert_null(must_find(cat, "loner")->ref_subs);

	catalog_free(cat);
	config_free(c);
}

/* Section 2: a cycle a -> b -> a is a warning and is cut; each side lists
 * the other once. */
static void test_sec2_sub_skill_cycle_warns(void **state)
{
	const char *root = *state;
	const char *dirs[] = { root };
	make_skill(root, "a", skill_md("a", "sub-skills: [b]\n"));
	make_skill(root, "b", skill_md("b", "sub-skills: [a]\n"));
	make_skill(root, "self", skill_md("self", "sub-skills: [self]\n"));

	struct config *c = default_config(dirs, 1);
	struct catalog *cat = build(c, NULL, NULL);
	const struct catalog_entry *a = must_find(cat, "a"), *b = must_find(cat, "b");
	assert_int_equal(a->nref_subs, 1);
	assert_string_equal(ref_name(cat, a, 0), "b");
	assert_int_equal(b->nref_subs, 1);
	assert_string_equal(ref_name(cat, b, 0), "a");
	assert_true(list_has_part(&a->warnings, "cycle", NULL));
	assert_true(list_has_part(&b->warnings, "cycle", NULL));
	assert_true(a->is_referenced_sub);
	assert_true(b->is_referenced_sub);

	const struct catalog_entry *s = must_find(cat, "self");
	assert_int_equal(s->nref_subs, 0);
	assert_true(list_has_part(&s->warnings, "cycle", NULL));

	catalog_free(cat);
	config_free(c);
}

/* A reference may cross sources. */
static void test_sec2_sub_skill_ref_across_sources(void **state)
{
	const char *root = *state;
	make_dir(root, "x");
	make_dir(root, "y");
	char *x = test_join(root, "x"), *y = test_join(root, "y");
	make_skill(x, "main", skill_md("main", "sub-skills: [helper]\n"));
	make_skill(y, "helper", skill_md("helper", NULL));
	const char *dirs[] = { x, y };
	struct config *c = default_config(dirs, 2);
	struct catalog *cat = build(c, NULL, NULL);
	const struct catalog_entry *m = must_find(cat, "main");
	assert_int_equal(m->nref_subs, 1);
	assert_string_equal(ref_name(cat, m, 0), "helper");
	assert_int_equal(m->warnings.n, 0);
	assert_true(must_find(cat, "helper")->is_referenced_sub);
	catalog_free(cat);
	config_free(c);
	free(x);
	free(y);
}

/* ------------------------------------------------------------- rebuild */

static void bump_mtime(const char *path, time_t delta)
{
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	struct timespec ts[2] = { st.st_atim, st.st_mtim };
	ts[1].tv_sec += delta;
	assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
}

/* A rebuild reuses the very skill object when SKILL.md is unchanged, and
 * reloads it when the file changed (new size, or a new mtime alone). */
static void test_rebuild_reuses_unchanged_reloads_changed(void **state)
{
	const char *root = *state;
	const char *dirs[] = { root };
	make_skill(root, "keep", skill_md("keep", NULL));
	make_skill(root, "grow", skill_md("grow", NULL));
	make_skill(root, "touch", skill_md("touch", NULL));
	struct config *c = default_config(dirs, 1);
	struct catalog *c1 = build(c, NULL, NULL);
	assert_int_equal(c1->n, 3);
	struct skill *keep1 = must_find(c1, "keep")->skill;
	struct skill *grow1 = must_find(c1, "grow")->skill;
	struct skill *touch1 = must_find(c1, "touch")->skill;

	/* Nothing changed: every skill is shared. */
	struct catalog *c2 = build(c, c1, NULL);
	assert_ptr_equal(must_find(c2, "keep")->skill, keep1);
	assert_ptr_equal(must_find(c2, "grow")->skill, grow1);
	assert_ptr_equal(must_find(c2, "touch")->skill, touch1);
	assert_true(catalog_same(c1, c2));

	char *grow_md = test_join(root, "grow/SKILL.md");
	test_write_text(grow_md, "---\nname: grow\ndescription: now much longer than before\n---\nNew body.\n");
	char *touch_md = test_join(root, "touch/SKILL.md");
	bump_mtime(touch_md, 10);

	struct catalog *c3 = build(c, c2, NULL);
	assert_false(catalog_same(c2, c3));
	assert_ptr_equal(must_find(c3, "keep")->skill, keep1);
	const struct skill *g3 = must_find(c3, "grow")->skill;
	assert_ptr_not_equal(g3, grow1);
	assert_string_equal(g3->description, "now much longer than before");
	assert_ptr_not_equal(must_find(c3, "touch")->skill, touch1);
	/* The old catalogues still hold their own (old) skills, whose text
	 * is no longer on disk: it reads as stale, never as the new text. */
	assert_string_equal(must_find(c1, "grow")->skill->description, "the grow skill");
	assert_string_equal(must_find(c2, "grow")->skill->description, "the grow skill");
	char *text = NULL;
	assert_int_equal(skill_read_text(grow1, SKILL_TEXT_BODY, &text, NULL), -ESTALE);
	assert_int_equal(skill_read_text(grow1, SKILL_TEXT_RAW, &text, NULL), -ESTALE);
	assert_null(text);
	assert_int_equal(skill_read_text(g3, SKILL_TEXT_BODY, &text, NULL), 0);
	assert_string_equal(text, "New body.\n");
	free(text);

	/* Freeing the older catalogues leaves the shared skills alive. */
	catalog_free(c1);
	catalog_free(c2);
	assert_string_equal(must_find(c3, "keep")->skill->name, "keep");
	size_t len = 0;
	assert_int_equal(skill_read_text(must_find(c3, "keep")->skill, SKILL_TEXT_BODY, &text,
					 &len), 0);
	assert_string_equal(text, "Body of keep.\n");
	assert_int_equal(len, strlen(text));
	free(text);

	catalog_free(c3);
	config_free(c);
	free(grow_md);
	free(touch_md);
}

/* A skill whose directory is listed in dirty is reloaded even when its
 * SKILL.md looks unchanged (e.g. a file under skills/ changed). */
static void test_rebuild_reloads_dirty_dirs(void **state)
{
	const char *root = *state;
	const char *dirs[] = { root };
	make_skill(root, "clean", skill_md("clean", NULL));
	make_skill(root, "dirty", skill_md("dirty", NULL));
	make_skill(root, "other", skill_md("other", NULL));
	struct config *c = default_config(dirs, 1);
	struct catalog *c1 = build(c, NULL, NULL);
	struct skill *clean1 = must_find(c1, "clean")->skill;
	struct skill *dirty1 = must_find(c1, "dirty")->skill;
	struct skill *other1 = must_find(c1, "other")->skill;
	assert_int_equal(dirty1->nsubs, 0);

	/* A directory sub-skill appears: SKILL.md of "dirty" is untouched. */
	char *ddir = test_join(root, "dirty");
	make_dir(ddir, "skills");
	char *subs = test_join(ddir, "skills");
	make_skill(subs, "part", skill_md("part", NULL));

	/* Unsorted, with a directory that is not a skill. */
	struct strlist dirty = { 0 };
	char *odir = test_join(root, "other");
	char *nowhere = test_join(root, "nowhere");
	assert_int_equal(strlist_add(&dirty, odir), 0);
	assert_int_equal(strlist_add(&dirty, nowhere), 0);
	assert_int_equal(strlist_add(&dirty, ddir), 0);

	struct catalog *c2 = build(c, c1, &dirty);
	assert_ptr_equal(must_find(c2, "clean")->skill, clean1);
	const struct skill *d2 = must_find(c2, "dirty")->skill;
	assert_ptr_not_equal(d2, dirty1);
	assert_int_equal(d2->nsubs, 1);
	assert_string_equal(d2->subs[0]->name, "part");
	assert_ptr_not_equal(must_find(c2, "other")->skill, other1);
	/* The caller's list is not modified. */
	assert_string_equal(dirty.items[0], odir);

	/* Without dirty, the same rebuild would have missed the sub-skill. */
	struct catalog *c3 = build(c, c1, NULL);
	assert_ptr_equal(must_find(c3, "dirty")->skill, dirty1);

	catalog_free(c1);
	catalog_free(c2);
	catalog_free(c3);
	strlist_free(&dirty);
	config_free(c);
	free(ddir);
	free(subs);
	free(odir);
	free(nowhere);
}

/* Skills removed on disk disappear on rebuild; new ones appear. */
static void test_rebuild_removed_skill_disappears(void **state)
{
	const char *root = *state;
	const char *dirs[] = { root };
	make_skill(root, "stays", skill_md("stays", NULL));
	make_skill(root, "goes", skill_md("goes", NULL));
	struct config *c = default_config(dirs, 1);
	struct catalog *c1 = build(c, NULL, NULL);
	assert_int_equal(c1->n, 2);

	char *goes = test_join(root, "goes");
	char *goes_md = test_join(goes, "SKILL.md");
	assert_int_equal(unlink(goes_md), 0);
	assert_int_equal(rmdir(goes), 0);
	make_skill(root, "arrives", skill_md("arrives", NULL));

	struct catalog *c2 = build(c, c1, NULL);
	assert_int_equal(c2->n, 2);
	assert_null(catalog_find(c2, "goes"));
	assert_non_null(catalog_find(c2, "arrives"));
	assert_ptr_equal(must_find(c2, "stays")->skill, must_find(c1, "stays")->skill);
	/* The old catalogue is untouched. */
	assert_non_null(catalog_find(c1, "goes"));
	assert_null(catalog_find(c1, "arrives"));

	/* Removing SKILL.md alone also removes the skill. */
	char *stays_md = test_join(root, "stays/SKILL.md");
	assert_int_equal(unlink(stays_md), 0);
	struct catalog *c3 = build(c, c2, NULL);
	assert_int_equal(c3->n, 1);
	assert_null(catalog_find(c3, "stays"));

	catalog_free(c1);
	catalog_free(c2);
	catalog_free(c3);
	config_free(c);
	free(goes);
	free(goes_md);
	free(stays_md);
}

/* ------------------------------------------------------- bad sources */

/* A missing source, or one that is a file, is a catalogue warning naming
 * it; the other sources still load. */
static void test_sec2_bad_source_warns_not_crash(void **state)
{
	const char *root = *state;
	make_dir(root, "good");
	char *good = test_join(root, "good");
	make_skill(good, "fine", skill_md("fine", NULL));
	char *missing = test_join(root, "missing");
	char *file = test_join(root, "plain-file");
	test_write_text(file, "x\n");

	const char *dirs[] = { missing, good, file };
	struct config *c = default_config(dirs, 3);
	struct catalog *cat = build(c, NULL, NULL);
	assert_int_equal(cat->n, 1);
	assert_int_equal(must_find(cat, "fine")->source, 1);
	assert_int_equal(cat->warnings.n, 2);
	assert_true(list_has_part(&cat->warnings, missing, NULL));
	assert_true(list_has_part(&cat->warnings, file, NULL));

	/* Rebuilding over it keeps working. */
	struct catalog *c2 = build(c, cat, NULL);
	assert_int_equal(c2->n, 1);
	catalog_free(c2);

	catalog_free(cat);
	config_free(c);
	free(good);
	free(missing);
	free(file);
}

/* D1: an invalid SKILL.md stays listed, marked invalid, declaring []. */
static void test_D1_invalid_skill_is_listed(void **state)
{
	const char *root = *state;
	const char *dirs[] = { root };
	make_skill(root, "broken", "---\nname: broken\ndescription: [unclosed\n---\nbody\n");
	make_skill(root, "unterminated", "---\nname: unterminated\ndescription: x\nbody\n");
	make_skill(root, "ok", skill_md("ok", "sub-skills: [broken]\n"));
	struct config *c = default_config(dirs, 1);
	struct catalog *cat = build(c, NULL, NULL);
	assert_int_equal(cat->n, 3);
	const struct catalog_entry *b = must_find(cat, "broken");
	assert_false(b->skill->valid);
	assert_non_null(b->skill->error);
	assert_true(b->skill->allowed_tools.declared);
	assert_int_equal(b->skill->allowed_tools.n, 0);
	assert_int_equal(b->trust, TRUST_FIRST_PARTY);
	const struct catalog_entry *u = must_find(cat, "unterminated");
	assert_false(u->skill->valid);
	assert_true(must_find(cat, "ok")->skill->valid);
	/* An invalid skill can still be referenced (and is then listed once). */
	assert_int_equal(must_find(cat, "ok")->nref_subs, 1);
	catalog_free(cat);
	config_free(c);
}

/* D1: a SKILL.md that is a symbolic link (not followed) makes an invalid
 * skill saying so, not a directory silently left out. */
static void test_D1_symlinked_skill_md_is_listed_invalid(void **state)
{
	const char *root = *state;
	const char *dirs[] = { root };
	make_skill(root, "real", skill_md("real", ""));
	char *dir = test_join(root, "linked"), *target = test_join(root, "real/SKILL.md");
	assert_int_equal(mkdir(dir, 0755), 0);
	char *md = test_join(dir, "SKILL.md");
	assert_int_equal(symlink(target, md), 0);
	struct config *c = default_config(dirs, 1);
	struct catalog *cat = build(c, NULL, NULL);
	assert_int_equal(cat->n, 2);
	const struct catalog_entry *l = must_find(cat, "linked");
	assert_false(l->skill->valid);
	assert_non_null(strstr(l->skill->error, "symbolic link"));
	assert_true(must_find(cat, "real")->skill->valid);
	catalog_free(cat);
	config_free(c);
	/* The same for a source that is itself one skill. */
	const char *one[] = { dir };
	c = default_config(one, 1);
	cat = build(c, NULL, NULL);
	assert_int_equal(cat->n, 1);
	assert_false(must_find(cat, "linked")->skill->valid);
	catalog_free(cat);
	config_free(c);
	free(md);
	free(target);
	free(dir);
}

/* Section 2: a skill that takes its directory's name gets the checks a
 * front-matter name gets. A name that cannot be one path component and one
 * line (a control character here) keeps the skill out of the catalogue with
 * a warning naming the directory safely, whether or not the file parses;
 * a name that only breaks the naming rules is kept with the same warning a
 * front-matter name gets. */
static void test_sec2_unusable_directory_name_is_not_listed(void **state)
{
	const char *root = *state;
	const char *dirs[] = { root };
	make_skill(root, "evil\ninjected", "no fm\n");
	make_skill(root, "bad\x01yaml", "---\ndescription: [unclosed\n---\n");
	make_skill(root, "good", skill_md("good", NULL));
	make_skill(root, "\xC3\x9Cn\xC3\xAF", "no fm\n"); /* "\u00DCn\u00EF" */
	make_skill(root, "x<y>&", "no fm\n");
	/* A usable front-matter name wins over an unusable directory name. */
	make_skill(root, "named\tdir", skill_md("named", NULL));
	struct config *c = default_config(dirs, 1);
	struct catalog *cat = build(c, NULL, NULL);
	assert_int_equal(cat->n, 4);
	assert_null(catalog_find(cat, "evil\ninjected"));
	assert_null(catalog_find(cat, "bad\x01yaml"));
	for (size_t i = 0; i < cat->n; i++)
		assert_null(skill_name_unusable(cat->entries[i].skill->name));
	assert_true(must_find(cat, "good")->skill->valid);
	assert_true(must_find(cat, "named")->skill->valid);
	assert_int_equal(cat->warnings.n, 2);
	assert_true(list_has_part(&cat->warnings, "'evil\\x0Ainjected'", "not listed"));
	assert_true(list_has_part(&cat->warnings, "'bad\\x01yaml'", "not listed"));
	for (size_t i = 0; i < cat->warnings.n; i++) {
		assert_null(strchr(cat->warnings.items[i], '\n'));
		assert_non_null(strstr(cat->warnings.items[i], "control character"));
	}
	const char *odd[] = { "\xC3\x9Cn\xC3\xAF", "x<y>&" };
	for (size_t i = 0; i < 2; i++) {
		const struct skill *s = must_find(cat, odd[i])->skill;
		assert_true(s->valid);
		if (!list_has_part(&s->warnings, "breaks the naming rules", NULL))
			fail_msg("no naming-rule warning for '%s'", odd[i]);
	}
	catalog_free(cat);
	config_free(c);
}

/* ------------------------------------------- finding skills (issue 15) */

static void make_link(const char *target, const char *root, const char *rel)
{
	char *l = test_join(root, rel);
	assert_int_equal(symlink(target, l), 0);
	free(l);
}

/* A collection's root: skills/a (with a sub-skill and a SKILL.md among
 * its files), skills/a2, plugins/p/skills/b, .curated/c; skills in .git
 * and node_modules; below the root a link to a skill directory outside
 * it, and a link loop. Returns the collection's path (free it). */
static char *make_collection(const char *root)
{
	make_dir(root, "coll");
	char *x = test_join(root, "coll");
	static const char *const dirs[] = { "skills", "plugins", "plugins/p", "plugins/p/skills",
					    ".curated", ".git", ".git/hooks", "node_modules",
					    "node_modules/pkg", "docs" };
	for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++)
		make_dir(x, dirs[i]);
	make_skill(x, "skills/a", skill_md("a", NULL));
	make_dir(x, "skills/a/examples");
	make_skill(x, "skills/a/examples/inner", skill_md("inner", NULL));
	make_dir(x, "skills/a/skills");
	make_skill(x, "skills/a/skills/sub", skill_md("sub", NULL));
	make_skill(x, "skills/a2", skill_md("a2", NULL));
	make_skill(x, "plugins/p/skills/b", skill_md("b", NULL));
	make_skill(x, ".curated/c", skill_md("c", NULL));
	make_skill(x, ".git/hooks/g", skill_md("g", NULL));
	make_skill(x, "node_modules/pkg/n", skill_md("n", NULL));
	make_skill(root, "elsewhere", skill_md("l", NULL)); /* outside the collection */
	char *l = test_join(root, "elsewhere");
	make_link(l, x, "docs/linked");
	free(l);
	make_link("..", x, "docs/loop");
	return x;
}

static struct config *recursive_config(const char *root, const char *dir)
{
	char yaml[PATH_MAX + 128];
	snprintf(yaml, sizeof yaml,
		 "sources:\n  - {path: %s, trust: community, recursive: true}\n"
		 "configurations:\n  default: {skills: []}\n",
		 dir);
	struct config *c = parse_config(root, yaml);
	assert_true(c->sources[0].recursive);
	return c;
}

/* recursive: true finds every directory holding a SKILL.md at any depth,
 * hidden ones included; .git and node_modules are skipped, links are not
 * followed, and a skill's own tree is not searched again (its skills/
 * holds its sub-skills). */
static void test_recursive_source_finds_skills_at_any_depth(void **state)
{
	const char *root = *state;
	char *x = make_collection(root);
	make_dir(x, "deep");
	make_dir(x, "deep/1");
	make_dir(x, "deep/1/2");
	make_dir(x, "deep/1/2/3");
	make_skill(x, "deep/1/2/3/w", skill_md("w", NULL));
	struct config *c = recursive_config(root, x);
	struct catalog *cat = build(c, NULL, NULL);
	const char *want[] = { "a", "a2", "b", "c", "w" };
	assert_int_equal(cat->n, 5);
	for (size_t i = 0; i < 5; i++) {
		assert_string_equal(cat->entries[i].skill->name, want[i]);
		assert_int_equal(cat->entries[i].source, 0);
		assert_int_equal(cat->entries[i].trust, TRUST_COMMUNITY);
	}
	char *b = test_join(x, "plugins/p/skills/b");
	assert_string_equal(must_find(cat, "b")->skill->dir, b);
	free(b);
	const struct skill *a = must_find(cat, "a")->skill;
	assert_int_equal(a->nsubs, 1);
	assert_string_equal(a->subs[0]->name, "sub");
	assert_null(catalog_find(cat, "inner"));
	assert_null(catalog_find(cat, "sub"));
	assert_null(catalog_find(cat, "g"));
	assert_null(catalog_find(cat, "n"));
	assert_null(catalog_find(cat, "l")); /* only behind a link */
	assert_int_equal(cat->warnings.n, 0);
	catalog_free(cat);
	config_free(c);
	free(x);
}

/* A link directly in a recursive source that leads to a skill directory
 * is that skill, as in a plain source (nothing behind it is searched). */
static void test_recursive_source_link_at_top_is_a_skill(void **state)
{
	const char *root = *state;
	make_dir(root, "src");
	char *src = test_join(root, "src");
	make_skill(root, "outside", skill_md("outside", NULL));
	char *outside = test_join(root, "outside");
	make_skill(outside, "nested", skill_md("nested", NULL));
	make_link(outside, src, "top");
	make_dir(root, "tree");
	make_skill(root, "tree/deeper", skill_md("deeper", NULL));
	char *tree = test_join(root, "tree");
	make_link(tree, src, "tree-link"); /* a link to a directory that is no skill */
	struct config *c = recursive_config(root, src);
	struct catalog *cat = build(c, NULL, NULL);
	assert_int_equal(cat->n, 1);
	assert_string_equal(cat->entries[0].skill->name, "outside");
	assert_null(catalog_find(cat, "deeper"));
	catalog_free(cat);
	config_free(c);
	free(tree);
	free(outside);
	free(src);
}

/* Duplicates in a recursive source: the first in search order (each
 * directory's entries in strcmp order, depth first) wins; the other is
 * reported, as across sources. */
static void test_recursive_source_duplicate_first_in_search_order(void **state)
{
	const char *root = *state;
	make_dir(root, "src");
	char *src = test_join(root, "src");
	make_dir(src, "skills");
	make_dir(src, ".curated");
	make_skill(src, "skills/d", skill_md("d", NULL));
	make_skill(src, ".curated/d", skill_md("d", NULL));
	struct config *c = recursive_config(root, src);
	struct catalog *cat = build(c, NULL, NULL);
	assert_int_equal(cat->n, 1);
	char *first = test_join(src, ".curated/d"), *second = test_join(src, "skills/d");
	assert_string_equal(cat->entries[0].skill->dir, first);
	assert_int_equal(cat->warnings.n, 1);
	char want[2 * PATH_MAX];
	snprintf(want, sizeof want, "skill 'd' in %s is shadowed by the one in %s", second, first);
	assert_string_equal(cat->warnings.items[0], want);
	catalog_free(cat);
	config_free(c);
	free(first);
	free(second);
	free(src);
}

/* A plain source on a collection's root finds nothing directly in it: the
 * warning names each directory holding skills (the fullest first) with its
 * count, and says what to do; what a recursive search skips is not
 * counted. */
static void test_plain_source_hint_names_where_skills_are(void **state)
{
	const char *root = *state;
	char *x = make_collection(root);
	const char *dirs[] = { x };
	struct config *c = default_config(dirs, 1);
	struct catalog *cat = build(c, NULL, NULL);
	assert_int_equal(cat->n, 0);
	assert_int_equal(cat->warnings.n, 1);
	char want[8 * PATH_MAX];
	snprintf(want, sizeof want,
		 "no skills directly in %s; 4 found in %s/skills (2), %s/.curated (1), "
		 "%s/plugins/p/skills (1): use those directories as sources, or `recursive: "
		 "true` on this source (-r on the command line) to load every skill below it",
		 x, x, x, x);
	assert_string_equal(cat->warnings.items[0], want);
	catalog_free(cat);
	config_free(c);
	free(x);
}

/* One directory holding them all: named alone, without a count; a
 * source without any SKILL.md says that; neither when a skill is there. */
static void test_plain_source_hint_one_directory_or_none(void **state)
{
	const char *root = *state;
	make_dir(root, "one");
	char *one = test_join(root, "one");
	make_dir(one, "skills");
	make_skill(one, "skills/x", skill_md("x", NULL));
	make_skill(one, "skills/y", skill_md("y", NULL));
	make_dir(root, "none");
	char *none = test_join(root, "none");
	make_dir(none, "docs");
	make_dir(root, "fine");
	char *fine = test_join(root, "fine");
	make_skill(fine, "z", skill_md("z", NULL));
	make_dir(fine, "skills");
	make_skill(fine, "skills/deeper", skill_md("deeper", NULL));
	const char *dirs[] = { one, none, fine };
	struct config *c = default_config(dirs, 3);
	struct catalog *cat = build(c, NULL, NULL);
	assert_int_equal(cat->n, 1);
	assert_int_equal(cat->warnings.n, 2);
	char want[4 * PATH_MAX];
	snprintf(want, sizeof want,
		 "no skills directly in %s; 2 found in %s/skills: use that directory as the "
		 "source, or `recursive: true` on this source (-r on the command line) to load "
		 "every skill below it",
		 one, one);
	assert_string_equal(cat->warnings.items[0], want);
	snprintf(want, sizeof want, "no skills in %s: no directory in it holds a SKILL.md", none);
	assert_string_equal(cat->warnings.items[1], want);
	catalog_free(cat);
	config_free(c);

	/* The same directory as a recursive source: no hint, the skills. */
	c = recursive_config(root, one);
	cat = build(c, NULL, NULL);
	assert_int_equal(cat->n, 2);
	assert_int_equal(cat->warnings.n, 0);
	catalog_free(cat);
	config_free(c);
	c = recursive_config(root, none);
	cat = build(c, NULL, NULL);
	assert_int_equal(cat->warnings.n, 1);
	snprintf(want, sizeof want, "no skills in %s: no directory below it holds a SKILL.md", none);
	assert_string_equal(cat->warnings.items[0], want);
	catalog_free(cat);
	config_free(c);
	free(one);
	free(none);
	free(fine);
}

/* The hint names DISCOVER_HINT_NAMED directories at most, and says how
 * many more there are. */
static void test_plain_source_hint_names_a_few(void **state)
{
	const char *root = *state;
	make_dir(root, "src");
	char *src = test_join(root, "src");
	char rel[64];
	for (int i = 0; i < DISCOVER_HINT_NAMED + 2; i++) {
		snprintf(rel, sizeof rel, "d%d", i);
		make_dir(src, rel);
		snprintf(rel, sizeof rel, "d%d/s%d", i, i);
		make_skill(src, rel, skill_md("s", NULL));
	}
	const char *dirs[] = { src };
	struct config *c = default_config(dirs, 1);
	struct catalog *cat = build(c, NULL, NULL);
	assert_int_equal(cat->warnings.n, 1);
	const char *w = cat->warnings.items[0];
	char part[PATH_MAX + 64];
	snprintf(part, sizeof part, "; %d found in %s/d0 (1), %s/d1 (1)", DISCOVER_HINT_NAMED + 2,
		 src, src);
	assert_non_null(strstr(w, part));
	snprintf(part, sizeof part, "%s/d%d (1) and 2 more directories: use those",
		 src, DISCOVER_HINT_NAMED - 1);
	assert_non_null(strstr(w, part));
	snprintf(part, sizeof part, "%s/d%d ", src, DISCOVER_HINT_NAMED);
	assert_null(strstr(w, part));
	catalog_free(cat);
	config_free(c);
	free(src);
}

/* The hint's search is bounded in depth: a skill deeper than
 * DISCOVER_HINT_DEPTH levels is not found, and the hint says where it
 * stopped. */
static void test_plain_source_hint_search_is_bounded(void **state)
{
	const char *root = *state;
	make_dir(root, "src");
	char *src = test_join(root, "src");
	char rel[256] = "";
	for (int i = 0; i < DISCOVER_HINT_DEPTH; i++) {
		strcat(rel, i ? "/d" : "d");
		make_dir(src, rel);
	}
	strcat(rel, "/too-deep");
	make_skill(src, rel, skill_md("too-deep", NULL));
	const char *dirs[] = { src };
	struct config *c = default_config(dirs, 1);
	struct catalog *cat = build(c, NULL, NULL);
	assert_int_equal(cat->warnings.n, 1);
	char want[PATH_MAX + 256];
	snprintf(want, sizeof want,
		 "no skills in %s: no directory in it holds a SKILL.md (searched %d levels "
		 "deep and at most %d entries: there may be more)",
		 src, DISCOVER_HINT_DEPTH, DISCOVER_HINT_ENTRIES);
	assert_string_equal(cat->warnings.items[0], want);
	catalog_free(cat);
	config_free(c);
	free(src);
}

/* discover_search: the skills in search order, the other directories it
 * went through (what the watcher watches), and its bounds. */
static void test_discover_search_lists_and_bounds(void **state)
{
	const char *root = *state;
	char *x = make_collection(root);
	static const struct discover_bounds wide = { 64, 100000 };
	struct discover d;
	assert_int_equal(discover_search(x, &wide, true, &d), 0);
	assert_int_equal(d.skills.n, 4);
	assert_string_equal(d.skills.items[0], ".curated/c");
	assert_string_equal(d.skills.items[1], "plugins/p/skills/b");
	assert_string_equal(d.skills.items[2], "skills/a");
	assert_string_equal(d.skills.items[3], "skills/a2");
	const char *dirs[] = { ".curated", "docs", "plugins", "plugins/p",
			       "plugins/p/skills", "skills" };
	assert_int_equal(d.dirs.n, sizeof dirs / sizeof *dirs);
	for (size_t i = 0; i < d.dirs.n; i++)
		assert_string_equal(d.dirs.items[i], dirs[i]);
	assert_false(d.cut_depth);
	assert_false(d.cut_entries);
	discover_free(&d);

	static const struct discover_bounds shallow = { 2, 100000 };
	assert_int_equal(discover_search(x, &shallow, false, &d), 0);
	assert_int_equal(d.skills.n, 3); /* plugins/p/skills/b is 4 levels down */
	assert_int_equal(d.dirs.n, 0);
	assert_true(d.cut_depth);
	discover_free(&d);

	static const struct discover_bounds few = { 64, 5 };
	assert_int_equal(discover_search(x, &few, false, &d), 0);
	assert_true(d.cut_entries);
	assert_true(d.skills.n < 4);
	discover_free(&d);
	free(x);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_sec2_immediate_subdirs_with_skill_md),
		T(test_sec2_source_that_is_one_skill),
		T(test_sec2_sorted_by_name_and_lookup),
		T(test_sec2_empty_catalog_lookup),
		T(test_sec2_same_source_twice_read_once),
		T(test_sec2_duplicate_first_source_wins),
		T(test_sec2_large_source_loads_in_directory_order),
		T(test_D2_trust_from_source_and_override),
		T(test_D2_skill_cannot_declare_own_trust),
		T(test_sec3_disabled_marks_entry),
		T(test_sec2_sub_skill_refs_resolved_in_order_once),
		T(test_sec2_sub_skill_cycle_warns),
		T(test_sec2_sub_skill_ref_across_sources),
		T(test_rebuild_reuses_unchanged_reloads_changed),
		T(test_rebuild_reloads_dirty_dirs),
		T(test_rebuild_removed_skill_disappears),
		T(test_sec2_bad_source_warns_not_crash),
		T(test_D1_invalid_skill_is_listed),
		T(test_D1_symlinked_skill_md_is_listed_invalid),
		T(test_sec2_unusable_directory_name_is_not_listed),
		T(test_recursive_source_finds_skills_at_any_depth),
		T(test_recursive_source_link_at_top_is_a_skill),
		T(test_recursive_source_duplicate_first_in_search_order),
		T(test_plain_source_hint_names_where_skills_are),
		T(test_plain_source_hint_one_directory_or_none),
		T(test_plain_source_hint_names_a_few),
		T(test_plain_source_hint_search_is_bounded),
		T(test_discover_search_lists_and_bounds),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
