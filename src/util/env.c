/* SPDX-License-Identifier: MIT */
#include "util/util.h"

#include <ctype.h>
#include <string.h>

size_t ve__edit_distance(const char *a, const char *b)
{
	/* Levenshtein over names of at most 63 bytes (longer ones are far). */
	size_t n = strlen(a), m = strlen(b);
	if (n > 63 || m > 63)
		return 64;
	size_t row[64];
	for (size_t j = 0; j <= m; j++)
		row[j] = j;
	for (size_t i = 1; i <= n; i++) {
		size_t diag = row[0];
		row[0] = i;
		for (size_t j = 1; j <= m; j++) {
			size_t up = row[j];
			size_t sub = diag + (toupper((unsigned char)a[i - 1]) !=
					     toupper((unsigned char)b[j - 1]));
			size_t best = VE_MIN(up + 1, row[j - 1] + 1);
			row[j] = VE_MIN(best, sub);
			diag = up;
		}
	}
	return row[m];
}

const char *ve__closest(const char *name, const char *const *list, size_t n, size_t max_dist)
{
	const char *best = NULL;
	size_t bd = max_dist + 1;
	for (size_t i = 0; i < n; i++) {
		size_t d = ve__edit_distance(name, list[i]);
		if (d < bd) {
			bd = d;
			best = list[i];
		}
	}
	return best;
}
