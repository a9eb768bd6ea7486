package apiserver

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/kubernetes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericfeatures "k8s.io/apiserver/pkg/features"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage"
	cacherstorage "k8s.io/apiserver/pkg/storage/cacher"
	"k8s.io/apiserver/pkg/storage/etcd3"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/apiserver/pkg/storage/value/encrypt/identity"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/tools/cache"
)

// sharedEtcd gives every resource's storage, built-in kinds and custom resources alike, one etcd
// client: one gRPC connection, and one watch stream that carries every resource's watch. The storage
// factory of k8s.io/apiserver dials a client for each storage it makes (about forty here: each
// resource, each CRD), and each client costs its connection's goroutines and buffers on both ends,
// etcd being in this process too (kubernetes/kubernetes#111622). The etcd client is safe for
// concurrent use and multiplexes requests and watches; the stores keep their own prefixes, codecs
// and resource size estimators, so sharing it changes no request's meaning.
//
// The client is dialled by the first storage and closed when the last one is destroyed (at
// shutdown; a CRD's storage is also destroyed and remade when the CRD changes, while the built-in
// kinds' storages hold the client). etcd's health and readiness checks keep clients of their own.
type sharedEtcd struct {
	transport storagebackend.TransportConfig
	// cacheOff are the resources served without a watch cache (--watch-cache-sizes of 0).
	cacheOff map[schema.GroupResource]bool

	mu        sync.Mutex
	client    *kubernetes.Client
	compactor etcd3.Compactor
	stop      func()
	refs      int
}

// etcdDialTimeout and the keepalive figures are those k8s.io/apiserver's own etcd clients use.
const (
	etcdDialTimeout      = 20 * time.Second
	etcdKeepaliveTime    = 30 * time.Second
	etcdKeepaliveTimeout = 10 * time.Second
)

// decorator is the storage decorator for resource: with a watch cache in front of the store unless
// the resource's watch cache is off, as k8s.io/apiserver decides it for its own decorators.
func (e *sharedEtcd) decorator(resource schema.GroupResource) generic.StorageDecorator {
	cached := !e.cacheOff[resource]
	return func(config *storagebackend.ConfigForResource, resourcePrefix string, keyFunc func(obj runtime.Object) (string, error),
		newFunc, newListFunc func() runtime.Object, attrs storage.AttrFunc, triggers storage.IndexerFuncs, indexers *cache.Indexers,
	) (storage.Interface, factory.DestroyFunc, error) {
		store, destroyStore, err := e.newStore(config, newFunc, newListFunc, resourcePrefix)
		if err != nil || !cached {
			return store, destroyStore, err
		}
		cacher, err := cacherstorage.NewCacherFromConfig(cacherstorage.Config{
			Storage:             store,
			Versioner:           storage.APIObjectVersioner{},
			GroupResource:       config.GroupResource,
			EventsHistoryWindow: config.EventsHistoryWindow,
			ResourcePrefix:      resourcePrefix,
			KeyFunc:             keyFunc,
			NewFunc:             newFunc,
			NewListFunc:         newListFunc,
			GetAttrsFunc:        attrs,
			IndexerFuncs:        triggers,
			Indexers:            indexers,
			Codec:               config.Codec,
		})
		if err != nil {
			destroyStore()
			return nil, func() {}, err
		}
		delegator := cacherstorage.NewCacheDelegator(cacher, store)
		var once sync.Once
		return delegator, func() {
			once.Do(func() {
				delegator.Stop()
				cacher.Stop()
				destroyStore()
			})
		}, nil
	}
}

// newStore makes resource's etcd store on the shared client; its destroy func may be called more
// than once (subresources share their resource's storage).
func (e *sharedEtcd) newStore(config *storagebackend.ConfigForResource, newFunc, newListFunc func() runtime.Object, resourcePrefix string) (storage.Interface, factory.DestroyFunc, error) {
	client, compactor, err := e.acquire(config.CompactionInterval)
	if err != nil {
		return nil, nil, err
	}
	transformer := config.Transformer
	if transformer == nil {
		transformer = identity.NewEncryptCheckTransformer()
	}
	versioner := storage.APIObjectVersioner{}
	decoder := etcd3.NewDefaultDecoder(config.Codec, versioner)
	unsafeDelete := utilfeature.DefaultFeatureGate.Enabled(genericfeatures.AllowUnsafeMalformedObjectDeletion)
	if unsafeDelete {
		transformer = etcd3.WithCorruptObjErrorHandlingTransformer(transformer)
		decoder = etcd3.WithCorruptObjErrorHandlingDecoder(decoder)
	}
	store, err := etcd3.New(client, compactor, config.Codec, newFunc, newListFunc, config.Prefix, resourcePrefix,
		config.GroupResource, transformer, config.LeaseManagerConfig, decoder, versioner)
	if err != nil {
		e.release()
		return nil, nil, err
	}
	var once sync.Once
	destroy := func() {
		once.Do(func() {
			store.Close()
			e.release()
		})
	}
	var s storage.Interface = store
	if unsafeDelete {
		s = etcd3.NewStoreWithUnsafeCorruptObjectDeletion(s, config.GroupResource)
	}
	return s, destroy, nil
}

// acquire returns the shared client and its compactor, dialling them for the first storage.
func (e *sharedEtcd) acquire(compactInterval time.Duration) (*kubernetes.Client, etcd3.Compactor, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.client == nil {
		client, err := dialEtcd(e.transport)
		if err != nil {
			return nil, nil, err
		}
		// Latency of every request, by resource, in etcd_request_duration_seconds.
		client.KV = etcd3.NewETCDLatencyTracker(client.KV)
		e.client, e.stop = client, func() { _ = client.Close() }
		e.compactor = nil
		if compactInterval > 0 {
			compactor := etcd3.StartCompactorPerEndpoint(client.Client, compactInterval)
			e.compactor, e.stop = compactor, func() { compactor.Stop(); _ = client.Close() }
		}
	}
	e.refs++
	return e.client, e.compactor, nil
}

// release gives back what acquire handed out; the last release closes the client.
func (e *sharedEtcd) release() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.refs--; e.refs == 0 && e.client != nil {
		e.stop()
		e.client, e.compactor, e.stop = nil, nil, nil
	}
}

// dialEtcd connects to etcd over TLS as t says and waits until the connection is up.
func dialEtcd(t storagebackend.TransportConfig) (*kubernetes.Client, error) {
	tlsConfig, err := transport.TLSInfo{CertFile: t.CertFile, KeyFile: t.KeyFile, TrustedCAFile: t.TrustedCAFile}.ClientConfig()
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.New(clientv3.Config{
		Endpoints:            t.ServerList,
		TLS:                  tlsConfig,
		DialTimeout:          etcdDialTimeout,
		DialKeepAliveTime:    etcdKeepaliveTime,
		DialKeepAliveTimeout: etcdKeepaliveTimeout,
	})
	if err != nil {
		return nil, err
	}
	if err := waitConnected(client.ActiveConnection()); err != nil {
		_ = client.Close()
		return nil, err
	}
	return client, nil
}

// waitConnected waits, up to etcdDialTimeout, until conn is ready.
func waitConnected(conn *grpc.ClientConn) error {
	ctx, cancel := context.WithTimeout(context.Background(), etcdDialTimeout)
	defer cancel()
	for {
		state := conn.GetState()
		switch state {
		case connectivity.Ready:
			return nil
		case connectivity.Idle:
			conn.Connect()
		}
		if !conn.WaitForStateChange(ctx, state) {
			return fmt.Errorf("etcd connection not ready: %w", ctx.Err())
		}
	}
}

// sharedEtcdGetter is a RESTOptionsGetter whose storages use the one client of etcd.
type sharedEtcdGetter struct {
	generic.RESTOptionsGetter
	etcd *sharedEtcd
}

// GetRESTOptions implements generic.RESTOptionsGetter.
func (g sharedEtcdGetter) GetRESTOptions(resource schema.GroupResource, example runtime.Object) (generic.RESTOptions, error) {
	opts, err := g.RESTOptionsGetter.GetRESTOptions(resource, example)
	if err != nil {
		return opts, err
	}
	opts.Decorator = g.etcd.decorator(resource)
	return opts, nil
}
