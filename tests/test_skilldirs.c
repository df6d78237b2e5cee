/* Tests for core/skilldirs: which skills' files a run's tools may read at
 * /skills/<name> (issue "Skill files in reach"): the effective skills and
 * the sub-skills they may run, each once, at most TOOLS_SKILLS_MAX; and
 * where a skill's base directory is as the tools see it. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "catalog.h"
#include "config.h"
#include "effective.h"
#include "skilldirs.h"

#include "testutil.h"

struct fx {
	char *tmp;
	char *skills;
	struct config *cfg;
	struct catalog *cat;
	struct effective eff;
	struct skilldirs d;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	assert_non_null(f);
	f->tmp = test_tmpdir("skillfs-skilldirs");
	f->skills = test_join(f->tmp, "skills");
	assert_int_equal(mkdir(f->skills, 0755), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	skilldirs_free(&f->d);
	effective_free(&f->eff);
	catalog_free(f->cat);
	config_free(f->cfg);
	free(f->skills);
	test_rm_tree(f->tmp);
	free(f);
	return 0;
}

/* skills/<dir>/SKILL.md with name and the extra front-matter lines. */
static void add_skill(struct fx *f, const char *dir, const char *name, const char *extra)
{
	char p[4096];
	snprintf(p, sizeof p, "%s/%s", f->skills, dir);
	char *s = strchr(p + strlen(f->skills) + 1, '/');
	while (s) { /* one level of sub-skill at most: make the parents */
		*s = '\0';
		mkdir(p, 0755);
		*s = '/';
		s = strchr(s + 1, '/');
	}
	assert_int_equal(mkdir(p, 0755), 0);
	strncat(p, "/SKILL.md", sizeof p - strlen(p) - 1);
	char text[1024];
	snprintf(text, sizeof text, "---\nname: %s\ndescription: d\n%s---\nBody of %s.\n", name,
		 extra ? extra : "", name);
	test_write_text(p, text);
}

/* Builds catalogue, effective skills (configuration default of yaml; NULL:
 * the no-config default, every skill attached) and the skill
 * directories. */
static void build(struct fx *f, const char *yaml)
{
	char text[4096];
	char *err = NULL;
	const char *dirs[] = {f->skills};
	snprintf(text, sizeof text, "sources: [{path: skills, trust: community}]\n%s",
		 yaml ? yaml : "");
	if (!yaml)
		f->cfg = config_default(dirs, 1); /* every skill attached */
	else if (config_parse(text, strlen(text), "config.yaml", f->tmp, &f->cfg, &err) != 0)
		fail_msg("config: %s", err);
	assert_non_null(f->cfg);
	f->cat = catalog_build(f->cfg, NULL, NULL, NULL);
	assert_non_null(f->cat);
	assert_int_equal(effective_resolve(f->cfg, f->cat, config_find(f->cfg, "default"), NULL, 0,
					   &f->eff), 0);
	assert_int_equal(skilldirs_build(f->cat, &f->eff, f->cfg->min_trust, &f->d), 0);
}

static bool has(const struct fx *f, const char *name)
{
	for (size_t i = 0; i < f->d.n; i++)
		if (strcmp(f->d.items[i].name, name) == 0)
			return true;
	return false;
}

static void test_effective_skills_and_their_sub_skills(void **state)
{
	struct fx *f = *state;
	add_skill(f, "main", "main", "sub-skills: [kid, low]\n");
	add_skill(f, "main/skills/helper", "helper", NULL);
	add_skill(f, "kid", "kid", "sub-skills: [grandkid]\n");
	add_skill(f, "grandkid", "grandkid", NULL);
	add_skill(f, "low", "low", NULL);
	add_skill(f, "off", "off", NULL);
	add_skill(f, "stray", "stray", NULL);
	build(f, "skills:\n  trust: {low: untrusted}\n  minTrustLevel: community\n"
		 "configurations:\n  default:\n    skills: [main, {name: off, enabled: false}]\n");
	/* main, then the sub-skills it may run: kid (and kid's own); low is
	 * below the trust floor; off is disabled; stray is not attached. */
	assert_int_equal(f->d.n, 3);
	assert_string_equal(f->d.items[0].name, "main");
	assert_true(has(f, "kid"));
	assert_true(has(f, "grandkid"));
	assert_false(has(f, "low"));
	assert_false(has(f, "off"));
	assert_false(has(f, "stray"));
	assert_false(has(f, "helper")); /* in main's directory: no entry of its own */
	assert_int_equal(f->d.left_out, 0);
	char *want = test_join(f->skills, "main");
	assert_string_equal(f->d.items[0].dir, want);
	free(want);

	const struct catalog_entry *e = catalog_find(f->cat, "main");
	char *base = skilldirs_base(&f->d, e->skill);
	assert_string_equal(base, "/skills/main");
	free(base);
	assert_int_equal(e->skill->nsubs, 1);
	base = skilldirs_base(&f->d, e->skill->subs[0]);
	assert_string_equal(base, "/skills/main/skills/helper");
	free(base);
	errno = 0;
	assert_null(skilldirs_base(&f->d, catalog_find(f->cat, "stray")->skill));
	assert_int_equal(errno, ENOENT);
}

static void test_at_most_the_cap_in_reach(void **state)
{
	struct fx *f = *state;
	size_t total = TOOLS_SKILLS_MAX + 4;
	for (size_t i = 0; i < total; i++) {
		char name[32];
		snprintf(name, sizeof name, "s%03zu", i);
		add_skill(f, name, name, NULL);
	}
	build(f, NULL);
	assert_int_equal(f->eff.neff, total);
	assert_int_equal(f->d.n, TOOLS_SKILLS_MAX);
	assert_int_equal(f->d.left_out, 4);
	/* Names are distinct. */
	for (size_t i = 1; i < f->d.n; i++)
		assert_true(strcmp(f->d.items[i - 1].name, f->d.items[i].name) < 0);
}

static void test_nothing_effective_nothing_in_reach(void **state)
{
	struct fx *f = *state;
	add_skill(f, "a", "a", NULL);
	build(f, "configurations:\n  default: {skills: []}\n");
	assert_int_equal(f->d.n, 0);
	assert_null(skilldirs_base(&f->d, catalog_find(f->cat, "a")->skill));
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_effective_skills_and_their_sub_skills),
		T(test_at_most_the_cap_in_reach),
		T(test_nothing_effective_nothing_in_reach),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
