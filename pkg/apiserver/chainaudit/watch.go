package chainaudit

import (
	"context"
	"net/http"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/client-go/tools/cache"

	"github.com/rayctl/rayctl/pkg/chain"
)

// Watches decorates the storage getter hands the registries of the followed resources (pods, services,
// jobs, rayclusters, rayjobs, rayservices; built-in kinds and custom resources alike) so that each
// watch event the API server delivers to a client's watch is recorded in sink as a WatchDelivery: the
// object at its resourceVersion, and the watcher's identity (its user, and its User-Agent when
// WithUserAgent is in the handler chain). A watch's initial events (a watch-list's, before its
// initial-events-end bookmark) are not deliveries of a write and are left out; so are bookmarks.
//
// The delivery is recorded when the watch's HTTP handler takes the event from the watch, to encode
// and send it: one goroutine per watch of a followed resource passes the events through.
func Watches(sink chain.Sink, getter generic.RESTOptionsGetter) generic.RESTOptionsGetter {
	return watchGetter{RESTOptionsGetter: getter, sink: sink}
}

type watchGetter struct {
	generic.RESTOptionsGetter
	sink chain.Sink
}

// GetRESTOptions implements generic.RESTOptionsGetter.
func (g watchGetter) GetRESTOptions(resource schema.GroupResource, example runtime.Object) (generic.RESTOptions, error) {
	opts, err := g.RESTOptionsGetter.GetRESTOptions(resource, example)
	if err != nil || !followedRead(resource) {
		return opts, err
	}
	inner := opts.Decorator
	if inner == nil {
		inner = generic.UndecoratedStorage
	}
	kind := chain.KindOfResource(resource.Resource)
	opts.Decorator = func(config *storagebackend.ConfigForResource, prefix string, keyFunc func(obj runtime.Object) (string, error),
		newFunc, newListFunc func() runtime.Object, attrs storage.AttrFunc, trigger storage.IndexerFuncs, indexers *cache.Indexers,
	) (storage.Interface, factory.DestroyFunc, error) {
		s, destroy, err := inner(config, prefix, keyFunc, newFunc, newListFunc, attrs, trigger, indexers)
		if err != nil {
			return s, destroy, err
		}
		return deliveryStorage{Interface: s, sink: g.sink, kind: kind}, destroy, nil
	}
	return opts, nil
}

// followedRead reports whether the chain follows the lists and watches of resource (readResources).
func followedRead(resource schema.GroupResource) bool {
	for _, gr := range readResources {
		if gr.Group == resource.Group && slices.Contains(gr.Resources, resource.Resource) {
			return true
		}
	}
	return false
}

// deliveryStorage records the events its watches deliver (see Watches).
type deliveryStorage struct {
	storage.Interface
	sink chain.Sink
	kind string
}

func (s deliveryStorage) Watch(ctx context.Context, key string, opts storage.ListOptions) (watch.Interface, error) {
	w, err := s.Interface.Watch(ctx, key, opts)
	if err != nil {
		return w, err
	}
	return Deliveries(ctx, s.sink, s.kind, w, opts), nil
}

// Deliveries returns w with each event of kind the watch's handler takes from it recorded in sink
// as a WatchDelivery to the watcher of ctx (its user, and the User-Agent WithUserAgent kept), opts
// being the watch's options. A watch in a context without a user (no client's request) is w itself.
func Deliveries(ctx context.Context, sink chain.Sink, kind string, w watch.Interface, opts storage.ListOptions) watch.Interface {
	u, ok := request.UserFrom(ctx)
	if !ok {
		return w
	}
	agent, _ := ctx.Value(userAgentKey{}).(string)
	d := &deliveryWatch{
		inner: w, out: make(chan watch.Event), stop: make(chan struct{}), sink: sink, kind: kind,
		watcher:   &chain.Call{Verb: "watch", User: u.GetName(), UserAgent: agent},
		initially: opts.SendInitialEvents != nil && *opts.SendInitialEvents,
	}
	go d.loop()
	return d
}

// deliveryWatch passes inner's events through, recording each one the watch's handler takes.
type deliveryWatch struct {
	inner    watch.Interface
	out      chan watch.Event
	stop     chan struct{}
	stopOnce sync.Once
	sink     chain.Sink
	kind     string
	// watcher is the Call of every event recorded (shared: never changed once made).
	watcher *chain.Call
	// initially is true while the initial events of a watch-list stream come.
	initially bool
}

func (d *deliveryWatch) ResultChan() <-chan watch.Event { return d.out }

func (d *deliveryWatch) Stop() {
	d.stopOnce.Do(func() {
		close(d.stop)
		d.inner.Stop()
	})
}

func (d *deliveryWatch) loop() {
	defer close(d.out)
	in := d.inner.ResultChan()
	for {
		select {
		case ev, ok := <-in:
			if !ok {
				return
			}
			select {
			case d.out <- ev:
				d.record(ev)
			case <-d.stop:
				return
			}
		case <-d.stop:
			return
		}
	}
}

// record records ev's delivery, unless it is a bookmark, an error or an initial event.
func (d *deliveryWatch) record(ev watch.Event) {
	var outcome chain.Outcome
	switch ev.Type {
	case watch.Added:
		outcome = chain.Create
	case watch.Modified:
		outcome = chain.Update
	case watch.Deleted:
		outcome = chain.Delete
	case watch.Bookmark:
		if d.initially {
			if m, err := meta.Accessor(ev.Object); err == nil && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
				d.initially = false
			}
		}
		return
	default:
		return
	}
	if d.initially {
		return
	}
	m, err := meta.Accessor(ev.Object)
	if err != nil {
		return
	}
	d.sink.Record(chain.Event{
		Component: "apiserver", Hop: chain.WatchDelivery, Outcome: outcome, Call: d.watcher,
		Object: chain.Ref{Kind: d.kind, Namespace: m.GetNamespace(), Name: m.GetName(), UID: string(m.GetUID()), ResourceVersion: m.GetResourceVersion()},
	})
}

// userAgentKey is the context key of a watch request's User-Agent.
type userAgentKey struct{}

// WithUserAgent keeps the User-Agent of each watch request in its context, for the deliveries Watches
// records. It goes in the handler chain after the request's info is known (behind authentication).
func WithUserAgent(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ri, ok := request.RequestInfoFrom(r.Context()); ok && ri.Verb == "watch" {
			r = r.WithContext(context.WithValue(r.Context(), userAgentKey{}, r.UserAgent()))
		}
		h.ServeHTTP(w, r)
	})
}
