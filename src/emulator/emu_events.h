/*
 * emu_events: events.k8s.io/v1 Events as kube-apiserver serves them, a second view of the core
 * v1 Events. There is one storage (the core resource): an Event written through either group is
 * read, listed and watched through both, with one resourceVersion sequence, so that `kubectl
 * describe` and `kubectl get events` show what kube-scheduler records through events.k8s.io.
 *
 * The two forms differ by name only (kube-apiserver's pkg/apis/events/v1 conversion):
 *   core v1               events.k8s.io/v1
 *   involvedObject        regarding
 *   message               note
 *   reportingComponent    reportingController
 *   source                deprecatedSource
 *   firstTimestamp        deprecatedFirstTimestamp
 *   lastTimestamp         deprecatedLastTimestamp
 *   count                 deprecatedCount
 * and field selectors are mapped the same way (regarding.name -> involvedObject.name, ...).
 * A create through events.k8s.io/v1 meets the strict validation kube-apiserver applies to that
 * version (eventTime, reportingController, reportingInstance, action, reason and type required,
 * the deprecated fields unset); one through core v1 keeps the lax legacy rules.
 */
#ifndef KCSI_EMULATOR_EVENTS_H
#define KCSI_EMULATOR_EVENTS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct emu_resource;

/* True for the events.k8s.io resource, which has no storage of its own. */
bool emu_events_is_view(const struct emu_resource *r);
/* A stored core Event, in place, as events.k8s.io/v1 serves it. */
void emu_event_to_served(json_t *obj);
/*
 * An events.k8s.io/v1 body, in place, in the core form: an object, or a merge or strategic
 * merge patch (its top-level keys), or a JSON patch (an array: each op's path and from).
 */
void emu_event_to_stored(json_t *body);
/*
 * An events.k8s.io/v1 field selector in core terms (malloc'd), or NULL with
 * "field label not supported: KEY" in err.
 */
char *emu_event_fields_to_stored(const char *selector, char *err, size_t errlen);
/*
 * kube-apiserver's strict validation of an Event created through events.k8s.io/v1 (obj in that
 * form, posted in namespace req_ns): NULL when valid, else the first field at fault, with its
 * cause type (FieldValueRequired, FieldValueInvalid) and detail ("Required value", ...) written
 * out. kube-apiserver lists every fault; this names the first.
 */
const char *emu_event_create_invalid(const json_t *obj, const char *req_ns, const char **cause,
				     char *detail, size_t len);

/*
 * kube-apiserver's update rules for an Event written through events.k8s.io/v1 (old and new in
 * the core form): NULL when allowed, else the first field changed that may not be (everything
 * but the series and the metadata), with "Invalid value: ...: field is immutable" in detail.
 */
const char *emu_event_update_invalid(const json_t *old, const json_t *new, char *detail,
				     size_t len);

#endif
