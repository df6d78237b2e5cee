#include "claudetools.h"

#include <strings.h>

#define READS CLAUDE_READS
#define GRANTED CLAUDE_GRANTED
#define NOTES CLAUDE_NOTES
#define LEGACY CLAUDE_LEGACY

/* Claude Code 2.1's documented tools (and the ones it knows under older
 * names), sorted by name. Skill is what run_skill does (a skill's text in
 * the conversation), but an allowed-tools item `Skill` grants nothing in
 * skillfs, as before: it stays a name skillfs reads as no tool. */
static const struct claude_tool table[] = {
	{"Agent", NULL, 0},
	{"AskUserQuestion", "ask_user", READS | GRANTED},
	{"Bash", "bash", READS | GRANTED},
	{"BashOutput", NULL, 0},   /* TaskOutput's older name */
	{"CronCreate", NULL, 0},
	{"CronDelete", NULL, 0},
	{"CronList", NULL, 0},
	{"Edit", "edit", READS | GRANTED},
	{"EnterPlanMode", NULL, 0},
	{"EnterWorktree", NULL, 0},
	{"ExitPlanMode", NULL, 0},
	{"ExitWorktree", NULL, 0},
	{"Glob", "glob", READS | GRANTED},
	{"Grep", "grep", READS | GRANTED},
	{"KillShell", NULL, 0},    /* TaskStop's older name */
	{"LS", NULL, LEGACY},
	{"LSP", NULL, 0},
	{"ListMcpResourcesTool", NULL, 0},
	{"Monitor", NULL, 0},
	{"MultiEdit", "edit", READS | LEGACY}, /* an Edit rule covers it */
	{"NotebookEdit", NULL, 0},
	{"NotebookRead", NULL, LEGACY},
	{"PowerShell", NULL, 0},
	{"REPL", NULL, 0},
	{"Read", "read", READS | GRANTED},
	{"ReadMcpResourceTool", NULL, 0},
	{"ReportFindings", NULL, 0},
	{"ScheduleWakeup", NULL, 0},
	{"SendMessage", NULL, 0},
	{"Skill", "run_skill", GRANTED | NOTES},
	{"SlashCommand", NULL, LEGACY},
	{"Task", NULL, 0},         /* Agent's older name */
	{"TaskCreate", NULL, NOTES},
	{"TaskGet", NULL, NOTES},
	{"TaskList", NULL, NOTES},
	{"TaskOutput", NULL, 0},
	{"TaskStop", NULL, 0},
	{"TaskUpdate", NULL, NOTES},
	{"TodoWrite", NULL, NOTES},
	{"ToolSearch", NULL, NOTES},
	{"WebFetch", "webfetch", READS | GRANTED},
	{"WebSearch", NULL, 0},
	{"Workflow", NULL, 0},
	{"Write", "write", READS | GRANTED},
};

const struct claude_tool *claude_tools(size_t *n)
{
	*n = sizeof table / sizeof *table;
	return table;
}

const struct claude_tool *claude_tool_find(const char *name)
{
	for (size_t i = 0; name && i < sizeof table / sizeof *table; i++)
		if (strcasecmp(table[i].name, name) == 0)
			return &table[i];
	return NULL;
}

const char *tool_from_claude(const char *name, bool *missing)
{
	const struct claude_tool *row = claude_tool_find(name);
	const char *tool = row && (row->flags & READS) ? row->tool : NULL;
	if (missing)
		*missing = row && !tool;
	return tool;
}
