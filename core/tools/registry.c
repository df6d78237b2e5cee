/* registry: the table of built-in tools (one row each: name, schema, how
 * it runs, whether it starts programs, whether it has side effects), their
 * schemas, availability, and tools_exec, which answers a call through its
 * row. */
#include "tools.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "config.h"
#include "sandbox.h"
#include "tool.h"

/* How a built-in tool is executed. */
enum tool_impl {
	IMPL_HERE,        /* tools_exec runs it */
	IMPL_ENGINE,      /* the agent loop handles it (run_skill, ask_user) */
};

struct tool_def {
	const char *name;
	const char *description;
	const char *parameters; /* JSON Schema of the arguments object */
	enum tool_impl impl;
	tool_fn fn;
	bool process; /* starts programs: only with a usable sandbox */
	/* May change something outside the call (a file, a skill source, the
	 * world through a program): a "started" record is committed before
	 * it runs, and one interrupted by a crash is not run again (R7).
	 * false: it only reads, and is simply run again. */
	bool side_effects;
};

#define STR(d) "{\"type\": \"string\", \"description\": \"" d "\"}"
#define OBJ(props, req)                                                     \
	"{\"type\": \"object\", \"properties\": {" props "}, \"required\": [" \
	req "], \"additionalProperties\": false}"

static const struct tool_def defs[] = {
	{"bash",
	 "Run a shell command with /bin/bash -c in a sandbox whose working "
	 "directory is the run's project directory (" TOOLS_WORKDIR ") when it "
	 "has one, else its workspace (" SANDBOX_WORKSPACE "); those two are "
	 "the only places it may write. The files of the run's skills are at "
	 TOOLS_SKILLS "/<name>, read-only. stdout and stderr are combined. "
	 "The output is capped and the command is killed after a timeout; the result ends "
	 "with the exit status, e.g. [exit 0]. When this run grants only "
	 "some commands, the command runs without a shell: no pipes, "
	 "redirection, variables or globbing.",
	 OBJ("\"command\": " STR("The command line to run."), "\"command\""),
	 IMPL_HERE, tool_bash, true, true},
	{"read",
	 "Read a UTF-8 text file. A relative path is in the working directory "
	 "(the run's project directory " TOOLS_WORKDIR " when it has one, else "
	 "its workspace " SANDBOX_WORKSPACE "); " TOOLS_SKILLS "/<name>/... "
	 "reads a skill's own files. offset and limit select lines.",
	 OBJ("\"path\": " STR("File path: relative to the working directory, or "
			      "under " SANDBOX_WORKSPACE ", " TOOLS_WORKDIR " or "
			      TOOLS_SKILLS "/<name>.") ", "
	     "\"offset\": {\"type\": \"integer\", \"minimum\": 1, "
	     "\"description\": \"First line to return (1-based).\"}, "
	     "\"limit\": {\"type\": \"integer\", \"minimum\": 1, "
	     "\"description\": \"Number of lines to return.\"}",
	     "\"path\""),
	 IMPL_HERE, tool_read, false, false},
	{"edit",
	 "Replace old_string with new_string in a file of the working "
	 "directory (" TOOLS_WORKDIR " or " SANDBOX_WORKSPACE "). old_string "
	 "must occur exactly once unless replace_all is true.",
	 OBJ("\"path\": " STR("File path, relative to the working directory.") ", "
	     "\"old_string\": " STR("The exact text to replace.") ", "
	     "\"new_string\": " STR("The replacement text.") ", "
	     "\"replace_all\": {\"type\": \"boolean\", \"description\": "
	     "\"Replace every occurrence (default false).\"}",
	     "\"path\", \"old_string\", \"new_string\""),
	 IMPL_HERE, tool_edit, false, true},
	{"write",
	 "Create or replace a file in the working directory (" TOOLS_WORKDIR
	 " or " SANDBOX_WORKSPACE ") with the given content. Missing parent "
	 "directories are created.",
	 OBJ("\"path\": " STR("File path, relative to the working directory.") ", "
	     "\"content\": " STR("The complete new content of the file."),
	     "\"path\", \"content\""),
	 IMPL_HERE, tool_write, false, true},
	{"glob",
	 "List the files and directories of the workspace whose path matches "
	 "a glob pattern, sorted; directories end with '/'. In a pattern, * ? "
	 "and [...] match within one path component and a ** component "
	 "matches any number of directories: '**/*.py' finds Python files at "
	 "any depth, 'src/*.h' the headers directly in src, '*' the top level. "
	 "The pattern is relative to path. Symbolic links are listed, not "
	 "followed; .git is not entered. At most 1000 paths.",
	 OBJ("\"pattern\": " STR("The glob pattern, e.g. **/*.c") ", "
	     "\"path\": " STR("The directory to search, relative to the workspace "
			      "(default: the whole workspace)."),
	     "\"pattern\""),
	 IMPL_HERE, tool_glob, false, false},
	{"grep",
	 "Search the text files of the workspace for lines matching a POSIX "
	 "extended regular expression (as grep -E). Each result is "
	 "path:line: text, files in sorted order, long lines cut; binary "
	 "files are skipped; symbolic links and .git are not followed; at "
	 "most 500 lines.",
	 OBJ("\"pattern\": " STR("The regular expression (POSIX extended).") ", "
	     "\"path\": " STR("A directory to search, or one file, relative to the "
			      "workspace (default: the whole workspace).") ", "
	     "\"glob\": " STR("Only the files matching this glob pattern (as for the "
			      "glob tool, relative to path; one without '/' matches "
			      "file names at any depth), e.g. *.c or src/**/*.h") ", "
	     "\"ignore_case\": {\"type\": \"boolean\", \"description\": "
	     "\"Match without regard to case (default false).\"}",
	     "\"pattern\""),
	 IMPL_HERE, tool_grep, false, false},
	{"webfetch",
	 "Fetch an http or https URL (GET, or HEAD for the response headers "
	 "only). The result starts with a line \"HTTP <status> <final URL>\", "
	 "then the content as text: HTML reduced to readable text, other text "
	 "types as they are, other types summarised by type and size. "
	 "Redirects are followed (at most 5); the text, the download and the "
	 "time are capped, and a truncated result says so. Private, loopback "
	 "and link-local addresses are refused unless the configuration "
	 "allows them; this run may be limited to some hosts.",
	 OBJ("\"url\": " STR("The absolute http or https URL to fetch.") ", "
	     "\"method\": {\"type\": \"string\", \"enum\": [\"GET\", \"HEAD\"], "
	     "\"description\": \"GET (the default) or HEAD.\"}",
	     "\"url\""),
	 IMPL_HERE, tool_webfetch, false, false},
	{"python",
	 "Run Python 3 code, or a Python file of the workspace, in the same "
	 "sandbox as bash: the working directory is the workspace ("
	 SANDBOX_WORKSPACE "), the only place it may write. Give exactly one "
	 "of code and path; args become sys.argv[1:]. stdout and stderr are "
	 "combined, the output is capped, the program is killed after a "
	 "timeout, and the result ends with the exit status, e.g. [exit 0].",
	 OBJ("\"code\": " STR("The Python program to run.") ", "
	     "\"path\": " STR("A Python file to run instead, relative to the "
			      "workspace.") ", "
	     "\"args\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}, "
	     "\"description\": \"Arguments for the program (sys.argv[1:]).\"}",
	     ""),
	 IMPL_HERE, tool_python, true, true},
	{"terminal",
	 "Run one program of an allowed set (by default ls, cat, head, tail, "
	 "wc, grep, find, sort, diff and git) directly, without a shell, in "
	 "the sandbox, with the workspace (" SANDBOX_WORKSPACE ") as the "
	 "working directory. The command is split into words as a shell "
	 "would split it (quotes work; pipes, redirection, variables and "
	 "globbing do not), or given as an array of words. A program outside "
	 "the set is refused with the list of the allowed ones. The result "
	 "ends with the exit status, e.g. [exit 0].",
	 OBJ("\"command\": {\"anyOf\": [{\"type\": \"string\"}, {\"type\": "
	     "\"array\", \"items\": {\"type\": \"string\"}, \"minItems\": 1}], "
	     "\"description\": \"The command line, e.g. git log --oneline, or "
	     "its words, e.g. [\\\"git\\\", \\\"log\\\"].\"}",
	     "\"command\""),
	 IMPL_HERE, tool_terminal, true, true},
	{"run_skill",
	 "Run one of the available skills by name, with optional arguments.",
	 OBJ("\"name\": " STR("The skill's name.") ", "
	     "\"arguments\": " STR("Arguments or task for the skill."),
	     "\"name\""),
	 IMPL_ENGINE, NULL, false, false},
	{"learn_skill",
	 "Save a new skill (a SKILL.md made of name, description and body, "
	 "plus optional other files such as scripts/run.sh) into the skill "
	 "source marked writable, so that later runs can use it. A name any "
	 "skill already has is refused. The skill always declares "
	 "allowed-tools: exactly the allowed_tools given (none by default), "
	 "each of which this run must be allowed itself: a skill cannot grant "
	 "more than the run that writes it.",
	 OBJ("\"name\": {\"type\": \"string\", \"pattern\": "
	     "\"^[a-z0-9]+(-[a-z0-9]+)*$\", \"maxLength\": 64, "
	     "\"description\": \"Skill name: lower-case letters, digits and "
	     "single hyphens.\"}, "
	     "\"description\": {\"type\": \"string\", \"maxLength\": 1024, "
	     "\"description\": \"One line saying what the skill does and "
	     "when to use it.\"}, "
	     "\"body\": " STR("The skill's instructions, in markdown.") ", "
	     "\"allowed_tools\": {\"type\": \"array\", \"items\": "
	     "{\"type\": \"string\"}, \"maxItems\": 64, \"description\": "
	     "\"The tools the skill grants, e.g. [\\\"read\\\", "
	     "\\\"Bash(git log:*)\\\"]; each must be allowed to this run. "
	     "Default: none.\"}, "
	     "\"files\": {\"type\": \"object\", \"additionalProperties\": "
	     "{\"type\": \"string\"}, \"maxProperties\": 32, "
	     "\"description\": \"Other files of the skill: a relative path "
	     "(letters, digits, . _ - and /) to its text, e.g. "
	     "{\\\"scripts/run.sh\\\": \\\"#!/bin/sh ...\\\"}. A text "
	     "starting with #! is made executable.\"}",
	     "\"name\", \"description\", \"body\""),
	 IMPL_HERE, tool_learn_skill, false, true},
	{"ask_user",
	 "Ask the person who started the run a question and wait for the "
	 "answer.",
	 OBJ("\"question\": " STR("The question to ask."), "\"question\""),
	 IMPL_ENGINE, NULL, false, false},
};

#define NDEFS (sizeof defs / sizeof defs[0])

const char *const tools_builtin[] = {
	"bash",     "read",      "edit",        "write",    "glob",
	"grep",     "webfetch",  "python",      "terminal", "run_skill",
	"learn_skill", "ask_user", NULL,
};

static const struct tool_def *find_def(const char *name)
{
	if (!name)
		return NULL;
	for (size_t i = 0; i < NDEFS; i++)
		if (strcmp(defs[i].name, name) == 0)
			return &defs[i];
	return NULL;
}

bool tools_is_builtin(const char *name)
{
	return find_def(name) != NULL;
}

json_t *tools_schema(const char *name)
{
	const struct tool_def *d = find_def(name);
	if (!d)
		return NULL;
	json_t *params = json_loads(d->parameters, 0, NULL);
	if (!params)
		return NULL;
	return json_pack("{s:s, s:{s:s, s:s, s:o}}", "type", "function",
			 "function", "name", d->name, "description",
			 d->description, "parameters", params);
}

json_t *tools_schemas(const struct strlist *names)
{
	json_t *arr = json_array();
	if (!arr)
		return NULL;
	size_t n = 0;
	if (names)
		n = names->n;
	else
		while (tools_builtin[n])
			n++;
	for (size_t i = 0; i < n; i++) {
		const char *name = names ? names->items[i] : tools_builtin[i];
		if (!tools_is_builtin(name))
			continue;
		json_t *s = tools_schema(name);
		if (!s || json_array_append_new(arr, s) < 0) {
			json_decref(arr);
			return NULL;
		}
	}
	return arr;
}

int tool_schemas_init(struct tool_schemas *ts)
{
	memset(ts, 0, sizeof *ts);
	ts->all = tools_schemas(NULL);
	size_t n = json_array_size(ts->all);
	ts->texts = ts->all ? calloc(n ? n : 1, sizeof *ts->texts) : NULL;
	if (!ts->texts) {
		tool_schemas_free(ts);
		return -1;
	}
	for (ts->n = 0; ts->n < n; ts->n++) {
		ts->texts[ts->n] = json_dumps(json_array_get(ts->all, ts->n), JSON_COMPACT);
		if (!ts->texts[ts->n]) {
			tool_schemas_free(ts);
			return -1;
		}
	}
	return 0;
}

void tool_schemas_free(struct tool_schemas *ts)
{
	for (size_t i = 0; ts->texts && i < ts->n; i++)
		free(ts->texts[i]);
	free(ts->texts);
	json_decref(ts->all);
	memset(ts, 0, sizeof *ts);
}

int tool_schemas_pick(const struct tool_schemas *ts, const struct strlist *names,
		      json_t **arr, char **text)
{
	struct buf b = { 0 };
	*arr = json_array();
	*text = NULL;
	int rc = *arr && buf_puts(&b, "[") == 0 ? 0 : -1;
	for (size_t i = 0; rc == 0 && names && i < names->n; i++) {
		for (size_t k = 0; k < ts->n; k++) {
			json_t *s = json_array_get(ts->all, k);
			const char *name = json_string_value(
				json_object_get(json_object_get(s, "function"), "name"));
			if (!name || strcmp(name, names->items[i]) != 0)
				continue;
			if (json_array_append(*arr, s) < 0 ||
			    (json_array_size(*arr) > 1 && buf_puts(&b, ",") < 0) ||
			    buf_puts(&b, ts->texts[k]) < 0)
				rc = -1;
			break;
		}
	}
	if (rc == 0 && buf_puts(&b, "]") == 0 && (*text = buf_steal(&b, NULL)))
		return 0;
	buf_free(&b);
	json_decref(*arr);
	*arr = NULL;
	return -1;
}


bool tools_has_side_effects(const char *name)
{
	const struct tool_def *d = find_def(name);
	return !d || d->side_effects;
}

bool tools_is_process(const char *name)
{
	const struct tool_def *d = find_def(name);
	return d && d->process;
}

const char *tools_unavailable_why(const char *name, const struct sandbox *sb)
{
	const struct tool_def *d = find_def(name);
	if (!d)
		return "not a built-in tool";
	if (d->process && !sandbox_usable(sb))
		return sb && sb->why ? sb->why : "no sandbox";
	if (d->fn == tool_python && !sb->python)
		return "python3 not found in the sandbox's PATH (" SANDBOX_PATH ")";
	if (d->fn == tool_terminal && !sb->commands.n)
		return sb->commands_missing.n
			       ? "none of the programs of tools.terminal.commands is found "
				 "in the sandbox's PATH (" SANDBOX_PATH ")"
			       : "tools.terminal.commands is empty";
	return NULL;
}

/* The programs of tools.terminal.commands the sandbox lacks, as one
 * warning (terminal being registered and able to run the others). */
static int warn_missing_commands(struct config *c, const struct sandbox *sb)
{
	if (!sb->commands.n || !sb->commands_missing.n ||
	    !strlist_has(&c->registered_tools, "terminal"))
		return 0;
	struct buf b = {0};
	int rc = buf_puts(&b, "tools.terminal.commands:");
	for (size_t i = 0; rc == 0 && i < sb->commands_missing.n; i++)
		rc = buf_printf(&b, " %s", sb->commands_missing.items[i]);
	if (rc == 0)
		rc = buf_printf(&b, ": not found in the sandbox's PATH (" SANDBOX_PATH
				"); terminal cannot run %s",
				sb->commands_missing.n == 1 ? "it" : "them");
	char *w = rc == 0 ? buf_steal(&b, NULL) : NULL;
	buf_free(&b);
	return w ? strlist_add_owned(&c->warnings, w) : -1;
}

int tools_probe(struct config *c, struct sandbox *sb)
{
	if (sandbox_probe(&c->tools, sb) < 0)
		return -1;
	if (tools_settle(c, sb) < 0) {
		sandbox_free(sb);
		errno = ENOMEM;
		return -1;
	}
	return 0;
}

int tools_settle(struct config *c, const struct sandbox *sb)
{
	if (sb->mode == SANDBOX_NONE &&
	    strlist_add(&c->warnings, "tools.sandbox: none: process tools (bash) run "
			"WITHOUT a sandbox, as the daemon's user, with its rights") < 0)
		goto oom;
	for (size_t i = 0; i < NDEFS; i++) {
		const char *why = tools_unavailable_why(defs[i].name, sb);
		if (!why || !strlist_has(&c->registered_tools, defs[i].name))
			continue;
		/* A process tool the machine cannot run is a warning too. */
		if (config_tool_unavailable(c, defs[i].name, why) < 0 ||
		    (defs[i].process &&
		     strlist_addf(&c->warnings, "tool '%s' is not available: %s",
				  defs[i].name, why) < 0))
			goto oom;
	}
	if (warn_missing_commands(c, sb) < 0)
		goto oom;
	return 0;
oom:
	errno = ENOMEM;
	return -1;
}

int tools_exec(const struct tool_ctx *ctx, const char *name, json_t *args,
	       struct tool_result *out)
{
	*out = (struct tool_result){0};
	struct call c = {.tool = name ? name : "(unnamed)", .ctx = ctx};
	const struct tool_def *d = find_def(name);
	json_t *empty = NULL;
	if (!d) {
		tool_fail_plain(&c, "unknown tool '%s'", c.tool);
	} else if (d->impl == IMPL_ENGINE) {
		tool_fail_plain(&c, "tool '%s' is handled by the engine, not "
			       "executed here", d->name);
	} else if (args && !json_is_object(args)) {
		tool_fail(&c, "arguments must be a JSON object");
	} else {
		if (!args)
			args = empty = json_object();
		if (!args)
			c.oom = true;
		else
			d->fn(&c, args);
	}
	json_decref(empty);
	if (!c.oom && !c.text.data && buf_puts(&c.text, "") < 0)
		c.oom = true;
	if (c.oom) {
		buf_free(&c.text);
		errno = ENOMEM;
		return -1;
	}
	out->text = tool_utf8_clean(c.text.data, c.text.len);
	out->is_error = c.is_error;
	buf_free(&c.text);
	if (!out->text) {
		errno = ENOMEM;
		return -1;
	}
	return 0;
}

void tool_result_free(struct tool_result *r)
{
	free(r->text);
	r->text = NULL;
	r->is_error = false;
}
