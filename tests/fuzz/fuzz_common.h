/*
 * Shared bits of the libFuzzer harnesses: a NUL-terminated copy of the input, and the rule every
 * harness keeps (no output, no files outside /tmp, no state carried between inputs).
 */
#ifndef KCSI_FUZZ_COMMON_H
#define KCSI_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A malloc'd NUL-terminated copy of data (embedded NULs cut the string short, as C callers do). */
static inline char *fuzz_cstr(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	memcpy(s, data, size);
	s[size] = '\0';
	return s;
}

#endif
