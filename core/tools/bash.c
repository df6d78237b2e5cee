/* bash: a command line in the sandbox; under a patterned grant (D3) its
 * words, run without a shell. */
#include "tool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cmdline.h"

void tool_bash(struct call *c, json_t *args)
{
	const char *command;
	if (!tool_arg_string(c, args, "command", true, false, &command, NULL))
		return;
	if (!c->ctx->argv_only) {
		const char *argv[] = {"/bin/bash", "-c", command, NULL};
		tool_run_sandboxed(c, argv);
		return;
	}
	/* D3: a patterned grant runs the words themselves, no shell. */
	struct strlist words = {0};
	char *why = NULL;
	if (cmdline_split(command, &words, &why) < 0) {
		if (why)
			tool_fail(c, "%s", why);
		else
			c->oom = true;
		free(why);
		return;
	}
	const char **argv = strlist_to_argv(&words);
	if (!argv)
		c->oom = true;
	else
		tool_run_sandboxed(c, argv);
	free(argv);
	strlist_free(&words);
}

