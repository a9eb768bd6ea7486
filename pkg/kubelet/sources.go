package kubelet

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/rayctl/rayctl/pkg/kubelet/podenv"
)

// watchSyncTimeout is how long a read waits for a new watch's first list before it asks the API server
// directly instead.
const watchSyncTimeout = 5 * time.Second

// sources reads what pods reference for their environments and volumes. ConfigMaps and Secrets come
// from a watch of each object by name, shared by every pod worker that reads it and kept while one of
// them runs, as a real kubelet's watch-based ConfigMap and Secret managers do: a thousand pods of one
// namespace mounting kube-root-ca.crt cost one LIST and one WATCH instead of a thousand GETs, and a
// change reaches the next pod through the watch. Tokens, claims and volumes are asked for each time.
type sources struct {
	client     kubernetes.Interface
	configMaps *objectWatches
	secrets    *objectWatches
}

func newSources(client kubernetes.Interface) *sources {
	rc := client.CoreV1().RESTClient()
	return &sources{
		client:     client,
		configMaps: &objectWatches{client: rc, resource: "configmaps", example: &corev1.ConfigMap{}, items: map[types.NamespacedName]*objectWatch{}},
		secrets:    &objectWatches{client: rc, resource: "secrets", example: &corev1.Secret{}, items: map[types.NamespacedName]*objectWatch{}},
	}
}

// forPod returns the sources pod uid's worker reads through; release(uid) ends its use of them.
func (s *sources) forPod(uid types.UID) podenv.Sources { return podSources{s, uid} }

// release drops pod uid's uses of watched objects, stopping the watches no other pod uses.
func (s *sources) release(uid types.UID) {
	s.configMaps.release(uid)
	s.secrets.release(uid)
}

// stop stops every watch (the kubelet is stopping).
func (s *sources) stop() {
	s.configMaps.stopAll()
	s.secrets.stopAll()
}

// podSources are the sources of one pod's worker.
type podSources struct {
	*sources
	uid types.UID
}

// ConfigMap returns the config map from its watch; the caller must not modify it.
func (p podSources) ConfigMap(ctx context.Context, ns, name string) (*corev1.ConfigMap, error) {
	obj, err := p.configMaps.get(ctx, p.uid, ns, name)
	if errors.Is(err, errNotWatched) {
		return p.client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, err
	}
	return obj.(*corev1.ConfigMap), nil
}

// Secret returns the secret from its watch; the caller must not modify it.
func (p podSources) Secret(ctx context.Context, ns, name string) (*corev1.Secret, error) {
	obj, err := p.secrets.get(ctx, p.uid, ns, name)
	if errors.Is(err, errNotWatched) {
		return p.client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, err
	}
	return obj.(*corev1.Secret), nil
}

func (p podSources) ServiceAccountToken(ctx context.Context, ns, name string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	return p.client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, req, metav1.CreateOptions{})
}

func (p podSources) PersistentVolumeClaim(ctx context.Context, ns, name string) (*corev1.PersistentVolumeClaim, error) {
	return p.client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
}

func (p podSources) PersistentVolume(ctx context.Context, name string) (*corev1.PersistentVolume, error) {
	return p.client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
}

// errNotWatched says the object's watch could not list it (yet): read it from the API server instead,
// which gives the real answer (a node not allowed to read it is refused either way).
var errNotWatched = errors.New("the object's watch has not listed it")

// objectWatches are the watches of one resource's objects, each by namespace and name.
type objectWatches struct {
	client   cache.Getter
	resource string
	example  apiruntime.Object

	mu    sync.Mutex
	items map[types.NamespacedName]*objectWatch
}

// objectWatch is one object's watch and the pods that read it.
type objectWatch struct {
	users    map[types.UID]bool
	informer cache.SharedIndexInformer
	stop     context.CancelFunc
	// failed is set when a list or watch failed; before the first list it sends readers to the API server.
	failed atomic.Bool
}

// use registers pod uid as a reader of ns/name and returns its watch, started if it was not running.
func (o *objectWatches) use(uid types.UID, ns, name string) *objectWatch {
	key := types.NamespacedName{Namespace: ns, Name: name}
	o.mu.Lock()
	defer o.mu.Unlock()
	if w := o.items[key]; w != nil {
		w.users[uid] = true
		return w
	}
	lw := cache.NewFilteredListWatchFromClient(o.client, o.resource, ns, func(opts *metav1.ListOptions) {
		opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	})
	w := &objectWatch{users: map[types.UID]bool{uid: true}, informer: cache.NewSharedIndexInformer(lw, o.example, 0, cache.Indexers{})}
	_ = w.informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		w.failed.Store(true)
		cache.DefaultWatchErrorHandler(ctx, r, err)
	})
	ctx, stop := context.WithCancel(context.Background())
	w.stop = stop
	go w.informer.RunWithContext(ctx)
	o.items[key] = w
	return w
}

// get returns ns/name as its watch shows it, once the watch has listed it; errNotWatched when the watch
// failed or took longer than watchSyncTimeout.
func (o *objectWatches) get(ctx context.Context, uid types.UID, ns, name string) (apiruntime.Object, error) {
	w := o.use(uid, ns, name)
	deadline := time.Now().Add(watchSyncTimeout)
	for !w.informer.HasSynced() {
		if w.failed.Load() || time.Now().After(deadline) {
			return nil, errNotWatched
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	obj, ok, err := w.informer.GetStore().GetByKey(ns + "/" + name)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, apierrors.NewNotFound(corev1.Resource(o.resource), name)
	}
	return obj.(apiruntime.Object), nil
}

// release drops pod uid from every watch's readers and stops the watches left without one.
func (o *objectWatches) release(uid types.UID) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for key, w := range o.items {
		delete(w.users, uid)
		if len(w.users) == 0 {
			w.stop()
			delete(o.items, key)
		}
	}
}

// stopAll stops every watch.
func (o *objectWatches) stopAll() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for key, w := range o.items {
		w.stop()
		delete(o.items, key)
	}
}
