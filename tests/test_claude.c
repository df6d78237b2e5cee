/* A configuration's allow-list as Claude Code settings (DESIGN.md section
 * 8, configs/<cfg>/claude/): the one table of Claude Code tool names (D3)
 * read both ways; every skillfs tool, every pattern form, each policy
 * (R2, R3, D1), a tool granted with and without a pattern (D3), tools
 * without an equivalent, a tool ceiling, and the files' text. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "buf.h"
#include "claude.h"
#include "claudetools.h"
#include "config.h"
#include "grants.h"
#include "skill.h"

/* ---- helpers ---- */

/* A skill named name whose front-matter holds the lines fm (NULL: none
 * beyond name and description). */
static struct skill *make_skill(const char *name, const char *fm)
{
	char *text = NULL;
	assert_true(asprintf(&text, "---\nname: %s\ndescription: the %s skill\n%s---\nBody.\n",
			     name, name, fm ? fm : "") > 0);
	struct skill *s = skill_parse(name, NULL, text, strlen(text), NULL);
	free(text);
	assert_non_null(s);
	return s;
}

/* The permissions of skills named s0, s1, ... declaring fms[i] (each a
 * front-matter line or NULL), resolved as configs/<cfg>/claude/ is. */
static void resolve(const char *const *fms, size_t n, const struct strlist *ceiling,
		    struct claude_permissions *p)
{
	struct skill *sk[8];
	assert_true(n <= 8);
	for (size_t i = 0; i < n; i++) {
		char name[8];
		snprintf(name, sizeof name, "s%zu", i);
		sk[i] = make_skill(name, fms[i]);
	}
	assert_int_equal(claude_permissions_resolve((const struct skill *const *)sk, n, ceiling, p),
			 0);
	for (size_t i = 0; i < n; i++)
		skill_unref(sk[i]);
}

static void resolve1(const char *fm, struct claude_permissions *p)
{
	resolve(&fm, 1, NULL, p);
}

/* The items of l joined by single spaces (caller frees). */
static char *joined(const struct strlist *l)
{
	struct buf b = { 0 };
	assert_int_equal(buf_puts(&b, ""), 0);
	for (size_t i = 0; i < l->n; i++)
		assert_int_equal(buf_printf(&b, "%s%s", i ? " " : "", l->items[i]), 0);
	return buf_steal(&b, NULL);
}

static void assert_list(const struct strlist *l, const char *want)
{
	char *got = joined(l);
	if (strcmp(got, want) != 0)
		fail_msg("got  [%s]\nwant [%s]", got, want);
	free(got);
}

static bool has_warning(const struct claude_permissions *p, const char *needle)
{
	for (size_t i = 0; i < p->warnings.n; i++)
		if (strstr(p->warnings.items[i], needle))
			return true;
	return false;
}

/* The names Claude Code 2.1 gets when nothing is granted: every name of
 * the table but the note tools and the older names. */
static const char deny_all[] =
	"Agent AskUserQuestion Bash BashOutput CronCreate CronDelete CronList Edit "
	"EnterPlanMode EnterWorktree ExitPlanMode ExitWorktree Glob Grep KillShell LSP "
	"ListMcpResourcesTool Monitor NotebookEdit PowerShell REPL Read ReadMcpResourceTool "
	"ReportFindings ScheduleWakeup SendMessage Task TaskOutput TaskStop WebFetch "
	"WebSearch Workflow Write";
/* The tools that only load text or keep notes: allowed under every policy. */
static const char notes[] = "Skill TaskCreate TaskGet TaskList TaskUpdate TodoWrite ToolSearch";

/* ---- the table ---- */

/* D3: one table, sorted and without a name twice; each skillfs tool it
 * names is a built-in tool; every name it reads maps through
 * tool_from_claude, and no other does. */
static void test_D3_one_table_both_ways(void **st)
{
	(void)st;
	size_t n;
	const struct claude_tool *t = claude_tools(&n);
	assert_true(n >= 30);
	for (size_t i = 0; i < n; i++) {
		if (i)
			assert_true(strcmp(t[i - 1].name, t[i].name) < 0);
		for (size_t k = 0; k < i; k++)
			assert_true(strcasecmp(t[k].name, t[i].name) != 0);
		if (t[i].tool) {
			bool builtin = false;
			for (size_t b = 0; b < config_builtin_tools_n; b++)
				builtin |= strcmp(config_builtin_tools[b], t[i].tool) == 0;
			assert_true(builtin);
		}
		bool missing = false;
		const char *to = tool_from_claude(t[i].name, &missing);
		if (t[i].flags & CLAUDE_READS) {
			assert_string_equal(to, t[i].tool);
			assert_false(missing);
		} else {
			assert_null(to);
			assert_true(missing);
		}
		assert_ptr_equal(claude_tool_find(t[i].name), &t[i]);
	}
	/* The mapping the issue names, skillfs tool -> Claude Code tool. */
	const char *pairs[][2] = { { "Read", "read" },   { "Write", "write" },
				   { "Edit", "edit" },   { "MultiEdit", "edit" },
				   { "Glob", "glob" },   { "Grep", "grep" },
				   { "Bash", "bash" },   { "WebFetch", "webfetch" },
				   { "AskUserQuestion", "ask_user" }, { "Skill", "run_skill" } };
	for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) {
		const struct claude_tool *r = claude_tool_find(pairs[i][0]);
		assert_non_null(r);
		assert_string_equal(r->tool, pairs[i][1]);
	}
	/* Skill grants nothing in skillfs (it is not read as run_skill). */
	assert_null(tool_from_claude("skill", NULL));
	assert_null(claude_tool_find("python"));
	assert_null(claude_tool_find(NULL));
}

/* ---- every tool ---- */

/* Each built-in tool granted alone (a declared list, R2): its Claude Code
 * names are allowed, every other name of the table is denied, dontAsk;
 * python, terminal and learn_skill have no equivalent and are named in the
 * warnings, never widened into another tool. */
static void test_R2_every_tool_alone(void **st)
{
	(void)st;
	static const struct {
		const char *tool, *allowed;
	} want[] = {
		{ "bash", "Bash" },         { "python", NULL },   { "terminal", NULL },
		{ "read", "Read" },         { "write", "Write" }, { "edit", "Edit" },
		{ "glob", "Glob" },         { "grep", "Grep" },   { "webfetch", "WebFetch" },
		{ "run_skill", NULL },      { "learn_skill", NULL },
		{ "ask_user", "AskUserQuestion" },
	};
	assert_int_equal(sizeof want / sizeof *want, config_builtin_tools_n);
	for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
		char fm[64];
		snprintf(fm, sizeof fm, "allowed-tools: [%s]\n", want[i].tool);
		struct claude_permissions p;
		resolve1(fm, &p);
		assert_true(p.restricted);
		/* allow: the note tools plus this tool's name */
		struct strlist allow = { 0 }, deny = { 0 };
		size_t n;
		const struct claude_tool *t = claude_tools(&n);
		for (size_t k = 0; k < n; k++) {
			if (t[k].flags & CLAUDE_LEGACY)
				continue;
			bool mine = want[i].allowed && strcmp(t[k].name, want[i].allowed) == 0;
			assert_int_equal(strlist_add((t[k].flags & CLAUDE_NOTES) || mine ? &allow
											 : &deny,
						     t[k].name),
					 0);
		}
		char *a = joined(&allow), *d = joined(&deny);
		assert_list(&p.allow, a);
		assert_list(&p.deny, d);
		free(a);
		free(d);
		strlist_free(&allow);
		strlist_free(&deny);
		char needle[64];
		snprintf(needle, sizeof needle, "%s: left out: Claude Code has no tool", want[i].tool);
		if (want[i].allowed || strcmp(want[i].tool, "run_skill") == 0)
			assert_false(has_warning(&p, needle));
		else
			assert_true(has_warning(&p, needle));
		if (!want[i].allowed && strcmp(want[i].tool, "run_skill") != 0)
			assert_true(has_warning(&p, "(granted by 's0')"));
		claude_permissions_free(&p);
	}
}

/* python is never widened into Bash: a skill granting python and read
 * gets Read, and Bash stays denied. */
static void test_D3_no_equivalent_never_widened(void **st)
{
	(void)st;
	struct claude_permissions p;
	resolve1("allowed-tools: [python, terminal, read, learn_skill]\n", &p);
	assert_true(strlist_has(&p.allow, "Read"));
	assert_true(strlist_has(&p.deny, "Bash"));
	assert_true(strlist_has(&p.deny, "PowerShell"));
	for (size_t i = 0; i < p.allow.n; i++)
		assert_true(strncmp(p.allow.items[i], "Bash", 4) != 0);
	assert_true(has_warning(&p, "python: left out"));
	assert_true(has_warning(&p, "terminal: left out"));
	assert_true(has_warning(&p, "learn_skill: left out"));
	claude_permissions_free(&p);
}

/* ---- pattern forms ---- */

/* D3: each command pattern form becomes Bash(WORDS:*), its words joined
 * by single spaces (the same word-boundary prefix in both); the tool is
 * not denied while one pattern is written. */
static void test_D3_command_pattern_forms(void **st)
{
	(void)st;
	struct claude_permissions p;
	resolve1("allowed-tools: [\"Bash(git diff:*)\", \"Bash(git log *)\", "
		 "\"Bash(git  status)\", \"Bash(npm run test:*)\", \"Bash(make build*)\", "
		 "\"Bash(./scripts/x.sh --flag=1:*)\", \"Bash(echo \\\"x\\\":*)\"]\n",
		 &p);
	/* quoting that leaves plain words is written without it */
	assert_list(&p.allow, "Bash(./scripts/x.sh --flag=1:*) Bash(echo x:*) Bash(git diff:*) "
			      "Bash(git log:*) Bash(git status:*) Bash(make build:*) Bash(npm run test:*) "
			      "Skill TaskCreate TaskGet TaskList TaskUpdate TodoWrite ToolSearch");
	assert_false(strlist_has(&p.deny, "Bash"));
	assert_false(strlist_has(&p.allow, "Bash"));
	assert_true(strlist_has(&p.deny, "Read"));
	assert_false(has_warning(&p, "left out"));
	claude_permissions_free(&p);
}

/* A pattern Claude Code would read otherwise (quoting, a blank inside a
 * word, a character a shell or its rule syntax gives a meaning to) is
 * left out with a warning, never written wider; when no pattern of the
 * tool is left, the tool is denied. */
static void test_D3_pattern_that_cannot_be_written(void **st)
{
	(void)st;
	const char *bad[] = {
		"\"Bash(git diff 'a b':*)\"", "\"Bash(echo '$HOME':*)\"",
		"\"Bash(git diff 'HEAD~1':*)\"", "\"Bash(ls '*':*)\"",
		"\"Bash(printf 'a(b)':*)\"",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		char fm[128];
		snprintf(fm, sizeof fm, "allowed-tools: [%s]\n", bad[i]);
		struct claude_permissions p;
		resolve1(fm, &p);
		assert_list(&p.allow, notes);
		assert_true(strlist_has(&p.deny, "Bash"));
		if (!has_warning(&p, "left out: Claude Code would read this pattern otherwise"))
			fail_msg("no warning for %s", bad[i]);
		assert_true(has_warning(&p, "Bash: denied: none of its patterns"));
		claude_permissions_free(&p);
	}
	/* beside a plain pattern: that one is written, the other named */
	struct claude_permissions p;
	resolve1("allowed-tools: [\"Bash(git diff:*)\", \"Bash(echo '$HOME':*)\"]\n", &p);
	assert_true(strlist_has(&p.allow, "Bash(git diff:*)"));
	assert_false(strlist_has(&p.deny, "Bash"));
	assert_true(has_warning(&p, "Bash(echo '$HOME':*): left out"));
	assert_false(has_warning(&p, "Bash: denied"));
	claude_permissions_free(&p);
}

/* D3: WebFetch(domain:H) admits H and its subdomains in skillfs; Claude
 * Code's domain:H admits H alone, so domain:*.H is written beside it; a
 * *.H pattern and an address are written as they are. Claude Code's own
 * pre-approved hosts are named in the warnings. */
static void test_D3_domain_pattern_forms(void **st)
{
	(void)st;
	struct claude_permissions p;
	resolve1("allowed-tools: [\"WebFetch(domain:example.com)\", "
		 "\"WebFetch(domain:*.docs.test)\", \"WebFetch(domain:127.0.0.1)\", "
		 "\"WebFetch(domain:[::1])\"]\n",
		 &p);
	assert_list(&p.allow, "Skill TaskCreate TaskGet TaskList TaskUpdate TodoWrite ToolSearch "
			      "WebFetch(domain:*.docs.test) WebFetch(domain:*.example.com) "
			      "WebFetch(domain:127.0.0.1) WebFetch(domain:[::1]) "
			      "WebFetch(domain:example.com)");
	assert_false(strlist_has(&p.deny, "WebFetch"));
	assert_true(strlist_has(&p.deny, "WebSearch"));
	assert_true(has_warning(&p, "pre-approved documentation hosts"));
	claude_permissions_free(&p);
	/* granted whole: no domain rule, no such warning */
	resolve1("allowed-tools: [WebFetch]\n", &p);
	assert_true(strlist_has(&p.allow, "WebFetch"));
	assert_false(has_warning(&p, "pre-approved"));
	claude_permissions_free(&p);
}

/* D3: a tool granted both with and without a pattern (by two skills, or
 * one) is allowed whole: no pattern rule beside it. */
static void test_D3_with_and_without_pattern_is_whole(void **st)
{
	(void)st;
	const char *two[] = { "allowed-tools: [\"Bash(git diff:*)\", \"WebFetch(domain:a.test)\"]\n",
			      "allowed-tools: [Bash, WebFetch]\n" };
	struct claude_permissions p;
	resolve(two, 2, NULL, &p);
	assert_list(&p.allow, "Bash Skill TaskCreate TaskGet TaskList TaskUpdate TodoWrite "
			      "ToolSearch WebFetch");
	assert_false(has_warning(&p, "pre-approved"));
	claude_permissions_free(&p);
	resolve1("allowed-tools: [Bash, \"Bash(git log:*)\"]\n", &p);
	assert_true(strlist_has(&p.allow, "Bash"));
	assert_false(strlist_has(&p.allow, "Bash(git log:*)"));
	claude_permissions_free(&p);
}

/* ---- the policies ---- */

/* R2: no skill declares allowed-tools (policy all): every mapped tool is
 * allowed, nothing denied, no dontAsk, and the warnings say the skills
 * express no restriction. */
static void test_R2_policy_all(void **st)
{
	(void)st;
	const char *none[] = { NULL, NULL };
	struct claude_permissions p;
	resolve(none, 2, NULL, &p);
	assert_false(p.restricted);
	assert_list(&p.allow, "AskUserQuestion Bash Edit Glob Grep Read Skill TaskCreate TaskGet "
			      "TaskList TaskUpdate TodoWrite ToolSearch WebFetch Write");
	assert_int_equal(p.deny.n, 0);
	assert_true(has_warning(&p, "the skills express no restriction"));
	assert_true(has_warning(&p, "python: left out"));
	assert_true(has_warning(&p, "(granted to every run: no skill declares allowed-tools)"));
	json_t *j = claude_settings_json(&p);
	assert_non_null(j);
	json_t *perm = json_object_get(j, "permissions");
	assert_int_equal(json_object_size(j), 1);
	assert_int_equal(json_object_size(perm), 2);
	assert_null(json_object_get(perm, "defaultMode"));
	assert_int_equal(json_array_size(json_object_get(perm, "deny")), 0);
	json_decref(j);
	claude_permissions_free(&p);
}

/* R3: a skill declaring [] alone: every tool of the table denied but the
 * note tools, dontAsk; an invalid skill counts the same (D1); a skill that
 * declares nothing does not widen it (R2 counts declaring skills only). */
static void test_R3_declared_empty_and_D1_invalid(void **st)
{
	(void)st;
	const char *cases[][2] = {
		{ "allowed-tools: []\n", NULL },
		{ "allowed-tools: [bash\n", NULL }, /* invalid YAML: D1 */
		{ "allowed-tools: [WebSearch, NotebookEdit]\n", NULL },
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		struct claude_permissions p;
		resolve(cases[i], 2, NULL, &p);
		assert_true(p.restricted);
		assert_list(&p.allow, notes);
		assert_list(&p.deny, deny_all);
		json_t *j = claude_settings_json(&p);
		assert_string_equal(json_string_value(json_object_get(json_object_get(j, "permissions"),
									"defaultMode")),
				    "dontAsk");
		json_decref(j);
		claude_permissions_free(&p);
	}
	/* what a skill asks for but skillfs grants nothing for (a Claude Code
	 * tool skillfs does not have, a pattern on a tool that takes none, an
	 * MCP tool) is named, and not allowed; Skill is allowed anyway and
	 * not named */
	struct claude_permissions p;
	resolve1("allowed-tools: [Read, WebSearch, Skill, \"Write(./src/**)\", "
		 "mcp__github__search]\n",
		 &p);
	assert_true(strlist_has(&p.deny, "WebSearch"));
	assert_true(strlist_has(&p.deny, "Write"));
	assert_true(strlist_has(&p.allow, "Skill"));
	assert_true(has_warning(&p, "skill 's0': allowed-tools item 'WebSearch' is not allowed "
				    "here either: a Claude Code tool skillfs does not have"));
	assert_true(has_warning(&p, "item 'Write(./src/**)' is not allowed here either: tool "
				    "takes no command pattern"));
	assert_true(has_warning(&p, "item 'mcp__github__search' is not allowed here either"));
	assert_false(has_warning(&p, "item 'Skill'"));
	for (size_t i = 0; i < p.allow.n; i++)
		assert_null(strstr(p.allow.items[i], "mcp__"));
	claude_permissions_free(&p);
}

/* R2: the union of the declared lists; names outside the table (MCP
 * tools) are neither allowed nor denied; the older names (MultiEdit) are
 * read but never written. */
static void test_R2_union_of_declared_lists(void **st)
{
	(void)st;
	const char *fms[] = { "allowed-tools: [Read, Grep]\n", "allowed-tools: MultiEdit, Glob\n",
			      NULL };
	struct claude_permissions p;
	resolve(fms, 3, NULL, &p);
	assert_list(&p.allow, "Edit Glob Grep Read Skill TaskCreate TaskGet TaskList TaskUpdate "
			      "TodoWrite ToolSearch");
	assert_false(strlist_has(&p.deny, "Edit"));
	assert_true(strlist_has(&p.deny, "Write"));
	assert_true(strlist_has(&p.deny, "Bash"));
	for (size_t i = 0; i < p.allow.n; i++)
		assert_true(strcmp(p.allow.items[i], "MultiEdit") != 0);
	for (size_t i = 0; i < p.deny.n; i++)
		assert_true(strcmp(p.deny.items[i], "MultiEdit") != 0 &&
			    strncmp(p.deny.items[i], "mcp__", 5) != 0);
	claude_permissions_free(&p);
}

/* ---- the ceiling ---- */

/* A tool ceiling is one more input: policy all capped by it is its list,
 * fail closed; a declared list is narrowed by it, a pattern of the
 * ceiling narrowing a plain grant. */
static void test_ceiling_caps_the_set(void **st)
{
	(void)st;
	/* configurations.<cfg>.tools: [read, "Bash(git log:*)"] */
	char *items[] = { "read", "Bash(git log:*)" };
	struct strlist ceiling = { .items = items, .n = 2 };

	const char *none[] = { NULL };
	struct claude_permissions p;
	resolve(none, 1, &ceiling, &p);
	assert_true(p.restricted);
	assert_list(&p.allow, "Bash(git log:*) Read Skill TaskCreate TaskGet TaskList TaskUpdate "
			      "TodoWrite ToolSearch");
	assert_true(strlist_has(&p.deny, "Write"));
	assert_false(has_warning(&p, "express no restriction"));
	claude_permissions_free(&p);

	const char *list[] = { "allowed-tools: [Bash, Write]\n" };
	resolve(list, 1, &ceiling, &p);
	assert_list(&p.allow, "Bash(git log:*) Skill TaskCreate TaskGet TaskList TaskUpdate "
			      "TodoWrite ToolSearch");
	assert_true(strlist_has(&p.deny, "Write"));
	assert_true(strlist_has(&p.deny, "Read"));
	claude_permissions_free(&p);
}

/* ---- the files ---- */

/* settings.json is the settings object, indented and ending in a
 * newline; warnings one line each; other names are no file. */
static void test_sec8_claude_files(void **st)
{
	(void)st;
	struct claude_permissions p;
	resolve1("allowed-tools: [\"Bash(git diff:*)\", python]\n", &p);
	struct claude_files f;
	assert_int_equal(claude_files_render(&p, &f), 0);
	size_t len = 0;
	const char *t = claude_file(&f, "settings.json", &len);
	assert_non_null(t);
	assert_int_equal(strlen(t), len);
	assert_true(len > 2 && t[len - 1] == '\n');
	json_error_t err;
	json_t *j = json_loads(t, 0, &err);
	assert_non_null(j);
	json_t *want = claude_settings_json(&p);
	assert_true(json_equal(j, want));
	json_t *perm = json_object_get(j, "permissions");
	assert_string_equal(json_string_value(json_array_get(json_object_get(perm, "allow"), 0)),
			    "Bash(git diff:*)");
	json_decref(j);
	json_decref(want);
	t = claude_file(&f, "warnings", &len);
	assert_non_null(t);
	assert_int_equal(strlen(t), len);
	assert_non_null(strstr(t, "python: left out"));
	assert_true(t[len - 1] == '\n');
	assert_null(claude_file(&f, "skills", NULL));
	assert_null(claude_file(&f, "settings.local.json", NULL));
	assert_string_equal(claude_file_names[0], "settings.json");
	assert_true(strcmp(claude_file_names[0], claude_file_names[1]) < 0);
	claude_files_free(&f);
	claude_permissions_free(&p);
}

int main(void)
{
	const struct CMUnitTest t[] = {
		cmocka_unit_test(test_D3_one_table_both_ways),
		cmocka_unit_test(test_R2_every_tool_alone),
		cmocka_unit_test(test_D3_no_equivalent_never_widened),
		cmocka_unit_test(test_D3_command_pattern_forms),
		cmocka_unit_test(test_D3_pattern_that_cannot_be_written),
		cmocka_unit_test(test_D3_domain_pattern_forms),
		cmocka_unit_test(test_D3_with_and_without_pattern_is_whole),
		cmocka_unit_test(test_R2_policy_all),
		cmocka_unit_test(test_R3_declared_empty_and_D1_invalid),
		cmocka_unit_test(test_R2_union_of_declared_lists),
		cmocka_unit_test(test_ceiling_caps_the_set),
		cmocka_unit_test(test_sec8_claude_files),
	};
	return cmocka_run_group_tests(t, NULL, NULL);
}
