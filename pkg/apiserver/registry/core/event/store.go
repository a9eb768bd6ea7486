// Package event is the registry of core/v1 events; they expire an hour after their last write.
package event

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/rayctl/rayctl/pkg/apiserver/registry"
	"github.com/rayctl/rayctl/pkg/apiserver/validation"
)

// TTLSeconds is how long an event is kept after its last write.
const TTLSeconds = 3600

func ev(o runtime.Object) *corev1.Event { return o.(*corev1.Event) }

// Resource describes core/v1 events to the shared store.
var Resource = &registry.Resource{
	Resource:       corev1.Resource("events"),
	Singular:       "event",
	Version:        "v1",
	Kind:           "Event",
	New:            func() runtime.Object { return &corev1.Event{} },
	NewList:        func() runtime.Object { return &corev1.EventList{} },
	Namespaced:     true,
	Validate:       registry.Validator(validation.ValidateEvent),
	ValidateUpdate: registry.UpdateValidator(validation.ValidateEventUpdate),
	TTL:            TTLSeconds,
	SelectableFields: map[string]func(runtime.Object) string{
		"involvedObject.kind":            func(o runtime.Object) string { return ev(o).InvolvedObject.Kind },
		"involvedObject.namespace":       func(o runtime.Object) string { return ev(o).InvolvedObject.Namespace },
		"involvedObject.name":            func(o runtime.Object) string { return ev(o).InvolvedObject.Name },
		"involvedObject.uid":             func(o runtime.Object) string { return string(ev(o).InvolvedObject.UID) },
		"involvedObject.apiVersion":      func(o runtime.Object) string { return ev(o).InvolvedObject.APIVersion },
		"involvedObject.resourceVersion": func(o runtime.Object) string { return ev(o).InvolvedObject.ResourceVersion },
		"involvedObject.fieldPath":       func(o runtime.Object) string { return ev(o).InvolvedObject.FieldPath },
		"reason":                         func(o runtime.Object) string { return ev(o).Reason },
		"reportingComponent":             func(o runtime.Object) string { return ev(o).ReportingController },
		"source":                         func(o runtime.Object) string { return ev(o).Source.Component },
		"type":                           func(o runtime.Object) string { return ev(o).Type },
	},
	ShortNames: []string{"ev"},
}
