#include "fingerprint.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nettle/sha2.h>

/* The bytes of a line before its path: 64 hex digits and two blanks. */
#define PATH_AT (FP_HEX_SIZE - 1 + 2)

void fp_sha256(const void *data, size_t len, unsigned char out[FP_SIZE])
{
	struct sha256_ctx ctx;
	sha256_init(&ctx);
	sha256_update(&ctx, len, data);
	sha256_digest(&ctx, FP_SIZE, out);
}

int fp_sha256_fd(int fd, unsigned char out[FP_SIZE], char *head, size_t head_max,
		 size_t *head_len)
{
	struct sha256_ctx ctx;
	unsigned char buf[65536];
	size_t kept = 0;
	sha256_init(&ctx);
	for (;;) {
		ssize_t n = read(fd, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		sha256_update(&ctx, (size_t)n, buf);
		size_t take = kept < head_max ? head_max - kept : 0;
		if (take > (size_t)n)
			take = (size_t)n;
		if (take) {
			memcpy(head + kept, buf, take);
			kept += take;
		}
	}
	sha256_digest(&ctx, FP_SIZE, out);
	if (head_len)
		*head_len = kept;
	return 0;
}

void fp_hex(const unsigned char d[FP_SIZE], char out[FP_HEX_SIZE])
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < FP_SIZE; i++) {
		out[2 * i] = digits[d[i] >> 4];
		out[2 * i + 1] = digits[d[i] & 15];
	}
	out[2 * FP_SIZE] = '\0';
}

void fp_format(const unsigned char d[FP_SIZE], char out[FP_TEXT_SIZE])
{
	memcpy(out, "sha256:", 7);
	fp_hex(d, out + 7);
}

static int cmp_line(const void *a, const void *b)
{
	return strcmp(((const struct fp_line *)a)->path, ((const struct fp_line *)b)->path);
}

void fp_digest_lines(struct fp_line *lines, size_t n, unsigned char out[FP_SIZE])
{
	struct sha256_ctx ctx;
	char hex[FP_HEX_SIZE];
	if (n > 1)
		qsort(lines, n, sizeof *lines, cmp_line);
	sha256_init(&ctx);
	for (size_t i = 0; i < n; i++) {
		fp_hex(lines[i].sha, hex);
		sha256_update(&ctx, FP_HEX_SIZE - 1, (const uint8_t *)hex);
		sha256_update(&ctx, 2, (const uint8_t *)"  ");
		sha256_update(&ctx, strlen(lines[i].path), (const uint8_t *)lines[i].path);
		sha256_update(&ctx, 1, (const uint8_t *)"\n");
	}
	sha256_digest(&ctx, FP_SIZE, out);
}

int fp_lines_text(const struct fp_line *lines, size_t n, struct strlist *out)
{
	char hex[FP_HEX_SIZE];
	for (size_t i = 0; i < n; i++) {
		fp_hex(lines[i].sha, hex);
		if (strlist_addf(out, "%s  %s", hex, lines[i].path) < 0)
			return -1;
	}
	return 0;
}

/* The path of a line of fp_lines_text ("" for a line too short). */
static const char *line_path(const char *line)
{
	return strlen(line) >= PATH_AT ? line + PATH_AT : "";
}

int fp_lines_diff(const struct strlist *was, const struct strlist *now, struct strlist *changed,
		  struct strlist *added, struct strlist *removed)
{
	size_t i = 0, k = 0;
	while (i < was->n || k < now->n) {
		int c = i == was->n ? 1 : k == now->n ? -1
			: strcmp(line_path(was->items[i]), line_path(now->items[k]));
		int rc = 0;
		if (c < 0) {
			rc = strlist_add(removed, line_path(was->items[i++]));
		} else if (c > 0) {
			rc = strlist_add(added, line_path(now->items[k++]));
		} else {
			if (strncmp(was->items[i], now->items[k], PATH_AT) != 0)
				rc = strlist_add(changed, line_path(now->items[k]));
			i++;
			k++;
		}
		if (rc < 0)
			return -1;
	}
	return 0;
}
