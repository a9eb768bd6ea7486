// Package event is the registry of events.k8s.io/v1 events; they expire an hour after their last write.
package event

import (
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"

	coreevent "github.com/rayctl/rayctl/pkg/apiserver/registry/core/event"

	"github.com/rayctl/rayctl/pkg/apiserver/registry"
	"github.com/rayctl/rayctl/pkg/apiserver/validation"
)

func ev(o runtime.Object) *eventsv1.Event { return o.(*eventsv1.Event) }

// Resource describes events.k8s.io/v1 events to the shared store.
var Resource = &registry.Resource{
	Resource:       eventsv1.Resource("events"),
	Singular:       "event",
	Version:        "v1",
	Kind:           "Event",
	New:            func() runtime.Object { return &eventsv1.Event{} },
	NewList:        func() runtime.Object { return &eventsv1.EventList{} },
	Namespaced:     true,
	Validate:       registry.Validator(validation.ValidateEventsV1Event),
	ValidateUpdate: registry.UpdateValidator(validation.ValidateEventsV1EventUpdate),
	TTL:            coreevent.TTLSeconds,
	SelectableFields: map[string]func(runtime.Object) string{
		"regarding.kind":      func(o runtime.Object) string { return ev(o).Regarding.Kind },
		"regarding.namespace": func(o runtime.Object) string { return ev(o).Regarding.Namespace },
		"regarding.name":      func(o runtime.Object) string { return ev(o).Regarding.Name },
		"regarding.uid":       func(o runtime.Object) string { return string(ev(o).Regarding.UID) },
		"reason":              func(o runtime.Object) string { return ev(o).Reason },
		"reportingController": func(o runtime.Object) string { return ev(o).ReportingController },
		"type":                func(o runtime.Object) string { return ev(o).Type },
	},
	ShortNames: []string{"ev"},
}
