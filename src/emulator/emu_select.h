/*
 * emu_select: label selectors, field selectors and object-name rules, as kube-apiserver applies
 * them to list and watch requests and to object names on create.
 *
 * A selector is parsed once per request into a list of requirements that all must hold (AND).
 * Label selectors accept the full set-based grammar: `k=v`, `k==v`, `k!=v`, `k in (a,b)`,
 * `k notin (a,b)`, `k`, `!k`, `k>n`, `k<n`. Field selectors accept `path=v`, `path==v` and
 * `path!=v`, with `\` escaping `,`, `=` and `\` in values; which paths are allowed is the
 * caller's decision (emu_selector_key() lists them) because it differs per resource.
 *
 * Ownership: a struct emu_selector owns every string in it; emu_selector_free() releases it.
 * An empty selector string parses to a selector with no requirements, which matches everything.
 * Matching only reads the JSON it is given.
 */
#ifndef KCSI_EMULATOR_SELECT_H
#define KCSI_EMULATOR_SELECT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct emu_selector;

/* Parse. Return 0 and a new selector in *out, or -1 with a reason in err (*out is NULL). */
int emu_label_selector_parse(const char *s, struct emu_selector **out, char *err, size_t errlen);
int emu_field_selector_parse(const char *s, struct emu_selector **out, char *err, size_t errlen);
void emu_selector_free(struct emu_selector *sel);

/* Number of requirements and the key of requirement i (field selectors: the field path). */
size_t emu_selector_len(const struct emu_selector *sel);
const char *emu_selector_key(const struct emu_selector *sel, size_t i);

/*
 * Matching. A NULL selector matches everything.
 * labels: the object's metadata.labels (NULL or not an object means no labels).
 * obj: the whole object; field paths are looked up with dots, a missing field reads as "".
 */
bool emu_selector_match_labels(const struct emu_selector *sel, const json_t *labels);
bool emu_selector_match_fields(const struct emu_selector *sel, const json_t *obj);

/* Reads a dotted path ("spec.nodeName") as a string: "" when missing; numbers and bools as text. */
const char *emu_json_path_string(const json_t *obj, const char *path, char *tmp, size_t tmplen);

/*
 * Names. Return true when valid; otherwise false with the upstream-style reason in err
 * ("a lowercase RFC 1123 subdomain must consist of ...").
 */
bool emu_name_is_dns1123_subdomain(const char *s, char *err, size_t errlen);
bool emu_name_is_dns1123_label(const char *s, char *err, size_t errlen);

#endif
