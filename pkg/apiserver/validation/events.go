package validation

import (
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const (
	// eventFieldMaxLength bounds reason, action and reportingInstance.
	eventFieldMaxLength = 128
	// eventNoteMaxLength bounds the note (message) of a new-style event.
	eventNoteMaxLength = 1024
)

var supportedEventTypes = []string{corev1.EventTypeNormal, corev1.EventTypeWarning}

// validateEventNamespace checks that an event lives in the namespace of the
// object it is about; events about cluster-scoped objects may live in ""
// or "default".
func validateEventNamespace(eventNS, objectNS string, p *field.Path) field.ErrorList {
	if objectNS == "" {
		if eventNS != metav1.NamespaceNone && eventNS != metav1.NamespaceDefault {
			return field.ErrorList{field.Invalid(p, objectNS, "does not match event.namespace")}
		}
		return nil
	}
	if eventNS != objectNS {
		return field.ErrorList{field.Invalid(p, objectNS, "does not match event.namespace")}
	}
	return nil
}

// newStyleEventFields holds the fields that events created through the
// events.k8s.io API (or core events with eventTime set) must carry.
type newStyleEventFields struct {
	reportingController, reportingInstance, action, reason, eventType, note string
	series                                                                  *eventSeries
	reportingControllerPath, reportingInstancePath, notePath                *field.Path
}

type eventSeries struct {
	count    int32
	lastSeen metav1.MicroTime
}

func (e *newStyleEventFields) validate() field.ErrorList {
	var allErrs field.ErrorList
	if e.reportingController == "" {
		allErrs = append(allErrs, field.Required(e.reportingControllerPath, ""))
	} else {
		allErrs = append(allErrs, qualifiedName(e.reportingController, e.reportingControllerPath)...)
	}
	if e.reportingInstance == "" {
		allErrs = append(allErrs, field.Required(e.reportingInstancePath, ""))
	} else if len(e.reportingInstance) > eventFieldMaxLength {
		allErrs = append(allErrs, field.TooLong(e.reportingInstancePath, "", eventFieldMaxLength))
	}
	for _, f := range []struct {
		name, value string
	}{{"action", e.action}, {"reason", e.reason}} {
		if f.value == "" {
			allErrs = append(allErrs, field.Required(field.NewPath(f.name), ""))
		} else if len(f.value) > eventFieldMaxLength {
			allErrs = append(allErrs, field.TooLong(field.NewPath(f.name), "", eventFieldMaxLength))
		}
	}
	allErrs = append(allErrs, oneOf(e.eventType, field.NewPath("type"), supportedEventTypes...)...)
	if len(e.note) > eventNoteMaxLength {
		allErrs = append(allErrs, field.TooLong(e.notePath, "", eventNoteMaxLength))
	}
	if e.series != nil {
		if e.series.count < 2 {
			allErrs = append(allErrs, field.Invalid(field.NewPath("series", "count"), e.series.count, "should be at least 2"))
		}
		if e.series.lastSeen.IsZero() {
			allErrs = append(allErrs, field.Required(field.NewPath("series", "lastObservedTime"), ""))
		}
	}
	return allErrs
}

// ValidateEvent checks a core/v1 Event: metadata, that involvedObject's
// namespace matches the event's, and, for events that set eventTime (the new
// style), the reporting controller and instance, action, reason, type, note
// length and series.
func ValidateEvent(ev *corev1.Event) field.ErrorList {
	allErrs := namespacedMeta(&ev.ObjectMeta, NameIsDNSSubdomain)
	allErrs = append(allErrs, validateEventNamespace(ev.Namespace, ev.InvolvedObject.Namespace, field.NewPath("involvedObject", "namespace"))...)
	if ev.EventTime.IsZero() {
		return allErrs
	}
	nf := newStyleEventFields{
		reportingController: ev.ReportingController, reportingInstance: ev.ReportingInstance,
		action: ev.Action, reason: ev.Reason, eventType: ev.Type, note: ev.Message,
		reportingControllerPath: field.NewPath("reportingComponent"),
		reportingInstancePath:   field.NewPath("reportingInstance"),
		notePath:                field.NewPath("message"),
	}
	if ev.Series != nil {
		nf.series = &eventSeries{count: ev.Series.Count, lastSeen: ev.Series.LastObservedTime}
	}
	return append(allErrs, nf.validate()...)
}

// ValidateEventUpdate checks an update of a core/v1 Event: everything except
// count, lastTimestamp, message and series is fixed.
func ValidateEventUpdate(newEv, oldEv *corev1.Event) field.ErrorList {
	allErrs := metaUpdate(&newEv.ObjectMeta, &oldEv.ObjectMeta)
	allErrs = append(allErrs, ValidateEvent(newEv)...)
	for _, f := range []struct {
		name     string
		new, old any
	}{
		{"involvedObject", newEv.InvolvedObject, oldEv.InvolvedObject},
		{"reason", newEv.Reason, oldEv.Reason},
		{"source", newEv.Source, oldEv.Source},
		{"firstTimestamp", newEv.FirstTimestamp, oldEv.FirstTimestamp},
		{"eventTime", newEv.EventTime, oldEv.EventTime},
		{"action", newEv.Action, oldEv.Action},
		{"related", newEv.Related, oldEv.Related},
		{"reportingComponent", newEv.ReportingController, oldEv.ReportingController},
		{"reportingInstance", newEv.ReportingInstance, oldEv.ReportingInstance},
		{"type", newEv.Type, oldEv.Type},
	} {
		allErrs = append(allErrs, immutable(f.new, f.old, field.NewPath(f.name))...)
	}
	return allErrs
}

// ValidateEventsV1Event checks an events.k8s.io/v1 Event: metadata, a set
// eventTime, that regarding's namespace matches the event's, and the
// reporting controller and instance, action, reason, type, note length and
// series.
func ValidateEventsV1Event(ev *eventsv1.Event) field.ErrorList {
	allErrs := namespacedMeta(&ev.ObjectMeta, NameIsDNSSubdomain)
	if ev.EventTime.IsZero() {
		allErrs = append(allErrs, field.Required(field.NewPath("eventTime"), ""))
	}
	allErrs = append(allErrs, validateEventNamespace(ev.Namespace, ev.Regarding.Namespace, field.NewPath("regarding", "namespace"))...)
	nf := newStyleEventFields{
		reportingController: ev.ReportingController, reportingInstance: ev.ReportingInstance,
		action: ev.Action, reason: ev.Reason, eventType: ev.Type, note: ev.Note,
		reportingControllerPath: field.NewPath("reportingController"),
		reportingInstancePath:   field.NewPath("reportingInstance"),
		notePath:                field.NewPath("note"),
	}
	if ev.Series != nil {
		nf.series = &eventSeries{count: ev.Series.Count, lastSeen: ev.Series.LastObservedTime}
	}
	return append(allErrs, nf.validate()...)
}

// ValidateEventsV1EventUpdate checks an update of an events.k8s.io/v1 Event:
// everything except note, series and the deprecated counters is fixed.
func ValidateEventsV1EventUpdate(newEv, oldEv *eventsv1.Event) field.ErrorList {
	allErrs := metaUpdate(&newEv.ObjectMeta, &oldEv.ObjectMeta)
	allErrs = append(allErrs, ValidateEventsV1Event(newEv)...)
	for _, f := range []struct {
		name     string
		new, old any
	}{
		{"regarding", newEv.Regarding, oldEv.Regarding},
		{"related", newEv.Related, oldEv.Related},
		{"reason", newEv.Reason, oldEv.Reason},
		{"eventTime", newEv.EventTime, oldEv.EventTime},
		{"action", newEv.Action, oldEv.Action},
		{"reportingController", newEv.ReportingController, oldEv.ReportingController},
		{"reportingInstance", newEv.ReportingInstance, oldEv.ReportingInstance},
		{"type", newEv.Type, oldEv.Type},
	} {
		allErrs = append(allErrs, immutable(f.new, f.old, field.NewPath(f.name))...)
	}
	return allErrs
}
