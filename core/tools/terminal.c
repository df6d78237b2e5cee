/* terminal: one program of tools.terminal.commands, run as argv without a
 * shell, in the sandbox, with a PATH holding only those programs.
 *
 * What it bounds is what is started directly: argv[0] must be one of the
 * allowed names. What that program then does (find -exec, git's aliases
 * and hooks, a pager) is bounded by the sandbox, as for bash. */
#include "tool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cmdline.h"
#include "sandbox.h"

/* At most this many words in an argv given as an array. */
#define TERMINAL_ARGS_MAX 1024

/* The words of the command argument: a string split as patterned bash
 * commands are (cmdline_splitn), or an array of strings taken as they are.
 * False with the error in c. */
static bool command_words(struct call *c, json_t *args, struct strlist *words)
{
	json_t *v = json_object_get(args, "command");
	if (json_is_array(v)) {
		if (!tool_arg_strings(c, args, "command", TERMINAL_ARGS_MAX, words))
			return false;
		if (words->n == 0 || !words->items[0][0]) {
			tool_fail(c, "argument 'command' must start with the program to run");
			return false;
		}
		return true;
	}
	const char *command;
	size_t len;
	if (!json_is_string(v) && v && !json_is_null(v)) {
		tool_fail(c, "argument 'command' must be a string or an array of strings");
		return false;
	}
	if (!tool_arg_string(c, args, "command", true, true, &command, &len))
		return false;
	char *why = NULL;
	if (cmdline_splitn(command, len, words, &why) < 0) {
		if (why)
			tool_fail(c, "%s", why);
		else
			c->oom = true;
		free(why);
		return false;
	}
	return true;
}

/* The allowed programs, for a message: "ls, cat, git". */
static void put_names(struct buf *b, const struct strlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		buf_printf(b, "%s%s", i ? ", " : "", l->items[i]);
}

void tool_terminal(struct call *c, json_t *args)
{
	struct strlist words = {0};
	if (!command_words(c, args, &words))
		goto out;
	const struct sandbox *sb = c->ctx->sandbox;
	if (sandbox_usable(sb) && sb->commands.n == 0) {
		tool_fail(c, "not available: none of the programs of "
			  "tools.terminal.commands is installed in the sandbox's PATH");
		goto out;
	}
	const char *prog = words.items[0];
	if (sandbox_usable(sb) && !strlist_has(&sb->commands, prog)) {
		struct buf names = {0};
		put_names(&names, &sb->commands);
		if (strlist_has(&sb->commands_missing, prog))
			tool_fail(c, "'%s' is allowed but not installed in the sandbox's PATH "
				  "(" SANDBOX_PATH "); terminal can run: %s", prog,
				  names.data ? names.data : "");
		else
			tool_fail(c, "'%.64s' is not a program terminal may run (give a bare "
				  "name, no path, and no shell syntax); it runs only: %s", prog,
				  names.data ? names.data : "");
		if (!names.data)
			c->oom = true;
		buf_free(&names);
		goto out;
	}
	const char **av = strlist_to_argv(&words);
	const char **names = sb ? strlist_to_argv(&sb->commands) : NULL;
	const char **paths = sb ? strlist_to_argv(&sb->command_paths) : NULL;
	if (!av || (sb && (!names || !paths))) {
		c->oom = true;
	} else {
		struct tool_run opt = {.bin_names = names, .bin_paths = paths};
		tool_run_sandboxed_with(c, av, &opt);
	}
	free(av);
	free(names);
	free(paths);
out:
	strlist_free(&words);
}
