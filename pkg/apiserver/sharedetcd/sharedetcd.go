// Package sharedetcd stores every resource of the API server through one etcd client. k8s.io/apiserver
// opens an etcd client per resource (its own gRPC connection, TLS handshake, goroutines and buffers on
// both ends): with ~40 resources that was ~40 connections to the embedded etcd, ~600 goroutines and a
// few MB at idle, and ~40 TLS handshakes in the start-up. Here the resources' storage shares one client
// and one connection (gRPC multiplexes every request and watch stream on it), with the same storage,
// watch cache and compaction as k8s.io/apiserver's.
//
// Each resource's storage still has its own etcd Watcher on that connection, as it had its own client
// upstream. etcd's client puts every watch whose context carries the same gRPC metadata on one watch
// stream, and k8s.io/apiserver gives all its watches and progress requests the same metadata: on one
// shared Watcher every resource's watch would be on one stream, and etcd drops a progress request
// while any watch on its stream lags, so one resource's slow watch would hold up the consistent reads
// from every other resource's watch cache (they wait for a progress notification, then fall back to
// etcd).
package sharedetcd

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	etcdclient "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/kubernetes"
	"go.uber.org/zap"
	"google.golang.org/grpc/connectivity"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/features"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage"
	cacherstorage "k8s.io/apiserver/pkg/storage/cacher"
	"k8s.io/apiserver/pkg/storage/etcd3"
	etcdfeature "k8s.io/apiserver/pkg/storage/feature"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/apiserver/pkg/storage/value/encrypt/identity"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/tools/cache"
)

// As k8s.io/apiserver's etcd clients: keep-alive, and how long the connection may take.
const (
	keepaliveTime    = 30 * time.Second
	keepaliveTimeout = 10 * time.Second
	dialTimeout      = 20 * time.Second
)

// Client is the one etcd client the resources share, opened on the first resource's storage and
// closed with the last one's.
type Client struct {
	// Logger receives the etcd client's own logs; nil discards them.
	Logger *zap.Logger

	mu            sync.Mutex
	refs          int
	client        *kubernetes.Client
	compactor     etcd3.Compactor
	stopCompactor func()
}

// Getter gives every resource that RESTOptionsGetter stores in etcd a storage on Client, cached
// (a watch cache) where RESTOptionsGetter's would have been.
type Getter struct {
	generic.RESTOptionsGetter
	Client *Client
}

// GetRESTOptions returns RESTOptionsGetter's options with the storage built on g.Client.
func (g Getter) GetRESTOptions(resource schema.GroupResource, example runtime.Object) (generic.RESTOptions, error) {
	opts, err := g.RESTOptionsGetter.GetRESTOptions(resource, example)
	if err != nil {
		return opts, err
	}
	cached := opts.Decorator != nil && !sameFunc(opts.Decorator, generic.UndecoratedStorage)
	opts.Decorator = func(config *storagebackend.ConfigForResource, prefix string, keyFunc func(obj runtime.Object) (string, error),
		newFunc, newListFunc func() runtime.Object, attrs storage.AttrFunc, trigger storage.IndexerFuncs, indexers *cache.Indexers,
	) (storage.Interface, factory.DestroyFunc, error) {
		raw, destroy, err := g.Client.storage(config, newFunc, newListFunc, prefix)
		if err != nil || !cached {
			return raw, destroy, err
		}
		// As k8s.io/apiserver's StorageWithCacher, on the shared client's storage.
		cacher, err := cacherstorage.NewCacherFromConfig(cacherstorage.Config{
			Storage:             raw,
			Versioner:           storage.APIObjectVersioner{},
			GroupResource:       config.GroupResource,
			EventsHistoryWindow: config.EventsHistoryWindow,
			ResourcePrefix:      prefix,
			KeyFunc:             keyFunc,
			NewFunc:             newFunc,
			NewListFunc:         newListFunc,
			GetAttrsFunc:        attrs,
			IndexerFuncs:        trigger,
			Indexers:            indexers,
			Codec:               config.Codec,
		})
		if err != nil {
			destroy()
			return nil, func() {}, err
		}
		delegator := cacherstorage.NewCacheDelegator(cacher, raw)
		var once sync.Once
		return delegator, func() {
			once.Do(func() {
				delegator.Stop()
				cacher.Stop()
				destroy()
			})
		}, nil
	}
	return opts, nil
}

// sameFunc reports whether two functions are the same top-level function.
func sameFunc(a, b any) bool { return reflect.ValueOf(a).Pointer() == reflect.ValueOf(b).Pointer() }

// storage is one resource's etcd storage on the shared client, as k8s.io/apiserver's etcd3 storage.
func (c *Client) storage(config *storagebackend.ConfigForResource, newFunc, newListFunc func() runtime.Object, prefix string) (storage.Interface, factory.DestroyFunc, error) {
	shared, compactor, err := c.acquire(config)
	if err != nil {
		return nil, nil, err
	}
	client := ownWatcher(shared)
	transformer := config.Transformer
	if transformer == nil {
		transformer = identity.NewEncryptCheckTransformer()
	}
	versioner := storage.APIObjectVersioner{}
	decoder := etcd3.NewDefaultDecoder(config.Codec, versioner)
	if utilfeature.DefaultFeatureGate.Enabled(features.AllowUnsafeMalformedObjectDeletion) {
		transformer = etcd3.WithCorruptObjErrorHandlingTransformer(transformer)
		decoder = etcd3.WithCorruptObjErrorHandlingDecoder(decoder)
	}
	store, err := etcd3.New(client, compactor, config.Codec, newFunc, newListFunc, config.Prefix, prefix, config.GroupResource,
		transformer, config.LeaseManagerConfig, decoder, versioner)
	if err != nil {
		client.Close()
		c.release()
		return nil, nil, err
	}
	var once sync.Once
	destroy := func() {
		once.Do(func() {
			store.Close()
			client.Close()
			c.release()
		})
	}
	// As k8s.io/apiserver's etcd3 storage: corrupt objects answer an error that allows their unsafe deletion.
	if utilfeature.DefaultFeatureGate.Enabled(features.AllowUnsafeMalformedObjectDeletion) {
		return etcd3.NewStoreWithUnsafeCorruptObjectDeletion(store, config.GroupResource), destroy, nil
	}
	return store, destroy, nil
}

// ownWatcher returns a client for one resource's storage that makes its requests on shared, but watches
// (and asks for progress) through a Watcher of its own on shared's connection, so its watch streams are
// its own. Closing it closes that Watcher only.
func ownWatcher(shared *kubernetes.Client) *kubernetes.Client {
	own := etcdclient.NewCtxClient(shared.Ctx(), etcdclient.WithZapLogger(shared.GetLogger()))
	own.KV, own.Lease, own.Watcher = shared.KV, keptLease{shared.Lease}, etcdclient.NewWatcher(shared.Client)
	own.Cluster, own.Maintenance, own.Auth = shared.Cluster, shared.Maintenance, shared.Auth
	client := &kubernetes.Client{Client: own}
	client.Kubernetes = client
	return client
}

// keptLease is the shared client's Lease, left open when a resource's client is closed.
type keptLease struct{ etcdclient.Lease }

// Close leaves the shared Lease open.
func (keptLease) Close() error { return nil }

// acquire returns the shared client (opening it, and starting compaction as config asks, the first
// time) and counts one more user.
func (c *Client) acquire(config *storagebackend.ConfigForResource) (*kubernetes.Client, etcd3.Compactor, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.client == nil {
		client, err := open(config.Transport, c.Logger)
		if err != nil {
			return nil, nil, err
		}
		c.client, c.stopCompactor = client, func() {}
		if config.CompactionInterval > 0 {
			compactor := etcd3.StartCompactorPerEndpoint(client.Client, config.CompactionInterval)
			c.compactor, c.stopCompactor = compactor, compactor.Stop
		}
		// etcd3.New checks its client's endpoints; the resources' clients have none of their own.
		etcdfeature.DefaultFeatureSupportChecker.CheckClient(client.Ctx(), client, storage.RequestWatchProgress)
	}
	c.refs++
	return c.client, c.compactor, nil
}

// release counts one user less, closing the client after the last.
func (c *Client) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.refs--; c.refs == 0 && c.client != nil {
		c.stopCompactor()
		c.client.Close()
		c.client, c.compactor = nil, nil
	}
}

// open opens an etcd client as k8s.io/apiserver does (TLS from t, keep-alive, latency tracked) and
// waits until its connection is ready.
func open(t storagebackend.TransportConfig, logger *zap.Logger) (*kubernetes.Client, error) {
	if logger == nil {
		logger = zap.NewNop()
	}
	cfg := etcdclient.Config{
		DialTimeout:          dialTimeout,
		DialKeepAliveTime:    keepaliveTime,
		DialKeepAliveTimeout: keepaliveTimeout,
		Endpoints:            t.ServerList,
		Logger:               logger,
	}
	if t.CertFile != "" || t.KeyFile != "" || t.TrustedCAFile != "" {
		tlsConfig, err := (transport.TLSInfo{CertFile: t.CertFile, KeyFile: t.KeyFile, TrustedCAFile: t.TrustedCAFile}).ClientConfig()
		if err != nil {
			return nil, err
		}
		cfg.TLS = tlsConfig
	}
	client, err := kubernetes.New(cfg)
	if err != nil {
		return nil, err
	}
	client.KV = etcd3.NewETCDLatencyTracker(client.KV)
	ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
	defer cancel()
	conn := client.ActiveConnection()
	for {
		state := conn.GetState()
		if state == connectivity.Ready {
			return client, nil
		}
		if state == connectivity.Idle {
			conn.Connect()
		}
		if !conn.WaitForStateChange(ctx, state) {
			client.Close()
			return nil, fmt.Errorf("etcd connection not ready: %w", ctx.Err())
		}
	}
}
