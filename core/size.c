#include "size.h"

#include <stddef.h>
#include <strings.h>

static const struct {
	const char *name;
	unsigned shift;
} units[] = {
	{ "B", 0 }, { "KiB", 10 }, { "MiB", 20 }, { "GiB", 30 }, { "TiB", 40 },
};

static const char *skip_blanks(const char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	return s;
}

int size_parse(const char *text, uint64_t max, uint64_t *out)
{
	if (!text)
		return -1;
	const char *p = skip_blanks(text);
	if (*p < '0' || *p > '9')
		return -1;
	uint64_t v = 0;
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	p = skip_blanks(p);
	unsigned shift = 0;
	if (*p) {
		size_t len = 0;
		while (p[len] && p[len] != ' ' && p[len] != '\t')
			len++;
		size_t i = 0;
		while (i < sizeof units / sizeof *units &&
		       (strncasecmp(p, units[i].name, len) != 0 || units[i].name[len]))
			i++;
		if (i == sizeof units / sizeof *units)
			return -1;
		shift = units[i].shift;
		if (*skip_blanks(p + len))
			return -1;
	}
	if (v == 0 || v > (UINT64_MAX >> shift) || (v << shift) > max)
		return -1;
	*out = v << shift;
	return 0;
}
