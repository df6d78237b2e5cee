#include "tooltest.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

struct tool_result tooltest_run(const struct tool_ctx *ctx, const char *tool,
				const char *json_args)
{
	json_error_t jerr;
	json_t *args = json_args ? json_loads(json_args, JSON_ALLOW_NUL, &jerr) : NULL;
	if (json_args && !args)
		fail_msg("bad test JSON: %s", jerr.text);
	struct tool_result r;
	assert_int_equal(tools_exec(ctx, tool, args, &r), 0);
	assert_non_null(r.text);
	json_decref(args);
	return r;
}

struct tool_result tooltest_run_kv(const struct tool_ctx *ctx, const char *tool,
				   const char *k1, const char *v1,
				   const char *k2, const char *v2)
{
	json_t *args = json_object();
	assert_non_null(args);
	json_object_set_new(args, k1, json_string(v1));
	if (k2)
		json_object_set_new(args, k2, json_string(v2));
	struct tool_result r;
	assert_int_equal(tools_exec(ctx, tool, args, &r), 0);
	assert_non_null(r.text);
	json_decref(args);
	return r;
}

void expect_ok(struct tool_result *r, const char *text)
{
	if (r->is_error)
		fail_msg("unexpected error result: %s", r->text);
	if (text && strcmp(r->text, text) != 0)
		fail_msg("result '%s', want '%s'", r->text, text);
	tool_result_free(r);
}

void expect_ok_has(struct tool_result *r, const char *part)
{
	if (r->is_error)
		fail_msg("unexpected error result: %s", r->text);
	if (!strstr(r->text, part))
		fail_msg("'%s' not in result '%s'", part, r->text);
	tool_result_free(r);
}

void expect_error(struct tool_result *r, const char *text)
{
	if (!r->is_error)
		fail_msg("expected an error, got: %s", r->text);
	assert_string_equal(r->text, text);
	tool_result_free(r);
}

void expect_error_has(struct tool_result *r, const char *part)
{
	if (!r->is_error)
		fail_msg("expected an error, got: %s", r->text);
	if (!strstr(r->text, part))
		fail_msg("'%s' not in error '%s'", part, r->text);
	tool_result_free(r);
}
