/* Unit tests for core/cmdline: command strings split into argv without a
 * shell (DESIGN.md D3). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmdline.h"
#include "strlist.h"

/* Splits cmd, which must be accepted, and checks the words (NULL-ended). */
static void split_ok_n(const char *cmd, size_t len, const char *const *want)
{
	struct strlist argv = {0};
	char *err = NULL;
	int rc = cmdline_splitn(cmd, len, &argv, &err);
	if (rc != 0)
		fail_msg("'%s' refused: %s", cmd, err ? err : "(no message)");
	assert_null(err);
	size_t n = 0;
	while (want[n])
		n++;
	if (argv.n != n)
		fail_msg("'%s': %zu words, expected %zu", cmd, argv.n, n);
	for (size_t i = 0; i < n; i++)
		assert_string_equal(argv.items[i], want[i]);
	/* ready for execve */
	assert_null(argv.items[argv.n]);
	strlist_free(&argv);
}

static void split_ok(const char *cmd, const char *const *want)
{
	split_ok_n(cmd, strlen(cmd), want);
}

/* Splits cmd, which must be refused with a message holding part. */
static void split_refused_n(const char *cmd, size_t len, const char *part)
{
	struct strlist argv = {0};
	char *err = NULL;
	int rc = cmdline_splitn(cmd, len, &argv, &err);
	if (rc == 0)
		fail_msg("'%s' accepted (%zu words)", cmd, argv.n);
	assert_int_equal(rc, -1);
	assert_int_equal(argv.n, 0);
	assert_null(argv.items);
	assert_non_null(err);
	if (part && !strstr(err, part))
		fail_msg("'%s': error '%s' does not mention '%s'", cmd, err, part);
	free(err);
}

static void split_refused(const char *cmd, const char *part)
{
	split_refused_n(cmd, cmd ? strlen(cmd) : 0, part);
}

#define W(...) ((const char *const[]){ __VA_ARGS__, NULL })

static void test_words_and_blanks(void **st)
{
	(void)st;
	split_ok("git", W("git"));
	split_ok("git diff --stat", W("git", "diff", "--stat"));
	split_ok("  git \t diff\t\t--stat  ", W("git", "diff", "--stat"));
	split_ok("a=b c,d e:f %x ^y +z @w", W("a=b", "c,d", "e:f", "%x", "^y", "+z", "@w"));
	split_ok("héllo wörld", W("héllo", "wörld"));
}

static void test_single_quotes(void **st)
{
	(void)st;
	split_ok("git diff 'a b'", W("git", "diff", "a b"));
	split_ok("echo '$(id) `id` ; | & < > ( ) * ? [ ] { } ~ # ! \\ \"'",
		 W("echo", "$(id) `id` ; | & < > ( ) * ? [ ] { } ~ # ! \\ \""));
	split_ok("echo 'a'b'c'", W("echo", "abc"));
	split_ok("echo '' x", W("echo", "", "x"));
	split_ok("echo ''", W("echo", ""));
	split_ok("echo 'tab\there'", W("echo", "tab\there"));
}

static void test_double_quotes(void **st)
{
	(void)st;
	split_ok("git diff \"a b\"", W("git", "diff", "a b"));
	/* literal: nothing expands */
	split_ok("echo \"; * ~ # ! | & < > ( ) [ ] { } ?\"", W("echo", "; * ~ # ! | & < > ( ) [ ] { } ?"));
	/* $ and ` would expand in a shell's double quotes: refused unescaped */
	split_refused("echo \"$(id)\"", "shell syntax '$' inside double quotes (byte 7)");
	split_refused("echo \"$HOME\"", "write \\$ or use single quotes");
	split_refused("echo \"`id`\"", "shell syntax '`' inside double quotes");
	split_refused("git diff \"a\\\\$(id)\"", "'$' inside double quotes");
	/* backslash escapes " \ $ ` and is kept before anything else */
	split_ok("echo \"a\\\"b\"", W("echo", "a\"b"));
	split_ok("echo \"a\\\\b\"", W("echo", "a\\b"));
	split_ok("echo \"\\$x \\`y\\`\"", W("echo", "$x `y`"));
	split_ok("echo \"\\n\\a\"", W("echo", "\\n\\a"));
	split_ok("echo \"\"", W("echo", ""));
	split_ok("echo \"a\"'b'c", W("echo", "abc"));
	split_ok("echo \"it's\"", W("echo", "it's"));
}

static void test_backslash_outside_quotes(void **st)
{
	(void)st;
	split_ok("echo a\\ b", W("echo", "a b"));
	split_ok("echo \\;\\|\\&\\<\\>\\(\\)\\$\\`\\*\\?\\[\\]\\{\\}\\~\\#\\!",
		 W("echo", ";|&<>()$`*?[]{}~#!"));
	split_ok("echo \\'x\\\"", W("echo", "'x\""));
	split_ok("echo \\\\", W("echo", "\\"));
	split_ok("echo \\a", W("echo", "a"));
	split_refused("echo a\\", "backslash that escapes nothing");
}

static void test_every_metacharacter_refused_unquoted(void **st)
{
	(void)st;
	const char *meta = ";|&<>()$`*?[]{}~#!";
	for (const char *m = meta; *m; m++) {
		char cmd[64], want[64];
		/* alone, inside a word, at a word's start */
		const char *forms[] = { "git diff %c", "git diff a%cb", "git %cdiff" };
		for (size_t k = 0; k < 3; k++) {
			snprintf(cmd, sizeof cmd, forms[k], *m);
			snprintf(want, sizeof want, "shell syntax '%c'", *m);
			split_refused(cmd, want);
			split_refused(cmd, "commands run without a shell");
		}
		/* quoted either way, or escaped, it is literal */
		char lit[2] = { *m, 0 }, bs[3] = { '\\', *m, 0 };
		snprintf(cmd, sizeof cmd, "git diff '%c'", *m);
		split_ok(cmd, W("git", "diff", lit));
		snprintf(cmd, sizeof cmd, "git diff \"%c\"", *m);
		if (*m == '$' || *m == '`')
			split_refused(cmd, "inside double quotes");
		else
			split_ok(cmd, W("git", "diff", lit));
		/* in double quotes a backslash escapes only $ and ` of these */
		snprintf(cmd, sizeof cmd, "git diff \"\\%c\"", *m);
		split_ok(cmd, W("git", "diff", *m == '$' || *m == '`' ? lit : bs));
		snprintf(cmd, sizeof cmd, "git diff \\%c", *m);
		split_ok(cmd, W("git", "diff", lit));
	}
}

static void test_shell_attacks_refused(void **st)
{
	(void)st;
	split_refused("git diff $(id)", "'$'");
	split_refused("git diff `id`", "'`'");
	split_refused("git diff; id", "';'");
	split_refused("git diff;id", "';'");
	split_refused("git diff && id", "'&'");
	split_refused("git diff || id", "'|'");
	split_refused("git diff | sh", "'|'");
	split_refused("git diff &", "'&'");
	split_refused("git diff *.c", "'*'");
	split_refused("git diff file?.c", "'?'");
	split_refused("git diff [ab].c", "'['");
	split_refused("git diff {a,b}.c", "'{'");
	split_refused("git diff ~/x", "'~'");
	split_refused("git diff > out", "'>'");
	split_refused("git diff >> out", "'>'");
	split_refused("git diff < in", "'<'");
	split_refused("git diff 2>&1", "'>'");
	split_refused("git diff $HOME", "'$'");
	split_refused("git diff ${HOME}", "'$'");
	split_refused("git diff # comment", "'#'");
	split_refused("git diff !!", "'!'");
	split_refused("(git diff)", "'('");
	split_refused("git diff <(id)", "'<'");
	/* the byte is named, counting from 1 */
	split_refused("git diff; id", "byte 9");
	/* a quote closed early leaves the rest unquoted */
	split_refused("git diff 'a';id", "';'");
	split_refused("git diff \"a\"$(id)", "'$'");
}

static void test_line_breaks_refused_even_quoted(void **st)
{
	(void)st;
	split_refused("git diff\nid", "line break");
	split_refused("git diff\rid", "line break");
	split_refused("git diff\r\n", "line break");
	split_refused("git diff 'a\nb'", "line break");
	split_refused("git diff \"a\nb\"", "line break");
	split_refused("git diff \\\nid", "line break");
	split_refused("\n", "line break");
	split_refused_n("git diff\0; id", 14, "NUL");
	split_refused("git diff \x1b[31m", "control character 0x1b");
	split_refused("git diff '\x07'", "control character 0x07");
	split_refused("git diff \x7f", "control character 0x7f");
	/* splitn reads exactly len bytes */
	split_ok_n("git diff", 8, W("git", "diff"));
	split_ok_n("git diff; id", 8, W("git", "diff"));
}

static void test_unterminated_quotes_refused(void **st)
{
	(void)st;
	split_refused("git diff 'a b", "unterminated single quote (opened at byte 10)");
	split_refused("git diff \"a b", "unterminated double quote (opened at byte 10)");
	split_refused("git diff \"a\\\"", "unterminated double quote");
	split_refused("git diff '", "unterminated single quote");
	split_refused("'", "unterminated single quote");
	split_refused("\"", "unterminated double quote");
}

static void test_empty_refused(void **st)
{
	(void)st;
	split_refused("", "empty");
	split_refused("   \t ", "empty");
	{
		struct strlist a = {0};
		char *err = NULL;
		assert_int_equal(cmdline_split(NULL, &a, &err), -1);
		assert_non_null(strstr(err, "empty"));
		free(err);
	}
	split_refused("''", "first word");
	split_refused("\"\" x", "first word");
}

static void test_long_inputs(void **st)
{
	(void)st;
	/* 200,000 words of "ab" */
	size_t nw = 200000, len = nw * 3;
	char *cmd = malloc(len + 1);
	assert_non_null(cmd);
	for (size_t i = 0; i < nw; i++)
		memcpy(cmd + i * 3, "ab ", 3);
	cmd[len] = '\0';
	struct strlist argv = {0};
	char *err = NULL;
	assert_int_equal(cmdline_split(cmd, &argv, &err), 0);
	assert_int_equal(argv.n, nw);
	assert_string_equal(argv.items[nw - 1], "ab");
	assert_null(argv.items[argv.n]);
	strlist_free(&argv);
	/* one quoted word of 1 MiB, then a metacharacter at its end */
	free(cmd);
	size_t big = 1 << 20;
	cmd = malloc(big + 8);
	assert_non_null(cmd);
	cmd[0] = 'x', cmd[1] = ' ', cmd[2] = '\'';
	memset(cmd + 3, ';', big);
	cmd[3 + big] = '\'';
	cmd[4 + big] = '\0';
	assert_int_equal(cmdline_split(cmd, &argv, &err), 0);
	assert_int_equal(argv.n, 2);
	assert_int_equal(strlen(argv.items[1]), big);
	strlist_free(&argv);
	cmd[4 + big] = '|';
	cmd[5 + big] = '\0';
	split_refused(cmd, "'|'");
	/* unterminated after 1 MiB */
	cmd[3 + big] = 'x';
	cmd[4 + big] = '\0';
	split_refused(cmd, "unterminated single quote (opened at byte 3)");
	free(cmd);
}

static void test_err_may_be_null(void **st)
{
	(void)st;
	struct strlist argv = {0};
	assert_int_equal(cmdline_split("a | b", &argv, NULL), -1);
	assert_int_equal(argv.n, 0);
	assert_int_equal(cmdline_split("a\nb", &argv, NULL), -1);
	assert_int_equal(cmdline_split("'a", &argv, NULL), -1);
	assert_int_equal(cmdline_split("", &argv, NULL), -1);
	assert_int_equal(argv.n, 0);
	assert_int_equal(cmdline_split("a b", &argv, NULL), 0);
	assert_int_equal(argv.n, 2);
	strlist_free(&argv);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_words_and_blanks),
		cmocka_unit_test(test_single_quotes),
		cmocka_unit_test(test_double_quotes),
		cmocka_unit_test(test_backslash_outside_quotes),
		cmocka_unit_test(test_every_metacharacter_refused_unquoted),
		cmocka_unit_test(test_shell_attacks_refused),
		cmocka_unit_test(test_line_breaks_refused_even_quoted),
		cmocka_unit_test(test_unterminated_quotes_refused),
		cmocka_unit_test(test_empty_refused),
		cmocka_unit_test(test_long_inputs),
		cmocka_unit_test(test_err_may_be_null),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
