/* libFuzzer target: the config file parser (core/config.c). Any bytes are
 * a config.yaml: config_parse either gives a config or an error message,
 * never a crash or a leak. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* config_load hands config_parse a NUL-terminated copy of the file. */
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	struct config *c = NULL;
	char *err = NULL;
	if (config_parse(text, size, "/nonexistent/fuzz/config.yaml", "/nonexistent/fuzz", &c,
			 &err) == 0) {
		/* What the engine asks of a loaded config. */
		(void)config_learn_dir(c);
		(void)config_find(c, "default");
		(void)config_tool_registered(c, "bash");
		(void)config_tool_timeout_ms(c, "bash");
		(void)config_tool_output_max(c, "bash");
		config_free(c);
	}
	free(err);
	free(text);
	return 0;
}
