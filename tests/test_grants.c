/* Tool grants: effective skills (R1, R4, D1), the allow-list (R2, R3, D3,
 * D4), execution-time checks (R5), wait-time intersection (R7, R8), the
 * stored JSON form, execution modes (R10) and sub-agent tools (R13, D5),
 * and the check report (also with --claude), and the Claude Code settings
 * resolved beside the list (section 8, configs/<cfg>/claude/). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "catalog.h"
#include "check.h"
#include "claude.h"
#include "config.h"
#include "effective.h"
#include "grants.h"
#include "mode.h"
#include "resolution.h"
#include "skill.h"

/* ---- fixture: a hand-built config and catalogue ---- */

struct sk {
	const char *name;
	const char *fm; /* extra front-matter lines, each ending in \n */
	enum trust trust;
	bool disabled;
	bool ref_sub;
};

#define MAX_ATT 16

struct fx {
	struct config c;
	struct catalog *cat;
	struct configuration conf;
	struct attachment att[MAX_ATT];
};

static const char *const all_tools[] = { "bash", "read", "edit", "write",
					 "webfetch", "python", "terminal",
					 "run_skill", "learn_skill", "ask_user" };
#define NALL (sizeof all_tools / sizeof *all_tools)

static struct skill *parse_skill(const struct sk *k)
{
	char *text = NULL;
	assert_true(asprintf(&text, "---\nname: %s\ndescription: the %s skill\n%s---\n# %s\n\nBody of %s.\n",
			     k->name, k->name, k->fm ? k->fm : "", k->name, k->name) > 0);
	struct skill *s = skill_parse(k->name, NULL, text, strlen(text), NULL);
	free(text);
	assert_non_null(s);
	return s;
}

static int cmp_entry(const void *a, const void *b)
{
	return strcmp(((const struct catalog_entry *)a)->skill->name,
		      ((const struct catalog_entry *)b)->skill->name);
}

static void fx_init(struct fx *f, const struct sk *sks, size_t n)
{
	memset(f, 0, sizeof *f);
	for (size_t i = 0; i < NALL; i++)
		assert_int_equal(strlist_add(&f->c.registered_tools, all_tools[i]), 0);
	f->c.max_bytes = CONFIG_DEFAULT_MAX_BYTES;
	f->c.listing_max_bytes = CONFIG_DEFAULT_LISTING_MAX_BYTES;
	f->c.execution_mode = EXEC_INLINE;
	f->c.min_trust = TRUST_UNTRUSTED;
	f->cat = calloc(1, sizeof *f->cat);
	assert_non_null(f->cat);
	f->cat->entries = calloc(n ? n : 1, sizeof *f->cat->entries);
	assert_non_null(f->cat->entries);
	for (size_t i = 0; i < n; i++) {
		struct catalog_entry *e = &f->cat->entries[i];
		e->skill = parse_skill(&sks[i]);
		e->trust = sks[i].trust;
		e->disabled = sks[i].disabled;
		e->is_referenced_sub = sks[i].ref_sub;
	}
	f->cat->n = n;
	qsort(f->cat->entries, n, sizeof *f->cat->entries, cmp_entry);
	f->conf.name = "default";
	f->conf.att = f->att;
}

static void fx_attach(struct fx *f, const char *name, bool enabled)
{
	assert_true(f->conf.n < MAX_ATT);
	f->att[f->conf.n++] = (struct attachment){ (char *)name, enabled };
}

static void fx_free(struct fx *f)
{
	catalog_free(f->cat);
	strlist_free(&f->c.registered_tools);
	strlist_free(&f->c.disabled);
	strlist_free(&f->c.tools.unavailable);
	strlist_free(&f->c.tools.unavailable_why);
}

static struct resolution *fx_resolve(struct fx *f, const char *const *forced,
				     size_t nforced)
{
	struct resolution *r = resolution_build(&f->c, f->cat, &f->conf, forced, nforced);
	assert_non_null(r);
	return r;
}

static const char *file(const struct resolution *r, const char *name)
{
	size_t len = 0;
	const char *t = resolution_file(r, name, &len);
	assert_non_null(t);
	assert_int_equal(strlen(t), len);
	return t;
}

static bool has_warning(const struct strlist *w, const char *needle)
{
	for (size_t i = 0; i < w->n; i++)
		if (strstr(w->items[i], needle))
			return true;
	return false;
}

static const struct eff_item *item(const struct resolution *r, size_t i)
{
	assert_true(i < r->eff.n);
	return &r->eff.items[i];
}

/* ---- R1 / R2 / R3 / R4 / D1 / D3 / D4 ---- */

static void test_R2_no_declaring_skill_gives_all_registered_tools(void **st)
{
	(void)st;
	struct sk sks[] = { { "alpha", NULL, TRUST_FIRST_PARTY, false, false },
			    { "beta", "category: knowledge\n", TRUST_FIRST_PARTY, false, false } };
	struct fx f;
	fx_init(&f, sks, 2);
	fx_attach(&f, "alpha", true);
	fx_attach(&f, "beta", true);
	struct resolution *r = fx_resolve(&f, NULL, 0);
	assert_int_equal(r->grants.policy, GRANTS_ALL);
	assert_int_equal(r->grants.n, NALL);
	for (size_t i = 0; i < NALL; i++) {
		assert_true(grants_has(&r->grants, all_tools[i]));
		assert_true(grants_permits(&r->grants, all_tools[i], "anything; at all"));
	}
	assert_int_equal(r->grants.declaring.n, 0);
	assert_string_equal(file(r, "allowed-tools"),
			    "ask_user\nbash\nedit\nlearn_skill\npython\nread\nrun_skill\nterminal\nwebfetch\nwrite\n");
	resolution_free(r);
	fx_free(&f);
}

static void test_R3_declared_empty_alone_gives_no_tools(void **st)
{
	(void)st;
	struct sk sks[] = { { "quiet", "allowed-tools: []\n", TRUST_FIRST_PARTY, false, false },
			    { "free", NULL, TRUST_FIRST_PARTY, false, false } };
	struct fx f;
	fx_init(&f, sks, 2);
	fx_attach(&f, "quiet", true);
	fx_attach(&f, "free", true);
	struct resolution *r = fx_resolve(&f, NULL, 0);
	assert_int_equal(r->grants.policy, GRANTS_LIST);
	assert_int_equal(r->grants.n, 0);
	assert_false(grants_permits(&r->grants, "read", NULL));
	assert_false(grants_permits(&r->grants, "bash", "ls"));
	assert_string_equal(file(r, "allowed-tools"), "");
	assert_int_equal(r->grants.declaring.n, 1);
	assert_string_equal(r->grants.declaring.items[0], "quiet");
	resolution_free(r);
	fx_free(&f);
}

static void test_R3_declared_empty_widened_by_read(void **st)
{
	(void)st;
	struct sk sks[] = { { "quiet", "allowed-tools: []\n", TRUST_FIRST_PARTY, false, false },
			    { "reader", "allowed-tools: [read]\n", TRUST_FIRST_PARTY, false, false } };
	struct fx f;
	fx_init(&f, sks, 2);
	fx_attach(&f, "quiet", true);
	fx_attach(&f, "reader", true);
	struct resolution *r = fx_resolve(&f, NULL, 0);
	assert_int_equal(r->grants.policy, GRANTS_LIST);
	assert_string_equal(file(r, "allowed-tools"), "read\n");
	assert_true(grants_permits(&r->grants, "read", NULL));
	assert_false(grants_permits(&r->grants, "write", NULL));
	const struct grant_tool *t = grants_find(&r->grants, "read");
	assert_non_null(t);
	assert_int_equal(t->nby, 1);
	assert_string_equal(t->by[0].skill, "reader");
	resolution_free(r);
	fx_free(&f);
}

static void test_R2_union_of_two_lists(void **st)
{
	(void)st;
	struct sk sks[] = { { "one", "allowed-tools: [read, write]\n", TRUST_FIRST_PARTY, false, false },
			    { "two", "allowed-tools: [write, webfetch]\n", TRUST_FIRST_PARTY, false, false },
			    { "three", NULL, TRUST_FIRST_PARTY, false, false } };
	struct fx f;
	fx_init(&f, sks, 3);
	fx_attach(&f, "one", true);
	fx_attach(&f, "two", true);
	fx_attach(&f, "three", true);
	struct resolution *r = fx_resolve(&f, NULL, 0);
	assert_int_equal(r->grants.policy, GRANTS_LIST);
	assert_string_equal(file(r, "allowed-tools"), "read\nwebfetch\nwrite\n");
	const struct grant_tool *w = grants_find(&r->grants, "write");
	assert_non_null(w);
	assert_int_equal(w->nby, 2);
	assert_string_equal(w->by[0].skill, "one");
	assert_string_equal(w->by[1].skill, "two");
	assert_int_equal(r->grants.declaring.n, 2);
	resolution_free(r);
	fx_free(&f);
}

static void test_R2_unknown_tool_dropped_with_warning(void **st)
{
	(void)st;
	struct sk sks[] = { { "odd", "allowed-tools: [read, Teleport]\n", TRUST_FIRST_PARTY, false, false } };
	struct fx f;
	fx_init(&f, sks, 1);
	fx_attach(&f, "odd", true);
	struct resolution *r = fx_resolve(&f, NULL, 0);
	assert_string_equal(file(r, "allowed-tools"), "read\n");
	assert_int_equal(r->grants.ndropped, 1);
	assert_string_equal(r->grants.dropped[0].skill, "odd");
	assert_string_equal(r->grants.dropped[0].item, "Teleport");
	assert_true(has_warning(&r->grants.warnings, "skill 'odd'"));
	assert_true(has_warning(&r->grants.warnings, "'teleport' is not a registered tool"));
	assert_non_null(strstr(file(r, "warnings"), "Teleport"));
	resolution_free(r);
	fx_free(&f);
}

/* D3: Claude Code names grant the skillfs tool doing the same job; the
 * Claude Code tools skillfs has no tool for are dropped with a warning
 * that says so. */
static void test_D3_claude_code_names_resolve_or_drop(void **st)
{
	(void)st;
	struct sk sks[] = { { "cc", "allowed-tools: [AskUserQuestion, MultiEdit, Glob, "
				    "WebSearch, TodoWrite, Task, Agent, Skill, NotebookEdit]\n",
			      TRUST_FIRST_PARTY, false, false } };
	struct fx f;
	fx_init(&f, sks, 1);
	/* glob is not a built-in tool of this version's fixture: register it
	 * to see the mapping reach the allow-list */
	assert_int_equal(strlist_add(&f.c.registered_tools, "glob"), 0);
	fx_attach(&f, "cc", true);
	struct resolution *r = fx_resolve(&f, NULL, 0);
	assert_string_equal(file(r, "allowed-tools"), "ask_user\nedit\nglob\n");
	const struct grant_tool *t = grants_find(&r->grants, "ask_user");
	assert_non_null(t);
	assert_true(t->unrestricted);
	assert_int_equal(r->grants.ndropped, 6);
	const char *gone[] = {"WebSearch", "TodoWrite", "Task", "Agent", "Skill", "NotebookEdit"};
	for (size_t i = 0; i < 6; i++) {
		assert_string_equal(r->grants.dropped[i].item, gone[i]);
		assert_string_equal(r->grants.dropped[i].reason,
				    "a Claude Code tool skillfs does not have");
		char want[160];
		snprintf(want, sizeof want, "skill 'cc': allowed-tools item '%s' dropped: it "
			 "is a Claude Code tool skillfs does not have", gone[i]);
		assert_true(has_warning(&r->grants.warnings, want));
	}
	assert_false(has_warning(&r->grants.warnings, "not a registered tool"));
	resolution_free(r);
	fx_free(&f);
}

/* The config file's warnings (an unknown key may be a mistyped security
 * setting) and the catalogue's (a source that cannot be read) are shown
 * with every configuration, first. */
static void test_config_and_catalogue_warnings_come_first(void **st)
{
	(void)st;
	struct sk sks[] = { { "odd", "allowed-tools: [read, Teleport]\n", TRUST_FIRST_PARTY, false, false } };
	struct fx f;
	fx_init(&f, sks, 1);
	fx_attach(&f, "odd", true);
	assert_int_equal(strlist_add(&f.c.warnings, "config.yaml:2: unknown key 'skils'"), 0);
	assert_int_equal(strlist_add(&f.cat->warnings, "source /nowhere: No such file or directory"),
			 0);
	struct resolution *r = fx_resolve(&f, NULL, 0);
	assert_true(r->warnings.n >= 3);
	assert_string_equal(r->warnings.items[0], "config: config.yaml:2: unknown key 'skils'");
	assert_string_equal(r->warnings.items[1], "source /nowhere: No such file or directory");
	assert_true(has_warning(&r->warnings, "Teleport"));
	assert_non_null(strstr(file(r, "warnings"),
			       "config: config.yaml:2: unknown key 'skils'\n"
			       "source /nowhere: No such file or directory\n"));
	resolution_free(r);
	strlist_free(&f.c.warnings);
	fx_free(&f);
}

static void test_R2_unregistered_tool_not_granted(void **st)
{
	(void)st;
	struct sk sks[] = { { "py", "allowed-tools: [python, read]\n", TRUST_FIRST_PARTY, false, false } };
	struct fx f;
	fx_init(&f, sks, 1);
	strlist_free(&f.c.registered_tools);
	assert_int_equal(strlist_add(&f.c.registered_tools, "read"), 0);
	assert_int_equal(strlist_add(&f.c.registered_tools, "bash"), 0);
	fx_attach(&f, "py", true);
	struct resolution *r = fx_resolve(&f, NULL, 0);
	assert_string_equal(file(r, "allowed-tools"), "read\n");
	assert_false(grants_has(&r->grants, "python"));
	resolution_free(r);
	fx_free(&f);
}

/* Section 8 (configs/<cfg>/claude/): the Claude Code settings hold the
 * skills' union as R2-R4 resolve it against every built-in tool, not the
 * registered and available ones (those bound skillfs's runs, not Claude
 * Code); a disabled declaring skill still grants nothing there (R4), and
 * the run's list (r->grants) is not widened by any of it. */
static void test_R2_claude_settings_not_bounded_by_registered(void **st)
{
	(void)st;
	struct sk sks[] = { { "web", "allowed-tools: [read, WebFetch, Bash]\n", TRUST_FIRST_PARTY,
			      false, false },
			    { "off", "allowed-tools: [write]\n", TRUST_FIRST_PARTY, false, false } };
	struct fx f;
	fx_init(&f, sks, 2);
	strlist_free(&f.c.registered_tools);
	assert_int_equal(strlist_add(&f.c.registered_tools, "read"), 0);
	assert_int_equal(strlist_add(&f.c.registered_tools, "bash"), 0);
	assert_int_equal(config_tool_unavailable(&f.c, "bash", "bubblewrap not found"), 0);
	fx_attach(&f, "web", true);
	fx_attach(&f, "off", false);
	struct resolution *r = fx_resolve(&f, NULL, 0);
	assert_string_equal(file(r, "allowed-tools"), "read\n");
	assert_true(r->claude.restricted);
	assert_true(strlist_has(&r->claude.allow, "Read"));
	assert_true(strlist_has(&r->claude.allow, "WebFetch"));
	assert_true(strlist_has(&r->claude.allow, "Bash"));
	assert_true(strlist_has(&r->claude.deny, "Write"));
	size_t len = 0;
	const char *t = claude_file(&r->claude_files, "settings.json", &len);
	assert_non_null(t);
	assert_non_null(strstr(t, "\"WebFetch\""));
	assert_non_null(strstr(t, "\"defaultMode\": \"dontAsk\""));
	resolution_free(r);
	fx_free(&f);
}

/* Issue "Confinement": a tool that cannot work here (no sandbox) is out of
 * the registered list; a skill granting it is told why, and policy all
 * never counts it. */
static void test_R2_unavailable_tool_granted_warns_why(void **st)
{
	(void)st;
	struct sk sks[] = { { "sh", "allowed-tools: [Bash, read]\n", TRUST_FIRST_PARTY, false, false },
			    { "free", NULL, TRUST_FIRST_PARTY, false, false } };
	struct fx f;
	fx_init(&f, sks, 2);
	assert_int_equal(config_tool_unavailable(&f.c, "bash", "bubblewrap not found"), 0);
	fx_attach(&f, "sh", true);
	struct resolution *r = fx_resolve(&f, NULL, 0);
	assert_string_equal(file(r, "allowed-tools"), "read\n");
	assert_true(has_warning(&r->grants.warnings,
				"skill 'sh': allowed-tools item 'Bash' grants nothing here: 'bash' is "
				"not available: bubblewrap not found"));
	assert_non_null(strstr(file(r, "warnings"), "'bash' is not available: bubblewrap not found"));
	resolution_free(r);
	fx_free(&f);
	/* Policy all: every available tool, and not bash. */
	fx_init(&f, sks, 2);
	assert_int_equal(config_tool_unavailable(&f.c, "bash", "no sandbox"), 0);
	fx_attach(&f, "free", true);
	r = fx_resolve(&f, NULL, 0);
	assert_int_equal(r->grants.policy, GRANTS_ALL);
	assert_false(grants_has(&r->grants, "bash"));
	assert_true(grants_has(&r->grants, "read"));
	resolution_free(r);
	fx_free(&f);
}

static void test_R4_globally_disabled_declaring_skill_ignored(void **st)
{
	(void)st;
	struct sk sks[] = { { "gate", "allowed-tools: [read]\n", TRUST_FIRST_PARTY, false, false },
			    { "plain", NULL, TRUST_FIRST_PARTY, false, false } };
	struct fx f;
	fx_init(&f, sks, 2);
	assert_int_equal(strlist_add(&f.c.disabled, "gate"), 0);
	fx_attach(&f, "gate", true);
	fx_attach(&f, "plain", true);
	struct resolution *r = fx_resolve(&f, NULL, 0);
	assert_int_equal(item(r, 0)->state, EFF_DISABLED);
	assert_int_equal(r->grants.policy, GRANTS_ALL);
	assert_int_equal(r->grants.n, NALL);
	assert_string_equal(file(r, "effective"), "plain\n");
	resolution_free(r);
	fx_free(&f);
}

static void test_R4_attachment_disabled_declaring_skill_ignored(void **st)
{
	(void)st;
	struct sk sks[] = { { "gate", "allowed-tools: []\n", TRUST_FIRST_PARTY, false, false } };
	struct fx f;
	fx_init(&f, sks, 1);
	fx_attach(&f, "gate", false);
	struct resolution *r = fx_resolve(&f, NULL, 0);
	assert_int_equal(item(r, 0)->state, EFF_DISABLED);
	assert_string_equal(item(r, 0)->reason, "attachment enabled: false");
	assert_int_equal(r->grants.policy, GRANTS_ALL);
	assert_string_equal(file(r, "attachments"), "gate disabled attachment enabled: false\n");
	resolution_free(r);
	fx_free(&f);
}

static void test_R4_catalogue_disabled_flag_ignored(void **st)
{
	(void)st;
	struct sk sks[] = { { "gate", "allowed-tools: []\n", TRUST_FIRST_PARTY, true, false } };
	struct fx f;
	fx_init(&f, sks, 1);
	fx_attach(&f, "gate", true);
	struct resolution *r = fx_resolve(&f, NULL, 0);
	assert_int_equal(item(r, 0)->state, EFF_DISABLED);
	assert_int_equal(r->grants.policy, GRANTS_ALL);
	resolution_free(r);
	fx_free(&f);
}

static void test_R4_orphaned_attachment(void **st)
{
	(void)st;
	struct sk sks[] = { { "real", "allowed-tools: [read]\n", TRUST_FIRST_PARTY, false, false } };
	struct fx f;
	fx_init(&f, sks, 1);
	fx_attach(&f, "ghost", true);
	fx_attach(&f, "real", true);
	struct resolution *r = fx_resolve(&f, NULL, 0);
	assert_int_equal(item(r, 0)->state, EFF_ORPHANED);
	assert_int_equal(item(r, 0)->index, -1);
	assert_int_equal(item(r, 1)->state, EFF_EFFECTIVE);
	assert_string_equal(file(r, "effective"), "real\n");
	assert_string_equal(file(r, "allowed-tools"), "read\n");
	assert_string_equal(file(r, "attachments"),
			    "ghost orphaned not in the catalogue\nreal effective attached\n");
	assert_non_null(strstr(file(r, "warnings"), "skill 'ghost' orphaned"));
	resolution_free(r);
	fx_free(&f);
}

static void test_R1_trust_below_floor(void **st)
{
	(void)st;
	struct sk sks[] = { { "comm", "allowed-tools: [read]\n", TRUST_COMMUNITY, false, false },
			    { "veri", NULL, TRUST_VERIFIED, false, false } };
	struct fx f;
	fx_init(&f, sks, 2);
	f.c.min_trust = TRUST_VERIFIED;
	fx_attach(&f, "comm", true);
	fx_attach(&f, "veri", true);
	struct resolution *r = fx_resolve(&f, NULL, 0);
	assert_int_equal(item(r, 0)->state, EFF_BELOW_TRUST);
	assert_string_equal(item(r, 0)->reason, "trust community < floor verified");
	assert_int_equal(item(r, 1)->state, EFF_EFFECTIVE);
	/* the below-trust skill's declaration does not count */
	assert_int_equal(r->grants.policy, GRANTS_ALL);
	assert_string_equal(file(r, "effective"), "veri\n");
	resolution_free(r);
	fx_free(&f);
}

static void test_R1_forced_skill_duplicating_attachment(void **st)
{
	(void)st;
	struct sk sks[] = { { "alpha", "allowed-tools: [read]\n", TRUST_FIRST_PARTY, false, false },
			    { "beta", "allowed-tools: [write]\n", TRUST_FIRST_PARTY, false, false } };
	struct fx f;
	fx_init(&f, sks, 2);
	fx_attach(&f, "alpha", true);
	const char *forced[] = { "alpha", "beta", "beta" };
	struct resolution *r = fx_resolve(&f, forced, 3);
	assert_int_equal(r->eff.n, 4);
	assert_int_equal(item(r, 0)->state, EFF_EFFECTIVE);
	assert_false(item(r, 0)->forced);
	assert_int_equal(item(r, 1)->state, EFF_DUPLICATE);
	assert_true(item(r, 1)->forced);
	assert_string_equal(item(r, 1)->reason, "already attached earlier");
	assert_int_equal(item(r, 2)->state, EFF_EFFECTIVE);
	assert_string_equal(item(r, 2)->reason, "forced on the run");
	assert_int_equal(item(r, 3)->state, EFF_DUPLICATE);
	assert_string_equal(item(r, 3)->reason, "already forced earlier");
	assert_string_equal(file(r, "effective"), "alpha\nbeta\n");
	assert_string_equal(file(r, "allowed-tools"), "read\nwrite\n");
	resolution_free(r);
	fx_free(&f);
}

static void test_R1_check_order_duplicate_first(void **st)
{
	(void)st;
	/* a name listed twice is a duplicate the second time even when the
	 * first is orphaned or disabled */
	struct sk sks[] = { { "off", NULL, TRUST_UNTRUSTED, false, false } };
	struct fx f;
	fx_init(&f, sks, 1);
	f.c.min_trust = TRUST_VERIFIED;
	fx_attach(&f, "ghost", true);
	fx_attach(&f, "ghost", true);
	fx_attach(&f, "off", false);
	fx_attach(&f, "off", true);
	struct resolution *r = fx_resolve(&f, NULL, 0);
	assert_int_equal(item(r, 0)->state, EFF_ORPHANED);
	assert_int_equal(item(r, 1)->state, EFF_DUPLICATE);
	/* disabled is checked before trust */
	assert_int_equal(item(r, 2)->state, EFF_DISABLED);
	assert_int_equal(item(r, 3)->state, EFF_DUPLICATE);
	assert_int_equal(r->eff.neff, 0);
	resolution_free(r);
	fx_free(&f);
}

static void test_R1_attach_all_in_name_order(void **st)
{
	(void)st;
	struct sk sks[] = { { "zeta", NULL, TRUST_FIRST_PARTY, false, false },
			    { "alpha", NULL, TRUST_FIRST_PARTY, false, false },
			    { "mid", NULL, TRUST_FIRST_PARTY, false, false } };
	struct fx f;
	fx_init(&f, sks, 3);
	f.conf.attach_all = true;
	const char *forced[] = { "mid" };
	struct resolution *r = fx_resolve(&f, forced, 1);
	assert_string_equal(file(r, "effective"), "alpha\nmid\nzeta\n");
	assert_int_equal(item(r, 3)->state, EFF_DUPLICATE);
	resolution_free(r);
	fx_free(&f);
}

static void test_D1_invalid_attached_skill_alone_gives_no_tools(void **st)
{
	(void)st;
	struct sk sks[] = { { "broken", "allowed-tools: [bash\n", TRUST_FIRST_PARTY, false, false },
			    { "plain", NULL, TRUST_FIRST_PARTY, false, false } };
	struct fx f;
	fx_init(&f, sks, 2);
	fx_attach(&f, "broken", true);
	fx_attach(&f, "plain", true);
	struct resolution *r = fx_resolve(&f, NULL, 0);
	assert_int_equal(item(r, 0)->state, EFF_INVALID);
	assert_string_equal(file(r, "effective"), "plain\n");
	assert_int_equal(r->grants.policy, GRANTS_LIST);
	assert_int_equal(r->grants.n, 0);
	assert_string_equal(r->grants.declaring.items[0], "broken");
	assert_non_null(strstr(file(r, "attachments"), "broken invalid "));
	resolution_free(r);
	fx_free(&f);
}

/* D1, D3: a second allowed-tools key never widens the first: the
 * front-matter is invalid and declares []. */
static void test_D1_duplicate_allowed_tools_gives_no_tools(void **st)
{
	(void)st;
	struct sk sks[] = { { "dup", "allowed-tools: []\nallowed-tools: [bash]\n", TRUST_FIRST_PARTY, false, false },
			    { "plain", NULL, TRUST_FIRST_PARTY, false, false } };
	struct fx f;
	fx_init(&f, sks, 2);
	fx_attach(&f, "dup", true);
	fx_attach(&f, "plain", true);
	struct resolution *r = fx_resolve(&f, NULL, 0);
	assert_int_equal(item(r, 0)->state, EFF_INVALID);
	assert_int_equal(r->grants.policy, GRANTS_LIST);
	assert_int_equal(r->grants.n, 0);
	assert_false(grants_permits(&r->grants, "bash", "ls"));
	assert_true(has_warning(&r->grants.warnings, "skill 'dup' is invalid"));
	resolution_free(r);
	fx_free(&f);
}

static void test_D1_invalid_skill_never_widens_even_if_struct_lists_tools(void **st)
{
	(void)st;
	/* Hand-made invalid skill whose struct (wrongly) still lists bash. */
	struct skill s = { 0 };
	s.name = "bad";
	s.valid = false;
	struct tool_grant g = { "bash", NULL, "bash" };
	s.allowed_tools = (struct tool_decl){ true, &g, 1 };
	const struct skill *gate[] = { &s };
	struct strlist reg = { 0 };
	assert_int_equal(strlist_add(&reg, "bash"), 0);
	struct grants out;
	assert_int_equal(grants_resolve(&reg, gate, 1, &out), 0);
	assert_int_equal(out.policy, GRANTS_LIST);
	assert_int_equal(out.n, 0);
	assert_false(grants_permits(&out, "bash", "ls"));
	/* and undeclared-but-invalid still counts as declaring [] */
	s.allowed_tools = (struct tool_decl){ false, NULL, 0 };
	grants_free(&out);
	assert_int_equal(grants_resolve(&reg, gate, 1, &out), 0);
	assert_int_equal(out.policy, GRANTS_LIST);
	assert_int_equal(out.n, 0);
	grants_free(&out);
	strlist_free(&reg);
}

static void test_D3_string_form_read_write(void **st)
{
	(void)st;
	struct sk sks[] = { { "cs", "allowed-tools: Read, Write\n", TRUST_FIRST_PARTY, false, false } };
	struct fx f;
	fx_init(&f, sks, 1);
	fx_attach(&f, "cs", true);
	struct resolution *r = fx_resolve(&f, NULL, 0);
	assert_string_equal(file(r, "allowed-tools"), "read\nwrite\n");
	assert_true(grants_permits(&r->grants, "READ", NULL));
	resolution_free(r);
	fx_free(&f);
}

static void test_D3_bash_pattern_grant(void **st)
{
	(void)st;
	struct sk sks[] = { { "diff", "allowed-tools: [\"Bash(git diff:*)\"]\n", TRUST_FIRST_PARTY, false, false } };
	struct fx f;
	fx_init(&f, sks, 1);
	fx_attach(&f, "diff", true);
	struct resolution *r = fx_resolve(&f, NULL, 0);
	assert_string_equal(file(r, "allowed-tools"), "bash(git diff:*)\n");
	const struct grant_tool *t = grants_find(&r->grants, "bash");
	assert_non_null(t);
	assert_false(t->unrestricted);
	assert_int_equal(t->patterns.n, 1);
	assert_true(grants_permits(&r->grants, "bash", "git diff --stat"));
	assert_true(grants_permits(&r->grants, "bash", "git diff"));
	assert_false(grants_permits(&r->grants, "bash", "git diff; rm -rf /"));
	assert_false(grants_permits(&r->grants, "bash", "git status"));
	assert_false(grants_permits(&r->grants, "bash", "git diff $(rm -rf /)"));
	assert_false(grants_permits(&r->grants, "bash", "git diff `id`"));
	assert_false(grants_permits(&r->grants, "bash", "git diff | sh"));
	assert_false(grants_permits(&r->grants, "bash", "git diff && rm x"));
	assert_false(grants_permits(&r->grants, "bash", "git diff > /etc/x"));
	assert_false(grants_permits(&r->grants, "bash", "git diff < x"));
	assert_false(grants_permits(&r->grants, "bash", "git diff\nrm x"));
	assert_false(grants_permits(&r->grants, "bash", NULL));
	assert_false(grants_permits(&r->grants, "read", NULL));
	resolution_free(r);
	fx_free(&f);
}

/* A terminal command given as words is checked word by word: the words
 * must begin with a pattern's words, compared exactly. */
static void test_D3_terminal_pattern_checks_argv(void **st)
{
	(void)st;
	struct sk sks[] = { { "log", "allowed-tools: [\"Terminal(git log:*)\"]\n", TRUST_FIRST_PARTY, false, false } };
	struct fx f;
	fx_init(&f, sks, 1);
	fx_attach(&f, "log", true);
	struct resolution *r = fx_resolve(&f, NULL, 0);
	assert_string_equal(file(r, "allowed-tools"), "terminal(git log:*)\n");
	const char *ok1[] = { "git", "log", NULL };
	const char *ok2[] = { "git", "log", "--oneline", "-n", "3", NULL };
	const char *ok3[] = { "git", "log", "; rm -rf /", NULL }; /* a word, no shell */
	const char *no1[] = { "git", NULL };
	const char *no2[] = { "git", "push", NULL };
	const char *no3[] = { "git log", NULL };
	const char *no4[] = { "git", "logx", NULL };
	const char *no5[] = { "rm", "git", "log", NULL };
	const char *none[] = { NULL };
	assert_true(grants_permits_argv(&r->grants, "terminal", ok1));
	assert_true(grants_permits_argv(&r->grants, "TERMINAL", ok2));
	assert_true(grants_permits_argv(&r->grants, "terminal", ok3));
	assert_false(grants_permits_argv(&r->grants, "terminal", no1));
	assert_false(grants_permits_argv(&r->grants, "terminal", no2));
	assert_false(grants_permits_argv(&r->grants, "terminal", no3));
	assert_false(grants_permits_argv(&r->grants, "terminal", no4));
	assert_false(grants_permits_argv(&r->grants, "terminal", no5));
	assert_false(grants_permits_argv(&r->grants, "terminal", none));
	assert_false(grants_permits_argv(&r->grants, "terminal", NULL));
	assert_false(grants_permits_argv(&r->grants, "bash", ok1));
	assert_false(grants_permits_argv(NULL, "terminal", ok1));
	/* The string form splits the same way. */
	assert_true(grants_permits(&r->grants, "terminal", "git log --oneline"));
	assert_false(grants_permits(&r->grants, "terminal", "git push"));
	resolution_free(r);
	fx_free(&f);

	/* Unrestricted: any words. */
	struct sk free_sk[] = { { "t", "allowed-tools: [Terminal]\n", TRUST_FIRST_PARTY, false, false } };
	fx_init(&f, free_sk, 1);
	fx_attach(&f, "t", true);
	r = fx_resolve(&f, NULL, 0);
	assert_true(grants_permits_argv(&r->grants, "terminal", no2));
	resolution_free(r);
	fx_free(&f);
}

static void test_D3_patterned_and_unpatterned_is_unrestricted(void **st)
{
	(void)st;
	struct sk sks[] = { { "a", "allowed-tools: [\"Bash(git diff:*)\"]\n", TRUST_FIRST_PARTY, false, false },
			    { "b", "allowed-tools: [Bash]\n", TRUST_FIRST_PARTY, false, false } };
	struct fx f;
	fx_init(&f, sks, 2);
	fx_attach(&f, "a", true);
	fx_attach(&f, "b", true);
	struct resolution *r = fx_resolve(&f, NULL, 0);
	const struct grant_tool *t = grants_find(&r->grants, "bash");
	assert_non_null(t);
	assert_true(t->unrestricted);
	assert_int_equal(t->patterns.n, 0);
	assert_int_equal(t->nby, 2);
	assert_string_equal(t->by[0].pattern, "git diff");
	assert_null(t->by[1].pattern);
	assert_true(grants_permits(&r->grants, "bash", "make; make install"));
	assert_string_equal(file(r, "allowed-tools"), "bash\n");
	resolution_free(r);
	fx_free(&f);
}

static void test_D3_pattern_on_read_grants_nothing(void **st)
{
	(void)st;
	struct sk sks[] = { { "rp", "allowed-tools: [\"Read(src:*)\", \"Terminal(ls:*)\"]\n", TRUST_FIRST_PARTY, false, false } };
	struct fx f;
	fx_init(&f, sks, 1);
	fx_attach(&f, "rp", true);
	struct resolution *r = fx_resolve(&f, NULL, 0);
	assert_int_equal(r->grants.policy, GRANTS_LIST);
	assert_false(grants_has(&r->grants, "read"));
	/* terminal has pattern semantics */
	assert_string_equal(file(r, "allowed-tools"), "terminal(ls:*)\n");
	assert_true(has_warning(&r->grants.warnings, "'Read(src:*)' grants nothing"));
	assert_int_equal(r->grants.ndropped, 1);
	resolution_free(r);
	fx_free(&f);
}

/* D3: WebFetch(domain:HOST) (Claude Code's form) restricts webfetch to the
 * host and its subdomains; the call's url is what is checked (R5). */
static void test_D3_webfetch_domain_grant(void **st)
{
	(void)st;
	struct sk sks[] = { { "web", "allowed-tools: [\"WebFetch(domain:example.com)\", "
			      "\"WebFetch(domain:*.docs.org)\"]\n", TRUST_FIRST_PARTY, false, false } };
	struct fx f;
	fx_init(&f, sks, 1);
	fx_attach(&f, "web", true);
	struct resolution *r = fx_resolve(&f, NULL, 0);
	assert_string_equal(file(r, "allowed-tools"),
			    "webfetch(domain:*.docs.org)\nwebfetch(domain:example.com)\n");
	assert_int_equal(r->grants.ndropped, 0);
	const struct grant_tool *t = grants_find(&r->grants, "webfetch");
	assert_non_null(t);
	assert_false(t->unrestricted);
	assert_int_equal(t->patterns.n, 2);
	assert_true(grants_permits(&r->grants, "webfetch", "https://example.com/"));
	assert_true(grants_permits(&r->grants, "webfetch", "http://docs.example.com/a?b"));
	assert_true(grants_permits(&r->grants, "webfetch", "https://EXAMPLE.com:8443/x"));
	assert_true(grants_permits(&r->grants, "webfetch", "https://api.docs.org/"));
	assert_false(grants_permits(&r->grants, "webfetch", "https://docs.org/"));
	assert_false(grants_permits(&r->grants, "webfetch", "https://evilexample.com/"));
	assert_false(grants_permits(&r->grants, "webfetch", "https://example.com.evil.org/"));
	assert_false(grants_permits(&r->grants, "webfetch", "https://evil.org/?example.com"));
	assert_false(grants_permits(&r->grants, "webfetch", "https://example.com@evil.org/"));
	assert_false(grants_permits(&r->grants, "webfetch", "file:///etc/passwd"));
	assert_false(grants_permits(&r->grants, "webfetch", "example.com"));
	assert_false(grants_permits(&r->grants, "webfetch", NULL));
	assert_string_equal(grants_pattern_argument("webfetch"), "url");
	assert_string_equal(grants_pattern_argument("Bash"), "command");
	assert_string_equal(grants_pattern_argument("terminal"), "command");
	assert_null(grants_pattern_argument("read"));
	resolution_free(r);
	fx_free(&f);
}

/* A webfetch pattern that is not domain:HOST grants nothing, warned. */
static void test_D3_webfetch_other_pattern_grants_nothing(void **st)
{
	(void)st;
	struct sk sks[] = { { "web", "allowed-tools: [\"WebFetch(example.com)\", "
			      "\"WebFetch(domain:*)\", \"WebFetch(domain:a b)\", read]\n",
			      TRUST_FIRST_PARTY, false, false } };
	struct fx f;
	fx_init(&f, sks, 1);
	fx_attach(&f, "web", true);
	struct resolution *r = fx_resolve(&f, NULL, 0);
	assert_false(grants_has(&r->grants, "webfetch"));
	assert_string_equal(file(r, "allowed-tools"), "read\n");
	assert_int_equal(r->grants.ndropped, 3);
	assert_true(has_warning(&r->grants.warnings, "'WebFetch(example.com)' grants nothing: "
				"not a domain pattern: expected domain:HOST"));
	assert_true(has_warning(&r->grants.warnings, "'WebFetch(domain:*)' grants nothing: "
				"empty domain pattern"));
	assert_true(has_warning(&r->grants.warnings, "'WebFetch(domain:a b)' grants nothing"));
	resolution_free(r);
	fx_free(&f);
}

/* D3: a pattern admits commands whose words begin with its words, split
 * without a shell; characters are never compared as a string prefix. */
static void test_D3_pattern_matches_words_not_characters(void **st)
{
	(void)st;
	struct sk sks[] = { { "diff", "allowed-tools: [\"Bash(git diff:*)\"]\n", TRUST_FIRST_PARTY, false, false } };
	struct fx f;
	fx_init(&f, sks, 1);
	fx_attach(&f, "diff", true);
	struct resolution *r = fx_resolve(&f, NULL, 0);
	const struct grants *g = &r->grants;
	/* the attack: a longer first word runs any program */
	assert_false(grants_permits(g, "bash", "git difftool -y -x 'CMD' --no-index a b"));
	assert_false(grants_permits(g, "bash", "git difftool"));
	assert_false(grants_permits(g, "bash", "git diff-tree HEAD"));
	assert_false(grants_permits(g, "bash", "git diffx"));
	/* admitted: the words, then anything (quoted as needed) */
	assert_true(grants_permits(g, "bash", "git diff"));
	assert_true(grants_permits(g, "bash", "git diff --stat"));
	assert_true(grants_permits(g, "bash", "git diff \"a b\""));
	assert_true(grants_permits(g, "bash", "git diff 'a b'"));
	assert_true(grants_permits(g, "bash", "  git\tdiff   --stat "));
	assert_true(grants_permits(g, "bash", "'git' \"diff\" x"));
	assert_true(grants_permits(g, "bash", "git diff 'HEAD~1' '*.c' \"a;b\""));
	/* a quoted blank makes one word: "git diff" is not git diff */
	assert_false(grants_permits(g, "bash", "'git diff'"));
	assert_false(grants_permits(g, "bash", "git diff\\ x"));
	assert_false(grants_permits(g, "bash", "git"));
	assert_false(grants_permits(g, "bash", "GIT DIFF"));
	/* shell syntax is refused, not passed to a shell */
	assert_false(grants_permits(g, "bash", "git diff $(id)"));
	assert_false(grants_permits(g, "bash", "git diff `id`"));
	/* a shell would expand these inside double quotes: refused there too */
	assert_false(grants_permits(g, "bash", "git diff \"$(id)\""));
	assert_false(grants_permits(g, "bash", "git diff \"`id`\""));
	assert_true(grants_permits(g, "bash", "git diff \"\\$(id)\" '$(id)'"));
	assert_false(grants_permits(g, "bash", "git diff; id"));
	assert_false(grants_permits(g, "bash", "git diff;id"));
	assert_false(grants_permits(g, "bash", "git diff && id"));
	assert_false(grants_permits(g, "bash", "git diff\nid"));
	assert_false(grants_permits(g, "bash", "git diff 'a\nb'"));
	assert_false(grants_permits(g, "bash", "git diff *.c"));
	assert_false(grants_permits(g, "bash", "git diff > out"));
	assert_false(grants_permits(g, "bash", "git diff $HOME"));
	assert_false(grants_permits(g, "bash", "git diff 'unterminated"));
	assert_false(grants_permits(g, "bash", ""));
	assert_false(grants_permits(g, "bash", NULL));
	resolution_free(r);
	fx_free(&f);

	/* the same rule outside a resolution */
	assert_true(grants_pattern_matches("git diff", "git diff --stat"));
	assert_false(grants_pattern_matches("git diff", "git difftool"));
	assert_true(grants_pattern_matches("git  diff ", "git diff"));
	assert_false(grants_pattern_matches("", "ls"));
	assert_false(grants_pattern_matches(" ", "ls"));
	assert_false(grants_pattern_matches("git diff |", "git diff"));
	assert_false(grants_pattern_matches(NULL, "ls"));
	assert_false(grants_pattern_matches("ls", NULL));
	assert_false(grants_permits(NULL, "bash", "ls"));
}

/* D3: Bash(), Bash(:*), Bash(*) and blanks grant nothing, with a warning,
 * however the item is written; they never mean "any command". */
static void test_D3_empty_pattern_grants_nothing(void **st)
{
	(void)st;
	const char *items[] = { "Bash()", "Bash(:*)", "Bash(*)", "Bash( )", "Bash( :* )",
				"bash(\t)", "Terminal()", "Terminal(*)" };
	for (size_t i = 0; i < sizeof items / sizeof *items; i++) {
		char fm[128], want[160];
		snprintf(fm, sizeof fm, "allowed-tools: [\"%s\"]\n", items[i]);
		struct sk sks[] = { { "e", fm, TRUST_FIRST_PARTY, false, false } };
		struct fx f;
		fx_init(&f, sks, 1);
		fx_attach(&f, "e", true);
		struct resolution *r = fx_resolve(&f, NULL, 0);
		/* the skill declares: the policy is a list, and it is empty */
		assert_int_equal(r->grants.policy, GRANTS_LIST);
		assert_int_equal(r->grants.n, 0);
		assert_false(grants_permits(&r->grants, "bash", "rm -rf x"));
		assert_false(grants_permits(&r->grants, "terminal", "ls"));
		assert_false(grants_has(&r->grants, "bash"));
		assert_string_equal(file(r, "allowed-tools"), "");
		assert_int_equal(r->grants.ndropped, 1);
		assert_string_equal(r->grants.dropped[0].skill, "e");
		assert_string_equal(r->grants.dropped[0].item, items[i]);
		assert_string_equal(r->grants.dropped[0].reason, "empty command pattern");
		snprintf(want, sizeof want,
			 "skill 'e': allowed-tools item '%s' grants nothing: empty command pattern",
			 items[i]);
		if (!has_warning(&r->grants.warnings, want))
			fail_msg("no warning '%s'", want);
		resolution_free(r);
		fx_free(&f);
	}
}

static void test_D3_unsplittable_pattern_grants_nothing(void **st)
{
	(void)st;
	struct sk sks[] = { { "u", "allowed-tools: [\"Bash(git diff | sh:*)\", \"Bash(ls *)\", \"Bash(echo 'x:*)\", \"Bash(make:*)\"]\n",
			      TRUST_FIRST_PARTY, false, false } };
	struct fx f;
	fx_init(&f, sks, 1);
	fx_attach(&f, "u", true);
	struct resolution *r = fx_resolve(&f, NULL, 0);
	assert_string_equal(file(r, "allowed-tools"), "bash(ls:*)\nbash(make:*)\n");
	assert_int_equal(r->grants.ndropped, 2);
	assert_true(has_warning(&r->grants.warnings,
				"skill 'u': allowed-tools item 'Bash(git diff | sh:*)' grants nothing: "
				"pattern cannot be split: contains shell syntax '|'"));
	assert_true(has_warning(&r->grants.warnings,
				"skill 'u': allowed-tools item 'Bash(echo 'x:*)' grants nothing: "
				"pattern cannot be split: unterminated single quote"));
	assert_non_null(strstr(r->grants.dropped[0].reason, "pattern cannot be split"));
	/* "Bash(ls *)" is the Claude form of Bash(ls:*) */
	assert_true(grants_permits(&r->grants, "bash", "ls -l"));
	assert_true(grants_permits(&r->grants, "bash", "make test"));
	assert_false(grants_permits(&r->grants, "bash", "git diff"));
	resolution_free(r);
	fx_free(&f);
}

/* D3: an empty pattern beside a real grant changes nothing either way. */
static void test_D3_empty_pattern_beside_other_grants(void **st)
{
	(void)st;
	struct sk sks[] = { { "a", "allowed-tools: [\"Bash()\", \"Bash(git log:*)\"]\n", TRUST_FIRST_PARTY, false, false },
			    { "b", "allowed-tools: [\"Bash(*)\", Bash]\n", TRUST_FIRST_PARTY, false, false } };
	struct fx f;
	fx_init(&f, sks, 2);
	fx_attach(&f, "a", true);
	struct resolution *r = fx_resolve(&f, NULL, 0);
	assert_string_equal(file(r, "allowed-tools"), "bash(git log:*)\n");
	assert_false(grants_permits(&r->grants, "bash", "ls"));
	resolution_free(r);
	/* granted with and without a pattern: unrestricted */
	fx_attach(&f, "b", true);
	r = fx_resolve(&f, NULL, 0);
	assert_string_equal(file(r, "allowed-tools"), "bash\n");
	assert_true(grants_permits(&r->grants, "bash", "ls | wc -l"));
	assert_int_equal(r->grants.ndropped, 2);
	resolution_free(r);
	fx_free(&f);
}

static void test_D4_run_skill_is_a_tool_like_the_others(void **st)
{
	(void)st;
	struct sk sks[] = { { "a", "allowed-tools: [read]\n", TRUST_FIRST_PARTY, false, false },
			    { "b", "allowed-tools: [run_skill]\n", TRUST_FIRST_PARTY, false, false } };
	struct fx f;
	fx_init(&f, sks, 2);
	fx_attach(&f, "a", true);
	struct resolution *r = fx_resolve(&f, NULL, 0);
	assert_false(grants_has(&r->grants, "run_skill"));
	resolution_free(r);
	fx_attach(&f, "b", true);
	r = fx_resolve(&f, NULL, 0);
	assert_true(grants_has(&r->grants, "run_skill"));
	resolution_free(r);
	fx_free(&f);
}

/* ---- R7 / R8: stored ∩ now ---- */

/* Resolves the fixture's configuration into *g. */
static void fx_grants(struct fx *f, struct grants *g)
{
	struct resolution *r = fx_resolve(f, NULL, 0);
	assert_int_equal(grants_copy(&r->grants, g), 0);
	resolution_free(r);
}

static void lines_of(const struct grants *g, char *out, size_t cap)
{
	struct buf b = { 0 };
	assert_int_equal(grants_format_lines(g, &b), 0);
	snprintf(out, cap, "%s", b.data ? b.data : "");
	buf_free(&b);
}

static void test_R7_tool_removed_while_waiting(void **st)
{
	(void)st;
	struct sk sks[] = { { "a", "allowed-tools: [read, write]\n", TRUST_FIRST_PARTY, false, false } };
	struct fx f;
	fx_init(&f, sks, 1);
	fx_attach(&f, "a", true);
	struct grants stored, now, eff;
	fx_grants(&f, &stored);
	/* write is unregistered while the run waits */
	strlist_free(&f.c.registered_tools);
	assert_int_equal(strlist_add(&f.c.registered_tools, "read"), 0);
	assert_int_equal(strlist_add(&f.c.registered_tools, "bash"), 0);
	fx_grants(&f, &now);
	assert_int_equal(grants_intersect(&stored, &now, &eff), 0);
	char l[256];
	lines_of(&eff, l, sizeof l);
	assert_string_equal(l, "read\n");
	assert_false(grants_permits(&eff, "write", NULL));
	grants_free(&stored);
	grants_free(&now);
	grants_free(&eff);
	fx_free(&f);
}

static void test_R7_skill_disabled_while_waiting(void **st)
{
	(void)st;
	struct sk sks[] = { { "a", "allowed-tools: [read]\n", TRUST_FIRST_PARTY, false, false },
			    { "b", "allowed-tools: [write]\n", TRUST_FIRST_PARTY, false, false } };
	struct fx f;
	fx_init(&f, sks, 2);
	fx_attach(&f, "a", true);
	fx_attach(&f, "b", true);
	struct grants stored, now, eff;
	fx_grants(&f, &stored);
	f.att[1].enabled = false;
	fx_grants(&f, &now);
	assert_int_equal(grants_intersect(&stored, &now, &eff), 0);
	char l[256];
	lines_of(&eff, l, sizeof l);
	assert_string_equal(l, "read\n");
	assert_true(has_warning(&eff.warnings, "tool 'write' removed"));
	grants_free(&stored);
	grants_free(&now);
	grants_free(&eff);
	fx_free(&f);
}

static void test_R7_only_declaring_skill_disabled_stays_restricted(void **st)
{
	(void)st;
	struct sk sks[] = { { "a", "allowed-tools: [read]\n", TRUST_FIRST_PARTY, false, false },
			    { "plain", NULL, TRUST_FIRST_PARTY, false, false } };
	struct fx f;
	fx_init(&f, sks, 2);
	fx_attach(&f, "a", true);
	fx_attach(&f, "plain", true);
	struct grants stored, now, eff;
	fx_grants(&f, &stored);
	f.att[0].enabled = false;
	fx_grants(&f, &now);
	assert_int_equal(now.policy, GRANTS_ALL);
	assert_int_equal(grants_intersect(&stored, &now, &eff), 0);
	assert_int_equal(eff.policy, GRANTS_LIST);
	char l[256];
	lines_of(&eff, l, sizeof l);
	assert_string_equal(l, "read\n");
	assert_false(grants_permits(&eff, "bash", "ls"));
	grants_free(&stored);
	grants_free(&now);
	grants_free(&eff);
	fx_free(&f);
}

static void test_R8_no_stored_list_uses_now(void **st)
{
	(void)st;
	struct sk sks[] = { { "a", "allowed-tools: [\"Bash(make:*)\", edit]\n", TRUST_FIRST_PARTY, false, false } };
	struct fx f;
	fx_init(&f, sks, 1);
	fx_attach(&f, "a", true);
	struct grants now, eff;
	fx_grants(&f, &now);
	assert_int_equal(grants_intersect(NULL, &now, &eff), 0);
	char a[256], b[256];
	lines_of(&now, a, sizeof a);
	lines_of(&eff, b, sizeof b);
	assert_string_equal(b, "bash(make:*)\nedit\n");
	assert_string_equal(a, b);
	assert_int_equal(eff.policy, now.policy);
	grants_free(&now);
	grants_free(&eff);
	fx_free(&f);
}

static void test_R7_patterned_now_narrows_unrestricted_stored(void **st)
{
	(void)st;
	struct sk sks[] = { { "a", "allowed-tools: [bash, read]\n", TRUST_FIRST_PARTY, false, false } };
	struct fx f;
	fx_init(&f, sks, 1);
	fx_attach(&f, "a", true);
	struct grants stored, now, eff, back;
	fx_grants(&f, &stored);
	/* the skill now narrows bash to a pattern (its SKILL.md was edited) */
	skill_unref(f.cat->entries[0].skill);
	struct sk edited = { "a", "allowed-tools: [\"Bash(git log:*)\", read]\n", TRUST_FIRST_PARTY, false, false };
	f.cat->entries[0].skill = parse_skill(&edited);
	fx_grants(&f, &now);
	assert_int_equal(grants_intersect(&stored, &now, &eff), 0);
	char l[256];
	lines_of(&eff, l, sizeof l);
	assert_string_equal(l, "bash(git log:*)\nread\n");
	assert_false(grants_permits(&eff, "bash", "rm -rf /"));
	assert_true(grants_permits(&eff, "bash", "git log -1"));
	/* and the other way round: stored narrowed, now unrestricted */
	assert_int_equal(grants_intersect(&now, &stored, &back), 0);
	lines_of(&back, l, sizeof l);
	assert_string_equal(l, "bash(git log:*)\nread\n");
	grants_free(&stored);
	grants_free(&now);
	grants_free(&eff);
	grants_free(&back);
	fx_free(&f);
}

/* A hand-made list of one tool with the given patterns. */
static void one_tool(struct grants *g, const char *tool, const char *const *pats,
		     size_t n)
{
	memset(g, 0, sizeof *g);
	g->policy = GRANTS_LIST;
	g->tools = calloc(1, sizeof *g->tools);
	assert_non_null(g->tools);
	g->n = 1;
	g->tools[0].name = strdup(tool);
	g->tools[0].unrestricted = n == 0;
	for (size_t i = 0; i < n; i++)
		assert_int_equal(strlist_add(&g->tools[0].patterns, pats[i]), 0);
}

static void test_R7_prefix_patterns_intersect_to_longer(void **st)
{
	(void)st;
	const char *sp[] = { "git" }, *np[] = { "git diff", "ls" };
	struct grants s, n, out;
	one_tool(&s, "bash", sp, 1);
	one_tool(&n, "bash", np, 2);
	assert_int_equal(grants_intersect(&s, &n, &out), 0);
	assert_int_equal(out.n, 1);
	assert_int_equal(out.tools[0].patterns.n, 1);
	assert_string_equal(out.tools[0].patterns.items[0], "git diff");
	assert_false(grants_permits(&out, "bash", "ls"));
	assert_false(grants_permits(&out, "bash", "git status"));
	grants_free(&out);
	/* disjoint prefixes: nothing left, the tool is removed */
	const char *dp[] = { "make" };
	grants_free(&n);
	one_tool(&n, "bash", dp, 1);
	assert_int_equal(grants_intersect(&s, &n, &out), 0);
	assert_int_equal(out.n, 0);
	assert_false(grants_permits(&out, "bash", "make"));
	assert_true(has_warning(&out.warnings, "tool 'bash' removed"));
	grants_free(&out);
	grants_free(&s);
	grants_free(&n);
}

/* R7: domain patterns intersect by subdomain: the narrower one stays. */
static void test_R7_domain_patterns_intersect_by_subdomain(void **st)
{
	(void)st;
	const char *sp[] = { "domain:example.com" },
		   *np[] = { "domain:docs.example.com", "domain:other.org",
			     "domain:evilexample.com" };
	struct grants s, n, out;
	one_tool(&s, "webfetch", sp, 1);
	one_tool(&n, "webfetch", np, 3);
	assert_int_equal(grants_intersect(&s, &n, &out), 0);
	assert_int_equal(out.n, 1);
	assert_int_equal(out.tools[0].patterns.n, 1);
	assert_string_equal(out.tools[0].patterns.items[0], "domain:docs.example.com");
	assert_true(grants_permits(&out, "webfetch", "https://docs.example.com/"));
	assert_false(grants_permits(&out, "webfetch", "https://example.com/"));
	assert_false(grants_permits(&out, "webfetch", "https://other.org/"));
	grants_free(&out);
	/* the same either way round */
	assert_int_equal(grants_intersect(&n, &s, &out), 0);
	assert_int_equal(out.tools[0].patterns.n, 1);
	assert_string_equal(out.tools[0].patterns.items[0], "domain:docs.example.com");
	grants_free(&out);
	grants_free(&s);
	grants_free(&n);
}

/* R7: patterns intersect word by word, never as character prefixes. */
static void test_R7_patterns_intersect_word_wise(void **st)
{
	(void)st;
	struct grants s, n, out;
	const char *sp[] = { "git diff" }, *np[] = { "git difftool" };
	one_tool(&s, "bash", sp, 1);
	one_tool(&n, "bash", np, 1);
	assert_int_equal(grants_intersect(&s, &n, &out), 0);
	assert_int_equal(out.n, 0);
	assert_false(grants_permits(&out, "bash", "git difftool -x id"));
	grants_free(&out);
	assert_int_equal(grants_intersect(&n, &s, &out), 0);
	assert_int_equal(out.n, 0);
	grants_free(&out);
	grants_free(&s);
	grants_free(&n);

	/* blanks and quoting do not matter, words do */
	const char *sp2[] = { "git  diff" }, *np2[] = { "'git' diff --stat", "ls" };
	one_tool(&s, "bash", sp2, 1);
	one_tool(&n, "bash", np2, 2);
	assert_int_equal(grants_intersect(&s, &n, &out), 0);
	assert_int_equal(out.n, 1);
	assert_int_equal(out.tools[0].patterns.n, 1);
	assert_string_equal(out.tools[0].patterns.items[0], "'git' diff --stat");
	assert_true(grants_permits(&out, "bash", "git diff --stat x"));
	assert_false(grants_permits(&out, "bash", "git diff"));
	grants_free(&out);
	grants_free(&s);
	grants_free(&n);

	/* a stored empty or unsplittable pattern meets nothing */
	const char *ep[] = { "", "git diff;id" }, *gp[] = { "git" };
	one_tool(&s, "bash", ep, 2);
	one_tool(&n, "bash", gp, 1);
	assert_int_equal(grants_intersect(&s, &n, &out), 0);
	assert_int_equal(out.n, 0);
	assert_true(has_warning(&out.warnings, "tool 'bash' removed"));
	grants_free(&out);
	assert_false(grants_permits(&s, "bash", "ls"));
	assert_false(grants_permits(&s, "bash", "git diff"));
	grants_free(&s);
	grants_free(&n);

	assert_true(grants_pattern_covers("git", "git diff"));
	assert_true(grants_pattern_covers("git diff", "git diff"));
	assert_false(grants_pattern_covers("git diff", "git"));
	assert_false(grants_pattern_covers("git diff", "git difftool"));
	assert_false(grants_pattern_covers("", "git"));
	assert_false(grants_pattern_covers("git", ""));
}

/* ---- JSON ---- */

static void test_R6_grants_json_round_trip(void **st)
{
	(void)st;
	struct sk sks[] = { { "a", "allowed-tools: [\"Bash(git diff:*)\", \"Bash(git log:*)\", read, Nope, \"Read(x:*)\"]\n", TRUST_FIRST_PARTY, false, false },
			    { "b", "allowed-tools: [read]\n", TRUST_FIRST_PARTY, false, false } };
	struct fx f;
	fx_init(&f, sks, 2);
	fx_attach(&f, "a", true);
	fx_attach(&f, "b", true);
	struct grants g, back;
	fx_grants(&f, &g);
	json_t *j = grants_to_json(&g);
	assert_non_null(j);
	char *text = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	assert_non_null(text);
	json_error_t jerr;
	json_t *j2 = json_loads(text, 0, &jerr);
	assert_non_null(j2);
	char *err = NULL;
	assert_int_equal(grants_from_json(j2, &back, &err), 0);
	assert_null(err);
	json_t *j3 = grants_to_json(&back);
	char *text2 = json_dumps(j3, JSON_COMPACT);
	assert_string_equal(text, text2);
	assert_int_equal(back.policy, GRANTS_LIST);
	assert_true(grants_permits(&back, "bash", "git log -3"));
	assert_false(grants_permits(&back, "bash", "rm x"));
	assert_int_equal(back.ndropped, 2);
	assert_int_equal(back.declaring.n, 2);
	free(text);
	free(text2);
	json_decref(j2);
	json_decref(j3);
	grants_free(&g);
	grants_free(&back);
	fx_free(&f);
}

static void test_R6_malformed_stored_json_is_an_error(void **st)
{
	(void)st;
	const char *bad[] = {
		"[]",
		"{\"tools\": []}",
		"{\"policy\": \"some\", \"tools\": []}",
		"{\"policy\": \"list\"}",
		"{\"policy\": \"list\", \"tools\": [{\"name\": \"bash\"}]}",
		"{\"policy\": \"list\", \"tools\": [{\"name\": \"bash\", \"unrestricted\": false}]}",
		"{\"policy\": \"list\", \"tools\": [{\"name\": \"bash\", \"unrestricted\": true}, {\"name\": \"BASH\", \"unrestricted\": true}]}",
		"{\"policy\": \"list\", \"tools\": [{\"name\": \"bash\", \"unrestricted\": false, \"patterns\": [1]}]}",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		json_error_t jerr;
		json_t *j = json_loads(bad[i], 0, &jerr);
		assert_non_null(j);
		struct grants g;
		char *err = NULL;
		assert_int_equal(grants_from_json(j, &g, &err), -1);
		assert_non_null(err);
		assert_int_equal(g.n, 0);
		free(err);
		json_decref(j);
	}
}

/* ---- R10 / R13 / D5 ---- */

static struct skill *mk(const char *fm)
{
	struct sk k = { "m", fm, TRUST_FIRST_PARTY, false, false };
	return parse_skill(&k);
}

static void test_R10_sub_skills_beat_inline_true_with_warning(void **st)
{
	(void)st;
	struct skill *s = mk("inline: true\nsub-skills: [lint]\n");
	struct mode_info m = mode_decide(s, EXEC_INLINE);
	assert_int_equal(m.mode, EXEC_SUBAGENT);
	assert_string_equal(m.reason, "has sub-skills");
	assert_non_null(m.warning);
	skill_unref(s);
	/* directory sub-skills count as well */
	s = mk(NULL);
	struct skill *sub = mk(NULL);
	s->subs = &sub;
	s->nsubs = 1;
	m = mode_decide(s, EXEC_INLINE);
	assert_int_equal(m.mode, EXEC_SUBAGENT);
	assert_null(m.warning);
	s->subs = NULL;
	s->nsubs = 0;
	skill_unref(sub);
	skill_unref(s);
}

static void test_R10_inline_true_runs_inline(void **st)
{
	(void)st;
	struct skill *s = mk("inline: true\n");
	struct mode_info m = mode_decide(s, EXEC_SUBAGENT);
	assert_int_equal(m.mode, EXEC_INLINE);
	assert_string_equal(m.reason, "front-matter inline: true");
	assert_null(m.warning);
	skill_unref(s);
}

static void test_R10_execution_mode_decides(void **st)
{
	(void)st;
	struct skill *s = mk("inline: false\n");
	struct mode_info m = mode_decide(s, EXEC_SUBAGENT);
	assert_int_equal(m.mode, EXEC_SUBAGENT);
	assert_string_equal(m.reason, "execution_mode subagent");
	m = mode_decide(s, EXEC_INLINE);
	assert_int_equal(m.mode, EXEC_INLINE);
	assert_string_equal(m.reason, "execution_mode inline");
	skill_unref(s);
}

static void join(const struct strlist *l, char *out, size_t cap)
{
	out[0] = '\0';
	for (size_t i = 0; i < l->n; i++) {
		strncat(out, l->items[i], cap - strlen(out) - 1);
		strncat(out, " ", cap - strlen(out) - 1);
	}
}

static void test_R13_default_subagent_tools(void **st)
{
	(void)st;
	struct strlist reg = { 0 }, out = { 0 };
	for (size_t i = 0; i < NALL; i++)
		assert_int_equal(strlist_add(&reg, all_tools[i]), 0);
	struct skill *s = mk(NULL);
	char l[256];
	assert_int_equal(mode_subagent_tools(s, &reg, false, NULL, &out), 0);
	join(&out, l, sizeof l);
	assert_string_equal(l, "bash read edit write webfetch ");
	strlist_free(&out);
	assert_int_equal(mode_subagent_tools(s, &reg, true, NULL, &out), 0);
	join(&out, l, sizeof l);
	assert_string_equal(l, "bash read edit write webfetch python ");
	strlist_free(&out);
	/* only registered tools */
	strlist_free(&reg);
	assert_int_equal(strlist_add(&reg, "read"), 0);
	assert_int_equal(strlist_add(&reg, "python"), 0);
	assert_int_equal(mode_subagent_tools(s, &reg, true, NULL, &out), 0);
	join(&out, l, sizeof l);
	assert_string_equal(l, "read python ");
	strlist_free(&out);
	strlist_free(&reg);
	skill_unref(s);
}

static void test_R13_never_run_skill_terminal_learn_skill(void **st)
{
	(void)st;
	struct strlist reg = { 0 }, out = { 0 };
	for (size_t i = 0; i < NALL; i++)
		assert_int_equal(strlist_add(&reg, all_tools[i]), 0);
	struct skill *s = mk("tools: [Read, run_skill, terminal, learn_skill, Bash, read, ask_user]\n");
	assert_int_equal(mode_subagent_tools(s, &reg, true, NULL, &out), 0);
	char l[256];
	join(&out, l, sizeof l);
	assert_string_equal(l, "read bash ask_user ");
	strlist_free(&out);
	skill_unref(s);
	/* tools: [] gives none */
	s = mk("tools: []\n");
	assert_int_equal(mode_subagent_tools(s, &reg, true, NULL, &out), 0);
	assert_int_equal(out.n, 0);
	skill_unref(s);
	strlist_free(&reg);
}

static void test_D5_subagent_tools_within_allow_list(void **st)
{
	(void)st;
	struct strlist reg = { 0 }, out = { 0 };
	for (size_t i = 0; i < NALL; i++)
		assert_int_equal(strlist_add(&reg, all_tools[i]), 0);
	struct sk gate_sk = { "g", "allowed-tools: [read, \"Bash(git diff:*)\", run_skill]\n", TRUST_FIRST_PARTY, false, false };
	struct skill *gs = parse_skill(&gate_sk);
	const struct skill *gate[] = { gs };
	struct grants allow;
	assert_int_equal(grants_resolve(&reg, gate, 1, &allow), 0);
	struct skill *s = mk(NULL);
	assert_int_equal(mode_subagent_tools(s, &reg, true, &allow, &out), 0);
	char l[256];
	join(&out, l, sizeof l);
	assert_string_equal(l, "bash read ");
	strlist_free(&out);
	/* an empty allow-list leaves the sub-agent nothing */
	struct grants none = { 0 };
	none.policy = GRANTS_LIST;
	assert_int_equal(mode_subagent_tools(s, &reg, true, &none, &out), 0);
	assert_int_equal(out.n, 0);
	grants_free(&allow);
	skill_unref(s);
	skill_unref(gs);
	strlist_free(&reg);
}

/* R13 with D3: a command pattern in tools: never gives a sub-agent more
 * than its text says; an empty one gives nothing. */
static void test_D3_subagent_tools_patterns_never_widen(void **st)
{
	(void)st;
	struct strlist reg = { 0 }, out = { 0 };
	for (size_t i = 0; i < NALL; i++)
		assert_int_equal(strlist_add(&reg, all_tools[i]), 0);
	char l[256];
	/* empty patterns: nothing, whatever the run allows */
	struct skill *s = mk("tools: [\"Bash()\", \"Bash(*)\", \"Bash(:*)\", read]\n");
	assert_true(has_warning(&s->warnings, "tools: item 'Bash()' grants nothing: empty command pattern"));
	assert_int_equal(mode_subagent_tools(s, &reg, true, NULL, &out), 0);
	join(&out, l, sizeof l);
	assert_string_equal(l, "read ");
	strlist_free(&out);
	struct grants all;
	assert_int_equal(grants_resolve(&reg, NULL, 0, &all), 0);
	assert_int_equal(all.policy, GRANTS_ALL);
	assert_int_equal(mode_subagent_tools(s, &reg, true, &all, &out), 0);
	join(&out, l, sizeof l);
	assert_string_equal(l, "read ");
	strlist_free(&out);
	skill_unref(s);

	/* a real pattern: not with every command allowed (it would widen) */
	s = mk("tools: [\"Bash(git diff:*)\", \"Read(src:*)\"]\n");
	assert_true(has_warning(&s->warnings, "the pattern is not checked on the sub-agent's calls"));
	assert_int_equal(mode_subagent_tools(s, &reg, true, NULL, &out), 0);
	assert_int_equal(out.n, 0);
	assert_int_equal(mode_subagent_tools(s, &reg, true, &all, &out), 0);
	assert_int_equal(out.n, 0);
	/* nor when the run allows commands beyond it */
	struct sk wide_sk = { "w", "allowed-tools: [\"Bash(git:*)\", read]\n", TRUST_FIRST_PARTY, false, false };
	struct skill *ws = parse_skill(&wide_sk);
	const struct skill *wide[] = { ws };
	struct grants allow;
	assert_int_equal(grants_resolve(&reg, wide, 1, &allow), 0);
	assert_int_equal(mode_subagent_tools(s, &reg, true, &allow, &out), 0);
	assert_int_equal(out.n, 0);
	grants_free(&allow);
	skill_unref(ws);
	/* but when every command the run allows lies within it */
	struct sk narrow_sk = { "n", "allowed-tools: [\"Bash(git diff --stat:*)\", \"Bash(git diff:*)\", read]\n", TRUST_FIRST_PARTY, false, false };
	struct skill *ns = parse_skill(&narrow_sk);
	const struct skill *narrow[] = { ns };
	assert_int_equal(grants_resolve(&reg, narrow, 1, &allow), 0);
	assert_int_equal(mode_subagent_tools(s, &reg, true, &allow, &out), 0);
	join(&out, l, sizeof l);
	assert_string_equal(l, "bash ");
	strlist_free(&out);
	grants_free(&allow);
	skill_unref(ns);
	skill_unref(s);

	/* a pattern that cannot be split gives nothing; an unpatterned item
	 * beside a pattern gives the tool */
	s = mk("tools: [\"Bash(git diff | sh:*)\"]\n");
	assert_true(has_warning(&s->warnings, "grants nothing: pattern cannot be split: contains shell syntax '|'"));
	assert_int_equal(mode_subagent_tools(s, &reg, true, NULL, &out), 0);
	assert_int_equal(out.n, 0);
	skill_unref(s);
	s = mk("tools: [\"Bash(ls:*)\", Bash]\n");
	assert_int_equal(mode_subagent_tools(s, &reg, true, NULL, &out), 0);
	join(&out, l, sizeof l);
	assert_string_equal(l, "bash ");
	strlist_free(&out);
	skill_unref(s);
	grants_free(&all);
	strlist_free(&reg);
}

static void test_R10_mode_render(void **st)
{
	(void)st;
	struct config c = { 0 };
	c.execution_mode = EXEC_INLINE;
	assert_int_equal(strlist_add(&c.registered_tools, "bash"), 0);
	assert_int_equal(strlist_add(&c.registered_tools, "read"), 0);
	assert_int_equal(strlist_add(&c.registered_tools, "run_skill"), 0);
	struct skill *s = mk("inline: true\nsub-skills: [x]\n");
	struct buf b = { 0 };
	assert_int_equal(mode_render(&c, s, false, &b), 0);
	assert_string_equal(b.data, "subagent\nhas sub-skills\ntools: bash read\n"
				    "warning: inline: true ignored: a skill with sub-skills always runs as a sub-agent\n");
	buf_free(&b);
	skill_unref(s);
	s = mk("tools: []\n");
	assert_int_equal(mode_render(&c, s, false, &b), 0);
	assert_string_equal(b.data, "inline\nexecution_mode inline\ntools: (none)\n");
	buf_free(&b);
	skill_unref(s);
	strlist_free(&c.registered_tools);
}

/* ---- check ---- */

static void test_check_counts_orphaned_and_invalid_attached(void **st)
{
	(void)st;
	struct sk sks[] = { { "good", "allowed-tools: [read]\n", TRUST_FIRST_PARTY, false, false },
			    { "broken", "allowed-tools: [bash\n", TRUST_FIRST_PARTY, false, false },
			    { "lonely-broken", "x: [\n", TRUST_FIRST_PARTY, false, false } };
	struct fx f;
	fx_init(&f, sks, 3);
	struct source src = { .path = "/skills", .trust = TRUST_FIRST_PARTY };
	f.c.sources = &src;
	f.c.nsources = 1;
	fx_attach(&f, "good", true);
	fx_attach(&f, "broken", true);
	fx_attach(&f, "ghost", true);
	f.c.configs = &f.conf;
	f.c.nconfigs = 1;
	struct buf b = { 0 };
	int errors = check_report(&f.c, f.cat, NULL, &b);
	assert_int_equal(errors, 2);
	assert_non_null(strstr(b.data, "skill good: valid, action, trust first_party, source /skills\n"));
	assert_non_null(strstr(b.data, "skill lonely-broken: invalid: "));
	assert_non_null(strstr(b.data, "configuration default: error: skill 'ghost' orphaned"));
	assert_non_null(strstr(b.data, "configuration default: error: skill 'broken' invalid"));
	assert_null(strstr(b.data, "error: skill 'lonely-broken'"));
	assert_non_null(strstr(b.data, "configuration default: effective: good\n"));
	assert_non_null(strstr(b.data, "configuration default: policy: list\n"));
	assert_non_null(strstr(b.data, "configuration default: tools: read\n"));
	assert_non_null(strstr(b.data, "errors: 2\n"));
	assert_null(strstr(b.data, "claude"));
	buf_free(&b);
	/* --claude: the settings of configs/<cfg>/claude/ on one line each,
	 * and their warnings; the last line is still the count */
	struct check_options opts = { .claude = true };
	errors = check_report_opts(&f.c, f.cat, NULL, &opts, &b);
	assert_int_equal(errors, 2);
	const char *key = "configuration default: claude settings.json: ";
	const char *line = strstr(b.data, key);
	assert_non_null(line);
	json_error_t jerr;
	json_t *got = json_loadb(line + strlen(key), strcspn(line + strlen(key), "\n"), 0, &jerr);
	assert_non_null(got);
	struct resolution *r = fx_resolve(&f, NULL, 0);
	size_t len = 0;
	json_t *want = json_loads(claude_file(&r->claude_files, "settings.json", &len), 0, &jerr);
	assert_non_null(want);
	assert_true(json_equal(got, want));
	json_decref(got);
	json_decref(want);
	resolution_free(r);
	assert_non_null(strstr(b.data, "\"defaultMode\":\"dontAsk\""));
	assert_true(b.len > 10 && strcmp(b.data + b.len - strlen("errors: 2\n"), "errors: 2\n") == 0);
	buf_free(&b);
	/* a config error counts, and no config at all still reports */
	errors = check_report(NULL, NULL, "config.yaml:3: skills: expected a mapping", &b);
	assert_int_equal(errors, 1);
	assert_non_null(strstr(b.data, "config: error: config.yaml:3: skills: expected a mapping\n"));
	buf_free(&b);
	f.c.sources = NULL;
	f.c.configs = NULL;
	fx_free(&f);
}

/* ---- the tool ceiling (issue 19; DESIGN.md section 9:
 * configurations.<cfg>.tools, "optional ceiling: list ∩ ceiling") ---- */

/* One configuration attaching one skill (front-matter fm, NULL: none
 * declared) under ceiling (NULL-terminated; NULL: an empty ceiling). */
struct ceiling_case {
	const char *fm;
	const char *ceiling[4];
	const char *allowed;  /* configs/<cfg>/allowed-tools after the cap */
	const char *warning;  /* a warning that must be there, or NULL */
};

static struct resolution *resolve_capped(struct fx *f, const char *fm,
					 const char *const *ceiling)
{
	struct sk sks[] = { { "s", fm, TRUST_FIRST_PARTY, false, false } };
	fx_init(f, sks, 1);
	fx_attach(f, "s", true);
	f->conf.has_ceiling = true;
	for (size_t i = 0; ceiling && ceiling[i]; i++)
		assert_int_equal(strlist_add(&f->conf.ceiling, ceiling[i]), 0);
	return fx_resolve(f, NULL, 0);
}

static void capped_free(struct fx *f, struct resolution *r)
{
	resolution_free(r);
	strlist_free(&f->conf.ceiling);
	fx_free(f);
}

/* Every policy (all, [], a list, invalid: D1) against ceilings of plain
 * tools and of patterns, each combination of plain and patterned on the
 * two sides, and ceiling items that allow nothing. */
static void test_ceiling_caps_every_policy_and_pattern(void **st)
{
	(void)st;
	static const struct ceiling_case cases[] = {
		/* policy all (R2): the ceiling is the list */
		{ NULL, { "read", "Bash(git log:*)", NULL }, "bash(git log:*)\nread\n", NULL },
		{ NULL, { NULL }, "", NULL },
		{ NULL, { "Terminal(git log:*)", "terminal", NULL }, "terminal\n", NULL },
		/* R3: declared [] stays empty; a ceiling never widens */
		{ "allowed-tools: []\n", { "read", NULL }, "", NULL },
		/* a list: what the ceiling does not name goes */
		{ "allowed-tools: [read, write, bash]\n", { "read", "Bash(git diff:*)", NULL },
		  "bash(git diff:*)\nread\n", NULL },
		{ "allowed-tools: [bash]\n", { "bash", NULL }, "bash\n", NULL },
		/* plain ∩ pattern, both ways */
		{ "allowed-tools: [\"Bash(git diff:*)\"]\n", { "bash", NULL }, "bash(git diff:*)\n",
		  NULL },
		/* pattern ∩ pattern: the longer when one's words begin the other's */
		{ "allowed-tools: [\"Bash(git:*)\"]\n", { "Bash(git diff:*)", NULL },
		  "bash(git diff:*)\n", NULL },
		{ "allowed-tools: [\"Bash(git diff:*)\"]\n", { "Bash(git:*)", NULL },
		  "bash(git diff:*)\n", NULL },
		/* ... else nothing: words, not characters */
		{ "allowed-tools: [\"Bash(git diff:*)\"]\n", { "Bash(git difftool:*)", NULL }, "",
		  NULL },
		{ "allowed-tools: [\"Bash(git diff:*)\", \"Bash(ls:*)\"]\n",
		  { "Bash(git:*)", "Bash(ls -l:*)", NULL }, "bash(git diff:*)\nbash(ls -l:*)\n",
		  NULL },
		/* domain patterns meet by subdomain */
		{ "allowed-tools: [\"WebFetch(domain:example.com)\"]\n",
		  { "WebFetch(domain:docs.example.com)", NULL },
		  "webfetch(domain:docs.example.com)\n", NULL },
		/* Claude Code names, any case */
		{ "allowed-tools: [Read, Write]\n", { "Write", NULL }, "write\n", NULL },
		/* ceiling items that allow nothing: left out, warned, narrower */
		{ "allowed-tools: [read]\n", { "Read(x:*)", NULL }, "",
		  "ceiling (tools:) item 'Read(x:*)' allows nothing: 'read' takes no command pattern" },
		{ "allowed-tools: [bash]\n", { "Bash()", NULL }, "",
		  "ceiling (tools:) item 'Bash()' allows nothing: empty command pattern" },
		{ "allowed-tools: [read]\n", { "nope", "read", NULL }, "read\n",
		  "'nope' is not a registered tool" },
		/* D1: an invalid skill declares [] whatever the ceiling */
		{ "allowed-tools: [read]\nallowed-tools: [read]\n", { "read", NULL }, "", NULL },
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		const struct ceiling_case *c = &cases[i];
		struct fx f;
		struct resolution *r = resolve_capped(&f, c->fm, c->ceiling);
		if (strcmp(file(r, "allowed-tools"), c->allowed) != 0)
			fail_msg("case %zu: allowed-tools [%s], expected [%s]", i,
				 file(r, "allowed-tools"), c->allowed);
		assert_true(r->grants.capped);
		assert_int_equal(r->grants.policy, GRANTS_LIST);
		if (c->warning && !has_warning(&r->warnings, c->warning))
			fail_msg("case %zu: no warning '%s'", i, c->warning);
		/* enforced as listed (R5): nothing the ceiling left out passes */
		if (!strstr(c->allowed, "bash"))
			assert_false(grants_permits(&r->grants, "bash", "git diff"));
		if (!strstr(c->allowed, "read"))
			assert_false(grants_has(&r->grants, "read"));
		capped_free(&f, r);
	}
}

/* What the ceiling took is recorded per line (grants.json "ceiling"), the
 * skills' provenance stays, and a call is checked against the capped list. */
static void test_ceiling_records_what_it_removed(void **st)
{
	(void)st;
	static const char *const ceiling[] = { "read", "Bash(git diff:*)", NULL };
	struct fx f;
	struct resolution *r = resolve_capped(&f, "allowed-tools: [read, write, bash]\n", ceiling);
	const struct grants *g = &r->grants;
	assert_int_equal(g->ncut, 2);
	assert_string_equal(g->cut[0].item, "bash");
	assert_int_equal(g->cut[0].kept.n, 1);
	assert_string_equal(g->cut[0].kept.items[0], "bash(git diff:*)");
	assert_string_equal(g->cut[1].item, "write");
	assert_int_equal(g->cut[1].kept.n, 0);
	assert_true(grants_permits(g, "bash", "git diff --stat"));
	assert_false(grants_permits(g, "bash", "git push"));
	assert_false(grants_has(g, "write"));
	const struct grant_tool *t = grants_find(g, "read");
	assert_non_null(t);
	assert_int_equal(t->nby, 1);
	assert_string_equal(t->by[0].skill, "s");
	json_error_t jerr;
	json_t *j = json_loads(file(r, "grants.json"), 0, &jerr);
	assert_non_null(j);
	json_t *c = json_object_get(j, "ceiling");
	assert_true(json_is_object(c));
	assert_int_equal(json_array_size(json_object_get(c, "tools")), 2);
	json_t *removed = json_object_get(c, "removed");
	assert_int_equal(json_array_size(removed), 2);
	assert_string_equal(json_string_value(json_object_get(json_array_get(removed, 1), "item")),
			    "write");
	json_decref(j);
	capped_free(&f, r);
}

/* R6/R7 unchanged: the stored list is the capped one (round trip, the
 * ceiling kept), and stored ∩ now keeps it narrowed. */
static void test_ceiling_stored_list_round_trip_and_R7(void **st)
{
	(void)st;
	static const char *const ceiling[] = { "Bash(git:*)", NULL };
	struct fx f;
	struct resolution *r = resolve_capped(&f, "allowed-tools: [bash, read]\n", ceiling);
	json_t *j = grants_to_json(&r->grants);
	char *text = json_dumps(j, JSON_COMPACT);
	struct grants back, now, out;
	char *err = NULL;
	assert_int_equal(grants_from_json(j, &back, &err), 0);
	json_t *j2 = grants_to_json(&back);
	char *text2 = json_dumps(j2, JSON_COMPACT);
	assert_string_equal(text, text2);
	assert_true(back.capped);
	/* now: the skill grants everything again, no ceiling: stored wins */
	const char *np[] = { NULL };
	one_tool(&now, "bash", np, 0);
	assert_int_equal(grants_intersect(&back, &now, &out), 0);
	assert_true(grants_permits(&out, "bash", "git status"));
	assert_false(grants_permits(&out, "bash", "rm -rf x"));
	assert_true(out.capped);
	grants_free(&out);
	grants_free(&now);
	grants_free(&back);
	json_decref(j);
	json_decref(j2);
	free(text);
	free(text2);
	capped_free(&f, r);
}

/* grants_cap alone (the call a rendering of the list makes): g is left
 * as it was; a ceiling item naming a tool that cannot work here is no
 * warning; with no ceiling item at all, nothing is left. */
static void test_ceiling_cap_is_pure(void **st)
{
	(void)st;
	const char *np[] = { NULL };
	struct grants g, out;
	one_tool(&g, "bash", np, 0);
	struct strlist ceiling = { 0 }, reg = { 0 }, unavailable = { 0 };
	assert_int_equal(strlist_add(&ceiling, "python"), 0);
	assert_int_equal(strlist_add(&ceiling, "Bash(make:*)"), 0);
	assert_int_equal(strlist_add(&reg, "bash"), 0);
	assert_int_equal(strlist_add(&unavailable, "python"), 0);
	assert_int_equal(grants_cap(&g, &ceiling, &reg, &unavailable, &out), 0);
	assert_int_equal(out.warnings.n, 0);
	assert_true(grants_permits(&out, "bash", "make all"));
	assert_false(grants_permits(&out, "bash", "makeall"));
	assert_true(grants_permits(&g, "bash", "rm x")); /* g unchanged */
	assert_false(g.capped);
	grants_free(&out);
	struct strlist none = { 0 };
	assert_int_equal(grants_cap(&g, &none, &reg, NULL, &out), 0);
	assert_int_equal(out.n, 0);
	assert_false(grants_has(&out, "bash"));
	grants_free(&out);
	grants_free(&g);
	strlist_free(&ceiling);
	strlist_free(&reg);
	strlist_free(&unavailable);
}

int main(void)
{
	const struct CMUnitTest t[] = {
		cmocka_unit_test(test_R2_no_declaring_skill_gives_all_registered_tools),
		cmocka_unit_test(test_R3_declared_empty_alone_gives_no_tools),
		cmocka_unit_test(test_R3_declared_empty_widened_by_read),
		cmocka_unit_test(test_R2_union_of_two_lists),
		cmocka_unit_test(test_R2_unknown_tool_dropped_with_warning),
		cmocka_unit_test(test_D3_claude_code_names_resolve_or_drop),
		cmocka_unit_test(test_config_and_catalogue_warnings_come_first),
		cmocka_unit_test(test_R2_unregistered_tool_not_granted),
		cmocka_unit_test(test_R2_unavailable_tool_granted_warns_why),
		cmocka_unit_test(test_R2_claude_settings_not_bounded_by_registered),
		cmocka_unit_test(test_R4_globally_disabled_declaring_skill_ignored),
		cmocka_unit_test(test_R4_attachment_disabled_declaring_skill_ignored),
		cmocka_unit_test(test_R4_catalogue_disabled_flag_ignored),
		cmocka_unit_test(test_R4_orphaned_attachment),
		cmocka_unit_test(test_R1_trust_below_floor),
		cmocka_unit_test(test_R1_forced_skill_duplicating_attachment),
		cmocka_unit_test(test_R1_check_order_duplicate_first),
		cmocka_unit_test(test_R1_attach_all_in_name_order),
		cmocka_unit_test(test_D1_invalid_attached_skill_alone_gives_no_tools),
		cmocka_unit_test(test_D1_invalid_skill_never_widens_even_if_struct_lists_tools),
		cmocka_unit_test(test_D1_duplicate_allowed_tools_gives_no_tools),
		cmocka_unit_test(test_D3_string_form_read_write),
		cmocka_unit_test(test_D3_bash_pattern_grant),
		cmocka_unit_test(test_D3_terminal_pattern_checks_argv),
		cmocka_unit_test(test_D3_patterned_and_unpatterned_is_unrestricted),
		cmocka_unit_test(test_D3_pattern_on_read_grants_nothing),
		cmocka_unit_test(test_D3_webfetch_domain_grant),
		cmocka_unit_test(test_D3_webfetch_other_pattern_grants_nothing),
		cmocka_unit_test(test_D3_pattern_matches_words_not_characters),
		cmocka_unit_test(test_D3_empty_pattern_grants_nothing),
		cmocka_unit_test(test_D3_unsplittable_pattern_grants_nothing),
		cmocka_unit_test(test_D3_empty_pattern_beside_other_grants),
		cmocka_unit_test(test_D4_run_skill_is_a_tool_like_the_others),
		cmocka_unit_test(test_R7_tool_removed_while_waiting),
		cmocka_unit_test(test_R7_skill_disabled_while_waiting),
		cmocka_unit_test(test_R7_only_declaring_skill_disabled_stays_restricted),
		cmocka_unit_test(test_R8_no_stored_list_uses_now),
		cmocka_unit_test(test_R7_patterned_now_narrows_unrestricted_stored),
		cmocka_unit_test(test_R7_prefix_patterns_intersect_to_longer),
		cmocka_unit_test(test_R7_domain_patterns_intersect_by_subdomain),
		cmocka_unit_test(test_R7_patterns_intersect_word_wise),
		cmocka_unit_test(test_R6_grants_json_round_trip),
		cmocka_unit_test(test_R6_malformed_stored_json_is_an_error),
		cmocka_unit_test(test_R10_sub_skills_beat_inline_true_with_warning),
		cmocka_unit_test(test_R10_inline_true_runs_inline),
		cmocka_unit_test(test_R10_execution_mode_decides),
		cmocka_unit_test(test_R10_mode_render),
		cmocka_unit_test(test_R13_default_subagent_tools),
		cmocka_unit_test(test_R13_never_run_skill_terminal_learn_skill),
		cmocka_unit_test(test_D5_subagent_tools_within_allow_list),
		cmocka_unit_test(test_D3_subagent_tools_patterns_never_widen),
		cmocka_unit_test(test_check_counts_orphaned_and_invalid_attached),
		cmocka_unit_test(test_ceiling_caps_every_policy_and_pattern),
		cmocka_unit_test(test_ceiling_records_what_it_removed),
		cmocka_unit_test(test_ceiling_stored_list_round_trip_and_R7),
		cmocka_unit_test(test_ceiling_cap_is_pure),
	};
	return cmocka_run_group_tests(t, NULL, NULL);
}
