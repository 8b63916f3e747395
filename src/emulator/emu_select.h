/*
 * emu_select: label and field selectors (parsed by kube/selector.h, one grammar for all of kcsi)
 * matched against stored JSON objects, as kube-apiserver applies them to list and watch requests.
 *
 * Label requirements read metadata.labels; field requirements read dotted paths of the whole
 * object, where a missing field reads as "" (so `spec.nodeName=` selects unscheduled pods).
 * Matching only reads the JSON it is given.
 */
#ifndef KCSI_EMULATOR_SELECT_H
#define KCSI_EMULATOR_SELECT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "kube/selector.h"

/*
 * A NULL selector matches everything.
 * labels: the object's metadata.labels (NULL or not an object means no labels).
 * obj: the whole object; field paths are looked up with dots, a missing field reads as "".
 */
bool emu_selector_match_labels(const struct kube_selector *sel, const json_t *labels);
bool emu_selector_match_fields(const struct kube_selector *sel, const json_t *obj);

/* Reads a dotted path ("spec.nodeName") as a string: "" when missing; numbers and bools as text. */
const char *emu_json_path_string(const json_t *obj, const char *path, char *tmp, size_t tmplen);

#endif
