package ctrlset

import (
	"context"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
)

// eventRecorders make the controllers' core/v1 event recorders. Their events go to the API server as
// protobuf, as kube-controller-manager's do: controller-runtime's own recorders send JSON through the
// manager's configuration, which must stay JSON for the custom resources (and events are one request in
// five of a scale run). Like controller-runtime's, the broadcaster starts with the first event and stops
// with the manager.
type eventRecorders struct {
	scheme *apiruntime.Scheme
	sink   typedcorev1.EventInterface
	logger logr.Logger

	mu          sync.Mutex
	broadcaster record.EventBroadcaster // made at the first event
	stopped     bool
}

// newEventRecorders returns recorders writing through a protobuf client made from cfg.
func newEventRecorders(cfg *rest.Config, scheme *apiruntime.Scheme, logger logr.Logger) (*eventRecorders, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = apiruntime.ContentTypeProtobuf
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &eventRecorders{scheme: scheme, sink: client.CoreV1().Events(""), logger: logger}, nil
}

// For returns a recorder whose events come from component.
func (e *eventRecorders) For(component string) record.EventRecorder {
	return &lazyRecorder{recorders: e, source: corev1.EventSource{Component: component}}
}

// start starts the broadcaster once; it returns nil after stop.
func (e *eventRecorders) start() record.EventBroadcaster {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return nil
	}
	if e.broadcaster == nil {
		e.broadcaster = record.NewBroadcaster()
		e.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: e.sink})
		e.broadcaster.StartEventWatcher(func(ev *corev1.Event) {
			e.logger.V(1).Info(ev.Message, "type", ev.Type, "object", ev.InvolvedObject, "reason", ev.Reason)
		})
	}
	return e.broadcaster
}

// Start waits for the manager to stop, then stops the broadcaster (manager.Runnable).
func (e *eventRecorders) Start(ctx context.Context) error {
	<-ctx.Done()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stopped = true
	if e.broadcaster != nil {
		e.broadcaster.Shutdown()
	}
	return nil
}

// NeedLeaderElection says the broadcaster runs (and stops) whether or not this manager leads.
func (e *eventRecorders) NeedLeaderElection() bool { return false }

// lazyRecorder starts its broadcaster at its first event.
type lazyRecorder struct {
	recorders *eventRecorders
	source    corev1.EventSource

	once sync.Once
	rec  record.EventRecorder
}

func (l *lazyRecorder) recorder() record.EventRecorder {
	l.once.Do(func() {
		if b := l.recorders.start(); b != nil {
			l.rec = b.NewRecorder(l.recorders.scheme, l.source)
		}
	})
	return l.rec
}

// Event records an event (record.EventRecorder).
func (l *lazyRecorder) Event(object apiruntime.Object, eventtype, reason, message string) {
	if r := l.recorder(); r != nil {
		r.Event(object, eventtype, reason, message)
	}
}

// Eventf records an event with a formatted message (record.EventRecorder).
func (l *lazyRecorder) Eventf(object apiruntime.Object, eventtype, reason, messageFmt string, args ...any) {
	if r := l.recorder(); r != nil {
		r.Eventf(object, eventtype, reason, messageFmt, args...)
	}
}

// AnnotatedEventf records an event with annotations (record.EventRecorder).
func (l *lazyRecorder) AnnotatedEventf(object apiruntime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any) {
	if r := l.recorder(); r != nil {
		r.AnnotatedEventf(object, annotations, eventtype, reason, messageFmt, args...)
	}
}
