/*
 * emu_base64: base64 for Secret data, continue tokens and the kubeconfig's CA.
 */
#ifndef KCSI_EMULATOR_BASE64_H
#define KCSI_EMULATOR_BASE64_H

#include <stdbool.h>
#include <stddef.h>

/* base64: standard and padded, or URL-safe and unpadded (url); decode accepts both and
 * returns NULL on bad input. */
char *emu_base64_encode(const unsigned char *data, size_t len, bool url);
unsigned char *emu_base64_decode(const char *s, size_t *len);

#endif
