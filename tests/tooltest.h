/* tooltest: running a built-in tool in a unit test and checking its
 * result; shared by the tool tests (test_tools, test_tool_paths,
 * test_webfetch). Every helper fails the running test instead of
 * returning an error; the expect_* helpers free the result. */
#ifndef SKILLFS_TOOLTEST_H
#define SKILLFS_TOOLTEST_H

#include "tools.h"

/* Runs tool under ctx with arguments given as JSON text (NULL: none). */
struct tool_result tooltest_run(const struct tool_ctx *ctx, const char *tool,
				const char *json_args);

/* Runs tool with one or two string arguments k1=v1 (and k2=v2 when k2 is
 * not NULL); the values need no escaping. */
struct tool_result tooltest_run_kv(const struct tool_ctx *ctx, const char *tool,
				   const char *k1, const char *v1,
				   const char *k2, const char *v2);

/* The result is not an error, and (text not NULL) is exactly text. */
void expect_ok(struct tool_result *r, const char *text);
/* The result is not an error and holds part. */
void expect_ok_has(struct tool_result *r, const char *part);
/* The result is an error, exactly text. */
void expect_error(struct tool_result *r, const char *text);
/* The result is an error holding part. */
void expect_error_has(struct tool_result *r, const char *part);

#endif
