package sharedetcd

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"

	"github.com/rayctl/rayctl/pkg/apiserver/etcd"
)

// fixedOptions is a RESTOptionsGetter that answers opts for every resource.
type fixedOptions struct{ opts generic.RESTOptions }

func (f fixedOptions) GetRESTOptions(schema.GroupResource, runtime.Object) (generic.RESTOptions, error) {
	return f.opts, nil
}

// TestResourcesShareOneClient stores ConfigMaps through two resources' storage on a real etcd, one with
// a watch cache and one without: both read back what either wrote, the cached one's watch sees a write,
// an undecodable object answers a corrupt-object error, each watches on its own Watcher (destroying one
// ends its watches, not the other's), they hold one client between them, and it is closed with the last.
func TestResourcesShareOneClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root := t.TempDir()
	cr, err := etcd.IssueCredentials(filepath.Join(root, "pki", "etcd"), filepath.Join(root, "pki"))
	if err != nil {
		t.Fatal(err)
	}
	server, err := etcd.Start(ctx, cr.ServerConfig(etcd.Config{Dir: filepath.Join(root, "etcd")}))
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()

	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	codecs := serializer.NewCodecFactory(scheme)
	json, _ := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	config := storagebackend.NewDefaultConfig("/registry", codecs.CodecForVersions(json.Serializer, json.Serializer, corev1.SchemeGroupVersion, corev1.SchemeGroupVersion))
	config.Transport = storagebackend.TransportConfig{
		ServerList: []string{server.Endpoint}, CertFile: cr.APIServerClient.CertFile, KeyFile: cr.APIServerClient.KeyFile,
		TrustedCAFile: cr.CA.CertFile(),
	}
	gr := corev1.Resource("configmaps")
	client := &Client{}
	build := func(decorator generic.StorageDecorator, prefix string) (storage.Interface, factory.DestroyFunc) {
		t.Helper()
		opts, err := Getter{RESTOptionsGetter: fixedOptions{generic.RESTOptions{StorageConfig: config.ForResource(gr), Decorator: decorator}}, Client: client}.
			GetRESTOptions(gr, &corev1.ConfigMap{})
		if err != nil {
			t.Fatal(err)
		}
		s, destroy, err := opts.Decorator(opts.StorageConfig, prefix, func(obj runtime.Object) (string, error) {
			return storage.NamespaceKeyFunc(prefix+"/", obj)
		}, func() runtime.Object { return &corev1.ConfigMap{} }, func() runtime.Object { return &corev1.ConfigMapList{} },
			storage.DefaultNamespaceScopedAttr, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return s, destroy
	}
	cached, destroyCached := build(genericregistry.StorageWithCacher(), "/configmaps")
	raw, destroyRaw := build(generic.UndecoratedStorage, "/configmaps")
	if client.refs != 2 || client.client == nil {
		t.Fatalf("two resources' storage: %d users of the shared client (open: %v), want 2", client.refs, client.client != nil)
	}

	// The watch cache answers "(re)initializing" until its first list is in.
	var w watch.Interface
	if err := wait.PollUntilContextCancel(ctx, 5*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		w, err = cached.Watch(ctx, "/configmaps/default", storage.ListOptions{ResourceVersion: "0", Predicate: storage.Everything, Recursive: true})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("watching through the cached storage: %v", err)
	}
	defer w.Stop()
	in := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "default"}, Data: map[string]string{"k": "v"}}
	if err := raw.Create(ctx, "/configmaps/default/a", in, &corev1.ConfigMap{}, 0); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w.ResultChan():
		// The watch cache hands out its objects wrapped (with their serializations cached).
		if m, err := meta.Accessor(ev.Object); err != nil || ev.Type != watch.Added || m.GetName() != "a" {
			t.Fatalf("watch through the cached storage: %s %#v", ev.Type, ev.Object)
		}
	case <-ctx.Done():
		t.Fatal("the cached storage's watch saw nothing of a write through the other")
	}
	var out corev1.ConfigMap
	if err := cached.Get(ctx, "/configmaps/default/a", storage.GetOptions{}, &out); err != nil || out.Data["k"] != "v" {
		t.Fatalf("read back through the cached storage: %v %v", err, out.Data)
	}

	// As upstream, an object etcd holds but that does not decode answers a corrupt-object error (which
	// lets a user delete it with ignoreStoreReadErrorWithClusterBreakingPotential).
	// (Under a prefix of its own, out of the watch cache's way.)
	corrupt, destroyCorrupt := build(generic.UndecoratedStorage, "/corrupt")
	if _, err := client.client.Put(ctx, "/registry/corrupt/default/bad", "not a ConfigMap"); err != nil {
		t.Fatal(err)
	}
	if err := corrupt.Get(ctx, "/corrupt/default/bad", storage.GetOptions{}, &corev1.ConfigMap{}); !storage.IsCorruptObject(err) {
		t.Fatalf("reading an undecodable object: %v, want a corrupt-object error", err)
	}
	destroyCorrupt()

	// Each resource's storage watches on its own etcd Watcher (its own watch streams): destroying one
	// ends its watches and leaves the other's running.
	rawWatch, err := raw.Watch(ctx, "/configmaps/default", storage.ListOptions{ResourceVersion: out.ResourceVersion, Predicate: storage.Everything, Recursive: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rawWatch.Stop()
	create := func(s storage.Interface, name string) {
		t.Helper()
		obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
		if err := s.Create(ctx, "/configmaps/default/"+name, obj, &corev1.ConfigMap{}, 0); err != nil {
			t.Fatal(err)
		}
	}
	next := func(w watch.Interface, what string) (watch.Event, bool) {
		t.Helper()
		select {
		case ev, ok := <-w.ResultChan():
			return ev, ok
		case <-ctx.Done():
			t.Fatalf("%s: nothing", what)
			return watch.Event{}, false
		}
	}
	create(cached, "b")
	if ev, ok := next(rawWatch, "the raw storage's watch"); !ok || ev.Type != watch.Added {
		t.Fatalf("the raw storage's watch: %s %#v (open %v)", ev.Type, ev.Object, ok)
	}
	destroyRaw()
	if client.client == nil {
		t.Fatal("the shared client closed while a resource still uses it")
	}
	for {
		if _, ok := next(rawWatch, "the destroyed storage's watch still open"); !ok {
			break
		}
	}
	create(cached, "c")
	for _, name := range []string{"b", "c"} {
		ev, ok := next(w, "the cached storage's watch after the other storage's end")
		if m, err := meta.Accessor(ev.Object); !ok || err != nil || ev.Type != watch.Added || m.GetName() != name {
			t.Fatalf("the cached storage's watch after the other storage's end: %s %#v (open %v), want %s added", ev.Type, ev.Object, ok, name)
		}
	}
	w.Stop()
	destroyCached()
	if client.refs != 0 || client.client != nil {
		t.Fatalf("after the last resource: %d users, client open %v", client.refs, client.client != nil)
	}
}
