/* config_keys: prints every key the config parser reads
 * (config_known_keys), one per line, for the man page test
 * (tests/integration/manpages.sh). */
#include <stdio.h>

#include "config.h"
#include "strlist.h"

int main(void)
{
	struct strlist keys = { 0 };
	if (config_known_keys(&keys) < 0) {
		fprintf(stderr, "config_keys: out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < keys.n; i++)
		puts(keys.items[i]);
	strlist_free(&keys);
	return fflush(stdout) == 0 ? 0 : 1;
}
